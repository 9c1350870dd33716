//! The example app: an axum Router served by fibr (the README's main command).
//!
//! `cargo run --release --example hello` listens on 127.0.0.1:3000 (`PORT` overrides).
//! With `--features tls` and `TLS_CERT` / `TLS_KEY` set to PEM files (a certificate chain
//! and its private key) it serves HTTPS on the same port, and with `--features http3` also
//! HTTP/3 on that port over UDP (advertised by `Alt-Svc`).

mod common;

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
    let port = common::port("PORT", 3000)?;
    let tls = common::tls_from_env()?;
    fibr::run(async move {
        let listener = fibr::net::TcpListener::bind(("127.0.0.1", port)).await?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        eprintln!(
            "serving the example app on {scheme}://{}",
            listener.local_addr()?
        );
        // With axum on tokio this line would be `axum::serve(listener, app()).await`.
        let serve = fibr::serve(listener, app());
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
