//! The HTTP/1 load generator of the 10,000-connection and fixed-rate scenarios (issue 31),
//! this bench's own: one thread (this process, pinned to the load CPU), edge-triggered
//! epoll, keep-alive connections with one request in flight on each, every response checked
//! (status 200, a `content-length` body, and the body itself: the echo of the request's, or
//! `hello` where that is the answer).
//!
//! It drives its connections one of two ways:
//!
//! - **closed loop** (`c10k`): every connection sends its request, and its next one as soon
//!   as the response is read, as wrk does; latency from the send. With 10,000 connections
//!   each POSTing its own 1 KiB body to `/echo`, every echo compared byte for byte.
//! - **fixed rate** (`rate50`, `rate80`), open loop, coordinated omission corrected: request
//!   `j` is *scheduled* at `t0 + j / rate` on connection `j mod N` (so each connection every
//!   `N / rate`, the connections staggered), sent as soon as its time has come and its
//!   connection is free, and its latency is counted from the scheduled time, not from the
//!   send. A server that stalls a connection is charged for the requests that queue behind
//!   the stall, as the users who would have sent them at that rate would have waited (the
//!   correction wrk2 and `oha --latency-correction` make). The loop sleeps on a `timerfd`
//!   (absolute CLOCK_MONOTONIC time) until the next send when it is further than
//!   [`SPIN`] away, and polls epoll without sleeping when it is nearer, so sends leave on
//!   time.
//!
//! Percentiles are nearest-rank over every request's latency (all kept, sorted).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use crate::epoll::{Epoll, EMPTY_EVENT};
use crate::idle;
use crate::load::{self, Load, Measured};
use crate::proc::RunningServer;
use crate::{Settings, IO_TIMEOUT};

/// What the README says of these scenarios (beside the table).
pub const README_NOTE: &str = "The 10,000-connection and fixed-rate rows (issue 31) are \
    loaded by this bench's own HTTP/1 generator (`benches/compare/h1load.rs`: one thread on \
    the load CPU, epoll, keep-alive connections with one request in flight on each, every \
    response checked: status 200, its `content-length` body byte for byte). In the \
    10,000-connection row each connection POSTs a 1 KiB body of its own to `/echo` and sends \
    the next as soon as the echo is read (the floor answers `hello`); latency from the send, \
    peak RSS is the server's VmHWM with the connections open. The fixed-rate rows send `GET /` \
    over 100 connections at 50 % and 80 % of axum::serve's saturated requests/s on this \
    machine (the keep-alive row's axum::serve figure from the same run, or when that row \
    did not run, a wrk phase of the same shape; the rows' titles say which), open loop: request j is \
    scheduled at t0 + j / rate on connection j mod 100, sent when due and its connection is \
    free, and its latency counted from the scheduled time, so a stalled connection is \
    charged for the requests queued behind it (coordinated omission corrected, as wrk2 \
    does); it polls rather than sleeps when the next send is under 50 µs away, so its CPU % \
    reads high there. Percentiles are over every request.";

/// Connections of the c10k scenario (`--quick` or not: the number is the scenario).
pub const C10K_CONNS: usize = 10_000;
/// Its request body, bytes.
pub const C10K_BODY: usize = 1024;
/// Connections of the fixed-rate scenarios.
pub const RATE_CONNS: usize = 100;
/// A send due sooner than this is waited for by polling, not by sleeping on the timer.
const SPIN: u64 = 50_000;
/// The timer's epoll key (connections are keyed by their index).
const TIMER: u64 = u64::MAX;
/// A response head longer than this fails the phase.
const MAX_HEAD: usize = 16 * 1024;
const HELLO: &[u8] = b"hello";

/// What each connection sends.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Req {
    /// `POST /echo` with a 1 KiB body of the connection's own.
    Echo1K,
    /// `GET /`.
    Get,
}

/// One phase: the requests answered and every one's latency.
pub struct Phase {
    pub requests: u64,
    /// From the first send (or scheduled send) to the last response.
    pub wall: Duration,
    /// ns, sorted.
    lat: Vec<u64>,
}

impl Phase {
    /// The `q` quantile (0 < q ≤ 1) of the latencies, nearest rank, µs.
    pub fn percentile_us(&self, q: f64) -> f64 {
        percentile(&self.lat, q) as f64 / 1e3
    }

    /// The load figures, with the percentiles this generator reports.
    fn into_load(self, s: load::Sampled, idle_rss_kib: u64, target_rps: f64) -> Load {
        let m = Measured {
            requests: self.requests,
            wall: self.wall,
            p99_us: self.percentile_us(0.99),
            errors: 0,
        };
        let mut l = Load::from_parts(s, m, idle_rss_kib);
        l.p50_us = self.percentile_us(0.50);
        l.p999_us = self.percentile_us(0.999);
        l.max_us = self.percentile_us(1.0);
        l.target_rps = target_rps;
        l
    }
}

