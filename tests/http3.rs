//! HTTP/3 on fibr (`serve(..).with_tls(..).with_http3()`) against a peer we did not write:
//! quinn + h3-quinn on tokio, over real UDP on 127.0.0.1. GET, POST echoed back, a
//! streaming response, concurrent requests on one connection, trailers both ways, and
//! the Alt-Svc that HTTPS responses carry.

mod common;

use axum::body::Bytes;
use common::h3::*;
use common::pki::Pki;
use fibr::http::{Http3Config, ServerConfig};
use fibr::net::TcpListener;
use http::{HeaderMap, HeaderValue, Request, StatusCode};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn quinn_client_gets_posts_streams_and_sees_trailers() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let addr = start(&pki);
        // HTTPS answers first (so the UDP socket, bound before the listener is registered,
        // is there) and advertises HTTP/3 on the same port.
        let head = https_get(&pki, addr).to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{head}");
        let alt = format!("alt-svc: h3=\":{}\"", addr.port());
        assert!(head.contains(&alt), "no `{alt}` in:\n{head}");

        tokio_rt().block_on(async {
            let (endpoint, mut send) = h3_connect(&pki, addr).await;

            let got = exchange(&mut send, get_req("/"), b"", None).await;
            assert_eq!(got.status, StatusCode::OK);
            assert_eq!(got.body, b"hello over h3");

            let got = exchange(&mut send, get_req("/missing"), b"", None).await;
            assert_eq!(got.status, StatusCode::NOT_FOUND);

            // A body larger than one datagram and than the default 64 KiB body buffer.
            let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
            let got = exchange(&mut send, post_to("/echo"), &body, None).await;
            assert_eq!(got.status, StatusCode::OK);
            assert!(
                got.body == body,
                "echo differs ({} bytes back)",
                got.body.len()
            );

            let got = exchange(&mut send, get_req("/stream"), b"", None).await;
            assert_eq!(got.body.len(), CHUNKS * CHUNK);
            for (i, c) in got.body.chunks(CHUNK).enumerate() {
                assert!(c.iter().all(|&b| b == i as u8), "chunk {i} corrupted");
            }

            let got = exchange(&mut send, get_req("/trailers"), b"", None).await;
            assert_eq!(got.body, b"with trailers");
            let trailers = got.trailers.expect("response trailers");
            assert_eq!(trailers.get("x-checksum").unwrap(), "abc");

            let mut sent = HeaderMap::new();
            sent.insert("x-sent", HeaderValue::from_static("yes"));
            let got = exchange(
                &mut send,
                post_to("/request-trailers"),
                b"12345",
                Some(sent),
            )
            .await;
            assert_eq!(String::from_utf8_lossy(&got.body), "5 bytes, x-sent=yes");

            drop(send);
            endpoint.close(0u32.into(), b"done");
        });
    });
}

#[test]
fn twenty_concurrent_requests_on_one_connection() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let addr = start(&pki);
        assert!(https_get(&pki, addr).starts_with("HTTP/1.1 200"));
        tokio_rt().block_on(async {
            let (endpoint, send) = h3_connect(&pki, addr).await;
            let requests = (0..20).map(|i| {
                let mut send = send.clone();
                async move {
                    let body = format!("request {i} ").repeat(1000);
                    let got = exchange(&mut send, post_to("/echo"), body.as_bytes(), None).await;
                    assert_eq!(got.status, StatusCode::OK);
                    assert!(got.body == body.as_bytes(), "request {i}: wrong echo");
                }
            });
            futures_util::future::join_all(requests).await;
            drop(send);
            endpoint.close(0u32.into(), b"done");
        });
    });
}

#[test]
fn garbage_datagrams_are_dropped_and_requests_still_served() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let addr = start(&pki);
        assert!(https_get(&pki, addr).starts_with("HTTP/1.1 200"));
        let junk = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut seed = 0x9e37_79b9_u32;
        for len in [0usize, 1, 5, 20, 1200, 1500, 9000] {
            for first in [0x00u8, 0x40, 0xc0, 0xff] {
                let mut d: Vec<u8> = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 17;
                        seed ^= seed << 5;
                        seed as u8
                    })
                    .collect();
                if let Some(b) = d.first_mut() {
                    *b = first;
                }
                junk.send_to(&d, addr).unwrap();
            }
        }
        tokio_rt().block_on(async {
            let (endpoint, mut send) = h3_connect(&pki, addr).await;
            let got = exchange(&mut send, get_req("/"), b"", None).await;
            assert_eq!(got.body, b"hello over h3");
            endpoint.close(0u32.into(), b"done");
        });
    });
}

