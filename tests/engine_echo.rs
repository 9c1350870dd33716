//! Integration tests for the raw-connection engine: echo over TCP, Unix and UDP, many
//! concurrent connections, half close, close/reopen storms, bindings added and removed
//! while running, `Conn::dial`, and handler panics.
//!
//! Every test uses real sockets on 127.0.0.1, bounds every client operation with a timeout
//! and shuts its engine down at the end. Run on both backends:
//! `FIBR_BACKEND=epoll cargo test --test engine_echo` and
//! `FIBR_BACKEND=portable cargo test --test engine_echo`.

mod common;

use fibr::{Binding, Config, Conn, Engine, Handler};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use common::{connect_within, read_to_eof, wait_until, TempPath};

/// Upper bound for any single blocking client operation.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the server may take to settle (connection counts, closes).
const SETTLE: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// Echoes every byte back.
struct Echo;

impl Handler for Echo {
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        let _ = conn.send(data);
    }
}

fn start(bindings: impl IntoIterator<Item = Binding>) -> Engine {
    Engine::new(Config::default(), bindings).expect("start the engine")
}

fn tcp_addr(engine: &Engine, binding: usize) -> SocketAddr {
    let addrs = engine.binding_addrs(binding);
    assert_eq!(addrs.len(), 1, "binding {binding} addresses: {addrs:?}");
    addrs[0]
}

/// A client connection with `IO_TIMEOUT` on connect, reads and writes.
fn connect(addr: SocketAddr) -> TcpStream {
    connect_within(addr, IO_TIMEOUT)
}

fn assert_conns_drain(engine: &Engine) {
    assert!(
        wait_until(SETTLE, || engine.connections() == 0),
        "server still has {} connections open",
        engine.connections()
    );
}

/// Writes `msg`, reads back exactly as many bytes and checks they are `msg`.
fn echo_roundtrip<S: Read + Write>(s: &mut S, msg: &[u8]) {
    s.write_all(msg).expect("write");
    let mut back = vec![0u8; msg.len()];
    s.read_exact(&mut back).expect("read the echo");
    assert_eq!(
        String::from_utf8_lossy(&back),
        String::from_utf8_lossy(msg),
        "echo mismatch"
    );
}

/// Asserts the stream ends cleanly (EOF) right after `expected`.
fn expect_exactly_then_eof<S: Read>(s: &mut S, expected: &[u8]) {
    let (got, err) = read_to_eof(s);
    assert!(err.is_none(), "expected EOF, got error {err:?}");
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expected)
    );
}

// ---------------------------------------------------------------------------------------
// 1. Echo over TCP, Unix and UDP
// ---------------------------------------------------------------------------------------

#[test]
fn tcp_echo() {
    let engine = start([Binding::tcp("127.0.0.1:0", Echo)]);
    let addr = tcp_addr(&engine, 0);
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");

    let mut s = connect(addr);
    echo_roundtrip(&mut s, b"hello");
    echo_roundtrip(&mut s, b"second message");
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    echo_roundtrip(&mut s, &big);
    s.shutdown(Shutdown::Write).unwrap();
    expect_exactly_then_eof(&mut s, b"");
    drop(s);

    assert_conns_drain(&engine);
    engine.shutdown(Duration::from_secs(1));
}

#[test]
fn a_listener_made_elsewhere_is_served_and_stays_the_callers() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let engine = start([Binding::tcp_listener(listener.try_clone().unwrap(), Echo)]);
    assert_eq!(tcp_addr(&engine, 0), addr);
    let mut s = connect(addr);
    echo_roundtrip(&mut s, b"inherited");
    drop(s);
    assert_conns_drain(&engine);
    engine.shutdown(Duration::from_secs(1));
    // The engine served a duplicate: the caller's listener still takes connections.
    let _client = connect(addr);
    listener.set_nonblocking(false).unwrap();
    assert!(listener.accept().is_ok());
}

#[test]
fn unix_echo() {
    let path = TempPath::sock("engine-echo");
    let engine = start([Binding::unix(path.path(), Echo)]);
    assert!(
        engine.binding_addrs(0).is_empty(),
        "Unix sockets have no SocketAddr"
    );

    let mut s = UnixStream::connect(&path).expect("connect to the Unix socket");
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    echo_roundtrip(&mut s, b"hello over unix");
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    echo_roundtrip(&mut s, &big);
    s.shutdown(Shutdown::Write).unwrap();
    expect_exactly_then_eof(&mut s, b"");
    drop(s);

    assert_conns_drain(&engine);
    engine.shutdown(Duration::from_secs(1));
}

/// UDP echo that counts opens and closes, and closes a peer on "close".
struct UdpEcho {
    opened: Arc<AtomicUsize>,
    closed: Arc<AtomicUsize>,
}

