//! fibr's HTTP/1.1 server (`fibr::serve`) seen from raw `std::net` sockets: every limit in
//! `fibr::http::ServerConfig` at and one past it, bad input, pipelining order, handler panics,
//! streaming (latency and memory), `Expect: 100-continue`, graceful shutdown, HEAD / 204 /
//! 304 / Date, and many concurrent keep-alive connections.
//!
//! Apps are axum `Router`s, `tower::service_fn`s and a hand-written tower `Service`.
//! Every test body runs under a watchdog (`bounded`), and every client socket has read
//! and write timeouts, so a hang fails the test instead of stalling the suite. The two
//! tests that measure the process's RSS take a write lock that keeps every other test of
//! this file from running at the same time.

mod common;

use axum::body::Body;
use axum::extract::Path;
use axum::http::Uri;
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use fibr::http::{Incoming, ServerConfig};
use fibr::net::TcpListener;
use futures_util::StreamExt;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use std::convert::Infallible;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::task::{Context, Poll};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{bounded, find, rss, start, Client, RssSampler, IO_TIMEOUT};

// ---------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------

/// Tests that measure RSS hold it exclusively; all others share it.
static GATE: RwLock<()> = RwLock::new(());

fn shared() -> RwLockReadGuard<'static, ()> {
    GATE.read().unwrap_or_else(|e| e.into_inner())
}

fn exclusive() -> RwLockWriteGuard<'static, ()> {
    GATE.write().unwrap_or_else(|e| e.into_inner())
}

const LIMIT: Duration = Duration::from_secs(15);

// ---------------------------------------------------------------------------------------
// Apps
// ---------------------------------------------------------------------------------------

fn full(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r
}

/// A hand-written tower service: answers with the request path and counts its calls.
/// It never reads the request body.
#[derive(Clone, Default)]
struct PathEcho {
    calls: Arc<AtomicUsize>,
}

impl tower::Service<Request<Incoming>> for PathEcho {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Incoming>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok(full(StatusCode::OK, req.uri().path().to_string())))
    }
}

/// The axum app most tests use.
fn router() -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .route("/hello", get(|| async { "hello world" }))
        .route(
            "/id/{id}",
            get(|Path(id): Path<String>| async move { format!("id={id}") }),
        )
        .route(
            "/sleep/{ms}/{id}",
            get(|Path((ms, id)): Path<(u64, String)>| async move {
                fibr::time::sleep(Duration::from_millis(ms)).await;
                format!("id={id}")
            }),
        )
        .route("/echo", post(|b: Bytes| async move { b }))
        .route(
            "/echo/{id}",
            post(|Path(id): Path<String>, b: Bytes| async move {
                let mut v = format!("id={id};").into_bytes();
                v.extend_from_slice(&b);
                v
            }),
        )
        .route("/ignore", post(|| async { "ignored" }))
        .route(
            "/panic",
            get(|| async {
                if true {
                    panic!("handler panic (expected by the test)");
                }
                "unreachable"
            }),
        )
        .route("/no-content", get(|| async { StatusCode::NO_CONTENT }))
        .route("/not-modified", get(|| async { StatusCode::NOT_MODIFIED }))
        .route("/reject", post(|| async { StatusCode::UNAUTHORIZED }))
        .fallback(|uri: Uri| async move { (StatusCode::NOT_FOUND, uri.path().to_string()) })
}

// ---------------------------------------------------------------------------------------
// 1. Limits
// ---------------------------------------------------------------------------------------

#[test]
fn limit_max_head_bytes() {
    let _g = shared();
    bounded(LIMIT, || {
        let addr = start(
            PathEcho::default(),
            ServerConfig::default().with_max_head_bytes(1024),
        );
        let head = |total: usize| {
            let base = "GET /h HTTP/1.1\r\nHost: t\r\nX-Pad: \r\n\r\n".len();
            format!(
                "GET /h HTTP/1.1\r\nHost: t\r\nX-Pad: {}\r\n\r\n",
                "p".repeat(total - base)
            )
        };
        // Exactly at the limit: served, and the connection stays usable.
        let mut c = Client::connect(addr);
        let req = head(1024);
        assert_eq!(req.len(), 1024);
        c.send(req.as_bytes());
        let r = c.response();
        assert_eq!((r.status, r.text().as_str()), (200, "/h"));
        assert!(!r.closes());
        c.send(req.as_bytes());
        assert_eq!(c.response().status, 200);

        // One past: 431 and close.
        let mut c = Client::connect(addr);
        let req = head(1025);
        c.send(req.as_bytes());
        let r = c.response();
        assert_eq!(r.status, 431);
        assert!(r.closes(), "431 must close: {r:?}");
        c.expect_closed(IO_TIMEOUT);

        // A head that never ends is cut off at the limit too.
        let mut c = Client::connect(addr);
        c.send(b"GET /h HTTP/1.1\r\nHost: t\r\n");
        c.send(format!("X-Endless: {}", "e".repeat(2000)).as_bytes());
        let r = c.response();
        assert_eq!(r.status, 431);
        c.expect_closed(IO_TIMEOUT);
    });
}

#[test]
fn limit_max_headers() {
    let _g = shared();
    bounded(LIMIT, || {
        let addr = start(
            PathEcho::default(),
            ServerConfig::default().with_max_headers(10),
        );
        let req = |n: usize| {
            let mut s = String::from("GET /m HTTP/1.1\r\nHost: t\r\n");
            for i in 1..n {
                s.push_str(&format!("X-{i}: {i}\r\n"));
            }
            s.push_str("\r\n");
            s
        };
        let mut c = Client::connect(addr);
        c.send(req(10).as_bytes());
        let r = c.response();
        assert_eq!((r.status, r.text().as_str()), (200, "/m"));
        assert!(!r.closes());

        let mut c = Client::connect(addr);
        c.send(req(11).as_bytes());
        let r = c.response();
        assert_eq!(r.status, 431);
        assert!(r.closes());
        c.expect_closed(IO_TIMEOUT);
    });
}

#[test]
fn limit_max_uri_len() {
    let _g = shared();
    bounded(LIMIT, || {
        let addr = start(
            PathEcho::default(),
            ServerConfig::default().with_max_uri_len(100),
        );
        let path = |n: usize| format!("/{}", "u".repeat(n - 1));
        let mut c = Client::connect(addr);
        let r = c.get(&path(100));
        assert_eq!(r.status, 200);
        assert_eq!(r.text(), path(100));

        let mut c = Client::connect(addr);
        c.send(format!("GET {} HTTP/1.1\r\nHost: t\r\n\r\n", path(101)).as_bytes());
        let r = c.response();
        assert_eq!(r.status, 414);
        assert!(r.closes());
        c.expect_closed(IO_TIMEOUT);
    });
}

