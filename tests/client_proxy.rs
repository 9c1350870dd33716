//! `fibr::client` and `fibr::net::socks` through proxies we did not write, over real
//! sockets on 127.0.0.1: Debian's `microsocks` (SOCKS5, with and without a password) and
//! `tinyproxy` (HTTP forwarding and CONNECT, Basic auth), plus fibr's own
//! `fibr::proxy::Server` for SOCKS4, SOCKS4a, names the proxy resolves, and its rules.
//! Targets are small std servers (plain and TLS with an rcgen certificate) that answer
//! with what they received (one of them also stands in for a forwarding proxy, to show
//! the absolute form on the wire). The environment's proxies are read in child processes
//! (the environment is process-wide). With CI=true a missing microsocks or tinyproxy fails.
//!
//! Every test body runs under a watchdog: a proxy that hangs fails the test.

mod common;

use common::pki::Pki;
use common::{bounded, run_bounded, step, TempPath};
use fibr::client::{Client, Error, ErrorKind, HttpsConnector, Proxy, ResponseBody};
use fibr::proxy::{ProxyConfig, Rules, Server};
use fibr::tls::rustls;
use fibr::{Binding, Config, Engine};
use http::{Response, StatusCode};
use http_body_util::BodyExt;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(30);
const IO_TIMEOUT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------
// Targets
// ---------------------------------------------------------------------------------------

/// Reads one request head and answers with what the target saw: the request line, and
/// the `Via` and `Proxy-Authorization` headers (`-` when absent).
fn answer<S: Read + Write>(mut s: S) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or("").to_string();
    let header = |name: &str| {
        head.split("\r\n")
            .skip(1)
            .find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.trim()
                    .eq_ignore_ascii_case(name)
                    .then(|| v.trim().to_string())
            })
            .unwrap_or_else(|| "-".into())
    };
    let body = format!(
        "{line}\nvia={}\nauth={}\n",
        header("via"),
        header("proxy-authorization")
    );
    let resp = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = s.write_all(resp.as_bytes());
    let _ = s.flush();
}

/// Accepts on `listener` forever, each connection on its own thread.
fn serve(listener: TcpListener, each: impl Fn(TcpStream) + Send + Sync + 'static) {
    let each = Arc::new(each);
    thread::spawn(move || {
        for s in listener.incoming().flatten() {
            let each = each.clone();
            s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
            thread::spawn(move || each(s));
        }
    });
}

/// A plain HTTP target on 127.0.0.1.
fn http_target() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    serve(l, answer);
    addr
}

/// An HTTPS target on 127.0.0.1 (HTTP/1.1, no ALPN) with a certificate for `localhost`
/// and `127.0.0.1` from `pki`.
fn https_target(pki: &Pki) -> SocketAddr {
    let leaf = pki.server(&["localhost", "127.0.0.1"]);
    let config = Arc::new(pki.server_config(&leaf));
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    serve(l, move |s| {
        let conn = rustls::ServerConnection::new(config.clone()).unwrap();
        answer(rustls::StreamOwned::new(conn, s));
    });
    addr
}

/// A target that speaks first: `banner` on accept, then what it reads echoed back.
fn banner_target(banner: &'static [u8]) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    serve(l, move |mut s| {
        let _ = s.write_all(banner);
        let mut buf = [0u8; 1024];
        while let Ok(n @ 1..) = s.read(&mut buf) {
            let _ = s.write_all(&buf[..n]);
        }
    });
    addr
}

/// A port nothing listens on (bound, then closed).
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

// ---------------------------------------------------------------------------------------
// Proxies
// ---------------------------------------------------------------------------------------

/// A proxy daemon we started; killed (by its own handle) when dropped.
struct Daemon {
    child: Child,
    port: u16,
    _config: Option<TempPath>,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    fn url(&self, scheme: &str, userinfo: &str) -> String {
        format!("{scheme}://{userinfo}127.0.0.1:{}", self.port)
    }