impl Handler for UdpEcho {
    fn on_open(&self, _conn: &Conn) {
        self.opened.fetch_add(1, Ordering::SeqCst);
    }
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        let _ = conn.send(data);
        if data == b"close" {
            conn.close();
        }
    }
    fn on_close(&self, _conn: &Conn, _err: Option<io::Error>) {
        self.closed.fetch_add(1, Ordering::SeqCst);
    }
}

fn udp_client(server: SocketAddr) -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.connect(server).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

fn udp_roundtrip(s: &UdpSocket, msg: &[u8]) {
    s.send(msg).unwrap();
    let mut buf = [0u8; 2048];
    let n = s
        .recv(&mut buf)
        .unwrap_or_else(|e| panic!("no UDP reply to {:?}: {e}", String::from_utf8_lossy(msg)));
    assert_eq!(
        String::from_utf8_lossy(&buf[..n]),
        String::from_utf8_lossy(msg),
        "UDP reply mismatch"
    );
}

#[test]
fn udp_echo_one_conn_per_peer() {
    let opened = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(AtomicUsize::new(0));
    let engine = start([Binding::udp(
        "127.0.0.1:0",
        UdpEcho {
            opened: opened.clone(),
            closed: closed.clone(),
        },
    )]);
    let server = tcp_addr(&engine, 0);

    let a = udp_client(server);
    let b = udp_client(server);
    // Interleave the peers: each must get its own replies, never the other's.
    for round in 0..5 {
        udp_roundtrip(&a, format!("peer-a round {round}").as_bytes());
        udp_roundtrip(&b, format!("peer-b round {round}").as_bytes());
    }
    // Both in flight at once.
    a.send(b"a-concurrent").unwrap();
    b.send(b"b-concurrent").unwrap();
    let mut buf = [0u8; 64];
    let n = b.recv(&mut buf).expect("reply to b");
    assert_eq!(&buf[..n], b"b-concurrent");
    let n = a.recv(&mut buf).expect("reply to a");
    assert_eq!(&buf[..n], b"a-concurrent");

    assert_eq!(opened.load(Ordering::SeqCst), 2, "on_open once per peer");
    assert_eq!(engine.connections(), 2, "one logical connection per peer");

    // A peer closed by the handler comes back as a new connection.
    udp_roundtrip(&a, b"close");
    // on_close runs first, then the peer is forgotten, then it stops counting: wait for
    // the count, or the next datagram may still reach the closing connection.
    assert!(
        wait_until(SETTLE, || engine.connections() == 1),
        "the closed peer is still counted: {}",
        engine.connections()
    );
    assert_eq!(
        closed.load(Ordering::SeqCst),
        1,
        "on_close for the closed peer"
    );
    udp_roundtrip(&a, b"after close");
    assert_eq!(
        opened.load(Ordering::SeqCst),
        3,
        "a new connection for the returning peer"
    );
    udp_roundtrip(&b, b"b still here");
    assert_eq!(opened.load(Ordering::SeqCst), 3);
    assert_eq!(engine.connections(), 2);

    engine.shutdown(Duration::from_secs(1));
    assert_eq!(
        engine.connections(),
        0,
        "UDP peers still open after shutdown (their socket was deregistered first)"
    );
    assert_eq!(closed.load(Ordering::SeqCst), 3, "every peer saw on_close");
}

#[test]
fn udp_peers_idle_out_and_do_not_outlive_a_removed_binding() {
    let opened = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(AtomicUsize::new(0));
    let handler = || UdpEcho {
        opened: opened.clone(),
        closed: closed.clone(),
    };
    let config = Config::default().with_udp_peer_idle_timeout(Duration::from_millis(200));
    let engine = Engine::new(config, [Binding::udp("127.0.0.1:0", handler())]).unwrap();

    // A silent peer is closed after the idle timeout.
    let a = udp_client(tcp_addr(&engine, 0));
    udp_roundtrip(&a, b"then silence");
    assert_eq!(engine.connections(), 1);
    assert!(
        wait_until(SETTLE, || engine.connections() == 0),
        "an idle UDP peer was never closed"
    );
    assert_eq!(closed.load(Ordering::SeqCst), 1);

    // Peers of a removed UDP binding can receive nothing more: they must not stay open
    // forever (nothing sweeps them once their socket is deregistered).
    let added = engine
        .add_binding(Binding::udp("127.0.0.1:0", handler()))
        .unwrap();
    let b = udp_client(tcp_addr(&engine, added));
    udp_roundtrip(&b, b"before removal");
    assert_eq!(engine.connections(), 1);
    assert!(engine.remove_binding(added));
    assert!(
        wait_until(SETTLE, || engine.connections() == 0),
        "the peer of a removed UDP binding is still open ({} connections)",
        engine.connections()
    );
    assert_eq!(closed.load(Ordering::SeqCst), 2);
    engine.shutdown(Duration::from_secs(1));
}

