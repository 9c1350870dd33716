//! Hostile clients against `fibr::serve` (an axum `Router`, small timeouts), on real
//! sockets: slowloris, slow readers, a pipelined request flood on one connection, header
//! and body bombs at and past every limit, half-open connections, and clients that reset
//! mid-request and mid-response. Each test checks that the others are still served, that
//! memory stays bounded (RSS from /proc) and that no descriptor leaks (/proc/self/fd).
//!
//! The tests measure process-wide things (RSS, fds, latency), so they run one at a time
//! (`GATE`); each runs under a watchdog (`bounded`) and every socket has timeouts.

mod common;

use axum::body::Body;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use fibr::http::ServerConfig;
use futures_util::stream;
use http_body_util::BodyExt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use common::{
    bounded, fd_count, raise_nofile, rss, settle_fds, start, Client, Resp, RssSampler, IO_TIMEOUT,
};

// ---------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------

static GATE: Mutex<()> = Mutex::new(());

fn gate() -> MutexGuard<'static, ()> {
    GATE.lock().unwrap_or_else(|e| e.into_inner())
}

const LIMIT: Duration = Duration::from_secs(20);

/// Small timeouts and limits, so every defence triggers quickly.
fn config() -> ServerConfig {
    ServerConfig::default()
        .with_header_read_timeout(Some(Duration::from_secs(1)))
        .with_idle_timeout(Some(Duration::from_secs(5)))
        .with_max_body_size(Some(1 << 20))
        .with_max_pipelined(16)
}

const CHUNK: usize = 64 * 1024;
static CHUNK_BYTES: [u8; CHUNK] = [b'z'; CHUNK];

/// `/` → "ok"; `/pad/{i}` → 4 KiB starting with `{i}:`; `/stream/{mib}` → that many MiB
/// streamed in 64 KiB chunks (unknown length, so chunked); `/sleep/{ms}` → "slept" after
/// the delay; `POST /sink` reads the whole body (413 if too large, 400 if broken) and
/// answers its length; `POST /ignore` never reads it.
fn router() -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .route(
            "/pad/{i}",
            get(|Path(i): Path<u64>| async move {
                let mut v = format!("{i}:").into_bytes();
                v.resize(4096, b'.');
                v
            }),
        )
        .route(
            "/stream/{mib}",
            get(|Path(mib): Path<usize>| async move {
                let chunks = mib * (1 << 20) / CHUNK;
                let s = stream::iter(
                    (0..chunks).map(|_| Ok::<_, io::Error>(Bytes::from_static(&CHUNK_BYTES))),
                );
                Body::from_stream(s)
            }),
        )
        .route(
            "/sleep/{ms}",
            get(|Path(ms): Path<u64>| async move {
                fibr::time::sleep(Duration::from_millis(ms)).await;
                "slept"
            }),
        )
        .route(
            "/sink",
            post(|body: Body| async move {
                let mut body = body;
                let mut n = 0usize;
                while let Some(frame) = body.frame().await {
                    match frame {
                        Ok(f) => n += f.data_ref().map_or(0, |d| d.len()),
                        Err(e) => {
                            let too_large = std::error::Error::source(&e)
                                .and_then(|s| s.downcast_ref::<fibr::http::BodyError>())
                                .is_some_and(|b| b.is_too_large())
                                || e.to_string().contains("larger than the limit");
                            return if too_large {
                                (StatusCode::PAYLOAD_TOO_LARGE, "too large".to_string())
                            } else {
                                (StatusCode::BAD_REQUEST, e.to_string())
                            };
                        }
                    }
                }
                (StatusCode::OK, n.to_string())
            }),
        )
        .route("/ignore", post(|| async { "ignored" }))
}

/// Closes with a RST (SO_LINGER 0) instead of a FIN.
fn reset(s: TcpStream) {
    socket2::SockRef::from(&s)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(s);
}

/// `rounds` GET / round trips on one keep-alive connection; returns the worst latency.
fn probe_latency(addr: SocketAddr, rounds: usize) -> Duration {
    let mut c = Client::connect(addr);
    let mut worst = Duration::ZERO;
    for _ in 0..rounds {
        let t = Instant::now();
        let r = c.get("/");
        worst = worst.max(t.elapsed());
        assert_eq!((r.status, r.text().as_str()), (200, "ok"));
    }
    worst
}

