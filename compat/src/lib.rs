//! The app both servers run in the differential tests: the same axum Router, served once by
//! `axum::serve` on hyper+tokio and once by `fibr::serve`.
//!
//! Routes (all behind `CompressionLayer`):
//!
//! | route                | what it does                                                        |
//! |----------------------|---------------------------------------------------------------------|
//! | `GET /`              | `hello`                                                             |
//! | `GET /json`          | a small JSON object                                                 |
//! | `POST /echo`         | the request body, buffered                                          |
//! | `GET /users/{id}`    | `user {id}` (`id: u64`; anything else is axum's 400)                |
//! | `GET /sse`           | 3 server-sent events, 100 ms apart (`tokio::time::sleep`)           |
//! | `GET /big`           | [`BIG_LEN`] bytes of [`big_data`], streamed in [`BIG_CHUNK`] chunks  |
//! | `GET /empty`         | 204                                                                 |
//! | `GET /notmod`        | 304 with an `etag`                                                  |
//! | `POST /chunked-echo` | the request body streamed back as it arrives                        |
//! | `GET /trailers`      | `hello world` with a `x-checksum` trailer (declared in `trailer`)   |
//! | `POST /trailer-echo` | describes the request body and its trailers                         |
//! | `GET /panic`         | the handler panics                                                  |
//! | `GET /ip`            | the peer's IP from `ConnectInfo<SocketAddr>`                        |
//! | `POST /limited`      | `got N bytes`, behind `DefaultBodyLimit::max(1024)`                 |
//! | `/files/*`           | `tower_http::services::ServeDir` over [`files_dir`]                 |

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, DefaultBodyLimit, Path, Request};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path as FsPath, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;
use tower_http::compression::CompressionLayer;
use tower_http::services::ServeDir;

mod tls;
pub use tls::{tls, ClientStream, Connector, Tls};

/// Size of `GET /big`'s body: 4 MiB.
pub const BIG_LEN: usize = 4 * 1024 * 1024;
/// Size of each chunk `GET /big` yields: 64 KiB.
pub const BIG_CHUNK: usize = 64 * 1024;
/// Events `GET /sse` sends.
pub const SSE_EVENTS: u32 = 3;
/// Delay between two events of `GET /sse`.
pub const SSE_INTERVAL: Duration = Duration::from_millis(100);
/// Body limit of `POST /limited`.
pub const LIMIT: usize = 1024;

/// The bytes `GET /big` answers: byte `i` is `i % 251` (a prime, so chunk boundaries and
/// offsets are visible in a diff).
pub fn big_data() -> &'static Bytes {
    static BIG: OnceLock<Bytes> = OnceLock::new();
    BIG.get_or_init(|| {
        (0..BIG_LEN)
            .map(|i| (i % 251) as u8)
            .collect::<Vec<u8>>()
            .into()
    })
}

/// Contents of `files_dir()/hello.txt`: 100 bytes, `0-9a-zA-Z` repeated.
pub fn hello_txt() -> Vec<u8> {
    const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    (0..100).map(|i| ALPHABET[i % ALPHABET.len()]).collect()
}

/// Contents of `files_dir()/lorem.txt`: about 20 KiB of compressible text.
pub fn lorem_txt() -> Vec<u8> {
    let mut s = String::new();
    for i in 0..400 {
        s.push_str(&format!(
            "line {i:04}: lorem ipsum dolor sit amet, consectetur adipiscing\n"
        ));
    }
    s.into_bytes()
}

/// A directory (created once per process under the system temp dir) holding `hello.txt`
/// and `lorem.txt`, served under `/files`.
pub fn files_dir() -> &'static FsPath {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        remove_stale_files_dirs();
        let dir = std::env::temp_dir().join(format!("{FILES_PREFIX}{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the files dir");
        std::fs::write(dir.join("hello.txt"), hello_txt()).expect("write hello.txt");
        std::fs::write(dir.join("lorem.txt"), lorem_txt()).expect("write lorem.txt");
        dir
    })
}

const FILES_PREFIX: &str = "fibr-compat-files-";

/// Removes the files dirs of earlier processes that are gone (where `/proc` tells).
fn remove_stale_files_dirs() {
    if !FsPath::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(FILES_PREFIX)) else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !FsPath::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The shared app, serving [`files_dir`] under `/files`.
pub fn app() -> Router {
    app_with_files(files_dir())
}

/// The shared app, serving `dir` under `/files`.
pub fn app_with_files(dir: &FsPath) -> Router {
    Router::new()
        .route("/", get(|| async { "hello" }))
        .route(
            "/json",
            get(|| async { Json(serde_json::json!({ "message": "hello", "answer": 42 })) }),
        )
        .route("/echo", post(|body: Bytes| async move { body }))
        .route(
            "/users/{id}",
            get(|Path(id): Path<u64>| async move { format!("user {id}") }),
        )
        .route("/sse", get(sse))
        .route("/big", get(big))
        .route("/empty", get(|| async { StatusCode::NO_CONTENT }))
        .route(
            "/notmod",
            get(|| async { (StatusCode::NOT_MODIFIED, [(header::ETAG, "\"v1\"")]) }),
        )
        .route("/chunked-echo", post(chunked_echo))
        .route("/trailers", get(trailers))
        .route("/trailer-echo", post(trailer_echo))
        .route("/panic", get(panics))
        .route(
            "/ip",
            get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.ip().to_string() }),
        )
        .route(
            "/limited",
            post(|body: Bytes| async move { format!("got {} bytes", body.len()) })
                .layer(DefaultBodyLimit::max(LIMIT)),
        )
        .nest_service("/files", ServeDir::new(dir))
        .layer(CompressionLayer::new())
}

