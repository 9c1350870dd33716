//! `fibr::client::Client` against `fibr::serve` and against `axum::serve` on tokio: pooled
//! reuse (the server counts connections), 50 requests in flight, streamed bodies both ways,
//! servers that close idle connections (and the one retry on a fresh connection), pool
//! bound and idle expiry, timeouts, bad servers (garbage, truncated head and body, a hang,
//! refused, DNS failure) as typed errors, response size limits, Unix sockets, the
//! `tower::Service` impl, and use from a fibr handler (a gateway), from `fibr::run` and
//! from inside a tokio runtime.
//!
//! Every test body runs under a watchdog and every await is bounded.

#![cfg(feature = "client")]

mod common;

use axum::body::Body as AxumBody;
use axum::extract::Path;
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use fibr::client::{Client, Connector, ErrorKind, ResponseBody, UnixConnector};
use fibr::http::ConnInfo;
use fibr::net::{TcpListener, UnixListener};
use futures_util::StreamExt;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use std::convert::Infallible;
use std::future::Future;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{bounded, run_bounded, start, step, TempPath, STEP};

// ---------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------

const LIMIT: Duration = Duration::from_secs(15);

/// `fut` under `fibr::run`, bounded by the watchdog.
fn run<T: Send + 'static>(fut: impl Future<Output = T> + Send + 'static) -> T {
    run_bounded(LIMIT, fut)
}

async fn text(res: Response<ResponseBody>) -> String {
    let body = step("body", res.into_body().collect()).await.expect("body");
    String::from_utf8(body.to_bytes().to_vec()).unwrap()
}

async fn get_text(client: &Client, uri: &str) -> String {
    let res = step("response", client.get(uri)).await.expect("request");
    assert_eq!(res.status(), StatusCode::OK, "{uri}");
    text(res).await
}

/// The app both servers run.
fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "hello" }))
        .route("/echo", post(|body: AxumBody| async move { body }))
        .route(
            "/len/{n}",
            get(|Path(n): Path<usize>| async move { vec![b'z'; n] }),
        )
        .route(
            "/chunked/{n}",
            get(|Path(n): Path<usize>| async move {
                // n chunks of 1 KiB, streamed (no content-length).
                let s = futures_util::stream::iter(0..n).then(|i| async move {
                    if i % 64 == 63 {
                        fibr::time::sleep(Duration::from_millis(1)).await;
                    }
                    Ok::<_, Infallible>(Bytes::from(vec![b'a' + (i % 26) as u8; 1024]))
                });
                AxumBody::from_stream(s)
            }),
        )
        .route(
            "/sleep/{ms}",
            get(|Path(ms): Path<u64>| async move {
                fibr::time::sleep(Duration::from_millis(ms)).await;
                "slept"
            }),
        )
}

fn chunked_expect(n: usize) -> String {
    (0..n)
        .map(|i| String::from_utf8(vec![b'a' + (i % 26) as u8; 1024]).unwrap())
        .collect()
}

/// `fibr::serve(app)` with `cfg`; counts connections.
fn fibr_server_with(app: Router, cfg: fibr::http::ServerConfig) -> (SocketAddr, Arc<AtomicUsize>) {
    let conns = Arc::new(AtomicUsize::new(0));
    let c2 = conns.clone();
    let make = tower::service_fn(move |_: ConnInfo| {
        c2.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok::<_, Infallible>(app.clone()))
    });
    (start(make, cfg), conns)
}

fn fibr_server() -> (SocketAddr, Arc<AtomicUsize>) {
    fibr_server_with(app(), fibr::http::ServerConfig::default())
}

/// `axum::serve(app)` on a tokio runtime of its own; counts connections.
fn axum_server() -> (SocketAddr, Arc<AtomicUsize>, tokio::runtime::Runtime) {
    use axum::serve::ListenerExt;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let conns = Arc::new(AtomicUsize::new(0));
    let c2 = conns.clone();
    let addr = rt.block_on(async move {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let l = l.tap_io(move |_| {
            c2.fetch_add(1, Ordering::SeqCst);
        });
        tokio::spawn(async move { axum::serve(l, app()).await });
        addr
    });
    (addr, conns, rt)
}

