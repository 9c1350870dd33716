//! Connections and the raw callback API.
//!
//! A connection is a task. Readiness folds into its pending events; one worker at a time
//! runs its round: open, read until a short read (calling `on_data` for each read), then
//! flush everything the round produced in one vectored write. What the socket does not
//! take waits in the connection's queue for writability; past the high watermark, reads
//! pause until the queue drains to the low one. Buffers are borrowed for the round only.

mod close;
mod handle;
// Only TLS puts a layer on a connection so far.
#[cfg_attr(not(feature = "tls"), allow(dead_code, unused_imports))]
mod layer;
mod linger;
pub(crate) mod live;
mod open;
mod output;
// Only the proxy's relay splices so far.
#[cfg(target_os = "linux")]
#[cfg_attr(not(feature = "proxy"), allow(dead_code))]
mod splice;
mod stall;
pub(crate) mod udp;
mod write;

#[cfg(all(feature = "hyper", feature = "tunnel"))]
pub(crate) use open::adopt;
pub(crate) use open::{Listener, StopAccepting};
#[cfg(all(target_os = "linux", feature = "proxy"))]
pub(crate) use splice::{splice_pair, Spliced};
pub use udp::{DatagramHandler, UdpSender};

use crate::engine::buf::PooledBuf;
use crate::engine::exec::pool::Runnable;
use crate::engine::exec::state::SchedState;
use crate::engine::reactor::Source;
use crate::engine::runtime::{Loop, ReadyCtx, Runtime};
use crate::engine::sys::{socket, Event, Interest};
#[cfg(feature = "tls")]
pub(crate) use layer::{Delivered, Info, Layer, Received, Shared};
use output::Output;
use std::any::Any;
use std::fmt;
use std::fs::File;
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::os::fd::{OwnedFd, RawFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{atomic::AtomicU32, atomic::AtomicU64, atomic::Ordering, Arc, Mutex};
use std::task::{Wake, Waker};

/// Callbacks for a raw connection. They run on worker threads, one at a time per
/// connection and in order; `data` is valid only during the call.
pub trait Handler: Send + Sync + 'static {
    /// The connection is established (accepted, or a dial completed).
    fn on_open(&self, _conn: &Conn) {}
    /// Bytes arrived. Anything sent from here goes out in the round's one write.
    fn on_data(&self, conn: &Conn, data: &[u8]);
    /// The peer finished sending (a half close). By default the connection is closed once
    /// its queued output is flushed; override to keep writing.
    fn on_eof(&self, conn: &Conn) {
        conn.close();
    }
    /// The output queue drained to the low watermark after reaching the high one (use it
    /// to resume a source held back with [`Conn::hold_reads`]).
    fn on_drained(&self, _conn: &Conn) {}
    /// A waker from [`Conn::waker`] was woken.
    fn on_wake(&self, _conn: &Conn) {}
    /// The connection is closed: the last callback. `err` says why, if it failed.
    fn on_close(&self, _conn: &Conn, _err: Option<io::Error>) {}
    /// On a UDP binding: take its datagrams directly, with no connection per peer (see
    /// [`DatagramHandler`]). `None` (the default): a connection per peer address, whose
    /// datagrams reach `on_data`.
    fn datagrams(&self) -> Option<&dyn DatagramHandler> {
        None
    }
}

impl<H: Handler + ?Sized> Handler for Arc<H> {
    fn on_open(&self, conn: &Conn) {
        (**self).on_open(conn)
    }
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        (**self).on_data(conn, data)
    }
    fn datagrams(&self) -> Option<&dyn DatagramHandler> {
        (**self).datagrams()
    }
    fn on_eof(&self, conn: &Conn) {
        (**self).on_eof(conn)
    }
    fn on_drained(&self, conn: &Conn) {
        (**self).on_drained(conn)
    }
    fn on_wake(&self, conn: &Conn) {
        (**self).on_wake(conn)
    }
    fn on_close(&self, conn: &Conn, err: Option<io::Error>) {
        (**self).on_close(conn, err)
    }
}

