//! Flow control and lifecycle of the raw-connection engine: the write watermarks and the
//! global pending budget with slow readers, `hold_reads`/`resume_reads`, sends and closes
//! from outside callbacks, `send_file`, blocked workers being replaced, and shutdown.
//!
//! Every test runs real sockets on 127.0.0.1 with timeouts on the client side. They run one
//! at a time (they measure the process's resident set and worker thread counts).

mod common;

use fibr::{Binding, Config, Conn, Engine, Handler};
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use common::{connect_within, is_timeout, rss, TempPath};

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

/// Bound on every blocking client socket call.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// The tests measure process RSS and worker counts, so they must not overlap.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------------------------------
// Byte patterns: a stream position maps to a byte through a table whose period (a prime)
// does not line up with any buffer size, so a lost, repeated or reordered chunk shows.

const PERIOD: usize = 65_521;
const MAX_SLICE: usize = 128 * KIB;

fn table() -> &'static [u8] {
    static TABLE: OnceLock<Vec<u8>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..PERIOD + MAX_SLICE)
            .map(|i| {
                let i = i % PERIOD;
                (i.wrapping_mul(31) ^ (i >> 7)) as u8
            })
            .collect()
    })
}

/// The pattern bytes at stream positions `pos..pos + len` (len at most `MAX_SLICE`).
fn pattern(pos: usize, len: usize) -> &'static [u8] {
    assert!(len <= MAX_SLICE);
    let s = pos % PERIOD;
    &table()[s..s + len]
}

/// The pattern at `pos..pos + len` as an owned vector (any length).
fn pattern_vec(pos: usize, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        let n = (len - v.len()).min(MAX_SLICE);
        v.extend_from_slice(pattern(pos + v.len(), n));
    }
    v
}

/// Panics (without printing megabytes) unless `data` is the pattern from `pos`.
fn check_pattern(what: &str, data: &[u8], pos: usize) {
    for (k, chunk) in data.chunks(MAX_SLICE).enumerate() {
        let at = pos + k * MAX_SLICE;
        if chunk != pattern(at, chunk.len()) {
            let i = chunk
                .iter()
                .zip(pattern(at, chunk.len()))
                .position(|(a, b)| a != b)
                .unwrap();
            panic!(
                "{what}: wrong byte at stream position {} (got {}, expected {})",
                at + i,
                chunk[i],
                pattern(at + i, 1)[0]
            );
        }
    }
}

fn first_difference(got: &[u8], want: &[u8]) -> Option<usize> {
    got.iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .or((got.len() != want.len()).then_some(got.len().min(want.len())))
}

// ---------------------------------------------------------------------------------------
// Helpers.

/// An engine with one TCP binding on an ephemeral port; shut down when dropped, so a failed
/// test does not leave its threads running into the next one.
struct Server {
    engine: Engine,
    addr: SocketAddr,
}

impl Server {
    fn start(config: Config, handler: impl Handler) -> Server {
        let engine =
            Engine::new(config, [Binding::tcp("127.0.0.1:0", handler)]).expect("start the engine");
        let addr = engine.binding_addrs(0)[0];
        Server { engine, addr }
    }

    fn connect(&self) -> TcpStream {
        connect_within(self.addr, IO_TIMEOUT)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.engine.shutdown(Duration::ZERO);
    }
}

/// 64 KiB / 16 KiB watermarks and 4 KiB reads, so one read's output is small.
fn flow_config() -> Config {
    Config::default()
        .with_read_buffer_size(4096)
        .with_write_high_watermark(64 * KIB)
        .with_write_low_watermark(16 * KIB)
}

/// Polls `done` until it holds; panics if it does not within `timeout`.
fn wait_until(what: &str, timeout: Duration, done: impl FnMut() -> bool) {
    assert!(
        common::wait_until(timeout, done),
        "timed out waiting for {what}"
    );
}

/// Reads until EOF; panics on a timeout or error.
fn read_to_eof(s: &mut TcpStream, what: &str) -> Vec<u8> {
    match common::read_to_eof(s) {
        (out, None) => out,
        (out, Some(e)) => panic!("{what}: read failed after {} bytes: {e}", out.len()),
    }
}

/// Reads exactly `len` bytes, checking them against the pattern as they come.
fn read_pattern_exact(s: &mut TcpStream, len: usize, what: &str) {
    let mut buf = vec![0u8; 64 * KIB];
    let mut pos = 0;
    while pos < len {
        let want = (len - pos).min(buf.len());
        match s.read(&mut buf[..want]) {
            Ok(0) => panic!("{what}: EOF after {pos} of {len} bytes"),
            Ok(n) => {
                check_pattern(what, &buf[..n], pos);
                pos += n;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => panic!("{what}: read failed after {pos} of {len} bytes: {e}"),
        }
    }
}

/// Expects EOF next (nothing more, and no timeout): the server closed after flushing.
fn expect_eof(s: &mut TcpStream, what: &str) {
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Ok(0) => {}
        Ok(n) => panic!("{what}: {n} bytes more than expected"),
        Err(e) if is_timeout(&e) => panic!(
            "{what}: no EOF within 3 s: the server never closed, so it never saw the \
             client's half close (on_eof not called)"
        ),
        Err(e) => panic!("{what}: expected EOF, got {e}"),
    }
}

