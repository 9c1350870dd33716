//! Apps shaped like axum's own examples (tokio-rs/axum `examples/`, axum 0.8), served by
//! `fibr::serve` with only the listener and serve lines changed, and driven by real
//! clients over 127.0.0.1: `graceful-shutdown` (the signal is a oneshot instead of
//! SIGTERM), `http-proxy` (CONNECT through `hyper::upgrade::on`), and what fibr's timeouts
//! must not break (a close at the write timeout lingers, so nothing already sent is lost).

mod common;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use common::pki::Pki;
use common::{bounded, connect, find, Client};
use fibr::http::ServerConfig;
use fibr::net::TcpListener;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use tower::ServiceExt;

const LIMIT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------
// graceful-shutdown
// ---------------------------------------------------------------------------------------

/// The example's app: `/slow` sleeps (here 800 ms instead of 5 s), `/` answers at once.
fn graceful_app() -> Router {
    Router::new().route("/", get(|| async { "hi" })).route(
        "/slow",
        get(|| async {
            tokio::time::sleep(Duration::from_millis(800)).await;
            "slow done"
        }),
    )
}

/// A served app with its shutdown signal, and when its serve future resolved.
struct Running {
    addr: SocketAddr,
    signal: Option<tokio::sync::oneshot::Sender<()>>,
    resolved: Arc<Mutex<Option<Instant>>>,
    handle: fibr::JoinHandle<io::Result<()>>,
}

impl Running {
    /// `fibr::serve(listener, app).with_graceful_shutdown(signal)`, as the example has it
    /// (with TLS when `tls` is given).
    fn start(tls: Option<Arc<rustls::ServerConfig>>, cfg: ServerConfig) -> Running {
        let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let resolved = Arc::new(Mutex::new(None));
        let r = resolved.clone();
        let handle = fibr::spawn(async move {
            let serve = fibr::serve(listener, graceful_app())
                .with_config(cfg)
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                });
            let out = match tls {
                Some(tls) => serve.with_tls(tls).await,
                None => serve.await,
            };
            *r.lock().unwrap() = Some(Instant::now());
            out
        });
        Running {
            addr,
            signal: Some(tx),
            resolved,
            handle,
        }
    }

    fn signal(&mut self) -> Instant {
        let at = Instant::now();
        self.signal.take().unwrap().send(()).unwrap();
        at
    }

    /// Waits for the serve future; when it resolved.
    fn resolved(self, within: Duration) -> Instant {
        fibr::run(fibr::time::timeout(within, self.handle))
            .expect("the serve future did not resolve")
            .expect("serve task")
            .expect("serve");
        self.resolved.lock().unwrap().unwrap()
    }
}

/// Reads until EOF (or a reset, which counts as closed too); how long it took.
fn closed_within(s: &mut TcpStream, within: Duration) -> Duration {
    let start = Instant::now();
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return start.elapsed(),
            Ok(_) => {}
            Err(e) if common::is_timeout(&e) => panic!("still open after {within:?}"),
            Err(_) => return start.elapsed(),
        }
    }
}

#[test]
fn graceful_shutdown_closes_connections_with_nothing_in_flight_promptly() {
    bounded(LIMIT, || {
        let mut app = Running::start(None, ServerConfig::default());
        // Accepted, nothing sent.
        let mut silent = connect(app.addr);
        // Between two keep-alive requests.
        let mut kept = Client::connect(app.addr);
        assert_eq!(kept.get("/").text(), "hi");
        // A request in flight.
        let mut slow = Client::connect(app.addr);
        slow.send(b"GET /slow HTTP/1.1\r\nHost: t\r\n\r\n");
        thread::sleep(Duration::from_millis(150));

        let signalled = app.signal();
        let took = closed_within(&mut silent, Duration::from_secs(3));
        assert!(
            took < Duration::from_secs(1),
            "silent one closed after {took:?}"
        );
        kept.expect_closed(Duration::from_secs(1));

        let r = slow.response();
        let answered = Instant::now();
        assert_eq!((r.status, r.text().as_str()), (200, "slow done"));
        assert!(r.closes(), "{r:?}");
        let resolved = app.resolved(Duration::from_secs(3));
        assert!(resolved + Duration::from_millis(50) >= answered);
        assert!(
            resolved - signalled < Duration::from_millis(1500),
            "resolved {:?} after the signal",
            resolved - signalled
        );
    });
}