// ---------------------------------------------------------------------------------------
// 2. 1000 concurrent connections, 1 MiB each, every byte checked
// ---------------------------------------------------------------------------------------

/// The stream of connection `conn` is cut in 4 KiB blocks; block `b` starts with an 8-byte
/// stamp (`conn`, `b`) and goes on with a slice of a pseudo-random table that starts at a
/// position depending on both. Every byte thus depends on the connection and the offset,
/// and filling or checking costs a memcpy/memcmp (fast even in debug builds).
const BLOCK: usize = 4096;
const TABLE_SPAN: usize = 65_521;

fn table() -> &'static [u8] {
    static T: OnceLock<Vec<u8>> = OnceLock::new();
    T.get_or_init(|| {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        (0..TABLE_SPAN + BLOCK)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    })
}

/// Fills `out` with bytes `offset..offset + out.len()` of connection `conn`'s stream.
fn fill_pattern(conn: u32, offset: usize, out: &mut [u8]) {
    let t = table();
    let mut pos = offset;
    let mut i = 0;
    while i < out.len() {
        let block = pos / BLOCK;
        let within = pos % BLOCK;
        let n = (BLOCK - within).min(out.len() - i);
        let mut stamp = [0u8; 8];
        stamp[..4].copy_from_slice(&conn.to_le_bytes());
        stamp[4..].copy_from_slice(&(block as u32).to_le_bytes());
        let start = (conn as usize * 7919 + block * 104_729) % TABLE_SPAN;
        for k in within..within + n {
            if k >= 8 {
                // The rest of this piece is one contiguous slice of the table.
                let len = within + n - k;
                out[i + k - within..i + n].copy_from_slice(&t[start + k..start + k + len]);
                break;
            }
            out[i + k - within] = stamp[k];
        }
        i += n;
        pos += n;
    }
}

#[test]
fn pattern_is_offset_and_connection_dependent() {
    let mut a = vec![0u8; 3 * BLOCK + 17];
    fill_pattern(1, 5, &mut a);
    // Filling piecewise gives the same bytes as filling at once.
    let mut b = vec![0u8; a.len()];
    let mut off = 0;
    for step in [1usize, 7, 4090, 3, 5000, 2000] {
        let end = (off + step).min(b.len());
        fill_pattern(1, 5 + off, &mut b[off..end]);
        off = end;
    }
    fill_pattern(1, 5 + off, &mut b[off..]);
    assert_eq!(a, b);
    let mut c = vec![0u8; a.len()];
    fill_pattern(2, 5, &mut c);
    assert_ne!(a, c, "another connection, other bytes");
    fill_pattern(1, 6, &mut c);
    assert_ne!(a, c, "another offset, other bytes");
}

/// How far the big-echo clients got (for a useful message if they stall).
#[derive(Default)]
struct Progress {
    /// Clients that received every byte they sent.
    all_bytes: AtomicUsize,
    /// Clients that also saw the server's EOF.
    done: AtomicUsize,
}

async fn big_echo_client(
    addr: SocketAddr,
    idx: u32,
    total: usize,
    barrier: Arc<tokio::sync::Barrier>,
    progress: Arc<Progress>,
) -> Result<(), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const CHUNK: usize = 16 * 1024;

    let stream = tokio::net::TcpStream::connect(addr).await;
    // Everyone waits here twice, connected or not: once all are connected, and again
    // until the server has accepted them all, so that all 1000 are open at once.
    barrier.wait().await;
    barrier.wait().await;
    let stream = stream.map_err(|e| format!("conn {idx}: connect: {e}"))?;
    stream.set_nodelay(true).ok();
    let (mut rd, mut wr) = stream.into_split();

    let writer = tokio::spawn(async move {
        let mut buf = vec![0u8; CHUNK];
        let mut off = 0;
        while off < total {
            let n = CHUNK.min(total - off);
            fill_pattern(idx, off, &mut buf[..n]);
            wr.write_all(&buf[..n])
                .await
                .map_err(|e| format!("conn {idx}: write at {off}: {e}"))?;
            off += n;
        }
        // Half close: the server's default on_eof closes once everything is echoed.
        wr.shutdown()
            .await
            .map_err(|e| format!("conn {idx}: shutdown: {e}"))?;
        Ok::<_, String>(wr)
    });

    let mut buf = vec![0u8; CHUNK];
    let mut expected = vec![0u8; CHUNK];
    let mut got = 0usize;
    loop {
        let n = rd
            .read(&mut buf)
            .await
            .map_err(|e| format!("conn {idx}: read at {got}: {e}"))?;
        if n == 0 {
            break;
        }
        if got + n > total {
            return Err(format!(
                "conn {idx}: {} bytes echoed, sent {total}",
                got + n
            ));
        }
        fill_pattern(idx, got, &mut expected[..n]);
        if buf[..n] != expected[..n] {
            let k = (0..n).find(|&k| buf[k] != expected[k]).unwrap();
            return Err(format!(
                "conn {idx}: byte {} is {:#04x}, expected {:#04x}",
                got + k,
                buf[k],
                expected[k]
            ));
        }
        got += n;
        if got == total {
            progress.all_bytes.fetch_add(1, Ordering::SeqCst);
        }
    }
    if got != total {
        return Err(format!("conn {idx}: EOF after {got} of {total} bytes"));
    }
    let _wr = writer
        .await
        .map_err(|e| format!("conn {idx}: writer task: {e}"))??;
    progress.done.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[test]
