//! One port serving HTTP/1.1, h2c, HTTPS (h2 and http/1.1 by ALPN), a TLS protocol of its
//! own ALPN, SOCKS5, SOCKS4, HTTP CONNECT (a user prefix route ahead of HTTP/1), a line
//! protocol (`PING`), and a default for the rest, through `fibr::mux::Mux`: curl for the
//! HTTP and SOCKS clients, rustls and raw sockets for what curl cannot show (a ClientHello
//! cut into records and segments, silent and partial clients, concurrent mixes). With
//! CI=true a missing curl fails the test.

mod common;

use axum::routing::get;
use axum::Router;
use common::pki::Pki;
use common::{bounded, closed_within, connect};
use fibr::mux::{Matcher, Mux, MuxConfig};
use fibr::proxy::{ProxyConfig, Rules};
use fibr::tls::{rustls, TlsServer};
use fibr::{Binding, Config, Conn, Engine, Handler};
use rustls::pki_types::ServerName;
use rustls::{ClientConnection, StreamOwned};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);
/// Short, so that the timeout tests are quick; every client here sends at once.
const PEEK_TIMEOUT: Duration = Duration::from_millis(500);

fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "hello from http" }))
        .route(
            "/id/{id}",
            get(|axum::extract::Path(id): axum::extract::Path<String>| async move { id }),
        )
}

/// The line protocol: each `PING x` line is answered `PONG x`.
struct Pong;

impl Handler for Pong {
    fn on_open(&self, conn: &Conn) {
        // The partial line so far.
        conn.set_context(Vec::<u8>::new());
    }
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        conn.with_context::<Vec<u8>, _>(|line| {
            let line = line.expect("opened");
            for &b in data {
                line.push(b);
                if b == b'\n' {
                    if let Some(rest) = line.strip_prefix(b"PING") {
                        let _ = conn.send(&[b"PONG", rest].concat());
                    }
                    line.clear();
                }
            }
        });
    }
}

/// The default: greets on open, then echoes.
struct Fallback;

impl Handler for Fallback {
    fn on_open(&self, conn: &Conn) {
        let _ = conn.send(b"fallback\n");
    }
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        let _ = conn.send(data);
    }
}

/// Echoes (behind TLS with ALPN `x-echo`, and in the peek limit's test).
struct Echo;

impl Handler for Echo {
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        let _ = conn.send(data);
    }
}

/// A plain HTTP target on 127.0.0.1 for the proxy: answers `from target` to any request.
fn target() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { continue };
            thread::spawn(move || {
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nConnection: close\r\n\r\nfrom target",
                );
            });
        }
    });
    addr
}

/// The shared port, and what its clients need.
struct Port {
    engine: Engine,
    /// Every route, and [`Fallback`] as the default.
    addr: SocketAddr,
    /// HTTP/1 only, no default.
    strict: SocketAddr,
    target: SocketAddr,
    pki: Pki,
}

