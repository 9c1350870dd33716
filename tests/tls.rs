//! HTTPS and raw TLS on fibr, against real peers over 127.0.0.1: curl, `openssl s_client`
//! (TLS 1.2 and 1.3, several cipher suites), Python's `ssl`, hyper's client over
//! tokio-rustls, and rustls's own client. Certificates are made in the test (rcgen). Bad
//! input (plain HTTP, garbage, truncated and oversized records, stalled and reset
//! handshakes) must get an alert or a clean close and leave other connections alone.

#![cfg(feature = "tls")]

mod common;

use axum::routing::{get, post};
use axum::{Extension, Router};
use common::pki::{provider, Pki};
use common::{bounded, Client};
use fibr::http::ServerConfig;
use fibr::net::TcpListener;
use fibr::tls::{rustls, TlsInfo, TlsServer};
use fibr::{Binding, Conn, Engine, Handler};
use rustls::pki_types::ServerName;
use rustls::server::{ResolvesServerCertUsingSni, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, ClientConnection, StreamOwned};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(30);

/// What the handler saw of the connection's TLS.
async fn info(Extension(tls): Extension<TlsInfo>) -> String {
    format!(
        "alpn={} version={:?} resumed={} peer_certs={}",
        tls.alpn_protocol()
            .map(String::from_utf8_lossy)
            .unwrap_or_default(),
        tls.protocol_version().unwrap(),
        tls.is_resumed(),
        tls.peer_certificates().len(),
    )
}

fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "hello over tls" }))
        .route("/info", get(info))
        .route("/big", get(|| async { vec![b'x'; 8 << 20] }))
        .route("/echo", post(|body: axum::body::Bytes| async move { body }))
}

fn start_tls(tls: rustls::ServerConfig, cfg: ServerConfig) -> SocketAddr {
    let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let addr = listener.local_addr().unwrap();
    drop(fibr::spawn(async move {
        let serve = fibr::serve(listener, app())
            .with_tls(Arc::new(tls))
            .with_config(cfg);
        if let Err(e) = serve.await {
            eprintln!("serve failed: {e}");
        }
    }));
    addr
}

/// A rustls client stream (std sockets) to `addr` for `name`.
fn connect(
    addr: SocketAddr,
    config: &Arc<ClientConfig>,
    name: &str,
) -> StreamOwned<ClientConnection, TcpStream> {
    let tcp = common::connect(addr);
    let conn = ClientConnection::new(
        config.clone(),
        ServerName::try_from(name.to_string()).unwrap(),
    )
    .unwrap();
    StreamOwned::new(conn, tcp)
}

fn get_over<S: Read + Write>(c: &mut Client<S>, path: &str) -> common::Resp {
    c.send(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes());
    c.response()
}

fn run(cmd: &mut Command) -> (bool, String, String) {
    let out = cmd.stdin(Stdio::null()).output().expect("run a peer");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn curl_gets_responses_on_one_kept_alive_connection() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let leaf = pki.server(&["localhost"]);
        let addr = start_tls(pki.server_config(&leaf), ServerConfig::default());
        let url = format!("https://localhost:{}/", addr.port());
        let (ok, out, err) = run(Command::new("curl")
            .args(["-sS", "--http1.1", "--cacert"])
            .arg(&*pki.ca_pem)
            .args(["--resolve", &format!("localhost:{}:127.0.0.1", addr.port())])
            .args(["-w", "|%{http_code} %{num_connects} %{http_version}\\n"])
            .arg(&url)
            .arg(format!("{url}info")));
        assert!(ok, "curl failed: {err}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "hello over tls|200 1 1.1", "{out}");
        // The second request reused the first connection (no new connect).
        assert!(
            lines[1]
                .starts_with("alpn=http/1.1 version=TLSv1_3 resumed=false peer_certs=0|200 0 1.1"),
            "{out}"
        );
    });
}

