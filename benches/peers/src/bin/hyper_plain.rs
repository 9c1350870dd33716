//! Plain hyper 1 on tokio, without axum: the same routes as `examples/bench_server.rs`,
//! matched by hand, so the bench separates axum's routing cost from hyper's.
//!
//! `BENCH_WORKERS=1 hyper_plain 0` — a tokio multi-thread runtime with that many workers
//! (as `bench_server axum` runs), one `hyper::server::conn::http1` connection task per
//! accepted socket.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::io;

fn response(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(body));
    *res.status_mut() = status;
    if !content_type.is_empty() {
        res.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    res
}

async fn route(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(match (req.method(), req.uri().path()) {
        (&Method::GET, "/") => response(
            StatusCode::OK,
            "text/plain; charset=utf-8",
            Bytes::from_static(fibr_bench_peers::HELLO.as_bytes()),
        ),
        (&Method::POST, "/echo") => match req.into_body().collect().await {
            Ok(body) => response(StatusCode::OK, "application/octet-stream", body.to_bytes()),
            Err(_) => response(StatusCode::BAD_REQUEST, "", Bytes::new()),
        },
        (&Method::GET, "/json") => response(
            StatusCode::OK,
            "application/json",
            Bytes::from(fibr_bench_peers::json_body()),
        ),
        (_, "/" | "/echo" | "/json") => response(StatusCode::METHOD_NOT_ALLOWED, "", Bytes::new()),
        _ => response(StatusCode::NOT_FOUND, "", Bytes::new()),
    })
}

fn main() -> io::Result<()> {
    let (addr, workers) = fibr_bench_peers::args("hyper_plain")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("bench-hyper")
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        eprintln!(
            "hyper ({workers} workers) listening on {}",
            listener.local_addr()?
        );
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(conn) => conn,
                // EMFILE and the like: skip this one, as axum::serve does (after a pause).
                Err(_) => {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            };
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), hyper::service::service_fn(route))
                    .await;
            });
        }
    })
}