/// Writes the pattern from `*pos` up to `total`, in 64 KiB writes. Returns the first error
/// (a timeout means the peer stopped taking data).
fn pump(s: &mut TcpStream, pos: &mut usize, total: usize) -> io::Result<()> {
    while *pos < total {
        let n = (total - *pos).min(64 * KIB);
        match s.write(pattern(*pos, n)) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(k) => *pos += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The firehose: for every byte it reads, it sends AMP bytes of the pattern (its output is
// a stream of its own). It checks its input against the pattern, and records what it sees
// of its output queue.

const AMP: usize = 2;

#[derive(Default)]
struct FlowStats {
    /// Largest `queued_bytes()` seen right after an `on_data` sent its output.
    max_queued: AtomicUsize,
    /// Largest output of one `on_data` call.
    max_call_output: AtomicUsize,
    drained: AtomicUsize,
    /// Largest `queued_bytes()` seen in `on_drained`.
    queued_at_drained: AtomicUsize,
    input_errors: AtomicUsize,
    send_errors: AtomicUsize,
    closed: AtomicUsize,
    conns: Mutex<Vec<Conn>>,
}

struct Pos {
    input: usize,
    output: usize,
}

struct Firehose(Arc<FlowStats>);

impl Handler for Firehose {
    fn on_open(&self, conn: &Conn) {
        conn.set_context(Pos {
            input: 0,
            output: 0,
        });
        self.0.conns.lock().unwrap().push(conn.clone());
    }

    fn on_data(&self, conn: &Conn, data: &[u8]) {
        let st = &self.0;
        let (input, output) = conn.with_context(|p: Option<&mut Pos>| {
            let p = p.expect("the connection's context");
            let at = (p.input, p.output);
            p.input += data.len();
            p.output += AMP * data.len();
            at
        });
        if data != pattern(input, data.len()) {
            st.input_errors.fetch_add(1, Ordering::Relaxed);
        }
        let out = pattern(output, AMP * data.len());
        if conn.send(out).is_err() {
            st.send_errors.fetch_add(1, Ordering::Relaxed);
        }
        let q = conn.queued_bytes();
        st.max_queued.fetch_max(q, Ordering::Relaxed);
        st.max_call_output.fetch_max(out.len(), Ordering::Relaxed);
    }

    fn on_drained(&self, conn: &Conn) {
        self.0.drained.fetch_add(1, Ordering::Relaxed);
        self.0
            .queued_at_drained
            .fetch_max(conn.queued_bytes(), Ordering::Relaxed);
    }

    fn on_close(&self, _conn: &Conn, _err: Option<io::Error>) {
        self.0.closed.fetch_add(1, Ordering::Relaxed);
    }
}

// ---------------------------------------------------------------------------------------
// 1. A slow reader: output stays bounded, memory too, and everything arrives once it reads.

#[test]
fn slow_reader_output_stays_bounded_then_everything_arrives() {
    let _serial = serial();
    const TOTAL: usize = 50 * MIB;
    let cfg = flow_config();
    let (high, low) = (cfg.write_high_watermark, cfg.write_low_watermark);
    let stats = Arc::new(FlowStats::default());
    let server = Server::start(cfg, Firehose(stats.clone()));
    let mut client = server.connect();
    wait_until("on_open", IO_TIMEOUT, || {
        !stats.conns.lock().unwrap().is_empty()
    });
    let conn = stats.conns.lock().unwrap()[0].clone();
    let _ = table();
    let rss0 = rss();

    // The writer sends the 50 MB of requests and does not read. When a write stalls it
    // reports how far it got, waits for the go-ahead, then sends the rest.
    let mut writer = client.try_clone().unwrap();
    writer
        .set_write_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let (stalled_tx, stalled_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let writer = thread::spawn(move || {
        let mut pos = 0;
        let first = pump(&mut writer, &mut pos, TOTAL);
        let stalled = match &first {
            Ok(()) => false,
            Err(e) if is_timeout(e) => true,
            Err(e) => panic!("writer failed after {pos} bytes: {e}"),
        };
        stalled_tx.send((pos, stalled)).unwrap();
        if go_rx.recv().is_err() {
            return pos;
        }
        writer.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        pump(&mut writer, &mut pos, TOTAL).expect("writing the rest of the requests");
        writer.shutdown(Shutdown::Write).unwrap();
        pos
    });

    // Phase 1: watch RSS and the queue until the writer stalls, and for a while after.
    let mut max_rss = rss0;
    let mut max_queue_seen = 0;
    let mut sample = || {
        max_rss = max_rss.max(rss());
        max_queue_seen = max_queue_seen.max(conn.queued_bytes());
    };
    let end = Instant::now() + Duration::from_secs(15);
    let (sent, stalled) = loop {
        sample();
        match stalled_rx.recv_timeout(Duration::from_millis(5)) {
            Ok(v) => break v,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                assert!(
                    Instant::now() < end,
                    "the writer neither stalled nor finished"
                )
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the writer died"),
        }
    };
    for _ in 0..40 {
        sample();
        thread::sleep(Duration::from_millis(10));
    }
    let per_call = stats.max_call_output.load(Ordering::Relaxed);
    let bound = high + per_call;
    let max_queued = stats.max_queued.load(Ordering::Relaxed);
    let grown = max_rss.saturating_sub(rss0);
    eprintln!(
        "slow reader: client got {sent} bytes in before stalling; max queued {max_queued} \
         (seen from outside {max_queue_seen}), bound {bound}; RSS grew {} KiB",
        grown / KIB
    );
    assert!(
        stalled,
        "the client wrote all {TOTAL} bytes without reading: the server never stopped reading"
    );
    assert!(
        max_queued <= bound,
        "queued output reached {max_queued} bytes in on_data, more than the high watermark \
         {high} + one read's output {per_call}"
    );
    assert!(
        max_queue_seen <= bound,
        "queued output seen from outside reached {max_queue_seen} > {bound}"
    );
    assert!(
        grown <= 8 * MIB,
        "RSS grew by {} KiB while the client sent without reading",
        grown / KIB
    );
    assert!(
        conn.queued_bytes() > 0,
        "a stalled reader should leave output queued"
    );

    // Phase 2: the client reads; the server resumes, takes the rest, and the client gets
    // AMP bytes for every byte, in order, then EOF (the default on_eof closes after flushing).
    go_tx.send(()).unwrap();
    read_pattern_exact(&mut client, AMP * TOTAL, "slow reader's response");
    let sent = writer.join().expect("the writer thread");
    assert_eq!(sent, TOTAL);
    assert_eq!(
        stats.input_errors.load(Ordering::Relaxed),
        0,
        "input out of order"
    );
    assert_eq!(stats.send_errors.load(Ordering::Relaxed), 0);
    let max_queued = stats.max_queued.load(Ordering::Relaxed);
    assert!(
        max_queued <= bound,
        "queued output reached {max_queued} > {bound} after reads resumed"
    );
    assert!(
        stats.drained.load(Ordering::Relaxed) >= 1,
        "on_drained was never called after the queue went past the high watermark"
    );
    let at_drained = stats.queued_at_drained.load(Ordering::Relaxed);
    assert!(
        at_drained <= low,
        "on_drained ran with {at_drained} bytes queued, above the low watermark {low}"
    );
    expect_eof(&mut client, "slow reader's response");
    wait_until("on_close", IO_TIMEOUT, || {
        stats.closed.load(Ordering::Relaxed) == 1
    });
    drop(conn);
    stats.conns.lock().unwrap().clear();
    server.engine.shutdown(Duration::from_secs(1));
}

// ---------------------------------------------------------------------------------------
// 2. hold_reads / resume_reads.

#[derive(Default)]
struct HoldState {
    got: Mutex<Vec<u8>>,
    calls: AtomicUsize,
    holds: AtomicUsize,
    eofs: AtomicUsize,
    hold_next: AtomicBool,
    conn: Mutex<Option<Conn>>,
}

struct Holder(Arc<HoldState>);

impl Handler for Holder {
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        let st = &self.0;
        st.got.lock().unwrap().extend_from_slice(data);
        st.calls.fetch_add(1, Ordering::SeqCst);
        if st.hold_next.swap(false, Ordering::SeqCst) {
            conn.hold_reads();
            *st.conn.lock().unwrap() = Some(conn.clone());
            st.holds.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn on_eof(&self, conn: &Conn) {
        self.0.eofs.fetch_add(1, Ordering::SeqCst);
        conn.close();
    }
}

#[test]
fn hold_reads_stops_delivery_until_resumed_from_another_thread() {
    let _serial = serial();
    const TOTAL: usize = 512 * KIB;
    let st = Arc::new(HoldState::default());
    st.hold_next.store(true, Ordering::SeqCst);
    let server = Server::start(flow_config(), Holder(st.clone()));
    let client = server.connect();
    let mut w = client.try_clone().unwrap();
    let writer = thread::spawn(move || {
        w.write_all(&pattern_vec(0, TOTAL))?;
        w.flush()
    });

    // The first on_data holds reads: nothing more arrives, however much is waiting.
    wait_until("the first hold", IO_TIMEOUT, || {
        st.holds.load(Ordering::SeqCst) == 1
    });
    let conn = st.conn.lock().unwrap().clone().unwrap();
    assert!(conn.reads_held());
    let len1 = st.got.lock().unwrap().len();
    assert!(len1 > 0 && len1 <= 4096, "first read was {len1} bytes");
    thread::sleep(Duration::from_millis(300));
    assert_eq!(
        st.calls.load(Ordering::SeqCst),
        1,
        "on_data was called while reads were held"
    );
    assert_eq!(st.got.lock().unwrap().len(), len1);

    // Resume from another thread; the next on_data holds again.
    st.hold_next.store(true, Ordering::SeqCst);
    let c = conn.clone();
    thread::spawn(move || c.resume_reads()).join().unwrap();
    wait_until("the second hold", IO_TIMEOUT, || {
        st.holds.load(Ordering::SeqCst) == 2
    });
    assert!(conn.reads_held());
    let (calls2, len2) = (
        st.calls.load(Ordering::SeqCst),
        st.got.lock().unwrap().len(),
    );
    assert_eq!(calls2, 2);
    assert!(len2 > len1);
    thread::sleep(Duration::from_millis(200));
    assert_eq!(
        st.calls.load(Ordering::SeqCst),
        calls2,
        "delivered while held again"
    );
    assert_eq!(st.got.lock().unwrap().len(), len2);

    // Resume for good: the held data arrives, all of it, in order.
    let c = conn.clone();
    thread::spawn(move || c.resume_reads()).join().unwrap();
    assert!(!conn.reads_held());
    wait_until("all the held data", IO_TIMEOUT, || {
        st.got.lock().unwrap().len() >= TOTAL
    });
    writer.join().unwrap().expect("the writer");
    let got = std::mem::take(&mut *st.got.lock().unwrap());
    assert_eq!(got.len(), TOTAL);
    check_pattern("held data", &got, 0);
    drop(client);
    *st.conn.lock().unwrap() = None;
    server.engine.shutdown(Duration::from_secs(1));
}

#[test]
fn eof_that_arrives_while_reads_are_held_is_delivered_on_resume() {
    let _serial = serial();
    const TAIL: usize = 10_000;
    let st = Arc::new(HoldState::default());
    st.hold_next.store(true, Ordering::SeqCst);
    let server = Server::start(flow_config(), Holder(st.clone()));
    let mut client = server.connect();
    client.write_all(pattern(0, 1)).unwrap();
    wait_until("the hold", IO_TIMEOUT, || {
        st.holds.load(Ordering::SeqCst) == 1
    });
    let conn = st.conn.lock().unwrap().clone().unwrap();

    // Data and then the FIN arrive while reads are held: neither is delivered yet.
    client.write_all(pattern(1, TAIL)).unwrap();
    client.shutdown(Shutdown::Write).unwrap();
    thread::sleep(Duration::from_millis(200));
    assert_eq!(st.calls.load(Ordering::SeqCst), 1, "on_data while held");
    assert_eq!(st.eofs.load(Ordering::SeqCst), 0, "on_eof while held");
    assert!(conn.is_open());

    // Resumed: the data, then on_eof (whose close the client sees as EOF).
    let c = conn.clone();
    thread::spawn(move || c.resume_reads()).join().unwrap();
    wait_until("the held data", IO_TIMEOUT, || {
        st.got.lock().unwrap().len() == 1 + TAIL
    });
    check_pattern("held data", &st.got.lock().unwrap(), 0);
    expect_eof(&mut client, "held connection");
    assert_eq!(st.eofs.load(Ordering::SeqCst), 1, "on_eof calls");
    *st.conn.lock().unwrap() = None;
    server.engine.shutdown(Duration::from_secs(1));
}

// ---------------------------------------------------------------------------------------
// 3. Conn::send and Conn::close from outside the callbacks.

#[derive(Default)]
struct OutsideState {
    conn: Mutex<Option<Conn>>,
    closes: Mutex<Vec<Option<io::ErrorKind>>>,
}

struct Outside(Arc<OutsideState>);

impl Handler for Outside {
    fn on_open(&self, conn: &Conn) {
        *self.0.conn.lock().unwrap() = Some(conn.clone());
    }
    fn on_data(&self, _conn: &Conn, _data: &[u8]) {}
    fn on_close(&self, _conn: &Conn, err: Option<io::Error>) {
        self.0.closes.lock().unwrap().push(err.map(|e| e.kind()));
    }
}

#[test]
fn send_and_close_from_another_thread() {
    let _serial = serial();
    let st = Arc::new(OutsideState::default());
    let server = Server::start(flow_config(), Outside(st.clone()));
    let mut client = server.connect();
    wait_until("on_open", IO_TIMEOUT, || st.conn.lock().unwrap().is_some());
    let conn = st.conn.lock().unwrap().clone().unwrap();

    // A send from another thread, with nothing else happening, goes out promptly.
    let t0 = Instant::now();
    let c = conn.clone();
    thread::spawn(move || c.send(b"hello\n"))
        .join()
        .unwrap()
        .unwrap();
    let mut hello = [0u8; 6];
    client.read_exact(&mut hello).expect("read the hello");
    assert_eq!(&hello, b"hello\n");
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "an outside send took {:?} to arrive",
        t0.elapsed()
    );

    // Many sends and a big one, then a close, all from another thread while the client is
    // not reading: the close must wait for everything sent before it.
    const BIG: usize = 4 * MIB;
    let mut expected = Vec::new();
    for i in 0..2000 {
        expected.extend_from_slice(format!("line {i}\n").as_bytes());
    }
    expected.extend_from_slice(&pattern_vec(7, BIG));
    expected.extend_from_slice(b"LAST\n");
    let c = conn.clone();
    let sender = thread::spawn(move || {
        for i in 0..2000 {
            c.send(format!("line {i}\n").as_bytes())?;
        }
        c.send(&pattern_vec(7, BIG))?;
        c.send(b"LAST\n")?;
        c.close();
        let after = c.send(b"too late");
        io::Result::Ok((after.is_err(), c.queued_bytes()))
    });
    let (refused, queued_at_close) = sender.join().unwrap().expect("outside sends");
    assert!(refused, "send after close was accepted");
    eprintln!("outside close: {queued_at_close} bytes still queued right after close()");
    let got = read_to_eof(&mut client, "outside sends");
    if let Some(i) = first_difference(&got, &expected) {
        panic!(
            "outside sends: got {} bytes, expected {}; first difference at {i}",
            got.len(),
            expected.len()
        );
    }
    wait_until("on_close", IO_TIMEOUT, || {
        !st.closes.lock().unwrap().is_empty()
    });
    assert_eq!(*st.closes.lock().unwrap(), vec![None], "on_close calls");
    assert!(!conn.is_open());
    wait_until("no connections", IO_TIMEOUT, || {
        server.engine.connections() == 0
    });
    *st.conn.lock().unwrap() = None;
    server.engine.shutdown(Duration::from_secs(1));
}

/// Counts `on_drained` and, while `park` is set, keeps the connection's task inside it: no
/// round of the connection can run meanwhile, and every send is outside one.
#[derive(Default)]
struct DrainState {
    conn: Mutex<Option<Conn>>,
    drained: AtomicUsize,
    /// Largest `queued_bytes()` seen in `on_drained`.
    queued_at_drained: AtomicUsize,
    park: Mutex<bool>,
    unparked: std::sync::Condvar,
}

struct Drainer(Arc<DrainState>);

impl Handler for Drainer {
    fn on_open(&self, conn: &Conn) {
        *self.0.conn.lock().unwrap() = Some(conn.clone());
    }
    fn on_data(&self, _conn: &Conn, _data: &[u8]) {}
    fn on_drained(&self, conn: &Conn) {
        let st = &self.0;
        st.queued_at_drained
            .fetch_max(conn.queued_bytes(), Ordering::SeqCst);
        st.drained.fetch_add(1, Ordering::SeqCst);
        let until = Instant::now() + IO_TIMEOUT;
        let mut park = st.park.lock().unwrap();
        while *park && Instant::now() < until {
            park = st
                .unparked
                .wait_timeout(park, Duration::from_millis(10))
                .unwrap()
                .0;
        }
    }
}

/// A send outside the connection's rounds onto an empty queue is written before `send`
/// returns, and what the connection's round owes is still done by that round: the
/// `on_drained` a `wake_when_drained` asked for comes once, even when a send's direct
/// write emptied the queue before the round ran, and a direct write the socket does not
/// take whole leaves the rest queued under the watermarks.
#[test]
fn an_outside_send_written_at_once_still_owes_the_drained_wake_up() {
    let _serial = serial();
    let st = Arc::new(DrainState::default());
    *st.park.lock().unwrap() = true;
    let server = Server::start(flow_config(), Drainer(st.clone()));
    let mut client = server.connect();
    client
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    wait_until("on_open", IO_TIMEOUT, || st.conn.lock().unwrap().is_some());
    let conn = st.conn.lock().unwrap().clone().unwrap();
    let drained = || st.drained.load(Ordering::SeqCst);
    let mut line = [0u8; 6];

    // Asked for with nothing queued, on_drained comes, and parks the connection's task.
    conn.wake_when_drained();
    wait_until("the first on_drained", IO_TIMEOUT, || drained() == 1);

    // No round can run now, so these bytes can only arrive if `send` wrote them.
    conn.send(b"first\n").unwrap();
    assert_eq!(
        conn.queued_bytes(),
        0,
        "a send onto an empty queue was not written"
    );
    client
        .read_exact(&mut line)
        .expect("a send made while the connection's task is busy");
    assert_eq!(&line, b"first\n");

    // A waiter, then a send whose direct write empties the queue before any round runs:
    // the round still owes the waiter its on_drained, and runs it once unparked.
    conn.wake_when_drained();
    conn.send(b"again\n").unwrap();
    assert_eq!(conn.queued_bytes(), 0);
    client.read_exact(&mut line).expect("the second send");
    assert_eq!(&line, b"again\n");
    thread::sleep(Duration::from_millis(100));
    assert_eq!(drained(), 1, "on_drained beside the parked one");
    *st.park.lock().unwrap() = false;
    st.unparked.notify_all();
    wait_until("the owed on_drained", IO_TIMEOUT, || drained() == 2);

    // Direct writes with no waiter owe nothing.
    for _ in 0..10 {
        conn.send(b"more.\n").unwrap();
        client.read_exact(&mut line).expect("a send with no waiter");
        assert_eq!(&line, b"more.\n");
    }
    thread::sleep(Duration::from_millis(200));
    assert_eq!(drained(), 2, "on_drained that nothing asked for");

    // A direct write the socket does not take whole (the client reads nothing yet): the
    // rest is queued past the high watermark, and once the client reads, everything
    // arrives in order and on_drained comes once, at the low watermark.
    const BIG: usize = 32 * MIB;
    conn.send(&pattern_vec(0, BIG)).unwrap();
    conn.send(b"LAST\n").unwrap();
    assert!(
        conn.queued_bytes() > 64 * KIB,
        "{} bytes queued",
        conn.queued_bytes()
    );
    client.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    read_pattern_exact(&mut client, BIG, "the big send");
    let mut last = [0u8; 5];
    client.read_exact(&mut last).expect("the send after it");
    assert_eq!(&last, b"LAST\n");
    wait_until("on_drained after the big send", IO_TIMEOUT, || {
        drained() == 3
    });
    thread::sleep(Duration::from_millis(100));
    assert_eq!(drained(), 3, "on_drained calls");
    let at = st.queued_at_drained.load(Ordering::SeqCst);
    assert!(at <= 16 * KIB, "on_drained with {at} bytes queued");

    conn.close();
    expect_eof(&mut client, "the closed connection");
    *st.conn.lock().unwrap() = None;
    server.engine.shutdown(Duration::from_secs(1));
}

// ---------------------------------------------------------------------------------------
// 4. Shutdown.

#[derive(Default)]
struct Counts {
    opened: AtomicUsize,
    closed: AtomicUsize,
    closed_ok: AtomicUsize,
}

/// Idle connections: never sends on its own.
struct Idle(Arc<Counts>);

impl Handler for Idle {
    fn on_open(&self, _conn: &Conn) {
        self.0.opened.fetch_add(1, Ordering::SeqCst);
    }
    fn on_data(&self, _conn: &Conn, _data: &[u8]) {}
    fn on_close(&self, _conn: &Conn, err: Option<io::Error>) {
        if err.is_none() {
            self.0.closed_ok.fetch_add(1, Ordering::SeqCst);
        }
        self.0.closed.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn shutdown_closes_idle_connections_at_its_deadline() {
    let _serial = serial();
    const N: usize = 50;
    let counts = Arc::new(Counts::default());
    let server = Server::start(flow_config(), Idle(counts.clone()));
    let mut clients: Vec<TcpStream> = (0..N).map(|_| server.connect()).collect();
    wait_until("every on_open", IO_TIMEOUT, || {
        counts.opened.load(Ordering::SeqCst) == N
    });
    assert_eq!(server.engine.connections(), N);

    let (ran_tx, ran_rx) = mpsc::channel();
    let e = server.engine.clone();
    let runner = thread::spawn(move || {
        let r = e.run();
        let _ = ran_tx.send(Instant::now());
        r
    });
    thread::sleep(Duration::from_millis(50));
    assert!(
        ran_rx.try_recv().is_err(),
        "Engine::run returned before shutdown"
    );

    let t0 = Instant::now();
    server.engine.shutdown(Duration::from_millis(300));
    let took = t0.elapsed();
    eprintln!("shutdown(300 ms) with {N} idle connections took {took:?}");
    assert!(
        took < Duration::from_millis(1500),
        "shutdown(300 ms) took {took:?}"
    );
    let ran_at = ran_rx
        .recv_timeout(Duration::from_secs(2))
        .expect("Engine::run did not return after shutdown");
    assert!(ran_at >= t0);
    runner.join().unwrap().expect("Engine::run result");

    for (i, c) in clients.iter_mut().enumerate() {
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut b = [0u8; 16];
        match c.read(&mut b) {
            Ok(0) => {}
            Ok(n) => panic!("client {i}: unexpected {n} bytes"),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                ) => {}
            Err(e) => panic!("client {i}: no EOF or reset after shutdown: {e}"),
        }
    }
    assert_eq!(counts.closed.load(Ordering::SeqCst), N, "on_close calls");
    assert_eq!(server.engine.connections(), 0);
    // The listener is gone too.
    assert!(
        TcpStream::connect_timeout(&server.addr, Duration::from_secs(1)).is_err(),
        "still accepting after shutdown"
    );
}

#[test]
fn shutdown_without_connections_is_quick() {
    let _serial = serial();
    let counts = Arc::new(Counts::default());
    let server = Server::start(flow_config(), Idle(counts));
    let t0 = Instant::now();
    server.engine.shutdown(Duration::from_secs(10));
    let took = t0.elapsed();
    eprintln!("shutdown(10 s) with no connections took {took:?}");
    assert!(
        took < Duration::from_millis(200),
        "shutdown with no connections took {took:?}"
    );
    // run() after shutdown returns at once.
    let (tx, rx) = mpsc::channel();
    let e = server.engine.clone();
    thread::spawn(move || tx.send(e.run().is_ok()).unwrap());
    assert_eq!(rx.recv_timeout(Duration::from_secs(1)), Ok(true));
}

/// Sends 2 MiB per request and closes after flushing it.
struct BigThenClose;

impl Handler for BigThenClose {
    fn on_data(&self, conn: &Conn, _data: &[u8]) {
        conn.send(&pattern_vec(0, 2 * MIB)).unwrap();
        conn.close();
    }
}

#[test]
fn shutdown_waits_for_connections_that_finish_in_time() {
    let _serial = serial();
    // Connections that close on their own within the deadline: shutdown returns when they
    // are done, not at the deadline, and the output queued at shutdown is delivered whole.
    let counts = Arc::new(Counts::default());
    let server = Server::start(flow_config(), Idle(counts.clone()));
    let clients: Vec<TcpStream> = (0..5).map(|_| server.connect()).collect();
    wait_until("every on_open", IO_TIMEOUT, || {
        counts.opened.load(Ordering::SeqCst) == 5
    });
    let closer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(200));
        drop(clients);
    });
    let t0 = Instant::now();
    server.engine.shutdown(Duration::from_secs(5));
    let took = t0.elapsed();
    closer.join().unwrap();
    eprintln!("shutdown(5 s) with clients closing after 200 ms took {took:?}");
    assert!(took < Duration::from_millis(1500), "shutdown took {took:?}");
    assert_eq!(counts.closed.load(Ordering::SeqCst), 5);
    assert_eq!(
        counts.closed_ok.load(Ordering::SeqCst),
        5,
        "closed without error"
    );

    // A response queued when shutdown starts is flushed before the close.
    let server = Server::start(flow_config(), BigThenClose);
    let mut client = server.connect();
    client.write_all(b"go").unwrap();
    thread::sleep(Duration::from_millis(100));
    let e = server.engine.clone();
    let t0 = Instant::now();
    let shut = thread::spawn(move || e.shutdown(Duration::from_secs(5)));
    thread::sleep(Duration::from_millis(200));
    let got = read_to_eof(&mut client, "response at shutdown");
    assert_eq!(got.len(), 2 * MIB);
    check_pattern("response at shutdown", &got, 0);
    shut.join().unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "shutdown took {:?}",
        t0.elapsed()
    );
}

// ---------------------------------------------------------------------------------------
// 5. A blocking handler: blocked workers are replaced, and the extras go away afterwards.

struct Blocker;

impl Handler for Blocker {
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        if data == b"block" {
            thread::sleep(Duration::from_secs(2));
            let _ = conn.send(b"done");
        } else {
            let _ = conn.send(data);
        }
    }
}