// ---------------------------------------------------------------------------------------
// Slowloris
// ---------------------------------------------------------------------------------------

struct Slow {
    s: TcpStream,
    sent: usize,
    got: Vec<u8>,
    eof: bool,
    err: Option<io::Error>,
    first_byte: Option<Instant>,
    closed_after: Option<Duration>,
}

/// 1000 connections trickle a request head, one byte every 100 ms. With
/// `header_read_timeout` = 1 s, each gets 408 and is closed about 1 s after its first
/// byte, while 20 normal keep-alive clients are served promptly all along.
#[test]
fn slowloris_gets_408_while_others_are_served() {
    let _g = gate();
    bounded(LIMIT, || {
        const SLOW: usize = 1000;
        const NORMAL: usize = 20;
        const HEAD: &[u8] = b"GET / HTTP/1.1\r\nHost: slow\r\nX-Trickle: ";
        let nofile = raise_nofile(4 * SLOW as u64 + 1024);
        assert!(
            nofile >= 2 * SLOW as u64 + 256,
            "RLIMIT_NOFILE (hard limit) {nofile} is too low for {SLOW} connections"
        );
        let addr = start(router(), config());
        probe_latency(addr, 1);
        let fds_before = fd_count();

        let mut slow: Vec<Slow> = (0..SLOW)
            .map(|_| {
                let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
                s.set_nodelay(true).unwrap();
                s.set_nonblocking(true).unwrap();
                Slow {
                    s,
                    sent: 0,
                    got: Vec::new(),
                    eof: false,
                    err: None,
                    first_byte: None,
                    closed_after: None,
                }
            })
            .collect();
        let t0 = Instant::now();
        // The normal clients start once the trickling is under way.
        let normal = thread::spawn(move || {
            thread::sleep(Duration::from_millis(300));
            let hs: Vec<_> = (0..NORMAL)
                .map(|_| thread::spawn(move || probe_latency(addr, 10)))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).max().unwrap()
        });

        let deadline = t0 + Duration::from_secs(8);
        let mut tmp = [0u8; 1024];
        let mut rounds = 0;
        while slow.iter().any(|c| !c.eof && c.err.is_none()) && Instant::now() < deadline {
            rounds += 1;
            for c in slow.iter_mut().filter(|c| !c.eof && c.err.is_none()) {
                // Read first: once an answer is there, stop writing (a byte the server
                // receives after closing would make it reset the connection).
                loop {
                    match c.s.read(&mut tmp) {
                        Ok(0) => {
                            c.eof = true;
                            c.closed_after = c.first_byte.map(|t| t.elapsed());
                            break;
                        }
                        Ok(n) => c.got.extend_from_slice(&tmp[..n]),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => {
                            c.closed_after = c.first_byte.map(|t| t.elapsed());
                            c.err = Some(e);
                            break;
                        }
                    }
                }
                if c.eof || c.err.is_some() || !c.got.is_empty() {
                    continue;
                }
                let b = HEAD.get(c.sent).copied().unwrap_or(b'a');
                match c.s.write(&[b]) {
                    Ok(1) => {
                        c.sent += 1;
                        c.first_byte.get_or_insert_with(Instant::now);
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => c.err = Some(e),
                }
            }
            thread::sleep(Duration::from_millis(100));
        }
        let worst = normal.join().unwrap();

        let answered = slow
            .iter()
            .filter(|c| c.got.starts_with(b"HTTP/1.1 408 "))
            .count();
        let closed = slow.iter().filter(|c| c.eof).count();
        let resets = slow.iter().filter(|c| c.err.is_some()).count();
        let times: Vec<Duration> = slow.iter().filter_map(|c| c.closed_after).collect();
        let (min, max) = (
            times.iter().min().copied().unwrap_or_default(),
            times.iter().max().copied().unwrap_or_default(),
        );
        let max_sent = slow.iter().map(|c| c.sent).max().unwrap();
        eprintln!(
            "slowloris: {answered}/{SLOW} got 408, {closed} closed by FIN, {resets} by error, \
             closed {min:?}..{max:?} after their first byte ({rounds} trickle rounds, at \
             most {max_sent} bytes sent); worst latency of {NORMAL} normal clients x 10 \
             requests: {worst:?}"
        );
        for c in &slow {
            assert!(
                c.got.starts_with(b"HTTP/1.1 408 "),
                "a slow client got {:?} (error {:?})",
                String::from_utf8_lossy(&c.got),
                c.err
            );
            assert!(c.eof || c.err.is_some(), "a slow client was not closed");
        }
        assert!(
            min >= Duration::from_millis(900) && max < Duration::from_secs(4),
            "closed {min:?}..{max:?} after the first byte (header_read_timeout = 1 s)"
        );
        assert!(
            worst < Duration::from_secs(1),
            "normal clients waited {worst:?}"
        );
        drop(slow);
        let after = settle_fds(fds_before, 2, Duration::from_secs(3));
        assert!(after <= fds_before + 2, "fds {fds_before} -> {after}");
    });
}

