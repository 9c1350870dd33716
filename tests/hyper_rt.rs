//! hyper's own connections on fibr (`fibr::rt::{Executor, Timer}`, `hyper::rt::{Read,
//! Write}` for fibr's streams): `hyper::server::conn::{http1, http2}` serving over
//! `fibr::net` sockets accepted by `fibr::net::TcpListener` and driven by `fibr::spawn`,
//! and `hyper::client::conn::{http1, http2}` over `fibr::net::TcpStream::connect`, against
//! those servers and against servers on tokio (`axum::serve`, hyper's http2 with
//! hyper-util's tokio glue). No tokio runtime is involved on the fibr side: hyper gets
//! fibr's executor, timer and I/O only (without feature `tokio`, the services assert that
//! no tokio runtime is current). With feature `tokio`, fibr's streams also work through
//! tokio's `AsyncRead`/`AsyncWrite`.
//!
//! Every test body runs under a watchdog and every wait is bounded.

#![cfg(feature = "hyper")]

mod common;

use bytes::Bytes;
use fibr::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use fibr::rt::{Executor, Timer};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use std::convert::Infallible;
use std::future::Future;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{bounded, run_bounded, step, TempPath, STEP};

// ---------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------

const LIMIT: Duration = Duration::from_secs(15);

/// `fut` on fibr's default runtime, bounded by the watchdog and by `STEP` per await.
fn run<T: Send + 'static>(fut: impl Future<Output = T> + Send + 'static) -> T {
    run_bounded(LIMIT, fut)
}

type Body = http_body_util::combinators::BoxBody<Bytes, hyper::Error>;

fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).map_err(|never| match never {}).boxed()
}

/// The test service: `GET /` → "hello", `POST /echo` → the body streamed back, `GET
/// /count/N` → N chunks of 1 KiB of "x" (a streamed response; h2 refuses floods of tiny
/// DATA frames, so chunks are not tiny), `GET /sleep/MS` → answer after MS
/// milliseconds on fibr's timer.
async fn app(req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    #[cfg(not(feature = "tokio"))]
    assert!(
        tokio::runtime::Handle::try_current().is_err(),
        "a tokio runtime is current in a service run by fibr"
    );
    let path = req.uri().path().to_string();
    let res = if path == "/" {
        Response::new(full("hello"))
    } else if path == "/echo" {
        Response::new(req.into_body().boxed())
    } else if let Some(n) = path.strip_prefix("/count/") {
        let n: usize = n.parse().unwrap();
        let chunks =
            (0..n).map(|_| Ok::<_, hyper::Error>(Frame::data(Bytes::from(vec![b'x'; 1024]))));
        Response::new(StreamBody::new(futures_util::stream::iter(chunks)).boxed())
    } else if let Some(ms) = path.strip_prefix("/sleep/") {
        fibr::time::sleep(Duration::from_millis(ms.parse().unwrap())).await;
        Response::new(full("slept"))
    } else {
        let mut r = Response::new(full("not found"));
        *r.status_mut() = StatusCode::NOT_FOUND;
        r
    };
    Ok(res)
}

#[derive(Clone, Copy, PartialEq)]
enum Proto {
    H1,
    H2,
}

/// Serves `app` with hyper's own server connections on fibr sockets, one fibr task per
/// connection; answers the address and a connection counter.
async fn hyper_server(proto: Proto) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let conns = Arc::new(AtomicUsize::new(0));
    let c2 = conns.clone();
    drop(fibr::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            c2.fetch_add(1, Ordering::SeqCst);
            drop(fibr::spawn(async move {
                let svc = service_fn(app);
                let r = match proto {
                    Proto::H1 => {
                        hyper::server::conn::http1::Builder::new()
                            .timer(Timer)
                            .header_read_timeout(Duration::from_secs(2))
                            .serve_connection(stream, svc)
                            .await
                    }
                    Proto::H2 => {
                        hyper::server::conn::http2::Builder::new(Executor)
                            .timer(Timer)
                            .keep_alive_interval(Duration::from_millis(100))
                            .max_concurrent_streams(1000)
                            .serve_connection(stream, svc)
                            .await
                    }
                };
                if let Err(e) = r {
                    if !e.is_incomplete_message() {
                        eprintln!("server connection: {e}");
                    }
                }
            }));
        }
    }));
    (addr, conns)
}