fn thousand_concurrent_connections_echo_one_mib_each() {
    const CONNS: usize = 1000;
    const TOTAL: usize = 1 << 20;

    let engine = start([Binding::tcp("127.0.0.1:0", Echo)]);
    let addr = tcp_addr(&engine, 0);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    let began = Instant::now();
    let peak = Arc::new(AtomicUsize::new(0));
    let progress = Arc::new(Progress::default());
    let result = rt.block_on({
        let engine = engine.clone();
        let peak = peak.clone();
        let progress = progress.clone();
        async move {
            let barrier = Arc::new(tokio::sync::Barrier::new(CONNS + 1));
            let mut tasks = Vec::with_capacity(CONNS);
            for i in 0..CONNS {
                tasks.push(tokio::spawn(big_echo_client(
                    addr,
                    i as u32,
                    TOTAL,
                    barrier.clone(),
                    progress.clone(),
                )));
            }
            // Every client is connected and none has sent yet: the server must accept
            // them all before any transfer starts.
            barrier.wait().await;
            let until = Instant::now() + SETTLE;
            while engine.connections() < CONNS && Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            peak.store(engine.connections(), Ordering::SeqCst);
            barrier.wait().await;
            let all = async {
                let mut errors = Vec::new();
                for t in tasks {
                    match t.await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => errors.push(e),
                        Err(e) => errors.push(format!("client task: {e}")),
                    }
                }
                errors
            };
            tokio::time::timeout(Duration::from_secs(20), all).await
        }
    });
    let elapsed = began.elapsed();
    eprintln!(
        "{CONNS} connections x {} KiB echoed in {elapsed:?}",
        TOTAL / 1024
    );
    let errors = result.unwrap_or_else(|_| {
        panic!(
            "the transfers did not finish within 20 s: {} of {CONNS} clients got all their \
             bytes back, {} also got EOF; the server still has {} connections",
            progress.all_bytes.load(Ordering::SeqCst),
            progress.done.load(Ordering::SeqCst),
            engine.connections()
        )
    });
    assert!(
        errors.is_empty(),
        "{} of {CONNS} clients failed; first: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    assert_eq!(
        peak.load(Ordering::SeqCst),
        CONNS,
        "all connections open at once"
    );
    assert_conns_drain(&engine);
    drop(rt);
    engine.shutdown(Duration::from_secs(1));
}

// ---------------------------------------------------------------------------------------
// 3. Half close
// ---------------------------------------------------------------------------------------

/// Writes `data` from another thread, then half-closes; returns everything read until EOF.
/// Small payloads are written with the FIN right behind them (so the server usually finds
/// data and EOF in one readiness event); large ones from a thread while reading.
fn send_half_close_and_collect(mut s: TcpStream, data: Vec<u8>) -> Vec<u8> {
    let size = data.len();
    let writer = if size <= 64 * 1024 {
        s.write_all(&data).expect("write");
        s.shutdown(Shutdown::Write).expect("shutdown(Write)");
        None
    } else {
        let mut w = s.try_clone().unwrap();
        Some(thread::spawn(move || {
            w.write_all(&data).expect("write");
            w.shutdown(Shutdown::Write).expect("shutdown(Write)");
        }))
    };
    let (got, err) = read_to_eof(&mut s);
    if let Some(w) = writer {
        w.join().unwrap();
    }
    assert!(
        err.is_none(),
        "sent {size} bytes and FIN: got {} bytes back, then no EOF but {err:?}",
        got.len()
    );
    got
}

/// Payload sizes for the half-close tests: many tiny ones, a few large ones.
fn half_close_sizes() -> impl Iterator<Item = usize> {
    (0..=16).chain([1000, 100_000, 700_000])
}