#[test]
fn openssl_s_client_on_tls12_and_tls13_with_several_suites() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let leaf = pki.server(&["localhost"]);
        let addr = start_tls(pki.server_config(&leaf), ServerConfig::default());
        let cases: &[(&str, &str, &str)] = &[
            ("-tls1_3", "-ciphersuites", "TLS_AES_128_GCM_SHA256"),
            ("-tls1_3", "-ciphersuites", "TLS_AES_256_GCM_SHA384"),
            ("-tls1_3", "-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"),
            ("-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256"),
            ("-tls1_2", "-cipher", "ECDHE-ECDSA-AES256-GCM-SHA384"),
            ("-tls1_2", "-cipher", "ECDHE-ECDSA-CHACHA20-POLY1305"),
        ];
        for (version, flag, suite) in cases {
            let mut child = Command::new("openssl")
                .args([
                    "s_client",
                    "-brief",
                    "-connect",
                    &addr.to_string(),
                    "-servername",
                    "localhost",
                ])
                .arg("-CAfile")
                .arg(&*pki.ca_pem)
                .args([*version, *flag, *suite, "-ign_eof"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("openssl");
            child
                .stdin
                .take()
                .unwrap()
                .write_all(b"GET /info HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .unwrap();
            let out = child.wait_with_output().unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stdout.starts_with("HTTP/1.1 200 OK\r\n"),
                "{version} {suite}: {stdout} {stderr}"
            );
            let want_version = if *version == "-tls1_3" {
                "TLSv1_3"
            } else {
                "TLSv1_2"
            };
            assert!(
                stdout.contains(&format!("version={want_version}")),
                "{stdout}"
            );
            assert!(stderr.contains("Verification: OK"), "{stderr}");
            assert!(stderr.contains(suite), "{suite} was negotiated: {stderr}");
        }
    });
}

#[test]
fn python_ssl_pipelines_and_sees_close_notify() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let leaf = pki.server(&["localhost"]);
        let addr = start_tls(pki.server_config(&leaf), ServerConfig::default());
        // 16 requests in one write; the last asks to close. With ragged EOFs not suppressed
        // (wrap_socket suppresses them by default), Python raises SSLEOFError when the
        // connection ends without close_notify: "clean" proves ours was sent.
        let script = r#"
import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[1])
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[2]))),
                    server_hostname="localhost", suppress_ragged_eofs=False)
version = s.version()
reqs = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n" * 15 + b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
s.sendall(reqs)
data = b""
end = "clean"
while True:
    try:
        chunk = s.recv(65536)
    except ssl.SSLEOFError:
        end = "no close_notify"
        break
    if not chunk:
        break
    data += chunk
print(data.count(b"HTTP/1.1 200 OK"), data.count(b"hello over tls"), version, end)
"#;
        let (ok, out, err) = run(Command::new("python3")
            .arg("-c")
            .arg(script)
            .arg(&*pki.ca_pem)
            .arg(addr.port().to_string()));
        assert!(ok, "python failed: {err}");
        assert_eq!(out.trim(), "16 16 TLSv1.3 clean");
    });
}

