//! CONNECT tunnels in a handler (`fibr::http::tunnel`) against a peer we did not write:
//! Python's `h2` sends plain CONNECTs (RFC 9113 §8.5) over h2c with prior knowledge to an
//! axum app whose fallback pipes each tunnel to a local TCP origin. Bytes both ways,
//! half-close each way, a reset from the client, a reset from the origin (CONNECT_ERROR),
//! a refused target, and flow control: a tunnel that does not read stops the client at
//! the stream's window. HTTP/1.1 CONNECT reaches the same handler.

mod common;

use common::tunnel::{tunnel_app, Origins, HOLD_AUTHORITY, PY_H2_CONNECT};
use common::{bounded, start};
use fibr::http::ServerConfig;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

fn run(cmd: &mut Command) -> (bool, String, String) {
    let out = cmd.stdin(Stdio::null()).output().expect("run a peer");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn python_h2_connects_through_a_handler_tunnel() {
    bounded(LIMIT, || {
        common::require_python("h2");
        let origins = Origins::start();
        let addr = start(tunnel_app(), ServerConfig::default());
        let (ok, out, err) = run(Command::new("timeout")
            .args(["40", "python3", "-c", PY_H2_CONNECT])
            .arg(addr.port().to_string())
            .args(origins.args())
            .args([HOLD_AUTHORITY, "-"]));
        assert!(ok, "python h2 failed: {err}\n{out}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines,
            [
                "echo",
                "half-close",
                "reset",
                "connect-error",
                "refused",
                "flow-control 65536"
            ]
        );
        // The greeting origin read what came after its own half-close; the reset
        // tunnel's origin connection ended, as did the first.
        assert!(common::wait_until(Duration::from_secs(5), || {
            let seen = origins.seen.lock().unwrap();
            seen.after_half_close == b"late data" && seen.echo_ended == 2
        }));
    });
}

/// HTTP/1.1 CONNECT reaches the same handler: the connection becomes the tunnel once the
/// `200` is written (handed back from hyper on a plain connection).
#[test]
fn http1_connect_through_a_handler_tunnel() {
    bounded(LIMIT, || {
        let origins = Origins::start();
        let addr = start(tunnel_app(), ServerConfig::default());
        let mut s = common::connect(addr);
        let target = origins.echo;
        write!(
            s,
            "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\nearly"
        )
        .unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            s.read_exact(&mut b).unwrap();
            head.push(b[0]);
        }
        let head = String::from_utf8(head).unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        s.write_all(b" and late").unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let (back, err) = common::read_to_eof(&mut s);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(back, b"early and late");
    });
}

/// Over HTTP/1.1 a tunnel that does not read holds the connection's reads past its
/// buffer, so TCP's window stops the client; once it reads, everything arrives.
#[test]
fn http1_tunnel_that_does_not_read_stops_the_client() {
    bounded(LIMIT, || {
        let addr = start(tunnel_app(), ServerConfig::default());
        let mut s = common::connect(addr);
        write!(
            s,
            "CONNECT {HOLD_AUTHORITY} HTTP/1.1\r\nHost: {HOLD_AUTHORITY}\r\n\r\n"
        )
        .unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            s.read_exact(&mut b).unwrap();
            head.push(b[0]);
        }
        assert!(head.starts_with(b"HTTP/1.1 200"));
        // More than loopback's socket buffers hold on both sides.
        const TOTAL: usize = 64 << 20;
        let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut w = s.try_clone().unwrap();
        let progress = sent.clone();
        let writer = std::thread::spawn(move || {
            let chunk = vec![b'w'; 1 << 16];
            for _ in 0..TOTAL / chunk.len() {
                w.write_all(&chunk).unwrap();
                progress.fetch_add(chunk.len(), std::sync::atomic::Ordering::SeqCst);
            }
            w.shutdown(std::net::Shutdown::Write).unwrap();
        });
        std::thread::sleep(common::tunnel::HOLD / 2);
        let stalled = sent.load(std::sync::atomic::Ordering::SeqCst);
        assert!(stalled < TOTAL, "the client was never held back");
        writer.join().unwrap();
        let (back, err) = common::read_to_eof(&mut s);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(back, TOTAL.to_string().as_bytes());
    });
}
