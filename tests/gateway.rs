//! `fibr::gateway` over real sockets: curl (HTTP/1.1 and h2c) in front, fibr, axum::serve,
//! Python's http.server and hand-written sockets behind.

mod common;
#[path = "gateway/example.rs"]
mod example;
#[path = "gateway/failures.rs"]
mod failures;
#[path = "gateway/streaming.rs"]
mod streaming;
#[cfg(feature = "http3")]
#[path = "gateway/tls.rs"]
mod tls;
#[path = "gateway/ws.rs"]
mod ws;
#[cfg(all(feature = "http3", feature = "ws"))]
#[path = "gateway/ws_tls.rs"]
mod ws_tls;

use axum::body::Body as AxumBody;
use axum::extract::{Path, Request, State};
use axum::routing::{any, get};
use axum::Router;
use bytes::Bytes;
use common::{bounded, require_tool, start};
use fibr::gateway::{Balance, Config, Gateway, Upstream};
use fibr::http::ServerConfig;
use http_body_util::BodyExt;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------
// Upstreams
// ---------------------------------------------------------------------------------------

/// What an upstream app counts: body bytes it produced.
#[derive(Clone, Default)]
struct Counters {
    produced: Arc<AtomicU64>,
}

/// An upstream app named `name`: `/echo` tells what arrived, `/id` its name, `/slow`
/// answers after a second, `/count` counts the request body, `/bytes/{n}` streams `n`
/// bytes, `/forever` streams without end.
fn app(name: &'static str, counters: Counters) -> Router {
    Router::new()
        .route("/echo", any(echo))
        .route("/echo/{*rest}", any(echo))
        .route("/id", get(move || async move { name }))
        .route(
            "/slow",
            get(move || async move {
                fibr::time::sleep(Duration::from_secs(1)).await;
                name
            }),
        )
        .route("/count", any(count))
        .route("/bytes/{n}", get(bytes))
        .route("/forever", get(forever))
        .route("/broken", get(broken))
        .with_state(counters)
}

/// The request line and every header, one per line.
async fn echo(req: Request) -> String {
    let mut out = format!("{} {} {:?}\n", req.method(), req.uri(), req.version());
    for (k, v) in req.headers() {
        out.push_str(&format!("{k}: {}\n", v.to_str().unwrap_or("?")));
    }
    out
}

async fn count(req: Request) -> String {
    let mut body = req.into_body();
    let mut n = 0u64;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(f) => n += f.data_ref().map_or(0, |d| d.len() as u64),
            Err(e) => return format!("body failed after {n}: {e}"),
        }
    }
    n.to_string()
}

const CHUNK: usize = 64 * 1024;

fn produce(counters: Counters, limit: Option<u64>) -> AxumBody {
    let chunk = Bytes::from(vec![b'x'; CHUNK]);
    let stream = futures_util::stream::unfold(0u64, move |sent| {
        let chunk = chunk.clone();
        let counters = counters.clone();
        async move {
            let left = limit.map_or(CHUNK as u64, |l| (l - sent).min(CHUNK as u64));
            if left == 0 {
                return None;
            }
            counters.produced.fetch_add(left, Ordering::SeqCst);
            let piece = chunk.slice(..left as usize);
            Some((Ok::<_, std::io::Error>(piece), sent + left))
        }
    });
    AxumBody::from_stream(stream)
}

async fn bytes(State(c): State<Counters>, Path(n): Path<u64>) -> AxumBody {
    produce(c, Some(n))
}

/// A chunked body that fails after 1 MiB: the server breaks the response off (HTTP/1.1:
/// closes before the last chunk; HTTP/2: RST_STREAM).
async fn broken() -> AxumBody {
    let chunks = (0..17).map(|i| match i {
        16 => Err(std::io::Error::other("broken on purpose")),
        _ => Ok(Bytes::from(vec![b'b'; CHUNK])),
    });
    AxumBody::from_stream(futures_util::stream::iter(chunks))
}

async fn forever(State(c): State<Counters>) -> AxumBody {
    produce(c, None)
}

/// A fibr upstream.
fn fibr_upstream(name: &'static str) -> (SocketAddr, Counters) {
    let counters = Counters::default();
    (
        start(app(name, counters.clone()), ServerConfig::default()),
        counters,
    )
}