#[test]
fn blocked_workers_are_replaced_and_extras_retire() {
    let _serial = serial();
    let cfg = flow_config()
        .with_workers(2)
        .with_blocking_threshold(Duration::from_millis(100))
        .with_worker_idle_timeout(Duration::from_millis(300));
    let server = Server::start(cfg, Blocker);
    let engine = server.engine.clone();
    assert_eq!(engine.workers(), 2);

    let stop = Arc::new(AtomicBool::new(false));
    let max_workers = Arc::new(AtomicUsize::new(0));
    let sampler = {
        let (e, stop, max) = (engine.clone(), stop.clone(), max_workers.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                max.fetch_max(e.workers(), Ordering::Relaxed);
                thread::sleep(Duration::from_millis(5));
            }
        })
    };

    let blocked_at = Instant::now();
    let mut blockers: Vec<TcpStream> = (0..3)
        .map(|_| {
            let mut s = server.connect();
            s.write_all(b"block").unwrap();
            s
        })
        .collect();
    thread::sleep(Duration::from_millis(30));

    // Echoes spread over the blocked period, with gaps longer than the idle timeout (so
    // the replacements idle out in between): someone must keep serving the whole time.
    let mut latencies = Vec::new();
    for i in 0..4 {
        if i > 0 {
            thread::sleep(Duration::from_millis(400));
        }
        let mut s = server.connect();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let msg = format!("ping-{i}");
        let t0 = Instant::now();
        s.write_all(msg.as_bytes()).unwrap();
        let mut back = vec![0u8; msg.len()];
        s.read_exact(&mut back)
            .unwrap_or_else(|e| panic!("echo {i} while workers are blocked: {e}"));
        latencies.push(t0.elapsed());
        assert_eq!(back, msg.as_bytes());
    }
    let during = engine.workers();
    let echo_phase = blocked_at.elapsed();
    eprintln!(
        "blocking: echo latencies {latencies:?}, workers now {during}, phase took {echo_phase:?}"
    );
    for (i, l) in latencies.iter().enumerate() {
        assert!(
            *l < Duration::from_secs(1),
            "echo {i} took {l:?} with the workers blocked"
        );
    }
    assert!(
        echo_phase < Duration::from_millis(1900),
        "the echoes ran past the blocks ({echo_phase:?}): the test proved nothing"
    );
    assert!(during > 2, "workers did not grow while blocked: {during}");

    for (i, b) in blockers.iter_mut().enumerate() {
        let mut done = [0u8; 4];
        b.read_exact(&mut done)
            .unwrap_or_else(|e| panic!("blocker {i}: {e}"));
        assert_eq!(&done, b"done");
    }
    let t_done = Instant::now();
    stop.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let max = max_workers.load(Ordering::Relaxed);
    wait_until("the workers back to 2", Duration::from_secs(3), || {
        engine.workers() == 2
    });
    eprintln!(
        "blocking: at most {max} workers; back to 2 in {:?} after the blocks ended",
        t_done.elapsed()
    );
    assert!(max > 2 && max <= 64);
    // It stays at 2 (does not overshoot downwards) and still serves.
    for _ in 0..40 {
        assert_eq!(engine.workers(), 2);
        thread::sleep(Duration::from_millis(10));
    }
    let mut s = server.connect();
    s.write_all(b"after").unwrap();
    let mut back = [0u8; 5];
    s.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"after");
    engine.shutdown(Duration::from_secs(1));
}

