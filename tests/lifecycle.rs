//! Lifecycle under load (issue 6): graceful shutdown loses no accepted request, runtimes
//! started and stopped over and over leak nothing, and panicking handlers disturb nobody
//! else. This file is its own test binary (its own process): it counts the process's
//! threads, descriptors and RSS, so its tests run one at a time (`GATE`), each under a
//! watchdog, with read/write timeouts on every client socket.
//!
//! # What "no accepted request is lost" allows
//!
//! Every request carries a unique id that the handler records when it starts and when it
//! finishes. A request the handler *started* must get a complete, well-formed response
//! (status 200, the exact body). A request that did not get one must have got **zero**
//! response bytes (never a partial response), and its handler must never have started:
//!
//! - a connect refused, or a new connection closed or reset before any response byte:
//!   the connection was never accepted for service (the listener was going away, or the
//!   server closes connections that arrive while draining);
//! - a request written on an idle kept-alive connection that the server closed because
//!   it was draining. HTTP lets a server close an idle persistent connection at any time
//!   (RFC 9112 §9.3, §9.6), and the client cannot tell "closed just before my request
//!   arrived" from "closed with my request unread"; clients retry such requests. It is
//!   allowed only if the previous response on that connection did not say
//!   `Connection: close` (our clients never reuse such a connection), only for requests
//!   written after the signal (less a margin for the loop to read what was sent just
//!   before), and the EOF/RST must come with no response byte;
//! - the same for pipelined requests behind one that was answered with
//!   `Connection: close` (RFC 9112 §9.3.2: the client retries them).
//!
//! Also: the serve future resolves within 3 s of the signal (the slowest handler sleeps
//! 200 ms), no handler is still running when it resolves, new connections are refused
//! after it, and the engine has no connection left.

mod common;

use bytes::Bytes;
use fibr::body::Incoming;
use fibr::{Binding, Config, Engine};
use http::{Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::Full;
use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::future::{Future, IntoFuture};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once};
use std::task::{Context, Poll};
use std::thread;
use std::time::{Duration, Instant};

use common::{
    bounded, closed_within, fd_count, fds, find, is_timeout, rss, settle, thread_count,
    thread_names, try_connect, IO_TIMEOUT,
};

// ---------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------

static GATE: Mutex<()> = Mutex::new(());

fn gate() -> MutexGuard<'static, ()> {
    quiet_expected_panics();
    GATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Handlers here panic thousands of times on purpose: keep those off stderr.
fn quiet_expected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let p = info.payload();
            let msg = p
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| p.downcast_ref::<String>().map(|s| s.as_str()));
            let expected = match msg {
                Some(m) => m.contains("expected by the test"),
                None => p.downcast_ref::<ExpectedPanic>().is_some(),
            };
            if !expected {
                default(info);
            }
        }));
    });
}

/// A non-string panic payload (the runtime must cope with any payload).
struct ExpectedPanic;

/// What became of one request, as its client saw it.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// A whole response: status, body, and whether it said `Connection: close`.
    Complete {
        status: u16,
        body: Vec<u8>,
        close: bool,
    },
    /// No response byte; the connection ended (EOF, reset, or the write failed).
    Nothing { how: String },
    /// Some response bytes, then the connection ended: never allowed for a request that
    /// was answered normally.
    Partial { got: usize, how: String },
    /// No byte and no end within `IO_TIMEOUT`.
    TimedOut { got: usize },
}

