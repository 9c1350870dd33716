//! `fibr::client` through proxies that speak HTTP/2 (RFC 9113 §8.5's `CONNECT`), over real
//! sockets on 127.0.0.1: fibr's own proxy (`fibr::proxy::MakeForward`, what
//! `examples/proxy` serves with `TLS_CERT`/`TLS_KEY`) over TLS with ALPN `h2` (and, for
//! comparison, HTTP/1.1 over TLS), over h2c by prior knowledge, and an independent proxy
//! written on Python's `h2`; to `http://` and `https://` origins (HTTP/1.1 and h2 inside
//! the tunnel), with bodies larger than the streams' windows both ways, the proxy's
//! refusals, a proxy that never answers, and tunnels the proxy resets.
//!
//! Every test body runs under a watchdog: a proxy that hangs fails the test.

mod common;

use axum::body::{Body, Bytes};
use axum::routing::{any, post};
use axum::Router;
use common::pki::Pki;
use common::tunnel::Origins;
use common::{bounded, run_bounded, step};
use fibr::client::{Client, ErrorKind, HttpsConnector, Proxy};
use fibr::net::TcpListener;
use fibr::proxy::{MakeForward, ProxyConfig, Rules};
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

/// Larger than a stream's window (64 KiB by default on fibr's server) and the tunnel's
/// buffer, so flow control paces both directions.
const BIG: usize = 3 << 20;

/// The origins' app: who answered, and an echo.
fn origin_app() -> Router {
    Router::new()
        .route(
            "/who",
            axum::routing::get(|req: Request<Body>| async move { format!("{:?}", req.version()) }),
        )
        .route("/echo", post(|body: Bytes| async move { body }))
        .layer(axum::extract::DefaultBodyLimit::disable())
}

/// Serves `app` over TLS (ALPN h2 and http/1.1) with a certificate for `localhost`.
fn serve_tls<M, Marker>(pki: &Pki, app: M) -> SocketAddr
where
    M: fibr::http::MakeService<Marker> + Send + 'static,
    Marker: 'static,
    fibr::http::Server<M, Marker>: fibr::Handler,
{
    let leaf = pki.server(&["localhost"]);
    let tls = Arc::new(pki.server_config(&leaf));
    let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let addr = listener.local_addr().unwrap();
    drop(fibr::spawn(async move {
        if let Err(e) = fibr::serve(listener, app).with_tls(tls).await {
            eprintln!("serve failed: {e}");
        }
    }));
    addr
}

/// fibr's proxy over TLS, as `examples/proxy` runs it with `TLS_CERT`/`TLS_KEY`.
fn fibr_proxy_tls(pki: &Pki, rules: Rules) -> SocketAddr {
    serve_tls(pki, MakeForward::new(Arc::new(ProxyConfig::new(rules))))
}

/// fibr's proxy over plain TCP: HTTP/1.1, and h2c by its preface.
fn fibr_proxy_h2c(rules: Rules) -> SocketAddr {
    let make = MakeForward::new(Arc::new(ProxyConfig::new(rules)));
    common::start(make, fibr::http::ServerConfig::default())
}

/// A client for http and https (trusting `pki`) through `proxy`; no idle connections, so
/// every request opens a tunnel.
fn client(pki: &Pki, proxy: Proxy) -> Client<HttpsConnector> {
    let mut b = Client::builder();
    b.tls_config(Arc::new(pki.client_config()))
        .pool_max_idle_per_host(0)
        .proxy(proxy);
    b.build_https()
}

/// What `GET uri` answered.
async fn get(client: &Client<HttpsConnector>, uri: &str) -> String {
    let res = step(uri, client.get(uri)).await.expect(uri);
    assert_eq!(res.status(), StatusCode::OK, "{uri}");
    let body = step(uri, res.into_body().collect()).await.expect(uri);
    String::from_utf8(body.to_bytes().to_vec()).unwrap()
}