/// An `axum::serve` upstream on a tokio runtime of its own (kept alive by the caller).
fn axum_upstream(name: &'static str) -> (SocketAddr, tokio::runtime::Runtime) {
    axum_upstream_of(app(name, Counters::default()))
}

/// `app` on `axum::serve`, on a tokio runtime of its own (kept alive by the caller).
fn axum_upstream_of(app: Router) -> (SocketAddr, tokio::runtime::Runtime) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let addr = rt.block_on(async move {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(l, app).await });
        addr
    });
    (addr, rt)
}

/// A hand-written upstream: each connection's request head is read, then `answer`
/// writes whatever it likes. Counts connections.
fn raw_upstream(
    answer: impl Fn(&mut TcpStream, &[u8]) + Send + Sync + 'static,
) -> (SocketAddr, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let (a, answer) = (accepted.clone(), Arc::new(answer));
    thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            a.fetch_add(1, Ordering::SeqCst);
            let answer = answer.clone();
            thread::spawn(move || {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                while common::find(&head, b"\r\n\r\n").is_none() {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                answer(&mut s, &head);
            });
        }
    });
    (addr, accepted)
}

/// A port nothing listens on.
fn dead_port() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

// ---------------------------------------------------------------------------------------
// The gateway and its clients
// ---------------------------------------------------------------------------------------

fn up(s: &str) -> Upstream {
    Upstream::parse(s).unwrap()
}

fn http(addr: SocketAddr) -> Upstream {
    up(&format!("http://{addr}"))
}

/// A gateway to `upstreams` as an axum app's fallback, served by fibr with the clients'
/// addresses (ConnectInfo).
fn gateway(upstreams: Vec<Upstream>, config: Config) -> SocketAddr {
    let gw = Gateway::new(upstreams, config).unwrap();
    let app = Router::new()
        .route("/own", get(|| async { "the gateway's own route" }))
        .fallback_service(gw);
    start(
        app.into_make_service_with_connect_info::<SocketAddr>(),
        ServerConfig::default(),
    )
}

