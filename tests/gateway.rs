//! `fibr::gateway` over real sockets: curl (HTTP/1.1 and h2c) in front, fibr, axum::serve,
//! Python's http.server and hand-written sockets behind.

mod common;
#[path = "gateway/ws.rs"]
mod ws;

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
use std::time::{Duration, Instant};

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
        // axum::serve upstream, with a request body.
        let gw3 = gateway(vec![http(axum_up)], Config::default());
        let r = curl(&["--data-binary", "hello", &url(gw3, "/count")]);
        assert_eq!((r.status, r.text().as_str()), (200, "5"), "{r:?}");
        let r = curl(&[&url(gw3, "/id")]);
        assert_eq!(r.text(), "axum");
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
            "TE: trailers",
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

// ---------------------------------------------------------------------------------------
// Balancing, ejection, retries
// ---------------------------------------------------------------------------------------

#[test]
fn round_robin_spreads_and_least_outstanding_avoids_the_busy() {
    bounded(LIMIT, || {
        let ups: Vec<_> = ["a", "b", "c"]
            .map(fibr_upstream)
            .into_iter()
            .map(|(a, _)| http(a))
            .collect();
        let gw = gateway(ups.clone(), Config::default());
        let mut got: Vec<_> = (0..6).map(|_| curl(&[&url(gw, "/id")]).text()).collect();
        got.sort();
        assert_eq!(got, ["a", "a", "b", "b", "c", "c"]);
        let gw = gateway(
            ups[..2].to_vec(),
            Config::default().with_balance(Balance::LeastOutstanding),
        );
        // Two slow requests in flight, one on each... then one more on whichever is free:
        // a slow one holds `a` while quick ones all go to `b`.
        let slow = thread::spawn(move || curl(&[&url(gw, "/slow")]).text());
        thread::sleep(Duration::from_millis(200));
        let quick: Vec<_> = (0..4).map(|_| curl(&[&url(gw, "/id")]).text()).collect();
        let busy = slow.join().unwrap();
        let other = if busy == "a" { "b" } else { "a" };
        assert_eq!(quick, [other; 4], "the busy upstream was {busy}");
    });
}

#[test]
fn a_failing_upstream_is_ejected_for_a_while_and_requests_retry_elsewhere() {
    bounded(LIMIT, || {
        // Accepts and closes at once: "closed before the response".
        let (bad, bad_conns) = raw_upstream(|_, _| {});
        let (good, _) = fibr_upstream("good");
        let config = Config::default().with_eject_for(Duration::from_millis(1500));
        let gw = gateway(vec![http(bad), http(good)], config);
        let t0 = Instant::now();
        for _ in 0..6 {
            let r = curl(&[&url(gw, "/id")]);
            assert_eq!((r.status, r.text().as_str()), (200, "good"), "{r:?}");
        }
        assert!(t0.elapsed() < Duration::from_millis(1500));
        assert_eq!(
            bad_conns.load(Ordering::SeqCst),
            1,
            "an ejected upstream got requests"
        );
        thread::sleep(Duration::from_millis(1600));
        for _ in 0..2 {
            assert_eq!(curl(&[&url(gw, "/id")]).text(), "good");
        }
        assert_eq!(
            bad_conns.load(Ordering::SeqCst),
            2,
            "the ejection did not end"
        );
    });
}

#[test]
fn retries_what_was_not_sent_and_not_a_post_that_was() {
    bounded(LIMIT, || {
        let (good, _) = fibr_upstream("good");
        // Nothing listens: a POST with a body goes to the next upstream, body and all.
        let gw = gateway(
            vec![http(dead_port()), http(good)],
            Config::default().with_balance(Balance::RoundRobin),
        );
        let r = curl(&["--data-binary", "0123456789", &url(gw, "/count")]);
        assert_eq!((r.status, r.text().as_str()), (200, "10"), "{r:?}");
        // An upstream that read the request and closed: a POST is not sent again...
        let (closer, closer_conns) = raw_upstream(|_, _| {});
        let gw = gateway(vec![http(closer), http(good)], Config::default());
        let r = curl(&["--data-binary", "x", &url(gw, "/count")]);
        assert_eq!(r.status, 502, "{r:?}");
        assert!(
            r.text().starts_with("fibr gateway: upstream http://"),
            "{}",
            r.text()
        );
        assert_eq!(closer_conns.load(Ordering::SeqCst), 1);
        // ... and with no retries, a GET that fails is answered 502.
        let gw = gateway(
            vec![http(dead_port()), http(good)],
            Config::default().with_retries(0),
        );
        let codes: Vec<_> = (0..2).map(|_| curl(&[&url(gw, "/id")]).status).collect();
        assert!(codes.contains(&502), "{codes:?}");
    });
}

// ---------------------------------------------------------------------------------------
// Timeouts and broken upstreams
// ---------------------------------------------------------------------------------------

#[test]
fn no_response_head_in_time_is_504_and_garbage_is_502() {
    bounded(LIMIT, || {
        let (silent, _) = raw_upstream(|s, _| {
            thread::sleep(Duration::from_secs(5));
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        });
        let config = Config::default().with_first_byte_timeout(Duration::from_millis(500));
        let gw = gateway(vec![http(silent)], config);
        let t0 = Instant::now();
        let r = curl(&[&url(gw, "/")]);
        assert_eq!(r.status, 504, "{r:?}");
        assert!(t0.elapsed() < Duration::from_secs(4));
        assert!(
            r.text().contains("no response head within 500ms"),
            "{}",
            r.text()
        );

        for garbage in [
            &b"garbage\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n",
        ] {
            let (bad, _) = raw_upstream(move |s, _| {
                let _ = s.write_all(garbage);
            });
            let gw = gateway(vec![http(bad)], Config::default());
            let r = curl(&[&url(gw, "/")]);
            assert_eq!(
                r.status,
                502,
                "{:?}: {r:?}",
                String::from_utf8_lossy(garbage)
            );
            assert!(r.text().starts_with("fibr gateway:"), "{}", r.text());
        }
    });
}