    /// Starts `cmd` (which listens on `port`) and waits until it accepts.
    fn start(mut cmd: Command, port: u16, config: Option<TempPath>) -> Daemon {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut d = Daemon {
            child,
            port,
            _config: config,
        };
        let until = Instant::now() + IO_TIMEOUT;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                d.child.try_wait().unwrap().is_none(),
                "{cmd:?} exited at start"
            );
            assert!(Instant::now() < until, "{cmd:?} never listened");
            thread::sleep(Duration::from_millis(20));
        }
        d
    }
}

/// microsocks (SOCKS5) on 127.0.0.1, with a user and password if given.
fn microsocks(auth: Option<(&str, &str)>) -> Daemon {
    common::require_tool("microsocks", "microsocks");
    let port = closed_port();
    let mut cmd = Command::new("microsocks");
    cmd.args(["-i", "127.0.0.1", "-p", &port.to_string()]);
    if let Some((user, password)) = auth {
        cmd.args(["-u", user, "-P", password]);
    }
    Daemon::start(cmd, port, None)
}

/// tinyproxy (HTTP forwarding and CONNECT to any port) on 127.0.0.1, with Basic auth if
/// given.
fn tinyproxy(auth: Option<(&str, &str)>) -> Daemon {
    common::require_tool("tinyproxy", "tinyproxy");
    let port = closed_port();
    let mut conf = format!(
        "Port {port}\nListen 127.0.0.1\nTimeout 20\nMaxClients 50\nAllow 127.0.0.1\n\
         LogLevel Critical\n"
    );
    if let Some((user, password)) = auth {
        conf.push_str(&format!("BasicAuth {user} {password}\n"));
    }
    let path = TempPath::new("tinyproxy", "conf");
    std::fs::write(&path, conf).unwrap();
    let mut cmd = Command::new("tinyproxy");
    cmd.arg("-d").arg("-c").arg(path.path());
    Daemon::start(cmd, port, Some(path))
}

/// fibr's proxy on 127.0.0.1 with `rules`; it stops when the engine drops.
fn fibr_proxy(rules: Rules) -> (Engine, SocketAddr) {
    let engine = Engine::new(
        Config::default().with_workers(1),
        [Binding::tcp(
            "127.0.0.1:0",
            Server::new(ProxyConfig::new(rules)),
        )],
    )
    .unwrap();
    let addr = engine.binding_addrs(0)[0];
    (engine, addr)
}

/// Rules that open loopback at `ports` (names resolving there included).
fn loopback(ports: &[u16]) -> Rules {
    ports.iter().fold(Rules::new(), |r, &p| {
        r.allow_target_net("127.0.0.1/32".parse().unwrap(), p..=p)
    })
}

// ---------------------------------------------------------------------------------------
// Clients
// ---------------------------------------------------------------------------------------

/// A client for http and https (trusting `pki`) through `proxies`.
fn client(pki: &Pki, proxies: &[Proxy]) -> Client<HttpsConnector> {
    let mut b = Client::builder();
    b.tls_config(Arc::new(pki.client_config()))
        .pool_max_idle_per_host(0);
    for p in proxies {
        b.proxy(p.clone());
    }
    b.build_https()
}

async fn text(res: Response<ResponseBody>) -> String {
    let body = step("body", res.into_body().collect()).await.expect("body");
    String::from_utf8(body.to_bytes().to_vec()).unwrap()
}

/// `GET uri`: what the target saw.
async fn seen(client: &Client<HttpsConnector>, uri: &str) -> String {
    let res = step(uri, client.get(uri)).await.expect(uri);
    assert_eq!(res.status(), StatusCode::OK, "{uri}");
    text(res).await
}

/// `GET uri`, which must fail.
async fn failed(client: &Client<HttpsConnector>, uri: &str) -> Error {
    match step(uri, client.get(uri)).await {
        Ok(res) => panic!("{uri}: answered {}", res.status()),
        Err(e) => e,
    }
}

fn run<T: Send + 'static>(fut: impl std::future::Future<Output = T> + Send + 'static) -> T {
    run_bounded(LIMIT, fut)
}

// ---------------------------------------------------------------------------------------
// microsocks: SOCKS5
// ---------------------------------------------------------------------------------------

