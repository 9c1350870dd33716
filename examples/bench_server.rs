//! fibr and axum in `benches/compare.rs` (and the server of `benches/client.rs`): one axum
//! `Router`, served either by fibr or by
//! `axum::serve` on tokio, with the same number of worker threads.
//!
//! ```sh
//! cargo run --release --example bench_server -- fibr 3000
//! cargo run --release --example bench_server -- axum 3001
//! BENCH_WORKERS=2 cargo run --release --example bench_server -- fibr 0   # 0: a free port
//! ```
//!
//! Routes: `GET /` answers `hello`, `POST /echo` answers the request body, `GET /json`
//! answers a small JSON object, and `GET /ws` is axum's WebSocket echo (`WebSocketUpgrade`,
//! every text or binary message sent back). `BENCH_WORKERS` (default 1) sets the worker
//! threads: fibr runs one event loop and that many workers, tokio a multi-thread runtime
//! with that many workers. Once listening, the server prints `<name> listening on <addr>`
//! on stderr.
//!
//! On fibr, `/ws` needs fibr's features `axum` (the upgrade request is handed to hyper,
//! which alone makes axum's `OnUpgrade`) and `tokio` (axum's `on_upgrade` calls
//! `tokio::spawn`: the echo task runs on fibr's background tokio runtime, one worker, over
//! fibr's I/O). The benches build it so:
//! `cargo build --release --example bench_server --features axum,tokio`; without them,
//! fibr answers `/ws` with an error and the other routes as usual.

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::routing::{get, post};
use axum::{Json, Router};
use std::io;
use std::net::SocketAddr;

/// The app both servers run, without layers.
fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "hello" }))
        .route("/echo", post(|body: axum::body::Bytes| async move { body }))
        .route(
            "/json",
            get(|| async { Json(serde_json::json!({ "message": "hello", "from": "bench" })) }),
        )
        .route(
            "/ws",
            get(|ws: WebSocketUpgrade| async move { ws.on_upgrade(echo) }),
        )
}

/// axum's WebSocket echo: every text or binary message back, until a Close.
async fn echo(mut socket: WebSocket) {
    while let Some(Ok(msg)) = socket.recv().await {
        match msg {
            // axum answers pings itself.
            Message::Ping(_) | Message::Pong(_) => continue,
            Message::Close(_) => break,
            msg => {
                if socket.send(msg).await.is_err() {
                    return;
                }
            }
        }
    }
    // Flushes the close reply queued when the client's Close arrived.
    let _ = futures_util::SinkExt::close(&mut socket).await;
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

fn main() -> io::Result<()> {
    let mut args = std::env::args().skip(1);
    let usage = || invalid("usage: bench_server fibr|axum PORT".to_string());
    let which = args.next().ok_or_else(usage)?;
    let port: u16 = match args.next() {
        Some(p) => p
            .parse()
            .map_err(|e| invalid(format!("bad port {p:?}: {e}")))?,
        None => return Err(usage()),
    };
    let workers: usize = match std::env::var("BENCH_WORKERS") {
        Ok(w) => w
            .parse()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| invalid(format!("bad BENCH_WORKERS {w:?}")))?,
        Err(_) => 1,
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    match which.as_str() {
        "fibr" => serve_fibr(addr, workers),
        "axum" => serve_axum(addr, workers),
        other => Err(invalid(format!("unknown server {other:?}; fibr or axum"))),
    }
}

/// `fibr::serve` on an engine of one event loop and `workers` workers.
fn serve_fibr(addr: SocketAddr, workers: usize) -> io::Result<()> {
    let config = fibr::Config::default()
        .with_workers(workers)
        .with_event_loops(1)
        .with_thread_name("bench-fibr");
    let engine = fibr::Engine::new(config, [])?;
    engine.block_on(async move {
        let listener = fibr::net::TcpListener::bind(addr).await?;
        eprintln!(
            "fibr ({workers} workers) listening on {}",
            listener.local_addr()?
        );
        fibr::serve(listener, app()).await
    })
}

/// `axum::serve` on a tokio multi-thread runtime with `workers` workers.
fn serve_axum(addr: SocketAddr, workers: usize) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("bench-tokio")
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        eprintln!(
            "axum ({workers} workers) listening on {}",
            listener.local_addr()?
        );
        axum::serve(listener, app()).await
    })
}