#[test]
fn hyper_client_over_tokio_rustls() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let leaf = pki.server(&["localhost"]);
        let addr = start_tls(pki.server_config(&leaf), ServerConfig::default());
        let mut client = pki.client_config();
        client.alpn_protocols = vec![b"http/1.1".to_vec()];
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let tls = connector
                .connect(ServerName::try_from("localhost").unwrap(), tcp)
                .await
                .unwrap();
            assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
            let (mut send, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                    .await
                    .unwrap();
            tokio::spawn(conn);
            for path in ["/", "/big", "/info"] {
                let req = http::Request::get(path)
                    .header("host", "localhost")
                    .body(http_body_util::Full::new(bytes::Bytes::new()))
                    .unwrap();
                let resp = send.send_request(req).await.unwrap();
                assert_eq!(resp.status(), 200);
                let body = http_body_util::BodyExt::collect(resp.into_body())
                    .await
                    .unwrap()
                    .to_bytes();
                match path {
                    "/" => assert_eq!(&body[..], b"hello over tls"),
                    "/big" => assert!(body.len() == 8 << 20 && body.iter().all(|b| *b == b'x')),
                    _ => assert!(body.starts_with(b"alpn=http/1.1"), "{body:?}"),
                }
            }
            let upload = vec![7u8; 1 << 20];
            let req = http::Request::post("/echo")
                .header("host", "localhost")
                .body(http_body_util::Full::new(bytes::Bytes::from(
                    upload.clone(),
                )))
                .unwrap();
            let resp = send.send_request(req).await.unwrap();
            let body = http_body_util::BodyExt::collect(resp.into_body())
                .await
                .unwrap()
                .to_bytes();
            assert!(
                body[..] == upload[..],
                "a 1 MiB upload echoed back (axum's limit is 2 MB)"
            );
        });
    });
}

#[test]
fn sni_picks_the_certificate_for_the_name() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let (a, b) = (pki.server(&["a.test"]), pki.server(&["b.test"]));
        let mut resolver = ResolvesServerCertUsingSni::new();
        for (name, leaf) in [("a.test", &a), ("b.test", &b)] {
            let key = provider()
                .key_provider
                .load_private_key(leaf.key())
                .unwrap();
            resolver
                .add(name, CertifiedKey::new(leaf.chain.clone(), key))
                .unwrap();
        }
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(resolver));
        let addr = start_tls(config, ServerConfig::default());
        let client = Arc::new(pki.client_config());
        for (name, leaf) in [("a.test", &a), ("b.test", &b), ("a.test", &a)] {
            let mut c = Client::over(connect(addr, &client, name));
            let resp = get_over(&mut c, "/");
            assert_eq!(resp.status, 200);
            let certs = c.s.conn.peer_certificates().unwrap();
            assert_eq!(certs[0], leaf.chain[0], "{name} got its own certificate");
        }
        // A name the server has no certificate for: the handshake fails.
        let mut s = connect(addr, &client, "c.test");
        assert!(s
            .write_all(b"GET / HTTP/1.1\r\nHost: c\r\n\r\n")
            .and_then(|_| s.flush())
            .is_err());
    });
}

#[test]
fn a_client_certificate_is_required_seen_and_refused_without() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let leaf = pki.server(&["localhost"]);
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(pki.roots()), provider())
                .build()
                .unwrap();
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(leaf.chain.clone(), leaf.key())
            .unwrap();
        let addr = start_tls(config, ServerConfig::default());

        let me = pki.client("alice");
        let with_cert = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(pki.roots())
            .with_client_auth_cert(me.chain.clone(), me.key())
            .unwrap();
        let mut c = Client::over(connect(addr, &Arc::new(with_cert), "localhost"));
        let resp = get_over(&mut c, "/info");
        assert_eq!(resp.status, 200);
        assert!(
            resp.text().ends_with("peer_certs=2"),
            "the handler sees the chain: {}",
            resp.text()
        );

        // openssl with the certificate, too.
        let (ok, out, err) = run(Command::new("curl")
            .args(["-sS", "--cacert"])
            .arg(&*pki.ca_pem)
            .arg("--cert")
            .arg(&*me.cert_pem)
            .arg("--key")
            .arg(&*me.key_pem)
            .args(["--resolve", &format!("localhost:{}:127.0.0.1", addr.port())])
            .arg(format!("https://localhost:{}/info", addr.port())));
        assert!(
            ok && out.ends_with("peer_certs=2"),
            "curl with a client cert: {out} {err}"
        );

        // Without one: refused (TLS 1.3 sends the alert after the client's Finished).
        let mut s = connect(addr, &Arc::new(pki.client_config()), "localhost");
        let _ = s.write_all(b"GET /info HTTP/1.1\r\nHost: localhost\r\n\r\n");
        let mut buf = Vec::new();
        let err = s.read_to_end(&mut buf).unwrap_err();
        assert!(buf.is_empty(), "no response without a certificate");
        assert!(err.to_string().contains("CertificateRequired"), "{err}");
    });
}

