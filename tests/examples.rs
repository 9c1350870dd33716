//! The examples that show the client, the mux and the engine run as their doc comments
//! say, driven by real peers: `client` against fibr servers (HTTP/1.1 and h2c; HTTPS
//! with h2 by ALPN and HTTP/3 by Alt-Svc, trusting a test CA through `CA_FILE`), `mux` by
//! curl (HTTP/1.1, h2c, HTTPS and SOCKS5 on one port), `engine` by a raw TCP echo, HTTP,
//! HTTPS and HTTP/3 (fibr's client), `proxy` with TLS by CONNECTs from Python's `h2`,
//! aioquic and fibr's client (over h2), `ws_echo` with TLS by fibr's WebSocket client (HTTP/1.1, h2) and aioquic (h3).
//!
//! Its own main: the examples' sources are compiled into this binary, which runs one of
//! them, as its own process with its environment and arguments, when `RUN_EXAMPLE` names
//! it. So the test needs no example binary built beforehand (`cargo test --all-targets`
//! builds examples as test harnesses, not as the programs they are) and cannot run a
//! stale one.

mod common;

#[path = "../examples/client.rs"]
mod client;
#[path = "../examples/engine.rs"]
mod engine;
// Each server example has its own `examples/common`, as in its own crate.
#[allow(clippy::duplicate_mod)]
#[path = "../examples/mux.rs"]
mod mux;
#[allow(clippy::duplicate_mod)]
#[path = "../examples/proxy.rs"]
mod proxy;
#[allow(clippy::duplicate_mod)]
#[path = "../examples/ws_echo.rs"]
mod ws_echo;

use common::pki::Pki;
use fibr::client::{Client, HttpsConnector};
use http::Version;
use http_body_util::BodyExt;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// The environment variable that makes this binary the example it names.
const RUN_EXAMPLE: &str = "RUN_EXAMPLE";

fn main() {
    if let Ok(name) = std::env::var(RUN_EXAMPLE) {
        let result = match name.as_str() {
            "client" => client::main(),
            "engine" => engine::main().map_err(Into::into),
            "mux" => mux::main().map_err(Into::into),
            "proxy" => proxy::main().map_err(Into::into),
            "ws_echo" => ws_echo::main().map_err(Into::into),
            _ => Err(format!("no example {name:?}").into()),
        };
        if let Err(e) = result {
            eprintln!("Error: {e}");
            std::process::exit(1);
        }
        return;
    }
    for (name, test) in [
        (
            "client_gets_over_http1_h2c_h2_and_http3_by_alt_svc",
            client_gets_over_http1_h2c_h2_and_http3_by_alt_svc as fn(),
        ),
        (
            "mux_serves_http1_h2c_https_and_socks5_on_one_port",
            mux_serves_http1_h2c_https_and_socks5_on_one_port,
        ),
        (
            "engine_serves_http_echo_https_and_http3",
            engine_serves_http_echo_https_and_http3,
        ),
        (
            "proxy_tunnels_connect_over_https_h2_and_h3",
            proxy_tunnels_connect_over_https_h2_and_h3,
        ),
        (
            "ws_echo_serves_wss_over_http1_h2_and_h3",
            ws_echo_serves_wss_over_http1_h2_and_h3,
        ),
    ] {
        eprint!("test {name} ... ");
        common::bounded(LIMIT, test);
        eprintln!("ok");
    }
}

const LIMIT: Duration = Duration::from_secs(60);

/// This binary as the example `name`.
fn example(name: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("the test binary's path"));
    cmd.env(RUN_EXAMPLE, name);
    cmd
}

/// A server example, killed when dropped.
struct Server {
    child: Child,
    /// Its stderr, line by line, as it writes it.
    lines: mpsc::Receiver<String>,
}

impl Server {
    fn start(mut cmd: Command) -> Server {
        let mut child = cmd
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the example");
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Server { child, lines }
    }