/// Runs `body(addr, conns)` against both servers.
fn both<F, Fut>(body: F)
where
    F: Fn(SocketAddr, Arc<AtomicUsize>) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (addr, conns) = fibr_server();
    let b = body.clone();
    run(async move { b(addr, conns).await });
    let (addr, conns, rt) = axum_server();
    run(async move { body(addr, conns).await });
    drop(rt);
}

/// A raw TCP server on its own thread: `handle` gets each accepted connection (with a
/// read timeout set) and its index.
fn raw_server(handle: impl Fn(std::net::TcpStream, usize) + Send + Sync + 'static) -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let handle = Arc::new(handle);
    thread::spawn(move || {
        for (i, s) in l.incoming().enumerate() {
            let Ok(s) = s else { return };
            s.set_read_timeout(Some(STEP)).unwrap();
            let h = handle.clone();
            thread::spawn(move || h(s, i));
        }
    });
    addr
}

/// Reads one request head (and no body) from `s`; false on EOF.
fn read_head(s: &mut std::net::TcpStream) -> bool {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => return false,
        }
    }
    true
}

// ---------------------------------------------------------------------------------------
// Pooling and concurrency
// ---------------------------------------------------------------------------------------

#[test]
fn sequential_requests_reuse_one_connection() {
    both(|addr, conns| async move {
        let client = Client::new();
        for _ in 0..20 {
            assert_eq!(get_text(&client, &format!("http://{addr}/")).await, "hello");
        }
        // Bodies with content-length, chunked, and empty all hand the connection back.
        let res = step("len", client.get(format!("http://{addr}/len/5000")))
            .await
            .unwrap();
        assert_eq!(text(res).await.len(), 5000);
        let res = step("chunked", client.get(format!("http://{addr}/chunked/10")))
            .await
            .unwrap();
        assert_eq!(text(res).await, chunked_expect(10));
        let res = step("empty", client.get(format!("http://{addr}/len/0")))
            .await
            .unwrap();
        assert_eq!(text(res).await, "");
        assert_eq!(
            conns.load(Ordering::SeqCst),
            1,
            "one connection for sequential requests"
        );
        assert_eq!(client.idle_connections(), 1);
    });
}

#[test]
fn fifty_in_flight() {
    both(|addr, conns| async move {
        let client = Client::new();
        for wave in 0..2 {
            let t0 = Instant::now();
            let tasks: Vec<_> = (0..50)
                .map(|_| {
                    let client = client.clone();
                    let uri = format!("http://{addr}/sleep/200");
                    fibr::spawn(async move {
                        let res = step("response", client.get(uri)).await.unwrap();
                        text(res).await
                    })
                })
                .collect();
            for t in tasks {
                assert_eq!(step("task", t).await.unwrap(), "slept");
            }
            // All 50 waited together, not one after another.
            assert!(
                t0.elapsed() < Duration::from_secs(3),
                "wave {wave}: {:?}",
                t0.elapsed()
            );
            assert_eq!(
                conns.load(Ordering::SeqCst),
                50,
                "wave {wave}: one connection per request in flight, then reuse"
            );
        }
        assert_eq!(client.idle_connections(), 50);
    });
}

#[test]
fn pool_bound_and_idle_expiry() {
    let (addr, conns) = fibr_server();
    run(async move {
        let client = Client::builder()
            .pool_max_idle_per_host(2)
            .pool_idle_timeout(Duration::from_millis(150))
            .build();
        let tasks: Vec<_> = (0..10)
            .map(|_| {
                let client = client.clone();
                let uri = format!("http://{addr}/sleep/100");
                fibr::spawn(async move { text(step("r", client.get(uri)).await.unwrap()).await })
            })
            .collect();
        for t in tasks {
            step("task", t).await.unwrap();
        }
        assert_eq!(conns.load(Ordering::SeqCst), 10);
        assert_eq!(client.idle_connections(), 2, "bounded per host");
        // The reaper closes them once idle for longer than the timeout.
        fibr::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(client.idle_connections(), 0, "expired");
        assert_eq!(get_text(&client, &format!("http://{addr}/")).await, "hello");
        assert_eq!(conns.load(Ordering::SeqCst), 11);
        // No pooling at all.
        let client = Client::builder().pool_max_idle_per_host(0).build();
        for _ in 0..3 {
            get_text(&client, &format!("http://{addr}/")).await;
        }
        assert_eq!(conns.load(Ordering::SeqCst), 14);
    });
}