#[test]
fn a_second_connection_resumes_on_tls13_and_tls12() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let leaf = pki.server(&["localhost"]);
        let addr = start_tls(pki.server_config(&leaf), ServerConfig::default());
        for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
            let client = Arc::new(
                ClientConfig::builder_with_provider(provider())
                    .with_protocol_versions(&[version])
                    .unwrap()
                    .with_root_certificates(pki.roots())
                    .with_no_client_auth(),
            );
            let mut seen = Vec::new();
            for _ in 0..2 {
                let mut c = Client::over(connect(addr, &client, "localhost"));
                let resp = get_over(&mut c, "/info");
                seen.push(resp.text());
                assert_eq!(
                    c.s.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
                    seen.len() == 2
                );
            }
            assert!(seen[0].contains("resumed=false"), "{seen:?}");
            assert!(seen[1].contains("resumed=true"), "{version:?}: {seen:?}");
        }
    });
}

#[test]
fn plain_http_on_the_tls_port_gets_a_400() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let leaf = pki.server(&["localhost"]);
        let addr = start_tls(pki.server_config(&leaf), ServerConfig::default());
        let mut c = Client::connect(addr);
        let resp = c.get("/");
        assert_eq!(resp.status, 400);
        assert!(resp.closes());
        assert!(resp
            .text()
            .contains("plain HTTP request was sent to an HTTPS port"));
        c.expect_closed(Duration::from_secs(2));
        // curl agrees.
        let (_, out, _) = run(Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
            .arg(format!("http://127.0.0.1:{}/", addr.port())));
        assert_eq!(out, "400");
    });
}

/// Reads until EOF (or an error such as a reset); what arrived first.
fn until_closed(s: &mut TcpStream, within: Duration) -> Vec<u8> {
    s.set_read_timeout(Some(within)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let start = Instant::now();
    loop {
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if common::is_timeout(&e) => {
                panic!("not closed within {within:?} (after {:?})", start.elapsed())
            }
            Err(_) => return got,
        }
    }
}

