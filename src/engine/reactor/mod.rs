//! Event loops: wait for readiness, accept, register and close descriptors, run timers.
//!
//! A loop's state (its sources, timers and the right to wait on its poller) sits behind a
//! lock, and whoever holds it *drives* the loop for a turn: run queued [`Command`]s, wait
//! for readiness, dispatch it. The driver is usually an idle worker (see
//! `runtime::LoopDriver`): the worker that finishes a round goes on to wait for the next
//! readiness itself, so a busy server moves from one request to the next without a thread
//! switch, as a tokio worker polling its own driver does. The loop's own thread is the
//! standby: it drives only when no worker has for a while (all of them busy) and at
//! startup, and it tells the sources when the loop stops. Other threads send commands and
//! wake the driver through the poller's notifier. A turn never runs user code: readiness
//! becomes scheduled tasks, which reach the worker pool as one batch per turn.
//!
//! The loop is generic over its host `H` (the runtime, `runtime::Runtime`), which it only
//! hands to the sources: the runtime builds on the reactor, not the other way round.

pub(crate) mod coarse;
mod commands;
mod slab;
pub(crate) mod timer;

use crate::engine::exec::pool::{batch_len, batched, WorkerPool};
use crate::engine::sys::{Event, Interest, Poller};
use coarse::CoarseTimers;
use commands::CommandQueue;
use slab::Slab;
use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Waker;
use std::time::{Duration, Instant};
pub(crate) use timer::TimerEntry;
use timer::Timers;

/// Something registered with a loop that wants to hear about readiness.
pub(crate) trait Source<H>: Send + Sync + 'static {
    /// Readiness arrived. Runs on the thread driving the loop: never block, never run user
    /// code here.
    fn ready(&self, ev: Event, ctx: &mut ReadyCtx<'_, H>);
    /// The loop assigned this source its token (before any event can arrive).
    fn registered(&self, _token: u64) {}
    /// What a one-shot poller should be armed for at registration.
    fn interest(&self) -> Interest {
        Interest::BOTH
    }
    /// The loop is stopping with this source still registered.
    fn loop_stopped(&self) {}
    /// The engine's shutdown deadline passed: close now, whatever is queued.
    fn abort(&self) {}
    /// Whether this source is deregistered by identity (`Command::Deregister`) rather
    /// than by token; only those are indexed by identity.
    fn by_identity(&self) -> bool {
        true
    }
    /// The source was deregistered (its binding removed or the engine shutting down).
    fn deregistered(&self) {}
}

/// What a source may ask of the loop while it handles readiness.
pub(crate) struct ReadyCtx<'a, H> {
    pub rt: &'a Arc<H>,
    pub lp: &'a Arc<Loop<H>>,
    token: u64,
    register: &'a mut Vec<(RawFd, Arc<dyn Source<H>>)>,
    retry: &'a mut Vec<(Instant, u64)>,
}

impl<H: 'static> ReadyCtx<'_, H> {
    /// Registers a new source on this loop once the current batch is dispatched.
    pub fn register(&mut self, fd: RawFd, source: Arc<dyn Source<H>>) {
        self.register.push((fd, source));
    }

    /// The token of the source being dispatched.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// Delivers a synthetic readable event to the current source at `when` (back-off).
    pub fn retry_at(&mut self, when: Instant) {
        self.retry.push((when, self.token));
    }
}

pub(crate) enum Command<H> {
    Register(RawFd, Arc<dyn Source<H>>),
    /// Deregister and drop: the descriptor is closed by the loop, after which its token is dead.
    Close(u64, OwnedFd),
    /// Deregister a source (found by identity); its descriptor closes when it drops.
    Deregister(Arc<dyn Source<H>>, RawFd),
    /// Abort every registered source (the shutdown deadline passed).
    AbortAll,
    Timer(Arc<TimerEntry>),
}

/// A loop's shared face.
pub(crate) struct Loop<H> {
    pub index: usize,
    pub poller: Poller,
    commands: CommandQueue<Command<H>>,
    /// When the current wait ends on its own, as nanoseconds since `epoch` (MAX: never).
    wakes_at: AtomicU64,
    epoch: Instant,
    /// Held by whoever drives the loop for a turn.
    state: Mutex<LoopState<H>>,
    /// Counts turns, so the standby thread can tell whether anyone drives the loop.
    turns: AtomicU64,
    stopping: AtomicBool,
    /// The timeouts that share this loop's timers (`time::timeout`): one table per loop,
    /// so the workers of a large machine do not all take one lock.
    pub coarse: Arc<CoarseTimers>,
}

/// How long the standby thread first sleeps between looks at its loop, and at most (it
/// doubles the nap while someone else drives). Only a loop nobody drove between two looks
/// needs it: every worker is then busy, so what it would dispatch would wait for a worker
/// anyway, and workers also take quick turns between tasks.
const STANDBY_NAP: (Duration, Duration) = (Duration::from_millis(1), Duration::from_millis(64));