/// An HTTP/1 or HTTP/2 `SendRequest`, with its connection driven by a fibr task.
enum Sender {
    H1(hyper::client::conn::http1::SendRequest<Body>),
    H2(hyper::client::conn::http2::SendRequest<Body>),
}

impl Sender {
    async fn connect(addr: SocketAddr, proto: Proto) -> Sender {
        let io = TcpStream::connect(addr).await.expect("connect");
        match proto {
            Proto::H1 => {
                let (tx, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
                drop(fibr::spawn(async move {
                    let _ = conn.await;
                }));
                Sender::H1(tx)
            }
            Proto::H2 => {
                let (tx, conn) = hyper::client::conn::http2::Builder::new(Executor)
                    .timer(Timer)
                    .handshake(io)
                    .await
                    .unwrap();
                drop(fibr::spawn(async move {
                    let _ = conn.await;
                }));
                Sender::H2(tx)
            }
        }
    }

    async fn send(&mut self, req: Request<Body>) -> Response<Incoming> {
        match self {
            Sender::H1(tx) => {
                step("ready", tx.ready()).await.unwrap();
                step("response", tx.send_request(req)).await.unwrap()
            }
            Sender::H2(tx) => {
                step("ready", tx.ready()).await.unwrap();
                step("response", tx.send_request(req)).await.unwrap()
            }
        }
    }
}

fn get(addr: SocketAddr, path: &str, proto: Proto) -> Request<Body> {
    let mut req = Request::get(path);
    if proto == Proto::H2 {
        req = Request::get(format!("http://{addr}{path}"));
    }
    req.header("host", addr.to_string())
        .body(full(Bytes::new()))
        .unwrap()
}

async fn text(res: Response<Incoming>) -> String {
    let body = step("body", res.into_body().collect()).await.unwrap();
    String::from_utf8(body.to_bytes().to_vec()).unwrap()
}

/// GET /, POST /echo with a streamed request body, a streamed response, sequentially on
/// one connection.
async fn exercise(addr: SocketAddr, proto: Proto) {
    let mut tx = Sender::connect(addr, proto).await;
    for _ in 0..3 {
        let res = tx.send(get(addr, "/", proto)).await;
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(text(res).await, "hello");
    }
    // A request body of 64 chunks of 1 KiB, produced as the connection sends it.
    let chunks = (0..64).map(|i| {
        Ok::<_, hyper::Error>(Frame::data(Bytes::from(vec![b'a' + (i % 26) as u8; 1024])))
    });
    let uri = match proto {
        Proto::H1 => "/echo".to_string(),
        Proto::H2 => format!("http://{addr}/echo"),
    };
    let req = Request::post(uri)
        .header("host", addr.to_string())
        .body(StreamBody::new(futures_util::stream::iter(chunks)).boxed())
        .unwrap();
    let res = tx.send(req).await;
    let body = text(res).await;
    assert_eq!(body.len(), 64 * 1024);
    assert!(body.starts_with(&"a".repeat(1024)));
    let res = tx.send(get(addr, "/count/200", proto)).await;
    assert_eq!(text(res).await, "x".repeat(200 * 1024));
    let res = tx.send(get(addr, "/nope", proto)).await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
}

// ---------------------------------------------------------------------------------------
// hyper's servers on fibr, hyper's clients on fibr
// ---------------------------------------------------------------------------------------

#[test]
fn http1_server_and_client_on_fibr() {
    run(async {
        let (addr, conns) = hyper_server(Proto::H1).await;
        exercise(addr, Proto::H1).await;
        assert_eq!(conns.load(Ordering::SeqCst), 1, "one keep-alive connection");
    });
}

#[test]
fn http2_server_and_client_on_fibr() {
    run(async {
        let (addr, conns) = hyper_server(Proto::H2).await;
        exercise(addr, Proto::H2).await;
        assert_eq!(conns.load(Ordering::SeqCst), 1);
    });
}

/// hyper spawns a task per HTTP/2 stream through the executor: 300 streams at once on one
/// connection, each answering after a timer, all in flight together.
#[test]
fn http2_many_concurrent_streams() {
    run(async {
        let (addr, conns) = hyper_server(Proto::H2).await;
        let Sender::H2(tx) = Sender::connect(addr, Proto::H2).await else {
            unreachable!()
        };
        let started = Instant::now();
        let mut tasks = Vec::new();
        for i in 0..300 {
            let mut tx = tx.clone();
            tasks.push(fibr::spawn(async move {
                let path = if i % 2 == 0 {
                    "/sleep/200"
                } else {
                    "/count/16"
                };
                let req = get(addr, path, Proto::H2);
                step("ready", tx.ready()).await.unwrap();
                let res = step("response", tx.send_request(req)).await.unwrap();
                assert_eq!(res.status(), StatusCode::OK);
                text(res).await
            }));
        }
        for (i, t) in tasks.into_iter().enumerate() {
            let body = step("stream task", t).await.unwrap();
            let want = if i % 2 == 0 {
                "slept".to_string()
            } else {
                "x".repeat(16 * 1024)
            };
            assert_eq!(body, want);
        }
        // 150 sleeps of 200 ms ran concurrently, not one after another.
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(conns.load(Ordering::SeqCst), 1);
    });
}

/// http1's header_read_timeout runs on fibr's Timer: a client that sends half a head is
/// disconnected after the timeout, not before and not never.
#[test]
fn http1_header_read_timeout_uses_fibr_timer() {
    bounded(LIMIT, || {
        let (addr, _) = fibr::run(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            drop(fibr::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    drop(fibr::spawn(async move {
                        let _ = hyper::server::conn::http1::Builder::new()
                            .timer(Timer)
                            .header_read_timeout(Duration::from_millis(300))
                            .serve_connection(stream, service_fn(app))
                            .await;
                    }));
                }
            }));
            (addr, ())
        });
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(STEP)).unwrap();
        let t0 = Instant::now();
        s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n").unwrap();
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        let took = t0.elapsed();
        assert!(
            took >= Duration::from_millis(250) && took < Duration::from_secs(3),
            "closed after {took:?}"
        );
        // A complete request on a fresh connection is answered.
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(STEP)).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).unwrap();
        let resp = String::from_utf8_lossy(&buf);
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
        assert!(resp.ends_with("hello"), "{resp}");
    });
}