#[test]
fn bad_handshakes_get_an_alert_or_a_close_and_disturb_no_one() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let leaf = pki.server(&["localhost"]);
        // On an engine of its own, whose connection count is this test's alone.
        let tls = TlsServer::new(
            Arc::new(pki.server_config(&leaf)),
            fibr::http::Server::new(app()),
        )
        .with_handshake_timeout(Duration::from_millis(400));
        let engine =
            Engine::new(fibr::Config::default(), [Binding::tcp("127.0.0.1:0", tls)]).unwrap();
        let addr = engine.binding_addrs(0)[0];
        let client = Arc::new(pki.client_config());
        // A good connection that stays up through everything below.
        let mut good = Client::over(connect(addr, &client, "localhost"));
        assert_eq!(get_over(&mut good, "/").status, 200);

        // Garbage in a handshake record and a record longer than TLS allows get an alert
        // record (content type 21), then the close; a handshake message claiming 6 MB is
        // refused by rustls with a plain close. None waits for the handshake timeout.
        let junk: [(&[u8], bool); 3] = [
            (b"\x16\x03\x01\x00\x05\x01\x00\x00\x01\xff", true),
            (b"\x16\x03\x01\xff\xff\x01\x00", true),
            (b"\x16\x03\x01\x00\x05hello", false),
        ];
        for (bytes, alert) in junk {
            let mut s = common::connect(addr);
            s.write_all(bytes).unwrap();
            let start = Instant::now();
            let got = until_closed(&mut s, Duration::from_secs(2));
            assert!(
                start.elapsed() < Duration::from_millis(300),
                "{bytes:?} closed at once"
            );
            if alert {
                assert_eq!(got.first(), Some(&21), "an alert for {bytes:?}: {got:?}");
            } else {
                assert!(got.is_empty(), "{got:?}");
            }
            assert_eq!(get_over(&mut good, "/").status, 200);
        }

        // A ClientHello cut short, then EOF: closed without an answer.
        let hello = client_hello(&client);
        let mut s = common::connect(addr);
        s.write_all(&hello[..hello.len() / 2]).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        assert!(until_closed(&mut s, Duration::from_secs(2)).is_empty());

        // A handshake that stalls (nothing, or half a ClientHello) is closed at the timeout.
        for sent in [&[][..], &hello[..10]] {
            let mut s = common::connect(addr);
            s.write_all(sent).unwrap();
            let start = Instant::now();
            until_closed(&mut s, Duration::from_secs(3));
            let took = start.elapsed();
            assert!(
                took >= Duration::from_millis(300) && took < Duration::from_secs(2),
                "{sent:?}: {took:?}"
            );
        }

        // A peer that resets mid-handshake.
        for _ in 0..20 {
            let s = common::connect(addr);
            (&s).write_all(&hello[..hello.len() - 3]).unwrap();
            socket2::SockRef::from(&s)
                .set_linger(Some(Duration::ZERO))
                .unwrap();
            drop(s);
        }
        assert_eq!(get_over(&mut good, "/").status, 200);
        // Nothing leaked: every bad connection is gone, the good one is still there.
        let settled = common::wait_until(Duration::from_secs(3), || engine.connections() == 1);
        assert!(settled, "{} connections left", engine.connections());
        assert_eq!(get_over(&mut good, "/").status, 200);
        engine.shutdown(Duration::from_secs(1));
    });
}

/// The first flight of a real client: a ClientHello record.
fn client_hello(config: &Arc<ClientConfig>) -> Vec<u8> {
    let mut conn =
        ClientConnection::new(config.clone(), ServerName::try_from("localhost").unwrap()).unwrap();
    let mut out = Vec::new();
    conn.write_tls(&mut out).unwrap();
    assert_eq!(out[0], 0x16);
    out
}

/// A raw handler behind TLS: greets with what was negotiated, then echoes.
struct Greeter;

impl Handler for Greeter {
    fn on_open(&self, conn: &Conn) {
        let info = conn.tls_info().expect("on_open runs after the handshake");
        let _ = conn.send(format!("hi {:?}\n", info.protocol_version().unwrap()).as_bytes());
    }
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        let _ = conn.send(data);
    }
}

#[test]
fn a_raw_engine_binding_serves_tls() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let leaf = pki.server(&["localhost"]);
        let config = Arc::new(pki.server_config(&leaf));
        let engine = Engine::new(
            fibr::Config::default(),
            [Binding::tcp("127.0.0.1:0", TlsServer::new(config, Greeter))],
        )
        .unwrap();
        let addr = engine.binding_addrs(0)[0];
        let client = Arc::new(pki.client_config());
        let mut s = connect(addr, &client, "localhost");
        let mut greeting = [0u8; 11];
        s.read_exact(&mut greeting).unwrap();
        assert_eq!(&greeting, b"hi TLSv1_3\n");
        // 1 MiB echoed back, in pieces of every size.
        let data: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 253) as u8).collect();
        let mut at = 0;
        for size in (1..).map(|i| (i * 7919) % 65_536 + 1) {
            if at == data.len() {
                break;
            }
            let piece = &data[at..(at + size).min(data.len())];
            s.write_all(piece).unwrap();
            let mut back = vec![0u8; piece.len()];
            s.read_exact(&mut back).unwrap();
            assert!(back == piece, "the echo matches at {at}");
            at += piece.len();
        }
        engine.shutdown(Duration::from_secs(1));
    });
}