    /// The address in each of the next `n` lines that end `... on ADDR`, by what comes
    /// before ` on `.
    fn addrs(&self, n: usize) -> HashMap<String, SocketAddr> {
        (0..n)
            .map(|_| {
                let line = self
                    .lines
                    .recv_timeout(common::STEP)
                    .expect("the example prints its addresses");
                let (what, addr) = line
                    .rsplit_once(" on ")
                    .unwrap_or_else(|| panic!("the example printed {line:?}"));
                (what.to_string(), addr.parse().expect("an address"))
            })
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the `client` example on `url` (with `env`): its output lines.
fn run_client(url: &str, env: &[(&str, &std::ffi::OsStr)]) -> Vec<String> {
    let out = example("client")
        .arg(url)
        .envs(env.iter().copied())
        .output()
        .expect("run the client example");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client {url}: {}\n{stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().map(str::to_string).collect()
}

fn client_gets_over_http1_h2c_h2_and_http3_by_alt_svc() {
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "hello" }));
    let plain = common::start(app, Default::default());
    assert_eq!(
        run_client(&format!("http://{plain}/"), &[]),
        [
            "HTTP/1.1: HTTP/1.1 200 OK, 5 bytes",
            "HTTP/2: HTTP/2.0 200 OK, 5 bytes"
        ]
    );

    // HTTPS and HTTP/3 on one port, answering `hello over h3` (13 bytes).
    let pki = Pki::new();
    let port = common::h3::start(&pki).port();
    assert_eq!(
        run_client(
            &format!("https://localhost:{port}/"),
            &[("CA_FILE", pki.ca_pem.as_os_str())]
        ),
        [
            "HTTP/1.1: HTTP/1.1 200 OK, 13 bytes".to_string(),
            "HTTP/2: HTTP/2.0 200 OK, 13 bytes".to_string(),
            format!("HTTP/3 (Alt-Svc: h3=\":{port}\"; ma=86400): HTTP/3.0 200 OK, 13 bytes"),
        ]
    );