// ---------------------------------------------------------------------------------------
// 6. send_file.

/// Answers "OFFSET LEN\n" with "BEGIN\n", that range of the file, "END\n", then closes.
struct FileServer(Arc<File>);

impl Handler for FileServer {
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        let line = conn.with_context(|b: Option<&mut Vec<u8>>| {
            let mut acc = b.map(std::mem::take).unwrap_or_default();
            acc.extend_from_slice(data);
            acc
        });
        if !line.ends_with(b"\n") {
            conn.set_context(line);
            return;
        }
        let text = std::str::from_utf8(&line).unwrap().trim();
        let mut it = text.split(' ').map(|n| n.parse::<u64>().unwrap());
        let (off, len) = (it.next().unwrap(), it.next().unwrap());
        conn.send(b"BEGIN\n").unwrap();
        conn.send_file(&self.0, off, len).unwrap();
        conn.send(b"END\n").unwrap();
        conn.close();
    }
}

#[test]
fn send_file_sends_exactly_the_range() {
    let _serial = serial();
    const SIZE: usize = 3 * MIB;
    const SHIFT: usize = 12_345;
    let path = TempPath::new("engine-flow", "bin");
    std::fs::write(&path, pattern_vec(SHIFT, SIZE)).unwrap();
    let file = Arc::new(File::open(&path).unwrap());
    let server = Server::start(flow_config(), FileServer(file));

    let cases: [(usize, usize, u64); 5] = [
        (0, SIZE, 200),                 // the whole file, to a client that reads late
        (1_000_003, 1_500_000, 0),      // a sub-range
        (SIZE - 10, 10, 0),             // the tail
        (777, 0, 0),                    // nothing
        (65_536, 2 * MIB - 65_536, 50), // aligned start, odd length
    ];
    for (off, len, delay_ms) in cases {
        let mut c = server.connect();
        c.write_all(format!("{off} {len}\n").as_bytes()).unwrap();
        thread::sleep(Duration::from_millis(delay_ms));
        let got = read_to_eof(&mut c, "send_file response");
        let what = format!("range {off}+{len}");
        assert!(got.starts_with(b"BEGIN\n"), "{what}: no BEGIN");
        assert!(got.ends_with(b"END\n"), "{what}: no END");
        assert_eq!(got.len(), len + 10, "{what}: response length");
        check_pattern(&what, &got[6..6 + len], SHIFT + off);
    }
    wait_until("no connections", IO_TIMEOUT, || {
        server.engine.connections() == 0
    });
    server.engine.shutdown(Duration::from_secs(1));
}