/// `BIG` bytes to `uri`'s echo and back.
async fn echo(client: &Client<HttpsConnector>, uri: &str) {
    let sent: Vec<u8> = (0..BIG).map(|i| (i % 251) as u8).collect();
    let mut req = Request::new(http_body_util::Full::new(Bytes::from(sent.clone())));
    *req.method_mut() = http::Method::POST;
    *req.uri_mut() = uri.parse().unwrap();
    let res = step(uri, client.request(req)).await.expect(uri);
    assert_eq!(res.status(), StatusCode::OK, "{uri}");
    let back = step(uri, res.into_body().collect()).await.expect(uri);
    assert!(back.to_bytes() == sent, "{uri}: the echo differs");
}

/// The origins, plain and over TLS.
struct Targets {
    http: String,
    https: String,
}

impl Targets {
    fn start(pki: &Pki) -> Targets {
        let plain = common::start(origin_app(), fibr::http::ServerConfig::default());
        let tls = serve_tls(pki, origin_app());
        Targets {
            http: format!("http://127.0.0.1:{}", plain.port()),
            https: format!("https://localhost:{}", tls.port()),
        }
    }

    /// Both origins through `client`: HTTP/1.1 inside the tunnel to the plain one, h2 by
    /// ALPN to the one over TLS, and a large echo each way.
    async fn check(&self, client: &Client<HttpsConnector>) {
        assert_eq!(get(client, &format!("{}/who", self.http)).await, "HTTP/1.1");
        assert_eq!(
            get(client, &format!("{}/who", self.https)).await,
            "HTTP/2.0"
        );
        echo(client, &format!("{}/echo", self.http)).await;
        echo(client, &format!("{}/echo", self.https)).await;
    }
}

#[test]
fn through_fibrs_proxy_over_tls_by_alpn_h2_and_http1() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let targets = Targets::start(&pki);
        let proxy = fibr_proxy_tls(&pki, Rules::allow_all());
        let url = format!("https://localhost:{}", proxy.port());
        // The proxy's ALPN picks h2: CONNECT streams. With `h2` alone offered the
        // handshake fails unless the proxy speaks it, so this one is HTTP/2 for sure.
        let over_h2 = Proxy::all(&url).unwrap();
        let h2_only = Proxy::all(&url).unwrap().http2_prior_knowledge();
        // ALPN http/1.1 alone: an HTTP/1.1 CONNECT over TLS.
        let mut h1 = pki.client_config();
        h1.alpn_protocols = vec![b"http/1.1".to_vec()];
        let over_h1 = Proxy::all(&url).unwrap().tls_config(Arc::new(h1));
        for proxy in [over_h2, h2_only, over_h1] {
            let client = client(&pki, proxy);
            fibr::run(async { targets.check(&client).await });
        }
    });
}

#[test]
fn through_fibrs_proxy_over_h2c_by_prior_knowledge() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let targets = Targets::start(&pki);
        let proxy = fibr_proxy_h2c(Rules::allow_all());
        let proxy = Proxy::all(&format!("http://127.0.0.1:{}", proxy.port()))
            .unwrap()
            .http2_prior_knowledge();
        let client = client(&pki, proxy);
        fibr::run(async { targets.check(&client).await });
    });
}

#[test]
fn refusals_are_typed_errors() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let targets = Targets::start(&pki);
        let rules = Rules::allow_all().require_auth(|u, p| u == "me" && p == "secret");
        let port = fibr_proxy_tls(&pki, rules).port();
        let who = format!("{}/who", targets.https);
        let kind = |proxy: Proxy| {
            let client = client(&pki, proxy);
            let who = who.clone();
            run_bounded(LIMIT, async move {
                step("a refused tunnel", client.get(who.as_str()))
                    .await
                    .map(|r| r.status())
                    .map_err(|e| (e.kind(), e.to_string()))
            })
        };
        let url = |auth: &str| format!("https://{auth}localhost:{port}");
        let (k, why) = kind(Proxy::all(&url("")).unwrap()).unwrap_err();
        assert_eq!(k, ErrorKind::ProxyAuth, "{why}");
        assert!(why.contains("407"), "{why}");
        let (k, why) = kind(Proxy::all(&url("me:wrong@")).unwrap()).unwrap_err();
        assert_eq!(k, ErrorKind::ProxyAuth, "{why}");
        assert_eq!(
            kind(Proxy::all(&url("me:secret@")).unwrap()),
            Ok(StatusCode::OK)
        );
        // The target rules refuse loopback: 403, the proxy's refusal.
        let local = "127.0.0.0/8".parse().unwrap();
        let port = fibr_proxy_tls(&pki, Rules::new().allow_clients(local)).port();
        let (k, why) = kind(Proxy::all(&format!("https://localhost:{port}")).unwrap()).unwrap_err();
        assert_eq!(k, ErrorKind::Proxy, "{why}");
        assert!(why.contains("403"), "{why}");
    });
}

