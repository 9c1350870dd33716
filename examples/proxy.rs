//! SOCKS5, SOCKS4/4a, HTTP CONNECT and http:// forwarding on one port: `cargo run
//! --release --features proxy --example proxy` listens on 127.0.0.1:`PORT` (env, default
//! 1080).
//!
//! With `TLS_CERT` and `TLS_KEY` (PEM files; feature `tls`) the port is an HTTPS proxy
//! instead: CONNECT (tunnels) and http:// forwarding over HTTP/1.1 and HTTP/2 by ALPN,
//! and (feature `http3`) over HTTP/3 on the same UDP port, under the same rules. fibr's
//! client takes it as `Proxy::all("https://localhost:PORT")` (its tunnels as CONNECT
//! streams of one HTTP/2 connection).
//!
//! Safe by default: only clients on this host may use it, and targets on loopback,
//! private and other special ranges are refused. `PROXY_ALLOW_ALL=1` makes it an open
//! relay (for local testing: it then reaches this host's and the LAN's services too).
//! `PROXY_USER` and `PROXY_PASSWORD` together require those credentials. `WORKERS` (env)
//! sets the worker threads (default: one per core); `cargo bench --bench proxy` runs it
//! with one.

mod common;

use fibr::proxy::{ProxyConfig, Rules, Server};
use fibr::{Binding, Config, Engine};
use std::io;

pub fn main() -> io::Result<()> {
    let port = common::port("PORT", 1080)?;
    let open = std::env::var("PROXY_ALLOW_ALL").is_ok_and(|v| v == "1");
    let mut rules = if open {
        Rules::allow_all()
    } else {
        let local = |net: &str| net.parse().expect("a network");
        Rules::new()
            .allow_clients(local("127.0.0.0/8"))
            .allow_clients(local("::1"))
    };
    if let (Ok(user), Ok(password)) = (std::env::var("PROXY_USER"), std::env::var("PROXY_PASSWORD"))
    {
        rules = rules.require_auth(move |u, p| u == user && p == password);
    }
    let workers: usize = match std::env::var("WORKERS") {
        Ok(w) => w.parse().map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad WORKERS {w:?}: {e}"),
            )
        })?,
        Err(_) => 0,
    };
    if let Some(tls) = common::tls_from_env()? {
        return serve_https(port, ProxyConfig::new(rules), tls);
    }
    let proxy = Server::new(ProxyConfig::new(rules));
    let engine = Engine::new(
        Config::default().with_workers(workers),
        [Binding::tcp(("127.0.0.1", port), proxy)],
    )?;
    eprintln!(
        "SOCKS5/4/4a and HTTP (CONNECT, forwarding) proxy{} listening on {}",
        if open {
            " (open relay: PROXY_ALLOW_ALL=1)"
        } else {
            ""
        },
        engine.binding_addrs(0)[0],
    );
    engine.run()
}

/// CONNECT and forwarding over HTTPS (HTTP/1.1 and h2 by ALPN) and HTTP/3.
#[cfg(feature = "tls")]
fn serve_https(port: u16, config: ProxyConfig, tls: common::TlsConfig) -> io::Result<()> {
    fibr::run(async move {
        let listener = fibr::net::TcpListener::bind(("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        let make = fibr::proxy::MakeForward::new(std::sync::Arc::new(config));
        let serve = fibr::serve(listener, make).with_tls(tls);
        #[cfg(feature = "http3")]
        let serve = serve.with_http3();
        eprintln!("HTTPS proxy (CONNECT over HTTP/1.1, h2 and h3; forwarding) on {addr}");
        serve.await
    })
}

#[cfg(not(feature = "tls"))]
fn serve_https(_: u16, _: ProxyConfig, tls: common::TlsConfig) -> io::Result<()> {
    match tls {}
}
