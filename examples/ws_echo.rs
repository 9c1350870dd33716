//! A WebSocket echo server on fibr's own WebSocket (`fibr::ws`), as an axum handler: the
//! server the Autobahn testsuite's `fuzzingclient` checks (`.ci/autobahn`).
//!
//! `cargo run --release --example ws_echo --features axum,ws` listens on 127.0.0.1:9001
//! (`PORT` overrides) and echoes every text and binary message on any path (`/ws`
//! included), with permessage-deflate when the client offers it.
//!
//! With `TLS_CERT` and `TLS_KEY` (PEM files; features `tls`, `http3`) the port serves
//! wss: over HTTP/1.1 and HTTP/2 (RFC 8441) by ALPN, and over HTTP/3 (RFC 9220) on the
//! same UDP port.

mod common;

use axum::routing::any;
use axum::Router;
use fibr::ws::{DeflateConfig, Message, WebSocket, WebSocketUpgrade};

/// Every text and binary message back, until the close.
async fn echo(mut socket: WebSocket) {
    while let Some(Ok(msg)) = socket.recv().await {
        if matches!(msg, Message::Text(_) | Message::Binary(_)) && socket.send(msg).await.is_err() {
            return;
        }
    }
}

fn app() -> Router {
    let upgrade =
        |ws: WebSocketUpgrade| async move { ws.deflate(DeflateConfig::default()).on_upgrade(echo) };
    Router::new()
        .route("/", any(upgrade))
        .route("/{*path}", any(upgrade))
}

pub fn main() -> std::io::Result<()> {
    let port = common::port("PORT", 9001)?;
    let tls = common::tls_from_env()?;
    fibr::run(async move {
        let listener = fibr::net::TcpListener::bind(("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        let serve = fibr::serve(listener, app());
        match tls {
            None => {
                eprintln!("WebSocket echo on ws://{addr}");
                serve.await
            }
            Some(tls) => serve_tls(serve, tls, addr).await,
        }
    })
}

/// wss over HTTP/1.1 and h2 by ALPN, and over HTTP/3 where built in.
#[cfg(feature = "tls")]
async fn serve_tls(
    serve: fibr::http::Serve<Router>,
    tls: common::TlsConfig,
    addr: std::net::SocketAddr,
) -> std::io::Result<()> {
    let serve = serve.with_tls(tls);
    #[cfg(feature = "http3")]
    let serve = serve.with_http3();
    eprintln!("WebSocket echo (wss over HTTP/1.1, h2 and h3) on {addr}");
    serve.await
}

#[cfg(not(feature = "tls"))]
async fn serve_tls(
    _: fibr::http::Serve<Router>,
    tls: common::TlsConfig,
    _: std::net::SocketAddr,
) -> std::io::Result<()> {
    match tls {}
}