#[test]
fn socks5_through_microsocks_http_and_https() {
    let socks = microsocks(None);
    let pki = Pki::new();
    let (t, ts) = (http_target(), https_target(&pki));
    let mut requests = Vec::new();
    for scheme in ["socks5", "socks5h"] {
        let c = client(&pki, &[Proxy::all(&socks.url(scheme, "")).unwrap()]);
        for host in ["127.0.0.1", "localhost"] {
            requests.push((c.clone(), format!("http://{host}:{}/a?b", t.port())));
            requests.push((c.clone(), format!("https://{host}:{}/a?b", ts.port())));
        }
    }
    let requests = through(requests);
    // The requests went through the proxy: without it they fail.
    drop(socks);
    gone(requests);
}

/// A client and a URI it gets.
type Requests = Vec<(Client<HttpsConnector>, String)>;

/// Each request goes through its client's proxy (each target sees `GET /a?b`); the
/// requests back.
fn through(requests: Requests) -> Requests {
    run(async move {
        for (c, uri) in &requests {
            let got = seen(c, uri).await;
            assert!(got.starts_with("GET /a?b HTTP/1."), "{uri}: {got}");
        }
        requests
    })
}

/// Once the proxy is gone, every request fails connecting to it: they went through it,
/// not around.
fn gone(requests: Requests) {
    run(async move {
        for (c, uri) in &requests {
            let e = failed(c, uri).await;
            assert_eq!(e.kind(), ErrorKind::ConnectRefused, "{uri}: {e}");
            assert!(
                e.to_string().contains("connecting to the proxy"),
                "{uri}: {e}"
            );
        }
    });
}

#[test]
fn socks5_password_accepted_and_refused_by_microsocks() {
    let socks = microsocks(Some(("alice", "s3cret")));
    let pki = Pki::new();
    let t = http_target();
    let uri = format!("http://127.0.0.1:{}/", t.port());
    let good = client(
        &pki,
        &[Proxy::all(&socks.url("socks5h", "alice:s3cret@")).unwrap()],
    );
    let wrong = client(
        &pki,
        &[Proxy::all(&socks.url("socks5h", "alice:guess@")).unwrap()],
    );
    let none = client(&pki, &[Proxy::all(&socks.url("socks5h", "")).unwrap()]);
    // The URL's password replaced by basic_auth's.
    let replaced = client(
        &pki,
        &[Proxy::all(&socks.url("socks5", "bob:x@"))
            .unwrap()
            .basic_auth("alice", "s3cret")],
    );
    run(async move {
        assert!(seen(&good, &uri).await.starts_with("GET / "));
        assert!(seen(&replaced, &uri).await.starts_with("GET / "));
        let e = failed(&wrong, &uri).await;
        assert_eq!(e.kind(), ErrorKind::ProxyAuth, "{e}");
        assert!(
            e.to_string().contains("refused the user name and password"),
            "{e}"
        );
        let e = failed(&none, &uri).await;
        assert_eq!(e.kind(), ErrorKind::ProxyAuth, "{e}");
        assert!(e.to_string().contains("requires authentication"), "{e}");
        assert!(e.is_connect());
    });
}

// ---------------------------------------------------------------------------------------
// tinyproxy: HTTP forwarding and CONNECT
// ---------------------------------------------------------------------------------------

#[test]
fn http_proxy_forwards_http_and_tunnels_https_through_tinyproxy() {
    let tiny = tinyproxy(None);
    let pki = Pki::new();
    let (t, ts) = (http_target(), https_target(&pki));
    let c = client(&pki, &[Proxy::all(&tiny.url("http", "")).unwrap()]);
    let tunneled = client(
        &pki,
        &[Proxy::http(&tiny.url("http", ""))
            .unwrap()
            .http_tunnel(true)],
    );
    let (fwd, tun) = (c.clone(), tunneled.clone());
    run(async move {
        // Forwarded: tinyproxy took the absolute form and added its Via.
        let got = seen(&fwd, &format!("http://127.0.0.1:{}/f?x=1", t.port())).await;
        assert!(got.starts_with("GET /f?x=1 HTTP/1."), "{got}");
        assert!(got.contains("(tinyproxy/"), "{got}");
        // https: TLS inside a CONNECT tunnel (tinyproxy cannot see, so adds nothing).
        let got = seen(&fwd, &format!("https://localhost:{}/s", ts.port())).await;
        assert!(got.starts_with("GET /s HTTP/1.1\nvia=-\n"), "{got}");
        // http through a tunnel too.
        let got = seen(&tun, &format!("http://127.0.0.1:{}/t", t.port())).await;
        assert!(got.starts_with("GET /t HTTP/1.1\nvia=-\n"), "{got}");
    });
    drop(tiny);
    gone(vec![
        (c, format!("https://localhost:{}/s", ts.port())),
        (tunneled, format!("http://127.0.0.1:{}/t", t.port())),
    ]);
}