#[test]
fn half_close_default_on_eof_flushes_then_closes() {
    let engine = start([Binding::tcp("127.0.0.1:0", Echo)]);
    let addr = tcp_addr(&engine, 0);

    for size in half_close_sizes() {
        let data: Vec<u8> = (0..size).map(|i| (i * 13 % 256) as u8).collect();
        let got = send_half_close_and_collect(connect(addr), data.clone());
        assert_eq!(got.len(), data.len(), "size {size}");
        assert!(got == data, "echoed bytes differ (size {size})");
    }

    assert_conns_drain(&engine);
    engine.shutdown(Duration::from_secs(1));
}

/// Echoes, and on the peer's EOF sends a trailer and closes.
struct TrailerEcho;

impl Handler for TrailerEcho {
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        let _ = conn.send(data);
    }
    fn on_eof(&self, conn: &Conn) {
        conn.send(b"bye").expect("send the trailer after EOF");
        conn.close();
    }
}

#[test]
fn half_close_custom_on_eof_sends_trailer() {
    let engine = start([Binding::tcp("127.0.0.1:0", TrailerEcho)]);
    let addr = tcp_addr(&engine, 0);

    for size in half_close_sizes() {
        let data: Vec<u8> = (0..size).map(|i| b'a' + (i % 26) as u8).collect();
        let got = send_half_close_and_collect(connect(addr), data.clone());
        let mut want = data;
        want.extend_from_slice(b"bye");
        assert_eq!(got.len(), want.len(), "size {size}");
        assert!(got == want, "data + trailer differ (size {size})");
    }

    assert_conns_drain(&engine);
    engine.shutdown(Duration::from_secs(1));
}

/// Echoes; holds reads after the first data and hands the connection to the test, which
/// resumes them later.
struct HoldAfterFirst {
    held: Mutex<mpsc::Sender<Conn>>,
}

impl Handler for HoldAfterFirst {
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        let _ = conn.send(data);
        if !conn.reads_held() && data.starts_with(b"first") {
            conn.hold_reads();
            let _ = self.held.lock().unwrap().send(conn.clone());
        }
    }
}

#[test]
fn half_close_while_reads_are_held_still_delivers_eof() {
    let (tx, rx) = mpsc::channel();
    let engine = start([Binding::tcp(
        "127.0.0.1:0",
        HoldAfterFirst {
            held: Mutex::new(tx),
        },
    )]);
    let addr = tcp_addr(&engine, 0);

    let mut s = connect(addr);
    echo_roundtrip(&mut s, b"first");
    let conn = rx.recv_timeout(SETTLE).expect("the handler held reads");
    assert!(conn.reads_held());
    // The rest and the FIN arrive while reads are held; the poller reports them now.
    s.write_all(b"-second").unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    thread::sleep(Duration::from_millis(100));
    conn.resume_reads();
    let (got, err) = read_to_eof(&mut s);
    assert_eq!(String::from_utf8_lossy(&got), "-second");
    assert!(
        err.is_none(),
        "data held back then resumed: no EOF after it but {err:?}"
    );
    assert_conns_drain(&engine);
    engine.shutdown(Duration::from_secs(1));
}

// ---------------------------------------------------------------------------------------
// 4. Close/reopen storm: no cross-talk
// ---------------------------------------------------------------------------------------

/// Echoes; closes itself after data ending in `!`. Records every byte a connection got and
/// checks at close that they all carry one id (server-side cross-talk detection).
struct StormEcho {
    opened: Arc<AtomicUsize>,
    closed: Arc<AtomicUsize>,
    violations: Arc<Mutex<Vec<String>>>,
}

impl Handler for StormEcho {
    fn on_open(&self, conn: &Conn) {
        self.opened.fetch_add(1, Ordering::SeqCst);
        conn.set_context(Vec::<u8>::new());
    }
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        conn.with_context::<Vec<u8>, _>(|seen| match seen {
            Some(v) => v.extend_from_slice(data),
            None => self
                .violations
                .lock()
                .unwrap()
                .push("no context in on_data".into()),
        });
        let _ = conn.send(data);
        if data.last() == Some(&b'!') {
            conn.close();
        }
    }
    fn on_close(&self, conn: &Conn, _err: Option<io::Error>) {
        self.closed.fetch_add(1, Ordering::SeqCst);
        let seen = conn.take_context::<Vec<u8>>().unwrap_or_default();
        let text = String::from_utf8_lossy(&seen).into_owned();
        let ids: Vec<&str> = text
            .split(';')
            .filter(|t| !t.is_empty())
            .map(|t| t.split(':').next().unwrap())
            .collect();
        if ids.windows(2).any(|w| w[0] != w[1]) {
            self.violations
                .lock()
                .unwrap()
                .push(format!("one connection got several ids: {text:?}"));
        }
    }
}

