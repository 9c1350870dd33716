//! A byte relay between two connections, with no task in between: each side's handler
//! sends what it reads to the other side. When the other side's output queue is over
//! [`RelayConfig::buffer`], the reading side's reads are held and the other side is asked
//! for `on_drained`, which resumes them; so a fast sender is held back by a slow receiver
//! rather than buffered. A half close (EOF) is passed on as `shutdown_write`; the tunnel
//! closes once both directions have ended, when either side closes, or when no byte has
//! moved for the idle timeout.
//!
//! Each side's handler holds the other side's `Conn`, a reference cycle that `on_close`
//! breaks by dropping it.
//!
//! On Linux's epoll backend, when both connections are plain TCP (no TLS layer), a tunnel
//! that carries a bulk transfer (one read of [`RelayConfig::splice_after`] bytes or more)
//! moves its bytes socket → pipe → socket with `splice(2)` from then on
//! ([`RelayConfig::splice`]): the connections' own rounds do it (`conn::splice`), the
//! pipe's bytes are queued output of the receiving side, and `on_spliced` takes the place
//! of `on_data`, so the bound, the half close, the idle clock and the counters are the
//! same code. Interactive and idle tunnels keep copying: they never hold pipes (four
//! descriptors and the kernel's pipe memory per tunnel), and a small message costs less
//! copied than spliced.

use crate::engine::conn::{Conn, Handler};
use crate::engine::time::Sleep;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::Context;
use std::time::{Duration, Instant};

/// A relay's limits.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RelayConfig {
    /// Bytes queued toward one side past which the other side's reads are held.
    pub buffer: usize,
    /// Closes the tunnel after this long without a byte in either direction (None: never).
    pub idle_timeout: Option<Duration>,
    /// Moves the bytes with `splice(2)` where it can (Linux, the epoll backend, both
    /// connections plain TCP) once the tunnel carries a bulk transfer: kernel to kernel,
    /// never through fibr's memory. It costs two pipes per such relay, four descriptors,
    /// each pipe asked for `buffer` bytes (the kernel may give less); turn it off where
    /// descriptors are short. Elsewhere, and when the pipes cannot be made, the relay
    /// copies.
    pub splice: bool,
    /// A read of at least this many bytes (either way) switches the tunnel to `splice`:
    /// a bulk transfer. With the engine's `Config::read_buffer_size` below it, a tunnel
    /// never splices.
    pub splice_after: usize,
}

impl Default for RelayConfig {
    /// 256 KiB per direction, five minutes idle, splicing where it can from the first
    /// read of 16 KiB (the engine's default read buffer, filled).
    fn default() -> RelayConfig {
        RelayConfig {
            buffer: 256 * 1024,
            idle_timeout: Some(Duration::from_secs(300)),
            splice: true,
            splice_after: 16 * 1024,
        }
    }
}

config_setters!(RelayConfig {
    set with_buffer => buffer: usize,
    opt with_idle_timeout => idle_timeout: Duration,
    set with_splice => splice: bool,
    set with_splice_after => splice_after: usize,
});

/// A running relay's counters, shared with its handlers.
#[derive(Clone, Debug)]
pub struct Relay {
    tunnel: Arc<Tunnel>,
}

impl Relay {
    /// Bytes read from the first connection and sent to the second.
    pub fn bytes_a_to_b(&self) -> u64 {
        self.tunnel.bytes[A].load(Ordering::Relaxed)
    }

    /// Bytes read from the second connection and sent to the first.
    pub fn bytes_b_to_a(&self) -> u64 {
        self.tunnel.bytes[B].load(Ordering::Relaxed)
    }

    /// True once the relay moves its bytes with `splice(2)` (see [`RelayConfig::splice`]).
    pub fn spliced(&self) -> bool {
        self.tunnel.splicing.load(Ordering::Acquire)
    }

    /// Of the bytes relayed (both ways), how many were spliced: never in fibr's memory.
    pub fn bytes_spliced(&self) -> u64 {
        self.tunnel.spliced.load(Ordering::Relaxed)
    }

    /// True once the relay has ended (one of its connections closed).
    pub fn is_done(&self) -> bool {
        self.tunnel.done.load(Ordering::Acquire)
    }
}

