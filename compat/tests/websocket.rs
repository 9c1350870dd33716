//! axum's own `WebSocketUpgrade`, unchanged, on `fibr::serve`: the upgrade request is
//! handed to hyper (which alone can make `OnUpgrade`) on tokio's reactor, where axum's
//! `on_upgrade` task runs. Driven by a tungstenite client. Plus any other
//! `hyper::upgrade::on` user, over a Unix socket.

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::routing::get;
use axum::Router;
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
    use std::io::{Read, Write};
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

/// A protocol of its own (`Upgrade: echo`) through `hyper::upgrade::on`, served by
/// `fibr::serve` on a Unix socket: the 101 goes out, then the upgraded stream echoes,
/// bytes the client sent right behind the request head included.
#[test]
fn any_hyper_upgrade_user_on_a_unix_socket() {
    use axum::body::Body;
    use axum::http::{Request, Response, StatusCode};
    use hyper_util::rt::TokioIo;
    use std::io::{Read, Write};
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

    let path = std::env::temp_dir().join(format!("fibr-upgrade-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let p2 = path.clone();
    std::thread::spawn(move || {
        fibr::run(async move {
            let l = fibr::net::UnixListener::bind(&p2).unwrap();
            fibr::spawn(
                async move { fibr::serve(l, Router::new().route("/", get(upgrade))).await },
            );
        })
    })
    .join()
    .unwrap();

    let mut s = std::os::unix::net::UnixStream::connect(&path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: echo\r\n\r\nearly")
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.ends_with(b"early") {
        let n = s.read(&mut buf).expect("101, then the early bytes echoed");
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
    assert!(text.starts_with("http/1.1 101"), "{text}");
    assert!(text.contains("upgrade: echo"), "{text}");
    for i in 0..50 {
        let msg = format!("message {i}");
        s.write_all(msg.as_bytes()).unwrap();
        let mut echoed = vec![0u8; msg.len()];
        s.read_exact(&mut echoed).unwrap();
        assert_eq!(echoed, msg.as_bytes());
    }
    let _ = std::fs::remove_file(&path);
}