// Event bits (see SchedState).
pub(crate) const EV_READ: u32 = 1 << 1;
pub(crate) const EV_WRITE: u32 = 1 << 2;
pub(crate) const EV_HUP: u32 = 1 << 3;
pub(crate) const EV_CLOSE: u32 = 1 << 4;
pub(crate) const EV_OPEN: u32 = 1 << 5;
pub(crate) const EV_WAKE: u32 = 1 << 6;
pub(crate) const EV_RESUME: u32 = 1 << 7;
pub(crate) const EV_FLUSH: u32 = 1 << 8;
pub(crate) const EV_ABORT: u32 = 1 << 9;

// Flags readable without the I/O lock.
const F_HELD: u32 = 1; // the user holds reads
const F_PAUSED: u32 = 1 << 1; // over the watermark or the pending budget
const F_CLOSING: u32 = 1 << 2; // close after flushing
const F_EOF: u32 = 1 << 3; // the peer's EOF was delivered
const F_READ_PENDING: u32 = 1 << 4; // reading stopped before the socket was drained
const F_CONNECTING: u32 = 1 << 5; // a dial in progress
const F_OPENED: u32 = 1 << 6;
const F_OVER_HIGH: u32 = 1 << 7; // reached the high watermark (on_drained owed)
const F_SHUT_WR: u32 = 1 << 8; // shutdown_write requested
const F_PEER_FIN: u32 = 1 << 9; // the poller saw the peer's FIN (or a hang-up)
const F_DETACHED: u32 = 1 << 10; // the socket lives on in another owner (no linger)
const F_NEW_HANDLER: u32 = 1 << 11; // set_handler replaced the handler (a round reloads it)
const F_WR_SHUT: u32 = 1 << 12; // shutdown_write was called: no more sends are taken
const F_LAYER: u32 = 1 << 13; // a record layer (TLS) sits between the socket and the handler
const F_LAYER_REPLAY: u32 = 1 << 14; // the layer's kept input was handed to it unread (mux)
#[cfg(target_os = "linux")]
const F_SPLICE: u32 = 1 << 15; // reads are spliced toward a peer (`Io::splice`)

/// How many rounds a connection runs back to back before letting others go first.
const ROUNDS_PER_TURN: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Tcp,
    Unix,
    Udp,
}

pub(crate) struct ConnInner {
    state: SchedState,
    flags: AtomicU32,
    pub(crate) rt: Arc<Runtime>,
    lp: Arc<Loop>,
    token: AtomicU64,
    fd: RawFd,
    kind: Kind,
    handler: Mutex<Arc<dyn Handler>>,
    io: Mutex<Io>,
    peer: Option<SocketAddr>,
    local: Option<SocketAddr>,
    /// The handler's per-connection state. Only `Send` is asked of it: the mutex gives
    /// the exclusive access (callbacks are serialized anyway, so it is never contended).
    context: Mutex<Option<Box<dyn Any + Send>>>,
    udp: Option<Box<udp::PeerLink>>,
}

struct Io {
    /// The descriptor, owned until close (None for UDP peers, which share their socket).
    fd: Option<OwnedFd>,
    open: bool,
    in_round: bool,
    out: Output,
    /// What happens once the output is out, when it is not a plain close: lingering, or
    /// handing the socket over (boxed: rare, and idle conns stay small).
    after_output: Option<Box<AfterOutput>>,
    /// Set while output is queued (for `Config::write_timeout`).
    stall: Option<Box<stall::Stall>>,
    /// A record layer (TLS) between the socket and the handler, if one was started.
    layer: Option<Box<layer::LayerIo>>,
    /// Where reads are spliced to, if the connection is spliced to a peer.
    #[cfg(target_os = "linux")]
    splice: Option<Arc<splice::Link>>,
}

/// A closing connection's last stage (see `Io::after_output`).
enum AfterOutput {
    /// Dropping what the peer still sends until its FIN (a graceful close, or one at a
    /// timeout: then with the error `on_close` is told).
    Linger(linger::Linger, Option<io::Error>),
    /// The socket goes to another owner (`Conn::detach`).
    #[cfg(feature = "hyper")]
    Handoff(Box<Handoff>),
}

/// Takes a detached socket (see `Conn::detach`).
#[cfg(feature = "hyper")]
pub(crate) type Handoff = dyn FnOnce(io::Result<DetachedSocket>) + Send;