/// Content-Length over `max_body_size`: 413 without calling the service.
#[test]
fn limit_max_body_size_content_length() {
    let _g = shared();
    bounded(LIMIT, || {
        let calls = Arc::new(AtomicUsize::new(0));
        let calls2 = calls.clone();
        let svc = tower::service_fn(move |req: Request<Incoming>| {
            calls2.fetch_add(1, Ordering::SeqCst);
            async move {
                let body = req.into_body().collect().await;
                Ok::<_, Infallible>(match body {
                    Ok(b) => full(StatusCode::OK, b.to_bytes().len().to_string()),
                    Err(e) => full(StatusCode::BAD_REQUEST, e.to_string()),
                })
            }
        });
        let addr = start(svc, ServerConfig::default().with_max_body_size(Some(1000)));
        let mut c = Client::connect(addr);
        c.send(b"POST /b HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n");
        c.send(&[b'b'; 1000]);
        let r = c.response();
        assert_eq!((r.status, r.text().as_str()), (200, "1000"));
        assert!(!r.closes());
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        // One past: the head alone is enough for the answer.
        let mut c = Client::connect(addr);
        c.send(b"POST /b HTTP/1.1\r\nHost: t\r\nContent-Length: 1001\r\n\r\n");
        let r = c.response();
        assert_eq!(r.status, 413);
        assert!(r.closes());
        c.expect_closed(IO_TIMEOUT);
        assert_eq!(calls.load(Ordering::SeqCst), 1, "the service was called");
    });
}