/// What a forwarding proxy gets on the wire, seen by a target standing in for one: the
/// absolute form, the credentials, HTTP/1.1 even with prior knowledge of HTTP/2.
#[test]
fn forwarded_requests_are_written_in_absolute_form() {
    let stand_in = http_target();
    let proxy = Proxy::http(&format!("http://alice:s3cret@{stand_in}")).unwrap();
    let mut b = Client::builder();
    b.proxy(proxy).http2_prior_knowledge();
    let c = b.build();
    run(async move {
        let res = step("get", c.get("http://example.test:8080/p?q=1"))
            .await
            .unwrap();
        let got = text(res).await;
        assert_eq!(
            got,
            "GET http://example.test:8080/p?q=1 HTTP/1.1\nvia=-\nauth=Basic YWxpY2U6czNjcmV0\n"
        );
        // A request's own Proxy-Authorization is kept.
        let req = http::Request::get("http://example.test/")
            .header("proxy-authorization", "Bearer mine")
            .body(String::new())
            .unwrap();
        let got = text(step("get", c.request(req)).await.unwrap()).await;
        assert!(
            got.starts_with("GET http://example.test/ HTTP/1.1\n"),
            "{got}"
        );
        assert!(got.ends_with("auth=Bearer mine\n"), "{got}");
    });
}

#[test]
fn tinyproxy_basic_auth_accepted_and_refused() {
    let tiny = tinyproxy(Some(("alice", "s3cret")));
    let pki = Pki::new();
    let (t, ts) = (http_target(), https_target(&pki));
    let good = client(
        &pki,
        &[Proxy::all(&tiny.url("http", "alice:s3cret@")).unwrap()],
    );
    let wrong = client(
        &pki,
        &[Proxy::all(&tiny.url("http", "alice:guess@")).unwrap()],
    );
    let none = client(&pki, &[Proxy::all(&tiny.url("http", "")).unwrap()]);
    let (http, https) = (
        format!("http://127.0.0.1:{}/", t.port()),
        format!("https://127.0.0.1:{}/", ts.port()),
    );
    run(async move {
        let got = seen(&good, &http).await;
        assert!(got.contains("(tinyproxy/"), "{got}");
        assert!(
            got.contains("auth=-"),
            "the proxy's credentials went on: {got}"
        );
        assert!(seen(&good, &https).await.starts_with("GET / HTTP/1.1"));
        // CONNECT refused: the tunnel is not there, a typed error says why.
        let e = failed(&wrong, &https).await;
        assert_eq!(e.kind(), ErrorKind::ProxyAuth, "{e}");
        assert!(e.to_string().contains("refused the credentials"), "{e}");
        let e = failed(&none, &https).await;
        assert_eq!(e.kind(), ErrorKind::ProxyAuth, "{e}");
        assert!(e.to_string().contains("requires credentials"), "{e}");
        // Forwarded: the proxy's refusal is the response (tinyproxy 1.11 answers 401
        // where RFC 9110 has 407).
        for c in [&wrong, &none] {
            let res = step("refusal", c.get(http.as_str())).await.unwrap();
            let status = res.status();
            assert!(
                status == StatusCode::PROXY_AUTHENTICATION_REQUIRED
                    || status == StatusCode::UNAUTHORIZED,
                "{status}"
            );
            let body = text(res).await;
            assert!(
                !body.contains("GET / HTTP"),
                "the target was reached: {body}"
            );
        }
    });
}

// ---------------------------------------------------------------------------------------
// fibr's proxy: SOCKS4, SOCKS4a, names resolved by the proxy, authentication
// ---------------------------------------------------------------------------------------