#[test]
fn close_reopen_storm_has_no_cross_talk() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 500;

    let opened = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(AtomicUsize::new(0));
    let violations = Arc::new(Mutex::new(Vec::new()));
    let engine = start([Binding::tcp(
        "127.0.0.1:0",
        StormEcho {
            opened: opened.clone(),
            closed: closed.clone(),
            violations: violations.clone(),
        },
    )]);
    let addr = tcp_addr(&engine, 0);

    let began = Instant::now();
    let clients: Vec<_> = (0..THREADS)
        .map(|t| {
            thread::spawn(move || {
                for k in 0..PER_THREAD {
                    let id = t * PER_THREAD + k;
                    // Every third connection is closed by the server, from on_data.
                    let server_closes = id % 3 == 0;
                    let first = format!("conn{id:05}:a;");
                    // `!` is the last byte, so the server closes after reading it all.
                    let second = if server_closes {
                        format!("conn{id:05}:b{}!", "x".repeat(id % 50))
                    } else {
                        format!("conn{id:05}:b{};", "y".repeat(id % 50))
                    };
                    let want = format!("{first}{second}");
                    let mut s = connect(addr);
                    s.write_all(first.as_bytes()).unwrap();
                    s.write_all(second.as_bytes()).unwrap();
                    if server_closes {
                        expect_exactly_then_eof(&mut s, want.as_bytes());
                    } else {
                        let mut back = vec![0u8; want.len()];
                        s.read_exact(&mut back)
                            .unwrap_or_else(|e| panic!("conn {id}: read echo: {e}"));
                        assert_eq!(
                            String::from_utf8_lossy(&back),
                            want,
                            "conn {id} got someone else's bytes"
                        );
                        if id % 2 == 0 {
                            // Half close: nothing more may arrive before EOF.
                            s.shutdown(Shutdown::Write).unwrap();
                            expect_exactly_then_eof(&mut s, b"");
                        }
                        // Otherwise just drop the socket: the server sees EOF.
                    }
                }
            })
        })
        .collect();
    for c in clients {
        c.join().expect("a storm client failed");
    }
    let total = THREADS * PER_THREAD;
    eprintln!("{total} short connections in {:?}", began.elapsed());

    assert!(
        wait_until(SETTLE, || closed.load(Ordering::SeqCst) == total),
        "on_close ran {} times for {total} connections",
        closed.load(Ordering::SeqCst)
    );
    assert_eq!(opened.load(Ordering::SeqCst), total);
    assert_conns_drain(&engine);
    let v = violations.lock().unwrap();
    assert!(
        v.is_empty(),
        "server-side cross-talk: {:?}",
        &v[..v.len().min(5)]
    );
    drop(v);
    engine.shutdown(Duration::from_secs(1));
}

// ---------------------------------------------------------------------------------------
// 5. Bindings added and removed while running; several addresses per binding
// ---------------------------------------------------------------------------------------

/// Waits until connecting to `addr` is refused (the listener is gone).
fn assert_becomes_refused(addr: SocketAddr) {
    let refused = wait_until(SETTLE, || {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => true,
            // Accepted into the backlog just before the listener closed: reset. Try again.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                ) =>
            {
                false
            }
            Err(e) => panic!("connect to {addr}: unexpected error {e}"),
            Ok(_) => false,
        }
    });
    assert!(
        refused,
        "{addr} still accepts connections after remove_binding"
    );
}

#[test]
fn add_and_remove_bindings_while_running() {
    let engine = start([Binding::tcp("127.0.0.1:0", Echo).and_tcp("127.0.0.1:0")]);
    let two = engine.binding_addrs(0);
    assert_eq!(two.len(), 2, "two addresses in binding 0: {two:?}");
    assert_ne!(two[0], two[1]);

    // Both addresses of the one binding serve the handler.
    let mut on_first = connect(two[0]);
    let mut on_second = connect(two[1]);
    echo_roundtrip(&mut on_first, b"first address");
    echo_roundtrip(&mut on_second, b"second address");

    // Add a binding while running.
    let added = engine
        .add_binding(Binding::tcp("127.0.0.1:0", Echo))
        .expect("add_binding");
    assert_eq!(added, 1);
    let third = tcp_addr(&engine, added);
    let mut on_third = connect(third);
    echo_roundtrip(&mut on_third, b"added binding");

    // Remove the added one: new connections are refused, the existing one goes on.
    assert!(engine.remove_binding(added));
    assert!(!engine.remove_binding(added), "second removal is a no-op");
    assert!(engine.binding_addrs(added).is_empty());
    assert_becomes_refused(third);
    echo_roundtrip(&mut on_third, b"still working after removal");

    // Remove the two-address binding: both addresses stop accepting.
    assert!(engine.remove_binding(0));
    assert_becomes_refused(two[0]);
    assert_becomes_refused(two[1]);
    echo_roundtrip(&mut on_first, b"first, after removal");
    echo_roundtrip(&mut on_second, b"second, after removal");

    // A binding added after removals gets a new index and works.
    let again = engine
        .add_binding(Binding::tcp("127.0.0.1:0", Echo))
        .expect("add_binding again");
    assert_eq!(again, 2);
    let mut s = connect(tcp_addr(&engine, again));
    echo_roundtrip(&mut s, b"new binding after removals");
    assert_eq!(engine.connections(), 4);

    // Unknown indexes.
    assert!(!engine.remove_binding(99));
    assert!(engine.binding_addrs(99).is_empty());

    drop((on_first, on_second, on_third, s));
    assert_conns_drain(&engine);
    engine.shutdown(Duration::from_secs(1));
}

