//! `fibr::arpc` over real sockets on 127.0.0.1, against Go's arpc (`arpc-peer`, built from
//! the real library; `../shared/conformance/arpc/`): the peer's 17 checks against fibr's
//! server, fibr's client checks (the example's) against the peer's server and fibr's own;
//! hand-made bad frames; broadcast, the server calling its clients, and reconnect.

#[allow(dead_code)]
#[path = "../examples/arpc.rs"]
mod example;

use fibr::arpc::{Client, Config as ArpcConfig, Error, Router, Server};
use fibr::{Binding, Config, Engine};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The Go peer, beside the checkout (CI runs from /work/<checkout>, /work/shared beside it).
fn peer_path() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance/arpc/arpc-peer");
    assert!(
        p.exists(),
        "the Go arpc peer is missing at {} (../shared/conformance/arpc/arpc-peer from the crate root)",
        p.display()
    );
    p
}

/// A child process killed when the test ends.
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(server: Server) -> (Engine, SocketAddr) {
    let engine =
        Engine::new(Config::default(), [Binding::tcp("127.0.0.1:0", server)]).expect("engine");
    let addr = engine.binding_addrs(0)[0];
    (engine, addr)
}

fn assert_all_pass(results: Vec<(&'static str, Result<(), String>)>) {
    let failed: Vec<_> = results.iter().filter(|(_, r)| r.is_err()).collect();
    assert!(failed.is_empty(), "failed: {failed:?}");
    assert!(results.len() >= 11, "only {} checks ran", results.len());
}

#[test]
fn go_client_checks_pass_against_fibr_server() {
    let (_engine, addr) = serve(Server::new(example::server_router()));
    let out = Command::new(peer_path())
        .args(["client", &addr.to_string()])
        .stderr(Stdio::null())
        .output()
        .expect("run arpc-peer client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let passed = stdout.lines().filter(|l| l.starts_with("PASS ")).count();
    assert!(out.status.success(), "arpc-peer client failed:\n{stdout}");
    assert!(!stdout.contains("FAIL"), "{stdout}");
    assert_eq!(passed, 17, "{stdout}");
}

#[test]
fn fibr_client_checks_pass_against_go_server() {
    let mut child = Command::new(peer_path())
        .args(["server", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run arpc-peer server");
    let stdout = child.stdout.take().unwrap();
    let _kill = Kill(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let addr: SocketAddr = line
        .trim()
        .strip_prefix("READY ")
        .unwrap_or_else(|| panic!("arpc-peer server said {line:?}"))
        .parse()
        .unwrap();
    assert_all_pass(fibr::run(example::client_checks(addr)));
}

#[test]
fn fibr_client_checks_pass_against_fibr_server() {
    let (engine, addr) = serve(Server::new(example::server_router()));
    assert_all_pass(engine.block_on(example::client_checks(addr)));
}

// ---------------------------------------------------------------------------------------
// Bad input, by hand
// ---------------------------------------------------------------------------------------

fn frame(cmd: u8, flag: u8, seq: u64, method: &[u8], body: &[u8]) -> Vec<u8> {
    let mut b = ((method.len() + body.len()) as u32).to_le_bytes().to_vec();
    b.extend([0, cmd, flag, method.len() as u8]);
    b.extend(seq.to_le_bytes());
    b.extend_from_slice(method);
    b.extend_from_slice(body);
    b
}

const PING: [u8; 16] = [0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
const PONG: [u8; 16] = [0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];

fn raw(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

/// Everything until the server closes (fails if it does not within the timeout).
fn read_to_close(s: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    s.read_to_end(&mut got)
        .expect("the server should close the connection");
    got
}

/// Sends `bad`, then a ping: the pong must be the first and only thing back (the bad
/// frame was dropped without an answer and the connection lives on).
fn dropped_silently(addr: SocketAddr, bad: &[u8]) {
    let mut s = raw(addr);
    s.write_all(&[bad, &PING].concat()).unwrap();
    let mut got = [0; 16];
    s.read_exact(&mut got).unwrap();
    assert_eq!(got, PONG, "for {bad:?}");
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut more = [0; 1];
    assert!(
        s.read(&mut more).is_err(),
        "more bytes after the pong for {bad:?}"
    );
}

fn limited() -> (Engine, SocketAddr) {
    serve(Server::with_config(
        example::server_router(),
        ArpcConfig::default().with_max_body_len(1024),
    ))
}

#[test]
fn body_limit_is_exact_and_over_it_closes() {
    let (_e, addr) = limited();
    let mut s = raw(addr);
    let at = frame(1, 0, 5, b"/echo", &[7; 1024 - 5]);
    s.write_all(&at).unwrap();
    let mut back = vec![0; at.len()];
    s.read_exact(&mut back).unwrap();
    assert_eq!(&back[16..], &at[16..], "at the limit: answered");
    // One over: the header alone closes it, nothing kept or answered.
    let over = frame(1, 0, 6, b"/echo", &[7; 1024 - 4]);
    s.write_all(&over[..16]).unwrap();
    assert_eq!(read_to_close(&mut s), b"");
}

#[test]
fn bad_method_lengths_are_dropped_without_an_answer() {
    let (_e, addr) = limited();
    dropped_silently(addr, &frame(1, 0, 2, &[b'/'; 128], b"x"));
    dropped_silently(addr, &frame(1, 0, 2, b"", b"x"));
    // A method length past the body.
    let mut past = frame(1, 0, 2, b"/echo", b"");
    past[7] = 9;
    dropped_silently(addr, &past);
    // 127 bytes is fine: an unknown method, answered.
    let mut s = raw(addr);
    s.write_all(&frame(1, 0, 3, &[b'/'; 127], b"")).unwrap();
    let mut back = vec![0; 16 + 127 + 16];
    s.read_exact(&mut back).unwrap();
    assert_eq!(&back[16 + 127..], b"method not found");
    assert_eq!(back[6], 1, "error flag");
}

#[test]
fn unknown_commands_close_the_connection() {
    let (_e, addr) = limited();
    for cmd in [0u8, 7, 63] {
        let mut s = raw(addr);
        s.write_all(
            &[
                frame(cmd, 0, 2, b"/echo", b"x"),
                frame(1, 0, 3, b"/echo", b"y"),
            ]
            .concat(),
        )
        .unwrap();
        assert_eq!(read_to_close(&mut s), b"", "cmd {cmd}");
    }
}

#[test]
fn a_response_to_no_call_and_a_notify_to_no_handler_are_dropped() {
    let (_e, addr) = limited();
    dropped_silently(addr, &frame(2, 0, 999, b"/echo", b"late"));
    dropped_silently(addr, &frame(2, 1, 998, b"/echo", b"late error"));
    dropped_silently(addr, &frame(3, 2, 5, b"/nobody", b"x"));
    // A stream frame nobody serves.
    dropped_silently(addr, &frame(6 | 0x80, 0, 7, b"/stream", b"x"));
}

#[test]
fn a_truncated_frame_is_never_answered() {
    let (_e, addr) = limited();
    let mut s = raw(addr);
    let f = frame(1, 0, 2, b"/echo", b"abcdef");
    s.write_all(&f[..f.len() - 1]).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(read_to_close(&mut s), b"");
    // The rest arriving byte by byte is the same frame.
    let mut s = raw(addr);
    for b in &f {
        s.write_all(std::slice::from_ref(b)).unwrap();
    }
    let mut back = vec![0; f.len()];
    s.read_exact(&mut back).unwrap();
    assert_eq!(&back[16..], &f[16..]);
}

// ---------------------------------------------------------------------------------------
// Both ways, broadcast, reconnect
// ---------------------------------------------------------------------------------------

fn recording(seen: Arc<Mutex<Vec<String>>>) -> Router {
    Router::new()
        .route("/pushed", move |ctx| {
            let seen = seen.clone();
            async move {
                seen.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(ctx.body()).into())
            }
        })
        .route("/whoami", |ctx| async move { ctx.reply("client") })
}

async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        fibr::time::sleep(Duration::from_millis(5)).await;
    }
}

#[test]
fn server_broadcasts_and_calls_its_clients() {
    let server = Server::new(example::server_router());
    let (engine, addr) = serve(server.clone());
    engine.block_on(async {
        let (a, b) = (
            Arc::new(Mutex::new(Vec::new())),
            Arc::new(Mutex::new(Vec::new())),
        );
        let ca = Client::connect(addr, recording(a.clone())).await.unwrap();
        let cb = Client::connect(addr, recording(b.clone())).await.unwrap();
        wait_for("two peers", || server.peers().len() == 2).await;
        assert_eq!(server.broadcast("/pushed", "to all").unwrap(), 2);
        wait_for("both notified", || {
            a.lock().unwrap().len() == 1 && b.lock().unwrap().len() == 1
        })
        .await;
        assert_eq!(a.lock().unwrap()[0], "to all");
        for peer in server.peers() {
            let got = peer
                .call("/whoami", "", Duration::from_secs(2))
                .await
                .unwrap();
            assert_eq!(&got[..], b"client");
        }
        // One message encoded once, sent twice: the same bytes each time.
        let m = server.message("/pushed", "again").unwrap();
        assert_eq!(server.broadcast_message(&m), 2);
        assert_eq!(server.broadcast_message(&m), 2);
        wait_for("four", || {
            a.lock().unwrap().len() == 3 && b.lock().unwrap().len() == 3
        })
        .await;
        ca.stop();
        assert!(matches!(
            ca.call("/echo", "x", Duration::from_secs(1)).await,
            Err(Error::Closed)
        ));
        wait_for("one peer left", || server.peers().len() == 1).await;
        drop(cb);
        wait_for("no peers", || server.peers().is_empty()).await;
    });
}

#[test]
fn client_redials_after_losing_its_connection() {
    let server = Server::new(example::server_router());
    let (engine, addr) = serve(server.clone());
    engine.block_on(async {
        let config = ArpcConfig::default().with_reconnect_min(Duration::from_millis(20));
        let client = Client::connect_with(addr, Router::new(), config)
            .await
            .unwrap();
        wait_for("the peer", || server.peers().len() == 1).await;
        // A call in flight when the connection goes fails as arpc's does.
        let slow = client.call("/slow", "x", Duration::from_secs(5));
        let close = async {
            fibr::time::sleep(Duration::from_millis(50)).await;
            server.peers()[0].close();
        };
        let (r, ()) = futures_util::join!(slow, close);
        assert!(matches!(r, Err(Error::Reconnecting)), "{r:?}");
        wait_for("redialed", || client.peer().is_ok()).await;
        let got = client
            .call("/echo", "back", Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!(&got[..], b"back");
    });
}

#[test]
fn too_many_calls_and_bad_methods_fail_at_once() {
    let (engine, addr) = serve(Server::new(example::server_router()));
    engine.block_on(async {
        let config = ArpcConfig::default().with_max_pending_calls(2);
        let client = Client::connect_with(addr, Router::new(), config)
            .await
            .unwrap();
        let t = Duration::from_secs(5);
        client.call_async("/slow", "1", t, drop).unwrap();
        client.call_async("/slow", "2", t, drop).unwrap();
        assert!(matches!(
            client.call_async("/slow", "3", t, drop),
            Err(Error::TooManyCalls)
        ));
        assert!(matches!(client.notify("", "x"), Err(Error::BadMethod(_))));
        let long = "/".repeat(128);
        assert!(matches!(
            client.call(&long, "x", t).await,
            Err(Error::BadMethod(_))
        ));
    });
}

/// Answers each read with `HELLO` (the mux's other protocol here).
struct Hello;

impl fibr::Handler for Hello {
    fn on_data(&self, conn: &fibr::Conn, _data: &[u8]) {
        let _ = conn.send(b"HELLO");
    }
}

#[test]
fn behind_a_mux_the_go_checks_pass_and_the_other_route_still_works() {
    let mux = fibr::mux::Mux::new()
        .route(fibr::mux::Matcher::prefix("HI"), Hello)
        .route(fibr::arpc::matcher(), Server::new(example::server_router()));
    let engine = Engine::new(Config::default(), [Binding::tcp("127.0.0.1:0", mux)]).unwrap();
    let addr = engine.binding_addrs(0)[0];
    let out = Command::new(peer_path())
        .args(["client", &addr.to_string()])
        .stderr(Stdio::null())
        .output()
        .expect("run arpc-peer client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && !stdout.contains("FAIL"), "{stdout}");
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("PASS ")).count(),
        17
    );
    let mut s = raw(addr);
    s.write_all(b"HI there").unwrap();
    let mut got = [0; 5];
    s.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"HELLO");
}

#[test]
fn middleware_wraps_handlers_on_both_sides() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let router = example::server_router().middleware(move |ctx, next| {
        let log = log.clone();
        async move {
            log.lock().unwrap().push(ctx.method().to_owned());
            if ctx.body().starts_with(b"deny") {
                return ctx.reply_error("denied");
            }
            next.run(ctx).await
        }
    });
    let (engine, addr) = serve(Server::new(router));
    engine.block_on(async {
        let client_router = Router::new()
            .route("/client-echo", |ctx| async move { ctx.reply(ctx.body()) })
            .middleware(|ctx, next| async move {
                if ctx.body().starts_with(b"secret") {
                    return ctx.reply("redacted");
                }
                next.run(ctx).await
            });
        let client = Client::connect(addr, client_router).await.unwrap();
        let t = Duration::from_secs(2);
        assert_eq!(&client.call("/echo", "ok", t).await.unwrap()[..], b"ok");
        let denied = client.call("/echo", "deny me", t).await;
        assert!(
            matches!(&denied, Err(Error::Remote(m)) if m == "denied"),
            "{denied:?}"
        );
        let back = client.call("/call-back", "secret stuff", t).await.unwrap();
        assert_eq!(&back[..], b"redacted");
    });
    assert_eq!(*seen.lock().unwrap(), ["/echo", "/echo", "/call-back"]);
}

#[test]
fn the_mux_matcher_takes_arpc_headers_only() {
    use fibr::mux::Verdict;
    let m = fibr::arpc::matcher();
    assert_eq!(m.check(&PING), Verdict::Match);
    assert_eq!(m.check(&frame(1, 2, 2, b"/echo", b"x")), Verdict::Match);
    assert_eq!(m.check(&frame(6 | 0x80, 0, 2, b"/s", b"")), Verdict::Match);
    assert_eq!(m.check(&PING[..7]), Verdict::NeedMore);
    assert_eq!(m.check(b"GET / HTTP/1.1\r\n"), Verdict::NoMatch);
    assert_eq!(m.check(&frame(1, 0, 2, b"", b"x")), Verdict::NoMatch);
    assert_eq!(m.check(&frame(7, 0, 2, b"/x", b"")), Verdict::NoMatch);
    assert_eq!(m.check(&frame(1, 4, 2, b"/x", b"")), Verdict::NoMatch);
}

#[test]
fn handlers_that_wait_are_bounded_per_connection() {
    let (_e, addr) = serve(Server::with_config(
        example::server_router(),
        ArpcConfig::default().with_max_running_handlers(2),
    ));
    let mut s = raw(addr);
    s.write_all(
        &[
            frame(1, 0, 10, b"/slow", b"a"),
            frame(1, 0, 11, b"/slow", b"b"),
        ]
        .concat(),
    )
    .unwrap();
    // Well inside the 200 ms the slow handlers take.
    std::thread::sleep(Duration::from_millis(100));
    // Two handlers wait: this one is not read until one of them is done.
    s.write_all(&frame(1, 0, 12, b"/echo", b"c")).unwrap();
    let mut order = Vec::new();
    for _ in 0..3 {
        let mut head = [0; 16];
        s.read_exact(&mut head).unwrap();
        let mut rest = vec![0; u32::from_le_bytes(head[..4].try_into().unwrap()) as usize];
        s.read_exact(&mut rest).unwrap();
        order.push(u64::from_le_bytes(head[8..].try_into().unwrap()));
    }
    assert_ne!(order[0], 12, "the echo was read past the bound: {order:?}");
    order.sort();
    assert_eq!(order, [10, 11, 12]);
    // Below the bound an echo is answered at once, before the slow calls.
    s.write_all(
        &[
            frame(1, 0, 13, b"/slow", b"d"),
            frame(1, 0, 14, b"/echo", b"e"),
        ]
        .concat(),
    )
    .unwrap();
    let mut head = [0; 16];
    s.read_exact(&mut head).unwrap();
    assert_eq!(u64::from_le_bytes(head[8..].try_into().unwrap()), 14);
}

// ---------------------------------------------------------------------------------------
// Streams
// ---------------------------------------------------------------------------------------

/// Each body back in upper case; the end once the other side ends.
async fn upper(mut s: fibr::arpc::Stream) {
    while let Some(b) = s.recv().await {
        let _ = s.send(b.to_ascii_uppercase());
    }
    let _ = s.close_send();
}

#[test]
fn stream_frames_carry_the_openers_local_bit_and_eof() {
    let (_e, addr) = serve(Server::new(
        example::server_router().stream("/upper", upper),
    ));
    let mut s = raw(addr);
    s.write_all(
        &[
            frame(6 | 0x80, 0, 5, b"/upper", b"xy"),
            frame(6 | 0x80 | 0x40, 0, 5, b"/upper", b""),
        ]
        .concat(),
    )
    .unwrap();
    let mut back = vec![0; 2 * 16 + 2 * 6 + 2];
    s.read_exact(&mut back).unwrap();
    assert_eq!(back[..24], frame(6, 0, 5, b"/upper", b"XY")[..]);
    assert_eq!(back[24..], frame(6 | 0x40, 0, 5, b"/upper", b"")[..]);
}

#[test]
fn streams_both_ways_as_stream_and_sink() {
    use futures_util::{SinkExt, StreamExt};
    let server = Server::new(example::server_router().stream("/upper", upper));
    let (engine, addr) = serve(server.clone());
    engine.block_on(async {
        let client_router = Router::new().stream("/count", |mut s| async move {
            let mut n = 0u32;
            while s.next().await.is_some() {
                n += 1;
            }
            let _ = s.send_and_close(n.to_string());
        });
        let config = ArpcConfig::default().with_stream_queue(2);
        let client = Client::connect_with(addr, client_router, config)
            .await
            .unwrap();
        // The client opens one; its reader lags behind a queue of 2.
        let mut s = client.peer().unwrap().open_stream("/upper").unwrap();
        for i in 0..100 {
            SinkExt::send(&mut s, bytes::Bytes::from(format!("b{i}")))
                .await
                .unwrap();
        }
        SinkExt::close(&mut s).await.unwrap();
        let mut got = Vec::new();
        while let Some(b) = s.next().await {
            got.push(String::from_utf8(b.to_vec()).unwrap());
            // Not a timer: a 100 µs sleep in block_on now and then wakes only after the
            // engine's 10 s worker idle timeout (seen with or without the stream's hold).
            fibr::yield_now().await;
        }
        assert_eq!(got, (0..100).map(|i| format!("B{i}")).collect::<Vec<_>>());
        // The server opens one to the client.
        wait_for("the peer", || server.peers().len() == 1).await;
        let mut up = server.peers()[0].open_stream("/count").unwrap();
        for _ in 0..7 {
            up.send("x").unwrap();
        }
        up.close_send().unwrap();
        assert_eq!(up.recv().await.as_deref(), Some(&b"7"[..]));
        assert_eq!(up.recv().await, None);
        assert!(up.send("late").is_err(), "sent after close_send");
        // A stream nobody serves: its frames are dropped, the connection goes on.
        let orphan = client.peer().unwrap().open_stream("/nobody").unwrap();
        orphan.send("x").unwrap();
        let echoed = client
            .call("/echo", "alive", Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!(&echoed[..], b"alive");
    });
}

#[test]
fn calls_time_out_each_at_its_own_deadline() {
    let (engine, addr) = serve(Server::new(example::server_router()));
    engine.block_on(async {
        let client = Client::connect(addr, Router::new()).await.unwrap();
        let start = Instant::now();
        let done = Arc::new(Mutex::new(Vec::new()));
        // Later deadlines first: each new one is earlier than the timer's.
        for ms in [90u64, 60, 30] {
            let done = done.clone();
            client
                .call_async("/slow", "x", Duration::from_millis(ms), move |r| {
                    done.lock().unwrap().push((ms, start.elapsed(), r.is_err()));
                })
                .unwrap();
        }
        wait_for("three timeouts", || done.lock().unwrap().len() == 3).await;
        let done = done.lock().unwrap();
        assert_eq!(done.iter().map(|d| d.0).collect::<Vec<_>>(), [30, 60, 90]);
        for (ms, at, failed) in done.iter() {
            assert!(*failed, "{ms} ms: answered");
            assert!(*at >= Duration::from_millis(*ms), "{ms} ms: at {at:?}");
            assert!(*at < Duration::from_millis(ms + 100), "{ms} ms: at {at:?}");
        }
        assert_eq!(client.peer().unwrap().pending_calls(), 0);
    });
}