/// A body dropped before its end closes its connection (it is not reused half-read).
#[test]
fn dropped_body_is_not_pooled() {
    let (addr, conns) = fibr_server();
    run(async move {
        let client = Client::new();
        let res = step("r", client.get(format!("http://{addr}/len/200000")))
            .await
            .unwrap();
        drop(res);
        assert_eq!(get_text(&client, &format!("http://{addr}/")).await, "hello");
        assert_eq!(conns.load(Ordering::SeqCst), 2);
        assert_eq!(get_text(&client, &format!("http://{addr}/")).await, "hello");
        assert_eq!(conns.load(Ordering::SeqCst), 2);
    });
}

// ---------------------------------------------------------------------------------------
// Streaming
// ---------------------------------------------------------------------------------------

type ChunkTx = tokio::sync::mpsc::Sender<Result<Frame<Bytes>, Infallible>>;

/// A request body fed through a channel, chunk by chunk.
fn channel_body() -> (
    ChunkTx,
    StreamBody<impl futures_util::Stream<Item = Result<Frame<Bytes>, Infallible>> + Send + 'static>,
) {
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let s =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) });
    (tx, StreamBody::new(s))
}

/// Request and response bodies stream at once: each chunk sent comes back through the
/// echo before the next is sent (neither side buffers the whole body).
#[test]
fn streamed_bodies_both_ways() {
    both(|addr, conns| async move {
        let client = Client::new();
        let (tx, body) = channel_body();
        let req = Request::post(format!("http://{addr}/echo"))
            .body(body)
            .unwrap();
        // The first chunk goes before the call: servers may wait for body bytes first.
        tx.send(Ok(Frame::data(Bytes::from_static(b"chunk-0;"))))
            .await
            .unwrap();
        let res = step("echo head", client.request(req)).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let mut body = res.into_body();
        let mut got = Vec::new();
        let mut want = b"chunk-0;".to_vec();
        for i in 1..=30 {
            while got.len() < want.len() {
                let f = step("echoed chunk", body.frame())
                    .await
                    .expect("frame")
                    .expect("ok");
                got.extend_from_slice(&f.into_data().unwrap());
            }
            assert_eq!(got, want);
            let chunk = format!("chunk-{i};");
            want.extend_from_slice(chunk.as_bytes());
            tx.send(Ok(Frame::data(Bytes::from(chunk)))).await.unwrap();
        }
        drop(tx);
        while let Some(f) = step("rest", body.frame()).await {
            got.extend_from_slice(&f.unwrap().into_data().unwrap());
        }
        assert_eq!(got, want);

        // Large: 2 MiB chunked upload (no content-length) echoed back, and a 1 MiB chunked
        // download, on the same pooled connection.
        let chunks = (0..512).map(|i| {
            Ok::<_, Infallible>(Frame::data(Bytes::from(vec![b'a' + (i % 26) as u8; 4096])))
        });
        let req = Request::post(format!("http://{addr}/echo"))
            .body(StreamBody::new(futures_util::stream::iter(chunks)))
            .unwrap();
        let res = step("upload", client.request(req)).await.unwrap();
        let body = text(res).await;
        assert_eq!(body.len(), 512 * 4096);
        assert!(body.as_bytes()[4096..8192].iter().all(|&b| b == b'b'));
        let res = step(
            "download",
            client.get(format!("http://{addr}/chunked/1024")),
        )
        .await
        .unwrap();
        assert!(res.headers().get("content-length").is_none());
        assert_eq!(text(res).await, chunked_expect(1024));
        // Full and String bodies carry a content-length.
        let res = step(
            "full",
            client.request(
                Request::post(format!("http://{addr}/echo"))
                    .body(Full::new(Bytes::from_static(b"full")))
                    .unwrap(),
            ),
        )
        .await
        .unwrap();
        assert_eq!(text(res).await, "full");
        let res = step(
            "string",
            client.request(
                Request::post(format!("http://{addr}/echo"))
                    .body(String::from("string"))
                    .unwrap(),
            ),
        )
        .await
        .unwrap();
        assert_eq!(text(res).await, "string");
        assert_eq!(conns.load(Ordering::SeqCst), 1);
    });
}