/// A request already in the connection's socket when the signal comes (here: pipelined
/// behind one in flight, unread while it is) is answered, as the connection's last.
#[test]
fn graceful_shutdown_answers_a_request_already_sent() {
    bounded(LIMIT, || {
        let mut app = Running::start(None, ServerConfig::default().with_max_pipelined(1));
        let mut c = Client::connect(app.addr);
        c.send(b"GET /slow HTTP/1.1\r\nHost: t\r\n\r\n");
        thread::sleep(Duration::from_millis(100));
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        thread::sleep(Duration::from_millis(100));
        app.signal();
        let r = c.response();
        assert_eq!((r.status, r.text().as_str()), (200, "slow done"));
        assert!(!r.closes(), "{r:?}");
        let r = c.response();
        assert_eq!((r.status, r.text().as_str()), (200, "hi"));
        assert!(r.closes(), "{r:?}");
        c.expect_closed(Duration::from_secs(1));
        app.resolved(Duration::from_secs(3));
    });
}

/// A connection accepted just before the signal has `drain_first_request_grace` from its
/// accept to begin its first request: sent within it, it is answered; sent nothing, it
/// closes when the grace is over, not at its idle timeout.
#[test]
fn graceful_shutdown_gives_a_new_connection_the_grace_for_its_first_request() {
    bounded(LIMIT, || {
        let grace = Duration::from_millis(400);
        let mut app = Running::start(
            None,
            ServerConfig::default().with_drain_first_request_grace(grace),
        );
        let mut late = Client::connect(app.addr);
        let mut silent = connect(app.addr);
        let accepted = Instant::now();
        thread::sleep(Duration::from_millis(50));
        app.signal();
        thread::sleep(Duration::from_millis(100));
        late.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = late.response();
        assert_eq!((r.status, r.text().as_str()), (200, "hi"));
        assert!(r.closes(), "{r:?}");
        closed_within(&mut silent, Duration::from_secs(3));
        let open = accepted.elapsed();
        assert!(
            open + Duration::from_millis(20) >= grace && open < grace * 2,
            "closed {open:?} after its accept (grace {grace:?})"
        );
        app.resolved(Duration::from_secs(3));
    });
}

/// HTTP/2 frame header: (length, type, flags, stream).
fn frame_head(b: &[u8]) -> (usize, u8, u8, u32) {
    let len = (b[0] as usize) << 16 | (b[1] as usize) << 8 | b[2] as usize;
    let stream = u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff;
    (len, b[3], b[4], stream)
}

/// Reads HTTP/2 frames until EOF: (type, flags, stream, payload) of each.
fn h2_frames_to_eof(s: &mut TcpStream, within: Duration) -> Vec<(u8, u8, u32, Vec<u8>)> {
    s.set_read_timeout(Some(within)).unwrap();
    let mut all = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if common::is_timeout(&e) => panic!("still open after {within:?}"),
            Err(e) => panic!("h2 read: {e}"),
        }
    }
    let mut frames = Vec::new();
    let mut at = 0;
    while at + 9 <= all.len() {
        let (len, ty, flags, stream) = frame_head(&all[at..]);
        frames.push((ty, flags, stream, all[at + 9..at + 9 + len].to_vec()));
        at += 9 + len;
    }
    frames
}

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const EMPTY_SETTINGS: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];
const GOAWAY: u8 = 7;

