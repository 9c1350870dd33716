//! fibr::ws's keep-alive pings, against a hand-written client over 127.0.0.1: a silent
//! peer is pinged after the interval and dropped after the timeout; one that answers, or
//! that talks anyway, stays.

#![cfg(all(feature = "ws", feature = "axum"))]

mod common;

use axum::routing::get;
use axum::Router;
use common::bounded;
use fibr::net::TcpListener;
use fibr::ws::{close_code, KeepAliveConfig, Message, WebSocket, WebSocketUpgrade};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(30);
const INTERVAL: Duration = Duration::from_millis(300);
const TIMEOUT: Duration = Duration::from_millis(400);

/// Echoes text, and reports how `recv` ended.
fn start() -> (SocketAddr, mpsc::Receiver<Option<String>>) {
    let (tx, rx) = mpsc::channel();
    let app = Router::new().route(
        "/ws",
        get(move |ws: WebSocketUpgrade| {
            let tx = tx.clone();
            async move {
                ws.keepalive(KeepAliveConfig {
                    interval: INTERVAL,
                    timeout: TIMEOUT,
                })
                .on_upgrade(move |mut s: WebSocket| async move {
                    let end = loop {
                        match s.recv().await {
                            Some(Ok(m @ Message::Text(_))) => {
                                if s.send(m).await.is_err() {
                                    break None;
                                }
                            }
                            Some(Ok(_)) => {}
                            Some(Err(e)) => {
                                assert_eq!(e.close_code(), Some(close_code::ABNORMAL));
                                break Some(e.to_string());
                            }
                            None => break None,
                        }
                    };
                    let _ = tx.send(end);
                })
            }
        }),
    );
    let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let addr = listener.local_addr().unwrap();
    drop(fibr::spawn(async move {
        let _ = fibr::serve(listener, app).await;
    }));
    (addr, rx)
}

/// A raw client after the handshake.
fn open(addr: SocketAddr) -> TcpStream {
    let mut s = common::connect(addr);
    s.set_read_timeout(Some(LIMIT)).unwrap();
    s.write_all(
        b"GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
          Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    )
    .unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut b).unwrap();
        head.push(b[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 101"), "{head:?}");
    s
}

/// One unmasked server frame: (first byte, payload); `None` at EOF.
fn read_frame(s: &mut TcpStream) -> Option<(u8, Vec<u8>)> {
    let mut h = [0u8; 2];
    s.read_exact(&mut h).ok()?;
    assert!(h[1] < 126, "a short frame: {h:?}");
    let mut payload = vec![0u8; h[1] as usize];
    s.read_exact(&mut payload).unwrap();
    Some((h[0], payload))
}

/// A masked client frame (a zero mask: the bytes are the payload).
fn write_frame(s: &mut TcpStream, first: u8, payload: &[u8]) {
    let mut f = vec![first, 0x80 | payload.len() as u8, 0, 0, 0, 0];
    f.extend_from_slice(payload);
    s.write_all(&f).unwrap();
}

#[test]
fn a_silent_peer_is_pinged_after_the_interval_and_dropped_after_the_timeout() {
    let (addr, ended) = start();
    bounded(LIMIT, move || {
        let t0 = Instant::now();
        let mut s = open(addr);
        let (first, payload) = read_frame(&mut s).expect("a ping");
        assert_eq!((first, payload.len()), (0x89, 0), "an empty ping");
        let pinged = t0.elapsed();
        // Silence is noticed between one and two intervals after the last bytes.
        assert!(pinged >= INTERVAL, "pinged after {pinged:?}");
        assert!(pinged < 2 * INTERVAL + Duration::from_secs(1), "{pinged:?}");
        // Not answered: the connection ends, without a close frame, after the timeout.
        let (rest, _) = common::read_to_eof(&mut s);
        let closed = t0.elapsed() - pinged;
        assert!(rest.is_empty(), "nothing after the ping: {rest:?}");
        assert!(closed >= TIMEOUT, "closed {closed:?} after the ping");
        assert!(closed < TIMEOUT + Duration::from_secs(1), "{closed:?}");
        let why = ended.recv_timeout(LIMIT).expect("the task ended");
        assert!(
            why.as_deref().is_some_and(|w| w.contains("keep-alive")),
            "{why:?}"
        );
    });
}

#[test]
fn a_peer_that_answers_the_pings_stays_connected() {
    let (addr, ended) = start();
    bounded(LIMIT, move || {
        let mut s = open(addr);
        let t0 = Instant::now();
        let mut pings = 0;
        while t0.elapsed() < 4 * (INTERVAL + TIMEOUT) {
            let (first, payload) = read_frame(&mut s).expect("the connection stays open");
            assert_eq!(first, 0x89, "only pings come");
            pings += 1;
            write_frame(&mut s, 0x8A, &payload);
        }
        assert!(pings >= 3, "{pings} pings");
        write_frame(&mut s, 0x81, b"still here");
        assert_eq!(read_frame(&mut s), Some((0x81, b"still here".to_vec())));
        assert!(ended.try_recv().is_err(), "the socket is still open");
    });
}

#[test]
fn a_peer_that_talks_is_not_pinged() {
    let (addr, _ended) = start();
    bounded(LIMIT, move || {
        let mut s = open(addr);
        let t0 = Instant::now();
        while t0.elapsed() < 4 * INTERVAL {
            write_frame(&mut s, 0x81, b"hi");
            // The echo, not a ping.
            assert_eq!(read_frame(&mut s), Some((0x81, b"hi".to_vec())));
            std::thread::sleep(INTERVAL / 3);
        }
    });
}
