//! A WebSocket echo server on fibr's own WebSocket (`fibr::ws`), as an axum handler: the
//! server the Autobahn testsuite's `fuzzingclient` checks (`.ci/autobahn`).
//!
//! `cargo run --release --example ws_echo --features axum,ws` listens on 127.0.0.1:9001
//! (`PORT` overrides) and echoes every text and binary message on any path, with
//! permessage-deflate when the client offers it.

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

fn main() -> std::io::Result<()> {
    let port = std::env::var("PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(9001u16);
    fibr::run(async move {
        let listener = fibr::net::TcpListener::bind(("127.0.0.1", port)).await?;
        eprintln!("WebSocket echo on ws://{}", listener.local_addr()?);
        fibr::serve(listener, app()).await
    })
}
