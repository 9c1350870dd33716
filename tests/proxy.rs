//! fibr's proxy over real sockets: curl as the client (SOCKS5, SOCKS5 with remote names,
//! SOCKS4, SOCKS4a, HTTP CONNECT) through `fibr::proxy::Server` to a small HTTP target on
//! 127.0.0.1, plus raw-socket clients for what curl cannot show (reply bytes, half close,
//! slow handshakes, idle tunnels). With CI=true a missing curl fails the test.

#[cfg(feature = "tls")]
mod common;

use common::socks::{connect5, reply5, socks5, stream};
use fibr::proxy::{relay, ProxyConfig, Relay, RelayConfig, Rules, Server};
use fibr::{Backend, Binding, Config, Conn, Engine, Handler};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

const BIG: usize = 32 * 1024 * 1024;
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// `len` bytes of a pattern that shows a lost, repeated or reordered chunk.
fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i >> 16) as u8)
        .collect()
}

/// The body `/big` answers with.
fn big_body() -> &'static [u8] {
    static BODY: OnceLock<Vec<u8>> = OnceLock::new();
    BODY.get_or_init(|| pattern(BIG))
}

/// A target on 127.0.0.1: `GET /big` gets [`big_body`], other requests `hello`; a
/// connection that starts with `COUNT` is answered, after the client's EOF, with how many
/// bytes it sent; one that starts with `QUIET` gets nothing.
fn target() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(s) = s else { continue };
            thread::spawn(move || serve_target(s));
        }
    });
    addr
}

fn serve_target(mut s: TcpStream) {
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut head = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        let Ok(n) = s.read(&mut buf) else { return };
        if n == 0 {
            return;
        }
        head.extend_from_slice(&buf[..n]);
        if head.starts_with(b"COUNT") {
            let mut total = head.len();
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
                total += n;
            }
            let _ = s.write_all(format!("{total}").as_bytes());
            return;
        }
        if head.starts_with(b"ECHO") {
            // Everything back, the word too, until EOF.
            let mut out = head;
            while s.write_all(&out).is_ok() {
                match s.read(&mut buf) {
                    Ok(n) if n > 0 => out = buf[..n].to_vec(),
                    _ => return,
                }
            }
            return;
        }
        if head.starts_with(b"QUIET") {
            let _ = s.read(&mut buf);
            return;
        }
        if head.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    let body: &[u8] = if head.starts_with(b"GET /big ") {
        big_body()
    } else {
        b"hello"
    };
    let resp = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = s.write_all(resp.as_bytes());
    let _ = s.write_all(body);
}

/// A proxy on 127.0.0.1:0 with `config`; the engine stops when the handle drops.
fn proxy(config: ProxyConfig) -> (Engine, SocketAddr) {
    let engine = Engine::new(
        Config::default().with_workers(2),
        [Binding::tcp("127.0.0.1:0", Server::new(config))],
    )
    .unwrap();
    let addr = engine.binding_addrs(0)[0];
    (engine, addr)
}

/// Fails unless every connection of `engine` (clients and targets) is closed soon: no
/// tunnel outlives its ends, no refused or timed-out handshake is left open.
fn all_closed(engine: &Engine) {
    let until = Instant::now() + Duration::from_secs(3);
    while engine.connections() > 0 {
        assert!(
            Instant::now() < until,
            "{} connections still open",
            engine.connections()
        );
        thread::sleep(Duration::from_millis(5));
    }
}

/// Rules that let the tests reach `target` (and only it) on loopback.
fn to(target: SocketAddr) -> Rules {
    Rules::new().allow_target_net(target.ip().into(), target.port()..=target.port())
}

/// curl if it is installed; with CI=true its absence is a failure.
fn curl() -> Command {
    common::require_tool("curl", "curl");
    let mut c = Command::new("curl");
    c.args(["-sS", "--max-time", "20"]);
    c
}

/// Runs curl with `args`; (exit code, stdout, stderr).
fn run_curl(args: &[&str]) -> (i32, Vec<u8>, String) {
    let out = curl().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), out.stdout, err)
}

fn url(target: SocketAddr, path: &str) -> String {
    format!("http://{target}{path}")
}

#[test]
fn curl_through_every_protocol() {
    let t = target();
    let (engine, p) = proxy(ProxyConfig::new(to(t)));
    for (flag, u) in [
        ("--socks5", url(t, "/")),
        ("--socks5-hostname", url(t, "/")),
        ("--socks4", url(t, "/")),
        ("--socks4a", url(t, "/")),
    ] {
        let (code, out, err) = run_curl(&[flag, &p.to_string(), &u]);
        assert_eq!(code, 0, "{flag} {u}: {err}");
        assert_eq!(out, b"hello", "{flag} {u}");
    }
    let proxy_url = format!("http://{p}");
    let (code, out, err) = run_curl(&["-x", &proxy_url, "-p", &url(t, "/")]);
    assert_eq!(code, 0, "CONNECT: {err}");
    assert_eq!(out, b"hello");
    all_closed(&engine);
}

/// Runs `tests/proxy_peers/python_socks_client.py` against `target` through each of
/// `urls`: its lines (`ok STATUS LEN`, `refused CODE`, `error ...`), or None without
/// python-socks (a failure with CI=true).
fn python_socks(target: &str, port: u16, urls: &[String]) -> Vec<String> {
    common::require_python("python_socks");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/proxy_peers/python_socks_client.py"
    );
    let out = Command::new("python3")
        .arg(script)
        .arg(target)
        .arg(port.to_string())
        .args(urls)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python-socks client: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// python-socks, a client fibr did not write, through every protocol: SOCKS5 (an address,
