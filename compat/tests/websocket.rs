//! axum's own `WebSocketUpgrade`, unchanged, on `fibr::serve`: the upgrade request is
//! handed to hyper (which alone can make `OnUpgrade`) on tokio's reactor, where axum's
//! `on_upgrade` task runs. Driven by a tungstenite client. Plus any other
//! `hyper::upgrade::on` user, over a Unix socket, and over TCP behind a request whose
//! large response is still queued in fibr (pipelined, or sent while it is queued): that
//! response goes out whole before hyper's 101, and the upgrade still reaches hyper.

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::routing::get;
use axum::Router;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use tungstenite::{Message as Msg, WebSocket as Client};

/// axum's WebSocket echo example.
fn app() -> Router {
    Router::new().route("/", get(|| async { "plain" })).route(
        "/ws",
        get(|ws: WebSocketUpgrade| async move { ws.max_message_size(32 << 20).on_upgrade(echo) }),
    )
}

async fn echo(mut socket: WebSocket) {
    while let Some(Ok(msg)) = socket.recv().await {
        // Pings are answered by axum itself; a Close ends the loop (see below).
        if matches!(msg, Message::Ping(_) | Message::Pong(_)) {
            continue;
        }
        if matches!(msg, Message::Close(_)) {
            break;
        }
        if socket.send(msg).await.is_err() {
            return;
        }
    }
    // Flushes the close reply tungstenite queued when the client's Close arrived.
    let _ = futures_util::SinkExt::close(&mut socket).await;
}

fn start() -> SocketAddr {
    std::thread::spawn(|| {
        fibr::run(async {
            let l = fibr::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            fibr::spawn(async move { fibr::serve(l, app()).await });
            addr
        })
    })
    .join()
    .unwrap()
}

fn connect(addr: SocketAddr) -> Client<TcpStream> {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let (ws, resp) = tungstenite::client(format!("ws://{addr}/ws"), s).expect("handshake");
    assert_eq!(resp.status(), 101);
    ws
}

#[test]
fn echo_text_binary_ping_and_close() {
    let addr = start();
    let mut ws = connect(addr);
    ws.send(Msg::text("hello")).unwrap();
    assert_eq!(ws.read().unwrap(), Msg::text("hello"));
    ws.send(Msg::binary(vec![1u8, 2, 3])).unwrap();
    assert_eq!(ws.read().unwrap(), Msg::binary(vec![1u8, 2, 3]));
    ws.send(Msg::Ping(b"p".to_vec().into())).unwrap();
    assert_eq!(
        ws.read().unwrap(),
        Msg::Pong(b"p".to_vec().into()),
        "axum answers pings"
    );
    ws.close(None).unwrap();
    loop {
        match ws.read() {
            Ok(Msg::Close(_)) => continue,
            Err(tungstenite::Error::ConnectionClosed) => break,
            other => panic!("expected the close handshake to finish, got {other:?}"),
        }
    }
}

#[test]
fn sixteen_mib_message() {
    let addr = start();
    let mut ws = connect(addr);
    let big: Vec<u8> = (0..16 << 20).map(|i: u32| (i % 253) as u8).collect();
    ws.send(Msg::binary(big.clone())).unwrap();
    match ws.read().unwrap() {
        Msg::Binary(b) => assert!(b[..] == big[..], "16 MiB echo differs"),
        other => panic!("expected binary, got {other:?}"),
    }
}