#[test]
fn connections_past_max_connections_are_refused() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let addr = start_with(
            &pki,
            h3_config(Http3Config::default().with_max_connections(1)),
        );
        assert!(https_get(&pki, addr).starts_with("HTTP/1.1 200"));
        tokio_rt().block_on(async {
            let (endpoint, mut send) = h3_connect(&pki, addr).await;
            let second = endpoint.connect(addr, "localhost").unwrap().await;
            assert!(
                matches!(second, Err(quinn::ConnectionError::ConnectionClosed(_))),
                "the second connection was not refused: {second:?}"
            );
            // The first is undisturbed.
            let got = exchange(&mut send, get_req("/"), b"", None).await;
            assert_eq!(got.body, b"hello over h3");
            endpoint.close(0u32.into(), b"done");
        });
    });
}

#[test]
fn max_concurrent_streams_bounds_the_client_and_idle_connections_close() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let cfg = Http3Config::default()
            .with_max_concurrent_streams(2)
            .with_idle_timeout(Duration::from_millis(500));
        let addr = start_with(&pki, h3_config(cfg));
        assert!(https_get(&pki, addr).starts_with("HTTP/1.1 200"));
        tokio_rt().block_on(async {
            let endpoint = quinn_endpoint(&pki);
            let conn = quic_connect(&endpoint, addr).await;
            let _a = conn.open_bi().await.unwrap();
            let _b = conn.open_bi().await.unwrap();
            let third = tokio::time::timeout(Duration::from_millis(300), conn.open_bi()).await;
            assert!(third.is_err(), "a third stream opened past the limit of 2");
            // Nothing is sent: the server's 500 ms idle timeout closes the connection.
            let started = std::time::Instant::now();
            let why = tokio::time::timeout(Duration::from_secs(10), conn.closed())
                .await
                .expect("the idle connection was not closed");
            assert!(matches!(why, quinn::ConnectionError::TimedOut), "{why:?}");
            assert!(started.elapsed() < Duration::from_secs(5));
        });
    });
}

/// An HTTP/3 client in Python (aioquic): GET, POST echoed back, the streaming route and
/// 20 concurrent requests on one connection.
const AIOQUIC_CLIENT: &str = r#"
import asyncio, sys
from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration

class Client(QuicConnectionProtocol):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.h3 = H3Connection(self._quic)
        self.waiting = {}

    def quic_event_received(self, event):
        for ev in self.h3.handle_event(event):
            st = self.waiting.get(getattr(ev, "stream_id", None))
            if st is None:
                continue
            if isinstance(ev, HeadersReceived):
                st["headers"] = st["headers"] or dict(ev.headers)
            elif isinstance(ev, DataReceived):
                st["body"] += ev.data
            if ev.stream_ended and not st["done"].done():
                st["done"].set_result(None)

    async def request(self, method, path, body=b""):
        sid = self._quic.get_next_available_stream_id()
        st = {"headers": None, "body": b"", "done": self._loop.create_future()}
        self.waiting[sid] = st
        head = [(b":method", method), (b":scheme", b"https"),
                (b":authority", b"localhost"), (b":path", path)]
        self.h3.send_headers(sid, head, end_stream=not body)
        if body:
            self.h3.send_data(sid, body, end_stream=True)
        self.transmit()
        await st["done"]
        return int(st["headers"][b":status"]), st["body"]

async def main(port, ca, chunks, chunk):
    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name="localhost")
    cfg.load_verify_locations(ca)
    async with connect("127.0.0.1", port, configuration=cfg, create_protocol=Client) as c:
        got = await c.request(b"GET", b"/")
        assert got == (200, b"hello over h3"), got
        body = bytes(range(256)) * 1000
        status, back = await c.request(b"POST", b"/echo", body)
        assert status == 200 and back == body, (status, len(back))
        status, back = await c.request(b"GET", b"/stream")
        assert back == b"".join(bytes([i]) * chunk for i in range(chunks)), len(back)
        bodies = [b"%d " % i * 1000 for i in range(20)]
        got = await asyncio.gather(*[c.request(b"POST", b"/echo", b) for b in bodies])
        assert got == [(200, b) for b in bodies], [s for s, _ in got]
    print("ok")

