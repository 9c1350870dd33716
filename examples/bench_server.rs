//! fibr and axum in `benches/compare.rs` (and the server of `benches/client.rs`): one axum
//! `Router`, served either by fibr or by
//! `axum::serve` on tokio, with the same number of worker threads.
//!
//! ```sh
//! cargo run --release --example bench_server -- fibr 3000
//! cargo run --release --example bench_server -- axum 3001
//! BENCH_WORKERS=2 cargo run --release --example bench_server -- fibr 0   # 0: a free port
//! cargo run --release --example bench_server --features axum,ws -- fibr-ws 3002
//! ```
//!
//! Routes: `GET /` answers `hello`, `POST /echo` answers the request body, `GET /json`
//! answers a small JSON object, `GET /bytes/{n}` answers `n` bytes, and `GET /ws` is axum's WebSocket echo (`WebSocketUpgrade`,
//! every text or binary message sent back). `fibr-ws` is `fibr` with `/ws` on fibr's own
//! WebSocket instead (`fibr::ws::WebSocketUpgrade`, features `axum,ws`; the same echo,
//! permessage-deflate negotiated when the client offers it, with `DeflateConfig::default()`:
//! no context takeover either way). `BENCH_WORKERS` (default 1) sets the worker
//! threads: fibr runs one event loop and that many workers, tokio a multi-thread runtime
//! with that many workers. Once listening, the server prints `<name> listening on <addr>`
//! on stderr.
//!
//! On fibr, `/ws` needs fibr's features `axum` (the upgrade request is handed to hyper,
//! which alone makes axum's `OnUpgrade`) and `tokio` (axum's `on_upgrade` calls
//! `tokio::spawn`: the echo task runs on fibr's background tokio runtime, one worker, over
//! fibr's I/O). The benches build it so:
//! `cargo build --release --example bench_server --features axum,tokio,tls,ws`; without
//! `axum,tokio`, fibr answers `/ws` with an error and the other routes as usual.
//!
//! HTTPS (feature `tls`): with `BENCH_TLS_CERT` and `BENCH_TLS_KEY` set (PEM files: the
//! certificate chain and its private key), both serve HTTPS on the port instead, with the
//! same rustls `ServerConfig` (`benches/support/tls_config.rs`: the ring provider, TLS 1.2 and 1.3, ALPN
//! `http/1.1`, stateless session tickets, as `fibr::serve(..).with_tls(..)` fills in for a
//! config without them):
//!
//! - fibr: `fibr::serve(listener, app).with_tls(config)`;
//! - axum: what axum-server does for rustls: an accept loop on tokio's `TcpListener`, a
//!   task per connection that runs tokio-rustls's `TlsAcceptor` handshake and then serves
//!   the same `Router` with hyper-util's `auto` connection builder (the one `axum::serve`
//!   uses; HTTP/1 with the default ALPN `http/1.1`), upgrades on.
//!
//! `BENCH_TLS_ALPN=h2,http/1.1` offers HTTP/2 over TLS as well: fibr serves h2 when ALPN
//! picks it, hyper-util's `auto` builder on seeing the HTTP/2 preface. Without TLS both
//! answer h2c by prior knowledge beside HTTP/1.1 (fibr's default; for axum, hyper-util's
//! `auto` builder with its `http2` feature, which the dev-dependencies enable).
//!
//! ```sh
//! BENCH_TLS_CERT=cert.pem BENCH_TLS_KEY=key.pem \
//!     cargo run --release --example bench_server --features axum,tokio,tls -- fibr 3443
//! ```
//!
//! `BENCH_HTTP3=1` with TLS (feature `http3`): fibr serves HTTP/3 too, on UDP at the same
//! address and port (`fibr::serve(listener, app).with_tls(config).with_http3()`): the fibr
//! side of the HTTP/3 scenarios, whose other side is axum's `Router` on quinn + h3-quinn
//! (`benches/peers`' `h3_quinn`). Its load is `GET /`, and `GET /bytes/{n}`, which streams
//! `n` bytes in 64 KiB slices of one static buffer (the download).
//!
//! `BENCH_STATIC_DIR=DIR` adds the files under `DIR` at `/static/`: `fibr::fs::ServeDir` in
//! the fibr modes, tower-http's `ServeDir` in mode `axum` (`benches/files.rs`).
//!
//! `BENCH_GRPC=1 bench_server fibr PORT` serves the gRPC example's `fibr.example.Echo`
//! (`examples/grpc/echo.rs`, in a `tonic::service::Routes` of its own) instead of the
//! `Router`, with `fibr::serve` on the same engine: the fibr side of the gRPC scenario,
//! whose other side is tonic's own server with the same service (`benches/peers`'
//! `tonic_grpc`).

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
#[path = "common/bench_routes.rs"]
mod bench_routes;
use axum::routing::get;
use axum::Router;
use bench_routes::http_routes;
use std::io;
use std::net::SocketAddr;