#[test]
fn add_binding_fails_for_an_address_in_use() {
    let engine = start([Binding::tcp("127.0.0.1:0", Echo)]);
    let taken = tcp_addr(&engine, 0);
    let err = engine
        .add_binding(Binding::tcp("127.0.0.1:0", Echo).and_tcp(taken))
        .expect_err("binding an address already listened on");
    assert_eq!(err.kind(), io::ErrorKind::AddrInUse, "{err}");
    // The failed binding left the first one alone.
    let mut s = connect(taken);
    echo_roundtrip(&mut s, b"still serving");
    drop(s);
    assert_conns_drain(&engine);
    engine.shutdown(Duration::from_secs(1));
}

// ---------------------------------------------------------------------------------------
// 6. Conn::dial
// ---------------------------------------------------------------------------------------

#[derive(Debug)]
enum DialEvent {
    Open,
    Data(Vec<u8>),
    Eof,
    Close(Option<io::ErrorKind>),
}

struct Dialer {
    events: Mutex<mpsc::Sender<DialEvent>>,
}

impl Dialer {
    fn new() -> (Dialer, mpsc::Receiver<DialEvent>) {
        let (tx, rx) = mpsc::channel();
        (
            Dialer {
                events: Mutex::new(tx),
            },
            rx,
        )
    }
    fn emit(&self, ev: DialEvent) {
        let _ = self.events.lock().unwrap().send(ev);
    }
}

impl Handler for Dialer {
    fn on_open(&self, conn: &Conn) {
        self.emit(DialEvent::Open);
        conn.send(b"hi").expect("send from on_open");
    }
    fn on_data(&self, _conn: &Conn, data: &[u8]) {
        self.emit(DialEvent::Data(data.to_vec()));
    }
    fn on_eof(&self, conn: &Conn) {
        self.emit(DialEvent::Eof);
        conn.close();
    }
    fn on_close(&self, _conn: &Conn, err: Option<io::Error>) {
        self.emit(DialEvent::Close(err.map(|e| e.kind())));
    }
}

fn accept_within(listener: &TcpListener, within: Duration) -> TcpStream {
    listener.set_nonblocking(true).unwrap();
    let until = Instant::now() + within;
    loop {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
                s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
                return s;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                assert!(
                    Instant::now() < until,
                    "the dial never reached the listener"
                );
                thread::sleep(Duration::from_millis(2));
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}

fn next_event(rx: &mpsc::Receiver<DialEvent>) -> DialEvent {
    rx.recv_timeout(SETTLE)
        .expect("no handler callback within the deadline")
}

#[test]
fn dial_connects_and_sends_from_on_open() {
    let engine = start([]);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();

    let (dialer, rx) = Dialer::new();
    let conn = Conn::dial(&engine, addr, dialer).expect("dial");
    assert_eq!(conn.peer_addr(), Some(addr));
    let mut peer = accept_within(&listener, SETTLE);

    let mut hi = [0u8; 2];
    peer.read_exact(&mut hi).expect("read what on_open sent");
    assert_eq!(&hi, b"hi");
    assert!(matches!(next_event(&rx), DialEvent::Open));

    peer.write_all(b"yo").unwrap();
    let mut got = Vec::new();
    while got.len() < 2 {
        match next_event(&rx) {
            DialEvent::Data(d) => got.extend_from_slice(&d),
            other => panic!("expected data, got {other:?}"),
        }
    }
    assert_eq!(&got, b"yo");

    // Sending from outside a callback reaches the peer too.
    conn.send(b"outside").unwrap();
    let mut buf = [0u8; 7];
    peer.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"outside");

    // The peer closes: on_eof, then a clean on_close.
    drop(peer);
    assert!(matches!(next_event(&rx), DialEvent::Eof));
    match next_event(&rx) {
        DialEvent::Close(None) => {}
        other => panic!("expected a clean close, got {other:?}"),
    }
    assert!(!conn.is_open());
    assert_conns_drain(&engine);
    engine.shutdown(Duration::from_secs(1));
}

