//! Apps shaped like axum's own examples (tokio-rs/axum `examples/` at axum 0.8:
//! `static-file-server`, `sse`, `chat`, `multipart-form`, `reverse-proxy`), written as they
//! are there, served by `fibr::serve` on tokio's listener with fibr's default features, and
//! driven by real clients (curl, tungstenite). `graceful-shutdown` and `http-proxy` are in
//! `tests/axum_examples.rs`, `unix-domain-socket` in `tests/one_line_swap.rs`.

mod common;

use axum::routing::get;
use axum::Router;
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

/// Serves `app` as the examples do, `axum::serve` swapped for `fibr::serve`, inside a
/// tokio runtime of its own; the address.
fn serve(app: Router) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                fibr::serve(listener, app).await.unwrap();
            })
    });
    rx.recv_timeout(Duration::from_secs(5)).unwrap()
}

/// curl with `args`: (stdout, stderr), asserting it succeeded.
fn curl(args: &[&str]) -> (String, String) {
    common::require_tool("curl", "curl");
    let out = Command::new("curl")
        .args(["-sS", "--fail", "--max-time", "20"])
        .args(args)
        .output()
        .unwrap();
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    let (stdout, stderr) = (text(out.stdout), text(out.stderr));
    assert!(out.status.success(), "curl {args:?}: {stderr}");
    (stdout, stderr)
}

/// A directory of files, removed when dropped.
struct Dir(std::path::PathBuf);

impl Dir {
    fn new(files: &[(&str, &[u8])]) -> Dir {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("fibr-apps-{}-{n}", std::process::id()));
        for (name, data) in files {
            let path = dir.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, data).unwrap();
        }
        Dir(dir)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `static-file-server`: `ServeDir` nested and as the fallback, with a `ServeFile` for
/// what is not found, and ranges, conditional requests and precompressed files as
/// tower-http serves them.
#[test]
fn static_file_server() {
    use tower_http::services::{ServeDir, ServeFile};
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let dir = Dir::new(&[
        ("assets/index.html", b"<h1>index</h1>"),
        ("assets/script.js", b"console.log('hi')"),
        ("assets/big.bin", &big),
    ]);
    let assets = dir.0.join("assets");
    let serve_dir =
        ServeDir::new(&assets).not_found_service(ServeFile::new(assets.join("index.html")));
    let app = Router::new()
        .route("/foo", get(|| async { "Hi from /foo" }))
        .nest_service("/assets", serve_dir.clone())
        .fallback_service(serve_dir);
    let addr = serve(app);
    let url = |p: &str| format!("http://{addr}{p}");
    assert_eq!(curl(&[&url("/foo")]).0, "Hi from /foo");
    assert_eq!(curl(&[&url("/assets/script.js")]).0, "console.log('hi')");
    assert_eq!(curl(&[&url("/script.js")]).0, "console.log('hi')");
    // Not found: the fallback file, with tower-http's 404.
    let r = common::Client::connect(addr).get("/assets/nope");
    assert_eq!((r.status, r.text().as_str()), (404, "<h1>index</h1>"));
    // The whole large file, and a range of it.
    let out = common::TempPath::new("apps-big", "bin");
    curl(&["-o", out.path().to_str().unwrap(), &url("/assets/big.bin")]);
    assert_eq!(std::fs::read(out.path()).unwrap(), big);
    let mut c = common::Client::connect(addr);
    c.send(b"GET /assets/big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=1000-1009\r\n\r\n");
    let r = c.response();
    assert_eq!((r.status, &r.body[..]), (206, &big[1000..1010]));
    let (etagged, _) = curl(&["-sI", &url("/assets/script.js")]);
    let modified = etagged
        .lines()
        .find_map(|l| l.strip_prefix("last-modified: "))
        .expect("last-modified")
        .trim()
        .to_string();
    let (head, _) = curl(&[
        "-i",
        "-H",
        &format!("If-Modified-Since: {modified}"),
        &url("/assets/script.js"),
    ]);
    assert!(head.starts_with("HTTP/1.1 304"), "{head}");
}