/// a name the proxy resolves, username/password), SOCKS4, SOCKS4a and HTTP CONNECT; wrong
/// credentials and a target the rules refuse get the protocol's reply codes.
#[test]
fn python_socks_through_every_protocol() {
    let t = target();
    let (engine, p) = proxy(ProxyConfig::new(to(t)));
    let urls: Vec<String> = [
        format!("socks5://{p}"),
        format!("socks4://{p}"),
        format!("http://{p}"),
    ]
    .into();
    let lines = python_socks("127.0.0.1", t.port(), &urls);
    assert_eq!(lines, ["ok 200 5"; 3], "{urls:?}");
    // "localhost" resolved by the proxy (SOCKS5 with a name, SOCKS4a) is loopback, which a
    // network rule for 127.0.0.1 allows once resolved.
    let named: Vec<String> = [format!("socks5://{p},rdns"), format!("socks4://{p},rdns")].into();
    let lines = python_socks("localhost", t.port(), &named);
    assert_eq!(lines, ["ok 200 5"; 2], "{named:?}");
    // A port the rules do not name: SOCKS5's 2 (not allowed), SOCKS4's 91, HTTP's 403.
    let lines = python_socks("127.0.0.1", t.port() ^ 1, &urls);
    assert_eq!(
        lines,
        ["refused 2", "refused 91", "refused 403"],
        "{urls:?}"
    );
    all_closed(&engine);
    // Credentials, right and wrong.
    let rules = to(t).require_auth(|u, p| u == "alice" && p == "s3cret");
    let (engine, p) = proxy(ProxyConfig::new(rules));
    let urls: Vec<String> = [
        format!("socks5://alice:s3cret@{p}"),
        format!("http://alice:s3cret@{p}"),
        format!("socks5://alice:guess@{p}"),
        format!("http://alice:guess@{p}"),
    ]
    .into();
    let lines = python_socks("127.0.0.1", t.port(), &urls);
    assert_eq!(lines[..2], ["ok 200 5"; 2], "{urls:?}");
    // python-socks raises RFC 1929's failure (status 1) as a ProxyError without a code.
    assert_eq!(lines[2], "refused None", "{lines:?}");
    assert_eq!(lines[3], "refused 407", "{lines:?}");
    all_closed(&engine);
}

#[test]
fn names_resolved_by_the_proxy_follow_the_rules() {
    let t = target();
    // A host rule alone does not open loopback: "localhost" resolves to a special range.
    let rules = Rules::new().allow_target_host("localhost", 1..=65535);
    let (_engine, p) = proxy(ProxyConfig::new(rules));
    let named = format!("http://localhost:{}/", t.port());
    let (code, _, err) = run_curl(&["--socks5-hostname", &p.to_string(), &named]);
    assert_ne!(code, 0, "{err}");
    // The refusal is "not allowed" (2), asked by hand.
    let mut s = socks5(p, &[0]);
    let mut req = vec![5, 1, 0, 3, 9];
    req.extend_from_slice(b"localhost");
    req.extend_from_slice(&t.port().to_be_bytes());
    s.write_all(&req).unwrap();
    assert_eq!(reply5(&mut s)[1], 2);
}

#[test]
fn refused_targets_get_their_codes() {
    let t = target();
    let other = target();
    let (engine, p) = proxy(ProxyConfig::new(to(t)));
    let ps = p.to_string();
    let u = url(other, "/");
    for flag in ["--socks5", "--socks4"] {
        let (code, _, err) = run_curl(&[flag, &ps, &u]);
        // 97: CURLE_PROXY (curl 7.73 on), the SOCKS server refused.
        assert_eq!(code, 97, "{flag}: {err}");
    }
    let proxy_url = format!("http://{p}");
    let (code, out, err) = run_curl(&[
        "-x",
        &proxy_url,
        "-p",
        "-w",
        "%{http_connect}",
        "-o",
        "/dev/null",
        &u,
    ]);
    assert_ne!(code, 0, "{err}");
    assert_eq!(out, b"403");
    // The reply bytes: SOCKS5 2 (not allowed), SOCKS4 91.
    let mut s = socks5(p, &[0]);
    s.write_all(&connect5(other)).unwrap();
    assert_eq!(reply5(&mut s)[1], 2);
    let mut s = stream(p);
    let mut req = vec![4, 1];
    req.extend_from_slice(&other.port().to_be_bytes());
    req.extend_from_slice(&[127, 0, 0, 1, 0]);
    s.write_all(&req).unwrap();
    let mut r = [0u8; 8];
    s.read_exact(&mut r).unwrap();
    assert_eq!(r[..2], [0, 91]);
    all_closed(&engine);
}

#[test]
fn no_rule_means_no_proxy_and_allow_all_is_open() {
    let t = target();
    let (_engine, p) = proxy(ProxyConfig::default());
    let mut s = socks5(p, &[0]);
    s.write_all(&connect5(t)).unwrap();
    assert_eq!(reply5(&mut s)[1], 2);
    let (_open, p) = proxy(ProxyConfig::new(Rules::allow_all()));
    let (code, out, err) = run_curl(&["--socks5", &p.to_string(), &url(t, "/")]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, b"hello");
}

#[test]
fn a_closed_port_is_refused_with_code_5() {
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let (engine, p) = proxy(ProxyConfig::new(to(addr)));
    let mut s = socks5(p, &[0]);
    s.write_all(&connect5(addr)).unwrap();
    assert_eq!(reply5(&mut s)[1], 5);
    let proxy_url = format!("http://{p}");
    let (_, out, _) = run_curl(&[
        "-x",
        &proxy_url,
        "-p",
        "-w",
        "%{http_connect}",
        "-o",
        "/dev/null",
        &url(addr, "/"),
    ]);
    assert_eq!(out, b"502");
    all_closed(&engine);
}

/// A listener whose accept queue is full: a connect to it gets no answer (Linux drops
/// the SYN), so a dial hangs until the proxy's connect timeout.
fn unanswering() -> (socket2::Socket, SocketAddr, Vec<TcpStream>) {
    use socket2::{Domain, Socket, Type};
    let l = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    l.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .unwrap();
    l.listen(0).unwrap();
    let addr = l.local_addr().unwrap().as_socket().unwrap();
    let fill = (0..4)
        .filter_map(|_| TcpStream::connect_timeout(&addr, Duration::from_millis(100)).ok())
        .collect();
    (l, addr, fill)
}