/// The app both servers run, without layers.
fn app() -> Router {
    http_routes().route(
        "/ws",
        get(|ws: WebSocketUpgrade| async move { ws.on_upgrade(echo) }),
    )
}

/// [`app`] with `/ws` on fibr's own WebSocket (mode `fibr-ws`).
#[cfg(all(feature = "axum", feature = "ws"))]
fn native_ws_app() -> Router {
    use fibr::ws::{DeflateConfig, Message, WebSocket, WebSocketUpgrade};
    /// The same echo as [`echo`], on `fibr::ws` (which answers pings itself too).
    async fn native_echo(mut socket: WebSocket) {
        while let Some(Ok(msg)) = socket.recv().await {
            match msg {
                Message::Text(_) | Message::Binary(_) => {
                    if socket.send(msg).await.is_err() {
                        return;
                    }
                }
                Message::Ping(_) | Message::Pong(_) => {}
                Message::Close(_) => break,
            }
        }
    }
    http_routes().route(
        "/ws",
        get(|ws: WebSocketUpgrade| async move {
            ws.deflate(DeflateConfig::default()).on_upgrade(native_echo)
        }),
    )
}

/// The app of mode `which`, with the files under `BENCH_STATIC_DIR` at `/static` when it
/// is set: fibr's `fibr::fs::ServeDir` in the fibr modes, tower-http's `ServeDir` (on
/// tokio's blocking pool) in mode `axum`.
fn app_for(which: &str) -> io::Result<Router> {
    let app = routes_for(which)?;
    let Some(dir) = std::env::var_os("BENCH_STATIC_DIR") else {
        return Ok(app);
    };
    Ok(match which {
        "axum" => app.nest_service("/static", tower_http::services::ServeDir::new(dir)),
        _ => app.nest_service("/static", fibr::fs::ServeDir::new(dir)),
    })
}

/// The routes of mode `which`.
fn routes_for(which: &str) -> io::Result<Router> {
    match which {
        "fibr" | "axum" => Ok(app()),
        #[cfg(all(feature = "axum", feature = "ws"))]
        "fibr-ws" => Ok(native_ws_app()),
        #[cfg(not(all(feature = "axum", feature = "ws")))]
        "fibr-ws" => Err(invalid(
            "fibr-ws needs bench_server built with features `axum,ws`".into(),
        )),
        other => Err(invalid(format!(
            "unknown server {other:?}; fibr, fibr-ws or axum"
        ))),
    }
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
    let usage = || invalid("usage: bench_server fibr|fibr-ws|axum PORT".to_string());
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
    let app = app_for(&which)?;
    #[cfg(feature = "tls")]
    if let Some(config) = tls::from_env()? {
        return match which.as_str() {
            "axum" => tls::serve_axum(addr, workers, config, app),
            _ => tls::serve_fibr(addr, workers, config, app),
        };
    }
    #[cfg(not(feature = "tls"))]
    if std::env::var_os("BENCH_TLS_CERT").is_some() {
        return Err(invalid(
            "BENCH_TLS_CERT is set, but bench_server was built without feature `tls`".into(),
        ));
    }
    if std::env::var_os("BENCH_GRPC").is_some() {
        return match which.as_str() {
            "fibr" => serve_fibr_grpc(addr, workers),
            other => Err(invalid(format!(
                "BENCH_GRPC: {other:?} serves no gRPC; fibr"
            ))),
        };
    }
    match which.as_str() {
        "axum" => serve_axum(addr, workers, app),
        _ => serve_fibr(addr, workers, app),
    }
}

/// The engine every fibr mode runs on: one event loop and `workers` workers.
fn fibr_engine(workers: usize) -> io::Result<fibr::Engine> {
    let config = fibr::Config::default()
        .with_workers(workers)
        .with_event_loops(1)
        .with_thread_name("bench-fibr");
    fibr::Engine::new(config, [])
}

/// `fibr::serve` of `app` on [`fibr_engine`].
fn serve_fibr(addr: SocketAddr, workers: usize, app: Router) -> io::Result<()> {
    fibr_engine(workers)?.block_on(async move {
        let listener = fibr::net::TcpListener::bind(addr).await?;
        eprintln!(
            "fibr ({workers} workers) listening on {}",
            listener.local_addr()?
        );
        fibr::serve(listener, app).await
    })
}

