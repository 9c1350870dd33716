//! HTTP/2 served by `fibr::serve` to peers we did not write, over real sockets on
//! 127.0.0.1: curl (h2c with prior knowledge; h2 over TLS by ALPN), h2load, Python's `h2`
//! and `httpx`, and hyper's HTTP/2 client. The same axum app serves HTTP/1.1 on the same
//! port.

mod common;

use axum::routing::{get, post};
use axum::Router;
use common::{bounded, start};
use fibr::http::ServerConfig;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "hello over h2" }))
        .route(
            "/version",
            get(|req: axum::extract::Request| async move { format!("{:?}", req.version()) }),
        )
        .route("/big", get(|| async { vec![b'x'; 8 << 20] }))
        .route("/echo", post(|body: axum::body::Bytes| async move { body }))
}

fn run(cmd: &mut Command) -> (bool, String, String) {
    let out = cmd.stdin(Stdio::null()).output().expect("run a peer");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn url(addr: SocketAddr, path: &str) -> String {
    format!("http://127.0.0.1:{}{path}", addr.port())
}

#[test]
fn curl_speaks_h2c_with_prior_knowledge_and_http11_on_the_same_port() {
    bounded(LIMIT, || {
        let addr = start(app(), ServerConfig::default());
        // One URL per curl: curl 7.88 fails to reuse a prior-knowledge connection
        // ("Error in the HTTP2 framing layer" against axum::serve too); reuse is h2load's,
        // nghttp's and Python's to check.
        for (path, body) in [("/", "hello over h2"), ("/version", "HTTP/2.0")] {
            let (ok, out, err) = run(Command::new("curl")
                .args([
                    "-sS",
                    "--http2-prior-knowledge",
                    "-w",
                    "|%{http_code} %{http_version}",
                ])
                .arg(url(addr, path)));
            assert!(ok, "curl failed: {err}");
            assert_eq!(out, format!("{body}|200 2"));
        }
        let (ok, out, err) = run(Command::new("curl")
            .args(["-sS", "--http1.1", "-w", "|%{http_version}"])
            .arg(url(addr, "/version")));
        assert!(ok, "curl failed: {err}");
        assert_eq!(out, "HTTP/1.1|1.1");
    });
}

#[test]
fn curl_downloads_and_uploads_through_flow_control() {
    bounded(LIMIT, || {
        let addr = start(app(), ServerConfig::default());
        let (ok, out, err) = run(Command::new("curl")
            .args(["-sS", "--http2-prior-knowledge", "-o", "/dev/null"])
            .args(["-w", "%{size_download} %{http_version}"])
            .arg(url(addr, "/big")));
        assert!(ok, "curl failed: {err}");
        assert_eq!(out, format!("{} 2", 8 << 20));

        let file = common::TempPath::new("h2-upload", "bin");
        let upload: Vec<u8> = (0..1_500_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&file, &upload).unwrap();
        let echoed = common::TempPath::new("h2-echoed", "bin");
        let (ok, _, err) = run(Command::new("curl")
            .args(["-sS", "--http2-prior-knowledge", "--data-binary"])
            .arg(format!("@{}", file.display()))
            .arg("-o")
            .arg(echoed.path())
            .arg(url(addr, "/echo")));
        assert!(ok, "curl failed: {err}");
        assert!(
            std::fs::read(&echoed).unwrap() == upload,
            "1.5 MB echoed intact"
        );
    });
}

#[test]
fn h2load_completes_every_request_on_multiplexed_streams() {
    bounded(LIMIT, || {
        let addr = start(app(), ServerConfig::default());
        common::require_tool("h2load", "nghttp2-client");
        let (ok, out, err) = run(Command::new("h2load")
            .args(["-c", "4", "-m", "10", "-n", "4000"])
            .arg(url(addr, "/")));
        assert!(ok, "h2load failed: {err}\n{out}");
        assert!(
            out.contains(
                "4000 total, 4000 started, 4000 done, 4000 succeeded, 0 failed, 0 errored"
            ),
            "{out}"
        );
    });
}

/// A Python `h2` client on a plain socket: 20 streams at once, each a POST with a body and
/// trailers, answered out of order; also checks our SETTINGS.
const PY_H2: &str = r#"
import socket, sys, h2.connection, h2.events, h2.config
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port), timeout=10)
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
c.initiate_connection()
s.sendall(c.data_to_send())
bodies = {}
for i in range(20):
    sid = c.get_next_available_stream_id()
    c.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":authority", "x"), (":path", "/echo")])
    c.send_data(sid, (b"%d:" % i) * 1000)
    c.send_headers(sid, [("x-trailer", "t")], end_stream=True)
    bodies[sid] = (b"%d:" % i) * 1000
