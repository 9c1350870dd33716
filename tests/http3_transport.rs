//! QUIC's transport choices in `Http3Config`, each on and off against clients fibr did not
//! write (quinn + h3-quinn, ngtcp2's client): Retry, 0-RTT, connection migration,
//! stateless reset with a shared key; a flood of Initial packets from many source
//! ports, which gets stateless Retry packets past the handshake limit while real clients
//! are still served; and truncated and oversized Initials, which get no answer.

mod common;

use bytes::Buf;
use common::h3::*;
use common::pki::Pki;
use fibr::http::{Http3Config, RetryPolicy};
use http::StatusCode;
use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One GET over a new connection through `relay`; the Retry packets the relay saw.
fn get_counting_retries(pki: &Pki, relay: &Relay) -> usize {
    tokio_rt().block_on(async {
        let (endpoint, mut send) = h3_connect(pki, relay.addr).await;
        let got = exchange(&mut send, get_req("/"), b"", None).await;
        assert_eq!(got.status, StatusCode::OK);
        assert_eq!(got.body, b"hello over h3");
        endpoint.close(0u32.into(), b"done");
    });
    relay
        .stats
        .retries
        .load(std::sync::atomic::Ordering::Relaxed)
}

#[test]
fn retry_always_validates_every_client_and_never_none() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let always = start_with(&pki, h3_config(config().with_retry(RetryPolicy::Always)));
        let relay = Relay::start(always, Faults::default());
        // At least one: an Initial the client resent before the Retry came gets one too.
        assert!(get_counting_retries(&pki, &relay) >= 1, "Always: a Retry");

        let never = start_with(&pki, h3_config(config().with_retry(RetryPolicy::Never)));
        let relay = Relay::start(never, Faults::default());
        assert_eq!(get_counting_retries(&pki, &relay), 0, "Never: no Retry");

        // The default retries only under load: an idle server does not.
        let default = start(&pki);
        let relay = Relay::start(default, Faults::default());
        assert_eq!(
            get_counting_retries(&pki, &relay),
            0,
            "an idle server: no Retry"
        );
    });
}

fn config() -> Http3Config {
    Http3Config::default()
}

/// A quinn endpoint whose client config allows early data.
fn early_data_endpoint(pki: &Pki) -> quinn::Endpoint {
    let mut crypto = pki.client_config();
    crypto.alpn_protocols = vec![b"h3".to_vec()];
    crypto.enable_early_data = true;
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(crypto).unwrap();
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    endpoint
}

/// A GET on `conn` through h3; the response body.
async fn h3_get(conn: quinn::Connection, uri: &str) -> Vec<u8> {
    let (mut driver, mut send) = h3::client::new(h3_quinn::Connection::new(conn))
        .await
        .expect("h3 connection");
    let drive = tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    let got = exchange(&mut send, get_req(uri), b"", None).await;
    assert_eq!(got.status, StatusCode::OK);
    drop(send);
    drive.abort();
    got.body
}

/// Resumes a session in 0-RTT and sends a request in its early data: whether the server
/// accepted the early data (the request is answered either way).
fn zero_rtt_accepted(pki: &Pki, addr: SocketAddr) -> bool {
    tokio_rt().block_on(async {
        let endpoint = early_data_endpoint(pki);
        // A first connection, for the session ticket.
        let first = quic_connect(&endpoint, addr).await;
        assert_eq!(h3_get(first.clone(), "/").await, b"hello over h3");
        first.close(0u32.into(), b"done");
        let connecting = endpoint.connect(addr, "localhost").unwrap();
        let (conn, accepted) = match connecting.into_0rtt() {
            Ok(early) => early,
            // The ticket allows no early data: a full handshake.
            Err(connecting) => {
                let conn = connecting.await.expect("handshake");
                assert_eq!(h3_get(conn, "/").await, b"hello over h3");
                return false;
            }
        };
        let (body, accepted) = tokio::join!(h3_get(conn, "/"), accepted);
        assert_eq!(body, b"hello over h3");
        accepted
    })
}

#[test]
fn zero_rtt_requests_are_accepted_only_when_turned_on() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let on = start_with(&pki, h3_config(config().with_zero_rtt(true)));
        assert!(
            zero_rtt_accepted(&pki, on),
            "zero_rtt on: early data accepted"
        );
        let off = start(&pki);
        assert!(!zero_rtt_accepted(&pki, off), "the default: no early data");
    });
}