    // Without CA_FILE the test CA is not trusted (the webpki roots are).
    let out = example("client")
        .arg(format!("https://localhost:{port}/"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("UnknownIssuer"),
        "{}: {stderr}",
        out.status
    );
}

/// Runs curl with `args`: its exit code and stdout.
fn curl(args: &[&str]) -> (i32, String) {
    common::require_tool("curl", "curl");
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn mux_serves_http1_h2c_https_and_socks5_on_one_port() {
    let pki = Pki::new();
    let leaf = pki.server(&["localhost"]);
    let mut cmd = example("mux");
    cmd.env("PORT", "0")
        .env("PROXY_ALLOW_ALL", "1")
        .env("TLS_CERT", &*leaf.cert_pem)
        .env("TLS_KEY", &*leaf.key_pem);
    let server = Server::start(cmd);
    let addr = server.addrs(1)["HTTPS, HTTP/1.1, h2c and SOCKS5"];
    let http = format!("http://{addr}/");
    let https = format!("https://localhost:{}/", addr.port());
    let resolve = format!("localhost:{}:127.0.0.1", addr.port());
    let ca = pki.ca_pem.to_str().unwrap();
    let socks = addr.to_string();
    for (args, answer) in [
        (vec![http.as_str()], "hello over HTTP/1.1\n"),
        (
            vec!["--http2-prior-knowledge", &http],
            "hello over HTTP/2.0\n",
        ),
        (
            vec!["--cacert", ca, "--resolve", &resolve, &https],
            "hello over HTTP/2.0\n",
        ),
        (
            vec!["--http1.1", "--cacert", ca, "--resolve", &resolve, &https],
            "hello over HTTP/1.1\n",
        ),
        // Through the SOCKS5 route to the HTTP route of the same port.
        (vec!["--socks5", &socks, &http], "hello over HTTP/1.1\n"),
    ] {
        assert_eq!(curl(&args), (0, answer.to_string()), "curl {args:?}");
    }
    drop(server);

    // Without TLS_CERT and PROXY_ALLOW_ALL: no HTTPS route, and SOCKS5 refuses loopback.
    let mut cmd = example("mux");
    cmd.env("PORT", "0");
    let server = Server::start(cmd);
    let addr = server.addrs(1)["HTTP/1.1, h2c and SOCKS5"];
    let http = format!("http://{addr}/");
    assert_eq!(curl(&[&http]), (0, "hello over HTTP/1.1\n".to_string()));
    let (code, _) = curl(&["--socks5", &addr.to_string(), &http]);
    assert_eq!(code, 97, "curl's proxy handshake error: loopback refused");
    let (code, _) = curl(&["-k", &format!("https://{addr}/")]);
    assert_ne!(code, 0, "no HTTPS without TLS_CERT");
}

/// `GET url` with `client`: the version and body.
fn get(client: &Client<HttpsConnector>, url: &str) -> (Version, String) {
    fibr::run(async {
        let res = client.get(url).await.expect("response");
        let version = res.version();
        let body = res.into_body().collect().await.expect("body").to_bytes();
        (version, String::from_utf8_lossy(&body).into_owned())
    })
}

fn engine_serves_http_echo_https_and_http3() {
    let pki = Pki::new();
    let leaf = pki.server(&["localhost"]);
    let mut cmd = example("engine");
    cmd.env("HTTP_PORT", "0")
        .env("ECHO_PORT", "0")
        .env("HTTPS_PORT", "0")
        .env("TLS_CERT", &*leaf.cert_pem)
        .env("TLS_KEY", &*leaf.key_pem);
    let server = Server::start(cmd);
    let addrs = server.addrs(4);

    let mut echo = common::connect(addrs["echo"]);
    echo.write_all(b"raw bytes\n").unwrap();
    let mut back = [0u8; 10];
    echo.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"raw bytes\n");

    let mut http = common::Client::connect(addrs["http"]);
    assert_eq!(http.get("/").text(), "hello over HTTP/1.1\n");
    let mut b = Client::builder();
    b.tls_config(Arc::new(pki.client_config()));
    let h2c = b.clone().http2_prior_knowledge().build_https();
    assert_eq!(
        get(&h2c, &format!("http://{}/", addrs["http"])),
        (Version::HTTP_2, "hello over HTTP/2.0\n".into())
    );

    let (https, h3) = (addrs["https"], addrs["http3"]);
    assert_eq!(https.port(), h3.port(), "HTTP/3 on the HTTPS port's number");
    let url = format!("https://localhost:{}/", https.port());
    assert_eq!(
        get(&b.build_https(), &url),
        (Version::HTTP_2, "hello over HTTP/2.0\n".into())
    );
    let quic = b.http3_prior_knowledge().build_https();
    assert_eq!(
        get(&quic, &url),
        (Version::HTTP_3, "hello over HTTP/3.0\n".into())
    );
}

fn proxy_tunnels_connect_over_https_h2_and_h3() {
    use common::tunnel::{Origins, PY_H2_CONNECT, PY_H3_CONNECT};
    common::require_python("h2");
    common::require_python("aioquic");
    let pki = Pki::new();
    let leaf = pki.server(&["localhost"]);
    let origins = Origins::start();
    let mut cmd = example("proxy");
    cmd.env("PORT", "0")
        .env("PROXY_ALLOW_ALL", "1")
        .env("TLS_CERT", &*leaf.cert_pem)
        .env("TLS_KEY", &*leaf.key_pem);
    let server = Server::start(cmd);
    let addr = server.addrs(1)["HTTPS proxy (CONNECT over HTTP/1.1, h2 and h3; forwarding)"];
    let (port, ca) = (addr.port().to_string(), pki.ca_pem.display().to_string());
    let steps = ["echo", "half-close", "reset", "connect-error", "refused"];
    let mut args = vec![port.clone()];
    args.extend(origins.args());
    args.extend(["-".into(), ca.clone()]);
    assert_eq!(common::python_lines(PY_H2_CONNECT, &args), steps, "h2");
    let mut args = vec![port, ca];
    args.extend(origins.args());
    args.push("-".into());
    assert_eq!(common::python_lines(PY_H3_CONNECT, &args), steps, "h3");
    // fibr's own client, through CONNECT streams over h2 (`h2` the only ALPN offered),
    // to an HTTP origin.
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "via h2" }));
    let origin = common::start(app, fibr::http::ServerConfig::default());
    let proxy = fibr::client::Proxy::all(&format!("https://localhost:{}", addr.port()))
        .unwrap()
        .http2_prior_knowledge();
    let client = Client::builder()
        .tls_config(Arc::new(pki.client_config()))
        .proxy(proxy)
        .build();
    let body = fibr::run(async move {
        let res = client.get(format!("http://{origin}/")).await.unwrap();
        res.into_body().collect().await.unwrap().to_bytes()
    });
    assert_eq!(body, "via h2");
}