/// Reads one response (Content-Length framed, or chunked, or close-delimited) from `s`,
/// with `buf` holding bytes already read past the previous response.
fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> Outcome {
    let mut tmp = [0u8; 16 * 1024];
    let mut fill = |s: &mut TcpStream, buf: &mut Vec<u8>| -> Result<(), String> {
        match s.read(&mut tmp) {
            Ok(0) => Err("EOF".into()),
            Ok(n) => {
                buf.extend_from_slice(&tmp[..n]);
                Ok(())
            }
            Err(e) if is_timeout(&e) => Err("timeout".into()),
            Err(e) => Err(format!("{:?}", e.kind())),
        }
    };
    let end = loop {
        if let Some(end) = find(buf, b"\r\n\r\n") {
            break end;
        }
        if let Err(how) = fill(s, buf) {
            return match (how.as_str(), buf.len()) {
                ("timeout", got) => Outcome::TimedOut { got },
                (_, 0) => Outcome::Nothing { how },
                (_, got) => Outcome::Partial { got, how },
            };
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.strip_prefix("http/1.1 "))
        .and_then(|l| l.get(..3))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let mut len = None;
    let mut chunked = false;
    let mut close = false;
    for l in lines {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        match (k.trim(), v.trim()) {
            ("content-length", v) => len = v.parse::<usize>().ok(),
            ("transfer-encoding", v) => chunked = v.contains("chunked"),
            ("connection", v) => close = v.contains("close"),
            _ => {}
        }
    }
    let start = end + 4;
    if let Some(len) = len {
        while buf.len() < start + len {
            if let Err(how) = fill(s, buf) {
                let got = buf.len();
                return match how.as_str() {
                    "timeout" => Outcome::TimedOut { got },
                    _ => Outcome::Partial { got, how },
                };
            }
        }
        let body = buf[start..start + len].to_vec();
        buf.drain(..start + len);
        return Outcome::Complete {
            status,
            body,
            close,
        };
    }
    if chunked {
        // Decode chunks; a missing last chunk is a partial response.
        let mut body = Vec::new();
        let mut pos = start;
        loop {
            let Some(eol) = find(&buf[pos..], b"\r\n") else {
                if let Err(how) = fill(s, buf) {
                    let got = buf.len();
                    return match how.as_str() {
                        "timeout" => Outcome::TimedOut { got },
                        _ => Outcome::Partial { got, how },
                    };
                }
                continue;
            };
            let size_line = String::from_utf8_lossy(&buf[pos..pos + eol]).to_string();
            let size = usize::from_str_radix(size_line.split(';').next().unwrap().trim(), 16)
                .unwrap_or(usize::MAX);
            if size == usize::MAX {
                return Outcome::Partial {
                    got: buf.len(),
                    how: format!("bad chunk size {size_line:?}"),
                };
            }
            let need = pos + eol + 2 + size + 2;
            while buf.len() < need {
                if let Err(how) = fill(s, buf) {
                    let got = buf.len();
                    return match how.as_str() {
                        "timeout" => Outcome::TimedOut { got },
                        _ => Outcome::Partial { got, how },
                    };
                }
            }
            body.extend_from_slice(&buf[pos + eol + 2..pos + eol + 2 + size]);
            pos = need;
            if size == 0 {
                buf.drain(..pos);
                return Outcome::Complete {
                    status,
                    body,
                    close,
                };
            }
        }
    }
    // Close-delimited.
    loop {
        match fill(s, buf) {
            Ok(()) => {}
            Err(how) if how == "EOF" => {
                let body = buf[start..].to_vec();
                buf.clear();
                return Outcome::Complete {
                    status,
                    body,
                    close: true,
                };
            }
            Err(how) => {
                return Outcome::Partial {
                    got: buf.len(),
                    how,
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// (a) Graceful shutdown under load
// ---------------------------------------------------------------------------------------

/// The server's own record of each request: when its handler started and finished.
#[derive(Default)]
struct Ledger {
    started: HashMap<String, Instant>,
    finished: HashMap<String, Instant>,
}

type SharedLedger = Arc<Mutex<Ledger>>;

type LedgerResponse = Result<Response<Full<Bytes>>, Infallible>;
type LedgerFuture = Pin<Box<dyn Future<Output = LedgerResponse> + Send>>;

/// `GET /r/{id}/{delay_ms}/{pad}`: records the id, sleeps on fibr's timers, answers with
/// the id and `pad` bytes of padding. Anything else: 404.
fn ledger_app(
    ledger: SharedLedger,
) -> impl tower::Service<
    Request<Incoming>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future = LedgerFuture,
> + Clone {
    tower::service_fn(move |req: Request<Incoming>| {
        let ledger = ledger.clone();
        let path = req.uri().path().to_string();
        Box::pin(async move {
            let parts: Vec<&str> = path.split('/').collect();
            let (id, delay, pad) = match parts.as_slice() {
                ["", "r", id, delay, pad] => (
                    id.to_string(),
                    delay.parse::<u64>().unwrap_or(0),
                    pad.parse::<usize>().unwrap_or(0),
                ),
                _ => {
                    let mut r = Response::new(Full::new(Bytes::from_static(b"no")));
                    *r.status_mut() = StatusCode::NOT_FOUND;
                    return Ok(r);
                }
            };
            ledger
                .lock()
                .unwrap()
                .started
                .insert(id.clone(), Instant::now());
            if delay > 0 {
                fibr::time::sleep(Duration::from_millis(delay)).await;
            }
            let mut body = id.clone().into_bytes();
            body.extend(std::iter::repeat_n(b'.', pad));
            ledger.lock().unwrap().finished.insert(id, Instant::now());
            Ok(Response::new(Full::new(Bytes::from(body))))
        }) as LedgerFuture
    })
}

fn expected_body(id: &str, pad: usize) -> Vec<u8> {
    let mut b = id.as_bytes().to_vec();
    b.extend(std::iter::repeat_n(b'.', pad));
    b
}

/// One request as a client saw it.
#[derive(Debug, Clone)]
struct Record {
    id: String,
    pad: usize,
    sent: Instant,
    done: Instant,
    /// Written on a connection that had already carried a response.
    reused: bool,
    /// Position in a pipelined batch (0 = first).
    in_batch: usize,
    outcome: Outcome,
}

/// How a client behaves.
#[derive(Clone, Copy, Debug)]
enum Style {
    /// Keep-alive, one request at a time; every request sleeps 150–200 ms in the handler.
    Slow,
    /// Keep-alive, one request at a time; one in three sleeps 50–200 ms, the rest none.
    Mixed,
    /// Keep-alive, three requests per write (pipelined), the middle one slow.
    Pipelined,
    /// A new connection per request (`Connection: close`).
    Churn,
}

/// A small deterministic PRNG (xorshift) so each client's mix is reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What one client thread reports.
#[derive(Default)]
struct ClientLog {
    records: Vec<Record>,
    /// Connects refused (after the signal) or failed.
    refused: usize,
    /// Connections that were accepted but closed/reset before any response byte, with
    /// no request reaching a handler (recorded per request in `records`).
    violations: Vec<String>,
}

fn run_client(
    idx: usize,
    style: Style,
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    signalled: Arc<Mutex<Option<Instant>>>,
) -> ClientLog {
    let mut log = ClientLog::default();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((idx as u64 + 1) * 0x1234_5678));
    let mut seq = 0usize;
    let mut next = |rng: &mut Rng, slow: bool| -> (String, u64, usize) {
        seq += 1;
        let delay = match style {
            Style::Slow => 150 + rng.below(51),
            _ if slow => 50 + rng.below(151),
            _ => 0,
        };
        let pad = (rng.below(8) * 700) as usize;
        (format!("c{idx}-{seq}"), delay, pad)
    };
    'conns: while !stop.load(Ordering::Acquire) {
        let mut s = match try_connect(addr) {
            Ok(s) => s,
            Err(e) => {
                if signalled.lock().unwrap().is_none() {
                    log.violations.push(format!(
                        "client {idx}: connect failed before the signal: {e}"
                    ));
                }
                log.refused += 1;
                if e.kind() == io::ErrorKind::ConnectionRefused {
                    // The listener is gone: the server has stopped accepting.
                    break 'conns;
                }
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let mut buf = Vec::new();
        let mut reused = false;
        loop {
            if stop.load(Ordering::Acquire) {
                break 'conns;
            }
            let batch: Vec<(String, u64, usize)> = match style {
                Style::Pipelined => vec![
                    next(&mut rng, false),
                    next(&mut rng, true),
                    next(&mut rng, false),
                ],
                Style::Mixed => {
                    let slow = rng.below(3) == 0;
                    vec![next(&mut rng, slow)]
                }
                _ => vec![next(&mut rng, false)],
            };
            let mut wire = Vec::new();
            for (id, delay, pad) in batch.iter() {
                wire.extend_from_slice(
                    format!("GET /r/{id}/{delay}/{pad} HTTP/1.1\r\nHost: t\r\n").as_bytes(),
                );
                if matches!(style, Style::Churn) {
                    wire.extend_from_slice(b"Connection: close\r\n");
                }
                wire.extend_from_slice(b"\r\n");
            }
            let sent = Instant::now();
            let write = s.write_all(&wire);
            let mut ended = false;
            let mut conn_closes = false;
            for (k, (id, _, pad)) in batch.iter().enumerate() {
                let outcome = if ended {
                    Outcome::Nothing {
                        how: "after an earlier response ended the connection".into(),
                    }
                } else if let Err(e) = &write {
                    // The server closed the connection before (or while) we wrote; a
                    // response may still have come.
                    match read_response(&mut s, &mut buf) {
                        Outcome::Nothing { .. } => Outcome::Nothing {
                            how: format!("write failed: {:?}", e.kind()),
                        },
                        other => other,
                    }
                } else {
                    read_response(&mut s, &mut buf)
                };
                let complete_close = match &outcome {
                    Outcome::Complete { close, .. } => *close,
                    _ => {
                        ended = true;
                        false
                    }
                };
                if complete_close {
                    // Nothing after a `Connection: close` response will be answered.
                    ended = true;
                    conn_closes = true;
                }
                log.records.push(Record {
                    id: id.clone(),
                    pad: *pad,
                    sent,
                    done: Instant::now(),
                    reused,
                    in_batch: k,
                    outcome,
                });
            }
            if ended {
                if conn_closes && buf.is_empty() {
                    if let Err(e) = closed_within(&mut s, Duration::from_secs(2)) {
                        log.violations.push(format!(
                            "client {idx}: after `Connection: close` the server did not close: {e}"
                        ));
                    }
                }
                continue 'conns;
            }
            reused = true;
        }
    }
    log
}

/// Graceful shutdown under load: 8 clients (keep-alive slow, mixed, pipelined, churn)
/// hammer a `fibr::serve` server with `with_graceful_shutdown`; the signal comes
/// mid-load. Checks the rules in the file's header.
#[test]
fn graceful_shutdown_under_load_loses_no_accepted_request() {
    let _g = gate();
    bounded(Duration::from_secs(25), || {
        let engine = Engine::new(Config::default(), []).expect("engine");
        let ledger: SharedLedger = Arc::default();
        let (listener, addr) = engine.block_on(async {
            let l = fibr::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let a = l.local_addr().unwrap();
            (l, a)
        });
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let resolved: Arc<Mutex<Option<Instant>>> = Arc::default();
        let r2 = resolved.clone();
        let app = ledger_app(ledger.clone());
        let serve = engine.spawn(async move {
            let out = fibr::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await;
            *r2.lock().unwrap() = Some(Instant::now());
            out
        });

        let stop = Arc::new(AtomicBool::new(false));
        let signalled: Arc<Mutex<Option<Instant>>> = Arc::default();
        let styles = [
            Style::Slow,
            Style::Mixed,
            Style::Mixed,
            Style::Mixed,
            Style::Mixed,
            Style::Mixed,
            Style::Pipelined,
            Style::Churn,
        ];
        let clients: Vec<_> = styles
            .iter()
            .enumerate()
            .map(|(i, &style)| {
                let (stop, signalled) = (stop.clone(), signalled.clone());
                thread::Builder::new()
                    .name(format!("client-{i}"))
                    .spawn(move || run_client(i, style, addr, stop, signalled))
                    .unwrap()
            })
            .collect();

        thread::sleep(Duration::from_millis(600));
        let t_signal = Instant::now();
        *signalled.lock().unwrap() = Some(t_signal);
        tx.send(()).unwrap();

        let out = engine
            .block_on(fibr::time::timeout(Duration::from_secs(3), serve))
            .expect("the serve future did not resolve within 3 s of the signal")
            .expect("serve task");
        out.expect("serve returned an error");
        let t_resolved = resolved.lock().unwrap().expect("resolved time");
        // Let clients see the closed listener, then stop those that still loop.
        thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Release);
        let logs: Vec<ClientLog> = clients.into_iter().map(|c| c.join().unwrap()).collect();

        // New connections are refused now.
        match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            other => panic!("connect after the serve future resolved: {other:?}"),
        }
        let left = {
            let until = Instant::now() + Duration::from_secs(2);
            while engine.connections() > 0 && Instant::now() < until {
                thread::sleep(Duration::from_millis(10));
            }
            engine.connections()
        };
        engine.shutdown(Duration::from_millis(200));

        // ---- the rules ----
        let ledger = ledger.lock().unwrap();
        let mut problems: Vec<String> = Vec::new();
        for l in logs.iter() {
            problems.extend(l.violations.iter().cloned());
        }
        if left != 0 {
            problems.push(format!("{left} connections still open after the drain"));
        }
        let margin = Duration::from_millis(100);
        let (mut complete, mut nothing, mut after_signal_done, mut inflight_at_signal) =
            (0, 0, 0, 0);
        let mut closes_while_draining = 0;
        let mut how_nothing: HashMap<String, usize> = HashMap::new();
        let mut answered: HashSet<&str> = HashSet::new();
        for r in logs.iter().flat_map(|l| l.records.iter()) {
            let started = ledger.started.contains_key(&r.id);
            match &r.outcome {
                Outcome::Complete {
                    status,
                    body,
                    close,
                } => {
                    complete += 1;
                    answered.insert(&r.id);
                    if *status != 200 || *body != expected_body(&r.id, r.pad) {
                        problems.push(format!(
                            "{}: status {status}, body of {} bytes (want {}): {:?}",
                            r.id,
                            body.len(),
                            r.pad + r.id.len(),
                            String::from_utf8_lossy(&body[..body.len().min(40)])
                        ));
                    }
                    if !started {
                        problems.push(format!("{}: answered but never started", r.id));
                    }
                    if r.done > t_signal {
                        after_signal_done += 1;
                        if r.sent < t_signal {
                            inflight_at_signal += 1;
                        }
                        if *close {
                            closes_while_draining += 1;
                        }
                    }
                }
                Outcome::Nothing { how } => {
                    nothing += 1;
                    *how_nothing.entry(how.clone()).or_default() += 1;
                    if started {
                        problems.push(format!(
                            "{}: LOST: its handler ran (accepted) but the client got no \
                             response ({how}; sent {:?} {} the signal)",
                            r.id,
                            if r.sent >= t_signal {
                                r.sent - t_signal
                            } else {
                                t_signal - r.sent
                            },
                            if r.sent >= t_signal {
                                "after"
                            } else {
                                "before"
                            }
                        ));
                    }
                    if r.sent + margin < t_signal {
                        problems.push(format!(
                            "{}: dropped without a response though written {:?} before the \
                             signal ({how}, reused {}, batch pos {})",
                            r.id,
                            t_signal - r.sent,
                            r.reused,
                            r.in_batch
                        ));
                    }
                }
                Outcome::Partial { got, how } => problems.push(format!(
                    "{}: partial response ({got} bytes, then {how})",
                    r.id
                )),
                Outcome::TimedOut { got } => problems.push(format!(
                    "{}: no response and no close within {IO_TIMEOUT:?} ({got} bytes)",
                    r.id
                )),
            }
        }
        for (id, t) in ledger.started.iter() {
            match ledger.finished.get(id) {
                None => problems.push(format!("{id}: handler never finished")),
                Some(f) if *f > t_resolved => problems.push(format!(
                    "{id}: handler finished {:?} after the serve future resolved",
                    *f - t_resolved
                )),
                Some(_) => {}
            }
            if !answered.contains(id.as_str()) {
                problems.push(format!(
                    "{id}: started {:?} {} the signal but never answered",
                    t.max(&t_signal).duration_since(*t.min(&t_signal)),
                    if *t > t_signal { "after" } else { "before" }
                ));
            }
        }
        let refused: usize = logs.iter().map(|l| l.refused).sum();
        eprintln!(
            "graceful shutdown under load: {complete} requests answered ({after_signal_done} \
             after the signal, {inflight_at_signal} of them in flight at it, \
             {closes_while_draining} with Connection: close), {nothing} unanswered and never \
             started ({how_nothing:?}), {refused} connects refused; resolved {:?} after the \
             signal",
            t_resolved - t_signal
        );
        problems.sort();
        problems.dedup();
        assert!(
            problems.is_empty(),
            "{} problem(s):\n{}",
            problems.len(),
            problems[..problems.len().min(30)].join("\n")
        );
        assert!(
            complete > 100,
            "too little load to mean anything: {complete}"
        );
        assert!(
            inflight_at_signal > 0,
            "no request was in flight at the signal: the test did not test the drain"
        );
        assert!(
            t_resolved - t_signal < Duration::from_secs(3),
            "resolved {:?} after the signal",
            t_resolved - t_signal
        );
    });
}

// ---------------------------------------------------------------------------------------
// (b) Runtimes started and stopped over and over
// ---------------------------------------------------------------------------------------

/// Counts drops of the futures parked at shutdown.
static PARKED_DROPPED: AtomicUsize = AtomicUsize::new(0);

struct CountDrop;

impl Drop for CountDrop {
    fn drop(&mut self) {
        PARKED_DROPPED.fetch_add(1, Ordering::SeqCst);
    }
}

/// One lifetime: an engine (no bindings) whose `block_on` binds a `fibr::net::TcpListener`
/// and serves it with `fibr::serve(..).with_graceful_shutdown(..)`; a few keep-alive
/// requests (one sleeps on a timer), a second connection left idle. Meanwhile tasks park
/// on what a runtime owns: a 1-hour timer, one holding a `fibr::net::TcpStream` while
/// parked on such a timer, one reading a `fibr::net::TcpStream` from a peer that never
/// writes, one in `accept` on a second listener. With `detach`, their handles are dropped
/// and they are still pending when the engine shuts down (the runtime must drop them);
/// without, they are aborted and awaited first (the clean way out). Signal, serve
/// resolves, engine shutdown, drop. Returns how many parked futures it started.
fn serve_lifetime(i: usize, detach: bool) -> usize {
    let engine = Engine::new(Config::default().with_workers(2), []).expect("engine");
    let ledger: SharedLedger = Arc::default();
    let (listener, addr, spare) = engine.block_on(async {
        let l = fibr::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let spare = fibr::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let a = l.local_addr().unwrap();
        (l, a, spare)
    });
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let serve = engine.spawn(
        fibr::serve(listener, ledger_app(ledger.clone()))
            .with_graceful_shutdown(async move {
                let _ = rx.await;
            })
            .into_future(),
    );
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap();
    let parked = vec![
        engine.spawn(async move {
            let _d = CountDrop;
            let s = fibr::net::TcpStream::connect(silent_addr).await?;
            let mut b = [0u8; 1];
            s.read(&mut b).await.map(|_| ())
        }),
        engine.spawn(async move {
            let _d = CountDrop;
            fibr::time::sleep(Duration::from_secs(3600)).await;
            Ok(())
        }),
        engine.spawn(async move {
            let _d = CountDrop;
            let s = fibr::net::TcpStream::connect(silent_addr).await?;
            fibr::time::sleep(Duration::from_secs(3600)).await;
            drop(s);
            Ok(())
        }),
        engine.spawn(async move {
            let _d = CountDrop;
            spare.accept().await.map(|_| ())
        }),
    ];
    let n = parked.len();

    let mut a = try_connect(addr).expect("connect");
    let mut buf = Vec::new();
    for k in 0..3 {
        let delay = if k == 1 { 20 } else { 0 };
        let id = format!("l{i}-{k}");
        a.write_all(format!("GET /r/{id}/{delay}/100 HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
            .unwrap();
        match read_response(&mut a, &mut buf) {
            Outcome::Complete { status, body, .. } => {
                assert_eq!(status, 200);
                assert_eq!(body, expected_body(&id, 100));
            }
            other => panic!("lifetime {i}, request {k}: {other:?}"),
        }
    }
    let mut idle = try_connect(addr).expect("connect");
    idle.write_all(b"GET /r/idle/0/0 HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut ibuf = Vec::new();
    assert!(matches!(
        read_response(&mut idle, &mut ibuf),
        Outcome::Complete { status: 200, .. }
    ));
    drop(a);
    tx.send(()).unwrap();
    // The drain closes the idle connection; the client closes its end on seeing that (as
    // clients do: the server may linger until then).
    closed_within(&mut idle, Duration::from_secs(2)).expect("idle connection closed by the drain");
    drop(idle);
    engine
        .block_on(fibr::time::timeout(Duration::from_secs(3), serve))
        .expect("serve did not resolve within 3 s of the signal")
        .expect("serve task")
        .expect("serve");
    if detach {
        drop(parked);
    } else {
        for h in parked.iter() {
            assert!(!h.is_finished());
            h.abort();
        }
        for h in parked {
            let e = engine
                .block_on(fibr::time::timeout(Duration::from_secs(2), h))
                .expect("an aborted task did not finish within 2 s")
                .expect_err("aborted");
            assert!(e.is_cancelled(), "{e:?}");
        }
    }
    engine.shutdown(Duration::from_millis(100));
    drop(engine);
    drop(silent);
    n
}

/// 50 lifetimes of an engine serving with `fibr::serve` in one process: after each,
/// threads and descriptors are back to the baseline, and RSS does not creep.
///
/// (Regression, about one lifetime in 20-40: `Shared::start_draining` once took the
/// connection list out and put it back, so a connection closing meanwhile stayed listed,
/// a cycle (conn -> handler -> Shared -> conn) that kept the whole runtime alive.)
#[test]
fn serve_runtime_start_stop_50_times_leaks_nothing() {
    let _g = gate();
    bounded(Duration::from_secs(40), || lifetimes(50, false));
}

/// Tasks still pending (and detached) when their engine shuts down belong to the runtime
/// (as in tokio): the shutdown must drop their futures, and with them the sockets and
/// timers they hold. 10 lifetimes, each leaving 4 such tasks.
///
/// (Regression: a detached task keeps itself alive (`Task::keep`), and nothing released
/// that at shutdown, so each lifetime leaked the tasks, their sockets and, through the
/// sockets' `Registration`, the loop's epoll and eventfd.)
#[test]
fn detached_tasks_pending_at_shutdown_are_dropped() {
    let _g = gate();
    bounded(Duration::from_secs(30), || lifetimes(10, true));
}

fn lifetimes(n: usize, detach: bool) {
    let (threads0, fds0) = (thread_count(), fd_count());
    let fds_before = fds();
    // One warm-up lifetime (the clean kind): process-wide state (fibr's background tokio
    // runtime with feature `tokio`, thread-local buffer lists) is made once, not per engine.
    serve_lifetime(0, false);
    let (threads1, fds1) = settle(threads0, fds0);
    let fds_after_one = fds();
    let rss1 = rss();
    let t = Instant::now();
    let mut worst = (0, 0);
    let mut rss_mid = 0;
    for i in 1..=n {
        let dropped0 = PARKED_DROPPED.load(Ordering::SeqCst);
        let parked = serve_lifetime(i, detach);
        let (th, fd) = settle(threads1, fds1);
        let dropped = PARKED_DROPPED.load(Ordering::SeqCst) - dropped0;
        if th > threads1 || fd > fds1 || dropped != parked {
            let now = fds();
            let extra: Vec<&String> = now.iter().filter(|f| !fds_after_one.contains(f)).collect();
            panic!(
                "lifetime {i} (detached tasks: {detach}) left threads {threads1} -> {th} \
                 ({:?}), fds {fds1} -> {fd} (new: {extra:?}); {dropped} of {parked} parked \
                 futures dropped",
                thread_names(),
            );
        }
        worst = (worst.0.max(th), worst.1.max(fd));
        if i == n / 5 {
            rss_mid = rss();
        }
    }
    let took = t.elapsed();
    let rss2 = rss();
    let new_fds: Vec<&String> = fds_after_one
        .iter()
        .filter(|f| !fds_before.contains(f))
        .collect();
    eprintln!(
        "serve start/stop ({n} lifetimes, detached tasks: {detach}): threads {threads0} \
         (before) / {threads1} (after one) -> worst {} after each; fds {fds0} / {fds1} -> \
         worst {} (kept after the first: {new_fds:?}); RSS {} KiB after one, {} KiB after \
         {}, {} KiB after {}; {n} lifetimes in {took:?}",
        worst.0,
        worst.1,
        rss1 / 1024,
        rss_mid / 1024,
        n / 5 + 1,
        rss2 / 1024,
        n + 1
    );
    assert!(
        rss2 < rss1 + (4 << 20),
        "RSS {} KiB -> {} KiB over {n} lifetimes",
        rss1 / 1024,
        rss2 / 1024
    );
    assert!(
        rss2 < rss_mid + (2 << 20),
        "RSS still creeping after warm-up: {} KiB -> {} KiB",
        rss_mid / 1024,
        rss2 / 1024
    );
}

// ---------------------------------------------------------------------------------------
// (c) Panicking handlers among healthy connections
// ---------------------------------------------------------------------------------------

/// A body that yields `first` and then panics on its next poll.
struct PanickingBody {
    first: Option<Bytes>,
}

impl http_body::Body for PanickingBody {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.first.take() {
            Some(b) => Poll::Ready(Some(Ok(Frame::data(b)))),
            None => panic!("body panic mid-stream (expected by the test)"),
        }
    }
}

/// A whole body whose `Drop` panics (after the response went out, or when the
/// connection drops it).
struct DropPanics(Option<Bytes>);

impl http_body::Body for DropPanics {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.take().map(|b| Ok(Frame::data(b))))
    }
    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.0.as_ref().map_or(0, |b| b.len() as u64))
    }
}

impl Drop for DropPanics {
    fn drop(&mut self) {
        if !thread::panicking() {
            panic!("body drop panic (expected by the test)");
        }
    }
}

enum AnyBody {
    Full(Full<Bytes>),
    Panicking(PanickingBody),
    DropPanics(DropPanics),
}

impl http_body::Body for AnyBody {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            AnyBody::Full(b) => Pin::new(b).poll_frame(cx),
            AnyBody::Panicking(b) => Pin::new(b).poll_frame(cx),
            AnyBody::DropPanics(b) => Pin::new(b).poll_frame(cx),
        }
    }
    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            AnyBody::Full(b) => b.size_hint(),
            AnyBody::Panicking(_) => http_body::SizeHint::default(),
            AnyBody::DropPanics(b) => b.size_hint(),
        }
    }
}