#[test]
fn connect_timeout_is_504() {
    bounded(LIMIT, || {
        // A listener with a backlog of one that never accepts: once its queue is full,
        // further SYNs are dropped and connecting hangs.
        let sock =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        sock.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        sock.listen(0).unwrap();
        let addr = sock.local_addr().unwrap().as_socket().unwrap();
        let mut fill = Vec::new();
        while fill.len() < 8 {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                Ok(s) => fill.push(s),
                Err(_) => break,
            }
        }
        assert!(
            TcpStream::connect_timeout(&addr, Duration::from_millis(300)).is_err(),
            "the backlog did not fill"
        );
        let config = Config::default().with_connect_timeout(Duration::from_millis(400));
        let gw = gateway(vec![http(addr)], config);
        let t0 = Instant::now();
        let r = curl(&[&url(gw, "/")]);
        assert_eq!(r.status, 504, "{r:?}");
        assert!(r.text().contains("connect timed out"), "{}", r.text());
        assert!(t0.elapsed() < Duration::from_secs(3));
        drop(fill);
    });
}

/// A response that breaks off reaches curl broken (exit 18, partial file; HTTP/2: 92,
/// stream error), never as a whole body.
#[test]
fn a_body_cut_off_or_idle_reaches_the_client_broken() {
    bounded(LIMIT, || {
        let (cut_length, _) = raw_upstream(|s, _| {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n");
            let _ = s.write_all(&[b'x'; 1000]);
        });
        let (cut_chunked, _) = raw_upstream(|s, _| {
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n");
        });
        let (idle, _) = raw_upstream(|s, _| {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello");
            thread::sleep(Duration::from_secs(5));
        });
        let (bad_chunk, _) = raw_upstream(|s, _| {
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n",
            );
            thread::sleep(Duration::from_secs(2));
        });
        let config = Config::default().with_idle_timeout(Duration::from_millis(500));
        for (what, upstream) in [
            ("content-length", cut_length),
            ("chunked", cut_chunked),
            ("idle", idle),
            ("bad chunk", bad_chunk),
        ] {
            let gw = gateway(vec![http(upstream)], config.clone());
            let r = curl(&[&url(gw, "/")]);
            assert_eq!(r.status, 200, "{what}: {r:?}");
            assert_ne!(r.exit, 0, "{what}: curl took a broken body as whole: {r:?}");
            let r = curl(&["--http2-prior-knowledge", &url(gw, "/")]);
            assert_ne!(
                r.exit, 0,
                "{what} (h2): curl took a broken body as whole: {r:?}"
            );
        }
    });
}

// ---------------------------------------------------------------------------------------
// Streaming
// ---------------------------------------------------------------------------------------

/// This process's resident memory, in bytes.
fn rss() -> usize {
    common::rss()
}

#[test]
fn large_bodies_stream_through_in_bounded_memory() {
    bounded(Duration::from_secs(180), || {
        const BIG: u64 = 512 << 20;
        let (fibr_up, _) = fibr_upstream("fibr");
        let gw = gateway(vec![http(fibr_up)], Config::default());
        // Warm up, then measure.
        curl(&[&url(gw, "/bytes/1000000"), "-o", "/dev/null"]);
        let before = rss();
        let sampler = common::RssSampler::start(Duration::from_millis(20));
        let r = curl(&[
            "-o",
            "/dev/null",
            "-w",
            "%{size_download}",
            &url(gw, &format!("/bytes/{BIG}")),
        ]);
        assert_eq!(r.exit, 0, "{r:?}");
        let input: Feed = Box::new(|w: &mut dyn Write| {
            let block = vec![b'u'; 1 << 20];
            for _ in 0..(BIG >> 20) {
                if w.write_all(&block).is_err() {
                    return;
                }
            }
        });
        let r = curl_with_input(&["-T", "-", "-X", "POST", &url(gw, "/count")], Some(input));
        assert_eq!((r.status, r.text()), (200, BIG.to_string()), "{r:?}");
        let peak = sampler.finish();
        let grew = peak.saturating_sub(before);
        assert!(
            grew < 64 << 20,
            "RSS grew by {} MiB moving 2 x {} MiB",
            grew >> 20,
            BIG >> 20
        );
    });
}

#[test]
fn a_slow_client_slows_the_upstream() {
    bounded(LIMIT, || {
        let (fibr_up, counters) = fibr_upstream("fibr");
        let gw = gateway(vec![http(fibr_up)], Config::default());
        let mut s = common::connect(gw);
        s.write_all(b"GET /forever HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut buf = vec![0u8; 1 << 20];
        let mut read = 0u64;
        while read < 4 << 20 {
            read += s.read(&mut buf).unwrap() as u64;
        }
        // The client stops reading: the upstream must stop soon after.
        thread::sleep(Duration::from_millis(1500));
        let a = counters.produced.load(Ordering::SeqCst);
        thread::sleep(Duration::from_millis(1000));
        let b = counters.produced.load(Ordering::SeqCst);
        assert_eq!(
            a, b,
            "the upstream kept producing for a client that reads nothing"
        );
        assert!(a - read < 48 << 20, "{} MiB in flight", (a - read) >> 20);
        // Reading again resumes it.
        let mut again = 0u64;
        while counters.produced.load(Ordering::SeqCst) == b {
            again += s.read(&mut buf).unwrap() as u64;
            assert!(again < 128 << 20, "the upstream did not resume");
        }
    });
}
