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
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "example::example_process", "--nocapture"])
            .env(RUN_EXAMPLE, "1")
            .env("PORT", port.to_string())
            .env("UPSTREAM", upstream)
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