// ---------------------------------------------------------------------------------------
// Servers closing connections; retries
// ---------------------------------------------------------------------------------------

/// fibr::serve closes idle keep-alive connections after its idle timeout: the next request
/// goes out on a fresh connection and succeeds.
#[test]
fn server_idle_timeout_then_fresh_connection() {
    let cfg =
        fibr::http::ServerConfig::default().with_idle_timeout(Some(Duration::from_millis(150)));
    let (addr, conns) = fibr_server_with(app(), cfg);
    run(async move {
        let client = Client::new();
        assert_eq!(get_text(&client, &format!("http://{addr}/")).await, "hello");
        fibr::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(get_text(&client, &format!("http://{addr}/")).await, "hello");
        assert_eq!(conns.load(Ordering::SeqCst), 2);
    });
}

/// A server that answers one request per connection with keep-alive, then reads the next
/// request and closes without answering (the close races the reuse). A GET is retried
/// once on a fresh connection; a POST with a body is not (it may have been processed);
/// with retries off, the GET fails as closed-before-response.
#[test]
fn closed_reused_connection_retries_once() {
    let answered = Arc::new(AtomicUsize::new(0));
    let a2 = answered.clone();
    let addr = raw_server(move |mut s, _| {
        if !read_head(&mut s) {
            return;
        }
        a2.fetch_add(1, Ordering::SeqCst);
        s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            .unwrap();
        let _ = read_head(&mut s);
        // Closed with the request unanswered.
    });
    run(async move {
        let client = Client::new();
        let uri = format!("http://{addr}/");
        assert_eq!(get_text(&client, &uri).await, "ok");
        assert_eq!(
            get_text(&client, &uri).await,
            "ok",
            "retried on a fresh connection"
        );
        assert_eq!(answered.load(Ordering::SeqCst), 2);

        let req = Request::post(&uri).body(String::from("data")).unwrap();
        let e = step("post", client.request(req)).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ClosedBeforeResponse, "{e}");
        assert!(e.is_closed());

        let client = Client::builder().retry_canceled_requests(false).build();
        assert_eq!(get_text(&client, &uri).await, "ok");
        let e = step("no retry", client.get(uri.as_str()))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ClosedBeforeResponse, "{e}");
    });
}

// ---------------------------------------------------------------------------------------
// Timeouts and bad servers
// ---------------------------------------------------------------------------------------

#[test]
fn request_timeout() {
    let (addr, _) = fibr_server();
    // Accepts, reads the request, never answers.
    let hang = raw_server(|mut s, _| {
        read_head(&mut s);
        thread::sleep(STEP);
    });
    run(async move {
        let client = Client::builder()
            .request_timeout(Duration::from_millis(200))
            .build();
        for uri in [
            format!("http://{addr}/sleep/3000"),
            format!("http://{hang}/"),
        ] {
            let t0 = Instant::now();
            let e = step("timeout", client.get(uri.as_str())).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
            assert!(e.is_timeout());
            let took = t0.elapsed();
            assert!(
                took >= Duration::from_millis(190) && took < Duration::from_secs(2),
                "{took:?}"
            );
        }
        // Fast requests are unaffected.
        assert_eq!(
            get_text(&client, &format!("http://{addr}/sleep/10")).await,
            "slept"
        );
    });
}

/// A connector that never connects.
struct Blackhole;

impl Connector for Blackhole {
    type Io = fibr::net::TcpStream;
    async fn connect(&self, _dst: &http::Uri) -> Result<fibr::net::TcpStream, fibr::client::Error> {
        std::future::pending().await
    }
}

