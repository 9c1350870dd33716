//! axum's own `WebSocketUpgrade`, unchanged, on `fibr::serve`: the upgrade request is
//! handed to hyper (which alone can make `OnUpgrade`), and the upgraded socket stays on
//! fibr's loops. Driven by a tungstenite client.

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