/// `sse`: events with keep-alive comments, each reaching the client as it is produced,
/// not when the stream ends.
#[test]
fn sse_events_arrive_as_produced() {
    use axum::response::sse::{Event, KeepAlive, Sse};
    use futures_util::stream::{self, Stream};
    use std::convert::Infallible;
    async fn sse_handler() -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
        let stream = stream::unfold(0u32, |n| async move {
            if n > 0 {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Some((Ok(Event::default().data(format!("hi {n}"))), n + 1))
        });
        Sse::new(stream).keep_alive(KeepAlive::default())
    }
    let addr = serve(Router::new().route("/sse", get(sse_handler)));
    let mut c = common::connect(addr);
    use std::io::{BufRead, BufReader, Write};
    c.write_all(b"GET /sse HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let started = Instant::now();
    let mut lines = BufReader::new(c).lines();
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let line = lines.next().unwrap().unwrap();
        if let Some(data) = line.strip_prefix("data: ") {
            seen.push((data.to_string(), started.elapsed()));
        }
    }
    assert_eq!(
        seen.iter().map(|(d, _)| d.as_str()).collect::<Vec<_>>(),
        ["hi 0", "hi 1", "hi 2"]
    );
    // The first came at once, the third after two pauses: streamed, not buffered.
    assert!(seen[0].1 < Duration::from_millis(250), "{seen:?}");
    assert!(seen[2].1 >= Duration::from_millis(550), "{seen:?}");
}

/// `chat`: a WebSocket chat room on a broadcast channel; every user sees who joins and
/// what the others say.
#[test]
fn chat_room_over_axums_websocket() {
    use axum::extract::ws::{Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
    use axum::extract::State;
    use axum::response::IntoResponse;
    use futures_util::{SinkExt, StreamExt};
    use std::collections::HashSet;
    use std::sync::{Arc, Mutex};
    use tokio::sync::broadcast;

    struct AppState {
        user_set: Mutex<HashSet<String>>,
        tx: broadcast::Sender<String>,
    }

    async fn websocket_handler(
        ws: WebSocketUpgrade,
        State(state): State<Arc<AppState>>,
    ) -> impl IntoResponse {
        ws.on_upgrade(|socket| websocket(socket, state))
    }

    async fn websocket(stream: WebSocket, state: Arc<AppState>) {
        let (mut sender, mut receiver) = stream.split();
        let mut username = String::new();
        while let Some(Ok(message)) = receiver.next().await {
            if let Message::Text(name) = message {
                if state.user_set.lock().unwrap().insert(name.to_string()) {
                    username = name.to_string();
                    break;
                }
                let _ = sender
                    .send(Message::Text(Utf8Bytes::from_static(
                        "Username already taken.",
                    )))
                    .await;
                return;
            }
        }
        let mut rx = state.tx.subscribe();
        let _ = state.tx.send(format!("{username} joined."));
        let mut send_task = tokio::spawn(async move {
            while let Ok(msg) = rx.recv().await {
                if sender.send(Message::text(msg)).await.is_err() {
                    break;
                }
            }
        });
        let tx = state.tx.clone();
        let name = username.clone();
        let mut recv_task = tokio::spawn(async move {
            while let Some(Ok(Message::Text(text))) = receiver.next().await {
                let _ = tx.send(format!("{name}: {text}"));
            }
        });
        tokio::select! {
            _ = &mut send_task => recv_task.abort(),
            _ = &mut recv_task => send_task.abort(),
        };
        let _ = state.tx.send(format!("{username} left."));
        state.user_set.lock().unwrap().remove(&username);
    }

    let (tx, _rx) = broadcast::channel(100);
    let state = Arc::new(AppState {
        user_set: Mutex::new(HashSet::new()),
        tx,
    });
    let app = Router::new()
        .route("/websocket", get(websocket_handler))
        .with_state(state);
    let addr = serve(app);
    let url = format!("ws://{addr}/websocket");
    let join = |name: &str| {
        let (mut ws, _) = tungstenite::connect(&url).unwrap();
        if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
            s.set_read_timeout(Some(common::IO_TIMEOUT)).unwrap();
        }
        ws.send(tungstenite::Message::text(name)).unwrap();
        ws
    };
    let text =
        |ws: &mut tungstenite::WebSocket<_>| ws.read().unwrap().into_text().unwrap().to_string();
    let mut alice = join("alice");
    assert_eq!(text(&mut alice), "alice joined.");
    let mut bob = join("bob");
    assert_eq!(text(&mut bob), "bob joined.");
    assert_eq!(text(&mut alice), "bob joined.");
    bob.send(tungstenite::Message::text("hello alice")).unwrap();
    assert_eq!(text(&mut alice), "bob: hello alice");
    assert_eq!(text(&mut bob), "bob: hello alice");
    let mut again = join("alice");
    assert_eq!(text(&mut again), "Username already taken.");
    bob.close(None).unwrap();
    assert_eq!(text(&mut alice), "bob left.");
}