/// A connection's socket taken out of the engine (`Conn::detach`): connected and
/// non-blocking, for another owner to register.
#[cfg(feature = "hyper")]
pub(crate) enum DetachedSocket {
    Tcp(OwnedFd),
    Unix(OwnedFd),
}

/// A connection handle: cheap to clone, usable from any thread.
#[derive(Clone)]
pub struct Conn {
    pub(crate) inner: Arc<ConnInner>,
}

impl fmt::Debug for Conn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Conn")
            .field("fd", &self.inner.fd)
            .field("peer", &self.inner.peer)
            .field("kind", &self.inner.kind)
            .finish()
    }
}

impl ConnInner {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        rt: Arc<Runtime>,
        lp: Arc<Loop>,
        fd: Option<OwnedFd>,
        raw: RawFd,
        kind: Kind,
        handler: Arc<dyn Handler>,
        peer: Option<SocketAddr>,
        local: Option<SocketAddr>,
        udp: Option<udp::PeerLink>,
        initial: u32,
    ) -> Arc<ConnInner> {
        rt.conn_opened();
        Arc::new(ConnInner {
            state: SchedState::new(),
            flags: AtomicU32::new(if initial & EV_OPEN == 0 {
                F_CONNECTING
            } else {
                0
            }),
            rt,
            lp,
            token: AtomicU64::new(u64::MAX),
            fd: raw,
            kind,
            handler: Mutex::new(handler),
            io: Mutex::new(Io {
                fd,
                open: true,
                in_round: false,
                out: Output::default(),
                after_output: None,
                stall: None,
                layer: None,
                #[cfg(target_os = "linux")]
                splice: None,
            }),
            peer,
            local,
            context: Mutex::new(None),
            udp: udp.map(Box::new),
        })
    }

    /// The user data slot. A panic in a callback that held it (caught, closing the
    /// connection) leaves the slot usable: the data is dropped on close either way.
    fn context(&self) -> std::sync::MutexGuard<'_, Option<Box<dyn Any + Send>>> {
        self.context.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[inline]
    fn flag(&self, f: u32) -> bool {
        self.flags.load(Ordering::Acquire) & f != 0
    }

    #[inline]
    fn set(&self, f: u32) {
        self.flags.fetch_or(f, Ordering::AcqRel);
    }

    #[inline]
    fn clear(&self, f: u32) {
        self.flags.fetch_and(!f, Ordering::AcqRel);
    }

    /// Records events and schedules the connection if it was idle.
    #[inline]
    pub(crate) fn notify(self: &Arc<Self>, bits: u32) {
        if self.state.notify(bits) {
            self.rt.pool.schedule(self.clone());
        }
    }

    fn reads_blocked(&self) -> bool {
        self.flag(F_HELD | F_PAUSED | F_CLOSING | F_EOF | F_CONNECTING)
    }

    /// Splicing is Linux's alone (`splice.rs`).
    #[cfg(not(target_os = "linux"))]
    fn spliced(&self) -> bool {
        false
    }

    /// Calls a handler callback, turning a panic into a closed connection.
    fn call(&self, conn: &Conn, what: &str, f: impl FnOnce()) -> bool {
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(()) => true,
            Err(p) => {
                let msg = p
                    .downcast_ref::<&str>()
                    .copied()
                    .or_else(|| p.downcast_ref::<String>().map(|s| s.as_str()))
                    .unwrap_or("..");
                tracing::error!(
                    callback = what,
                    panic = msg,
                    "a connection handler panicked"
                );
                self.close_now(
                    conn,
                    Some(io::Error::other(format!(
                        "handler panicked in {what}: {msg}"
                    ))),
                );
                false
            }
        }
    }

    fn round(self: &Arc<Self>, ev: u32) {
        let conn = Conn {
            inner: self.clone(),
        };
        {
            let mut io = self.io.lock().unwrap();
            if !io.open {
                return;
            }
            io.in_round = true;
        }
        if ev & EV_ABORT != 0 {
            let e = io::Error::new(io::ErrorKind::ConnectionAborted, "the engine shut down");
            return self.close_now(&conn, Some(e));
        }
        if let Some(done) = self.linger_round() {
            if let Some(why) = done {
                self.close_now(&conn, why);
            }
            return;
        }
        if ev & EV_WAKE != 0 && self.write_stalled() {
            let e = io::Error::new(io::ErrorKind::TimedOut, "the peer stopped reading");
            return self.close_timed_out(&conn, e);
        }
        if ev & EV_WAKE != 0 && self.handshake_expired() {
            let e = io::Error::new(io::ErrorKind::TimedOut, "the TLS handshake timed out");
            return self.close_timed_out(&conn, e);
        }
        let mut handler = self.handler.lock().unwrap().clone();
        let mut err = None;

        if self.flag(F_CONNECTING) && ev & (EV_WRITE | EV_HUP | EV_READ) != 0 {
            match socket::take_error(self.fd) {
                Ok(None) if ev & EV_HUP == 0 || ev & EV_WRITE != 0 => {
                    self.clear(F_CONNECTING);
                }
                Ok(Some(e)) | Err(e) => return self.close_now(&conn, Some(e)),
                Ok(None) => {
                    return self.close_now(&conn, Some(io::ErrorKind::ConnectionRefused.into()))
                }
            }
        }
        if !self.flag(F_CONNECTING | F_OPENED) {
            self.set(F_OPENED);
            if !self.call(&conn, "on_open", || handler.on_open(&conn)) {
                return;
            }
        }
        self.refresh(&mut handler);
        if ev & EV_WAKE != 0
            && !self.layer_opening()
            && !self.call(&conn, "on_wake", || handler.on_wake(&conn))
        {
            return;
        }
        if ev & EV_CLOSE != 0 {
            self.set(F_CLOSING);
        }

        if self.kind == Kind::Udp {
            if !self.udp_round(&conn, &mut handler) {
                return;
            }
        } else if ev & (EV_READ | EV_HUP | EV_RESUME | EV_OPEN) != 0 || self.flag(F_READ_PENDING) {
            match self.read_round(&conn, &mut handler) {
                ReadEnd::Open => {}
                ReadEnd::Eof if self.layer_opening() => {
                    let e = io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the peer closed during the TLS handshake",
                    );
                    return self.close_now(&conn, Some(e));
                }
                ReadEnd::Eof => {
                    self.refresh(&mut handler);
                    if !self.call(&conn, "on_eof", || handler.on_eof(&conn)) {
                        return;
                    }
                }
                ReadEnd::Error(e) => err = Some(e),
                ReadEnd::Closed => return,
            }
        }
        if err.is_none() && ev & EV_HUP != 0 && self.flag(F_HELD | F_PAUSED) {
            // Hang-up while we are not reading: learn why now rather than never.
            if let Ok(Some(e)) = socket::take_error(self.fd) {
                err = Some(e);
            }
        }
        if let Some(e) = err {
            return self.close_now(&conn, Some(e));
        }
        self.end_round(&conn, &mut handler);
    }

    /// Reloads `handler` if [`Conn::set_handler`] replaced it since it was loaded, so the
    /// next callback of the round goes to the new one.
    #[inline]
    fn refresh(&self, handler: &mut Arc<dyn Handler>) {
        if self.flag(F_NEW_HANDLER) {
            // Cleared before the load: a replacement made after it sets the flag again.
            self.clear(F_NEW_HANDLER);
            *handler = self.handler.lock().unwrap().clone();
        }
    }

    /// Reads until a short read (or until reads must stop), handing each read to the
    /// handler, through the connection's layer if it has one.
    fn read_round(&self, conn: &Conn, handler: &mut Arc<dyn Handler>) -> ReadEnd {
        #[cfg(target_os = "linux")]
        if self.flag(F_SPLICE) {
            return self.splice_round(conn);
        }
        let layered = self.flag(F_LAYER);
        // A layered read starts with the partial record kept from the last round.
        let (mut buf, mut filled) = if layered {
            match self.layer_input() {
                Some(input) => input,
                None => return ReadEnd::Open,
            }
        } else {
            (PooledBuf::take(self.rt.config.read_buffer_size), 0)
        };
        // Bytes read before the layer was started, handed to it (`replay_into_layer`): they
        // go through it first, as the socket may have nothing more to say.
        let replayed = if layered && self.flag(F_LAYER_REPLAY) {
            self.clear(F_LAYER_REPLAY);
            self.read_through_layer(conn, handler, &mut buf, &mut filled)
        } else {
            None
        };
        let end = match replayed {
            Some(end) => end,
            None => loop {
                if self.reads_blocked() {
                    if !self.flag(F_EOF | F_CLOSING) {
                        self.set(F_READ_PENDING);
                    }
                    break ReadEnd::Open;
                }
                let n = match socket::read(self.fd, &mut buf[filled..]) {
                    Ok(0) => {
                        self.clear(F_READ_PENDING);
                        self.set(F_EOF);
                        // A partial record at EOF can never be completed.
                        filled = 0;
                        break ReadEnd::Eof;
                    }
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        self.clear(F_READ_PENDING);
                        break ReadEnd::Open;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => break ReadEnd::Error(e),
                };
                self.clear(F_READ_PENDING);
                let room = buf.len() - filled;
                if layered {
                    filled += n;
                    if let Some(end) = self.read_through_layer(conn, handler, &mut buf, &mut filled)
                    {
                        break end;
                    }
                } else {
                    self.refresh(handler);
                    if !self.call(conn, "on_data", || handler.on_data(conn, &buf[..n])) {
                        return ReadEnd::Closed;
                    }
                    if self.flag(F_LAYER) || self.spliced() {
                        // The handler started a layer (a mux found TLS) or splicing (a relay
                        // saw a bulk read): the next round reads through it.
                        self.set(F_READ_PENDING);
                        break ReadEnd::Open;
                    }
                }
                // A short read drained the socket, unless the peer's FIN waits behind the
                // data: edge-triggered epoll will not report it again.
                if n < room && !self.flag(F_PEER_FIN) {
                    break ReadEnd::Open;
                }
                if self.output_over_limit() {
                    // Stop reading now; end_round pauses, or reads again if the flush made room.
                    self.set(F_READ_PENDING);
                    break ReadEnd::Open;
                }
            },
        };
        if filled > 0 {
            self.keep_layer_input(&buf[..filled]);
        }
        end
    }

    /// Flushes the round's output, applies the watermarks, closes if asked, re-arms.
    fn end_round(self: &Arc<Self>, conn: &Conn, handler: &mut Arc<dyn Handler>) {
        let cfg = &self.rt.config;
        let mut io = self.io.lock().unwrap();
        io.in_round = false;
        if !io.open {
            return;
        }
        let before = io.queued();
        // A close or half close asked for after this flush began is left to the round its
        // notify runs: the flush's layer must have sealed its end (TLS close_notify) first.
        let ending = self.flags.load(Ordering::Acquire) & (F_CLOSING | F_SHUT_WR);
        let flushed = if self.flag(F_CONNECTING) {
            Ok(())
        } else {
            self.flush(&mut io)
        };
        let queued = io.queued();
        self.account(before, queued);
        if let Err(e) = flushed {
            drop(io);
            return self.close_now(conn, Some(e));
        }
        self.watch_stall(&mut io, queued < before);
        let mut drained = false;
        let over_budget = cfg
            .max_pending_bytes
            .is_some_and(|max| queued > 0 && self.rt.pending_bytes.load(Ordering::Relaxed) > max);
        if queued > cfg.write_high_watermark || over_budget {
            self.set(F_PAUSED | F_OVER_HIGH);
        } else if queued <= cfg.write_low_watermark {
            if self.flag(F_PAUSED) {
                self.clear(F_PAUSED);
                // ET will not report data that arrived while paused: read it now.
                self.state.notify(EV_RESUME);
            }
            if self.flag(F_OVER_HIGH) {
                self.clear(F_OVER_HIGH);
                drained = true;
            }
        }
        if queued == 0 {
            #[cfg(feature = "hyper")]
            if let Some(AfterOutput::Handoff(_)) = io.after_output.as_deref() {
                let Some(AfterOutput::Handoff(handoff)) = io.after_output.take().map(|b| *b) else {
                    unreachable!("matched above")
                };
                drop(io);
                return self.hand_over(conn, handoff);
            }
            if ending & F_CLOSING != 0 {
                if self.start_linger(&mut io, &mut None) {
                    drop(io);
                    self.lp
                        .rearm(self.fd, self.token.load(Ordering::Acquire), Interest::READ);
                    return;
                }
                drop(io);
                return self.close_now(conn, None);
            }
            if ending & F_SHUT_WR != 0 {
                self.clear(F_SHUT_WR);
                if let Err(e) = socket::shutdown_write(self.fd) {
                    tracing::debug!(error = %e, "shutdown(SHUT_WR) failed");
                }
            }
        }
        if self.flag(F_READ_PENDING) && !self.reads_blocked() {
            // Reading stopped early and nothing will report the rest (edge-triggered).
            self.state.notify(EV_RESUME);
        }
        let interest = Interest {
            readable: !self.reads_blocked() || self.flag(F_CONNECTING),
            writable: queued > 0 || self.flag(F_CONNECTING),
        };
        drop(io);
        if self.kind != Kind::Udp {
            self.lp
                .rearm(self.fd, self.token.load(Ordering::Acquire), interest);
        }
        if drained {
            self.refresh(handler);
            self.call(conn, "on_drained", || handler.on_drained(conn));
        }
    }

    fn udp_round(&self, conn: &Conn, handler: &mut Arc<dyn Handler>) -> bool {
        let Some(link) = &self.udp else { return true };
        while !self.flag(F_HELD | F_CLOSING) {
            let Some(d) = link.next_datagram() else { break };
            self.refresh(handler);
            if !self.call(conn, "on_data", || handler.on_data(conn, &d)) {
                return false;
            }
        }
        true
    }
}