#[test]
fn a_proxy_that_never_answers_the_connect_times_out() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let silent = Router::new().fallback(any(std::future::pending::<&'static str>));
        let port = serve_tls(&pki, silent).port();
        let proxy = Proxy::all(&format!("https://localhost:{port}"))
            .unwrap()
            .handshake_timeout(Duration::from_millis(500));
        let client = client(&pki, proxy);
        let started = Instant::now();
        let e = run_bounded(LIMIT, async move {
            step("a silent proxy", client.get("http://127.0.0.1:9/"))
                .await
                .expect_err("no tunnel")
        });
        assert_eq!(e.kind(), ErrorKind::ConnectTimeout, "{e}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    });
}

/// A target that answers a head and part of the body, then resets its connection: the
/// proxy resets the tunnel's stream (CONNECT_ERROR), and the client's read fails.
fn resetting_target() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && c.read_exact(&mut b).is_ok() {
                    head.push(b[0]);
                }
                let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n");
                let _ = c.write_all(&[b'x'; 1000]);
                std::thread::sleep(Duration::from_millis(200));
                common::tunnel::reset(c);
            });
        }
    });
    addr
}

#[test]
fn a_reset_mid_tunnel_fails_the_request_and_the_next_tunnel_works() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let targets = Targets::start(&pki);
        let origins = Origins::start();
        let partial = resetting_target();
        let proxy = fibr_proxy_tls(&pki, Rules::allow_all());
        let proxy = Proxy::all(&format!("https://localhost:{}", proxy.port())).unwrap();
        let client = client(&pki, proxy);
        fibr::run(async move {
            // Reset before any answer: the request fails.
            let uri = format!("http://{}/", origins.rst);
            let e = step("reset", client.get(uri.as_str()))
                .await
                .expect_err("reset");
            assert!(e.kind() != ErrorKind::Timeout, "{e}");
            // Reset within the body: the body fails, short of its length.
            let uri = format!("http://{partial}/");
            let res = step("partial", client.get(uri.as_str()))
                .await
                .expect("a head");
            let e = step("partial body", res.into_body().collect())
                .await
                .expect_err("a reset body");
            assert!(!e.to_string().is_empty());
            // The shared connection to the proxy carries on.
            assert_eq!(
                get(&client, &format!("{}/who", targets.http)).await,
                "HTTP/1.1"
            );
        });
    });
}

/// An HTTP/2 CONNECT proxy on Python's `h2` (TLS with ALPN h2 only): prints `port N`, then
/// `conn` for each connection and `connect AUTHORITY` for each tunnel. DATA is credited
/// once written to the target, and sent within the client's windows.
const PY_H2_PROXY: &str = r#"
import asyncio, ssl, sys
import h2.config, h2.connection, h2.events