/// `multipart-form`: curl's `-F` uploads, a text field and a 5 MiB file, read field by
/// field with axum's `Multipart` and a raised body limit.
#[test]
fn multipart_form_uploads() {
    use axum::extract::{DefaultBodyLimit, Multipart};
    use tower_http::limit::RequestBodyLimitLayer;

    async fn accept_form(mut multipart: Multipart) -> String {
        let mut out = String::new();
        while let Some(field) = multipart.next_field().await.unwrap() {
            let name = field.name().unwrap().to_string();
            let file_name = field.file_name().map(str::to_string);
            let content_type = field.content_type().map(str::to_string);
            let data = field.bytes().await.unwrap();
            let sum: u64 = data.iter().map(|&b| u64::from(b)).sum();
            out.push_str(&format!(
                "{name} {file_name:?} {content_type:?} {} {sum}\n",
                data.len()
            ));
        }
        out
    }
    let app = Router::new()
        .route("/", axum::routing::post(accept_form))
        .layer(DefaultBodyLimit::disable())
        .layer(RequestBodyLimitLayer::new(250 * 1024 * 1024));
    let addr = serve(app);
    let file = common::TempPath::new("apps-upload", "bin");
    let data: Vec<u8> = (0..5 * 1024 * 1024u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(&file, &data).unwrap();
    let sum: u64 = data.iter().map(|&b| u64::from(b)).sum();
    let (out, _) = curl(&[
        "-F",
        "note=hello form",
        "-F",
        &format!(
            "file=@{};type=application/octet-stream",
            file.path().display()
        ),
        &format!("http://{addr}/"),
    ]);
    let name = file.path().file_name().unwrap().to_str().unwrap();
    assert_eq!(
        out,
        format!(
            "note None None 10 {}\nfile Some({name:?}) Some(\"application/octet-stream\") {} {sum}\n",
            b"hello form".iter().map(|&b| u64::from(b)).sum::<u64>(),
            data.len()
        )
    );
}

/// `reverse-proxy`: a handler that forwards each request through hyper-util's client to a
/// server behind it (here another fibr server), streaming the response back.
#[test]
fn reverse_proxy_with_hyper_utils_client() {
    use axum::body::Body;
    use axum::extract::{Request, State};
    use axum::http::uri::Uri;
    use axum::response::{IntoResponse, Response};
    use hyper::StatusCode;
    use hyper_util::client::legacy::connect::HttpConnector;
    use hyper_util::rt::TokioExecutor;

    type Client = hyper_util::client::legacy::Client<HttpConnector, Body>;

    let behind = serve(
        Router::new()
            .route("/", get(|| async { "Hello, World!" }))
            .route(
                "/echo",
                axum::routing::post(|body: axum::body::Bytes| async move { body }),
            ),
    );
    async fn handler(
        State((client, behind)): State<(Client, SocketAddr)>,
        mut req: Request,
    ) -> Result<Response, StatusCode> {
        let path = req.uri().path_and_query().map_or("/", |v| v.as_str());
        let uri = format!("http://{behind}{path}");
        *req.uri_mut() = Uri::try_from(uri).unwrap();
        Ok(client
            .request(req)
            .await
            .map_err(|_| StatusCode::BAD_REQUEST)?
            .into_response())
    }
    let client: Client =
        hyper_util::client::legacy::Client::<(), ()>::builder(TokioExecutor::new())
            .build(HttpConnector::new());
    let app = Router::new()
        .route("/", get(handler))
        .route("/echo", axum::routing::post(handler))
        .with_state((client, behind));
    let addr = serve(app);
    assert_eq!(curl(&[&format!("http://{addr}/")]).0, "Hello, World!");
    let body = "x".repeat(200_000);
    let file = common::TempPath::new("apps-proxied", "txt");
    std::fs::write(&file, &body).unwrap();
    let upload = format!("@{}", file.path().display());
    let (echoed, _) = curl(&["--data-binary", &upload, &format!("http://{addr}/echo")]);
    assert_eq!(echoed.len(), body.len());
    assert!(echoed == body);
}