#[test]
fn connect_errors() {
    run(async {
        // Timeout (through a custom connector).
        let client = Client::builder()
            .connect_timeout(Duration::from_millis(100))
            .build_with_connector(Blackhole);
        let t0 = Instant::now();
        let e = step("connect timeout", client.get("http://example.test/"))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectTimeout, "{e}");
        assert!(e.is_timeout() && e.is_connect());
        assert!(t0.elapsed() < Duration::from_secs(2));

        // Refused: a port nothing listens on.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let client = Client::new();
        let e = step("refused", client.get(format!("http://127.0.0.1:{port}/")))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectRefused, "{e}");
        assert!(e.is_connect());

        // DNS failure (the .invalid TLD never resolves).
        let e = step("dns", client.get("http://no-such-host.invalid/"))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Dns, "{e}");

        // A name that does resolve: localhost (on a resolver thread).
        let (addr, _) = {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            drop(fibr::spawn(async move { fibr::serve(l, app()).await }));
            (addr, ())
        };
        assert_eq!(
            get_text(&client, &format!("http://localhost:{}/", addr.port())).await,
            "hello"
        );

        // Not absolute, or a scheme the HTTP connector does not speak.
        let e = step("relative", client.get("/relative")).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidUri);
        let e = step("https", client.get("https://127.0.0.1:1/"))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidUri, "{e}");
    });
}

#[test]
fn bad_servers_give_typed_errors() {
    let garbage = raw_server(|mut s, _| {
        read_head(&mut s);
        let _ = s.write_all(b"this is not http at all\r\n\r\n");
    });
    let short_head = raw_server(|mut s, _| {
        read_head(&mut s);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-le");
    });
    let short_body = raw_server(|mut s, _| {
        read_head(&mut s);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n0123456789");
    });
    let short_chunked = raw_server(|mut s, _| {
        read_head(&mut s);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n");
    });
    let closes = raw_server(|mut s, _| {
        read_head(&mut s);
    });
    run(async move {
        let client = Client::new();
        let e = step("garbage", client.get(format!("http://{garbage}/")))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Protocol, "{e}");

        let e = step("short head", client.get(format!("http://{short_head}/")))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ClosedBeforeResponse, "{e}");

        let e = step("closes", client.get(format!("http://{closes}/")))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ClosedBeforeResponse, "{e}");

        for addr in [short_body, short_chunked] {
            let res = step("short body", client.get(format!("http://{addr}/")))
                .await
                .unwrap();
            assert_eq!(res.status(), StatusCode::OK);
            let e = step("body", res.into_body().collect()).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::IncompleteBody, "{e}");
            assert!(e.is_closed());
        }
        assert_eq!(client.idle_connections(), 0);
    });
}

#[test]
fn response_body_limit() {
    let (addr, _) = fibr_server();
    run(async move {
        let client = Client::builder().max_response_body_size(4096).build();
        // Within the limit.
        let res = step("ok", client.get(format!("http://{addr}/len/4096")))
            .await
            .unwrap();
        assert_eq!(text(res).await.len(), 4096);
        // Over it, known from content-length: the request fails.
        let e = step("len", client.get(format!("http://{addr}/len/5000")))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BodyTooLarge, "{e}");
        assert!(e.is_body_too_large());
        // Over it while streaming: the body fails.
        let res = step("chunked", client.get(format!("http://{addr}/chunked/8")))
            .await
            .unwrap();
        let e = step("body", res.into_body().collect()).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BodyTooLarge, "{e}");
    });
}

// ---------------------------------------------------------------------------------------
// Where it runs: gateway, tokio, Unix sockets, tower
// ---------------------------------------------------------------------------------------