#[test]
fn many_connections_at_once_and_plain_requests_still_served() {
    let addr = start();
    let clients: Vec<_> = (0..50)
        .map(|i| {
            std::thread::spawn(move || {
                let mut ws = connect(addr);
                for j in 0..20 {
                    let m = format!("{i}-{j}");
                    ws.send(Msg::text(m.clone())).unwrap();
                    assert_eq!(ws.read().unwrap(), Msg::text(m));
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    // Plain HTTP on the same server is still fibr's own dispatcher.
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.ends_with("plain"), "{out}");
}

/// The same close handshake against axum::serve on tokio (the reference behavior).
#[test]
fn reference_close_on_axum_serve() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let addr = rt.block_on(async {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(l, app()).await });
        addr
    });
    let mut ws = connect(addr);
    ws.send(Msg::text("hello")).unwrap();
    assert_eq!(ws.read().unwrap(), Msg::text("hello"));
    ws.close(None).unwrap();
    loop {
        match ws.read() {
            Ok(Msg::Close(_)) => continue,
            Err(tungstenite::Error::ConnectionClosed) => break,
            other => panic!("expected the close handshake to finish, got {other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Any other `hyper::upgrade::on` user
// ---------------------------------------------------------------------------------------

/// Size of `/big`'s response: far more than the socket buffers hold, so most of it is
/// still queued in fibr when the upgrade request behind it is read.
const BIG: usize = 24 << 20;

/// A protocol of its own (`Upgrade: echo`) through `hyper::upgrade::on` on `/`: a 101,
/// then the upgraded stream echoes what it reads. And `/big`: [`BIG`] bytes of `b`.
fn upgrade_app() -> Router {
    use axum::body::Body;
    use axum::http::{Request, Response, StatusCode};
    use hyper_util::rt::TokioIo;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn upgrade(mut req: Request<Body>) -> Response<Body> {
        let on = hyper::upgrade::on(&mut req);
        tokio::spawn(async move {
            let mut io = TokioIo::new(on.await.expect("upgraded"));
            let mut buf = [0u8; 1024];
            loop {
                match io.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        if io.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Response::builder()
            .status(StatusCode::SWITCHING_PROTOCOLS)
            .header("connection", "upgrade")
            .header("upgrade", "echo")
            .body(Body::empty())
            .unwrap()
    }

    Router::new()
        .route("/", get(upgrade))
        .route("/big", get(|| async { vec![b'b'; BIG] }))
}

/// Serves [`upgrade_app`] with `fibr::serve` on an engine of its own, made with `config`,
/// on the listener `listen` makes there. Dropping the engine stops it.
fn serve_upgrades<L>(config: fibr::Config, listen: impl FnOnce() -> io::Result<L>) -> fibr::Engine
where
    L: fibr::http::ServeListener,
{
    let engine = fibr::Engine::new(config, []).unwrap();
    let l = engine.block_on(async { listen() }).unwrap();
    let serve = fibr::serve(l, upgrade_app());
    drop(engine.spawn(async move { serve.await }));
    engine
}

/// Reads more from `s` into `buf` (each read bounded by the socket's read timeout).
fn fill(s: &mut impl Read, buf: &mut Vec<u8>, what: &str) {
    let mut tmp = [0u8; 64 * 1024];
    match s.read(&mut tmp) {
        Ok(0) => panic!("{what}: closed; unread: {:?}", String::from_utf8_lossy(buf)),
        Ok(n) => buf.extend_from_slice(&tmp[..n]),
        Err(e) => panic!("{what}: {e}; unread: {:?}", String::from_utf8_lossy(buf)),
    }
}

/// Everything through the next `delim`, from `buf` and then `s`; the rest stays in `buf`.
fn through(s: &mut impl Read, buf: &mut Vec<u8>, delim: &[u8], what: &str) -> Vec<u8> {
    loop {
        if let Some(i) = buf.windows(delim.len()).position(|w| w == delim) {
            return buf.drain(..i + delim.len()).collect();
        }
        fill(s, buf, what);
    }
}

/// The next `n` bytes, from `buf` and then `s`.
fn take(s: &mut impl Read, buf: &mut Vec<u8>, n: usize, what: &str) -> Vec<u8> {
    while buf.len() < n {
        fill(s, buf, what);
    }
    buf.drain(..n).collect()
}

/// Reads the response to `GET /big`: all of its [`BIG`] bytes, nothing else among them.
fn expect_big(s: &mut impl Read, buf: &mut Vec<u8>) {
    let head = through(s, buf, b"\r\n\r\n", "/big's head");
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        head.contains(&format!("\r\ncontent-length: {BIG}\r\n")),
        "{head}"
    );
    let body = take(s, buf, BIG, "/big's body");
    if let Some(i) = body.iter().position(|&b| b != b'b') {
        let end = (i + 80).min(BIG);
        panic!(
            "foreign bytes inside /big's body at {i} of {BIG}: {:?}",
            String::from_utf8_lossy(&body[i..end])
        );
    }
}

/// Reads hyper's 101 (next in `buf`, then `s`), then checks that the upgraded stream
/// echoes: `early` (sent right behind the upgrade request) first, then 50 messages sent
/// one at a time.
fn expect_upgraded_echo(s: &mut (impl Read + Write), buf: &mut Vec<u8>, early: &[u8]) {
    let head = through(s, buf, b"\r\n\r\n", "the 101");
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(head.contains("\r\nupgrade: echo\r\n"), "{head}");
    let what = "the upgraded stream's echo (did hyper::upgrade::on fail?)";
    assert_eq!(take(s, buf, early.len(), what), early);
    for i in 0..50 {
        let msg = format!("message {i}");
        s.write_all(msg.as_bytes()).unwrap();
        assert_eq!(take(s, buf, msg.len(), what), msg.as_bytes());
    }
}

const UPGRADE: &[u8] = b"GET / HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: echo\r\n\r\n";

/// [`upgrade_app`] served by `fibr::serve` on a Unix socket: the 101 goes out, then the
/// upgraded stream echoes, bytes the client sent right behind the request head included.
#[test]
fn any_hyper_upgrade_user_on_a_unix_socket() {
    let path = std::env::temp_dir().join(format!("fibr-upgrade-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let _engine = serve_upgrades(fibr::Config::default(), || {
        fibr::net::UnixListener::bind(&path)
    });
    let mut s = std::os::unix::net::UnixStream::connect(&path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&[UPGRADE, b"early"].concat()).unwrap();
    expect_upgraded_echo(&mut s, &mut Vec::new(), b"early");
    let _ = std::fs::remove_file(&path);
}

/// An upgrade request pipelined behind a request with a large response, all sent before
/// the client reads anything: fibr must hand it to hyper all the same (answered by fibr's
/// own dispatcher, its 101 would go out with `hyper::upgrade::on` failing), and only
/// once `/big` is written whole (hyper's 101 must not land inside it).
#[test]
fn upgrade_after_pipelined_large_response_keeps_order() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let _engine = serve_upgrades(fibr::Config::default(), || {
        fibr::net::TcpListener::from_std(l)
    });
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&[b"GET /big HTTP/1.1\r\nhost: x\r\n\r\n", UPGRADE, b"early"].concat())
        .unwrap();
    // Not reading yet: fibr's flush stops with most of /big still queued.
    std::thread::sleep(Duration::from_millis(300));
    let mut buf = Vec::new();
    expect_big(&mut s, &mut buf);
    expect_upgraded_echo(&mut s, &mut buf, b"early");
}

/// The same with the upgrade request sent (not pipelined) while the response before it is
/// still queued in fibr: the write watermarks are raised so that fibr keeps reading with
/// that much queued (the default ones give the same race with up to 16 KiB queued).
#[test]
fn upgrade_while_earlier_response_still_queued_keeps_order() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let config = fibr::Config::default()
        .with_write_high_watermark(1 << 30)
        .with_write_low_watermark(1 << 29);
    let _engine = serve_upgrades(config, || fibr::net::TcpListener::from_std(l));
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /big HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    s.write_all(&[UPGRADE, b"early"].concat()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut buf = Vec::new();
    expect_big(&mut s, &mut buf);
    expect_upgraded_echo(&mut s, &mut buf, b"early");
}
