//! The routes every HTTP server in the compare bench serves (`examples/bench_server.rs`),
//! shared with `benches/router_cost.rs`, which measures what this `Router` costs per
//! request on its own.

use axum::body::{Body, Bytes};
use axum::extract::Path;
use axum::routing::{get, post};
use axum::{Json, Router};
use std::convert::Infallible;

/// Every route but `/ws`.
pub fn http_routes() -> Router {
    Router::new()
        .route("/", get(|| async { "hello" }))
        .route("/echo", post(|body: axum::body::Bytes| async move { body }))
        .route(
            "/json",
            get(|| async { Json(serde_json::json!({ "message": "hello", "from": "bench" })) }),
        )
        .route(
            "/bytes/{n}",
            get(|Path(n): Path<usize>| async move { bytes(n) }),
        )
}

/// `GET /bytes/{n}`'s chunks: slices of one static buffer, no allocation per chunk (as
/// `benches/peers`' `bytes_chunks`, which the quinn peer serves).
const BYTES_CHUNK: usize = 64 * 1024;
static ZEROS: [u8; BYTES_CHUNK] = [0; BYTES_CHUNK];

/// `n` bytes, streamed in chunks of at most [`BYTES_CHUNK`].
fn bytes(n: usize) -> Body {
    let chunks = (0..n)
        .step_by(BYTES_CHUNK)
        .map(move |at| Ok::<_, Infallible>(Bytes::from_static(&ZEROS[..BYTES_CHUNK.min(n - at)])));
    Body::from_stream(futures_util::stream::iter(chunks))
}