const A: usize = 0;
const B: usize = 1;

/// What both sides share.
#[derive(Debug)]
struct Tunnel {
    /// Bytes relayed from side `i` to the other.
    bytes: [AtomicU64; 2],
    /// Of those, the bytes spliced (both ways).
    spliced: AtomicU64,
    /// How and when to start splicing; None: never.
    splice: Option<SpliceStart>,
    /// Splicing started.
    splicing: AtomicBool,
    /// Bit `i`: side `i` sent its EOF.
    eof: AtomicU8,
    done: AtomicBool,
    start: Instant,
    /// Milliseconds after `start` of the last byte relayed.
    last: AtomicU64,
    idle: Option<Duration>,
}

/// What a side needs to start splicing the tunnel once it sees a bulk read (never made off
/// Linux: splice(2) is Linux's).
#[derive(Debug)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
struct SpliceStart {
    after: usize,
    pipe_size: usize,
    /// Set by the first side to try (once per tunnel, whatever the outcome).
    tried: AtomicBool,
    /// Both sides' handlers (weak: they hold the tunnel), set once the relay is made.
    sides: std::sync::OnceLock<[Weak<Side>; 2]>,
}

impl Tunnel {
    fn touch(&self) {
        if self.idle.is_some() {
            let ms = self.start.elapsed().as_millis() as u64;
            self.last.store(ms, Ordering::Relaxed);
        }
    }

    /// When the tunnel goes idle if nothing moves before.
    fn idle_deadline(&self, idle: Duration) -> Instant {
        self.start + Duration::from_millis(self.last.load(Ordering::Relaxed)) + idle
    }
}

/// One side's handler: reads from its connection go to `peer`.
struct Side {
    me: usize,
    tunnel: Arc<Tunnel>,
    buffer: usize,
    /// The other side, until this side closes.
    peer: Mutex<Option<Conn>>,
    /// The idle timer (on side A only: one timer per tunnel).
    timer: Mutex<Option<Sleep>>,
}