/// A hand-written service (one clone per connection) that panics in every place a
/// service can: `call`, its future before and after an await (polled again from a timer
/// wake-up), `poll_ready` (armed by a request, panics at the next one), the response
/// body mid-stream, and the body's `Drop`. `/ok/{id}` answers normally.
#[derive(Clone, Default)]
struct Panicky {
    panic_next_ready: bool,
    ok: Arc<AtomicUsize>,
}

impl tower::Service<Request<Incoming>> for Panicky {
    type Response = Response<AnyBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<AnyBody>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        if std::mem::take(&mut self.panic_next_ready) {
            panic!("poll_ready panic (expected by the test)");
        }
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Incoming>) -> Self::Future {
        let path = req.uri().path().to_string();
        let ok = self.ok.clone();
        let full = |s: String| Response::new(AnyBody::Full(Full::new(Bytes::from(s))));
        match path.as_str() {
            "/panic/call" => panic!("call panic (expected by the test)"),
            "/panic/any" => std::panic::panic_any(ExpectedPanic),
            "/panic/arm-ready" => {
                self.panic_next_ready = true;
                Box::pin(async move { Ok(full("armed".into())) })
            }
            _ => Box::pin(async move {
                if path == "/panic/now" {
                    panic!("future panic (expected by the test)");
                }
                if path == "/panic/later" {
                    fibr::time::sleep(Duration::from_millis(3)).await;
                    panic!("future panic after an await (expected by the test)");
                }
                if path == "/panic/body" {
                    return Ok(Response::new(AnyBody::Panicking(PanickingBody {
                        first: Some(Bytes::from_static(b"first part")),
                    })));
                }
                if path == "/panic/drop" {
                    return Ok(Response::new(AnyBody::DropPanics(DropPanics(Some(
                        Bytes::from_static(b"dropped"),
                    )))));
                }
                if let Some(id) = path.strip_prefix("/ok/") {
                    if id.ends_with('7') {
                        fibr::time::sleep(Duration::from_millis(2)).await;
                    }
                    ok.fetch_add(1, Ordering::Relaxed);
                    return Ok(full(id.to_string()));
                }
                Ok(full("?".into()))
            }),
        }
    }
}