#[test]
fn connect_timeout_gets_its_code() {
    let (_l, t, _fill) = unanswering();
    let limit = Duration::from_millis(300);
    let (engine, p) = proxy(ProxyConfig::new(to(t)).with_connect_timeout(limit));
    let start = Instant::now();
    let mut s = socks5(p, &[0]);
    s.write_all(&connect5(t)).unwrap();
    assert_eq!(
        reply5(&mut s)[1],
        6,
        "SOCKS5 6 (TTL expired) for a connect timeout"
    );
    let took = start.elapsed();
    assert!(took >= limit && took < limit * 10, "{took:?}");
    let mut s = stream(p);
    s.write_all(format!("CONNECT {t} HTTP/1.1\r\n\r\n").as_bytes())
        .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 504 "), "{answer}");
    all_closed(&engine);
}

#[test]
fn username_and_password() {
    let t = target();
    let rules = to(t).require_auth(|u, p| u == "alice" && p == "s3cret");
    let (engine, p) = proxy(ProxyConfig::new(rules));
    let u = url(t, "/");
    let good = format!("socks5://alice:s3cret@{p}");
    let bad = format!("socks5://alice:guess@{p}");
    let (code, out, err) = run_curl(&["-x", &good, &u]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, b"hello");
    let (code, _, err) = run_curl(&["-x", &bad, &u]);
    assert_ne!(code, 0, "{err}");
    // No credentials: SOCKS5 offers no method curl can use, SOCKS4 is refused.
    let (code, _, _) = run_curl(&["--socks5", &p.to_string(), &u]);
    assert_ne!(code, 0);
    let (code, _, _) = run_curl(&["--socks4", &p.to_string(), &u]);
    assert_eq!(code, 97);
    // HTTP: Basic Proxy-Authorization, 407 without it.
    let good = format!("http://alice:s3cret@{p}");
    let (code, out, err) = run_curl(&["-x", &good, "-p", &u]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, b"hello");
    let bare = format!("http://{p}");
    let bad = format!("http://alice:guess@{p}");
    for proxy_url in [bare, bad] {
        let (_, out, _) = run_curl(&[
            "-x",
            &proxy_url,
            "-p",
            "-w",
            "%{http_connect}",
            "-o",
            "/dev/null",
            &u,
        ]);
        assert_eq!(out, b"407", "{proxy_url}");
    }
    // By hand: the RFC 1929 status byte.
    let mut s = socks5(p, &[2]);
    s.write_all(&[1, 5, b'a', b'l', b'i', b'c', b'e', 1, b'x'])
        .unwrap();
    let mut r = [0u8; 2];
    s.read_exact(&mut r).unwrap();
    assert_eq!(r, [1, 1]);
    all_closed(&engine);
}

#[test]
fn slow_handshake_times_out() {
    let limit = Duration::from_millis(300);
    let config = ProxyConfig::new(Rules::allow_all()).with_handshake_timeout(limit);
    let (engine, p) = proxy(config);
    for partial in [
        &[5u8][..],
        &[5, 1, 0, 5, 1],
        &[4, 1, 0],
        b"CONNECT a:1 HTTP/1.1\r\n",
    ] {
        let start = Instant::now();
        let mut s = stream(p);
        s.write_all(partial).unwrap();
        let mut rest = Vec::new();
        // The proxy closes: EOF (after the greeting reply or an HTTP 408, if any).
        s.read_to_end(&mut rest).unwrap();
        let took = start.elapsed();
        assert!(took >= limit, "closed after {took:?}, before the timeout");
        assert!(took < limit * 10, "closed after {took:?}");
        if partial[0] == b'C' {
            assert!(rest.starts_with(b"HTTP/1.1 408 "), "{rest:?}");
        }
    }
    all_closed(&engine);
}

#[test]
fn large_transfer_arrives_intact() {
    let t = target();
    let (engine, p) = proxy(ProxyConfig::new(to(t)));
    let u = url(t, "/big");
    let proxy_url = format!("http://{p}");
    for args in [
        vec!["--socks5", &*p.to_string(), &*u],
        vec!["-x", &*proxy_url, "-p", &*u],
    ]
    .iter()
    .map(|a| a.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = run_curl(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert_eq!(out.len(), BIG, "{args:?}");
        assert!(out == big_body(), "{args:?}: the body changed on the way");
    }
    all_closed(&engine);
}

#[test]
fn upload_and_half_close_pass_through() {
    let t = target();
    let (engine, p) = proxy(ProxyConfig::new(to(t)));
    let mut s = socks5(p, &[0]);
    s.write_all(&connect5(t)).unwrap();
    assert_eq!(reply5(&mut s)[1], 0);
    let mut sent = 0;
    let chunk = vec![7u8; 1024 * 1024];
    s.write_all(b"COUNT").unwrap();
    sent += 5;
    for _ in 0..16 {
        s.write_all(&chunk).unwrap();
        sent += chunk.len();
    }
    // Our EOF reaches the target, which only then answers; its answer still comes back.
    s.shutdown(Shutdown::Write).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert_eq!(answer, sent.to_string());
    all_closed(&engine);
}

/// A target that writes `total` bytes as fast as the tunnel takes them; the counter says
/// how far it got.
fn flood(total: usize) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let written = Arc::new(AtomicUsize::new(0));
    let count = written.clone();
    thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        let chunk = vec![1u8; 64 * 1024];
        while count.load(Ordering::Relaxed) < total {
            let Ok(n) = s.write(&chunk) else { return };
            count.fetch_add(n, Ordering::Relaxed);
        }
    });
    (addr, written)
}

