//! The reverse proxy axum users write (axum's `reverse-proxy` example): a `Router` whose
//! fallback sends every request on through hyper-util's pooled legacy client (HTTP/1.1,
//! keep-alive), on `axum::serve`. The peer of `benches/gateway.rs`.
//!
//! `BENCH_UPSTREAM=127.0.0.1:9000 BENCH_WORKERS=1 axum_gateway 0`

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::uri::Uri;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::io;

type Client = hyper_util::client::legacy::Client<HttpConnector, Body>;

#[derive(Clone)]
struct Upstream {
    client: Client,
    authority: String,
}

async fn forward(State(up): State<Upstream>, mut req: Request) -> Result<Response, StatusCode> {
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    *req.uri_mut() = Uri::try_from(format!("http://{}{path}", up.authority))
        .map_err(|_| StatusCode::BAD_REQUEST)?;
    Ok(up
        .client
        .request(req)
        .await
        .map_err(|_| StatusCode::BAD_GATEWAY)?
        .into_response())
}

fn main() -> io::Result<()> {
    let (addr, workers) = fibr_bench_peers::args("axum_gateway")?;
    let authority = std::env::var("BENCH_UPSTREAM").map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "BENCH_UPSTREAM=host:port is required",
        )
    })?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("bench-axum-gateway")
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .build(HttpConnector::new());
        let app = Router::new()
            .fallback(forward)
            .with_state(Upstream { client, authority });
        let listener = tokio::net::TcpListener::bind(addr).await?;
        eprintln!(
            "axum gateway ({workers} workers) listening on {}",
            listener.local_addr()?
        );
        axum::serve(listener, app).await
    })
}