impl<H: 'static> Loop<H> {
    pub fn new(index: usize, poller: Poller) -> Loop<H> {
        Loop {
            index,
            poller,
            commands: CommandQueue::new(),
            wakes_at: AtomicU64::new(u64::MAX),
            epoch: Instant::now(),
            state: Mutex::new(LoopState::new()),
            turns: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
            coarse: Arc::new(CoarseTimers::new()),
        }
    }

    fn nanos(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch)
            .as_nanos()
            .min(u64::MAX as u128 - 1) as u64
    }

    /// Sends a command and wakes the loop if it sleeps (coalescing wake-ups); a timer due
    /// after the loop's own wake-up does not wake it.
    pub fn send(&self, cmd: Command<H>) {
        let due = match &cmd {
            Command::Timer(t) => Some(self.nanos(t.deadline)),
            _ => None,
        };
        let urgent = || due.is_none_or(|due| due < self.wakes_at.load(Ordering::SeqCst));
        if self.commands.push(cmd, urgent) {
            if let Err(e) = self.poller.notify() {
                tracing::error!(error = %e, "could not wake an event loop");
            }
        }
    }

    /// Re-arms a one-shot source (portable backend); a no-op for edge-triggered epoll.
    #[inline]
    pub fn rearm(&self, fd: RawFd, token: u64, interest: Interest) {
        if self.poller.needs_rearm() {
            if let Err(e) = self.poller.rearm(fd, token, interest) {
                tracing::debug!(error = %e, fd, "re-arming a source failed");
            }
        }
    }
}

impl<H: 'static> Loop<H> {
    /// One turn: run queued commands, wait for readiness (at most `max_wait`, less if a
    /// timer is due sooner), dispatch it. Tasks it wakes go wherever the caller collects
    /// them (an open batch).
    fn turn(self: &Arc<Self>, rt: &Arc<H>, st: &mut LoopState<H>, max_wait: Option<Duration>) {
        st.run_commands(self);
        let now = Instant::now();
        let mut timeout = st
            .timers
            .next_deadline()
            .map(|d| d.saturating_duration_since(now));
        if let Some(first) = st.retry.iter().map(|r| r.0).min() {
            let t = first.saturating_duration_since(now);
            timeout = Some(timeout.map_or(t, |x| x.min(t)));
        }
        self.wakes_at.store(
            timeout.map_or(u64::MAX, |t| self.nanos(now + t)),
            Ordering::SeqCst,
        );
        if let Some(cap) = max_wait {
            timeout = Some(timeout.map_or(cap, |t| t.min(cap)));
        }
        // Pending commands, or tasks the commands just readied, must not wait.
        if self.commands.about_to_sleep() || batch_len() > 0 {
            timeout = Some(Duration::ZERO);
        }
        let waited = self.poller.wait(&mut st.events, timeout);
        self.commands.awake();
        if let Err(e) = waited {
            tracing::error!(error = %e, "event loop wait failed");
            std::thread::sleep(Duration::from_millis(10));
        }
        st.dispatch(rt, self);
        self.turns.fetch_add(1, Ordering::Relaxed);
    }

    /// Drives one turn if no one else is; what became ready is scheduled on `rt`'s pool.
    /// Returns false if the loop is busy or stopping. Called by idle workers.
    pub(crate) fn try_turn(self: &Arc<Self>, rt: &Arc<H>, max_wait: Option<Duration>) -> bool {
        let Some(mut st) = self.try_lock_state() else {
            return false;
        };
        if self.stopping.load(Ordering::Acquire) {
            return false;
        }
        self.turn(rt, &mut st, max_wait);
        true
    }

    /// The loop's state, unless another thread is driving. A panic during a turn (a bug)
    /// does not retire the loop: its state is still consistent between dispatches.
    fn try_lock_state(&self) -> Option<std::sync::MutexGuard<'_, LoopState<H>>> {
        match self.state.try_lock() {
            Ok(st) => Some(st),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// Ends a stopped loop: runs the commands still queued (closing their descriptors),
    /// tells the sources, and drops all state. The state lives in the `Loop`, which the
    /// runtime owns, so what it holds (sources, timers' wakers: each holding the runtime)
    /// must go now or never. Called again after the workers stop, for their last commands.
    pub(crate) fn finish(&self) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.run_commands(self);
        for source in st.slab.drain() {
            source.loop_stopped();
        }
        let old = std::mem::replace(&mut *st, LoopState::new());
        drop(st);
        // Outside the lock: dropping wakers and sources may run user code.
        drop(old);
    }

    /// Asks the loop to stop: its standby thread takes the state, tells the sources, exits.
    pub(crate) fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        let _ = self.poller.notify();
    }
}