#[test]
fn graceful_shutdown_sends_goaway_and_closes_idle_http2_connections() {
    bounded(LIMIT, || {
        let mut app = Running::start(None, ServerConfig::default());
        // h2c with prior knowledge, no stream.
        let mut idle = connect(app.addr);
        idle.write_all(&[PREFACE, EMPTY_SETTINGS].concat()).unwrap();
        // GET /slow on stream 1 (HPACK: :method GET, :scheme http, :path "/slow",
        // :authority "t").
        let mut busy = connect(app.addr);
        let block = [
            0x82, 0x86, 0x44, 5, b'/', b's', b'l', b'o', b'w', 0x41, 1, b't',
        ];
        let mut headers = vec![0, 0, block.len() as u8, 1, 0x05, 0, 0, 0, 1];
        headers.extend_from_slice(&block);
        busy.write_all(&[PREFACE, EMPTY_SETTINGS, &headers].concat())
            .unwrap();
        thread::sleep(Duration::from_millis(150));

        let signalled = app.signal();
        let frames = h2_frames_to_eof(&mut idle, Duration::from_secs(3));
        assert!(
            signalled.elapsed() < Duration::from_secs(1),
            "idle h2 closed after {:?}",
            signalled.elapsed()
        );
        assert!(
            frames.iter().any(|f| f.0 == GOAWAY),
            "no GOAWAY: {frames:?}"
        );

        let frames = h2_frames_to_eof(&mut busy, Duration::from_secs(3));
        let goaway = frames.iter().position(|f| f.0 == GOAWAY).expect("GOAWAY");
        // Its last stream id is 1: the stream in flight is served.
        assert_eq!(&frames[goaway].3[..4], &[0, 0, 0, 1]);
        let body: Vec<u8> = frames
            .iter()
            .filter(|f| f.0 == 0 && f.2 == 1)
            .flat_map(|f| f.3.clone())
            .collect();
        assert_eq!(body, b"slow done");
        assert!(
            frames.iter().any(|f| f.0 == 0 && f.1 & 1 == 1),
            "no END_STREAM"
        );
        app.resolved(Duration::from_secs(3));
    });
}

#[test]
fn graceful_shutdown_closes_idle_and_handshaking_tls_connections_promptly() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let leaf = pki.server(&["localhost"]);
        let mut app = Running::start(
            Some(Arc::new(pki.server_config(&leaf))),
            ServerConfig::default(),
        );
        // Handshake done, no request.
        let tcp = connect(app.addr);
        let client = rustls::ClientConnection::new(
            Arc::new(pki.client_config()),
            "localhost".try_into().unwrap(),
        )
        .unwrap();
        let mut tls = rustls::StreamOwned::new(client, tcp);
        while tls.conn.is_handshaking() {
            tls.conn.complete_io(&mut tls.sock).unwrap();
        }
        // Connected, no ClientHello.
        let mut silent = connect(app.addr);
        // Half a ClientHello (a record header promising more).
        let mut partial = connect(app.addr);
        partial
            .write_all(&[0x16, 0x03, 0x01, 0x01, 0x00, 0x01])
            .unwrap();
        // A request in flight over TLS.
        let tcp = connect(app.addr);
        let client = rustls::ClientConnection::new(
            Arc::new(pki.client_config()),
            "localhost".try_into().unwrap(),
        )
        .unwrap();
        let mut slow = rustls::StreamOwned::new(client, tcp);
        slow.write_all(b"GET /slow HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        slow.flush().unwrap();
        thread::sleep(Duration::from_millis(200));

        let signalled = app.signal();
        for (what, s) in [("silent", &mut silent), ("partial", &mut partial)] {
            let took = closed_within(s, Duration::from_secs(5));
            assert!(
                took < Duration::from_secs(1),
                "{what}: closed after {took:?}"
            );
        }
        let took = closed_within(&mut tls.sock, Duration::from_secs(5));
        assert!(
            took < Duration::from_secs(1),
            "idle TLS: closed after {took:?}"
        );

        let mut answer = Vec::new();
        let _ = slow.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer);
        assert!(
            answer.starts_with("HTTP/1.1 200") && answer.ends_with("slow done"),
            "{answer:?}"
        );
        let resolved = app.resolved(Duration::from_secs(3));
        assert!(
            resolved - signalled < Duration::from_millis(1500),
            "resolved {:?} after the signal",
            resolved - signalled
        );
    });
}