impl Side {
    fn peer(&self) -> Option<Conn> {
        self.peer.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn forget_peer(&self) -> Option<Conn> {
        self.timer.lock().unwrap_or_else(|e| e.into_inner()).take();
        self.peer.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Arms the idle timer for `deadline` on `conn`'s waker.
    fn arm(&self, conn: &Conn, deadline: Instant) {
        let mut timer = self.timer.lock().unwrap_or_else(|e| e.into_inner());
        let sleep = timer.insert(crate::engine::time::sleep_until(deadline));
        let waker = conn.waker();
        if Pin::new(sleep)
            .poll(&mut Context::from_waker(&waker))
            .is_ready()
        {
            waker.wake();
        }
    }

    /// `n` bytes read from `conn` are queued on `peer`: counted, the idle clock restarted,
    /// and `conn`'s reads held while `peer` has more than the buffer queued.
    fn relayed(&self, conn: &Conn, peer: &Conn, n: usize) {
        self.tunnel.bytes[self.me].fetch_add(n as u64, Ordering::Relaxed);
        self.tunnel.touch();
        if peer.queued_bytes() > self.buffer {
            // Held first: a peer that drains at once still owes the `on_drained` that
            // resumes us.
            conn.hold_reads();
            peer.wake_when_drained();
        }
    }
}

#[cfg(target_os = "linux")]
impl crate::engine::conn::Spliced for Side {
    fn on_spliced(&self, conn: &Conn, n: usize) {
        self.tunnel.spliced.fetch_add(n as u64, Ordering::Relaxed);
        match self.peer() {
            Some(peer) => self.relayed(conn, &peer, n),
            None => conn.close(),
        }
    }
}

impl Side {
    /// A read of `len` bytes from `conn` (toward `peer`): the first bulk one starts
    /// splicing, in this round (the bytes read so far were sent, so order holds).
    #[cfg(target_os = "linux")]
    fn maybe_splice(&self, conn: &Conn, peer: &Conn, len: usize) {
        let Some(start) = &self.tunnel.splice else {
            return;
        };
        let Some([a, b]) = start.sides.get() else {
            return;
        };
        if len < start.after || start.tried.swap(true, Ordering::AcqRel) {
            return;
        }
        let (Some(a), Some(b)) = (a.upgrade(), b.upgrade()) else {
            return;
        };
        let (conn_a, conn_b) = if self.me == A {
            (conn, peer)
        } else {
            (peer, conn)
        };
        if crate::engine::conn::splice_pair(conn_a, conn_b, start.pipe_size, [a, b]) {
            self.tunnel.splicing.store(true, Ordering::Release);
        }
    }
}

impl Handler for Side {
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        let Some(peer) = self.peer() else {
            return conn.close();
        };
        if peer.send(data).is_err() {
            return conn.close();
        }
        self.relayed(conn, &peer, data.len());
        #[cfg(target_os = "linux")]
        self.maybe_splice(conn, &peer, data.len());
    }

    fn on_drained(&self, _conn: &Conn) {
        if let Some(peer) = self.peer() {
            if peer.reads_held() {
                peer.resume_reads();
            }
        }
    }

    fn on_eof(&self, conn: &Conn) {
        let Some(peer) = self.peer() else {
            return conn.close();
        };
        let eof = self.tunnel.eof.fetch_or(1 << self.me, Ordering::AcqRel) | (1 << self.me);
        if eof == 0b11 {
            peer.close();
            conn.close();
        } else {
            peer.shutdown_write();
        }
    }

    fn on_wake(&self, conn: &Conn) {
        let Some(idle) = self.tunnel.idle else { return };
        let deadline = self.tunnel.idle_deadline(idle);
        if Instant::now() < deadline {
            return self.arm(conn, deadline);
        }
        tracing::debug!(peer = ?conn.peer_addr(), "relay idle timeout");
        if let Some(peer) = self.peer() {
            peer.close();
        }
        conn.close();
    }

    fn on_close(&self, _conn: &Conn, _err: Option<io::Error>) {
        self.tunnel.done.store(true, Ordering::Release);
        if let Some(peer) = self.forget_peer() {
            peer.close();
        }
    }
}

/// Relays bytes between `a` and `b` until both directions end (see the module docs):
/// replaces both connections' handlers, and resumes reads held on either. Call it from
/// a callback of one of them (or with both held) so no byte is read by the old handler
/// after the switch.
pub fn relay(a: &Conn, b: &Conn, config: &RelayConfig) -> Relay {
    let tunnel = Arc::new(Tunnel {
        bytes: [AtomicU64::new(0), AtomicU64::new(0)],
        spliced: AtomicU64::new(0),
        splice: (config.splice && cfg!(target_os = "linux")).then(|| SpliceStart {
            after: config.splice_after,
            pipe_size: config.buffer,
            tried: AtomicBool::new(false),
            sides: std::sync::OnceLock::new(),
        }),
        splicing: AtomicBool::new(false),
        eof: AtomicU8::new(0),
        done: AtomicBool::new(false),
        start: Instant::now(),
        last: AtomicU64::new(0),
        idle: config.idle_timeout,
    });
    let side = |me: usize, peer: &Conn| {
        Arc::new(Side {
            me,
            tunnel: tunnel.clone(),
            buffer: config.buffer,
            peer: Mutex::new(Some(peer.clone())),
            timer: Mutex::new(None),
        })
    };
    let (side_a, side_b) = (side(A, b), side(B, a));
    a.set_handler(side_a.clone());
    b.set_handler(side_b.clone());
    // A connection that closed before its handler was replaced told the old one: its new
    // handler will never see on_close, so the cycle is broken here.
    if !a.is_open() || !b.is_open() {
        tunnel.done.store(true, Ordering::Release);
        side_a.forget_peer();
        side_b.forget_peer();
        a.close();
        b.close();
        return Relay { tunnel };
    }
    if let Some(start) = &tunnel.splice {
        let _ = start
            .sides
            .set([Arc::downgrade(&side_a), Arc::downgrade(&side_b)]);
    }
    if let Some(idle) = config.idle_timeout {
        side_a.arm(a, Instant::now() + idle);
    }
    a.resume_reads();
    b.resume_reads();
    Relay { tunnel }
}
