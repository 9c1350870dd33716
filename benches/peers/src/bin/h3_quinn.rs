//! HTTP/3 as users serve it today: an axum `Router` behind h3 on quinn + h3-quinn, on a
//! tokio multi-thread runtime. The quinn peer of `cargo bench --bench compare`'s HTTP/3
//! scenarios (issue 15); fibr's side is `examples/bench_server.rs fibr` with `BENCH_HTTP3=1`.
//!
//! `BENCH_WORKERS=1 BENCH_TLS_CERT=cert.pem BENCH_TLS_KEY=key.pem h3_quinn 0` — a quinn
//! endpoint on UDP 127.0.0.1:PORT with the benches' rustls config (ring provider,
//! `fibr_bench_peers::tls_config`), ALPN `h3`, and the QUIC limits fibr's `Http3Config`
//! defaults to (30 s idle timeout, 100 concurrent requests per connection, migration off),
//! so that both servers make the same promises to the client. A task per connection
//! accepts requests (h3's `server::Connection`), and a task per request calls the `Router`:
//! the request body streamed from h3 into axum's `Body`, the response body's frames sent to
//! h3 as they come (what the h3 and axum examples do).
//!
//! Routes: `GET /` → `hello`, `POST /echo` → the body, `GET /json`, and `GET /bytes/{n}` →
//! `n` bytes (`fibr_bench_peers::bytes_chunks`), the same as `bench_server`'s.

use axum::body::Body;
use axum::extract::Path;
use axum::routing::{get, post};
use axum::Router;
use bytes::{Buf, Bytes};
use http::Request;
use http_body_util::BodyExt;
use std::convert::Infallible;
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;

type H3Conn = h3::server::Connection<h3_quinn::Connection, Bytes>;
type H3Stream = h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The routes `examples/bench_server.rs` serves, as an axum `Router`.
fn app() -> Router {
    Router::new()
        .route("/", get(|| async { fibr_bench_peers::HELLO }))
        .route("/echo", post(|body: Bytes| async move { body }))
        .route(
            "/json",
            get(|| async {
                (
                    [(http::header::CONTENT_TYPE, "application/json")],
                    fibr_bench_peers::json_body(),
                )
            }),
        )
        .route(
            "/bytes/{n}",
            get(|Path(n): Path<usize>| async move {
                let chunks = fibr_bench_peers::bytes_chunks(n).map(Ok::<_, Infallible>);
                Body::from_stream(futures_util::stream::iter(chunks))
            }),
        )
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// The QUIC server config: the benches' TLS config with ALPN `h3`, fibr's QUIC limits.
fn server_config() -> io::Result<quinn::ServerConfig> {
    let mut tls = fibr_bench_peers::tls_config::from_env()?
        .ok_or_else(|| invalid("h3_quinn needs BENCH_TLS_CERT and BENCH_TLS_KEY".into()))?;
    tls.alpn_protocols = vec![b"h3".to_vec()];
    // quinn takes 0 (no 0-RTT, as fibr) or u32::MAX.
    tls.max_early_data_size = 0;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)
        .map_err(|e| invalid(format!("QUIC TLS config: {e}")))?;
    let mut transport = quinn::TransportConfig::default();
    transport
        .max_idle_timeout(Some(
            quinn::IdleTimeout::try_from(Duration::from_secs(30)).expect("30 s fits"),
        ))
        .max_concurrent_bidi_streams(100u32.into())
        .max_concurrent_uni_streams(8u32.into());
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    server
        .transport_config(Arc::new(transport))
        .migration(false);
    Ok(server)
}

fn main() -> io::Result<()> {
    let (addr, workers) = fibr_bench_peers::args("h3_quinn")?;
    let config = server_config()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("bench-quinn")
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let endpoint = quinn::Endpoint::server(config, addr)?;
        eprintln!(
            "quinn ({workers} workers, h3-quinn, axum Router) listening on {}",
            endpoint.local_addr()?
        );
        let app = app();
        while let Some(incoming) = endpoint.accept().await {
            let app = app.clone();
            tokio::spawn(async move {
                if let Ok(conn) = incoming.await {
                    serve_connection(conn, app).await;
                }
            });
        }
        Ok(())
    })
}

/// Accepts the connection's requests, each in a task of its own, until it closes.
async fn serve_connection(conn: quinn::Connection, app: Router) {
    let Ok(mut h3): Result<H3Conn, _> =
        h3::server::Connection::new(h3_quinn::Connection::new(conn)).await
    else {
        return;
    };
    while let Ok(Some(resolver)) = h3.accept().await {
        let app = app.clone();
        tokio::spawn(async move {
            if let Ok((req, stream)) = resolver.resolve_request().await {
                let _ = serve_request(req, stream, app).await;
            }
        });
    }
}

/// One request through the `Router`: its body read from h3 as axum's handler asks for it,
/// the response's head, data and trailers written to h3 as the body yields them.
async fn serve_request(req: Request<()>, stream: H3Stream, app: Router) -> Result<(), BoxError> {
    let (mut send, recv) = stream.split();
    let body = futures_util::stream::unfold(recv, |mut recv| async move {
        match recv.recv_data().await {
            Ok(Some(mut buf)) => Some((Ok(buf.copy_to_bytes(buf.remaining())), recv)),
            Ok(None) => None,
            Err(e) => Some((Err(e), recv)),
        }
    });
    let req = req.map(|()| Body::from_stream(body));
    let resp = app.oneshot(req).await?;
    let (parts, mut body) = resp.into_parts();
    send.send_response(http::Response::from_parts(parts, ()))
        .await?;
    while let Some(frame) = body.frame().await {
        match frame?.into_data() {
            Ok(data) => send.send_data(data).await?,
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    send.send_trailers(trailers).await?;
                }
            }
        }
    }
    send.finish().await?;
    Ok(())
}