fn get(s: &mut TcpStream, buf: &mut Vec<u8>, path: &str) -> Outcome {
    if let Err(e) = s.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes()) {
        return Outcome::Nothing {
            how: format!("write failed: {e}"),
        };
    }
    read_response(s, buf)
}

/// 16 connections cycle through the kinds of panic a handler can cause (`call`, a
/// non-string payload, the future before and after an await, `poll_ready`, the body
/// mid-stream) while 6 others do ordinary keep-alive requests: the healthy connections
/// never see an error, a close or a stall; panics in `call`/the future give a 500 on a
/// connection that lives on; a `poll_ready` panic gives a 500 and a close; a body panic
/// mid-stream closes that connection; no worker is lost; afterwards every connection is
/// gone and a new one is served.
#[test]
fn panics_in_many_connections_disturb_no_other() {
    let _g = gate();
    bounded(Duration::from_secs(25), || {
        panic_storm(&[0, 1, 2, 3, 4, 5], 16)
    });
}

/// A response body whose `Drop` panics (the one panic the HTTP server does not catch
/// itself): that connection may close, but the connection layer must survive it.
///
/// (Regression: the panic poisoned the connection's `context` mutex, and `close_now`'s
/// `lock().unwrap()` then panicked outside any `catch_unwind`, killing workers and leaving
/// the connection counted open forever.)
#[test]
fn a_body_whose_drop_panics_kills_nothing_else() {
    let _g = gate();
    bounded(Duration::from_secs(25), || panic_storm(&[6], 4));
}