s.sendall(c.data_to_send())
got, done, settings = {}, set(), None
while len(done) < 20:
    data = s.recv(65536)
    if not data:
        sys.exit("EOF before all responses")
    for e in c.receive_data(data):
        if isinstance(e, h2.events.RemoteSettingsChanged):
            settings = {int(k): v.new_value for k, v in e.changed_settings.items()}
        elif isinstance(e, h2.events.ResponseReceived):
            assert dict(e.headers)[b":status"] == b"200", e.headers
        elif isinstance(e, h2.events.DataReceived):
            got[e.stream_id] = got.get(e.stream_id, b"") + e.data
            c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
        elif isinstance(e, h2.events.StreamEnded):
            done.add(e.stream_id)
        elif isinstance(e, (h2.events.StreamReset, h2.events.ConnectionTerminated)):
            sys.exit("unexpected %r" % e)
    s.sendall(c.data_to_send())
assert got == bodies, "bodies differ"
assert settings[3] == 250, settings  # SETTINGS_MAX_CONCURRENT_STREAMS
c.close_connection()
s.sendall(c.data_to_send())
print("ok", len(done))
"#;

#[test]
fn python_h2_runs_twenty_streams_with_bodies_and_trailers() {
    bounded(LIMIT, || {
        let addr = start(app(), ServerConfig::default());
        common::require_python("h2");
        let (ok, out, err) = run(Command::new("python3")
            .args(["-c", PY_H2])
            .arg(addr.port().to_string()));
        assert!(ok, "python h2 failed: {err}\n{out}");
        assert_eq!(out.trim(), "ok 20");
    });
}

const PY_HTTPX: &str = r#"
import sys, httpx
port = int(sys.argv[1])
with httpx.Client(http1=False, http2=True, timeout=10) as c:
    for path in ["/", "/version"]:
        r = c.get("http://127.0.0.1:%d%s" % (port, path))
        print(r.http_version, r.status_code, r.text)
    r = c.post("http://127.0.0.1:%d/echo" % port, content=b"z" * 200000)
    print(r.http_version, r.status_code, len(r.content))
"#;

#[test]
fn httpx_over_h2c() {
    bounded(LIMIT, || {
        let addr = start(app(), ServerConfig::default());
        common::require_python("httpx");
        let (ok, out, err) = run(Command::new("python3")
            .args(["-c", PY_HTTPX])
            .arg(addr.port().to_string()));
        assert!(ok, "httpx failed: {err}\n{out}");
        assert_eq!(
            out,
            "HTTP/2 200 hello over h2\nHTTP/2 200 HTTP/2.0\nHTTP/2 200 200000\n"
        );
    });
}