/// What curl got.
#[derive(Debug)]
struct Curl {
    /// curl's exit code (0: a complete response).
    exit: i32,
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Curl {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Runs curl with `args` (`-s -i` and a time limit added), and parses its output.
fn curl(args: &[&str]) -> Curl {
    curl_with_input(args, None)
}

/// What feeds curl's standard input.
type Feed = Box<dyn FnOnce(&mut dyn Write) + Send>;

fn curl_with_input(args: &[&str], input: Option<Feed>) -> Curl {
    require_tool("curl", "curl");
    let mut child = Command::new("curl")
        .args(["-s", "-S", "-i", "--max-time", "30"])
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run curl");
    let feeder = input.map(|f| {
        let mut stdin = child.stdin.take().unwrap();
        thread::spawn(move || f(&mut stdin))
    });
    let out = child.wait_with_output().unwrap();
    if let Some(f) = feeder {
        let _ = f.join();
    }
    let mut raw = &out.stdout[..];
    let (mut status, mut headers) = (0, Vec::new());
    // Heads until the final one (past any 100 Continue).
    while let Some(end) = common::find(raw, b"\r\n\r\n") {
        let head = String::from_utf8_lossy(&raw[..end]).into_owned();
        raw = &raw[end + 4..];
        let mut lines = head.lines();
        status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .collect();
        if status >= 200 {
            break;
        }
    }
    Curl {
        exit: out.status.code().unwrap_or(-1),
        status,
        headers,
        body: raw.to_vec(),
    }
}

fn url(addr: SocketAddr, path: &str) -> String {
    format!("http://{addr}{path}")
}

// ---------------------------------------------------------------------------------------
// Forwarding
// ---------------------------------------------------------------------------------------

#[test]
fn forwards_to_fibr_and_axum_over_http1_and_h2c() {
    bounded(LIMIT, || {
        let (fibr_up, _) = fibr_upstream("fibr");
        let (axum_up, _rt) = axum_upstream("axum");
        let gw = gateway(vec![http(fibr_up)], Config::default());
        let r = curl(&[&url(gw, "/echo/a?b=1")]);
        assert_eq!((r.exit, r.status), (0, 200), "{r:?}");
        assert!(
            r.text().starts_with("GET /echo/a?b=1 HTTP/1.1\n"),
            "{}",
            r.text()
        );
        assert_eq!(curl(&[&url(gw, "/own")]).text(), "the gateway's own route");
        // The client speaks h2c to the gateway, the gateway HTTP/1.1 upstream.
        let r = curl(&["--http2-prior-knowledge", &url(gw, "/echo")]);
        assert_eq!((r.exit, r.status), (0, 200), "{r:?}");
        assert!(r.text().starts_with("GET /echo HTTP/1.1\n"), "{}", r.text());
        // HTTP/2 upstream by prior knowledge.
        let gw2 = gateway(vec![up(&format!("h2c://{fibr_up}"))], Config::default());
        let r = curl(&[&url(gw2, "/echo")]);
        let first = r.text().lines().next().unwrap_or_default().to_owned();
        assert!(
            first.starts_with("GET ") && first.ends_with("/echo HTTP/2.0"),
            "{first}"
        );
        // The client's Host went on as `:authority`.
        assert!(first.contains(&format!("//{gw2}/")), "{first}");
        // axum::serve upstream, with a request body.
        let gw3 = gateway(vec![http(axum_up)], Config::default());
        let r = curl(&["--data-binary", "hello", &url(gw3, "/count")]);
        assert_eq!((r.status, r.text().as_str()), (200, "5"), "{r:?}");
        let r = curl(&[&url(gw3, "/id")]);
        assert_eq!(r.text(), "axum");
        // HEAD: the upstream's Content-Length, no body, nothing left hanging.
        let r = curl(&["-I", &url(gw3, "/id")]);
        assert_eq!((r.exit, r.status), (0, 200), "{r:?}");
        assert_eq!(r.header("content-length"), Some("4"), "{r:?}");
        assert!(r.body.is_empty(), "{r:?}");
    });
}

#[test]
fn mounts_under_a_prefix_with_nest_service() {
    bounded(LIMIT, || {
        let (fibr_up, _) = fibr_upstream("fibr");
        let gw = Gateway::new([http(fibr_up)], Config::default()).unwrap();
        let app = Router::new().nest_service("/api", gw);
        let addr = start(app, ServerConfig::default());
        let r = curl(&[&url(addr, "/api/echo/x?y=2")]);
        assert!(r.text().starts_with("GET /echo/x?y=2 HTTP/1.1\n"), "{r:?}");
        // An upstream with a path prefix of its own.
        let gw = gateway(
            vec![up(&format!("http://{fibr_up}/echo"))],
            Config::default(),
        );
        let r = curl(&[&url(gw, "/deep?q")]);
        assert!(r.text().starts_with("GET /echo/deep?q HTTP/1.1\n"), "{r:?}");
    });
}

#[test]
fn python_http_server_upstream() {
    bounded(LIMIT, || {
        require_tool("python3", "python3");
        let dir = std::env::temp_dir().join(format!("fibr-gw-py-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("file.txt"), "from python\n").unwrap();
        let port = dead_port().port();
        let mut py = Command::new("python3")
            .args([
                "-m",
                "http.server",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .arg("--directory")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 -m http.server");
        let py_addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        assert!(
            common::wait_until(Duration::from_secs(10), || TcpStream::connect(py_addr)
                .is_ok()),
            "http.server did not start"
        );
        let gw = gateway(vec![http(py_addr)], Config::default());
        let r = curl(&[&url(gw, "/file.txt")]);
        let _ = py.kill();
        let _ = py.wait();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!((r.exit, r.status), (0, 200), "{r:?}");
        assert_eq!(r.text(), "from python\n");
        assert!(r.header("via").is_some_and(|v| v.contains("fibr")), "{r:?}");
    });
}

// ---------------------------------------------------------------------------------------
// Headers
// ---------------------------------------------------------------------------------------

#[test]
fn hop_by_hop_fields_are_stripped_both_ways() {
    bounded(LIMIT, || {
        let (fibr_up, _) = fibr_upstream("fibr");
        let gw = gateway(vec![http(fibr_up)], Config::default());
        let r = curl(&[
            "-H",
            "Connection: keep-alive, X-Secret",
            "-H",
            "X-Secret: s3cret",
            "-H",
            "Keep-Alive: timeout=5",
            "-H",
            "Proxy-Authorization: Basic eDp5",
            "-H",
            "Proxy-Connection: keep-alive",
            "-H",
            "TE: gzip",
            "-H",
            "Trailer: X-T",
            "-H",
            "Upgrade: foo",
            "-H",
            "X-Kept: yes",
            &url(gw, "/echo"),
        ]);
        let seen = r.text().to_ascii_lowercase();
        for gone in [
            "x-secret",
            "keep-alive:",
            "proxy-authorization",
            "proxy-connection",
            "te:",
            "trailer:",
            "upgrade:",
        ] {
            assert!(!seen.contains(gone), "{gone} reached the upstream:\n{seen}");
        }
        assert!(seen.contains("x-kept: yes"), "{seen}");
        // `TE: trailers` is this hop's as well: it is sent on, alone.
        let r = curl(&["-H", "TE: gzip, trailers", &url(gw, "/echo")]);
        assert!(r.text().contains("\nte: trailers\n"), "{}", r.text());
        // And on the way back.
        let (raw, _) = raw_upstream(|s, _| {
            let body = "ok";
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nConnection: close, X-Up-Secret\r\nX-Up-Secret: 1\r\n\
                 Keep-Alive: timeout=5\r\nProxy-Authenticate: Basic\r\nUpgrade: foo\r\n\
                 X-Up-Kept: 1\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
        });
        let gw = gateway(vec![http(raw)], Config::default());
        let r = curl(&[&url(gw, "/")]);
        assert_eq!((r.status, r.text().as_str()), (200, "ok"), "{r:?}");
        for gone in ["x-up-secret", "keep-alive", "proxy-authenticate", "upgrade"] {
            assert!(r.header(gone).is_none(), "{gone} reached the client: {r:?}");
        }
        assert_eq!(r.header("x-up-kept"), Some("1"));
        assert_eq!(r.header("via"), Some("1.1 fibr"));
    });
}

#[test]
fn forwarding_fields_name_the_client() {
    bounded(LIMIT, || {
        let (fibr_up, _) = fibr_upstream("fibr");
        let gw = gateway(vec![http(fibr_up)], Config::default().with_forwarded(true));
        let r = curl(&[
            "-H",
            "X-Forwarded-For: 203.0.113.9",
            "-H",
            "X-Forwarded-Proto: https",
            &url(gw, "/echo"),
        ]);
        let seen = r.text();
        assert!(
            seen.contains("x-forwarded-for: 203.0.113.9, 127.0.0.1\n"),
            "{seen}"
        );
        assert!(seen.contains("x-forwarded-proto: http\n"), "{seen}");
        assert!(seen.contains("via: 1.1 fibr\n"), "{seen}");
        assert!(
            seen.contains(&format!(
                "forwarded: for=127.0.0.1;proto=http;host=\"{gw}\"\n"
            )),
            "{seen}"
        );
        assert!(seen.contains(&format!("host: {gw}\n")), "{seen}");
        // Over h2c the request arrives as HTTP/2 and its `:authority` becomes Host.
        let r = curl(&["--http2-prior-knowledge", &url(gw, "/echo")]);
        assert!(r.text().contains("via: 2 fibr\n"), "{}", r.text());
        assert!(r.text().contains(&format!("host: {gw}\n")), "{}", r.text());
        // Each one a choice; Host can be the upstream's.
        let quiet = Config::default()
            .with_x_forwarded_for(false)
            .with_x_forwarded_proto(false)
            .with_via(false)
            .with_preserve_host(false);
        let gw = gateway(vec![http(fibr_up)], quiet);
        let r = curl(&[&url(gw, "/echo")]);
        let seen = r.text();
        for gone in ["x-forwarded", "via:", "forwarded:"] {
            assert!(!seen.contains(gone), "{gone}:\n{seen}");
        }
        assert!(seen.contains(&format!("host: {fibr_up}\n")), "{seen}");
        assert!(r.header("via").is_none());
    });
}