/// A fibr handler proxies to an upstream (axum on tokio) with the client, streaming the
/// upstream body through.
#[test]
fn gateway_in_a_fibr_handler() {
    let (upstream, up_conns, rt) = axum_server();
    let client = Client::new();
    let gw = Router::new().route(
        "/{*rest}",
        get(move |Path(rest): Path<String>| {
            let client = client.clone();
            async move {
                match client.get(format!("http://{upstream}/{rest}")).await {
                    Ok(res) => res.map(AxumBody::new),
                    Err(e) => {
                        let mut r = Response::new(AxumBody::from(e.to_string()));
                        *r.status_mut() = StatusCode::BAD_GATEWAY;
                        r
                    }
                }
            }
        }),
    );
    let (gw_addr, _) = fibr_server_with(gw, fibr::http::ServerConfig::default());
    run(async move {
        let client = Client::new();
        assert_eq!(
            get_text(&client, &format!("http://{gw_addr}/len/10")).await,
            "z".repeat(10)
        );
        assert_eq!(
            get_text(&client, &format!("http://{gw_addr}/chunked/300")).await,
            chunked_expect(300)
        );
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let client = client.clone();
                let uri = format!("http://{gw_addr}/sleep/50");
                fibr::spawn(async move { text(step("r", client.get(uri)).await.unwrap()).await })
            })
            .collect();
        for t in tasks {
            assert_eq!(step("t", t).await.unwrap(), "slept");
        }
        // The gateway pooled its upstream connections.
        assert!(up_conns.load(Ordering::SeqCst) <= 20);
    });
    drop(rt);
}

/// The client awaited on tokio's runtime (its I/O and timers run on fibr's loops).
#[test]
fn from_inside_tokio() {
    let (addr, conns, rt) = axum_server();
    bounded(LIMIT, move || {
        rt.block_on(async move {
            let client = Client::builder().request_timeout(STEP).build();
            for _ in 0..5 {
                let res = client.get(format!("http://{addr}/")).await.unwrap();
                assert_eq!(res.into_body().collect().await.unwrap().to_bytes(), "hello");
            }
            let h = tokio::spawn({
                let client = client.clone();
                async move {
                    client
                        .get(format!("http://{addr}/sleep/20"))
                        .await
                        .unwrap()
                        .status()
                }
            });
            assert_eq!(h.await.unwrap(), StatusCode::OK);
            assert_eq!(conns.load(Ordering::SeqCst), 1);
        });
    });
}

#[test]
fn unix_sockets() {
    run(async {
        let sock = TempPath::sock("client");
        let path = sock.to_path_buf();
        let l = UnixListener::bind(&path).unwrap();
        drop(fibr::spawn(async move { fibr::serve(l, app()).await }));
        // http+unix URIs through the default connector.
        let client = Client::new();
        let uri = fibr::client::unix_uri(&path, "/len/3").unwrap();
        let res = step("unix", client.get(uri)).await.unwrap();
        assert_eq!(text(res).await, "zzz");
        let uri = fibr::client::unix_uri(&path, "/").unwrap();
        assert_eq!(
            text(step("unix", client.get(uri)).await.unwrap()).await,
            "hello"
        );
        assert_eq!(client.idle_connections(), 1);
        // A connector bound to the socket.
        let client = Client::builder().build_with_connector(UnixConnector::new(&path));
        let res = step("unix connector", client.get("http://localhost/"))
            .await
            .unwrap();
        assert_eq!(res.into_body().collect().await.unwrap().to_bytes(), "hello");
    });
}

#[test]
fn tower_service() {
    use tower::{Service, ServiceExt};
    let (addr, conns) = fibr_server();
    run(async move {
        let client = Client::new();
        let svc = ServiceExt::<Request<http_body_util::Empty<Bytes>>>::map_response(
            client.clone(),
            |r: Response<ResponseBody>| r.status(),
        );
        let req = Request::get(format!("http://{addr}/"))
            .body(http_body_util::Empty::<Bytes>::new())
            .unwrap();
        assert_eq!(
            step("oneshot", svc.oneshot(req)).await.unwrap(),
            StatusCode::OK
        );
        let mut svc = client.clone();
        let svc = step("ready", ServiceExt::<Request<String>>::ready(&mut svc))
            .await
            .unwrap();
        let res = step(
            "call",
            svc.call(
                Request::get(format!("http://{addr}/len/4"))
                    .body(String::new())
                    .unwrap(),
            ),
        )
        .await
        .unwrap();
        assert_eq!(text(res).await, "zzzz");
        assert!(conns.load(Ordering::SeqCst) <= 2);
    });
}
