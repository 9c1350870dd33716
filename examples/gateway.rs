//! A reverse proxy in front of one or more upstreams: `cargo run --release --features
//! client --example gateway` listens on 127.0.0.1:`PORT` (default 8080) and forwards every
//! request to `UPSTREAM` (default `http://127.0.0.1:9000`; several, comma-separated, are
//! balanced; `h2c://host:port` speaks HTTP/2 to that one). `BALANCE=least` picks the
//! upstream with the fewest requests in flight instead of taking turns. With `tls` and
//! `TLS_CERT` / `TLS_KEY` it serves HTTPS (h2 and HTTP/1.1 by ALPN), and with `http3`
//! HTTP/3 too, on the same port (`--features client,http3,ws`: WebSockets then pass over
//! HTTP/1.1 on TLS, h2 and h3 alike).
//!
//! The gateway is an axum service like any other: here it is the app's fallback, beside a
//! route of the gateway's own.

mod common;

use axum::routing::get;
use axum::Router;
use fibr::gateway::{Balance, Config, Gateway, Upstream};
use std::io;
use std::net::SocketAddr;

pub fn main() -> io::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let port = common::port("PORT", 8080)?;
    let tls = common::tls_from_env()?;
    let invalid =
        |e: &dyn std::fmt::Display| io::Error::new(io::ErrorKind::InvalidInput, e.to_string());
    let upstreams = std::env::var("UPSTREAM").unwrap_or_else(|_| "http://127.0.0.1:9000".into());
    let upstreams = upstreams
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(Upstream::parse)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(&e))?;
    let balance = match std::env::var("BALANCE").as_deref() {
        Ok("least") => Balance::LeastOutstanding,
        _ => Balance::RoundRobin,
    };
    let gateway = Gateway::new(upstreams, Config::default().with_balance(balance))
        .map_err(|e| invalid(&e))?;
    let app = Router::new()
        .route("/.gateway/health", get(|| async { "ok\n" }))
        .fallback_service(gateway);
    fibr::run(async move {
        let listener = fibr::net::TcpListener::bind(("127.0.0.1", port)).await?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        eprintln!("gateway on {scheme}://{}", listener.local_addr()?);
        // The client's address reaches the gateway's X-Forwarded-For through ConnectInfo.
        let serve = fibr::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        );
        #[cfg(all(feature = "tls", not(feature = "http3")))]
        let serve = match tls {
            Some(tls) => serve.with_tls(tls),
            None => serve,
        };
        #[cfg(feature = "http3")]
        let serve = match tls {
            Some(tls) => serve.with_tls(tls).with_http3(),
            None => serve,
        };
        serve.await
    })
}