#[path = "grpc/codec.rs"]
mod codec;
#[path = "grpc/echo.rs"]
mod echo;

/// `ServerStream`'s pacing (`grpc/echo.rs` asks its includer for a timer).
async fn sleep(d: std::time::Duration) {
    fibr::time::sleep(d).await
}

/// The gRPC example's Echo (alone in its `Routes`) by `fibr::serve` on [`fibr_engine`].
fn serve_fibr_grpc(addr: SocketAddr, workers: usize) -> io::Result<()> {
    fibr_engine(workers)?.block_on(async move {
        let listener = fibr::net::TcpListener::bind(addr).await?;
        eprintln!(
            "fibr ({workers} workers, gRPC) listening on {}",
            listener.local_addr()?
        );
        fibr::serve(listener, tonic::service::Routes::new(echo::Echo)).await
    })
}

/// The tokio runtime every axum mode runs on: multi-thread, `workers` workers.
fn tokio_runtime(workers: usize) -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("bench-tokio")
        .enable_all()
        .build()
}

/// `axum::serve` of `app` on [`tokio_runtime`].
fn serve_axum(addr: SocketAddr, workers: usize, app: Router) -> io::Result<()> {
    tokio_runtime(workers)?.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        eprintln!(
            "axum ({workers} workers) listening on {}",
            listener.local_addr()?
        );
        axum::serve(listener, app).await
    })
}

#[cfg(feature = "tls")]
#[path = "../benches/support/tls_config.rs"]
mod tls_config;

/// HTTPS: the same `Router`, behind TLS on rustls (ring provider) in both servers.
#[cfg(feature = "tls")]
mod tls {
    use super::{fibr_engine, tokio_runtime, Router};
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto;
    use hyper_util::service::TowerToHyperService;
    use rustls::ServerConfig;
    use std::io;
    use std::net::SocketAddr;
    use std::sync::Arc;

    /// The benches' shared config (`benches/support/tls_config.rs`), if
    /// `BENCH_TLS_CERT` and `BENCH_TLS_KEY` are set.
    pub fn from_env() -> io::Result<Option<Arc<ServerConfig>>> {
        Ok(super::tls_config::from_env()?.map(Arc::new))
    }

    /// `fibr::serve(listener, app).with_tls(config)` on [`fibr_engine`].
    pub fn serve_fibr(
        addr: SocketAddr,
        workers: usize,
        config: Arc<ServerConfig>,
        app: Router,
    ) -> io::Result<()> {
        fibr_engine(workers)?.block_on(async move {
            let listener = fibr::net::TcpListener::bind(addr).await?;
            let local = listener.local_addr()?;
            let serve = fibr::serve(listener, app).with_tls(config);
            let (serve, how) = match std::env::var_os("BENCH_HTTP3") {
                #[cfg(feature = "http3")]
                Some(_) => (serve.with_http3(), "tls, http3"),
                #[cfg(not(feature = "http3"))]
                Some(_) => {
                    return Err(super::invalid(
                        "BENCH_HTTP3 is set, but bench_server was built without feature \
                         `http3`"
                            .into(),
                    ))
                }
                None => (serve, "tls"),
            };
            eprintln!("fibr ({workers} workers, {how}) listening on {local}");
            serve.await
        })
    }

    /// The axum `Router` on hyper-util + tokio-rustls, as axum-server serves rustls: an
    /// accept loop, then per connection a task that completes the handshake and serves the
    /// connection with hyper-util's `auto` builder (as `axum::serve`), upgrades on.
    pub fn serve_axum(
        addr: SocketAddr,
        workers: usize,
        config: Arc<ServerConfig>,
        app: Router,
    ) -> io::Result<()> {
        tokio_runtime(workers)?.block_on(async move {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            eprintln!(
                "axum ({workers} workers, tokio-rustls) listening on {}",
                listener.local_addr()?
            );
            let acceptor = tokio_rustls::TlsAcceptor::from(config);
            loop {
                // As axum::serve: an accept error (EMFILE and the like) is waited out.
                let tcp = match listener.accept().await {
                    Ok((tcp, _)) => tcp,
                    Err(_) => {
                        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let service = TowerToHyperService::new(app.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let _ = auto::Builder::new(TokioExecutor::new())
                        .serve_connection_with_upgrades(TokioIo::new(tls), service)
                        .await;
                });
            }
        })
    }
}