enum ReadEnd {
    Open,
    Eof,
    Error(io::Error),
    /// A callback panicked and the connection is gone.
    Closed,
}

impl Runnable for ConnInner {
    fn run(self: Arc<Self>) {
        for _ in 0..ROUNDS_PER_TURN {
            let ev = self.state.take();
            self.round(ev);
            if self.state.try_idle() {
                return;
            }
        }
        let pool = self.rt.pool.clone();
        pool.yield_job(self);
    }
}

impl Source<Runtime> for ConnInner {
    fn ready(&self, ev: Event, _ctx: &mut ReadyCtx<'_>) {
        let mut bits = 0;
        if ev.readable {
            bits |= EV_READ;
        }
        if ev.writable {
            bits |= EV_WRITE;
        }
        if ev.closed {
            bits |= EV_HUP;
        }
        if ev.closed || ev.read_closed {
            self.set(F_PEER_FIN);
        }
        if bits != 0 && self.state.notify(bits) {
            // The loop holds the only other reference path; rebuild the Arc from the slab's.
            self.rt.pool.schedule(self.self_arc());
        }
    }

    fn registered(&self, token: u64) {
        self.token.store(token, Ordering::Release);
        if !self.flag(F_CONNECTING) {
            // Accepted: run on_open (and read what may already be there) now that the
            // loop knows the descriptor, so a close can never race its registration.
            self.self_arc().notify(EV_OPEN | EV_READ);
        }
    }

    fn abort(&self) {
        self.self_arc().notify(EV_ABORT);
    }

    fn by_identity(&self) -> bool {
        false
    }

    fn interest(&self) -> Interest {
        if self.flag(F_CONNECTING) {
            Interest::BOTH
        } else {
            Interest::READ
        }
    }
}

impl ConnInner {
    /// A new strong reference from `&self` (every ConnInner lives in an Arc).
    fn self_arc(&self) -> Arc<ConnInner> {
        let ptr = self as *const ConnInner;
        // SAFETY: ConnInner values are only ever created inside an Arc (ConnInner::new), and
        // `self` is borrowed from a live Arc, so bumping the count and rebuilding one is sound.
        unsafe {
            Arc::increment_strong_count(ptr);
            Arc::from_raw(ptr)
        }
    }
}

/// A connection's waker schedules its `on_wake`. It is the connection's own `Arc`, so
/// making one allocates nothing.
impl Wake for ConnInner {
    fn wake(self: Arc<Self>) {
        self.notify(EV_WAKE)
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.notify(EV_WAKE)
    }
}