/// A connection whose client moves to a new UDP port between two requests: the body of
/// the second request, or the error that ended the connection instead.
fn get_after_rebinding(pki: &Pki, addr: SocketAddr) -> Result<Vec<u8>, quinn::ConnectionError> {
    tokio_rt().block_on(async {
        let endpoint = quinn_endpoint(pki);
        let conn = quic_connect(&endpoint, addr).await;
        let (mut driver, mut send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
            .await
            .expect("h3 connection");
        tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        assert_eq!(
            exchange(&mut send, get_req("/"), b"", None).await.body,
            b"hello over h3"
        );
        let before = endpoint.local_addr().unwrap();
        endpoint
            .rebind(UdpSocket::bind("127.0.0.1:0").unwrap())
            .unwrap();
        assert_ne!(endpoint.local_addr().unwrap().port(), before.port());
        let request = async {
            let mut stream = send.send_request(get_req("/")).await.ok()?;
            stream.finish().await.ok()?;
            stream.recv_response().await.ok()?;
            let mut body = Vec::new();
            while let Some(mut chunk) = stream.recv_data().await.ok()? {
                body.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining()));
            }
            Some(body)
        };
        tokio::select! {
            body = request => match body {
                Some(body) => Ok(body),
                None => Err(conn.closed().await),
            },
            e = conn.closed() => Err(e),
        }
    })
}

#[test]
fn a_client_that_changes_address_keeps_its_connection_when_migration_is_on() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let on = start(&pki);
        assert_eq!(get_after_rebinding(&pki, on).unwrap(), b"hello over h3");
        let off = start_with(
            &pki,
            h3_config(
                config()
                    .with_migration(false)
                    .with_idle_timeout(Duration::from_secs(2)),
            ),
        );
        let e = get_after_rebinding(&pki, off).expect_err("migration off: the path is dropped");
        // The connection dies of its idle timeout; on a loaded machine the client's timer
        // can fire after the server's, whose endpoint then answers the client's next packet
        // for the forgotten connection with a stateless reset: dead either way.
        assert!(
            matches!(
                e,
                quinn::ConnectionError::TimedOut | quinn::ConnectionError::Reset
            ),
            "{e:?}"
        );
    });
}

/// How a connection made to `first` through a relay ends once the relay sends its packets
/// to `second` instead (as if `second` had replaced `first` at its address), and how long
/// that took from the request sent after the switch.
fn end_after_server_swap(
    pki: &Pki,
    first: SocketAddr,
    second: SocketAddr,
) -> (quinn::ConnectionError, Duration) {
    let relay = Relay::start(first, Faults::default());
    tokio_rt().block_on(async {
        let endpoint = quinn_endpoint(pki);
        let conn = quic_connect(&endpoint, relay.addr).await;
        let (mut driver, mut send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
            .await
            .expect("h3 connection");
        tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        assert_eq!(
            exchange(&mut send, get_req("/"), b"", None).await.body,
            b"hello over h3"
        );
        relay.redirect(second);
        let sent = Instant::now();
        tokio::spawn(async move {
            if let Ok(mut stream) = send.send_request(get_req("/")).await {
                let _ = stream.finish().await;
                let _ = stream.recv_response().await;
            }
        });
        let e = conn.closed().await;
        (e, sent.elapsed())
    })
}

#[test]
fn a_server_with_the_same_reset_key_resets_connections_it_does_not_know() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let idle = Duration::from_secs(2);
        let keyed = |key: Option<[u8; 32]>, reset: bool| {
            let cfg = config()
                .with_idle_timeout(idle)
                .with_stateless_reset_key(key)
                .with_stateless_reset(reset);
            start_with(&pki, h3_config(cfg))
        };
        let key = [7u8; 32];

        let (a, b) = (keyed(Some(key), true), keyed(Some(key), true));
        let (e, took) = end_after_server_swap(&pki, a, b);
        assert!(matches!(e, quinn::ConnectionError::Reset), "{e:?}");
        assert!(took < idle, "reset after {took:?}, not at once");

        // Another key (the default: a random one per server): its reset is not believed.
        let (a, b) = (keyed(Some(key), true), keyed(None, true));
        let (e, _) = end_after_server_swap(&pki, a, b);
        assert!(matches!(e, quinn::ConnectionError::TimedOut), "{e:?}");

        // The same key, but resets turned off: the client waits for its idle timeout.
        let (a, b) = (keyed(Some(key), true), keyed(Some(key), false));
        let (e, took) = end_after_server_swap(&pki, a, b);
        assert!(matches!(e, quinn::ConnectionError::TimedOut), "{e:?}");
        assert!(took >= idle / 2, "timed out after {took:?}");
    });
}