/// The largest a TCP buffer may autotune to here (`tcp_rmem` / `tcp_wmem`'s maximum).
fn kernel_buffer_max(which: &str) -> usize {
    std::fs::read_to_string(format!("/proc/sys/net/ipv4/{which}"))
        .ok()
        .and_then(|s| s.split_whitespace().nth(2)?.parse().ok())
        .unwrap_or(6 * 1024 * 1024)
}

#[test]
fn a_client_that_does_not_read_holds_the_target_back() {
    // What the kernel alone may hold on the way, out of the relay's hands: two receive
    // buffers (the proxy's from the target, the client's) and two send buffers, each as
    // large as autotuning lets it grow (32 MiB receive buffers on some machines).
    let kernel = 2 * kernel_buffer_max("tcp_rmem") + 2 * kernel_buffer_max("tcp_wmem");
    let total = kernel + 64 * 1024 * 1024;
    let (t, written) = flood(total);
    let (engine, p) = proxy(ProxyConfig::new(to(t)));
    let mut s = socks5(p, &[0]);
    s.write_all(&connect5(t)).unwrap();
    assert_eq!(reply5(&mut s)[1], 0);
    // While we do not read, the target gets only as far as the socket buffers on the way
    // and the relay's bound allow, not the whole stream into the proxy's memory.
    thread::sleep(Duration::from_millis(500));
    let early = written.load(Ordering::Relaxed);
    assert!(
        early < kernel + 16 * 1024 * 1024,
        "the target wrote {early} bytes to a client that reads none (kernel buffers: {kernel})"
    );
    let mut got = 0;
    let mut buf = vec![0u8; 256 * 1024];
    while got < total {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "EOF after {got} bytes");
        got += n;
    }
    assert_eq!(got, total);
    drop(s);
    all_closed(&engine);
}

#[test]
fn idle_tunnel_is_closed() {
    let t = target();
    let relay = RelayConfig::default().with_idle_timeout(Duration::from_millis(300));
    let (engine, p) = proxy(ProxyConfig::new(to(t)).with_relay(relay));
    let mut s = socks5(p, &[0]);
    s.write_all(&connect5(t)).unwrap();
    assert_eq!(reply5(&mut s)[1], 0);
    let start = Instant::now();
    s.write_all(b"QUIET").unwrap();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    let took = start.elapsed();
    assert!(rest.is_empty());
    assert!(took >= Duration::from_millis(300), "closed after {took:?}");
    assert!(took < Duration::from_secs(3), "closed after {took:?}");
    all_closed(&engine);
}

// ---------------------------------------------------------------------------------------
// `fibr::proxy::relay` on its own.

/// The front of a relaying engine: for each client it dials `target` and relays the two
/// with `config` (the client is side A); each relay started is pushed on `relays`.
#[derive(Clone)]
struct Front {
    engine: Arc<OnceLock<Engine>>,
    target: SocketAddr,
    config: RelayConfig,
    relays: Arc<Mutex<Vec<Relay>>>,
}

/// The target connection's handler until the relay replaces it.
struct Back {
    client: Conn,
    front: Front,
}

impl Handler for Front {
    fn on_open(&self, client: &Conn) {
        client.hold_reads();
        let back = Back {
            client: client.clone(),
            front: self.clone(),
        };
        if Conn::dial(self.engine.get().unwrap(), self.target, back).is_err() {
            client.close();
        }
    }
    fn on_data(&self, _: &Conn, _: &[u8]) {}
}

impl Handler for Back {
    fn on_open(&self, target: &Conn) {
        let r = relay(&self.client, target, &self.front.config);
        self.front.relays.lock().unwrap().push(r);
    }
    fn on_data(&self, _: &Conn, _: &[u8]) {}
}

/// An engine with `config` whose one binding, made by `bind` from a [`Front`], relays
/// to `target` with `relay_config`: (the engine, its address, the relays it started).
fn relaying(
    config: Config,
    target: SocketAddr,
    relay_config: RelayConfig,
    bind: impl FnOnce(Front) -> Binding,
) -> (Engine, SocketAddr, Arc<Mutex<Vec<Relay>>>) {
    let front = Front {
        engine: Arc::new(OnceLock::new()),
        target,
        config: relay_config,
        relays: Arc::new(Mutex::new(Vec::new())),
    };
    let (cell, relays) = (front.engine.clone(), front.relays.clone());
    let engine = Engine::new(config, [bind(front)]).unwrap();
    let _ = cell.set(engine.clone());
    let addr = engine.binding_addrs(0)[0];
    (engine, addr, relays)
}

fn plain(front: Front) -> Binding {
    Binding::tcp("127.0.0.1:0", front)
}

/// The one relay `relays` holds, once it has started.
fn the_relay(relays: &Mutex<Vec<Relay>>) -> Relay {
    let until = Instant::now() + IO_TIMEOUT;
    loop {
        if let Some(r) = relays.lock().unwrap().first() {
            return r.clone();
        }
        assert!(Instant::now() < until, "no relay started");
        thread::sleep(Duration::from_millis(1));
    }
}

/// Whether a relay of two plain TCP connections on an engine with `config` splices (by
/// default it does wherever it can: Linux's epoll backend).
fn splices(config: &Config) -> bool {
    cfg!(target_os = "linux") && config.backend == Backend::Epoll
}

/// The counters say what went each way, on both paths, and the client's half close
/// reaches the target (which answers only after it), while the answer still comes back.
#[test]
fn relay_counts_both_directions_and_passes_a_half_close() {
    let t = target();
    for splice in [true, false] {
        let config = Config::default().with_workers(2);
        let relay_config = RelayConfig::default().with_splice(splice);
        let (engine, addr, relays) = relaying(config.clone(), t, relay_config, plain);
        let mut s = stream(addr);
        let mut sent = b"COUNT".to_vec();
        sent.resize(3 * 1024 * 1024 + 5, b'x');
        s.write_all(&sent).unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        assert_eq!(answer, sent.len().to_string(), "splice: {splice}");
        all_closed(&engine);
        let relay = the_relay(&relays);
        assert!(relay.is_done());
        assert_eq!(relay.bytes_a_to_b(), sent.len() as u64);
        assert_eq!(relay.bytes_b_to_a(), answer.len() as u64);
        let spliced = splice && splices(&config);
        assert_eq!(relay.spliced(), spliced, "splice: {splice}");
        // The 3 MiB went mostly spliced (from its first full read on); the short answer,
        // after the switch, too.
        let all = relay.bytes_a_to_b() + relay.bytes_b_to_a();
        if spliced {
            assert!(
                relay.bytes_spliced() > all / 2,
                "{} spliced",
                relay.bytes_spliced()
            );
            assert!(relay.bytes_spliced() <= all);
        } else {
            assert_eq!(relay.bytes_spliced(), 0);
        }
        engine.shutdown(Duration::ZERO);
    }
}