// ---------------------------------------------------------------------------------------
// 7. The global budget: max_pending_bytes bounds the sum of the queues.

#[test]
fn max_pending_bytes_bounds_the_sum_of_queues() {
    let _serial = serial();
    const CLIENTS: usize = 4;
    const BUDGET: usize = 256 * KIB;
    const PER_CLIENT: usize = 16 * MIB;
    let cfg = flow_config()
        // A per-connection watermark far above the budget, so the budget is what binds.
        .with_write_high_watermark(MIB)
        .with_write_low_watermark(64 * KIB)
        .with_max_pending_bytes(Some(BUDGET));
    let stats = Arc::new(FlowStats::default());
    let server = Server::start(cfg, Firehose(stats.clone()));
    let clients: Vec<TcpStream> = (0..CLIENTS).map(|_| server.connect()).collect();
    wait_until("every on_open", IO_TIMEOUT, || {
        stats.conns.lock().unwrap().len() == CLIENTS
    });
    let conns = stats.conns.lock().unwrap().clone();
    let _ = table();
    let rss0 = rss();

    // Each client writes until the server stops taking its requests, then half-closes.
    let writers: Vec<_> = clients
        .iter()
        .map(|c| {
            let mut w = c.try_clone().unwrap();
            w.set_write_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            thread::spawn(move || {
                let mut pos = 0;
                match pump(&mut w, &mut pos, PER_CLIENT) {
                    Ok(()) => {}
                    Err(e) if is_timeout(&e) => {}
                    Err(e) => panic!("writer failed after {pos} bytes: {e}"),
                }
                w.shutdown(Shutdown::Write).unwrap();
                pos
            })
        })
        .collect();

    // Sample the queued output (the engine's counter: the per-connection queues read one by
    // one would add up readings from different moments) and RSS until every writer is
    // done, and a bit longer.
    let mut max_sum_seen = 0;
    let mut max_rss = rss0;
    let end = Instant::now() + Duration::from_secs(15);
    let mut settle = 0;
    while settle < 30 {
        max_sum_seen = max_sum_seen.max(server.engine.queued_bytes());
        max_rss = max_rss.max(rss());
        if writers.iter().all(|w| w.is_finished()) {
            settle += 1;
        }
        assert!(Instant::now() < end, "the writers did not stall");
        thread::sleep(Duration::from_millis(3));
    }
    let sent: Vec<usize> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let per_call = stats.max_call_output.load(Ordering::Relaxed);
    // Once the sum passes the budget, each connection can add at most one read's output
    // before it stops reading.
    let bound = BUDGET + CLIENTS * per_call;
    let grown = max_rss.saturating_sub(rss0);
    eprintln!(
        "budget: sent {sent:?}; max sum of queues {max_sum_seen} \
         bound {bound}; RSS grew {} KiB",
        grown / KIB
    );
    assert!(
        max_sum_seen <= bound,
        "the queues together held {max_sum_seen} bytes; budget {BUDGET} + {CLIENTS} reads' \
         output = {bound}"
    );
    assert!(
        grown <= 8 * MIB,
        "RSS grew by {} KiB with slow readers",
        grown / KIB
    );

    // Now everyone reads: each gets AMP bytes per byte it sent, in order, then EOF.
    let readers: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(i, mut c)| {
            let len = AMP * sent[i];
            thread::spawn(move || {
                let what = format!("client {i}");
                read_pattern_exact(&mut c, len, &what);
                expect_eof(&mut c, &what);
            })
        })
        .collect();
    for r in readers {
        if let Err(panic) = r.join() {
            std::panic::resume_unwind(panic);
        }
    }
    assert_eq!(stats.input_errors.load(Ordering::Relaxed), 0);
    assert_eq!(stats.send_errors.load(Ordering::Relaxed), 0);
    wait_until("every on_close", IO_TIMEOUT, || {
        stats.closed.load(Ordering::Relaxed) == CLIENTS
    });
    drop(conns);
    stats.conns.lock().unwrap().clear();
    server.engine.shutdown(Duration::from_secs(1));
}