/// A chunked body over `max_body_size`: the body stream fails (too large) and the
/// connection closes; at the limit it is fine.
#[test]
fn limit_max_body_size_chunked() {
    let _g = shared();
    bounded(LIMIT, || {
        let too_large = Arc::new(AtomicUsize::new(0));
        let tl = too_large.clone();
        let svc = tower::service_fn(move |req: Request<Incoming>| {
            let tl = tl.clone();
            async move {
                let body = req.into_body().collect().await;
                Ok::<_, Infallible>(match body {
                    Ok(b) => full(StatusCode::OK, b.to_bytes().len().to_string()),
                    Err(e) => {
                        if e.is_too_large() {
                            tl.fetch_add(1, Ordering::SeqCst);
                        }
                        full(StatusCode::PAYLOAD_TOO_LARGE, e.to_string())
                    }
                })
            }
        });
        let addr = start(svc, ServerConfig::default().with_max_body_size(Some(1000)));
        let chunk = |n: usize| {
            let mut v = format!("{n:x}\r\n").into_bytes();
            v.extend(std::iter::repeat_n(b'c', n));
            v.extend_from_slice(b"\r\n");
            v
        };
        let head = b"POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
        // At the limit, in two chunks.
        let mut c = Client::connect(addr);
        c.send(head);
        c.send(&chunk(600));
        c.send(&chunk(400));
        c.send(b"0\r\n\r\n");
        let r = c.response();
        assert_eq!((r.status, r.text().as_str()), (200, "1000"));
        assert!(!r.closes());
        c.send(head);
        c.send(b"0\r\n\r\n");
        assert_eq!(c.response().text(), "0");

        // One past.
        let mut c = Client::connect(addr);
        c.send(head);
        c.send(&chunk(600));
        c.send(&chunk(401));
        // Whatever the app answers, the connection closes after it.
        let r = c.response();
        assert_eq!(r.status, 413, "{r:?}");
        assert!(r.closes(), "{r:?}");
        c.expect_closed(IO_TIMEOUT);
        assert_eq!(too_large.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn limit_header_read_timeout() {
    let _g = shared();
    bounded(LIMIT, || {
        let addr = start(
            PathEcho::default(),
            ServerConfig::default().with_header_read_timeout(Some(Duration::from_millis(300))),
        );
        // A partial head, then nothing: 408 and close.
        let mut c = Client::connect(addr);
        let t0 = Instant::now();
        c.send(b"GET /slow HTTP/1.1\r\nHost: t\r\n");
        let r = c.response();
        let took = t0.elapsed();
        assert_eq!(r.status, 408);
        assert!(r.closes());
        assert!(
            took >= Duration::from_millis(250),
            "408 after only {took:?}"
        );
        assert!(took < Duration::from_secs(3), "408 after {took:?}");
        c.expect_closed(IO_TIMEOUT);

        // A slowloris trickle (a byte every 40 ms) is cut off as well.
        let mut c = Client::connect(addr);
        let t0 = Instant::now();
        let req = b"GET /trickle HTTP/1.1\r\nHost: t\r\nX-A: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
        let mut cut = false;
        for b in req.iter() {
            if c.s.write_all(&[*b]).is_err() || !c.quiet_for(Duration::from_millis(40)) {
                cut = true;
                break;
            }
        }
        assert!(cut, "a 2.5 s trickled head was never cut off");
        let r = c.response();
        assert_eq!(r.status, 408);
        assert!(t0.elapsed() < Duration::from_secs(2));

        // A head completed in time is served.
        let mut c = Client::connect(addr);
        c.send(b"GET /in-time HTTP/1.1\r\nHo");
        thread::sleep(Duration::from_millis(150));
        c.send(b"st: t\r\n\r\n");
        let r = c.response();
        assert_eq!((r.status, r.text().as_str()), (200, "/in-time"));
        // The timer starts over for the next head.
        thread::sleep(Duration::from_millis(200));
        c.send(b"GET /again HTTP/1.1\r\n");
        thread::sleep(Duration::from_millis(200));
        c.send(b"Host: t\r\n\r\n");
        assert_eq!(c.response().text(), "/again");
    });
}

#[test]
fn limit_idle_timeout() {
    let _g = shared();
    bounded(LIMIT, || {
        let addr = start(
            router(),
            ServerConfig::default().with_idle_timeout(Some(Duration::from_millis(300))),
        );
        // Idle after a request: closed by the server.
        let mut c = Client::connect(addr);
        assert_eq!(c.get("/").status, 200);
        let t0 = Instant::now();
        c.expect_closed(Duration::from_secs(3));
        let took = t0.elapsed();
        assert!(took >= Duration::from_millis(250), "closed after {took:?}");

        // A connection that never sends anything is idle too.
        let mut c = Client::connect(addr);
        c.expect_closed(Duration::from_secs(3));

        // Active: a request every 100 ms for a second is never cut.
        let mut c = Client::connect(addr);
        for i in 0..10 {
            let r = c.get(&format!("/id/{i}"));
            assert_eq!(r.text(), format!("id={i}"));
            thread::sleep(Duration::from_millis(100));
        }
        // A handler slower than the idle timeout is not idleness.
        let r = c.get("/sleep/600/slow");
        assert_eq!(r.text(), "id=slow");
        assert!(!r.closes());
        assert_eq!(c.get("/").status, 200);
    });
}

#[test]
fn limit_max_requests_per_connection() {
    let _g = shared();
    bounded(LIMIT, || {
        let addr = start(
            router(),
            ServerConfig::default().with_max_requests_per_connection(Some(3)),
        );
        let mut c = Client::connect(addr);
        for i in 1..=3 {
            let r = c.get(&format!("/id/{i}"));
            assert_eq!(r.text(), format!("id={i}"));
            assert_eq!(r.closes(), i == 3, "request {i}: {r:?}");
        }
        c.expect_closed(IO_TIMEOUT);

        // Pipelined past the limit: three answers, then the close; the fourth is dropped.
        let mut c = Client::connect(addr);
        let mut reqs = String::new();
        for i in 1..=4 {
            reqs.push_str(&format!("GET /id/{i} HTTP/1.1\r\nHost: t\r\n\r\n"));
        }
        c.send(reqs.as_bytes());
        for i in 1..=3 {
            let r = c.response();
            assert_eq!(r.text(), format!("id={i}"));
            assert_eq!(r.closes(), i == 3);
        }
        c.expect_closed(IO_TIMEOUT);
    });
}

#[test]
fn limit_max_pipelined() {
    let _g = shared();
    bounded(LIMIT, || {
        let addr = start(router(), ServerConfig::default().with_max_pipelined(4));
        let mut c = Client::connect(addr);
        let mut reqs = String::new();
        for i in 0..100 {
            // Every tenth is slow, so responses pile up behind it.
            if i % 10 == 3 {
                reqs.push_str(&format!("GET /sleep/20/{i} HTTP/1.1\r\nHost: t\r\n\r\n"));
            } else {
                reqs.push_str(&format!("GET /id/{i} HTTP/1.1\r\nHost: t\r\n\r\n"));
            }
        }
        c.send(reqs.as_bytes());
        for i in 0..100 {
            let r = c.response();
            assert_eq!(r.status, 200);
            assert_eq!(r.text(), format!("id={i}"), "response {i} out of order");
            assert!(!r.closes());
        }
        assert!(c.quiet_for(Duration::from_millis(50)), "extra bytes");
        assert_eq!(c.get("/id/last").text(), "id=last");
    });
}

/// A handler reading a 64 MiB upload slowly: the server holds the socket instead of
/// buffering, so RSS stays flat.
#[test]
fn body_buffer_backpressure_bounds_rss() {
    let _g = exclusive();
    bounded(LIMIT, || {
        const TOTAL: usize = 64 << 20;
        let app = Router::new().route(
            "/count",
            post(|body: Body| async move {
                let mut body = body;
                let (mut n, mut since) = (0usize, 0usize);
                while let Some(frame) = body.frame().await {
                    let frame = frame.expect("body frame");
                    if let Some(d) = frame.data_ref() {
                        n += d.len();
                        since += d.len();
                        if since >= 512 * 1024 {
                            since = 0;
                            fibr::time::sleep(Duration::from_millis(5)).await;
                        }
                    }
                }
                n.to_string()
            }),
        );
        let addr = start(app, ServerConfig::default());
        let mut c = Client::connect(addr);
        // Warm up the path (buffers, allocator arenas) before the baseline.
        c.send(b"POST /count HTTP/1.1\r\nHost: t\r\nContent-Length: 1048576\r\n\r\n");
        let block = vec![0x5au8; 64 * 1024];
        for _ in 0..16 {
            c.send(&block);
        }
        assert_eq!(c.response().text(), "1048576");

        let before = rss();
        let sampler = RssSampler::start(Duration::from_millis(3));
        let t0 = Instant::now();
        c.send(
            format!("POST /count HTTP/1.1\r\nHost: t\r\nContent-Length: {TOTAL}\r\n\r\n")
                .as_bytes(),
        );
        for _ in 0..TOTAL / block.len() {
            c.send(&block);
        }
        let r = c.response();
        let took = t0.elapsed();
        let peak = sampler.finish();
        assert_eq!((r.status, r.text()), (200, TOTAL.to_string()));
        let grew = peak.saturating_sub(before);
        eprintln!(
            "backpressure: 64 MiB upload to a slow reader in {took:?}; RSS {} KiB -> peak {} KiB (+{} KiB)",
            before / 1024,
            peak / 1024,
            grew / 1024
        );
        assert!(
            grew < 16 << 20,
            "RSS grew by {} KiB while a slow handler read 64 MiB",
            grew / 1024
        );
    });
}

#[test]
fn max_drain_bytes_small_ignored_body_keeps_connection() {
    let _g = shared();
    bounded(LIMIT, || {
        let addr = start(router(), ServerConfig::default().with_max_drain_bytes(1024));
        let mut c = Client::connect(addr);
        // Body sent with the head.
        c.send(b"POST /ignore HTTP/1.1\r\nHost: t\r\nContent-Length: 500\r\n\r\n");
        c.send(&[b'i'; 500]);
        let r = c.response();
        assert_eq!((r.status, r.text().as_str()), (200, "ignored"));
        assert!(!r.closes(), "{r:?}");
        assert_eq!(c.get("/id/next").text(), "id=next");

        // Body sent after the answer: drained, then the next request is read.
        c.send(b"POST /ignore HTTP/1.1\r\nHost: t\r\nContent-Length: 1024\r\n\r\n");
        let r = c.response();
        assert_eq!(r.text(), "ignored");
        assert!(!r.closes(), "{r:?}");
        let mut rest = vec![b'j'; 1024];
        rest.extend_from_slice(b"GET /id/after HTTP/1.1\r\nHost: t\r\n\r\n");
        c.send(&rest);
        let r = c.response();
        assert_eq!(r.text(), "id=after");

        // A small chunked body, after the answer.
        c.send(b"POST /ignore HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
        let r = c.response();
        assert_eq!(r.text(), "ignored");
        assert!(!r.closes(), "{r:?}");
        let mut rest = b"1f4\r\n".to_vec();
        rest.extend_from_slice(&[b'j'; 500]);
        rest.extend_from_slice(b"\r\n0\r\n\r\nGET /id/after-chunked HTTP/1.1\r\nHost: t\r\n\r\n");
        c.send(&rest);
        assert_eq!(c.response().text(), "id=after-chunked");
    });
}

#[test]
fn max_drain_bytes_large_ignored_body_closes() {
    let _g = shared();
    bounded(LIMIT, || {
        let addr = start(router(), ServerConfig::default().with_max_drain_bytes(1024));
        let mut c = Client::connect(addr);
        c.send(b"POST /ignore HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n");
        let r = c.response();
        assert_eq!((r.status, r.text().as_str()), (200, "ignored"));
        // The server may close with the body unread (a reset) or read a little first.
        // (It could also say `connection: close` in this response, since it knows the
        // remainder is too long when it writes the head; that is not required.)
        let _ = c.s.write_all(&[b'k'; 4096]);
        if let Err(e) = c.closed_within(Duration::from_secs(2)) {
            panic!("100000 unread body bytes (max_drain_bytes 1024) did not close: {e}");
        }

        // Chunked: the length is unknown when the answer goes out, but the server stops
        // draining past max_drain_bytes and closes.
        let mut c = Client::connect(addr);
        c.send(b"POST /ignore HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
        let r = c.response();
        assert_eq!((r.status, r.text().as_str()), (200, "ignored"));
        let mut chunk = b"1000\r\n".to_vec();
        chunk.extend_from_slice(&[b'k'; 0x1000]);
        chunk.extend_from_slice(b"\r\n");
        for _ in 0..25 {
            if c.s.write_all(&chunk).is_err() {
                break;
            }
        }
        if let Err(e) = c.closed_within(Duration::from_secs(2)) {
            panic!("100 KiB of an ignored chunked body (max_drain_bytes 1024) was drained: {e}");
        }
    });
}

// ---------------------------------------------------------------------------------------
// 2. Bad input
// ---------------------------------------------------------------------------------------

#[test]
fn bad_input_is_answered_then_closed() {
    let _g = shared();
    bounded(LIMIT, || {
        let addr = start(router(), ServerConfig::default());
        let cases: &[(&str, &[u8], u16)] = &[
            ("malformed request line", b"GET /\r\nHost: t\r\n\r\n", 400),
            ("garbage request line", b"HELLO THERE\r\n\r\n", 400),
            ("bad method token", b"G(T / HTTP/1.1\r\nHost: t\r\n\r\n", 400),
            (
                "extra token in request line",
                b"GET / HTTP/1.1 x\r\nHost: t\r\n\r\n",
                400,
            ),
            ("bad header name", b"GET / HTTP/1.1\r\nHost: t\r\nBa(d: v\r\n\r\n", 400),
            ("header without colon", b"GET / HTTP/1.1\r\nHost: t\r\nNoColon\r\n\r\n", 400),
            (
                "control byte in header value",
                b"GET / HTTP/1.1\r\nHost: t\r\nX: a\x01b\r\n\r\n",
                400,
            ),
            (
                "content-length and transfer-encoding",
                b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
                400,
            ),
            (
                "differing content-lengths",
                b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
                400,
            ),
            (
                "differing content-lengths in one field",
                b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5, 6\r\n\r\nhello!",
                400,
            ),
            (
                "non-numeric content-length",
                b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5x\r\n\r\nhello",
                400,
            ),
            (
                "bad chunk size",
                b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
                400,
            ),
            (
                "unknown transfer-coding",
                b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: bogus\r\n\r\n",
                501,
            ),
            (
                "gzip transfer-coding",
                b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
                501,
            ),
            ("HTTP/1.1 without Host", b"GET / HTTP/1.1\r\n\r\n", 400),
            ("two Host fields", b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
            (
                "whitespace before colon",
                b"GET / HTTP/1.1\r\nHost : t\r\n\r\n",
                400,
            ),
            (
                "obs-fold",
                b"GET / HTTP/1.1\r\nHost: t\r\nX-Folded: a\r\n b\r\n\r\n",
                400,
            ),
            ("HTTP/2.0 request line", b"GET / HTTP/2.0\r\nHost: t\r\n\r\n", 505),
            ("HTTP/3.0 request line", b"GET / HTTP/3.0\r\nHost: t\r\n\r\n", 505),
        ];
        let mut failures = Vec::new();
        for (name, bytes, want) in cases {
            let mut c = Client::connect(addr);
            c.send(bytes);
            let r = c.response();
            if r.status != *want {
                failures.push(format!("{name}: got {} want {want} ({r:?})", r.status));
                continue;
            }
            if !r.closes() {
                failures.push(format!("{name}: no `connection: close` ({r:?})"));
            }
            if r.header_count("date") != 1 {
                failures.push(format!("{name}: no Date ({r:?})"));
            }
            if let Err(e) = c.closed_within(IO_TIMEOUT) {
                failures.push(format!("{name}: after the {}: {e}", r.status));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));

        // The same bad input after a good request on the same connection.
        let mut c = Client::connect(addr);
        assert_eq!(c.get("/").status, 200);
        c.send(b"GET / HTTP/1.1\r\nHost : t\r\n\r\n");
        let r = c.response();
        assert_eq!(r.status, 400);
        c.expect_closed(IO_TIMEOUT);
        // Identical repeated Content-Length values are fine.
        let mut c = Client::connect(addr);
        c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello");
        let r = c.response();
        assert_eq!((r.status, r.text().as_str()), (200, "hello"));
    });
}

/// A chunked body that turns out malformed after the app has answered without reading it:
/// the client must not see a second response for the one request (it would take it as the
/// answer to its next request); the connection closes.
#[test]
fn bad_chunk_after_the_answer_gives_one_response() {
    let _g = shared();
    bounded(LIMIT, || {
        let addr = start(router(), ServerConfig::default());
        let mut c = Client::connect(addr);
        c.send(b"POST /ignore HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
        let r = c.response();
        assert!(
            r.status == 400 || (r.status == 200 && r.closes()),
            "first response: {r:?}"
        );
        c.expect_closed(IO_TIMEOUT);
    });
}

// ---------------------------------------------------------------------------------------
// 3. Pipelining order
// ---------------------------------------------------------------------------------------

#[test]
fn pipelined_responses_in_request_order() {
    let _g = shared();
    bounded(LIMIT, || {
        let addr = start(router(), ServerConfig::default());
        let mut c = Client::connect(addr);
        let t0 = Instant::now();
        c.send(
            b"GET /sleep/200/first HTTP/1.1\r\nHost: t\r\n\r\n\
              GET /sleep/100/second HTTP/1.1\r\nHost: t\r\n\r\n\
              GET /sleep/0/third HTTP/1.1\r\nHost: t\r\n\r\n",
        );
        for id in ["first", "second", "third"] {
            let r = c.response();
            assert_eq!(r.status, 200);
            assert_eq!(r.text(), format!("id={id}"));
        }
        let took = t0.elapsed();
        assert!(took >= Duration::from_millis(190), "{took:?}");
        eprintln!("pipelined 200/100/0 ms handlers answered in {took:?}");

        // Mixed: bodies between heads, a slow one first; each body carries its id.
        let mut reqs = Vec::new();
        reqs.extend_from_slice(b"GET /sleep/150/a HTTP/1.1\r\nHost: t\r\n\r\n");
        reqs.extend_from_slice(
            b"POST /echo/b HTTP/1.1\r\nHost: t\r\nContent-Length: 7\r\n\r\npayload",
        );
        reqs.extend_from_slice(
            b"POST /echo/c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nchu\r\n4\r\nnked\r\n0\r\n\r\n",
        );
        reqs.extend_from_slice(b"GET /sleep/50/d HTTP/1.1\r\nHost: t\r\n\r\n");
        reqs.extend_from_slice(b"GET /id/e HTTP/1.1\r\nHost: t\r\n\r\n");
        // Sent in small pieces so requests straddle reads.
        for piece in reqs.chunks(17) {
            c.send(piece);
        }
        let want = ["id=a", "id=b;payload", "id=c;chunked", "id=d", "id=e"];
        for w in want {
            let r = c.response();
            assert_eq!(r.status, 200);
            assert_eq!(r.text(), w);
        }
        assert!(c.quiet_for(Duration::from_millis(50)));
    });
}

/// Issue 11, bug 1: behind a service that is not ready (tower's `ConcurrencyLimit` held by
/// a slow request on another connection), two pipelined GETs both get answered once it is
/// ready, without the client sending more (they stalled until the idle timeout).
#[test]
fn pipelined_requests_behind_a_service_that_is_not_ready() {
    let _g = shared();
    bounded(LIMIT, || {
        let app = tower::ServiceBuilder::new()
            .concurrency_limit(1)
            .service(router());
        let addr = start(app, ServerConfig::default());
        let mut slow = Client::connect(addr);
        slow.send(b"GET /sleep/300/slow HTTP/1.1\r\nHost: t\r\n\r\n");
        thread::sleep(Duration::from_millis(50));
        let mut c = Client::connect_within(addr, Duration::from_secs(3));
        let t0 = Instant::now();
        c.send(
            b"GET /id/one HTTP/1.1\r\nHost: t\r\n\r\n\
              GET /id/two HTTP/1.1\r\nHost: t\r\n\r\n",
        );
        assert_eq!(c.response().text(), "id=one");
        assert_eq!(c.response().text(), "id=two");
        let took = t0.elapsed();
        assert!(
            took >= Duration::from_millis(150),
            "not held back at all: {took:?}"
        );
        assert_eq!(slow.response().text(), "id=slow");
        // The connection goes on.
        assert_eq!(c.get("/id/three").text(), "id=three");
    });
}

// ---------------------------------------------------------------------------------------
// 4. Panics
// ---------------------------------------------------------------------------------------

#[test]
fn handler_panic_is_500_and_the_connection_survives() {
    let _g = shared();
    bounded(LIMIT, || {
        let addr = start(router(), ServerConfig::default());
        let mut c = Client::connect(addr);
        let r = c.get("/panic");
        assert_eq!(r.status, 500);
        let r = c.get("/id/after-panic");
        assert_eq!((r.status, r.text().as_str()), (200, "id=after-panic"));
        // Pipelined around a panic.
        c.send(
            b"GET /id/1 HTTP/1.1\r\nHost: t\r\n\r\nGET /panic HTTP/1.1\r\nHost: t\r\n\r\nGET /id/3 HTTP/1.1\r\nHost: t\r\n\r\n",
        );
        assert_eq!(c.response().text(), "id=1");
        assert_eq!(c.response().status, 500);
        assert_eq!(c.response().text(), "id=3");
        // Other connections are fine.
        assert_eq!(Client::connect(addr).get("/").status, 200);

        // A plain service that panics in `call` itself (not in its future).
        let svc = tower::service_fn(|req: Request<Incoming>| {
            if req.uri().path() == "/boom" {
                panic!("service_fn panic (expected by the test)");
            }
            async move { Ok::<_, Infallible>(full(StatusCode::OK, req.uri().path().to_string())) }
        });
        let addr = start(svc, ServerConfig::default());
        let mut c = Client::connect(addr);
        assert_eq!(c.get("/boom").status, 500);
        assert_eq!(c.get("/fine").text(), "/fine");

        // A response body that panics mid-stream: the connection closes (half a response
        // went out), the server keeps serving.
        let app = Router::new()
            .route(
                "/half",
                get(|| async {
                    let s = futures_util::stream::unfold(0u32, |i| async move {
                        match i {
                            0 => Some((Ok::<_, Infallible>(Bytes::from_static(b"part one")), 1)),
                            _ => panic!("body panic (expected by the test)"),
                        }
                    });
                    Body::from_stream(s)
                }),
            )
            .route("/", get(|| async { "ok" }));
        let addr = start(app, ServerConfig::default());
        let mut c = Client::connect(addr);
        c.send(b"GET /half HTTP/1.1\r\nHost: t\r\n\r\n");
        let (status, _) = c.head();
        assert_eq!(status, 200);
        let mut got = Vec::new();
        let mut tmp = [0u8; 1024];
        loop {
            match c.s.read(&mut tmp) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&tmp[..n]),
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("the connection did not close after a body panic: {e}"),
            }
        }
        let got = [c.unconsumed(), &got[..]].concat();
        assert!(find(&got, b"part one").is_some());
        assert!(
            find(&got, b"0\r\n\r\n").is_none(),
            "a failed body must not look complete"
        );
        assert_eq!(Client::connect(addr).get("/").text(), "ok");
    });
}

// ---------------------------------------------------------------------------------------
// 5. Streaming
// ---------------------------------------------------------------------------------------

#[test]
fn streaming_chunks_arrive_as_produced() {
    let _g = shared();
    bounded(LIMIT, || {
        let produced: Arc<Mutex<Vec<Instant>>> = Arc::new(Mutex::new(Vec::new()));
        let p = produced.clone();
        let app = Router::new().route(
            "/events",
            get(move || {
                let p = p.clone();
                async move {
                    let s = futures_util::stream::unfold(0u32, move |i| {
                        let p = p.clone();
                        async move {
                            if i == 4 {
                                return None;
                            }
                            if i > 0 {
                                fibr::time::sleep(Duration::from_millis(100)).await;
                            }
                            p.lock().unwrap().push(Instant::now());
                            Some((Ok::<_, Infallible>(format!("data: {i}\n\n")), i + 1))
                        }
                    });
                    (
                        [("content-type", "text/event-stream")],
                        Body::from_stream(s),
                    )
                }
            }),
        );
        let addr = start(app, ServerConfig::default());
        let mut c = Client::connect(addr);
        c.send(b"GET /events HTTP/1.1\r\nHost: t\r\n\r\n");
        let (status, headers) = c.head();
        assert_eq!(status, 200);
        assert!(headers
            .iter()
            .any(|(n, v)| n == "transfer-encoding" && v == "chunked"));
        let mut seen = Vec::new();
        let mut arrived = Vec::new();
        c.chunked_body(|d| {
            seen.extend_from_slice(d);
            for i in arrived.len()..4 {
                if find(&seen, format!("data: {i}\n\n").as_bytes()).is_some() {
                    arrived.push(Instant::now());
                }
            }
        });
        assert_eq!(
            String::from_utf8(seen).unwrap(),
            "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\n"
        );
        let produced = produced.lock().unwrap().clone();
        assert_eq!((produced.len(), arrived.len()), (4, 4));
        for i in 0..3 {
            assert!(
                arrived[i] < produced[i + 1],
                "event {i} reached the client only after event {} was produced",
                i + 1
            );
        }
        assert_eq!(c.get("/nothing").status, 404);
    });
}

/// A streaming app whose body is `n` chunks of 64 KiB, chunk `i` filled with `i % 251`;
/// `polled` counts the chunks produced. With `yielding`, the stream is pending once before
/// each chunk (as a file or channel source would be now and then).
fn chunks_app(polled: Arc<AtomicUsize>, yielding: bool) -> Router {
    Router::new()
        .route(
            "/big/{n}",
            get(move |Path(n): Path<usize>| {
                let pl = polled.clone();
                async move {
                    let s = futures_util::stream::iter(0..n).then(move |i| {
                        let pl = pl.clone();
                        async move {
                            if yielding {
                                fibr::yield_now().await;
                            }
                            pl.fetch_add(1, Ordering::Relaxed);
                            Ok::<_, Infallible>(Bytes::from(vec![(i % 251) as u8; CHUNK]))
                        }
                    });
                    Body::from_stream(s)
                }
            }),
        )
        .route("/", get(|| async { "ok" }))
}

const CHUNK: usize = 64 * 1024;

/// GETs `/big/{n}` and checks every byte; with `slow`, naps 1 ms per 64 KiB read. Returns
/// how far (in bytes) the producer ever got ahead of the reader.
fn read_chunks(c: &mut Client, n: usize, slow: bool, polled: &AtomicUsize) -> usize {
    c.send(format!("GET /big/{n} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    let (status, _) = c.head();
    assert_eq!(status, 200);
    let mut off = 0usize;
    let mut next_nap = CHUNK;
    let mut max_ahead = 0usize;
    c.chunked_body(|d| {
        for (k, b) in d.iter().enumerate() {
            let want = (((off + k) / CHUNK) % 251) as u8;
            if *b != want {
                panic!("byte {} is {b}, want {want}", off + k);
            }
        }
        off += d.len();
        if slow && off >= next_nap {
            next_nap += CHUNK;
            let produced = polled.load(Ordering::Relaxed) * CHUNK;
            max_ahead = max_ahead.max(produced.saturating_sub(off));
            thread::sleep(Duration::from_millis(1));
        }
    });
    assert_eq!(off, n * CHUNK);
    max_ahead
}

/// A 32 MiB streamed response to a client reading slowly: the server polls the body only
/// as the socket drains, so RSS stays flat.
#[test]
fn streaming_large_response_to_slow_reader_bounds_rss() {
    let _g = exclusive();
    bounded(LIMIT, || {
        const CHUNKS: usize = 512; // 32 MiB
        let polled = Arc::new(AtomicUsize::new(0));
        let addr = start(chunks_app(polled.clone(), false), ServerConfig::default());
        let mut c = Client::connect(addr);
        // Warm up.
        read_chunks(&mut c, 16, false, &polled);
        polled.store(0, Ordering::Relaxed);

        let before = rss();
        let sampler = RssSampler::start(Duration::from_millis(3));
        let t0 = Instant::now();
        let max_ahead = read_chunks(&mut c, CHUNKS, true, &polled);
        let took = t0.elapsed();
        let peak = sampler.finish();
        let grew = peak.saturating_sub(before);
        eprintln!(
            "streaming: 32 MiB to a slow reader in {took:?}; producer at most {} KiB ahead of \
             the reader; RSS {} KiB -> peak {} KiB (+{} KiB)",
            max_ahead / 1024,
            before / 1024,
            peak / 1024,
            grew / 1024
        );
        assert!(
            grew < 8 << 20,
            "RSS grew by {} KiB streaming 32 MiB to a slow reader",
            grew / 1024
        );
        assert!(
            max_ahead < 16 << 20,
            "the body was polled {} KiB ahead of the reader",
            max_ahead / 1024
        );
        assert_eq!(c.get("/").text(), "ok");
    });
}

/// A streamed body whose chunks are all ready at once (`stream::iter`) and larger in total
/// than `response_buffer`: the response must complete without the client sending anything.
#[test]
fn streamed_body_over_response_buffer_completes() {
    let _g = shared();
    bounded(LIMIT, || {
        for yielding in [false, true] {
            let polled = Arc::new(AtomicUsize::new(0));
            let addr = start(
                chunks_app(polled.clone(), yielding),
                ServerConfig::default(),
            );
            let mut c = Client::connect(addr);
            c.s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            read_chunks(&mut c, 16, false, &polled);
            assert_eq!(c.get("/").text(), "ok");
        }
    });
}

/// A full (exact-size) body larger than `response_buffer` on a request that asks to close:
/// all of it, then the close, without the client sending anything more.
#[test]
fn full_body_over_response_buffer_then_close() {
    let _g = shared();
    bounded(LIMIT, || {
        let svc = tower::service_fn(|_req: Request<Incoming>| async move {
            Ok::<_, Infallible>(full(StatusCode::OK, vec![b'f'; 200_000]))
        });
        let addr = start(svc, ServerConfig::default());
        let mut c = Client::connect(addr);
        c.send(b"GET /big HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        let r = c.response();
        assert_eq!(r.body.len(), 200_000);
        assert!(r.closes());
        c.expect_closed(Duration::from_secs(2));
    });
}

// ---------------------------------------------------------------------------------------
// 6. Expect: 100-continue
// ---------------------------------------------------------------------------------------

fn continue_app() -> Router {
    router().route(
        "/slow-echo",
        post(|body: Body| async move {
            fibr::time::sleep(Duration::from_millis(200)).await;
            body.collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default()
        }),
    )
}

#[test]
fn expect_continue_is_sent_when_the_handler_reads() {
    let _g = shared();
    bounded(LIMIT, || {
        let addr = start(continue_app(), ServerConfig::default());
        let mut c = Client::connect(addr);
        let t0 = Instant::now();
        c.send(b"POST /slow-echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
        assert!(
            c.quiet_for(Duration::from_millis(120)),
            "something was sent before the handler read the body: {:?}",
            String::from_utf8_lossy(c.unconsumed())
        );
        let r = c.response();
        let took = t0.elapsed();
        assert_eq!(r.status, 100);
        assert!(
            took >= Duration::from_millis(180),
            "100 Continue after {took:?}"
        );
        c.send(b"hello");
        let r = c.response();
        assert_eq!((r.status, r.text().as_str()), (200, "hello"));
        assert!(!r.closes());
        // The connection goes on.
        assert_eq!(c.get("/id/next").text(), "id=next");

        // A handler that reads at once: 100 at once.
        let mut c = Client::connect(addr);
        c.send(
            b"POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
        );
        let r = c.response();
        assert_eq!(r.status, 100);
        c.send(b"abc");
        assert_eq!(c.response().text(), "abc");
    });
}

/// Issue 11, bug 2: the `100 Continue` of a pipelined upload goes out after the responses
/// before it, not ahead of them as soon as its handler reads the body.
#[test]
fn expect_continue_waits_for_earlier_pipelined_responses() {
    let _g = shared();
    bounded(LIMIT, || {
        let addr = start(router(), ServerConfig::default());
        let mut c = Client::connect(addr);
        c.send(
            b"GET /sleep/200/first HTTP/1.1\r\nHost: t\r\n\r\n\
              POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
        );
        let r = c.response();
        assert_eq!((r.status, r.text().as_str()), (200, "id=first"), "{r:?}");
        assert_eq!(c.response().status, 100);
        c.send(b"abc");
        let r = c.response();
        assert_eq!((r.status, r.text().as_str()), (200, "abc"));
        assert!(!r.closes());
    });
}

#[test]
fn expect_continue_rejected_without_reading_sends_no_100_and_closes() {
    let _g = shared();
    bounded(LIMIT, || {
        let addr = start(continue_app(), ServerConfig::default());
        let mut c = Client::connect(addr);
        c.send(b"POST /reject HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
        let r = c.response();
        assert_eq!(r.status, 401, "{r:?}");
        assert!(r.closes(), "{r:?}");
        // Closed without the client sending the body.
        c.expect_closed(Duration::from_secs(2));
    });
}

// ---------------------------------------------------------------------------------------
// 7. Graceful shutdown
// ---------------------------------------------------------------------------------------

#[test]
fn graceful_shutdown() {
    let _g = shared();
    bounded(LIMIT, || {
        let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let done: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
        let d = done.clone();
        let handle = fibr::spawn(async move {
            let r = fibr::serve(listener, router())
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await;
            *d.lock().unwrap() = Some(Instant::now());
            r
        });

        let mut idle = Client::connect(addr);
        assert_eq!(idle.get("/").status, 200);
        let mut busy = Client::connect(addr);
        busy.send(b"GET /sleep/600/busy HTTP/1.1\r\nHost: t\r\n\r\n");
        thread::sleep(Duration::from_millis(150));

        let signalled = Instant::now();
        tx.send(()).unwrap();

        // Idle keep-alive connections close at once.
        idle.expect_closed(Duration::from_secs(2));
        assert!(signalled.elapsed() < Duration::from_millis(500));

        // New connections are refused.
        let deadline = Instant::now() + Duration::from_secs(1);
        let mut refused = false;
        while Instant::now() < deadline {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    refused = true;
                    break;
                }
                Err(e) => panic!("connect after shutdown: {e}"),
                Ok(s) => {
                    // In the queue as the listener went away: reset, or (taken by the
                    // loop just before) answered as its connection's last, never kept.
                    s.set_read_timeout(Some(Duration::from_millis(300)))
                        .unwrap();
                    let mut s = s;
                    let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
                    let mut answer = Vec::new();
                    let _ = s.read_to_end(&mut answer);
                    let answer = String::from_utf8_lossy(&answer).to_ascii_lowercase();
                    assert!(
                        answer.is_empty() || answer.contains("connection: close"),
                        "kept alive after shutdown: {answer:?}"
                    );
                    thread::sleep(Duration::from_millis(20));
                }
            }
        }
        assert!(
            refused,
            "new connections still accepted 1 s after the signal"
        );

        // The serve future waits for the in-flight request.
        assert!(
            done.lock().unwrap().is_none(),
            "resolved with a request in flight"
        );
        let r = busy.response();
        let answered = Instant::now();
        assert_eq!((r.status, r.text().as_str()), (200, "id=busy"));
        assert!(
            r.closes(),
            "the last response while draining should close: {r:?}"
        );
        busy.expect_closed(Duration::from_secs(2));

        let out = fibr::run(fibr::time::timeout(Duration::from_secs(3), handle))
            .expect("the serve future did not resolve within 3 s of the last response")
            .expect("serve task");
        out.expect("serve returned an error");
        let resolved = done.lock().unwrap().unwrap();
        assert!(resolved + Duration::from_millis(50) >= answered);
        eprintln!(
            "graceful shutdown: resolved {:?} after the signal",
            resolved - signalled
        );
    });
}

/// A signal with no connection open: the serve future resolves promptly.
#[test]
fn graceful_shutdown_with_no_connections() {
    let _g = shared();
    bounded(LIMIT, || {
        let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let handle = fibr::spawn(async move {
            fibr::serve(listener, PathEcho::default())
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await
        });
        let mut c = Client::connect(addr);
        assert_eq!(c.get("/x").text(), "/x");
        drop(c);
        thread::sleep(Duration::from_millis(50));
        tx.send(()).unwrap();
        fibr::run(fibr::time::timeout(Duration::from_secs(2), handle))
            .expect("not resolved")
            .expect("serve task")
            .expect("serve");
    });
}

// ---------------------------------------------------------------------------------------
// 8. HEAD, 204, 304, Date
// ---------------------------------------------------------------------------------------

/// Checks an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") and that it is about now.
fn check_date(v: &str) {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let b = v.as_bytes();
    assert_eq!(b.len(), 29, "Date {v:?}");
    assert!(
        &v[3..5] == ", " && b[7] == b' ' && b[11] == b' ' && b[16] == b' ',
        "Date {v:?}"
    );
    assert!(
        b[19] == b':' && b[22] == b':' && &v[25..] == " GMT",
        "Date {v:?}"
    );
    let num = |r: std::ops::Range<usize>| -> i64 {
        assert!(b[r.clone()].iter().all(u8::is_ascii_digit), "Date {v:?}");
        v[r].parse().unwrap()
    };
    let wday = DAYS.iter().position(|d| *d == &v[..3]).expect("weekday");
    let (day, year) = (num(5..7), num(12..16));
    let month = MONTHS.iter().position(|m| *m == &v[8..11]).expect("month") as i64 + 1;
    let (h, m, s) = (num(17..19), num(20..22), num(23..25));
    assert!(
        (1..=31).contains(&day) && h < 24 && m < 60 && s < 61,
        "Date {v:?}"
    );
    // Days since 1970-01-01 (H. Hinnant's days_from_civil).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    assert_eq!((days + 4).rem_euclid(7) as usize, wday, "weekday of {v:?}");
    let secs = days * 86_400 + h * 3600 + m * 60 + s;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!((secs - now).abs() <= 5, "Date {v:?} is not now");
}

#[test]
fn head_204_304_and_date() {
    let _g = shared();
    bounded(LIMIT, || {
        // axum Router.
        let addr = start(router(), ServerConfig::default());
        let mut c = Client::connect(addr);
        let g = c.get("/hello");
        assert_eq!((g.status, g.text().as_str()), (200, "hello world"));
        check_date(g.header("date").expect("Date"));
        assert_eq!(g.header_count("date"), 1);
        c.send(b"HEAD /hello HTTP/1.1\r\nHost: t\r\n\r\n");
        let h = c.response_to(true);
        assert_eq!(h.status, 200);
        check_date(h.header("date").expect("Date"));
        assert_eq!(h.header("content-length"), g.header("content-length"));
        assert_eq!(h.header("content-type"), g.header("content-type"));
        assert!(h.header("transfer-encoding").is_none());
        // No body: the next bytes are the next response.
        let r = c.get("/id/after-head");
        assert_eq!(r.text(), "id=after-head");

        for path in ["/no-content", "/not-modified"] {
            c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
            let r = c.response();
            assert!(matches!(r.status, 204 | 304), "{r:?}");
            check_date(r.header("date").expect("Date"));
            assert!(r.header("transfer-encoding").is_none(), "{r:?}");
            if r.status == 204 {
                assert!(r.header("content-length").is_none(), "{r:?}");
            }
            assert!(!r.closes());
            let n = c.get("/id/next");
            assert_eq!(n.text(), "id=next", "bytes after {path}");
        }

        // A plain service whose 204 / 304 / HEAD responses carry bodies anyway: the server
        // must not send them.
        let svc = tower::service_fn(|req: Request<Incoming>| async move {
            let status = match req.uri().path() {
                "/204" => StatusCode::NO_CONTENT,
                "/304" => StatusCode::NOT_MODIFIED,
                _ => StatusCode::OK,
            };
            let mut r = full(status, "a body that must not be sent");
            r.headers_mut()
                .insert("content-type", "text/plain".parse().unwrap());
            Ok::<_, Infallible>(r)
        });
        let addr = start(svc, ServerConfig::default());
        let mut c = Client::connect(addr);
        for path in ["/204", "/304"] {
            c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
            let r = c.response();
            assert_eq!(r.status.to_string(), path[1..]);
            check_date(r.header("date").expect("Date"));
            assert!(r.header("transfer-encoding").is_none(), "{r:?}");
            if r.status == 204 {
                assert!(r.header("content-length").is_none(), "{r:?}");
            }
            assert_eq!(c.get("/x").text(), "a body that must not be sent");
        }
        let g = c.get("/plain");
        assert_eq!(g.header("content-length"), Some("28"));
        c.send(b"HEAD /plain HTTP/1.1\r\nHost: t\r\n\r\n");
        let h = c.response_to(true);
        assert_eq!(h.status, 200);
        assert_eq!(h.header("content-type"), Some("text/plain"));
        assert!(c.quiet_for(Duration::from_millis(50)), "HEAD sent a body");
        assert_eq!(c.get("/x").status, 200);
        assert_eq!(
            h.header("content-length"),
            g.header("content-length"),
            "HEAD must carry the Content-Length a GET would: {h:?}"
        );
    });
}

// ---------------------------------------------------------------------------------------
// 9. Concurrency
// ---------------------------------------------------------------------------------------

#[test]
fn concurrency_200_connections_50_requests_each() {
    let _g = shared();
    bounded(LIMIT, || {
        const CONNS: usize = 200;
        const REQS: usize = 50;
        let addr = start(router(), ServerConfig::default());
        let t0 = Instant::now();
        let ok = Arc::new(AtomicUsize::new(0));
        let mut threads = Vec::new();
        for t in 0..CONNS {
            let ok = ok.clone();
            threads.push(
                thread::Builder::new()
                    .stack_size(256 * 1024)
                    .spawn(move || {
                        let mut c = Client::connect(addr);
                        for i in 0..REQS {
                            let r = if i % 5 == 4 {
                                let body = format!("{t}.{i}");
                                c.send(
                                    format!(
                                        "POST /echo/{t}-{i} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n{body}",
                                        body.len()
                                    )
                                    .as_bytes(),
                                );
                                let r = c.response();
                                assert_eq!(r.text(), format!("id={t}-{i};{body}"));
                                r
                            } else {
                                let r = c.get(&format!("/id/{t}-{i}"));
                                assert_eq!(r.text(), format!("id={t}-{i}"));
                                r
                            };
                            assert_eq!(r.status, 200);
                            assert!(!r.closes());
                            ok.fetch_add(1, Ordering::Relaxed);
                        }
                    })
                    .unwrap(),
            );
        }
        for th in threads {
            th.join().expect("client thread");
        }
        assert_eq!(ok.load(Ordering::Relaxed), CONNS * REQS);
        let took = t0.elapsed();
        eprintln!(
            "{} requests over {CONNS} keep-alive connections in {took:?} ({:.0} req/s)",
            CONNS * REQS,
            (CONNS * REQS) as f64 / took.as_secs_f64()
        );
    });
}