/// The Initial datagram a new quinn-proto client connection to `server` sends first.
fn initial_datagram(
    endpoint: &mut quinn_proto::Endpoint,
    client: &quinn::ClientConfig,
    server: SocketAddr,
) -> Vec<u8> {
    let now = Instant::now();
    let (_, mut conn) = endpoint
        .connect(now, client.clone(), server, "localhost")
        .unwrap();
    let mut buf = Vec::new();
    let t = conn.poll_transmit(now, 1, &mut buf).expect("an Initial");
    buf.truncate(t.size);
    buf
}

/// A QUIC long-header packet of type Initial (version 1).
fn is_initial(d: &[u8]) -> bool {
    d.len() > 5 && d[0] & 0xf0 == 0xc0 && d[1..5] == [0, 0, 0, 1]
}

#[test]
fn a_flood_of_initials_from_many_ports_is_retried_past_the_handshake_limit() {
    common::bounded(Duration::from_secs(60), || {
        const SOCKETS: usize = 300;
        const LIMIT_HANDSHAKES: usize = 16;
        let pki = Pki::new();
        let cfg = config().with_retry(RetryPolicy::UnderLoad {
            handshakes: LIMIT_HANDSHAKES,
        });
        let addr = start_with(&pki, h3_config(cfg));
        let rt = tokio_rt();
        // A client connected before the flood.
        let (endpoint, mut send) = rt.block_on(h3_connect(&pki, addr));

        let mut crypto = pki.client_config();
        crypto.alpn_protocols = vec![b"h3".to_vec()];
        let quic = quinn::crypto::rustls::QuicClientConfig::try_from(crypto).unwrap();
        let client = quinn::ClientConfig::new(Arc::new(quic));
        let mut forger = quinn_proto::Endpoint::new(Default::default(), None, true, None);
        let sockets: Vec<UdpSocket> = (0..SOCKETS)
            .map(|_| {
                let s = UdpSocket::bind("127.0.0.1:0").unwrap();
                s.set_nonblocking(true).unwrap();
                s
            })
            .collect();
        for (i, s) in sockets.iter().enumerate() {
            s.send_to(&initial_datagram(&mut forger, &client, addr), addr)
                .unwrap();
            if i % 25 == 24 {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        // What each flooding socket got back: a Retry, or the start of a handshake.
        let (mut retried, mut handshaking) = (0, 0);
        let until = Instant::now() + Duration::from_secs(3);
        let mut got = vec![(false, false); SOCKETS];
        let mut buf = [0u8; 2048];
        while Instant::now() < until {
            for (i, s) in sockets.iter().enumerate() {
                while let Ok(n) = s.recv(&mut buf) {
                    if is_retry(&buf[..n]) {
                        got[i].0 = true;
                    } else if is_initial(&buf[..n]) {
                        got[i].1 = true;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        for (r, h) in got {
            retried += r as usize;
            handshaking += h as usize;
        }
        assert!(
            handshaking <= LIMIT_HANDSHAKES,
            "{handshaking} handshakes started"
        );
        assert!(
            retried >= SOCKETS * 9 / 10 - LIMIT_HANDSHAKES,
            "only {retried} of {SOCKETS} retried ({handshaking} handshaking)"
        );

        // The client from before the flood, and a new one (which is retried, and comes
        // back with its token), are both served.
        rt.block_on(async {
            let got = exchange(&mut send, get_req("/"), b"", None).await;
            assert_eq!(got.body, b"hello over h3");
            let relay = Relay::start(addr, Faults::default());
            let (late, mut late_send) = h3_connect(&pki, relay.addr).await;
            let got = exchange(&mut late_send, get_req("/"), b"", None).await;
            assert_eq!(got.body, b"hello over h3");
            let retries = relay
                .stats
                .retries
                .load(std::sync::atomic::Ordering::Relaxed);
            assert!(retries >= 1, "a client arriving under load is retried");
            late.close(0u32.into(), b"done");
            endpoint.close(0u32.into(), b"done");
        });
    });
}

#[test]
fn truncated_and_oversized_initials_get_no_answer() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let addr = start(&pki);
        let mut crypto = pki.client_config();
        crypto.alpn_protocols = vec![b"h3".to_vec()];
        let quic = quinn::crypto::rustls::QuicClientConfig::try_from(crypto).unwrap();
        let client = quinn::ClientConfig::new(Arc::new(quic));
        let mut forger = quinn_proto::Endpoint::new(Default::default(), None, true, None);
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        for cut in [1, 5, 40, 600, 1100, 1199] {
            let initial = initial_datagram(&mut forger, &client, addr);
            socket.send_to(&initial[..cut], addr).unwrap();
        }
        // A long header claiming an Initial, then 64 KB that decrypt to nothing.
        let mut oversized = initial_datagram(&mut forger, &client, addr);
        oversized.resize(65_000, 0xa5);
        oversized[20..].iter_mut().for_each(|b| *b ^= 0x5a);
        socket.send_to(&oversized, addr).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut buf = [0u8; 2048];
        assert!(socket.recv(&mut buf).is_err(), "something answered");
        tokio_rt().block_on(async {
            let (endpoint, mut send) = h3_connect(&pki, addr).await;
            let got = exchange(&mut send, get_req("/"), b"", None).await;
            assert_eq!(got.body, b"hello over h3");
            endpoint.close(0u32.into(), b"done");
        });
    });
}

/// ngtcp2's client (Debian's `ngtcp2-client`, installed by `.ci/run`): runs `gtlsclient`
/// for `uri` on `addr` with `extra` arguments, keeping its session in (and resuming from)
/// the folder `session`; its output.
fn gtlsclient(addr: SocketAddr, uri: &str, session: &std::path::Path, extra: &[&str]) -> String {
    common::require_tool("gtlsclient", "ngtcp2-client");
    let out = Command::new("gtlsclient")
        .args(extra)
        .arg("--exit-on-all-streams-close")
        .arg("--timeout=10s")
        .arg(format!(
            "--session-file={}",
            session.join("session").display()
        ))
        .arg(format!("--tp-file={}", session.join("tp").display()))
        .args([addr.ip().to_string(), addr.port().to_string()])
        .arg(format!("https://localhost:{}{uri}", addr.port()))
        .output()
        .expect("gtlsclient (apt-get install ngtcp2-client)");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "gtlsclient failed: {text}");
    text
}

#[test]
fn ngtcp2_client_gets_and_resumes_in_zero_rtt() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let addr = start_with(&pki, h3_config(config().with_zero_rtt(true)));
        let dir = std::env::temp_dir().join(format!("fibr-ngtcp2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let first = gtlsclient(addr, "/", &dir, &[]);
        assert!(first.contains("[:status: 200]"), "{first}");
        assert!(first.contains("|hello over h3|"), "{first}");
        // Resumed with the ticket, the request goes in 0-RTT and the server takes it.
        let second = gtlsclient(addr, "/", &dir, &[]);
        assert!(second.contains("type=0RTT"), "no 0-RTT sent: {second}");
        assert!(!second.contains("Early data was rejected"), "{second}");
        assert!(second.contains("|hello over h3|"), "{second}");

        // A streamed response of 64 × 16 KiB arrives whole.
        let download = dir.join("download");
        std::fs::create_dir_all(&download).unwrap();
        let quiet = ["--no-quic-dump", "--no-http-dump", "-q"];
        let to = format!("--download={}", download.display());
        gtlsclient(
            addr,
            "/stream",
            &dir,
            &[&quiet[..], &[to.as_str()]].concat(),
        );
        let body = std::fs::read(download.join("stream")).expect("the downloaded body");
        let sent: Vec<u8> = (0..CHUNKS).flat_map(|i| vec![i as u8; CHUNK]).collect();
        assert!(
            body == sent,
            "{} bytes downloaded, not the stream",
            body.len()
        );
        let _ = std::fs::remove_dir_all(&dir);
    });
}