// ---------------------------------------------------------------------------------------
// Lingering close.

/// Answers the first bytes it gets with a 4 MiB reply and closes, whatever else the peer
/// is still sending (like a 413 to a client busy sending its body).
struct AnswerAndClose;

const REPLY_LEN: usize = 4 * MIB;

impl Handler for AnswerAndClose {
    fn on_data(&self, conn: &Conn, _data: &[u8]) {
        // Once closing, sends fail: only the first data is answered.
        if conn.send(&pattern_vec(0, REPLY_LEN)).is_ok() {
            conn.close();
        }
    }
}

/// Starts a client thread that keeps writing `total` bytes (ignoring errors) and returns
/// the socket to read from.
fn client_sending(server: &Server, total: usize) -> (TcpStream, thread::JoinHandle<()>) {
    let c = server.connect();
    let mut w = c.try_clone().unwrap();
    let writer = thread::spawn(move || {
        let chunk = vec![b'x'; 16 * KIB];
        let mut sent = 0;
        while sent < total {
            match w.write(&chunk) {
                Ok(n) => sent += n,
                Err(_) => return,
            }
        }
    });
    (c, writer)
}

fn read_reply(c: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut got = Vec::new();
    let mut b = vec![0u8; 16 * KIB];
    loop {
        match c.read(&mut b) {
            Ok(0) => return Ok(got),
            Ok(n) => got.extend_from_slice(&b[..n]),
            Err(e) => {
                return if got.len() >= REPLY_LEN {
                    Ok(got)
                } else {
                    Err(e)
                }
            }
        }
    }
}