const HUGE: usize = 64 * 1024 * 1024;

/// What each end sends in [`a_spliced_relay_carries_64_mib_each_way_at_once`].
fn huge() -> &'static [u8] {
    static BODY: OnceLock<Vec<u8>> = OnceLock::new();
    BODY.get_or_init(|| pattern(HUGE))
}

/// Sends [`huge`] on `s`, then its EOF, while reading what comes back until the peer's EOF:
/// how many bytes came, each checked against [`huge`] as it arrives.
fn exchange_huge(mut s: TcpStream) -> usize {
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut w = s.try_clone().unwrap();
    let writer = thread::spawn(move || {
        w.write_all(huge()).unwrap();
        w.shutdown(Shutdown::Write).unwrap();
    });
    let want = huge();
    let mut buf = vec![0u8; 256 * 1024];
    let mut got = 0;
    loop {
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        assert!(got + n <= want.len(), "more bytes came than were sent");
        assert!(
            buf[..n] == want[got..got + n],
            "bytes from {got} changed on the way"
        );
        got += n;
    }
    writer.join().unwrap();
    got
}

#[test]
fn a_spliced_relay_carries_64_mib_each_way_at_once() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let t = listener.local_addr().unwrap();
    let far = thread::spawn(move || exchange_huge(listener.accept().unwrap().0));
    let config = Config::default().with_workers(2);
    let (engine, addr, relays) = relaying(config.clone(), t, RelayConfig::default(), plain);
    let near = exchange_huge(stream(addr));
    assert_eq!(near, HUGE, "the client got what the target sent");
    assert_eq!(
        far.join().unwrap(),
        HUGE,
        "the target got what the client sent"
    );
    all_closed(&engine);
    let relay = the_relay(&relays);
    assert_eq!(relay.bytes_a_to_b(), HUGE as u64);
    assert_eq!(relay.bytes_b_to_a(), HUGE as u64);
    assert_eq!(relay.spliced(), splices(&config));
    if splices(&config) {
        // All but what the first rounds read before the switch.
        assert!(
            relay.bytes_spliced() > (2 * HUGE - 4 * 1024 * 1024) as u64,
            "{} of {} bytes spliced",
            relay.bytes_spliced(),
            2 * HUGE
        );
    }
    engine.shutdown(Duration::ZERO);
}