#[test]
fn socks4_socks4a_socks5h_and_connect_through_fibr_proxy() {
    let pki = Pki::new();
    let (t, ts) = (http_target(), https_target(&pki));
    let (engine, p) = fibr_proxy(loopback(&[t.port(), ts.port()]));
    let mut requests = Vec::new();
    for (scheme, host) in [
        ("socks4", "localhost"),
        ("socks4a", "localhost"),
        ("socks4a", "127.0.0.1"),
        ("socks5h", "localhost"),
        ("http", "localhost"),
    ] {
        let proxy = Proxy::https(&format!("{scheme}://{p}")).unwrap();
        let tunnel_http = Proxy::http(&format!("{scheme}://{p}"))
            .unwrap()
            .http_tunnel(true);
        let c = client(&pki, &[proxy, tunnel_http]);
        requests.push((c.clone(), format!("https://{host}:{}/a?b", ts.port())));
        requests.push((c, format!("http://{host}:{}/a?b", t.port())));
    }
    // No tunnel: fibr's proxy forwards the http:// request in absolute form.
    let forwarding = client(&pki, &[Proxy::http(&format!("http://{p}")).unwrap()]);
    requests.push((forwarding, format!("http://localhost:{}/a?b", t.port())));
    let requests = through(requests);
    drop(engine);
    gone(requests);
}

#[test]
fn fibr_proxy_authentication_accepted_and_refused() {
    let pki = Pki::new();
    let t = http_target();
    let rules = loopback(&[t.port()]).require_auth(|u, p| u == "alice" && p == "s3cret");
    let (_engine, p) = fibr_proxy(rules);
    let uri = format!("http://127.0.0.1:{}/", t.port());
    let all = |url: String| Proxy::all(&url).unwrap().http_tunnel(true);
    let c = |url: String| client(&pki, &[all(url)]);
    let cases = [
        (c(format!("socks5://alice:s3cret@{p}")), None),
        (c(format!("http://alice:s3cret@{p}")), None),
        (
            c(format!("socks5://alice:guess@{p}")),
            Some(ErrorKind::ProxyAuth),
        ),
        (c(format!("socks5://{p}")), Some(ErrorKind::ProxyAuth)),
        (
            c(format!("http://alice:guess@{p}")),
            Some(ErrorKind::ProxyAuth),
        ),
        (c(format!("http://{p}")), Some(ErrorKind::ProxyAuth)),
        // SOCKS4 has no passwords: refused (91) when the proxy wants them.
        (c(format!("socks4://alice@{p}")), Some(ErrorKind::Proxy)),
    ];
    run(async move {
        for (client, want) in &cases {
            match want {
                None => assert!(seen(client, &uri).await.starts_with("GET / ")),
                Some(kind) => {
                    let e = failed(client, &uri).await;
                    assert_eq!(e.kind(), *kind, "{e}");
                }
            }
        }
    });
}

// ---------------------------------------------------------------------------------------
// Failures: errors, never hangs
// ---------------------------------------------------------------------------------------

#[test]
fn refused_targets_and_proxies_are_errors() {
    let pki = Pki::new();
    let closed = closed_port();
    let allowed = http_target();
    let (_engine, fp) = fibr_proxy(loopback(&[closed, allowed.port()]));
    let dead = format!("http://127.0.0.1:{closed}/");
    let tunnel = |url: String| client(&pki, &[Proxy::all(&url).unwrap().http_tunnel(true)]);
    let mut cases = vec![
        // fibr's proxy: the target refuses (SOCKS5 reply 5, SOCKS4 91, HTTP 502).
        (
            tunnel(format!("socks5://{fp}")),
            dead.clone(),
            ErrorKind::ConnectRefused,
            "reply 0x05",
        ),
        (
            tunnel(format!("socks4://{fp}")),
            dead.clone(),
            ErrorKind::Proxy,
            "(91)",
        ),
        (
            tunnel(format!("http://{fp}")),
            dead.clone(),
            ErrorKind::Proxy,
            "502",
        ),
        // A target the rules do not allow: reply 2.
        (
            tunnel(format!("socks5h://{fp}")),
            format!("http://127.0.0.2:{}/", allowed.port()),
            ErrorKind::Proxy,
            "not allowed",
        ),
        // No proxy there at all.
        (
            tunnel(format!("socks5://127.0.0.1:{closed}")),
            format!("http://{allowed}/"),
            ErrorKind::ConnectRefused,
            "connecting to the proxy socks5://127.0.0.1",
        ),
    ];
    let socks = microsocks(None);
    cases.push((
        tunnel(socks.url("socks5", "")),
        dead.clone(),
        ErrorKind::ConnectRefused,
        "refused by the target",
    ));
    let tiny = tinyproxy(None);
    cases.push((
        tunnel(tiny.url("http", "")),
        dead.clone(),
        ErrorKind::Proxy,
        "answered CONNECT with",
    ));
    run(async move {
        for (client, uri, kind, says) in &cases {
            let e = failed(client, uri).await;
            assert_eq!(e.kind(), *kind, "{uri}: {e}");
            assert!(e.is_connect());
            assert!(e.to_string().contains(says), "{uri}: {e} (wanted {says:?})");
        }
    });
}

