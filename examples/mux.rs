//! Several protocols on one port with `fibr::mux::Mux`: HTTP/1.1, h2c, HTTPS and a SOCKS5
//! proxy, told apart by what each client sends first.
//!
//! ```sh
//! cargo run --release --example mux --features proxy,tls
//! TLS_CERT=cert.pem TLS_KEY=key.pem cargo run --release --example mux --features proxy,tls
//! ```
//!
//! listens on 127.0.0.1:`PORT` (env, default 8080):
//!
//! - `curl http://127.0.0.1:8080/` (HTTP/1.1) and
//!   `curl --http2-prior-knowledge http://127.0.0.1:8080/` (h2c) reach the app;
//! - with `TLS_CERT` and `TLS_KEY` (PEM files: a certificate chain and its key),
//!   `curl https://localhost:8080/` does too, over h2 or HTTP/1.1 by ALPN;
//! - `curl --socks5 127.0.0.1:8080 http://example.com/` goes through the SOCKS5 proxy.
//!   Like `examples/proxy`, it takes only clients on this host and refuses targets on
//!   loopback, private and other special ranges, unless `PROXY_ALLOW_ALL=1` makes it an
//!   open relay (for local testing).

mod common;

use axum::routing::get;
use axum::Router;
use fibr::mux::{Matcher, Mux};
use fibr::proxy::{ProxyConfig, Rules};
use fibr::tls::TlsServer;
use fibr::{Binding, Config, Engine};
use std::sync::Arc;

// pub: tests/examples.rs runs it.
pub fn main() -> std::io::Result<()> {
    let port = common::port("PORT", 8080)?;
    let app = Router::new().route(
        "/",
        get(|version: http::Version| async move { format!("hello over {version:?}\n") }),
    );
    let http = Arc::new(fibr::http::Server::new(app));

    let rules = if std::env::var("PROXY_ALLOW_ALL").is_ok_and(|v| v == "1") {
        Rules::allow_all()
    } else {
        let local = |net: &str| net.parse().expect("a network");
        Rules::new()
            .allow_clients(local("127.0.0.0/8"))
            .allow_clients(local("::1"))
    };
    let socks = fibr::proxy::Server::new(ProxyConfig::new(rules));

    let mut mux = Mux::new();
    let tls = common::tls_from_env()?;
    let https = tls.is_some();
    if let Some(tls) = tls {
        // A TlsServer uses its config as it is: the ALPN list is what HTTPS offers.
        let mut tls = Arc::unwrap_or_clone(tls);
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        mux = mux.route(Matcher::tls(), TlsServer::new(Arc::new(tls), http.clone()));
    }
    let mux = mux
        .route(Matcher::http1(), http.clone())
        .route(Matcher::h2c(), http)
        .route(Matcher::socks5(), socks);

    let engine = Engine::new(Config::default(), [Binding::tcp(("127.0.0.1", port), mux)])?;
    let protocols = if https { "HTTPS, HTTP/1.1" } else { "HTTP/1.1" };
    eprintln!(
        "{protocols}, h2c and SOCKS5 on {}",
        engine.binding_addrs(0)[0]
    );
    engine.run()
}