#[test]
fn dial_to_a_closed_port_reports_the_error_and_never_opens() {
    let engine = start([]);
    let closed_addr = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };

    let (dialer, rx) = Dialer::new();
    let conn = Conn::dial(&engine, closed_addr, dialer).expect("dial starts");
    match next_event(&rx) {
        DialEvent::Close(Some(kind)) => {
            assert_eq!(kind, io::ErrorKind::ConnectionRefused, "dial error kind")
        }
        other => panic!("expected on_close with an error first, got {other:?}"),
    }
    // Nothing after on_close: in particular no on_open.
    thread::sleep(Duration::from_millis(100));
    let late: Vec<DialEvent> = rx.try_iter().collect();
    assert!(late.is_empty(), "callbacks after on_close: {late:?}");
    assert!(!conn.is_open());
    assert!(conn.send(b"x").is_err(), "send on a failed dial");
    assert_conns_drain(&engine);
    engine.shutdown(Duration::from_secs(1));
}

// ---------------------------------------------------------------------------------------
// 7. A handler panic closes only its connection
// ---------------------------------------------------------------------------------------

struct Panicky {
    closed_with_error: Arc<AtomicUsize>,
}

impl Handler for Panicky {
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        if data.starts_with(b"panic") {
            panic!("test handler panics on purpose");
        }
        let _ = conn.send(data);
    }
    fn on_close(&self, _conn: &Conn, err: Option<io::Error>) {
        if err.is_some() {
            self.closed_with_error.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[test]
fn handler_panic_closes_only_that_connection() {
    let closed_with_error = Arc::new(AtomicUsize::new(0));
    let engine = start([Binding::tcp(
        "127.0.0.1:0",
        Panicky {
            closed_with_error: closed_with_error.clone(),
        },
    )]);
    let addr = tcp_addr(&engine, 0);

    let mut healthy = connect(addr);
    echo_roundtrip(&mut healthy, b"before");

    for round in 0..3 {
        let mut doomed = connect(addr);
        echo_roundtrip(&mut doomed, b"fine so far");
        doomed.write_all(b"panic now").unwrap();
        let (got, err) = read_to_eof(&mut doomed);
        assert!(
            got.is_empty(),
            "round {round}: bytes after the panic: {got:?}"
        );
        if let Some(e) = err {
            assert!(
                matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                ),
                "round {round}: expected EOF or reset, got {e}"
            );
        }
        // The engine goes on serving the others, old and new.
        echo_roundtrip(&mut healthy, format!("after panic {round}").as_bytes());
        let mut fresh = connect(addr);
        echo_roundtrip(&mut fresh, b"a new connection");
    }

    assert!(
        wait_until(SETTLE, || closed_with_error.load(Ordering::SeqCst) == 3),
        "on_close(Some(err)) for each panicked connection: {}",
        closed_with_error.load(Ordering::SeqCst)
    );
    assert!(
        wait_until(SETTLE, || engine.connections() == 1),
        "only the healthy connection is left: {}",
        engine.connections()
    );
    echo_roundtrip(&mut healthy, b"last");
    drop(healthy);
    assert_conns_drain(&engine);
    assert_eq!(closed_with_error.load(Ordering::SeqCst), 3);
    engine.shutdown(Duration::from_secs(1));
}

/// `Config::reuse_port`: two engines bind the same port, and both serve connections.
#[test]
fn reuse_port_lets_two_engines_share_a_port() {
    let cfg = || Config::default().with_reuse_port(true);
    let first = Engine::new(cfg(), [Binding::tcp("127.0.0.1:0", Echo)]).unwrap();
    let addr = first.binding_addrs(0)[0];
    let second =
        Engine::new(cfg(), [Binding::tcp(addr, Echo)]).expect("second bind on the same port");
    // Without the option the same bind fails.
    assert!(Engine::new(Config::default(), [Binding::tcp(addr, Echo)]).is_err());
    for i in 0..20u8 {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(&[i]).unwrap();
        let mut b = [0u8; 1];
        s.read_exact(&mut b).unwrap();
        assert_eq!(b[0], i);
    }
    first.shutdown(Duration::from_millis(200));
    // The port still serves through the second engine.
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"x").unwrap();
    let mut b = [0u8; 1];
    s.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"x");
    second.shutdown(Duration::from_millis(200));
}