/// fibr's Timer moves a sleep in place on reset (hyper's h2 keep-alive and h1 timeouts
/// reset theirs); the reset deadline is honored.
#[test]
fn timer_reset_moves_the_deadline() {
    run(async {
        use hyper::rt::Timer as _;
        let t = Timer;
        let mut s = t.sleep(Duration::from_secs(60));
        let t0 = Instant::now();
        t.reset(&mut s, Instant::now() + Duration::from_millis(50));
        step("reset sleep", s.as_mut()).await;
        let took = t0.elapsed();
        assert!(
            took >= Duration::from_millis(45) && took < Duration::from_secs(2),
            "{took:?}"
        );
        // A sleep of another kind is replaced.
        struct Other;
        impl Future for Other {
            type Output = ();
            fn poll(
                self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<()> {
                std::task::Poll::Pending
            }
        }
        impl hyper::rt::Sleep for Other {}
        let mut s: std::pin::Pin<Box<dyn hyper::rt::Sleep>> = Box::pin(Other);
        t.reset(&mut s, Instant::now() + Duration::from_millis(10));
        step("replaced sleep", s.as_mut()).await;
    });
}

/// hyper http1 over fibr's Unix sockets, both ends.
#[test]
fn http1_over_unix_sockets() {
    run(async {
        let sock = TempPath::sock("hyper-rt");
        let path = sock.to_path_buf();
        let listener = UnixListener::bind(&path).unwrap();
        drop(fibr::spawn(async move {
            while let Ok(stream) = listener.accept().await {
                drop(fibr::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(stream, service_fn(app))
                        .await;
                }));
            }
        }));
        let io = UnixStream::connect(&path).await.unwrap();
        let (mut tx, conn) = hyper::client::conn::http1::handshake::<_, Body>(io)
            .await
            .unwrap();
        drop(fibr::spawn(async move {
            let _ = conn.await;
        }));
        for _ in 0..3 {
            let req = Request::get("/")
                .header("host", "localhost")
                .body(full(""))
                .unwrap();
            step("ready", tx.ready()).await.unwrap();
            let res = step("unix response", tx.send_request(req)).await.unwrap();
            assert_eq!(text(res).await, "hello");
        }
    });
}