/// axum on hyper over tokio-rustls (how axum-server serves HTTPS), on a tokio runtime of
/// its own: a peer for fibr's client.
fn start_axum_tls(config: rustls::ServerConfig) -> (SocketAddr, tokio::runtime::Runtime) {
    use tower::ServiceExt;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    rt.spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc =
                    hyper::service::service_fn(|req: http::Request<hyper::body::Incoming>| {
                        app().oneshot(req.map(axum::body::Body::new))
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    (addr, rt)
}

/// A request through fibr's client, and its status and whole body.
async fn fetch<C: fibr::client::Connector>(
    client: &fibr::client::Client<C>,
    req: http::Request<http_body_util::Full<bytes::Bytes>>,
) -> (http::StatusCode, bytes::Bytes) {
    use http_body_util::BodyExt;
    let resp = client.request(req).await.expect("a response over https");
    let status = resp.status();
    (status, resp.into_body().collect().await.unwrap().to_bytes())
}

fn https(addr: SocketAddr, path: &str) -> http::request::Builder {
    http::Request::builder().uri(format!("https://localhost:{}{path}", addr.port()))
}

#[test]
fn fibr_client_over_https_to_fibr_and_to_axum_on_tokio_rustls() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let leaf = pki.server(&["localhost"]);
        let fibr_addr = start_tls(pki.server_config(&leaf), ServerConfig::default());
        let (axum_addr, _rt) = start_axum_tls(pki.server_config(&leaf));
        let client = fibr::client::Client::builder()
            .tls_config(Arc::new(pki.client_config()))
            .build_https();
        let empty = http_body_util::Full::<bytes::Bytes>::default;
        fibr::run(async move {
            for (n, addr) in [fibr_addr, axum_addr].into_iter().enumerate() {
                for _ in 0..3 {
                    let (status, body) =
                        fetch(&client, https(addr, "/").body(empty()).unwrap()).await;
                    assert_eq!((status.as_u16(), &body[..]), (200, &b"hello over tls"[..]));
                }
                assert_eq!(
                    client.idle_connections(),
                    n + 1,
                    "one kept-alive connection per server"
                );
                let (_, body) = fetch(&client, https(addr, "/big").body(empty()).unwrap()).await;
                assert!(body.len() == 8 << 20 && body.iter().all(|b| *b == b'x'));
                let upload = bytes::Bytes::from(vec![9u8; 1 << 20]);
                let req = https(addr, "/echo")
                    .method("POST")
                    .body(http_body_util::Full::new(upload.clone()))
                    .unwrap();
                assert!(fetch(&client, req).await.1 == upload, "1 MiB echoed");
            }
            // The default roots (webpki's) do not include the test CA: refused.
            let err = fibr::client::Client::builder()
                .build_https()
                .request(https(fibr_addr, "/").body(empty()).unwrap())
                .await
                .expect_err("the test CA is not among the webpki roots");
            assert!(err.to_string().contains("certificate"), "{err}");
        });
    });
}

#[test]
fn the_client_offers_h2_and_http11_by_alpn_and_speaks_what_the_server_picks() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let leaf = pki.server(&["localhost"]);
        // A server that prefers h2 (and can speak http/1.1); hyper's, over tokio-rustls,
        // speaks HTTP/1.1 only, so it must not pick h2: it offers http/1.1 alone.
        let mut config = pki.server_config(&leaf);
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let (addr, _rt) = start_axum_tls(config);
        let url: http::Uri = format!("https://localhost:{}/", addr.port())
            .parse()
            .unwrap();
        fibr::run(async move {
            // A client config naming no protocol: fibr offers h2 and http/1.1, and this
            // server picks http/1.1.
            let client = fibr::client::Client::builder()
                .tls_config(Arc::new(pki.client_config()))
                .build_https();
            let resp = client.get(url.clone()).await.expect("http/1.1 by ALPN");
            assert_eq!(resp.status(), 200);
            assert_eq!(resp.version(), http::Version::HTTP_11);
            // http1_only: http/1.1 alone is offered.
            let client = fibr::client::Client::builder()
                .http1_only(true)
                .tls_config(Arc::new(pki.client_config()))
                .build_https();
            let resp = client.get(url).await.expect("http/1.1 only");
            assert_eq!(resp.version(), http::Version::HTTP_11);
        });
    });
}