asyncio.run(main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
"#;

#[test]
fn aioquic_client_gets_posts_streams_and_runs_twenty_at_once() {
    common::require_python("aioquic");
    let pki = Pki::new();
    let addr = start(&pki);
    assert!(https_get(&pki, addr).starts_with("HTTP/1.1 200"));
    let out = std::process::Command::new("timeout")
        .arg("30")
        .args(["python3", "-c", AIOQUIC_CLIENT])
        .arg(addr.port().to_string())
        .arg(pki.ca_pem.path())
        .args([CHUNKS.to_string(), CHUNK.to_string()])
        .output()
        .expect("python3");
    assert!(
        out.status.success() && out.stdout.starts_with(b"ok"),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn graceful_shutdown_finishes_the_request_in_flight_then_closes() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let (addr, serve) = h3_serve(&pki);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (done_tx, done) = std::sync::mpsc::channel();
        drop(fibr::spawn(async move {
            let serve = serve.with_graceful_shutdown(async move {
                let _ = stopped.await;
            });
            let _ = done_tx.send(serve.await.is_ok());
        }));
        assert!(https_get(&pki, addr).starts_with("HTTP/1.1 200"));
        tokio_rt().block_on(async {
            let endpoint = quinn_endpoint(&pki);
            let conn = quic_connect(&endpoint, addr).await;
            let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
                .await
                .unwrap();
            tokio::spawn(async move {
                let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
            });
            let mut slow_send = send.clone();
            let slow =
                tokio::spawn(
                    async move { exchange(&mut slow_send, get_req("/slow"), b"", None).await },
                );
            tokio::time::sleep(Duration::from_millis(150)).await;
            stop.send(()).unwrap();
            let got = slow.await.unwrap();
            assert_eq!(got.status, StatusCode::OK);
            assert_eq!(got.body, b"slow done");
            // Then the server closes the connection, without an error.
            let why = tokio::time::timeout(Duration::from_secs(5), conn.closed())
                .await
                .expect("the connection was not closed after the shutdown");
            match why {
                quinn::ConnectionError::ApplicationClosed(c) => {
                    assert_eq!(c.error_code, 0x100u32.into(), "{c:?}")
                }
                other => panic!("closed by {other:?}"),
            }
            drop(send);
        });
        assert_eq!(done.recv_timeout(Duration::from_secs(5)), Ok(true));
    });
}

#[test]
fn a_request_head_over_max_head_bytes_is_not_served() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let addr = start_with(&pki, ServerConfig::default().with_max_head_bytes(4096));
        assert!(https_get(&pki, addr).starts_with("HTTP/1.1 200"));
        tokio_rt().block_on(async {
            let (endpoint, mut send) = h3_connect(&pki, addr).await;
            let fits = Request::get("https://localhost/")
                .header("x-fill", "a".repeat(2000))
                .body(())
                .unwrap();
            assert_eq!(
                exchange(&mut send, fits, b"", None).await.status,
                StatusCode::OK
            );
            let big = Request::get("https://localhost/")
                .header("x-fill", "a".repeat(8000))
                .body(())
                .unwrap();
            // h3 answers 431, or the client (told the limit in SETTINGS) does not send it.
            match send.send_request(big).await {
                Err(e) => assert!(format!("{e:?}").contains("HeaderTooBig"), "{e:?}"),
                Ok(mut stream) => {
                    stream.finish().await.unwrap();
                    let resp = stream.recv_response().await.expect("a 431");
                    assert_eq!(resp.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
                }
            }
            // The connection still serves.
            let got = exchange(&mut send, get_req("/"), b"", None).await;
            assert_eq!(got.body, b"hello over h3");
            endpoint.close(0u32.into(), b"done");
        });
    });
}

#[test]
fn a_body_over_max_body_size_is_cut_off_and_answered() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let addr = start_with(&pki, ServerConfig::default().with_max_body_size(1000));
        assert!(https_get(&pki, addr).starts_with("HTTP/1.1 200"));
        tokio_rt().block_on(async {
            let (endpoint, mut send) = h3_connect(&pki, addr).await;
            let got = exchange(&mut send, post_to("/echo"), &[b'x'; 1000], None).await;
            assert_eq!((got.status, got.body.len()), (StatusCode::OK, 1000));
            let mut stream = send.send_request(post_to("/echo")).await.unwrap();
            // The server may stop this side once it has seen too much.
            let _ = stream.send_data(Bytes::from(vec![b'y'; 5000])).await;
            let _ = stream.finish().await;
            let resp = stream.recv_response().await.expect("an answer");
            assert!(resp.status().is_client_error(), "{}", resp.status());
            endpoint.close(0u32.into(), b"done");
        });
    });
}