// ---------------------------------------------------------------------------------------
// Slow readers
// ---------------------------------------------------------------------------------------

/// Reads and discards `n` bytes.
fn discard(s: &mut TcpStream, mut n: usize) {
    let mut tmp = vec![0u8; 256 * 1024];
    while n > 0 {
        let k = s.read(&mut tmp[..n.min(256 * 1024)]).expect("read");
        assert!(k > 0, "EOF with {n} bytes to go");
        n -= k;
    }
}

/// 20 clients ask for a 256 MiB streamed response and never read it: the server stops
/// polling those bodies once their sockets are full (RSS stays flat), other clients are
/// served as before, and a stalled reader that starts reading gets the rest.
#[test]
fn slow_readers_bound_memory_and_leave_others_alone() {
    let _g = gate();
    bounded(LIMIT, || {
        const READERS: usize = 20;
        let addr = start(router(), config());
        let mut c = Client::connect(addr);
        c.send(b"GET /stream/4 HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(c.response_keeping(false).len, 4 << 20);
        let fds_before = fd_count();
        let before = rss();
        let sampler = RssSampler::start(Duration::from_millis(5));
        let mut slow: Vec<TcpStream> = (0..READERS)
            .map(|_| {
                let mut c = Client::connect(addr);
                c.send(b"GET /stream/256 HTTP/1.1\r\nHost: t\r\n\r\n");
                c.s
            })
            .collect();
        thread::sleep(Duration::from_millis(1200));
        let worst = (0..4).map(|_| probe_latency(addr, 10)).max().unwrap();
        let t = Instant::now();
        let mut fast_client = Client::connect(addr);
        fast_client.send(b"GET /stream/16 HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = fast_client.response_keeping(false);
        let fast = t.elapsed();
        assert_eq!((r.status, r.len), (200, 16 << 20));
        thread::sleep(Duration::from_millis(300));
        let peak = sampler.finish();
        let grew = peak.saturating_sub(before);
        // A stalled reader resumes: the stream goes on where it stopped.
        let t = Instant::now();
        discard(&mut slow[0], 32 << 20);
        let resumed = t.elapsed();
        eprintln!(
            "slow readers: {READERS} x 256 MiB unread; RSS {} KiB -> peak {} KiB (+{} KiB); \
             worst GET / latency {worst:?}; a 16 MiB stream alongside in {fast:?}; 32 MiB \
             more to a resumed reader in {resumed:?}",
            before / 1024,
            peak / 1024,
            grew / 1024
        );
        assert!(grew < 8 << 20, "RSS grew by {} KiB", grew / 1024);
        assert!(worst < Duration::from_millis(500), "GET / took {worst:?}");
        drop(slow);
        let after = settle_fds(fds_before, 2, Duration::from_secs(3));
        assert!(after <= fds_before + 2, "fds {fds_before} -> {after}");
    });
}

// ---------------------------------------------------------------------------------------
// Request flood on one connection
// ---------------------------------------------------------------------------------------

/// 10,000 pipelined requests (4 KiB each, 4 KiB responses) written without reading for
/// 1.3 s, then every response read. Returns (requests written when the writer stalled,
/// RSS growth, a concurrent client's worst latency, time to read everything).
fn flood(cfg: ServerConfig) -> (usize, usize, Duration, Duration) {
    const N: usize = 10_000;
    let addr = start(router(), cfg);
    probe_latency(addr, 1);
    let before = rss();
    let sampler = RssSampler::start(Duration::from_millis(5));
    let mut c = Client::connect(addr);
    let mut w = c.s.try_clone().unwrap();
    w.set_write_timeout(Some(Duration::from_secs(15))).unwrap();
    let written = Arc::new(AtomicUsize::new(0));
    let wr = written.clone();
    let writer = thread::spawn(move || -> io::Result<()> {
        let pad = "a".repeat(4000);
        let mut batch = Vec::new();
        for i in 0..N {
            batch.extend_from_slice(
                format!("GET /pad/{i} HTTP/1.1\r\nHost: f\r\nX-Pad: {pad}\r\n\r\n").as_bytes(),
            );
            if batch.len() >= 64 * 1024 || i == N - 1 {
                w.write_all(&batch)?;
                batch.clear();
                wr.store(i + 1, Ordering::Relaxed);
            }
        }
        Ok(())
    });
    thread::sleep(Duration::from_millis(1000));
    let stalled = written.load(Ordering::Relaxed);
    thread::sleep(Duration::from_millis(300));
    let stalled_later = written.load(Ordering::Relaxed);
    let peak = sampler.finish();
    let grew = peak.saturating_sub(before);
    let worst = probe_latency(addr, 5);
    let t = Instant::now();
    for i in 0..N {
        let r = c.response();
        assert_eq!(r.status, 200, "response {i}: {}", r.text());
        let prefix = format!("{i}:");
        assert!(
            r.body.len() == 4096 && r.body.starts_with(prefix.as_bytes()),
            "response {i} out of order: {:?}",
            String::from_utf8_lossy(&r.body[..r.body.len().min(16)])
        );
    }
    let read_all = t.elapsed();
    writer.join().unwrap().expect("writer");
    assert_eq!(c.get("/").text(), "ok");
    eprintln!(
        "flood: {N} pipelined requests unread: writer stalled at {stalled} (then \
         {stalled_later}); RSS {} KiB -> peak {} KiB (+{} KiB); other client's worst \
         latency {worst:?}; all {N} responses read in order in {read_all:?}",
        before / 1024,
        peak / 1024,
        grew / 1024
    );
    (stalled, grew, worst, read_all)
}

/// The flood, without a header-read timeout: the server stops reading once
/// `max_pipelined` responses wait and its output is past the watermark, so the writer
/// stalls and RSS stays flat; then reading gives every response, in order.
#[test]
fn pipelined_flood_is_bounded_then_answered_in_order() {
    let _g = gate();
    bounded(LIMIT, || {
        let cfg = config().with_header_read_timeout(None);
        let (stalled, grew, worst, _) = flood(cfg);
        assert!(stalled < 10_000, "nothing held the writer back");
        assert!(grew < 8 << 20, "RSS grew by {} KiB", grew / 1024);
        assert!(worst < Duration::from_millis(500), "GET / took {worst:?}");
    });
}

/// The same flood with `header_read_timeout` = 1 s: the client sends every head at once,
/// so it must not be taken for a slowloris while the *server* is not reading.
///
/// (Regression: `ConnState::arm_timer` once ran the header-read clock while the
/// connection's reads were paused by the write watermark, so after 1 s the server answered
/// 408 or closed mid-response.)
#[test]
fn pipelined_flood_is_not_taken_for_slowloris() {
    let _g = gate();
    bounded(LIMIT, || {
        let (stalled, _, _, _) = flood(config());
        assert!(stalled < 10_000, "nothing held the writer back");
    });
}

// ---------------------------------------------------------------------------------------
// Header and body bombs
// ---------------------------------------------------------------------------------------

/// Sends `req` on a new connection from another thread (errors ignored: the server may
/// close before all of it is sent) and reads one response.
fn bomb(addr: SocketAddr, req: Vec<u8>) -> (Resp, Client) {
    bomb_with(addr, req, b"", 0, b"")
}

/// Like `bomb`, for a request of `head`, then `repeat` `times` times, then `tail`,
/// written as it goes (the client never holds the whole request).
fn bomb_with(
    addr: SocketAddr,
    head: Vec<u8>,
    repeat: &'static [u8],
    times: usize,
    tail: &'static [u8],
) -> (Resp, Client) {
    let mut c = Client::connect(addr);
    let mut w = c.s.try_clone().unwrap();
    let writer = thread::spawn(move || -> io::Result<()> {
        w.write_all(&head)?;
        for _ in 0..times {
            w.write_all(repeat)?;
        }
        w.write_all(tail)
    });
    let r = c.response();
    let _ = writer.join().unwrap();
    (r, c)
}

fn head_with(extra: &[u8]) -> Vec<u8> {
    let mut req = b"GET / HTTP/1.1\r\nHost: t\r\n".to_vec();
    req.extend_from_slice(extra);
    req.extend_from_slice(b"\r\n");
    req
}

/// Header fields, head size and target length at and one past each limit; a 1 MiB header
/// line from 20 connections at once. Each over-limit request gets its status (431, 414)
/// and a closed connection; RSS stays flat.
#[test]
fn header_bombs_at_every_limit() {
    let _g = gate();
    bounded(LIMIT, || {
        let cfg = config();
        let addr = start(router(), cfg.clone());
        let ok_then_closed = |(r, mut c): (Resp, Client), want: u16, what: &str| {
            assert_eq!(r.status, want, "{what}: {}", r.text());
            if want == 200 {
                assert_eq!(c.get("/").status, 200, "{what}: kept alive");
            } else {
                assert!(r.closes(), "{what}: connection: close");
                c.expect_closed(IO_TIMEOUT);
            }
        };
        // Fields: Host plus max_headers - 1 more pass; one more is 431.
        for (n, want) in [(cfg.max_headers, 200), (cfg.max_headers + 1, 431)] {
            let extra: Vec<u8> = (1..n)
                .flat_map(|i| format!("x-f{i}: v\r\n").into_bytes())
                .collect();
            ok_then_closed(bomb(addr, head_with(&extra)), want, "max_headers");
        }
        // Head bytes: exactly max_head_bytes passes, one more is 431.
        for (len, want) in [(cfg.max_head_bytes, 200), (cfg.max_head_bytes + 1, 431)] {
            let base = head_with(b"x-pad: \r\n").len();
            let mut extra = b"x-pad: ".to_vec();
            extra.resize(7 + len - base, b'p');
            extra.extend_from_slice(b"\r\n");
            let req = head_with(&extra);
            assert_eq!(req.len(), len);
            ok_then_closed(bomb(addr, req), want, "max_head_bytes");
        }
        // Target: max_uri_len passes, one more is 414.
        for (len, want) in [(cfg.max_uri_len, 200), (cfg.max_uri_len + 1, 414)] {
            let mut target = "/?q=".to_string();
            target.push_str(&"u".repeat(len - 4));
            let req = format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes();
            ok_then_closed(bomb(addr, req), want, "max_uri_len");
        }
        // Many small fields with a huge head, and a 1 MiB header line, from 20
        // connections at once.
        let before = rss();
        let sampler = RssSampler::start(Duration::from_millis(5));
        let hs: Vec<_> = (0..20)
            .map(|i| {
                thread::spawn(move || {
                    let head = b"GET / HTTP/1.1\r\nHost: t\r\nX-Bomb: ".to_vec();
                    // One 1 MiB line, or 1 MiB of small fields.
                    let repeat: &'static [u8] = if i % 2 == 0 {
                        &[b'b'; 1024]
                    } else {
                        b"\r\nx: yy"
                    };
                    let times = (1 << 20) / repeat.len();
                    let (r, mut c) = bomb_with(addr, head, repeat, times, b"\r\n\r\n");
                    assert_eq!(r.status, 431, "1 MiB head");
                    assert!(r.closes());
                    c.expect_closed(IO_TIMEOUT);
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let peak = sampler.finish();
        let grew = peak.saturating_sub(before);
        eprintln!(
            "header bombs: 20 x 1 MiB heads answered 431; RSS {} KiB -> peak {} KiB (+{} KiB)",
            before / 1024,
            peak / 1024,
            grew / 1024
        );
        assert!(grew < 8 << 20, "RSS grew by {} KiB", grew / 1024);
        assert_eq!(Client::connect(addr).get("/").text(), "ok");
    });
}

static CHUNK_FRAME: std::sync::LazyLock<Vec<u8>> = std::sync::LazyLock::new(|| {
    let mut chunk = format!("{CHUNK:x}\r\n").into_bytes();
    chunk.extend_from_slice(&CHUNK_BYTES);
    chunk.extend_from_slice(b"\r\n");
    chunk
});

/// A chunked upload of `mib` MiB in 64 KiB chunks to `path`, written as it goes (it stops
/// early if the server closes), then its response.
fn chunked_upload(addr: SocketAddr, path: &str, mib: usize) -> (Resp, Client) {
    let head = format!("POST {path} HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    bomb_with(
        addr,
        head.into_bytes(),
        CHUNK_FRAME.as_slice(),
        mib * (1 << 20) / CHUNK,
        b"0\r\n\r\n",
    )
}

/// A Content-Length past `max_body_size` (413 before any body byte is read), one that
/// does not fit in a u64 (400), endless chunked bodies to a reading handler (413 once past
/// `max_body_size`, from 10 connections at once, RSS flat) and to a handler that never
/// reads (answered, then closed rather than drained).
#[test]
fn body_bombs_are_refused_and_closed() {
    let _g = gate();
    bounded(LIMIT, || {
        let addr = start(router(), config());
        let huge = b"POST /sink HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000000000000000\r\n\r\n";
        let (r, mut c) = bomb(addr, huge.to_vec());
        assert_eq!(r.status, 413);
        assert!(r.closes());
        c.expect_closed(IO_TIMEOUT);
        let overflow =
            b"POST /sink HTTP/1.1\r\nHost: t\r\nContent-Length: 99999999999999999999999\r\n\r\n";
        let (r, mut c) = bomb(addr, overflow.to_vec());
        assert_eq!(r.status, 400);
        c.expect_closed(IO_TIMEOUT);
        // Within the limit: read whole.
        let (r, _) = chunked_upload(addr, "/sink", 1);
        assert_eq!((r.status, r.text()), (200, (1usize << 20).to_string()));

        let before = rss();
        let sampler = RssSampler::start(Duration::from_millis(5));
        let hs: Vec<_> = (0..10)
            .map(|_| {
                thread::spawn(move || {
                    // 64 MiB "endless" body: the server gives up after 1 MiB.
                    let (r, mut c) = chunked_upload(addr, "/sink", 64);
                    assert_eq!(r.status, 413, "{}", r.text());
                    c.expect_closed(IO_TIMEOUT);
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let peak = sampler.finish();
        let grew = peak.saturating_sub(before);
        // A handler that never reads: answered, then closed (the body is past
        // max_drain_bytes).
        let (r, mut c) = chunked_upload(addr, "/ignore", 8);
        assert_eq!((r.status, r.text().as_str()), (200, "ignored"));
        c.expect_closed(IO_TIMEOUT);
        eprintln!(
            "body bombs: 10 x 64 MiB chunked uploads answered 413; RSS {} KiB -> peak {} KiB \
             (+{} KiB)",
            before / 1024,
            peak / 1024,
            grew / 1024
        );
        assert!(grew < 8 << 20, "RSS grew by {} KiB", grew / 1024);
        assert_eq!(Client::connect(addr).get("/").text(), "ok");
    });
}

// ---------------------------------------------------------------------------------------
// Half-open connections
// ---------------------------------------------------------------------------------------

/// A client that shuts down its writing side right after its request(s) still gets every
/// response, then EOF.
#[test]
fn half_open_clients_get_their_responses() {
    let _g = gate();
    bounded(LIMIT, || {
        let addr = start(router(), config());
        type Case = (&'static [u8], &'static [(u16, &'static str)]);
        let cases: [Case; 4] = [
            (b"GET / HTTP/1.1\r\nHost: t\r\n\r\n", &[(200, "ok")]),
            (
                b"GET /sleep/200 HTTP/1.1\r\nHost: t\r\n\r\n",
                &[(200, "slept")],
            ),
            (
                b"GET /sleep/100 HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n",
                &[(200, "slept"), (200, "ok")],
            ),
            (
                b"POST /sink HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello",
                &[(200, "5")],
            ),
        ];
        for (req, want) in cases {
            let mut c = Client::connect(addr);
            c.send(req);
            c.s.shutdown(Shutdown::Write).unwrap();
            for (status, body) in want {
                let r = c.response();
                assert_eq!((r.status, r.text().as_str()), (*status, *body));
            }
            c.expect_closed(IO_TIMEOUT);
        }
        // Half a head, then EOF: closed (with at most a 400), promptly.
        let mut c = Client::connect(addr);
        c.send(b"GET / HTTP/1.1\r\nHo");
        c.s.shutdown(Shutdown::Write).unwrap();
        let t = Instant::now();
        let mut rest = Vec::new();
        let _ = c.s.read_to_end(&mut rest);
        assert!(
            rest.is_empty() || rest.starts_with(b"HTTP/1.1 400 "),
            "{:?}",
            String::from_utf8_lossy(&rest)
        );
        assert!(t.elapsed() < Duration::from_secs(2));
    });
}

// ---------------------------------------------------------------------------------------
// Resets
// ---------------------------------------------------------------------------------------

/// Clients that reset (SO_LINGER 0, close) in the middle of a head, of a body, of a
/// pending handler and of a streamed response: the server keeps serving a concurrent
/// client without an error, and every descriptor is released.
#[test]
fn resets_mid_request_and_mid_response_leak_nothing() {
    let _g = gate();
    bounded(LIMIT, || {
        let addr = start(router(), config());
        probe_latency(addr, 1);
        thread::sleep(Duration::from_millis(100));
        let fds_before = fd_count();
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let prober = thread::spawn(move || {
            let mut c = Client::connect(addr);
            let mut n = 0;
            while !st.load(Ordering::Relaxed) {
                assert_eq!(c.get("/").text(), "ok");
                n += 1;
            }
            n
        });
        let mut hs = Vec::new();
        for kind in 0..4 {
            hs.push(thread::spawn(move || {
                for i in 0..50 {
                    let mut c = Client::connect(addr);
                    match kind {
                        0 => c.send(b"GET / HTTP/1.1\r\nHost: t\r\nX-Partial: "),
                        1 => {
                            c.send(
                                b"POST /sink HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n",
                            );
                            c.send(&CHUNK_BYTES[..1000 + i]);
                        }
                        2 => c.send(b"GET /sleep/50 HTTP/1.1\r\nHost: t\r\n\r\n"),
                        _ => {
                            c.send(b"GET /stream/64 HTTP/1.1\r\nHost: t\r\n\r\n");
                            discard(&mut c.s, 100_000 + i * 1000);
                        }
                    }
                    if i % 2 == 0 {
                        thread::sleep(Duration::from_millis(2));
                    }
                    reset(c.s);
                }
            }));
        }
        for h in hs {
            h.join().unwrap();
        }
        thread::sleep(Duration::from_millis(200));
        stop.store(true, Ordering::Relaxed);
        let served = prober.join().unwrap();
        let after = settle_fds(fds_before, 0, Duration::from_secs(5));
        eprintln!(
            "resets: 200 connections reset mid-request/mid-response; a concurrent client \
             made {served} requests; fds {fds_before} -> {after}"
        );
        assert!(served > 0);
        assert!(after <= fds_before, "fds {fds_before} -> {after}: leaked");
        assert_eq!(Client::connect(addr).get("/").text(), "ok");
    });
}

// ---------------------------------------------------------------------------------------
// Stalled bodies
// ---------------------------------------------------------------------------------------

/// A body trickled (or stalled) after a complete head ("R.U.D.Y.") must not hold its
/// connection and handler forever: `body_read_timeout` fails the body read, the service
/// answers, and the connection closes — well within 5 s here.
#[test]
fn stalled_body_is_timed_out() {
    let _g = gate();
    bounded(LIMIT, || {
        let timeout = Duration::from_secs(1);
        let addr = start(router(), config().with_body_read_timeout(Some(timeout)));
        let mut c = Client::connect(addr);
        c.s.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
        let t = Instant::now();
        c.send(b"POST /sink HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n0123456789");
        // The handler's body read fails with the timeout; /sink answers that error as a 400
        // (the connection closes after it: the rest of the body never came).
        let r = c.response();
        let answered = t.elapsed();
        assert_eq!(r.status, 400, "{r:?} {:?}", r.text());
        assert!(
            r.text().contains("body_read_timeout"),
            "the handler saw another error: {:?}",
            r.text()
        );
        assert!(
            answered >= timeout * 9 / 10,
            "the body failed after {answered:?}, before the {timeout:?} body_read_timeout"
        );
        assert!(r.closes(), "the answer should close: {:?}", r.headers);
        c.expect_closed(Duration::from_secs(2));
        let closed = t.elapsed();
        assert!(
            closed < Duration::from_secs(5),
            "a stalled body kept its connection for {closed:?} (body_read_timeout {timeout:?})"
        );
    });
}