#[test]
fn file_bodies_are_sealed_from_the_file_as_the_peer_takes_them() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let leaf = pki.server(&["localhost"]);
        let data: Vec<u8> = (0..3 * 1024 * 1024 + 17)
            .map(|i: usize| (i * 7 % 251) as u8)
            .collect();
        let path = common::TempPath::new("tls-file-body", "bin");
        std::fs::write(&path, &data).unwrap();
        let file_path = path.to_path_buf();
        let svc = tower::service_fn(move |req: http::Request<fibr::body::Incoming>| {
            let file = std::fs::File::open(&file_path).unwrap();
            let body = match req.uri().path() {
                "/range" => fibr::http::FileBody::range(file, 1000, 50_000),
                _ => fibr::http::FileBody::new(file).unwrap(),
            };
            async move { Ok::<_, std::convert::Infallible>(http::Response::new(body)) }
        });
        let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let tls = Arc::new(pki.server_config(&leaf));
        drop(fibr::spawn(async move {
            let _ = fibr::serve(listener, svc).with_tls(tls).await;
        }));
        // Pipelined: the file, a range of it, the file again (sendfile cannot serve TLS:
        // the driver's file goes through the layer, read and sealed piece by piece).
        let mut c = Client::over(connect(addr, &Arc::new(pki.client_config()), "localhost"));
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /range HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(c.response().body == data, "whole file differs");
        assert!(c.response().body == data[1000..51_000], "range differs");
        assert!(c.response().body == data, "second whole file differs");
    });
}

#[test]
fn the_tests_run_on_the_provider_asked_for() {
    // FIBR_TLS_PROVIDER=aws-lc-rs (see common::tls_provider) installs aws-lc-rs as rustls's
    // process default; fibr's provider is then that one, else ring. Checked on the wire too,
    // so a run meant for aws-lc-rs cannot pass on ring: a client offering only
    // X25519MLKEM768 (a key exchange aws-lc-rs has and ring lacks) gets through the
    // handshake exactly when fibr's server is on aws-lc-rs.
    bounded(LIMIT, || {
        let aws = common::tls_provider::asked() == "aws-lc-rs";
        let pki = Pki::new();
        let leaf = pki.server(&["localhost"]);
        let addr = start_tls(pki.server_config(&leaf), ServerConfig::default());
        let mlkem = |p: &rustls::crypto::CryptoProvider| {
            p.kx_groups
                .iter()
                .any(|g| g.name() == rustls::NamedGroup::X25519MLKEM768)
        };
        assert_eq!(mlkem(&fibr::tls::crypto_provider()), aws, "fibr's provider");
        assert_eq!(mlkem(&provider()), aws, "the tests' provider");
        let mut c = Client::over(connect(addr, &Arc::new(pki.client_config()), "localhost"));
        assert_eq!(get_over(&mut c, "/info").status, 200);
        #[cfg(feature = "tls-aws-lc")]
        {
            let mut only_mlkem = rustls::crypto::aws_lc_rs::default_provider();
            only_mlkem
                .kx_groups
                .retain(|g| g.name() == rustls::NamedGroup::X25519MLKEM768);
            let config = ClientConfig::builder_with_provider(Arc::new(only_mlkem))
                .with_protocol_versions(&[&rustls::version::TLS13])
                .unwrap()
                .with_root_certificates(pki.roots())
                .with_no_client_auth();
            let mut s = connect(addr, &Arc::new(config), "localhost");
            let mut shaken = Ok(());
            while s.conn.is_handshaking() && shaken.is_ok() {
                shaken = s.conn.complete_io(&mut s.sock).map(drop);
            }
            assert_eq!(
                shaken.is_ok(),
                aws,
                "an X25519MLKEM768-only handshake: {shaken:?}"
            );
        }
    });
}