async def handle(reader, writer):
    print("conn", flush=True)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
    conn.initiate_connection()
    writer.write(conn.data_to_send())
    targets, window = {}, asyncio.Event()

    def flush():
        writer.write(conn.data_to_send())

    async def down(sid, treader):
        while True:
            data = await treader.read(65536)
            if not data:
                if sid in targets:
                    conn.end_stream(sid)
                    flush()
                return
            while data:
                room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
                if room <= 0:
                    window.clear()
                    await window.wait()
                    continue
                conn.send_data(sid, data[:room])
                data = data[room:]
                flush()
            await writer.drain()

    async def open_tunnel(sid, authority):
        host, port = authority.rsplit(":", 1)
        try:
            treader, twriter = await asyncio.open_connection(host, int(port))
        except OSError:
            conn.send_headers(sid, [(":status", "502")], end_stream=True)
            flush()
            return
        targets[sid] = twriter
        conn.send_headers(sid, [(":status", "200")])
        flush()
        await down(sid, treader)

    while True:
        data = await reader.read(65536)
        if not data:
            break
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.RequestReceived):
                h = dict(ev.headers)
                assert h[":method"] == "CONNECT" and ":path" not in h and ":scheme" not in h, h
                print("connect", h[":authority"], flush=True)
                asyncio.ensure_future(open_tunnel(ev.stream_id, h[":authority"]))
            elif isinstance(ev, h2.events.DataReceived):
                t = targets.get(ev.stream_id)
                if t is not None:
                    t.write(ev.data)
                    await t.drain()
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                t = targets.get(ev.stream_id)
                if t is not None and t.can_write_eof():
                    t.write_eof()
            elif isinstance(ev, h2.events.StreamReset):
                t = targets.pop(ev.stream_id, None)
                if t is not None:
                    t.close()
            elif isinstance(ev, h2.events.WindowUpdated):
                window.set()
        flush()
        await writer.drain()
    writer.close()

async def main(cert, key):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["h2"])
    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)
    print("port", server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()

asyncio.run(main(sys.argv[1], sys.argv[2]))
"#;

/// The Python proxy, killed when dropped, and what it printed.
struct PyProxy {
    child: Child,
    port: u16,
    lines: Arc<Mutex<Vec<String>>>,
}

impl PyProxy {
    fn start(leaf: &common::pki::Leaf) -> PyProxy {
        common::require_python("h2");
        let mut child = Command::new("python3")
            .args(["-c", PY_H2_PROXY])
            .arg(leaf.cert_pem.path())
            .arg(leaf.key_pem.path())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        let port = first
            .strip_prefix("port ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("the proxy said {first:?}"));
        let lines = Arc::new(Mutex::new(Vec::new()));
        let seen = lines.clone();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                seen.lock().unwrap().push(line);
            }
        });
        PyProxy { child, port, lines }
    }
}

impl Drop for PyProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn through_an_independent_h2_proxy_on_python_h2() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let targets = Targets::start(&pki);
        let py = PyProxy::start(&pki.server(&["localhost"]));
        let proxy = Proxy::all(&format!("https://localhost:{}", py.port)).unwrap();
        let client = client(&pki, proxy);
        fibr::run(async { targets.check(&client).await });
        // Three tunnels (two to the HTTP/1.1 origin, whose connections are not kept idle;
        // one to the h2 origin, whose connection its two requests share), all on one
        // connection to the proxy.
        let lines = py.lines.lock().unwrap().clone();
        let conns = lines.iter().filter(|l| *l == "conn").count();
        let tunnels = lines.iter().filter(|l| l.starts_with("connect ")).count();
        assert_eq!((conns, tunnels), (1, 3), "{lines:?}");
    });
}

/// The TLS client config trusts the test CA; the proxy's own TLS settings come from the
/// client's when the proxy has none (checked above), or from `Proxy::tls_config`: without
/// the CA the proxy's certificate is refused.
#[test]
fn the_proxys_certificate_is_checked() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let port = fibr_proxy_tls(&pki, Rules::allow_all()).port();
        let stranger = Pki::new().client_config();
        let proxy = Proxy::all(&format!("https://localhost:{port}"))
            .unwrap()
            .tls_config(Arc::new(stranger));
        let client = client(&pki, proxy);
        let e = run_bounded(LIMIT, async move {
            step("untrusted", client.get("http://127.0.0.1:9/"))
                .await
                .expect_err("an untrusted proxy")
        });
        assert!(e.is_connect(), "{e:?}");
        assert!(e.to_string().contains("TLS"), "{e}");
    });
}