// ---------------------------------------------------------------------------------------
// A close at a timeout lingers
// ---------------------------------------------------------------------------------------

/// A client pauses in the middle of a large download past the write timeout, with its
/// next request sent and not read by the server (one request at a time): the server
/// closes, and the client then reads everything the server had handed to the kernel,
/// then EOF, not a reset.
#[test]
fn a_close_at_the_write_timeout_lingers() {
    bounded(LIMIT, || {
        const BIG: usize = 16 << 20;
        let body = bytes::Bytes::from(vec![b'x'; BIG]);
        let app = Router::new().route(
            "/big",
            get(move || {
                let body = body.clone();
                async move { body }
            }),
        );
        let engine = fibr::Engine::new(
            fibr::Config::default()
                .with_workers(1)
                .with_write_timeout(Duration::from_millis(200)),
            [fibr::Binding::tcp(
                "127.0.0.1:0",
                fibr::http::Server::with_config(app, ServerConfig::default().with_max_pipelined(1)),
            )],
        )
        .unwrap();
        let addr = engine.binding_addrs(0)[0];

        // A small receive buffer, so the server's output stalls.
        let sock =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        sock.set_recv_buffer_size(64 * 1024).unwrap();
        sock.connect(&addr.into()).unwrap();
        let mut s: TcpStream = sock.into();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let mut got = vec![0u8; 4096];
        let n = s.read(&mut got).unwrap();
        got.truncate(n);
        assert!(got.starts_with(b"HTTP/1.1 200"), "{got:?}");
        // The next request: the server reads it only after the download.
        s.write_all(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        // Paused well past the write timeout.
        thread::sleep(Duration::from_millis(800));
        let mut buf = vec![0u8; 1 << 16];
        let end = loop {
            match s.read(&mut buf) {
                Ok(0) => break Ok(()),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) => break Err(e),
            }
        };
        let head = find(&got, b"\r\n\r\n").unwrap() + 4;
        let read = got.len() - head;
        assert!(
            end.is_ok(),
            "{:?} after {read} of {BIG} body bytes (the close reset the connection)",
            end
        );
        assert!(read < BIG, "the whole body came: nothing stalled");
        assert!(read > 256 * 1024, "only {read} body bytes");
        drop(engine);
    });
}

// ---------------------------------------------------------------------------------------
// http-proxy
// ---------------------------------------------------------------------------------------

/// The example's `proxy`: CONNECT's tunnel through `hyper::upgrade::on`, on tokio.
async fn proxy(req: Request) -> Result<Response, hyper::Error> {
    if let Some(host_addr) = req.uri().authority().map(|auth| auth.to_string()) {
        tokio::task::spawn(async move {
            match hyper::upgrade::on(req).await {
                Ok(upgraded) => {
                    if let Err(e) = tunnel(upgraded, host_addr).await {
                        eprintln!("server io error: {e}");
                    };
                }
                Err(e) => eprintln!("upgrade error: {e}"),
            }
        });
        Ok(Response::new(Body::empty()))
    } else {
        Ok((
            StatusCode::BAD_REQUEST,
            "CONNECT must be to a socket address",
        )
            .into_response())
    }
}

async fn tunnel(upgraded: hyper::upgrade::Upgraded, addr: String) -> io::Result<()> {
    let mut server = tokio::net::TcpStream::connect(addr).await?;
    let mut upgraded = hyper_util::rt::TokioIo::new(upgraded);
    tokio::io::copy_bidirectional(&mut upgraded, &mut server).await?;
    Ok(())
}