#[test]
fn hyper_http2_client_multiplexes_requests() {
    bounded(LIMIT, || {
        let addr = start(app(), ServerConfig::default());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (send, conn) = hyper::client::conn::http2::handshake(
                hyper_util::rt::TokioExecutor::new(),
                hyper_util::rt::TokioIo::new(tcp),
            )
            .await
            .unwrap();
            tokio::spawn(conn);
            let mut tasks = Vec::new();
            for i in 0..50 {
                let mut send = send.clone();
                tasks.push(tokio::spawn(async move {
                    let body = format!("request {i}").repeat(100);
                    let req = http::Request::post("http://127.0.0.1/echo")
                        .body(http_body_util::Full::new(bytes::Bytes::from(body.clone())))
                        .unwrap();
                    let resp = send.send_request(req).await.unwrap();
                    assert_eq!(resp.status(), 200);
                    assert_eq!(resp.version(), http::Version::HTTP_2);
                    let got = http_body_util::BodyExt::collect(resp.into_body())
                        .await
                        .unwrap()
                        .to_bytes();
                    assert_eq!(got, body.as_bytes());
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
        });
    });
}

#[test]
fn with_h2c_off_the_preface_is_not_http2() {
    bounded(LIMIT, || {
        let mut cfg = ServerConfig::default();
        cfg.http2.h2c = false;
        let addr = start(app(), cfg);
        let (ok, out, _) = run(Command::new("curl")
            .args(["-sS", "--http2-prior-knowledge", "-w", "%{http_version}"])
            .arg(url(addr, "/")));
        assert!(
            !ok || !out.ends_with('2'),
            "h2c was served although turned off: {out}"
        );
        let (ok, out, err) = run(Command::new("curl")
            .args(["-sS", "--http1.1"])
            .arg(url(addr, "/")));
        assert!(ok, "{err}");
        assert_eq!(out, "hello over h2");
    });
}

/// h2 over TLS: ALPN offers `h2` first, so curl and Python's httpx pick it; a client that
/// offers only `http/1.1` still gets HTTP/1.1 from the same port.
#[cfg(feature = "tls")]
#[test]
fn h2_over_tls_by_alpn_and_http11_for_clients_without_h2() {
    use common::pki::Pki;
    use std::sync::Arc;
    bounded(LIMIT, || {
        let pki = Pki::new();
        let leaf = pki.server(&["localhost"]);
        let listener = fibr::run(fibr::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let tls = Arc::new(pki.server_config(&leaf));
        drop(fibr::spawn(async move {
            let _ = fibr::serve(listener, app()).with_tls(tls).await;
        }));
        let base = format!("https://localhost:{}", addr.port());
        let resolve = format!("localhost:{}:127.0.0.1", addr.port());
        for (flag, version, body) in [
            ("--http2", "2", "HTTP/2.0"),
            ("--http1.1", "1.1", "HTTP/1.1"),
        ] {
            let (ok, out, err) = run(Command::new("curl")
                .args(["-sS", flag, "--cacert"])
                .arg(&*pki.ca_pem)
                .args(["--resolve", &resolve, "-w", "|%{http_version}"])
                .arg(format!("{base}/version")));
            assert!(ok, "curl {flag} failed: {err}");
            assert_eq!(out, format!("{body}|{version}"));
        }
        let (ok, out, err) = run(Command::new("curl")
            .args(["-sS", "--http2", "--cacert"])
            .arg(&*pki.ca_pem)
            .args([
                "--resolve",
                &resolve,
                "-o",
                "/dev/null",
                "-w",
                "%{size_download}",
            ])
            .arg(format!("{base}/big")));
        assert!(ok, "curl failed: {err}");
        assert_eq!(out, (8 << 20).to_string());
        common::require_tool("h2load", "nghttp2-client");
        let (ok, out, err) = run(Command::new("h2load")
            .args(["-c", "2", "-m", "10", "-n", "1000"])
            .arg(format!("https://127.0.0.1:{}/", addr.port())));
        assert!(ok, "h2load failed: {err}\n{out}");
        assert!(out.contains("1000 succeeded"), "{out}");
        assert!(out.contains("Application protocol: h2"), "{out}");
    });
}

/// `curl --http2` on a plain URL asks for h2c with `Upgrade: h2c`: the request is answered
/// on stream 1 after `101 Switching Protocols`, and the connection goes on in HTTP/2. A
/// request with a body is answered over HTTP/1.1 instead (its body would have to be read
/// before switching).
#[test]
fn curl_upgrades_to_h2c() {
    bounded(LIMIT, || {
        let addr = start(app(), ServerConfig::default());
        let (ok, out, err) = run(Command::new("curl")
            .args(["-sS", "-v", "--http2", "-w", "|%{http_version}"])
            .arg(url(addr, "/version")));
        assert!(ok, "curl failed: {err}");
        assert_eq!(out, "HTTP/2.0|2");
        assert!(err.contains("101 Switching Protocols"), "{err}");
        let (ok, out, err) = run(Command::new("curl")
            .args(["-sS", "--http2", "-d", "abc", "-w", "|%{http_version}"])
            .arg(url(addr, "/echo")));
        assert!(ok, "curl failed: {err}");
        assert_eq!(out, "abc|1.1");
    });
}

/// A connection's first bytes decide HTTP/1 or HTTP/2 only once they can: a POST whose
/// first read is the lone "P" the preface also begins with is HTTP/1, and a preface that
/// arrives in pieces (its first 18 bytes are a whole HTTP/1 head, `PRI` alone could be a
/// POST) is HTTP/2.
#[test]
fn the_preface_is_told_apart_from_http1_however_the_bytes_arrive() {
    use std::io::{Read, Write};
    bounded(LIMIT, || {
        let addr = start(app(), ServerConfig::default());
        let pause = || std::thread::sleep(Duration::from_millis(50));

        let mut s = common::connect(addr);
        s.write_all(b"P").unwrap();
        pause();
        s.write_all(b"OST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
            .unwrap();
        let mut got = vec![0; 17];
        s.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"HTTP/1.1 200 OK\r\n");

        let mut s = common::connect(addr);
        for piece in [&b"PR"[..], b"I * HTTP/2.0\r\n\r\n", b"SM\r\n", b"\r\n"] {
            s.write_all(piece).unwrap();
            pause();
        }
        // An empty SETTINGS from us; the server's SETTINGS frame comes first.
        s.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).unwrap();
        let mut head = [0; 9];
        s.read_exact(&mut head).unwrap();
        assert_eq!(
            head[3], 4,
            "a SETTINGS frame, not an HTTP/1 answer: {head:?}"
        );
    });
}