#[test]
fn a_round_of_pipelined_responses_leaves_as_one_record() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let leaf = pki.server(&["localhost"]);
        let addr = start_tls(pki.server_config(&leaf), ServerConfig::default());
        let mut tcp = common::connect(addr);
        let name = ServerName::try_from("localhost").unwrap();
        let mut tls = ClientConnection::new(Arc::new(pki.client_config()), name).unwrap();
        // The handshake and a first exchange (which also brings the session tickets).
        tls.writer()
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut plain = Vec::new();
        while common::find(&plain, b"hello over tls").is_none() {
            tls.complete_io(&mut tcp).unwrap();
            let _ = tls.reader().read_to_end(&mut plain);
        }
        // 16 requests in one record; the answers are read as raw records.
        let requests = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".repeat(16);
        tls.writer().write_all(&requests).unwrap();
        while tls.wants_write() {
            tls.write_tls(&mut tcp).unwrap();
        }
        let (mut raw, mut records, mut answered) = (Vec::new(), 0, Vec::new());
        while answered
            .windows(14)
            .filter(|w| w == b"hello over tls")
            .count()
            < 16
        {
            let mut buf = [0u8; 65536];
            let n = tcp.read(&mut buf).unwrap();
            assert!(n > 0, "closed after {records} records");
            raw.extend_from_slice(&buf[..n]);
            // Whole records go to the client; a partial one waits for more bytes.
            while raw.len() >= 5 && raw.len() >= 5 + u16::from_be_bytes([raw[3], raw[4]]) as usize {
                let len = 5 + u16::from_be_bytes([raw[3], raw[4]]) as usize;
                records += 1;
                tls.read_tls(&mut &raw[..len]).unwrap();
                tls.process_new_packets().unwrap();
                let _ = tls.reader().read_to_end(&mut answered);
                raw.drain(..len);
            }
        }
        assert_eq!(records, 1, "16 pipelined responses in one record");
    });
}

/// A connection accepted before the shutdown signal and still in its TLS handshake (the
/// HTTP server has not opened it yet) is waited for within `drain_first_request_grace`
/// of its accept (2 s here): the serve future resolves only after it finished its
/// handshake and got its answer. (Past the grace it is closed: tests/axum_examples.rs.)
#[test]
fn a_graceful_shutdown_waits_for_a_connection_in_its_handshake() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let leaf = pki.server(&["localhost"]);
        let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).expect("bind");
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let tls = Arc::new(pki.server_config(&leaf));
        let handle = fibr::spawn(async move {
            fibr::serve(listener, app())
                .with_tls(tls)
                .with_config(
                    ServerConfig::default().with_drain_first_request_grace(Duration::from_secs(2)),
                )
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await
        });
        // Accepted (its TLS session waits for the ClientHello), then the signal.
        let tcp = common::connect(addr);
        std::thread::sleep(Duration::from_millis(200));
        tx.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !handle.is_finished(),
            "resolved with a handshake in progress"
        );

        let client = Arc::new(pki.client_config());
        let tls = ClientConnection::new(client, ServerName::try_from("localhost").unwrap());
        let mut c = Client::over(StreamOwned::new(tls.unwrap(), tcp));
        let resp = get_over(&mut c, "/");
        assert_eq!((resp.status, resp.text().as_str()), (200, "hello over tls"));
        assert!(resp.closes(), "the answer while draining closes: {resp:?}");
        fibr::run(fibr::time::timeout(Duration::from_secs(3), handle))
            .expect("not resolved after the last answer")
            .expect("serve task")
            .expect("serve");
    });
}