/// The example's app: CONNECT goes to `proxy`, the rest to a Router. `upgrade`: false
/// answers CONNECT with a 200 and never takes the upgrade.
fn start_proxy(upgrade: bool) -> SocketAddr {
    let router_svc = Router::new().route("/", get(|| async { "Hello, World!" }));
    let tower_service = tower::service_fn(move |req: Request<fibr::http::Incoming>| {
        let router_svc = router_svc.clone();
        let req = req.map(Body::new);
        async move {
            if req.method() == Method::CONNECT {
                if upgrade {
                    proxy(req).await
                } else {
                    Ok(Response::new(Body::empty()))
                }
            } else {
                router_svc.oneshot(req).await.map_err(|err| match err {})
            }
        }
    });
    let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    drop(fibr::spawn(async move {
        if let Err(e) = fibr::serve(listener, tower_service).await {
            eprintln!("serve: {e}");
        }
    }));
    addr
}

/// An origin that echoes what it reads, once per connection.
fn echo_origin() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            thread::spawn(move || {
                let mut r = s.try_clone().unwrap();
                let _ = io::copy(&mut r, &mut s);
            });
        }
    });
    addr
}

/// Reads a response head (through its empty line): the head, and what came after it.
fn read_head(s: &mut TcpStream) -> (String, Vec<u8>) {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(at) = find(&got, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..at + 4]).to_ascii_lowercase();
            return (head, got[at + 4..].to_vec());
        }
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "EOF before a response head: {got:?}");
        got.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn http_proxy_connect_becomes_a_tunnel() {
    bounded(LIMIT, || {
        let proxy = start_proxy(true);
        let origin = echo_origin();
        let mut s = connect(proxy);
        // The tunnel's first bytes come in the same write as the CONNECT.
        s.write_all(
            format!("CONNECT {origin} HTTP/1.1\r\nHost: {origin}\r\n\r\nfirst bytes;").as_bytes(),
        )
        .unwrap();
        let (head, mut after) = read_head(&mut s);
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert!(
            !head.contains("content-length") && !head.contains("transfer-encoding"),
            "a 2xx to CONNECT carries no framing: {head}"
        );
        s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let want = b"first bytes;GET / HTTP/1.1\r\n\r\n";
        let mut buf = [0u8; 256];
        while after.len() < want.len() {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "the tunnel closed: {after:?}");
            after.extend_from_slice(&buf[..n]);
        }
        assert_eq!(after, want, "echoed through the tunnel, not parsed as HTTP");

        // The rest of the app is served as before.
        let mut c = Client::connect(proxy);
        assert_eq!(c.get("/").text(), "Hello, World!");
    });
}

#[test]
fn http_proxy_tunnels_curl() {
    bounded(LIMIT, || {
        let proxy = start_proxy(true);
        let origin = common::start(
            Router::new().route("/hello", get(|| async { "from the origin" })),
            ServerConfig::default(),
        );
        let out = std::process::Command::new("curl")
            .args(["-sS", "--max-time", "10", "-p", "-x"])
            .arg(format!("http://{proxy}"))
            .arg(format!("http://{origin}/hello"))
            .output()
            .expect("curl");
        assert!(
            out.status.success(),
            "curl: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "from the origin");
    });
}

/// A 200 to CONNECT whose service never takes the upgrade: the connection closes after
/// the response, and what the client sent after its CONNECT is not answered as HTTP.
#[test]
fn http_proxy_connect_not_taken_closes() {
    bounded(LIMIT, || {
        let proxy = start_proxy(false);
        let mut s = connect(proxy);
        s.write_all(b"CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n")
            .unwrap();
        let (head, mut after) = read_head(&mut s);
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert!(!head.contains("content-length"), "{head}");
        let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut buf = [0u8; 1024];
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => after.extend_from_slice(&buf[..n]),
                Err(e) if common::is_timeout(&e) => panic!("still open"),
                Err(_) => break,
            }
        }
        assert!(after.is_empty(), "{:?}", String::from_utf8_lossy(&after));
    });
}