/// The nearest-rank `q` quantile of sorted `v` (0 when empty).
pub fn percentile(v: &[u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let rank = (q * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// The c10k scenario on `srv`: [`C10K_CONNS`] connections opened, a warm-up, then the
/// measured phase, closed loop. `real`: the server echoes (the floor answers `hello`).
pub fn c10k_run(
    srv: &RunningServer,
    set: &Settings,
    cpu: usize,
    real: bool,
) -> Result<Load, String> {
    let idle_rss_kib = srv.status()?.rss_kib;
    let mut gen = Generator::open(srv.addr, C10K_CONNS, Req::Echo1K, real)?;
    let warm = gen.closed(set.warmup)?;
    if warm.requests == 0 {
        return Err("no request was answered during the warm-up".into());
    }
    srv.check_alive()?;
    let (s, phase) = load::measure(srv, cpu, || gen.closed(set.phase))?;
    drop(gen);
    Ok(phase.into_load(s, idle_rss_kib, 0.0))
}

/// A fixed-rate scenario on `srv`: [`RATE_CONNS`] connections, `GET /` at `rate` requests/s
/// for the warm-up, then for the measured phase.
pub fn rate_run(
    srv: &RunningServer,
    set: &Settings,
    cpu: usize,
    rate: f64,
) -> Result<Load, String> {
    let idle_rss_kib = srv.status()?.rss_kib;
    let mut gen = Generator::open(srv.addr, RATE_CONNS, Req::Get, true)?;
    gen.fixed_rate(set.warmup, rate)?;
    srv.check_alive()?;
    let (s, phase) = load::measure(srv, cpu, || gen.fixed_rate(set.phase, rate))?;
    drop(gen);
    Ok(phase.into_load(s, idle_rss_kib, rate))
}

/// A keep-alive connection.
struct Conn {
    stream: TcpStream,
    /// The request it sends, every time.
    req: Vec<u8>,
    /// Where the body the echo must return starts in `req`.
    body_at: usize,
    /// How much of `req` is written (`req.len()`: all).
    wrote: usize,
    in_flight: bool,
    /// The response so far.
    rx: Vec<u8>,
    /// When the request in flight was sent (closed loop) or scheduled (fixed rate), ns.
    since: u64,
    /// Fixed rate: the schedule index of this connection's next request.
    next: u64,
}

pub struct Generator {
    conns: Vec<Conn>,
    epoll: Epoll,
    /// The response body is the request's (else `hello`).
    echo: bool,
    /// The fixed rate's timer (CLOCK_MONOTONIC), registered as [`TIMER`].
    timer: OwnedFd,
}

impl Generator {
    /// Opens `n` connections (one after another, each handshake completed by the kernel
    /// before the next), then makes them non-blocking. `real`: the server echoes `POST
    /// /echo` (the floor answers everything with `hello`).
    pub fn open(addr: SocketAddr, n: usize, req: Req, real: bool) -> Result<Generator, String> {
        let epoll = Epoll::new().map_err(|e| format!("epoll_create1: {e}"))?;
        // SAFETY: timerfd_create takes a clock id and flags.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(format!("timerfd_create: {}", io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just made and is owned by nothing else.
        let timer = unsafe { OwnedFd::from_raw_fd(fd) };
        epoll
            .add(timer.as_raw_fd(), TIMER)
            .map_err(|e| format!("epoll_ctl: {e}"))?;
        let mut conns = Vec::with_capacity(n);
        for i in 0..n {
            let stream =
                idle::connect_retrying(addr).map_err(|e| format!("connection {i}: {e}"))?;
            stream.set_nonblocking(true).map_err(|e| e.to_string())?;
            epoll
                .add(stream.as_raw_fd(), i as u64)
                .map_err(|e| format!("epoll_ctl: {e}"))?;
            let (req, body_at) = request(req, i);
            conns.push(Conn {
                stream,
                // Nothing to write until the first send.
                wrote: req.len(),
                req,
                body_at,
                in_flight: false,
                rx: Vec::new(),
                since: 0,
                next: 0,
            });
        }
        Ok(Generator {
            conns,
            epoll,
            echo: real && req == Req::Echo1K,
            timer,
        })
    }

    /// Closed loop for `d`: each connection sends its next request as soon as the last is
    /// answered; then the ones in flight are waited for.
    pub fn closed(&mut self, d: Duration) -> Result<Phase, String> {
        let start = now_ns();
        let deadline = start + d.as_nanos() as u64;
        let mut lat = Vec::with_capacity(1 << 20);
        let mut in_flight = 0;
        for i in 0..self.conns.len() {
            self.send(i, now_ns())?;
            in_flight += 1;
        }
        let mut events = vec![EMPTY_EVENT; 1024];
        let mut buf = vec![0u8; 64 * 1024];
        while in_flight > 0 {
            let now = now_ns();
            self.check_overdue(now, deadline, in_flight)?;
            let wait = if now < deadline {
                ((deadline - now) / 1_000_000).clamp(1, 100) as i32
            } else {
                100
            };
            let n = self
                .epoll
                .wait(&mut events, wait)
                .map_err(|e| format!("epoll_wait: {e}"))?;
            for ev in &events[..n] {
                let i = ev.u64 as usize;
                if i as u64 == TIMER {
                    continue;
                }
                if !self.ready(i, &mut buf)? {
                    continue;
                }
                let t = now_ns();
                lat.push(t - self.conns[i].since);
                in_flight -= 1;
                if t < deadline {
                    self.send(i, t)?;
                    in_flight += 1;
                }
            }
        }
        Ok(finish(lat, start))
    }

    /// Fixed rate: `rate` requests/s scheduled over `d` (request `j` at `start + j / rate`, on
    /// connection `j mod N`), each sent when due and its connection free, its latency from
    /// its scheduled time; then the ones in flight are waited for.
    pub fn fixed_rate(&mut self, d: Duration, rate: f64) -> Result<Phase, String> {
        let n = self.conns.len();
        let total = (d.as_secs_f64() * rate).floor() as u64;
        let period = 1e9 / rate;
        let start = now_ns();
        let deadline = start + d.as_nanos() as u64;
        let sched = |j: u64| start + (j as f64 * period) as u64;
        for (i, c) in self.conns.iter_mut().enumerate() {
            c.next = i as u64;
        }
        let mut lat = Vec::with_capacity(total as usize);
        let mut armed = 0;
        let mut events = vec![EMPTY_EVENT; 256];
        let mut buf = vec![0u8; 64 * 1024];
        while (lat.len() as u64) < total {
            let now = now_ns();
            // Send what is due on the free connections; find the next send after.
            let mut next_due = u64::MAX;
            let mut in_flight = 0;
            for i in 0..n {
                let c = &self.conns[i];
                if c.in_flight {
                    in_flight += 1;
                    continue;
                }
                if c.next >= total {
                    continue;
                }
                let t = sched(c.next);
                if t <= now {
                    self.send(i, t)?;
                    in_flight += 1;
                } else {
                    next_due = next_due.min(t);
                }
            }
            self.check_overdue(now, deadline, in_flight)?;
            let wait = if next_due == u64::MAX {
                100
            } else if next_due - now <= SPIN {
                0
            } else {
                if next_due != armed {
                    self.arm(next_due)?;
                    armed = next_due;
                }
                100
            };
            let k = self
                .epoll
                .wait(&mut events, wait)
                .map_err(|e| format!("epoll_wait: {e}"))?;
            for ev in &events[..k] {
                if ev.u64 == TIMER {
                    // Fired (arming again resets it).
                    armed = 0;
                    continue;
                }
                let i = ev.u64 as usize;
                if self.ready(i, &mut buf)? {
                    let c = &mut self.conns[i];
                    lat.push(now_ns().saturating_sub(c.since));
                    c.next += n as u64;
                }
            }
        }
        Ok(finish(lat, start))
    }

    /// Fails once the requests in flight are [`IO_TIMEOUT`] past the phase's end.
    fn check_overdue(&self, now: u64, deadline: u64, in_flight: usize) -> Result<(), String> {
        if now >= deadline + IO_TIMEOUT.as_nanos() as u64 {
            return Err(format!(
                "{in_flight} requests not answered within {} s of the phase's end",
                IO_TIMEOUT.as_secs()
            ));
        }
        Ok(())
    }

    /// Arms the timer for `at` (CLOCK_MONOTONIC, ns).
    fn arm(&self, at: u64) -> Result<(), String> {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (at / 1_000_000_000) as libc::time_t,
                tv_nsec: (at % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: the timer is open and `spec` is a valid itimerspec to read.
        let r = unsafe {
            libc::timerfd_settime(
                self.timer.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if r != 0 {
            return Err(format!("timerfd_settime: {}", io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Starts connection `i`'s request, in flight since `since` (ns).
    fn send(&mut self, i: usize, since: u64) -> Result<(), String> {
        let c = &mut self.conns[i];
        c.wrote = 0;
        c.in_flight = true;
        c.since = since;
        self.flush(i)
    }

    /// Writes what the socket takes of connection `i`'s request.
    fn flush(&mut self, i: usize) -> Result<(), String> {
        let c = &mut self.conns[i];
        while c.wrote < c.req.len() {
            match c.stream.write(&c.req[c.wrote..]) {
                Ok(k) => c.wrote += k,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("connection {i}: write: {e}")),
            }
        }
        Ok(())
    }

    /// Connection `i` is ready: writes the rest of its request, reads; true when its
    /// response is complete (and checked: the connection is free again).
    fn ready(&mut self, i: usize, buf: &mut [u8]) -> Result<bool, String> {
        if self.conns[i].wrote < self.conns[i].req.len() {
            self.flush(i)?;
        }
        let echo = self.echo;
        let c = &mut self.conns[i];
        loop {
            let k = match c.stream.read(buf) {
                Ok(0) => return Err(format!("connection {i}: the server closed it")),
                Ok(k) => k,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("connection {i}: read: {e}")),
            };
            if !c.in_flight {
                return Err(format!(
                    "connection {i}: {k} bytes with no request in flight: {:?}",
                    String::from_utf8_lossy(&buf[..k.min(200)])
                ));
            }
            c.rx.extend_from_slice(&buf[..k]);
            let expect = if echo { &c.req[c.body_at..] } else { HELLO };
            match check_response(&c.rx, expect).map_err(|e| format!("connection {i}: {e}"))? {
                None => continue,
                Some(len) if len < c.rx.len() => {
                    return Err(format!(
                        "connection {i}: {} bytes after the response",
                        c.rx.len() - len
                    ))
                }
                Some(_) => {
                    // Answered: nothing more comes until the next request (an edge comes
                    // with it), so no read to see it would block.
                    c.rx.clear();
                    c.in_flight = false;
                    return Ok(true);
                }
            }
        }
    }
}

/// Sorts the latencies; the phase from `start` to now.
fn finish(mut lat: Vec<u64>, start: u64) -> Phase {
    lat.sort_unstable();
    Phase {
        requests: lat.len() as u64,
        wall: Duration::from_nanos(now_ns() - start),
        lat,
    }
}

/// Connection `i`'s request, and where its body starts.
fn request(kind: Req, i: usize) -> (Vec<u8>, usize) {
    match kind {
        Req::Get => (b"GET / HTTP/1.1\r\nhost: bench\r\n\r\n".to_vec(), 0),
        Req::Echo1K => {
            let mut req = format!(
                "POST /echo HTTP/1.1\r\nhost: bench\r\ncontent-type: application/octet-stream\r\n\
                 content-length: {C10K_BODY}\r\n\r\n"
            )
            .into_bytes();
            let at = req.len();
            // Its own body, so that a mixed-up echo would not match.
            req.extend(
                format!("{i:05}-")
                    .bytes()
                    .chain((0..).map(|j| b'a' + (j % 26) as u8))
                    .take(C10K_BODY),
            );
            (req, at)
        }
    }
}

/// Checks the response at the front of `rx`: `Ok(None)` until it is whole, then its length
/// once it is `200` with exactly `expect` as its `content-length` body.
pub fn check_response(rx: &[u8], expect: &[u8]) -> Result<Option<usize>, String> {
    let Some(head_end) = rx.windows(4).position(|w| w == b"\r\n\r\n") else {
        if rx.len() > MAX_HEAD {
            return Err("response head too long".into());
        }
        return Ok(None);
    };
    let head = &rx[..head_end];
    let text = || String::from_utf8_lossy(head).into_owned();
    let mut lines = head.split(|&b| b == b'\n');
    let status = lines.next().unwrap_or_default();
    if !(status.starts_with(b"HTTP/1.1 200 ") || status.starts_with(b"HTTP/1.1 200\r")) {
        return Err(format!("answered {:?}", text()));
    }
    let len = lines
        .find_map(|l| {
            let colon = l.iter().position(|&b| b == b':')?;
            let (name, value) = (&l[..colon], &l[colon + 1..]);
            if !name.eq_ignore_ascii_case(b"content-length") {
                return None;
            }
            std::str::from_utf8(value)
                .ok()?
                .trim()
                .parse::<usize>()
                .ok()
        })
        .ok_or_else(|| format!("no content-length in {:?}", text()))?;
    let end = head_end + 4 + len;
    if rx.len() < end {
        return Ok(None);
    }
    if &rx[head_end + 4..end] != expect {
        return Err(format!(
            "a {len}-byte body, not the {} bytes expected ({:?}…)",
            expect.len(),
            String::from_utf8_lossy(&rx[head_end + 4..end.min(head_end + 4 + 40)])
        ));
    }
    Ok(Some(end))
}

/// CLOCK_MONOTONIC now, ns (the timer's clock).
fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