#[test]
fn a_close_with_unread_input_still_delivers_the_reply() {
    let _serial = serial();
    let server = Server::start(flow_config(), AnswerAndClose);
    // The client sends 512 KiB (within linger_max_bytes); the server reads 4 KiB, replies
    // and closes. Without lingering, the unread input makes the kernel reset the
    // connection, which destroys the part of the reply still in the server's send queue.
    for round in 0..20 {
        let (mut c, writer) = client_sending(&server, 512 * KIB);
        thread::sleep(Duration::from_millis(20));
        let got = read_reply(&mut c).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(got.len(), REPLY_LEN, "round {round}");
        check_pattern("reply", &got, 0);
        drop(c);
        writer.join().unwrap();
    }
}

#[test]
fn lingering_is_bounded_by_bytes_and_time() {
    let _serial = serial();
    // Bytes: a peer that keeps sending past linger_max_bytes is cut off.
    let server = Server::start(
        flow_config()
            .with_linger_max_bytes(64 * KIB)
            .with_linger_timeout(Some(Duration::from_secs(30))),
        AnswerAndClose,
    );
    let (mut c, writer) = client_sending(&server, 64 * MIB);
    // The reply may be cut short by the reset here: the bound wins.
    let _ = read_reply(&mut c);
    writer.join().unwrap();
    wait_until("the connection closed", IO_TIMEOUT, || {
        server.engine.connections() == 0
    });
    drop(c);
    drop(server);

    // Time: a peer that left input unread (64 KiB; the server reads 4 KiB, answers and
    // closes) and then neither sends nor closes is closed after linger_timeout.
    let server = Server::start(
        flow_config().with_linger_timeout(Some(Duration::from_millis(300))),
        AnswerAndClose,
    );
    let mut c = server.connect();
    c.write_all(&[b'x'; 64 * KIB]).unwrap();
    let got = read_reply(&mut c).expect("the reply, then our FIN");
    assert_eq!(got.len(), REPLY_LEN);
    assert_eq!(
        server.engine.connections(),
        1,
        "lingering until the timeout"
    );
    let t0 = Instant::now();
    wait_until("the linger timeout", IO_TIMEOUT, || {
        server.engine.connections() == 0
    });
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(2), "closed after {took:?}");

    // Nothing unread (the usual close, e.g. connection churn): no lingering at all, even
    // though the peer keeps its socket open.
    drop(server);
    let server = Server::start(flow_config(), AnswerAndClose);
    let mut c = server.connect();
    c.write_all(b"hi").unwrap();
    let _ = read_reply(&mut c);
    wait_until(
        "a close without lingering",
        Duration::from_millis(500),
        || server.engine.connections() == 0,
    );
    drop(c);

    // None: closes at once.
    drop(server);
    let server = Server::start(flow_config().with_linger_timeout(None), AnswerAndClose);
    let mut c = server.connect();
    c.write_all(b"hi").unwrap();
    let _ = read_reply(&mut c);
    wait_until("an immediate close", Duration::from_millis(500), || {
        server.engine.connections() == 0
    });
}