impl<H: 'static> Loop<H> {
    /// The loop's own thread: drives the loop when no one else does (what becomes ready
    /// goes to `pool`), and ends it on stop.
    pub(crate) fn standby(self: &Arc<Self>, rt: &Arc<H>, pool: &WorkerPool) {
        let mut nap = STANDBY_NAP.0;
        let mut seen = u64::MAX;
        while !self.stopping.load(Ordering::Acquire) {
            let turns = self.turns.load(Ordering::Relaxed);
            let mut drove = false;
            if turns == seen {
                if let Some(mut st) = self.try_lock_state() {
                    // Nobody drove since the last look: drive until a turn hands work to
                    // the pool (the worker that takes it drives next) or the loop stops.
                    drove = true;
                    while !self.stopping.load(Ordering::Acquire) {
                        let (_, jobs) = batched(pool, || self.turn(rt, &mut st, None));
                        if jobs > 0 {
                            break;
                        }
                    }
                }
            }
            nap = if drove {
                STANDBY_NAP.0
            } else {
                (nap * 2).min(STANDBY_NAP.1)
            };
            seen = self.turns.load(Ordering::Relaxed);
            std::thread::park_timeout(nap);
        }
        self.finish();
    }
}

struct LoopState<H> {
    slab: Slab<Arc<dyn Source<H>>>,
    /// Token of each registered source by identity (for deregistration by identity).
    tokens: HashMap<usize, u64>,
    timers: Timers,
    events: Vec<Event>,
    register: Vec<(RawFd, Arc<dyn Source<H>>)>,
    retry: Vec<(Instant, u64)>,
    wake: Vec<Waker>,
}

impl<H: 'static> LoopState<H> {
    fn new() -> LoopState<H> {
        LoopState {
            slab: Slab::new(),
            tokens: HashMap::new(),
            timers: Timers::default(),
            events: Vec::with_capacity(1024),
            register: Vec::new(),
            retry: Vec::new(),
            wake: Vec::new(),
        }
    }

    /// Runs queued commands.
    fn run_commands(&mut self, lp: &Loop<H>) {
        for cmd in lp.commands.take() {
            match cmd {
                Command::Register(fd, source) => self.register(lp, fd, source),
                Command::Close(token, fd) => {
                    self.deregister(lp, token, fd.as_raw_fd());
                    drop(fd);
                }
                Command::Deregister(source, fd) => {
                    if let Some(token) = self
                        .tokens
                        .remove(&(Arc::as_ptr(&source) as *const () as usize))
                    {
                        self.deregister(lp, token, fd);
                    }
                    source.deregistered();
                }
                Command::AbortAll => {
                    for source in self.slab.iter() {
                        source.abort();
                    }
                }
                Command::Timer(t) => self.timers.add(t),
            }
        }
    }

    fn register(&mut self, lp: &Loop<H>, fd: RawFd, source: Arc<dyn Source<H>>) {
        let interest = source.interest();
        let token = self.slab.insert(source.clone());
        if source.by_identity() {
            self.tokens
                .insert(Arc::as_ptr(&source) as *const () as usize, token);
        }
        if let Err(e) = lp.poller.register(fd, token, interest) {
            tracing::error!(error = %e, fd, "registering a descriptor failed");
            self.slab.remove(token);
            self.tokens
                .remove(&(Arc::as_ptr(&source) as *const () as usize));
            source.abort();
        } else {
            source.registered(token);
        }
    }

    fn deregister(&mut self, lp: &Loop<H>, token: u64, fd: RawFd) {
        if let Some(source) = self.slab.remove(token) {
            if source.by_identity() {
                self.tokens
                    .remove(&(Arc::as_ptr(&source) as *const () as usize));
            }
            let _ = lp.poller.deregister(fd);
        }
    }

    fn dispatch(&mut self, rt: &Arc<H>, lp: &Arc<Loop<H>>) {
        let now = Instant::now();
        self.timers.fire_due(now, &mut self.wake);
        for w in self.wake.drain(..) {
            w.wake();
        }
        let mut events = std::mem::take(&mut self.events);
        if !self.retry.is_empty() {
            let mut i = 0;
            while i < self.retry.len() {
                if self.retry[i].0 <= now {
                    let (_, token) = self.retry.swap_remove(i);
                    events.push(Event {
                        token,
                        readable: true,
                        writable: false,
                        closed: false,
                        read_closed: false,
                    });
                } else {
                    i += 1;
                }
            }
        }
        for ev in events.drain(..) {
            if let Some(source) = self.slab.get(ev.token) {
                let mut ctx = ReadyCtx {
                    rt,
                    lp,
                    token: ev.token,
                    register: &mut self.register,
                    retry: &mut self.retry,
                };
                source.ready(ev, &mut ctx);
            }
        }
        self.events = events;
        let mut reg = std::mem::take(&mut self.register);
        for (fd, source) in reg.drain(..) {
            self.register(lp, fd, source);
        }
        self.register = reg;
    }
}