#[test]
fn a_proxy_that_never_answers_times_out() {
    // Accepts, reads, answers nothing (the connections are kept open).
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent = l.local_addr().unwrap();
    serve(l, |mut s| {
        let mut buf = [0u8; 1024];
        while let Ok(1..) = s.read(&mut buf) {}
    });
    let pki = Pki::new();
    let within = Duration::from_millis(300);
    let clients: Vec<_> = ["socks5h", "socks4a", "http"]
        .iter()
        .map(|scheme| {
            let p = Proxy::all(&format!("{scheme}://{silent}")).unwrap();
            client(&pki, &[p.handshake_timeout(within)])
        })
        .collect();
    run(async move {
        for c in &clients {
            let started = Instant::now();
            let e = failed(c, "https://localhost:1/").await;
            assert_eq!(e.kind(), ErrorKind::ConnectTimeout, "{e}");
            assert!(e.is_timeout() && e.is_connect());
            assert!(
                e.to_string().contains("did not finish its handshake"),
                "{e}"
            );
            assert!(started.elapsed() >= within);
        }
    });
}

// ---------------------------------------------------------------------------------------
// fibr::net::socks: the raw dialer
// ---------------------------------------------------------------------------------------

#[test]
fn raw_socks_streams_keep_what_the_target_says_first() {
    let banner = banner_target(b"HELLO FROM THE TARGET\n");
    let (_engine, fp) = fibr_proxy(loopback(&[banner.port()]));
    let socks = microsocks(Some(("u", "p")));
    let ms = socks.port;
    run(async move {
        let mut streams = vec![
            fibr::net::socks::connect(fp, ("localhost", banner.port()), None).await,
            fibr::net::socks::connect_v4(fp, ("localhost", banner.port()), "").await,
            fibr::net::socks::connect_v4(fp, banner, "").await,
        ];
        let proxy = ("127.0.0.1", ms);
        streams.push(fibr::net::socks::connect(proxy, banner, Some(("u", "p"))).await);
        let refused = fibr::net::socks::connect(proxy, banner, Some(("u", "x"))).await;
        let e = refused.err().expect("a wrong password is refused");
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
        for s in streams {
            let s = s.expect("tunnel");
            let mut got = vec![0u8; 22];
            step("banner", s.read_exact(&mut got)).await.unwrap();
            assert_eq!(got, b"HELLO FROM THE TARGET\n");
            step("write", s.write_all(b"ping")).await.unwrap();
            let mut echo = [0u8; 4];
            step("echo", s.read_exact(&mut echo)).await.unwrap();
            assert_eq!(&echo, b"ping");
        }
        let closed = closed_port();
        let e = fibr::net::socks::connect(fp, ("127.0.0.1", closed), None)
            .await
            .err()
            .expect("refused");
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::PermissionDenied,
            "not in the rules: {e}"
        );
        let long = "a".repeat(256);
        let e = fibr::net::socks::connect(fp, (long.as_str(), 80), None)
            .await
            .err()
            .expect("too long");
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
    });
}

// ---------------------------------------------------------------------------------------
// The environment (in child processes: it is process-wide)
// ---------------------------------------------------------------------------------------