// ---------------------------------------------------------------------------------------
// Write timeout.

/// Sends 16 MiB as soon as the connection opens.
struct Flood;

impl Handler for Flood {
    fn on_open(&self, conn: &Conn) {
        let _ = conn.send(&pattern_vec(0, 16 * MIB));
    }
    fn on_data(&self, _conn: &Conn, _data: &[u8]) {}
}

#[test]
fn a_peer_that_stops_reading_is_closed_after_the_write_timeout() {
    let _serial = serial();
    let timeout = Duration::from_millis(500);
    let server = Server::start(flow_config().with_write_timeout(Some(timeout)), Flood);
    // Never reads: closed about `timeout` after the socket buffers filled.
    let silent = server.connect();
    // Reads everything, in 64 KiB reads with pauses: progress, so never cut off.
    let mut reader = server.connect();
    wait_until("both open", IO_TIMEOUT, || server.engine.connections() == 2);
    let t0 = Instant::now();
    let reading = thread::spawn(move || {
        let mut got = Vec::with_capacity(16 * MIB);
        let mut b = vec![0u8; 64 * KIB];
        while got.len() < 16 * MIB {
            match reader.read(&mut b) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&b[..n]),
            }
            thread::sleep(Duration::from_millis(2));
        }
        got
    });
    wait_until("the silent peer closed", IO_TIMEOUT, || {
        server.engine.connections() <= 1
    });
    let took = t0.elapsed();
    assert!(took >= timeout, "closed after {took:?}, before the timeout");
    let got = reading.join().unwrap();
    assert_eq!(got.len(), 16 * MIB, "the reader got everything");
    check_pattern("flood", &got, 0);
    drop(silent);
}
