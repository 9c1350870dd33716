//! `examples/gateway.rs` as a program: its source is compiled into this test binary, which
//! runs it in a child process of its own (this binary again, with [`RUN_EXAMPLE`] set and
//! only [`example_process`] selected), configured by the environment as its doc says.

use super::common::{bounded, require_python, wait_until};
use super::{curl, fibr_upstream, url, LIMIT};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

#[allow(clippy::duplicate_mod)]
#[path = "../../examples/gateway.rs"]
mod program;

/// Set in the child: run the example instead of testing.
const RUN_EXAMPLE: &str = "FIBR_RUN_GATEWAY_EXAMPLE";

/// The example's process when [`RUN_EXAMPLE`] is set (it serves until killed); nothing in
/// a normal test run.
#[test]
fn example_process() {
    if std::env::var_os(RUN_EXAMPLE).is_some() {
        program::main().expect("the gateway example");
    }
}

/// The example serving on `port`, forwarding to `upstream`; killed when dropped.
struct Example(Child);

impl Example {
    fn start(port: u16, upstream: &str) -> Example {
        Example::start_with(port, upstream, &[])
    }

    /// With more of the environment (`TLS_CERT`, `TLS_KEY`).
    fn start_with(port: u16, upstream: &str, env: &[(&str, &std::path::Path)]) -> Example {
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "example::example_process", "--nocapture"])
            .env(RUN_EXAMPLE, "1")
            .env("PORT", port.to_string())
            .env("UPSTREAM", upstream)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run the example");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let up = wait_until(Duration::from_secs(10), || TcpStream::connect(addr).is_ok());
        assert!(up, "the example did not listen on {addr}");
        Example(child)
    }
}

impl Drop for Example {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_example_balances_two_upstreams_and_passes_websockets() {
    bounded(LIMIT, || {
        let (a, _) = fibr_upstream("a");
        let ws = super::common::start(super::ws::echo_app(), Default::default());
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let _example = Example::start(port, &format!("http://{a},h2c://{a}"));
        let gw = SocketAddr::from(([127, 0, 0, 1], port));
        assert_eq!(curl(&[&url(gw, "/.gateway/health")]).text(), "ok\n");
        // Once over HTTP/1.1, once over h2c, in turn; the client's address forwarded.
        let mut versions: Vec<_> = (0..2)
            .map(|_| {
                let r = curl(&["--http2-prior-knowledge", &url(gw, "/echo")]);
                assert!(r.text().contains("x-forwarded-for: 127.0.0.1\n"), "{r:?}");
                assert!(r.text().contains("via: 2 fibr\n"), "{r:?}");
                r.text()
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .rsplit(' ')
                    .next()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        versions.sort();
        assert_eq!(versions, ["HTTP/1.1", "HTTP/2.0"]);
        drop(_example);
        require_python("websockets");
        let _example = Example::start(port, &format!("http://{ws}"));
        super::ws::python_echo(&format!("ws://{gw}/ws"));
    });
}

/// With `TLS_CERT`/`TLS_KEY` the example serves HTTPS (h2 and HTTP/1.1 by ALPN) and
/// HTTP/3 on the same port: curl over h2, fibr's client over h3, and WebSockets over
/// HTTP/1.1 on TLS (Python's `websockets`) and over h3 (fibr's), all through to one
/// HTTP/1.1 upstream.
#[cfg(all(feature = "http3", feature = "ws"))]
#[test]
fn the_example_serves_https_and_http3_websockets_included() {
    use super::common::pki::Pki;
    bounded(LIMIT, || {
        let pki = Pki::new();
        let leaf = pki.server(&["localhost"]);
        let app = super::app("a", Default::default()).merge(super::ws::echo_app());
        let upstream = super::common::start(app, Default::default());
        // A port free on UDP as well (HTTP/3 binds the same number).
        let port = (0..100)
            .find_map(|_| {
                let tcp = TcpListener::bind("127.0.0.1:0").ok()?;
                let port = tcp.local_addr().ok()?.port();
                std::net::UdpSocket::bind(("127.0.0.1", port)).ok()?;
                Some(port)
            })
            .expect("a port free on both TCP and UDP");
        let tls = [
            ("TLS_CERT", leaf.cert_pem.as_ref()),
            ("TLS_KEY", leaf.key_pem.as_ref()),
        ];
        let _example = Example::start_with(port, &format!("http://{upstream}"), &tls);
        let base = format!("https://localhost:{port}");
        let ca = pki.ca_pem.to_str().unwrap();
        let resolve = format!("localhost:{port}:127.0.0.1");
        let r = curl(&[
            "--http2",
            "--cacert",
            ca,
            "--resolve",
            &resolve,
            &format!("{base}/echo"),
        ]);
        assert_eq!((r.exit, r.status), (0, 200), "{r:?}");
        assert!(r.text().contains("via: 2 fibr\n"), "{r:?}");
        assert!(r.text().contains("x-forwarded-proto: https\n"), "{r:?}");
        let text = super::tls::h3_get(&pki, &format!("{base}/echo"));
        assert!(text.contains("via: 3 fibr\n"), "{text}");
        let wss = format!("wss://localhost:{port}/ws");
        super::ws::python_echo_over(&wss, Some(pki.ca_pem.as_ref()));
        super::tls::h3_websocket_echo(&pki, &wss);
    });
}
