//! The example app: an axum Router served by fibr (the README's main command).
//!
//! `cargo run --release --example hello` listens on 127.0.0.1:3000 (`PORT` overrides).

use axum::extract::Path;
use axum::response::sse::{Event, Sse};
use axum::routing::{get, post};
use axum::{Json, Router};
use std::convert::Infallible;
use std::time::Duration;
use tower_http::compression::CompressionLayer;
use tower_http::trace::TraceLayer;

/// The app, as it would be written for `axum::serve`.
fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "hello" }))
        .route(
            "/json",
            get(|| async { Json(serde_json::json!({ "message": "hello", "from": "fibr" })) }),
        )
        .route("/echo", post(|body: axum::body::Bytes| async move { body }))
        .route(
            "/users/{id}",
            get(|Path(id): Path<u64>| async move { format!("user {id}") }),
        )
        .route("/sse", get(sse))
        .layer(CompressionLayer::new())
        .layer(TraceLayer::new_for_http())
}

/// Five server-sent events, one every 200 ms: each reaches the client as it is produced.
async fn sse() -> Sse<impl futures_util::Stream<Item = Result<Event, Infallible>>> {
    let events = futures_util::stream::unfold(0u32, |n| async move {
        if n == 5 {
            return None;
        }
        if n > 0 {
            fibr::time::sleep(Duration::from_millis(200)).await;
        }
        Some((Ok(Event::default().data(format!("tick {n}"))), n + 1))
    });
    Sse::new(events)
}

fn main() -> std::io::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let port = std::env::var("PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(3000u16);
    fibr::run(async move {
        let listener = fibr::net::TcpListener::bind(("127.0.0.1", port)).await?;
        eprintln!(
            "serving the example app on http://{}",
            listener.local_addr()?
        );
        // With axum on tokio this line would be `axum::serve(listener, app()).await`.
        fibr::serve(listener, app()).await
    })
}