// ---------------------------------------------------------------------------------------
// hyper's clients on fibr against servers on tokio
// ---------------------------------------------------------------------------------------

fn axum_app() -> axum::Router {
    use axum::routing::{get, post};
    axum::Router::new()
        .route("/", get(|| async { "hello" }))
        .route("/echo", post(|b: axum::body::Bytes| async move { b }))
        .route(
            "/count/{n}",
            get(|axum::extract::Path(n): axum::extract::Path<usize>| async move { "x".repeat(n * 1024) }),
        )
        .route(
            "/sleep/{ms}",
            get(|axum::extract::Path(ms): axum::extract::Path<u64>| async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                "slept"
            }),
        )
}

/// A tokio runtime on its own threads, kept alive by the returned value.
fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn http1_client_on_fibr_to_axum_on_tokio() {
    let rt = tokio_rt();
    let addr = rt.block_on(async {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(l, axum_app()).await });
        addr
    });
    run(async move { exercise(addr, Proto::H1).await });
    drop(rt);
}

#[test]
fn http2_client_on_fibr_to_hyper_h2_on_tokio() {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    let rt = tokio_rt();
    let addr = rt.block_on(async {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let svc = service_fn(|req: Request<Incoming>| {
                        use tower::ServiceExt;
                        axum_app().oneshot(req.map(axum::body::Body::new))
                    });
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .timer(TokioTimer::new())
                        .serve_connection(TokioIo::new(s), svc)
                        .await;
                });
            }
        });
        addr
    });
    run(async move {
        exercise(addr, Proto::H2).await;
        // Concurrent streams against tokio's server too.
        let Sender::H2(tx) = Sender::connect(addr, Proto::H2).await else {
            unreachable!()
        };
        let tasks: Vec<_> = (0..100)
            .map(|_| {
                let mut tx = tx.clone();
                fibr::spawn(async move {
                    step("ready", tx.ready()).await.unwrap();
                    let res = step(
                        "response",
                        tx.send_request(get(addr, "/sleep/100", Proto::H2)),
                    )
                    .await
                    .unwrap();
                    text(res).await
                })
            })
            .collect();
        for t in tasks {
            assert_eq!(step("stream task", t).await.unwrap(), "slept");
        }
    });
    drop(rt);
}

// ---------------------------------------------------------------------------------------
// tokio's AsyncRead / AsyncWrite (feature tokio)
// ---------------------------------------------------------------------------------------

/// fibr streams through tokio's I/O traits: `tokio::io::copy` echo on a fibr server,
/// `AsyncReadExt`/`AsyncWriteExt` on a fibr client, and hyper-util's `TokioIo` adapter.
#[cfg(feature = "tokio")]
#[test]
fn tokio_async_read_write() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    run(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(fibr::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                drop(fibr::spawn(async move {
                    let (mut r, mut w) = (&s, &s);
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                    let _ = w.shutdown().await;
                }));
            }
        }));
        let c = TcpStream::connect(addr).await.unwrap();
        let payload: Vec<u8> = (0..256 * 1024).map(|i| (i % 251) as u8).collect();
        let p2 = payload.clone();
        let (mut rd, mut wr) = (&c, &c);
        let write = async {
            wr.write_all(&p2).await.unwrap();
            AsyncWriteExt::shutdown(&mut wr).await.unwrap();
        };
        let read = async {
            let mut got = Vec::new();
            rd.read_to_end(&mut got).await.unwrap();
            got
        };
        let ((), got) = step("echo", futures_util::future::join(write, read)).await;
        assert_eq!(got, payload);

        // hyper through hyper-util's TokioIo over a fibr stream (tokio traits underneath).
        let (http_addr, _) = hyper_server(Proto::H1).await;
        let io = hyper_util::rt::TokioIo::new(TcpStream::connect(http_addr).await.unwrap());
        let (mut tx, conn) = hyper::client::conn::http1::handshake::<_, Body>(io)
            .await
            .unwrap();
        drop(fibr::spawn(async move {
            let _ = conn.await;
        }));
        let req = Request::get("/")
            .header("host", "x")
            .body(full(""))
            .unwrap();
        step("ready", tx.ready()).await.unwrap();
        let res = step("response", tx.send_request(req)).await.unwrap();
        assert_eq!(text(res).await, "hello");
    });
}