/// Runs victims cycling through `kinds` (0 call, 1 any-payload, 2 future, 3 future after
/// an await, 4 poll_ready, 5 body mid-stream, 6 body drop) next to healthy clients.
fn panic_storm(kinds: &[usize], n_victims: usize) {
    const WORKERS: usize = 2;
    let svc = Panicky::default();
    let ok = svc.ok.clone();
    let engine = Engine::new(
        Config::default().with_workers(WORKERS),
        [Binding::tcp("127.0.0.1:0", fibr::http::Server::new(svc))],
    )
    .expect("engine");
    let addr = engine.binding_addrs(0)[0];
    let threads_before = thread_count();
    assert_eq!(engine.workers(), WORKERS);

    let stop = Arc::new(AtomicBool::new(false));
    let healthy: Vec<_> = (0..6)
        .map(|i| {
            let stop = stop.clone();
            thread::spawn(move || -> Result<(usize, Duration), String> {
                let mut s = try_connect(addr).map_err(|e| e.to_string())?;
                let mut buf = Vec::new();
                let (mut n, mut worst) = (0usize, Duration::ZERO);
                while !stop.load(Ordering::Acquire) {
                    let id = format!("h{i}-{n}");
                    let t = Instant::now();
                    match get(&mut s, &mut buf, &format!("/ok/{id}")) {
                        Outcome::Complete {
                            status: 200,
                            body,
                            close: false,
                        } if body == id.as_bytes() => {}
                        other => return Err(format!("healthy {i}, request {n}: {other:?}")),
                    }
                    worst = worst.max(t.elapsed());
                    n += 1;
                }
                Ok((n, worst))
            })
        })
        .collect();

    let victims: Vec<_> = (0..n_victims)
        .map(|i| {
            let stop = stop.clone();
            let kinds = kinds.to_vec();
            thread::spawn(move || -> Result<[usize; 7], String> {
                // Counts per kind: call, any, now, later, ready, body, drop.
                let mut counts = [0usize; 7];
                let mut s = try_connect(addr).map_err(|e| e.to_string())?;
                let mut buf = Vec::new();
                let mut k = i;
                while !stop.load(Ordering::Acquire) {
                    k += 1;
                    let kind = kinds[k % kinds.len()];
                    let keep = |s: &mut TcpStream, buf: &mut Vec<u8>, what: &str| {
                        // The connection lives on after a 500.
                        match get(s, buf, "/ok/after") {
                            Outcome::Complete {
                                status: 200, body, ..
                            } if body == b"after" => Ok(()),
                            other => Err(format!("victim {i}: after {what}: {other:?}")),
                        }
                    };
                    match kind {
                        0..=3 => {
                            let path =
                                ["/panic/call", "/panic/any", "/panic/now", "/panic/later"][kind];
                            match get(&mut s, &mut buf, path) {
                                Outcome::Complete { status: 500, .. } => {}
                                other => return Err(format!("victim {i}: {path}: {other:?}")),
                            }
                            keep(&mut s, &mut buf, path)?;
                        }
                        4 => {
                            match get(&mut s, &mut buf, "/panic/arm-ready") {
                                Outcome::Complete { status: 200, .. } => {}
                                other => return Err(format!("victim {i}: arm: {other:?}")),
                            }
                            match get(&mut s, &mut buf, "/ok/x") {
                                Outcome::Complete {
                                    status: 500,
                                    close: true,
                                    ..
                                } => {}
                                other => {
                                    return Err(format!("victim {i}: poll_ready panic: {other:?}"))
                                }
                            }
                            closed_within(&mut s, Duration::from_secs(2))
                                .map_err(|e| format!("victim {i}: poll_ready panic: {e}"))?;
                            s = try_connect(addr).map_err(|e| e.to_string())?;
                            buf.clear();
                        }
                        5 => {
                            match get(&mut s, &mut buf, "/panic/body") {
                                Outcome::Partial { .. } => {}
                                other => return Err(format!("victim {i}: body panic: {other:?}")),
                            }
                            s = try_connect(addr).map_err(|e| e.to_string())?;
                            buf.clear();
                        }
                        _ => {
                            // A body whose Drop panics: whatever this connection gets,
                            // it must end (no hang); reconnect.
                            let o = get(&mut s, &mut buf, "/panic/drop");
                            if let Outcome::TimedOut { .. } = o {
                                return Err(format!("victim {i}: drop panic: {o:?}"));
                            }
                            if let Outcome::Complete { status: 200, .. } = o {
                                counts[6] += 1000; // answered in full (tallied apart)
                            }
                            s = try_connect(addr).map_err(|e| e.to_string())?;
                            buf.clear();
                        }
                    }
                    counts[kind] += 1;
                }
                Ok(counts)
            })
        })
        .collect();

    thread::sleep(Duration::from_millis(1500));
    let workers_mid = engine.workers();
    stop.store(true, Ordering::Release);
    let mut problems = Vec::new();
    let mut served = 0;
    let mut worst = Duration::ZERO;
    for h in healthy {
        match h.join().unwrap() {
            Ok((n, w)) => {
                served += n;
                worst = worst.max(w);
            }
            Err(e) => problems.push(e),
        }
    }
    let mut ran = [0usize; 7];
    let mut drop_answered = 0;
    for v in victims {
        match v.join().unwrap() {
            Ok(c) => {
                for (k, n) in c.iter().enumerate() {
                    ran[k] += n % 1000;
                }
                drop_answered += c[6] / 1000;
            }
            Err(e) => problems.push(e),
        }
    }
    // Every client connection is closed now: the engine must drop to zero.
    let until = Instant::now() + Duration::from_secs(2);
    while engine.connections() > 0 && Instant::now() < until {
        thread::sleep(Duration::from_millis(10));
    }
    let left = engine.connections();
    let mut fresh = try_connect(addr).expect("connect after the panics");
    let mut buf = Vec::new();
    let after = get(&mut fresh, &mut buf, "/ok/fresh");
    let workers_after = engine.workers();
    let threads_after = thread_count();
    drop(fresh);
    engine.shutdown(Duration::from_millis(100));
    eprintln!(
        "panics: healthy connections served {served} requests (worst latency {worst:?}, \
         {} counted by the service) while victims panicked \
         call/any/now/later/ready/body/drop = {ran:?} times (drop-panic bodies answered \
         in full: {drop_answered}); workers {WORKERS} -> {workers_mid} -> \
         {workers_after}; threads {threads_before} -> {threads_after}",
        ok.load(Ordering::Relaxed)
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        matches!(&after, Outcome::Complete { status: 200, body, .. } if body == b"fresh"),
        "{after:?}"
    );
    assert_eq!(left, 0, "connections left open after every client closed");
    assert!(
        served > 100,
        "healthy clients made too little progress: {served}"
    );
    assert!(
        kinds.iter().all(|&k| ran[k] > 0),
        "a panic kind never ran: {ran:?}"
    );
    assert!(
        worst < Duration::from_secs(1),
        "a healthy request waited {worst:?}"
    );
    // No worker dies (or is replaced: nothing here blocks a worker; allow a stray
    // replacement on a slow machine).
    assert!(
        (WORKERS..=WORKERS + 2).contains(&workers_mid)
            && (WORKERS..=WORKERS + 2).contains(&workers_after),
        "workers {WORKERS} -> {workers_mid} -> {workers_after}"
    );
    assert!(
        threads_after <= threads_before + 1,
        "threads {threads_before} -> {threads_after}"
    );
}