fn tls_config(pki: &Pki, leaf: &common::pki::Leaf, alpn: &[&[u8]]) -> Arc<rustls::ServerConfig> {
    let mut config = pki.server_config(leaf);
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

fn start() -> Port {
    let pki = Pki::new();
    let leaf = pki.server(&["localhost"]);
    let target = target();
    let http = Arc::new(fibr::http::Server::new(app()));
    let https = TlsServer::new(tls_config(&pki, &leaf, &[b"h2", b"http/1.1"]), http.clone());
    let echo = TlsServer::new(tls_config(&pki, &leaf, &[b"x-echo"]), Echo);
    let rules = Rules::new().allow_target_net(target.ip().into(), target.port()..=target.port());
    let proxy = Arc::new(fibr::proxy::Server::new(ProxyConfig::new(rules)));
    let config = MuxConfig::default().with_peek_timeout(PEEK_TIMEOUT);
    let mux = Mux::with_config(config.clone())
        .route(Matcher::tls_alpn(["x-echo"]), echo)
        .route(Matcher::tls(), https)
        .route(Matcher::prefix("CONNECT "), proxy.clone())
        // `PING ` would be an HTTP/1 request line's start: this route goes first.
        .route(Matcher::prefix("PING "), Pong)
        .route(Matcher::http1(), http.clone())
        .route(Matcher::h2c(), http.clone())
        .route(Matcher::socks5(), proxy.clone())
        .route(Matcher::socks4(), proxy)
        .default_handler(Fallback);
    let strict = Mux::with_config(config).route(Matcher::http1(), http);
    let engine = Engine::new(
        Config::default().with_workers(2),
        [
            Binding::tcp("127.0.0.1:0", mux),
            Binding::tcp("127.0.0.1:0", strict),
        ],
    )
    .unwrap();
    Port {
        addr: engine.binding_addrs(0)[0],
        strict: engine.binding_addrs(1)[0],
        engine,
        target,
        pki,
    }
}

impl Port {
    /// Fails unless every connection of the engine is closed soon.
    fn all_closed(&self) {
        let until = Instant::now() + Duration::from_secs(5);
        while self.engine.connections() > 0 {
            assert!(
                Instant::now() < until,
                "{} connections still open",
                self.engine.connections()
            );
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// A TLS client for this port's certificate offering `alpn`, over `s`.
    fn tls(&self, s: TcpStream, alpn: &[&[u8]]) -> StreamOwned<ClientConnection, TcpStream> {
        let mut config = self.pki.client_config();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        let name = ServerName::try_from("localhost").unwrap();
        StreamOwned::new(ClientConnection::new(Arc::new(config), name).unwrap(), s)
    }
}

/// Runs curl with `args`: (exit code, stdout, stderr).
fn curl(args: &[&str]) -> (i32, String, String) {
    common::require_tool("curl", "curl");
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20"])
        .args(args)
        .output()
        .unwrap();
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    (
        out.status.code().unwrap_or(-1),
        text(out.stdout),
        text(out.stderr),
    )
}

/// curl's body and HTTP version (`-w`), asserting it succeeded.
fn curl_ok(args: &[&str]) -> (String, String) {
    let mut all = args.to_vec();
    all.extend(["-w", "|%{http_version}"]);
    let (code, out, err) = curl(&all);
    assert_eq!(code, 0, "curl {args:?}: {err}");
    let (body, version) = out.rsplit_once('|').unwrap();
    (body.to_string(), version.to_string())
}

#[test]
fn curl_speaks_http1_h2c_and_https_with_either_alpn_on_one_port() {
    bounded(LIMIT, || {
        let port = start();
        let http = format!("http://{}/", port.addr);
        let https = format!("https://localhost:{}/", port.addr.port());
        let resolve = format!("localhost:{}:127.0.0.1", port.addr.port());
        let ca = port.pki.ca_pem.path().to_str().unwrap().to_string();
        let cases: [(&[&str], &str); 4] = [
            (&["--http1.1", &http], "1.1"),
            (&["--http2-prior-knowledge", &http], "2"),
            (&["--cacert", &ca, "--resolve", &resolve, &https], "2"),
            (
                &["--http1.1", "--cacert", &ca, "--resolve", &resolve, &https],
                "1.1",
            ),
        ];
        for (args, version) in cases {
            let (body, got) = curl_ok(args);
            assert_eq!(body, "hello from http", "{args:?}");
            assert_eq!(got, version, "{args:?}");
        }
        // -k, and two requests on one connection.
        let https = format!("https://{}/", port.addr);
        let (code, body, err) = curl(&["-k", &https, &format!("{https}id/again")]);
        assert_eq!((code, body.as_str()), (0, "hello from httpagain"), "{err}");
        port.all_closed();
    });
}

#[test]
fn curl_goes_through_socks5_socks4_and_connect_on_the_same_port() {
    bounded(LIMIT, || {
        let port = start();
        let proxy = port.addr.to_string();
        let url = format!("http://{}/", port.target);
        let cases: [&[&str]; 4] = [
            &["--socks5", &proxy, &url],
            &["--socks5-hostname", &proxy, &url],
            &["--socks4", &proxy, &url],
            &["-p", "-x", &format!("http://{proxy}"), &url],
        ];
        for args in cases {
            let (body, _) = curl_ok(args);
            assert_eq!(body, "from target", "{args:?}");
        }
        // The proxy's rules still hold behind the mux: only the target is allowed.
        let (code, _, err) = curl(&["--socks5", &proxy, &format!("http://{}/", port.strict)]);
        assert_ne!(code, 0, "a refused target went through: {err}");
        port.all_closed();
    });
}

#[test]
fn a_tls_client_is_routed_by_its_alpn_even_with_its_hello_cut_into_pieces() {
    bounded(LIMIT, || {
        let port = start();
        // ALPN x-echo goes to the echo server, whole.
        let mut echo = port.tls(connect(port.addr), &[b"x-echo"]);
        echo.write_all(b"echo me").unwrap();
        let mut got = [0u8; 7];
        echo.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"echo me");
        assert_eq!(echo.conn.alpn_protocol(), Some(&b"x-echo"[..]));

        // The hello in records of 64 bytes, written a piece at a time (with Nagle off,
        // each its own segment as far as the kernel lets it), pieces across the records.
        for alpn in [&b"x-echo"[..], b"h2"] {
            let s = connect(port.addr);
            s.set_nodelay(true).unwrap();
            let mut tls = port.tls(s, &[alpn]);
            let mut hello = Vec::new();
            tls.conn.write_tls(&mut hello).unwrap();
            let fragmented = refragment(&hello, 64);
            assert!(fragmented.len() > hello.len() + 5, "one record only");
            for piece in fragmented.chunks(37) {
                tls.sock.write_all(piece).unwrap();
                thread::sleep(Duration::from_millis(2));
            }
            if alpn == b"x-echo" {
                tls.write_all(b"pieces").unwrap();
                let mut got = [0u8; 6];
                tls.read_exact(&mut got).unwrap();
                assert_eq!(&got, b"pieces");
            } else {
                let mut c = common::Client::over(tls);
                c.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0");
                // ALPN h2 was offered alone: the server speaks HTTP/2 (its SETTINGS first).
                let settings = c.take(9, "a SETTINGS frame header");
                assert_eq!(settings[3], 4, "{settings:?}");
            }
        }
        drop(echo);
        port.all_closed();
    });
}

/// Cuts a flight of TLS records into records of at most `size` payload bytes.
fn refragment(records: &[u8], size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < records.len() {
        let (head, len) = (
            &records[at..at + 3],
            u16::from_be_bytes([records[at + 3], records[at + 4]]) as usize,
        );
        for piece in records[at + 5..at + 5 + len].chunks(size) {
            out.extend_from_slice(head);
            out.extend_from_slice(&(piece.len() as u16).to_be_bytes());
            out.extend_from_slice(piece);
        }
        at += 5 + len;
    }
    out
}

#[test]
fn a_prefix_route_serves_a_line_protocol_and_the_rest_goes_to_the_default() {
    bounded(LIMIT, || {
        let port = start();
        // PING a byte at a time: `P`, `PI`, ... could be the start of a PING route's line.
        let mut ping = connect(port.addr);
        ping.set_nodelay(true).unwrap();
        for b in b"PING 1\n" {
            ping.write_all(&[*b]).unwrap();
            thread::sleep(Duration::from_millis(2));
        }
        ping.write_all(b"PING 2\n").unwrap();
        assert_eq!(read_exactly(&mut ping, 14), b"PONG 1\nPONG 2\n");

        // Bytes no route knows: the default gets them, all of them, after its greeting.
        let mut unknown = connect(port.addr);
        unknown.write_all(b"\x01\x02 what is this?").unwrap();
        let want = b"fallback\n\x01\x02 what is this?";
        assert_eq!(read_exactly(&mut unknown, want.len()), want);
        drop((ping, unknown));

        // On the strict port (HTTP/1 only, no default) they are closed.
        let mut s = connect(port.strict);
        s.write_all(b"\x16\x03\x01\x00\x05hello").unwrap();
        closed_within(&mut s, Duration::from_secs(5)).unwrap();
        let mut c = common::Client::connect(port.strict);
        assert_eq!(c.get("/").text(), "hello from http");
        drop(c);
        port.all_closed();
    });
}

#[test]
fn a_client_silent_or_stuck_midway_meets_the_peek_timeout() {
    bounded(LIMIT, || {
        let port = start();
        let started = Instant::now();
        // Silent: the default gets the connection when the timeout passes, with nothing.
        let mut silent = connect(port.addr);
        // Stuck in a prefix (`PIN` could still become `PING`): the default gets `PIN`.
        let mut stuck = connect(port.addr);
        stuck.write_all(b"PIN").unwrap();
        // A ClientHello's first record header alone: TLS, but which ALPN?
        let mut partial_tls = connect(port.addr);
        partial_tls.write_all(&[22, 3, 1, 0, 200]).unwrap();
        // Without a default they are closed.
        let mut strict_silent = connect(port.strict);
        let mut strict_stuck = connect(port.strict);
        strict_stuck.write_all(b"GE").unwrap();

        assert_eq!(read_exactly(&mut silent, 9), b"fallback\n");
        assert!(started.elapsed() >= PEEK_TIMEOUT, "{:?}", started.elapsed());
        assert_eq!(read_exactly(&mut stuck, 12), b"fallback\nPIN");
        let want = b"fallback\n\x16\x03\x01\x00\xc8";
        assert_eq!(read_exactly(&mut partial_tls, want.len()), want);
        closed_within(&mut strict_silent, Duration::from_secs(5)).unwrap();
        closed_within(&mut strict_stuck, Duration::from_secs(5)).unwrap();
        // The default keeps its connections; the rest are gone.
        drop((silent, stuck, partial_tls));
        port.all_closed();
    });
}

#[test]
fn the_peek_limit_sends_an_undecided_client_to_the_default() {
    bounded(LIMIT, || {
        // A route that waits for 4 KiB, a limit of 1 KiB, and a timeout that is not the
        // one to end the wait.
        let config = MuxConfig::default()
            .with_max_peek(1024)
            .with_peek_timeout(Duration::from_secs(60));
        let mux = Mux::with_config(config)
            .route(Matcher::prefix([b'A'; 4096]), Pong)
            .default_handler(Echo);
        let engine = Engine::new(
            Config::default().with_workers(1),
            [Binding::tcp("127.0.0.1:0", mux)],
        )
        .unwrap();
        let mut c = common::Client::connect(engine.binding_addrs(0)[0]);
        c.send(&[b'A'; 1023]);
        assert!(
            c.quiet_for(Duration::from_millis(300)),
            "decided before the limit"
        );
        // The limit's byte, and more in the same write: all of it goes to the default.
        c.send(&[b'A'; 1000]);
        assert_eq!(c.take(2023, "the echo"), vec![b'A'; 2023]);
        c.send(b"then more");
        assert_eq!(c.take(9, "the echo"), b"then more");
    });
}

#[test]
fn many_clients_of_every_protocol_at_once_each_get_their_own_answers() {
    bounded(LIMIT, || {
        let port = Arc::new(start());
        let mut threads = Vec::new();
        for t in 0..4 {
            let port = port.clone();
            threads.push(thread::spawn(move || {
                for i in 0..25 {
                    let id = format!("{t}-{i}");
                    match i % 5 {
                        0 => {
                            let mut c = common::Client::connect(port.addr);
                            assert_eq!(c.get(&format!("/id/{id}")).text(), id);
                        }
                        1 => {
                            let mut s = connect(port.addr);
                            s.write_all(format!("PING {id}\n").as_bytes()).unwrap();
                            let want = format!("PONG {id}\n");
                            assert_eq!(read_exactly(&mut s, want.len()), want.as_bytes());
                        }
                        2 => {
                            let tls = port.tls(connect(port.addr), &[b"http/1.1"]);
                            let mut c = common::Client::over(tls);
                            assert_eq!(c.get(&format!("/id/{id}")).text(), id);
                        }
                        3 => {
                            let mut tls = port.tls(connect(port.addr), &[b"x-echo"]);
                            tls.write_all(id.as_bytes()).unwrap();
                            let mut got = vec![0u8; id.len()];
                            tls.read_exact(&mut got).unwrap();
                            assert_eq!(got, id.as_bytes());
                        }
                        _ => {
                            let mut s = connect(port.addr);
                            socks5_connect(&mut s, port.target);
                            s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
                            let mut got = Vec::new();
                            let _ = s.read_to_end(&mut got);
                            assert!(got.ends_with(b"from target"), "{got:?}");
                        }
                    }
                }
            }));
        }
        for t in threads {
            t.join().unwrap();
        }
        port.all_closed();
    });
}

/// A SOCKS5 CONNECT to `to` without authentication, with its replies checked.
fn socks5_connect(s: &mut TcpStream, to: SocketAddr) {
    s.write_all(&[5, 1, 0]).unwrap();
    assert_eq!(read_exactly(s, 2), [5, 0]);
    let SocketAddr::V4(v4) = to else {
        panic!("an IPv4 target")
    };
    let mut req = vec![5, 1, 0, 1];
    req.extend(v4.ip().octets());
    req.extend(v4.port().to_be_bytes());
    s.write_all(&req).unwrap();
    let reply = read_exactly(s, 10);
    assert_eq!(reply[..2], [5, 0], "{reply:?}");
}

fn read_exactly(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    s.read_exact(&mut buf).unwrap();
    buf
}