/// Runs [`env_child`] in a child process with `vars` (and none of the parent's proxy
/// variables); fails if it fails.
fn run_child(vars: &[(&str, String)]) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "proxies_from_the_environment_with_no_proxy",
        "--nocapture",
    ]);
    for v in [
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "no_proxy",
        "NO_PROXY",
        "REQUEST_METHOD",
    ] {
        cmd.env_remove(v);
    }
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = bounded(LIMIT, move || cmd.output().unwrap());
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "child failed:\n{log}");
    assert!(
        log.contains("env child: checked"),
        "the child ran no check:\n{log}"
    );
}

/// The parent starts itself again (`run_child`) with each case's environment, since a
/// test cannot change its own process's environment safely; the child runs the checks
/// (`env_child`).
#[test]
fn proxies_from_the_environment_with_no_proxy() {
    if let Ok(case) = std::env::var("FIBR_ENV_CASE") {
        return env_child(case);
    }
    let tiny = tinyproxy(None);
    let t = http_target();
    let dead = closed_port();
    // http through tinyproxy, https to a proxy that is not there, localhost direct.
    run_child(&[
        ("FIBR_ENV_CASE", "per-scheme".into()),
        ("FIBR_ENV_TARGET", t.to_string()),
        ("FIBR_ENV_DEAD", dead.to_string()),
        ("http_proxy", tiny.url("http", "")),
        ("HTTPS_PROXY", format!("127.0.0.1:{dead}")),
        ("NO_PROXY", "localhost".into()),
    ]);
    // ALL_PROXY for both, a CIDR in no_proxy.
    run_child(&[
        ("FIBR_ENV_CASE", "all".into()),
        ("FIBR_ENV_TARGET", t.to_string()),
        ("FIBR_ENV_DEAD", dead.to_string()),
        ("ALL_PROXY", format!("socks5h://127.0.0.1:{dead}")),
        ("no_proxy", "127.0.0.0/8".into()),
    ]);
}

/// The child's side of [`proxies_from_the_environment_with_no_proxy`].
fn env_child(case: String) {
    let target: SocketAddr = std::env::var("FIBR_ENV_TARGET").unwrap().parse().unwrap();
    let dead: u16 = std::env::var("FIBR_ENV_DEAD").unwrap().parse().unwrap();
    let from_env = Client::builder().proxy_from_env(true).build_https();
    let ignoring_env = Client::builder().build_https();
    let port = target.port();
    let checked = case.clone();
    run(async move {
        let body = |c: &Client<HttpsConnector>, uri: String| {
            let c = c.clone();
            async move { text(step("get", c.get(uri)).await.unwrap()).await }
        };
        match case.as_str() {
            "per-scheme" => {
                let got = body(&from_env, format!("http://127.0.0.1:{port}/")).await;
                assert!(got.contains("(tinyproxy/"), "through http_proxy: {got}");
                let got = body(&from_env, format!("http://localhost:{port}/")).await;
                assert!(got.contains("via=-"), "NO_PROXY: {got}");
                let got = body(&ignoring_env, format!("http://127.0.0.1:{port}/")).await;
                assert!(got.contains("via=-"), "not enabled: {got}");
                let e = failed(&from_env, &format!("https://127.0.0.1:{port}/")).await;
                let through = format!("connecting to the proxy http://127.0.0.1:{dead}");
                assert!(e.to_string().contains(&through), "HTTPS_PROXY: {e}");
                let e = failed(&from_env, &format!("https://localhost:{dead}/")).await;
                assert_eq!(e.kind(), ErrorKind::ConnectRefused);
                assert!(!e.to_string().contains("proxy"), "NO_PROXY: {e}");
            }
            "all" => {
                let got = body(&from_env, format!("http://127.0.0.1:{port}/")).await;
                assert!(got.contains("via=-"), "no_proxy CIDR: {got}");
                let through = format!("connecting to the proxy socks5h://127.0.0.1:{dead}");
                for uri in [
                    format!("http://localhost:{port}/"),
                    format!("https://localhost:{port}/"),
                ] {
                    let e = failed(&from_env, &uri).await;
                    assert!(e.to_string().contains(&through), "ALL_PROXY: {e}");
                }
            }
            other => panic!("unknown case {other}"),
        }
    });
    println!("env child: checked {checked}");
}