// ---------------------------------------------------------------------------------------
// Wake-ups from outside the runtime
// ---------------------------------------------------------------------------------------

/// A task parked on a channel is woken by a thread that is not one of the runtime's
/// (a shutdown signal sent from `main`, say) promptly, also when the runtime is idle
/// (its workers asleep or waiting in the poller).
#[test]
fn wake_from_a_foreign_thread_is_prompt() {
    let _g = gate();
    bounded(Duration::from_secs(20), || {
        let engine = Engine::new(Config::default().with_workers(2), []).expect("engine");
        let mut worst = Duration::ZERO;
        let mut all = Vec::new();
        for round in 0..10 {
            let (tx, rx) = tokio::sync::oneshot::channel::<Instant>();
            let h = engine.spawn(async move { rx.await.map(|sent| sent.elapsed()) });
            // Let the runtime go idle (workers parked) before the wake.
            thread::sleep(Duration::from_millis(20 + 20 * (round % 3)));
            tx.send(Instant::now()).unwrap();
            let lat = engine
                .block_on(fibr::time::timeout(Duration::from_secs(3), h))
                .expect("the woken task did not finish within 3 s")
                .expect("task")
                .expect("sender dropped");
            worst = worst.max(lat);
            all.push(lat);
        }
        engine.shutdown(Duration::from_millis(100));
        eprintln!("wake from a foreign thread: latencies {all:?}");
        assert!(
            worst < Duration::from_millis(100),
            "a wake from outside the runtime took {worst:?} to run the task"
        );
    });
}