#[test]
fn http2_responses_advertise_http3_too() {
    common::require_python("httpx");
    let pki = Pki::new();
    let addr = start(&pki);
    let script = r#"
import sys, httpx
with httpx.Client(http2=True, verify=sys.argv[2]) as c:
    r = c.get("https://localhost:%s/" % sys.argv[1])
    print(r.http_version, r.headers.get("alt-svc"))
"#;
    let out = std::process::Command::new("timeout")
        .args(["30", "python3", "-c", script, &addr.port().to_string()])
        .arg(pki.ca_pem.path())
        .output()
        .expect("python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let want = format!("HTTP/2 h3=\":{}\"", addr.port());
    assert!(
        stdout.starts_with(&want),
        "want `{want}`, got {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn with_http3_without_tls_is_an_error_not_a_plain_udp_port() {
    let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let err = fibr::run(async move { fibr::serve(listener, app()).with_http3().await })
        .expect_err("HTTP/3 served without a certificate");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
}

#[test]
fn a_udp_port_already_taken_is_reported_before_and_when_serving() {
    let pki = Pki::new();
    let tls = Arc::new(pki.server_config(&pki.server(&["localhost"])));
    // A UDP port held elsewhere whose TCP twin is free (tried until one is).
    let (held, listener) = (0..100)
        .find_map(|_| {
            let held = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let tcp = fibr::run(TcpListener::bind(held.local_addr().unwrap())).ok()?;
            Some((held, tcp))
        })
        .expect("a UDP port whose TCP twin is free");
    let serve = fibr::serve(listener, app()).with_tls(tls).with_http3();
    let before = serve.http3_local_addr().expect_err("the UDP port is taken");
    assert_eq!(before.kind(), std::io::ErrorKind::AddrInUse, "{before}");
    let served = fibr::run(async move { serve.await }).expect_err("served on a taken port");
    assert_eq!(served.kind(), std::io::ErrorKind::AddrInUse, "{served}");
    drop(held);
    let plain = fibr::run(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let e = fibr::serve(plain, app())
        .http3_local_addr()
        .expect_err("no with_http3");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
}

#[test]
fn an_engine_serves_http3_on_a_udp_binding_beside_https() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let leaf = pki.server(&["localhost"]);
        let tls = Arc::new(pki.server_config(&leaf));
        let server = fibr::http::Server::new(app());
        let h3 = server.http3(tls.clone()).expect("the HTTP/3 handler");
        let https = fibr::tls::TlsServer::new(tls, server);
        let engine = fibr::Engine::new(
            fibr::Config::default().with_workers(1),
            [fibr::Binding::tcp("127.0.0.1:0", https)],
        )
        .unwrap();
        let addr = engine.binding_addrs(0)[0];
        // Its own port: the TCP one may be taken on UDP by another test's sockets.
        let binding = engine
            .add_binding(fibr::Binding::udp("127.0.0.1:0", h3))
            .expect("a UDP binding");
        let udp = engine.binding_addrs(binding)[0];
        assert!(https_get(&pki, addr).starts_with("HTTP/1.1 200"));
        tokio_rt().block_on(async {
            let (endpoint, mut send) = h3_connect(&pki, udp).await;
            let got = exchange(&mut send, get_req("/"), b"", None).await;
            assert_eq!(got.status, StatusCode::OK);
            assert_eq!(got.body, b"hello over h3");
            // Removing the binding closes its connections and tells their clients: the
            // next request fails at once, not after the 30 s idle timeout.
            assert!(engine.remove_binding(binding));
            tokio::time::sleep(Duration::from_millis(200)).await;
            let next = tokio::time::timeout(Duration::from_secs(5), async {
                let mut stream = send.send_request(get_req("/")).await?;
                stream.finish().await?;
                stream.recv_response().await.map(|_| ())
            })
            .await;
            assert!(
                matches!(next, Ok(Err(_))),
                "a request after the binding's removal: {next:?}"
            );
            endpoint.close(0u32.into(), b"done");
        });
        engine.shutdown(Duration::from_secs(1));
    });
}

#[test]
fn the_udp_port_is_bound_before_the_serve_future_runs() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let (addr, serve) = h3_serve(&pki);
        // Nothing has polled `serve` yet: a datagram must wait in the socket, not bounce
        // off a closed port (which a connected UDP socket reads as ECONNREFUSED).
        let probe = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        probe.connect(addr).unwrap();
        probe.send(b"early").unwrap();
        probe
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let e = probe.recv(&mut [0u8; 64]).expect_err("no answer to junk");
        assert_ne!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
        drop(fibr::spawn(async move {
            let _ = serve.await;
        }));
        tokio_rt().block_on(async {
            let (endpoint, mut send) = h3_connect(&pki, addr).await;
            let got = exchange(&mut send, get_req("/"), b"", None).await;
            assert_eq!(got.body, b"hello over h3");
            endpoint.close(0u32.into(), b"done");
        });
    });
}