/// `SSE_EVENTS` events `tick 0`, `tick 1`..., `SSE_INTERVAL` apart.
async fn sse() -> impl IntoResponse {
    let events = futures_util::stream::unfold(0u32, |n| async move {
        if n == SSE_EVENTS {
            return None;
        }
        if n > 0 {
            tokio::time::sleep(SSE_INTERVAL).await;
        }
        Some((
            Ok::<_, Infallible>(Event::default().data(format!("tick {n}"))),
            n + 1,
        ))
    });
    Sse::new(events)
}

/// `big_data()` as a stream of `BIG_CHUNK`-byte chunks (so the size is not known up front).
async fn big() -> Response {
    let chunks = (0..BIG_LEN / BIG_CHUNK)
        .map(|i| Ok::<_, Infallible>(big_data().slice(i * BIG_CHUNK..(i + 1) * BIG_CHUNK)));
    Response::builder()
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .body(Body::from_stream(futures_util::stream::iter(chunks)))
        .unwrap()
}

/// The request body, streamed back frame by frame as it arrives.
async fn chunked_echo(req: Request) -> Response {
    Body::from_stream(req.into_body().into_data_stream()).into_response()
}

/// `hello world` in two frames, then a trailers frame. The `trailer` header declares the
/// field (hyper sends only declared trailers, and only to a client that sent `te: trailers`).
async fn trailers() -> Response {
    let mut trailers = HeaderMap::new();
    trailers.insert("x-checksum", HeaderValue::from_static("abc123"));
    let frames = vec![
        Ok::<_, Infallible>(Frame::data(Bytes::from_static(b"hello "))),
        Ok(Frame::data(Bytes::from_static(b"world"))),
        Ok(Frame::trailers(trailers)),
    ];
    Response::builder()
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .header(header::TRAILER, "x-checksum")
        .body(Body::new(StreamBody::new(futures_util::stream::iter(
            frames,
        ))))
        .unwrap()
}

/// Collects the request body with its trailers: `body=<body>` then one `trailer <name>:
/// <value>` line per trailer field, sorted.
async fn trailer_echo(body: Body) -> Response {
    let collected = match body.collect().await {
        Ok(c) => c,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("body error: {e}")).into_response(),
    };
    let mut lines = Vec::new();
    if let Some(t) = collected.trailers() {
        for (name, value) in t {
            lines.push(format!(
                "trailer {}: {}",
                name,
                String::from_utf8_lossy(value.as_bytes())
            ));
        }
    }
    lines.sort();
    let body = collected.to_bytes();
    let mut out = format!("body={}\n", String::from_utf8_lossy(&body));
    for l in lines {
        out.push_str(&l);
        out.push('\n');
    }
    out.into_response()
}

async fn panics() -> &'static str {
    panic!("the /panic handler panics on purpose")
}

/// Serves `app` with `axum::serve` on hyper and the current tokio runtime, on an ephemeral
/// port of 127.0.0.1. The server task runs until the runtime shuts down.
pub async fn start_axum(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a tokio listener");
    let addr = listener.local_addr().expect("local_addr");
    if let Some(tls) = tls() {
        tls::serve_axum_tls(listener, tls, move |_| app.clone());
        return addr;
    }
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("axum::serve failed: {e}");
        }
    });
    addr
}

/// [`start_axum`] with `into_make_service_with_connect_info::<SocketAddr>()`.
pub async fn start_axum_with_connect_info(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a tokio listener");
    let addr = listener.local_addr().expect("local_addr");
    if let Some(tls) = tls() {
        tls::serve_axum_tls(listener, tls, move |peer| {
            app.clone().layer(axum::Extension(ConnectInfo(peer)))
        });
        return addr;
    }
    tokio::spawn(async move {
        let make = app.into_make_service_with_connect_info::<SocketAddr>();
        if let Err(e) = axum::serve(listener, make).await {
            eprintln!("axum::serve failed: {e}");
        }
    });
    addr
}

/// Serves `app` with `fibr::serve` on fibr's default runtime, on an ephemeral port of
/// 127.0.0.1. The serve future is spawned with `fibr::spawn` and runs for the rest of the
/// process.
///
/// The binding happens in `fibr::run` on a fresh thread, outside any tokio runtime: the
/// first use of fibr's default runtime decides which tokio runtime its workers enter, and a
/// test's `#[tokio::test]` runtime (dropped when that test ends) must not be it.
pub fn start_fibr(app: Router) -> SocketAddr {
    spawn_fibr(app)
}

/// [`start_fibr`] with `into_make_service_with_connect_info::<SocketAddr>()`.
pub fn start_fibr_with_connect_info(app: Router) -> SocketAddr {
    spawn_fibr(app.into_make_service_with_connect_info::<SocketAddr>())
}

fn spawn_fibr<M, Marker>(app: M) -> SocketAddr
where
    M: fibr::http::MakeService<Marker>,
    Marker: 'static,
    fibr::http::Server<M, Marker>: fibr::Handler,
{
    std::thread::spawn(move || {
        fibr::run(async move {
            let listener = fibr::net::TcpListener::bind("127.0.0.1:0").await?;
            let addr = listener.local_addr()?;
            fibr::spawn(async move {
                let serve = fibr::serve(listener, app);
                let serve = match tls() {
                    Some(tls) => serve.with_tls(tls.server.clone()),
                    None => serve,
                };
                if let Err(e) = serve.await {
                    eprintln!("fibr::serve failed: {e}");
                }
            });
            Ok::<_, std::io::Error>(addr)
        })
    })
    .join()
    .expect("the fibr start thread panicked")
    .expect("bind a fibr listener")
}
