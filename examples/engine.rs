//! One `Engine`, several bindings, each its own handler and port: an axum app over HTTP,
//! the same app over HTTPS and HTTP/3, and a raw TCP echo handler.
//!
//! ```sh
//! cargo run --release --example engine --features http3
//! TLS_CERT=cert.pem TLS_KEY=key.pem cargo run --release --example engine --features http3
//! ```
//!
//! listens on 127.0.0.1:
//!
//! - `HTTP_PORT` (env, default 8000): HTTP/1.1 and h2c, `fibr::http::Server` as a handler;
//! - `ECHO_PORT` (env, default 7007): a `Handler` that sends back what it reads
//!   (`nc 127.0.0.1 7007`);
//! - `HTTPS_PORT` (env, default 8443), with `TLS_CERT` and `TLS_KEY` (PEM files: a
//!   certificate chain and its key): the server under `TlsServer` on TCP (h2 or HTTP/1.1
//!   by ALPN) and its HTTP/3 endpoint on UDP, the same port number. Nothing advertises
//!   it (`serve(..).with_http3()` adds `Alt-Svc`; a bare binding does not), so a client
//!   must know: `curl --http3-only`, or fibr's client with `http3_prior_knowledge`.
//!
//! Each binding's address is printed once it is bound (a port of 0 picks a free one).

mod common;

use axum::routing::get;
use axum::Router;
use fibr::tls::TlsServer;
use fibr::{Binding, Config, Conn, Engine, Handler};
use std::sync::Arc;

/// Raw TCP: each read is sent back as it is.
struct Echo;

impl Handler for Echo {
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        let _ = conn.send(data);
    }
}

// pub: tests/examples.rs runs it.
pub fn main() -> std::io::Result<()> {
    let app = Router::new().route(
        "/",
        get(|version: http::Version| async move { format!("hello over {version:?}\n") }),
    );
    // One server (one app, one set of limits) behind the HTTP, HTTPS and HTTP/3 bindings.
    let http = Arc::new(fibr::http::Server::new(app));
    let engine = Engine::new(
        Config::default(),
        [
            Binding::tcp(
                ("127.0.0.1", common::port("HTTP_PORT", 8000)?),
                http.clone(),
            ),
            Binding::tcp(("127.0.0.1", common::port("ECHO_PORT", 7007)?), Echo),
        ],
    )?;
    eprintln!("http on {}", engine.binding_addrs(0)[0]);
    eprintln!("echo on {}", engine.binding_addrs(1)[0]);

    if let Some(tls) = common::tls_from_env()? {
        let h3 = http.http3(tls.clone())?;
        // A TlsServer uses its config as it is: the ALPN list is what HTTPS offers.
        let mut tls = Arc::unwrap_or_clone(tls);
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let https = engine.add_binding(Binding::tcp(
            ("127.0.0.1", common::port("HTTPS_PORT", 8443)?),
            TlsServer::new(Arc::new(tls), http),
        ))?;
        let addr = engine.binding_addrs(https)[0];
        // HTTP/3 on the port the TCP binding got (the same one, unless it was 0).
        let quic = engine.add_binding(Binding::udp(addr, h3))?;
        eprintln!("https on {addr}");
        eprintln!("http3 on {}", engine.binding_addrs(quic)[0]);
    }
    engine.run()
}