/// An extended CONNECT (RFC 9220) to `/ws`, one masked text frame, its echo.
const PY_WS_H3_ECHO: &str = r#"
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
        self.got = {"status": None, "data": b""}
        self.changed = asyncio.Event()

    def quic_event_received(self, event):
        for ev in self.h3.handle_event(event):
            if isinstance(ev, HeadersReceived):
                self.got["status"] = dict(ev.headers)[b":status"]
            elif isinstance(ev, DataReceived):
                self.got["data"] += ev.data
        self.changed.set()

    async def until(self, cond):
        while not cond():
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 10)

async def main(port, ca):
    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name="localhost")
    cfg.load_verify_locations(ca)
    async with connect("127.0.0.1", port, configuration=cfg, create_protocol=Client) as c:
        sid = c._quic.get_next_available_stream_id()
        c.h3.send_headers(sid, [(b":method", b"CONNECT"), (b":protocol", b"websocket"),
            (b":scheme", b"https"), (b":authority", b"localhost"), (b":path", b"/ws"),
            (b"sec-websocket-version", b"13")])
        mask = b"\x01\x02\x03\x04"
        c.h3.send_data(sid, b"\x81\x82" + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(b"hi")), end_stream=False)
        c.transmit()
        await c.until(lambda: len(c.got["data"]) >= 4)
        print(c.got["status"].decode(), c.got["data"].hex())

asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
"#;

fn ws_echo_serves_wss_over_http1_h2_and_h3() {
    use fibr::ws::{Connector, Message};
    common::require_python("aioquic");
    let pki = Pki::new();
    let leaf = pki.server(&["localhost"]);
    let mut cmd = example("ws_echo");
    cmd.env("PORT", "0")
        .env("TLS_CERT", &*leaf.cert_pem)
        .env("TLS_KEY", &*leaf.key_pem);
    let server = Server::start(cmd);
    let addr = server.addrs(1)["WebSocket echo (wss over HTTP/1.1, h2 and h3)"];
    let url = format!("wss://localhost:{}/ws", addr.port());
    let tls = Arc::new(pki.client_config());
    let client = Client::builder().tls_config(tls.clone()).build_https();
    let versions = fibr::run(async move {
        let connector = Connector::new().tls_config(tls);
        let mut got = Vec::new();
        let (mut ws, res) = connector.connect(&url).await.expect("wss over HTTP/1.1");
        got.push(res.version());
        let (mut ws2, res) = connector
            .connect_over_http2(&client, &url)
            .await
            .expect("wss over h2");
        got.push(res.version());
        for ws in [&mut ws, &mut ws2] {
            ws.send(Message::text("echo me")).await.unwrap();
            assert_eq!(ws.recv().await.unwrap().unwrap(), Message::text("echo me"));
        }
        got
    });
    assert_eq!(versions, [Version::HTTP_11, Version::HTTP_2]);
    let args = [addr.port().to_string(), pki.ca_pem.display().to_string()];
    assert_eq!(common::python_lines(PY_WS_H3_ECHO, &args), ["200 81026869"]);
}