/// CPU time (user and system) so far of this process's threads whose name starts with
/// `prefix`.
fn cpu_of_threads(prefix: &str) -> Duration {
    let mut ticks = 0u64;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ...`: utime and stime are the 12th and 13th fields after comm.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if !stat[open + 1..close].starts_with(prefix) {
            continue;
        }
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        ticks += fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    }
    // SAFETY: sysconf only reads a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_millis(ticks * 1000 / hz)
}

/// A client that reads nothing, then slowly: the target is held back (it stops writing,
/// and the relay's threads sit idle: no busy loop), and what the relay keeps queued
/// (with splicing: the pipe's bytes, counted as the client's queued output) never
/// passes the buffer plus one pipe (or one read, copying).
#[test]
fn a_slow_reader_pauses_the_sender_within_the_bound() {
    const TOTAL: usize = 64 * 1024 * 1024;
    const BUFFER: usize = 64 * 1024;
    // The pipe asked for BUFFER bytes is that big (a power of two of pages), as is a read.
    const BOUND: usize = 2 * BUFFER;
    let (t, written) = flood(TOTAL);
    let config = Config::default()
        .with_workers(2)
        .with_read_buffer_size(BUFFER)
        .with_thread_name("slowrd");
    let relay_config = RelayConfig::default().with_buffer(BUFFER);
    let (engine, addr, relays) = relaying(config.clone(), t, relay_config, plain);
    let mut s = stream(addr);
    let relay = the_relay(&relays);
    let mut max_queued = 0;
    let mut sample = |engine: &Engine| {
        max_queued = max_queued.max(engine.queued_bytes());
        assert!(max_queued <= BOUND, "{max_queued} bytes queued");
    };
    // Until the target is stuck: the socket buffers on the way and the relay are full.
    let until = Instant::now() + IO_TIMEOUT;
    let (mut last, mut since) = (written.load(Ordering::Relaxed), Instant::now());
    while since.elapsed() < Duration::from_millis(300) {
        assert!(Instant::now() < until, "the target never stopped");
        sample(&engine);
        thread::sleep(Duration::from_millis(5));
        let now = written.load(Ordering::Relaxed);
        if now != last {
            (last, since) = (now, Instant::now());
        }
    }
    assert!(
        last < TOTAL / 2,
        "the target wrote {last} bytes to a client that reads none"
    );
    let cpu = cpu_of_threads("slowrd");
    thread::sleep(Duration::from_millis(500));
    let spent = cpu_of_threads("slowrd") - cpu;
    assert!(
        spent < Duration::from_millis(100),
        "{spent:?} of CPU while paused"
    );
    assert_eq!(written.load(Ordering::Relaxed), last, "the target went on");
    assert_eq!(
        relay.spliced(),
        splices(&config),
        "a flood is a bulk transfer"
    );
    assert!(
        engine.queued_bytes() > 0,
        "what waits for the client counts as queued"
    );
    let mut got = 0;
    let mut buf = vec![0u8; 16 * 1024];
    for reads in 0.. {
        if got == TOTAL {
            break;
        }
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "EOF after {got} bytes");
        got += n;
        sample(&engine);
        if reads % 16 == 0 {
            thread::sleep(Duration::from_millis(1));
        }
    }
    assert!(max_queued > 0);
    drop(s);
    all_closed(&engine);
    assert_eq!(relay.bytes_b_to_a(), TOTAL as u64);
    if splices(&config) {
        assert!(relay.bytes_spliced() > (TOTAL / 2) as u64);
    }
    engine.shutdown(Duration::ZERO);
}

/// Small messages back and forth (an interactive tunnel) never make a relay splice: it
/// holds no pipes, and copies every byte; one bulk read then switches it.
#[test]
fn an_interactive_tunnel_copies_until_a_bulk_read() {
    let t = target();
    let config = Config::default().with_workers(2);
    let (engine, addr, relays) = relaying(config.clone(), t, RelayConfig::default(), plain);
    let mut s = stream(addr);
    s.write_all(b"ECHO").unwrap();
    let mut word = [0u8; 4];
    s.read_exact(&mut word).unwrap();
    for i in 0..200u32 {
        let ping = [i as u8; 64];
        s.write_all(&ping).unwrap();
        let mut back = [0u8; 64];
        s.read_exact(&mut back).unwrap();
        assert_eq!(back, ping);
    }
    let relay = the_relay(&relays);
    assert!(!relay.spliced(), "small messages spliced");
    assert_eq!(relay.bytes_spliced(), 0);
    assert_eq!(relay.bytes_a_to_b(), 4 + 200 * 64);
    // A megabyte at once: reads of a whole buffer, a bulk transfer.
    let bulk = pattern(1024 * 1024);
    let mut w = s.try_clone().unwrap();
    let sent = bulk.clone();
    let writer = thread::spawn(move || w.write_all(&sent).unwrap());
    let mut back = vec![0u8; bulk.len()];
    s.read_exact(&mut back).unwrap();
    writer.join().unwrap();
    assert!(back == bulk, "the bulk echo changed on the way");
    assert_eq!(relay.spliced(), splices(&config));
    if splices(&config) {
        assert!(relay.bytes_spliced() > 0);
    }
    drop(s);
    all_closed(&engine);
    engine.shutdown(Duration::ZERO);
}

/// With TLS on the client's side the relay copies (a record layer sits between that
/// socket and the bytes), and the bytes still arrive intact both ways.
#[cfg(feature = "tls")]
#[test]
fn a_tls_side_keeps_the_copying_path() {
    use common::pki::Pki;
    use fibr::tls::{rustls, TlsServer};
    use rustls::pki_types::ServerName;
    use rustls::{ClientConnection, StreamOwned};

    let pki = Pki::new();
    let leaf = pki.server(&["localhost"]);
    let tls = Arc::new(pki.server_config(&leaf));
    let t = target();
    let (engine, addr, relays) = relaying(
        Config::default().with_workers(2),
        t,
        RelayConfig::default(),
        |front| Binding::tcp("127.0.0.1:0", TlsServer::new(tls, front)),
    );
    let name = ServerName::try_from("localhost").unwrap();
    let client = ClientConnection::new(Arc::new(pki.client_config()), name).unwrap();
    let mut s = StreamOwned::new(client, stream(addr));
    s.write_all(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).unwrap();
    assert!(answer.starts_with(b"HTTP/1.1 200 OK\r\n"));
    assert!(answer.ends_with(big_body()), "the body changed on the way");
    drop(s);
    all_closed(&engine);
    let relay = the_relay(&relays);
    assert!(!relay.spliced());
    assert_eq!(relay.bytes_spliced(), 0);
    assert_eq!(relay.bytes_b_to_a(), answer.len() as u64);
    engine.shutdown(Duration::ZERO);
}

// ---------------------------------------------------------------------------------------
// Forwarding absolute-form http:// requests.

/// A keep-alive HTTP/1.1 target that answers each request with its own head and body,
/// and hop-by-hop fields of its own for the proxy to remove; `/slow` is never answered.
fn echo_target() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(s) = s else { continue };
            thread::spawn(move || serve_echo(s));
        }
    });
    addr
}

fn serve_echo(mut s: TcpStream) {
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut input = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let Some(end) = input.windows(4).position(|w| w == b"\r\n\r\n") else {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => input.extend_from_slice(&buf[..n]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&input[..end + 4]).into_owned();
        let len: usize = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().ok())?
            })
            .unwrap_or(0);
        while input.len() < end + 4 + len {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => input.extend_from_slice(&buf[..n]),
            }
        }
        if head.starts_with("GET /slow ") {
            let _ = s.read(&mut buf);
            return;
        }
        let mut echo = head.into_bytes();
        echo.extend_from_slice(&input[end + 4..end + 4 + len]);
        input.drain(..end + 4 + len);
        let resp = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nX-Target: yes\r\nConnection: keep-alive, X-Hop\r\n\
             X-Hop: 1\r\nKeep-Alive: timeout=5\r\n\r\n",
            echo.len()
        );
        if s.write_all(resp.as_bytes()).is_err() || s.write_all(&echo).is_err() {
            return;
        }
    }
}

/// `curl -x` with `args`, printing the response heads (`-i`) before the bodies.
fn curl_via(p: SocketAddr, args: &[&str]) -> (i32, String, String) {
    let proxy_url = format!("http://{p}");
    let mut all = vec!["-i", "-x", &proxy_url];
    all.extend_from_slice(args);
    let (code, out, err) = run_curl(&all);
    (code, String::from_utf8_lossy(&out).into_owned(), err)
}

#[test]
fn curl_forwards_http_requests_cleaned_of_hop_by_hop_fields() {
    let t = echo_target();
    let (engine, p) = proxy(ProxyConfig::new(to(t)));
    let (code, out, err) = curl_via(
        p,
        &[
            "-H",
            "X-Hop: drop me",
            "-H",
            "Connection: X-Hop",
            "-H",
            "X-End: kept",
            "-d",
            "posted body",
            &url(t, "/first?q=1"),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let lower = out.to_ascii_lowercase();
    // The response: the target's hop-by-hop fields are gone, Via is added.
    let (resp_head, echoed) = lower.split_once("\r\n\r\n").unwrap();
    assert!(resp_head.starts_with("http/1.1 200"), "{out}");
    assert!(resp_head.contains("x-target: yes"), "{out}");
    assert!(resp_head.contains("via: 1.1 fibr"), "{out}");
    assert!(
        !resp_head.contains("x-hop") && !resp_head.contains("keep-alive: "),
        "{out}"
    );
    // The request as the target saw it: origin-form, the client's end-to-end fields,
    // Via, and none of the hop-by-hop ones.
    assert!(
        echoed.starts_with("post /first?q=1 http/1.1\r\n"),
        "{echoed}"
    );
    assert!(echoed.contains(&format!("host: {t}\r\n")), "{echoed}");
    assert!(echoed.contains("x-end: kept\r\n"), "{echoed}");
    assert!(echoed.contains("via: 1.1 fibr\r\n"), "{echoed}");
    assert!(
        !echoed.contains("x-hop") && !echoed.contains("proxy-connection"),
        "{echoed}"
    );
    assert!(echoed.ends_with("\r\n\r\nposted body"), "{echoed}");

    // Two URLs in one curl: both answered on the proxy connection curl keeps.
    let (code, out, err) = curl_via(p, &[&url(t, "/a"), &url(t, "/b")]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("GET /a HTTP/1.1") && out.contains("GET /b HTTP/1.1"),
        "{out}"
    );
    assert!(err.is_empty(), "{err}");
    drop(engine);
}

#[test]
fn a_large_forwarded_response_streams_intact() {
    let t = target();
    let (engine, p) = proxy(ProxyConfig::new(to(t)));
    let proxy_url = format!("http://{p}");
    let (code, out, err) = run_curl(&["-x", &proxy_url, &url(t, "/big")]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out == big_body(),
        "{} bytes, not the 32 MiB sent",
        out.len()
    );
    all_closed(&engine);
}

#[test]
fn forwarding_follows_the_rules_and_asks_for_credentials() {
    let t = echo_target();
    let other = echo_target();
    let rules = to(t).require_auth(|user, password| user == "alice" && password == "s3cret");
    let (_engine, p) = proxy(ProxyConfig::new(rules));
    let status = |args: &[&str]| {
        let (code, out, err) = curl_via(p, args);
        assert_eq!(code, 0, "{err}");
        out.split(' ').nth(1).unwrap().to_owned()
    };
    let (_, out, _) = curl_via(p, &[&url(t, "/")]);
    assert!(out.starts_with("HTTP/1.1 407 "), "{out}");
    assert!(out.contains("proxy-authenticate: Basic"), "{out}");
    assert_eq!(status(&["-U", "alice:wrong", &url(t, "/")]), "407");
    assert_eq!(status(&["-U", "alice:s3cret", &url(t, "/")]), "200");
    // Credentials do not open a target the rules do not name (loopback, other port).
    assert_eq!(status(&["-U", "alice:s3cret", &url(other, "/")]), "403");
}

#[test]
fn a_forwarded_request_to_a_refusing_or_silent_target_gets_502_or_504() {
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let slow = echo_target();
    let rules = to(closed).allow_target_net(slow.ip().into(), slow.port()..=slow.port());
    let limit = Duration::from_millis(500);
    let (engine, p) = proxy(ProxyConfig::new(rules).with_response_timeout(limit));
    let (_, out, _) = curl_via(p, &[&url(closed, "/")]);
    assert!(out.starts_with("HTTP/1.1 502 "), "{out}");
    let start = Instant::now();
    let (_, out, _) = curl_via(p, &[&url(slow, "/slow")]);
    assert!(out.starts_with("HTTP/1.1 504 "), "{out}");
    let took = start.elapsed();
    assert!(took >= limit && took < limit * 10, "{took:?}");
    all_closed(&engine);
}

#[test]
fn requests_that_cannot_be_forwarded_get_their_status() {
    let t = echo_target();
    let (engine, p) = proxy(ProxyConfig::new(to(t)));
    for (req, status) in [
        (
            "GET /origin-form HTTP/1.1\r\nHost: x\r\n\r\n".to_owned(),
            "400",
        ),
        (
            format!("GET https://{t}/ HTTP/1.1\r\nHost: {t}\r\n\r\n"),
            "501",
        ),
        (
            format!("GET ftp://{t}/ HTTP/1.1\r\nHost: {t}\r\n\r\n"),
            "501",
        ),
    ] {
        let mut s = stream(p);
        s.write_all(req.as_bytes()).unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status} ")),
            "{req}: {answer}"
        );
    }
    // After a forwarded request, a CONNECT on the same connection is refused, not
    // mistaken for a request to forward.
    let mut s = stream(p);
    let req = format!("GET http://{t}/ HTTP/1.1\r\nHost: {t}\r\n\r\nCONNECT {t} HTTP/1.1\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    assert!(answer.contains("HTTP/1.1 400 "), "{answer}");
    all_closed(&engine);
}

// ---------------------------------------------------------------------------------------
// SOCKS5 UDP ASSOCIATE.

/// A UDP echo on 127.0.0.1 that counts the datagrams it got.
fn udp_echo() -> (SocketAddr, Arc<AtomicUsize>) {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = sock.local_addr().unwrap();
    let got = Arc::new(AtomicUsize::new(0));
    let counter = got.clone();
    thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while let Ok((n, from)) = sock.recv_from(&mut buf) {
            counter.fetch_add(1, Ordering::SeqCst);
            let _ = sock.send_to(&buf[..n], from);
        }
    });
    (addr, got)
}

/// Asks for a UDP association over a new SOCKS5 connection; (the connection, the relay).
fn associate(p: SocketAddr, client_hint: SocketAddr) -> (TcpStream, SocketAddr) {
    let mut s = socks5(p, &[0]);
    let mut req = connect5(client_hint);
    req[1] = 3;
    s.write_all(&req).unwrap();
    let r = reply5(&mut s);
    assert_eq!(r[1], 0, "UDP ASSOCIATE granted");
    let relay = SocketAddr::from(([r[4], r[5], r[6], r[7]], u16::from_be_bytes([r[8], r[9]])));
    (s, relay)
}

/// A client datagram for `to` (an address, or a host name and port).
fn datagram(to: Result<SocketAddr, (&str, u16)>, payload: &[u8]) -> Vec<u8> {
    let mut d = vec![0, 0, 0];
    match to {
        Ok(SocketAddr::V4(a)) => {
            d.push(1);
            d.extend_from_slice(&a.ip().octets());
            d.extend_from_slice(&a.port().to_be_bytes());
        }
        Ok(SocketAddr::V6(_)) => unreachable!(),
        Err((name, port)) => {
            d.extend_from_slice(&[3, name.len() as u8]);
            d.extend_from_slice(name.as_bytes());
            d.extend_from_slice(&port.to_be_bytes());
        }
    }
    d.extend_from_slice(payload);
    d
}

fn udp_client() -> std::net::UdpSocket {
    let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    u.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    u
}

#[test]
fn udp_associate_relays_both_ways_and_only_what_the_rules_allow() {
    let (echo, echo_got) = udp_echo();
    let (other, other_got) = udp_echo();
    let rules = Rules::new().allow_target_net(echo.ip().into(), echo.port()..=echo.port());
    let (engine, p) = proxy(ProxyConfig::new(rules));
    let (tcp, relay) = associate(p, SocketAddr::from(([0, 0, 0, 0], 0)));
    assert_eq!(
        relay.ip(),
        p.ip(),
        "the relay is on the address the client reached"
    );
    let u = udp_client();
    let mut buf = [0u8; 2048];
    for (i, to) in [Ok(echo), Err(("localhost", echo.port()))]
        .into_iter()
        .enumerate()
    {
        let payload = format!("ping {i}");
        u.send_to(&datagram(to, payload.as_bytes()), relay).unwrap();
        let (n, from) = u.recv_from(&mut buf).expect("the echo's answer, relayed");
        assert_eq!(from, relay);
        assert_eq!(
            &buf[..n],
            &datagram(Ok(echo), payload.as_bytes())[..],
            "header names the echo"
        );
    }
    assert_eq!(echo_got.load(Ordering::SeqCst), 2);

    // Dropped: a target the rules do not name, a fragment, and another sender once the
    // client's port is known.
    u.send_to(&datagram(Ok(other), b"nope"), relay).unwrap();
    let mut fragment = datagram(Ok(echo), b"frag");
    fragment[2] = 1;
    u.send_to(&fragment, relay).unwrap();
    udp_client()
        .send_to(&datagram(Ok(echo), b"stranger"), relay)
        .unwrap();
    assert!(u.recv_from(&mut buf).is_err(), "nothing comes back");
    assert_eq!(other_got.load(Ordering::SeqCst), 0);
    assert_eq!(echo_got.load(Ordering::SeqCst), 2);

    // The association ends with its TCP connection.
    drop(tcp);
    all_closed(&engine);
    thread::sleep(Duration::from_millis(50));
    u.send_to(&datagram(Ok(echo), b"late"), relay).unwrap();
    assert!(u.recv_from(&mut buf).is_err());
    assert_eq!(echo_got.load(Ordering::SeqCst), 2);
}

#[test]
fn udp_associate_with_a_named_client_port_and_an_idle_timeout() {
    let (echo, _) = udp_echo();
    let limit = Duration::from_millis(300);
    let (engine, p) = proxy(ProxyConfig::new(to(echo)).with_udp_idle_timeout(limit));
    let u = udp_client();
    let (mut tcp, relay) = associate(p, u.local_addr().unwrap());
    // The request named the client's port: another socket of the same host is not it.
    udp_client()
        .send_to(&datagram(Ok(echo), b"stranger"), relay)
        .unwrap();
    u.send_to(&datagram(Ok(echo), b"me"), relay).unwrap();
    let mut buf = [0u8; 64];
    let (n, _) = u.recv_from(&mut buf).unwrap();
    assert!(buf[..n].ends_with(b"me"));
    // Silent past the limit: the proxy closes the TCP connection.
    let start = Instant::now();
    assert_eq!(tcp.read(&mut buf).unwrap(), 0, "closed by the proxy");
    assert!(start.elapsed() < limit * 10);
    all_closed(&engine);
}

#[test]
fn udp_associate_forgets_the_oldest_destination_past_udp_max_peers() {
    let a = udp_client();
    let b = udp_client();
    let rules = Rules::new().allow_target_net("127.0.0.1".parse().unwrap(), 1..=65535);
    let (_engine, p) = proxy(ProxyConfig::new(rules).with_udp_max_peers(1));
    let u = udp_client();
    let (_tcp, relay) = associate(p, SocketAddr::from(([0, 0, 0, 0], 0)));
    let mut buf = [0u8; 64];
    for target in [&a, &b] {
        u.send_to(&datagram(Ok(target.local_addr().unwrap()), b"hi"), relay)
            .unwrap();
        let (_, from) = target.recv_from(&mut buf).expect("relayed");
        assert_eq!(from, relay);
    }
    // Only the newest destination may answer now.
    a.send_to(b"from a", relay).unwrap();
    b.send_to(b"from b", relay).unwrap();
    let (n, _) = u.recv_from(&mut buf).unwrap();
    assert!(buf[..n].ends_with(b"from b"), "{:?}", &buf[..n]);
    assert!(u.recv_from(&mut buf).is_err(), "a was forgotten");
}
