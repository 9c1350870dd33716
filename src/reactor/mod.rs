//! Event loops: wait for readiness, accept, register and close descriptors, run timers.
//!
//! Only a loop's own thread calls its poller's register/deregister and waits on it; other
//! threads send it [`Command`]s and wake it through the poller's notifier. A loop never
//! runs user code: readiness becomes scheduled tasks, submitted to the worker pool as one
//! batch per wait.

mod commands;
mod slab;
pub(crate) mod timer;

use crate::exec::pool::batched;
use crate::runtime::Runtime;
use crate::sys::{Event, Interest, Poller};
use commands::CommandQueue;
use slab::Slab;
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, Instant};
pub(crate) use timer::TimerEntry;
use timer::Timers;

/// Something registered with a loop that wants to hear about readiness.
pub(crate) trait Source: Send + Sync + 'static {
    /// Readiness arrived. Runs on the loop thread: never block, never run user code here.
    fn ready(&self, ev: Event, ctx: &mut ReadyCtx<'_>);
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
pub(crate) struct ReadyCtx<'a> {
    pub rt: &'a Arc<Runtime>,
    pub lp: &'a Arc<Loop>,
    token: u64,
    register: &'a mut Vec<(RawFd, Arc<dyn Source>)>,
    retry: &'a mut Vec<(Instant, u64)>,
}

impl ReadyCtx<'_> {
    /// Registers a new source on this loop once the current batch is dispatched.
    pub fn register(&mut self, fd: RawFd, source: Arc<dyn Source>) {
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

pub(crate) enum Command {
    Register(RawFd, Arc<dyn Source>),
    /// Deregister and drop: the descriptor is closed by the loop, after which its token is dead.
    Close(u64, OwnedFd),
    /// Deregister a source (found by identity); its descriptor closes when it drops.
    Deregister(Arc<dyn Source>, RawFd),
    /// Abort every registered source (the shutdown deadline passed).
    AbortAll,
    Timer(Arc<TimerEntry>),
    Stop,
}

/// A loop's shared face.
pub(crate) struct Loop {
    pub index: usize,
    pub poller: Poller,
    commands: CommandQueue<Command>,
    /// When the current wait ends on its own, as nanoseconds since `epoch` (MAX: never).
    wakes_at: AtomicU64,
    epoch: Instant,
}

impl Loop {
    pub fn new(index: usize, poller: Poller) -> Loop {
        Loop {
            index,
            poller,
            commands: CommandQueue::new(),
            wakes_at: AtomicU64::new(u64::MAX),
            epoch: Instant::now(),
        }
    }

    fn nanos(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch)
            .as_nanos()
            .min(u64::MAX as u128 - 1) as u64
    }

    /// Sends a command and wakes the loop if it sleeps (coalescing wake-ups).
    pub fn send(&self, cmd: Command) {
        let urgent = match &cmd {
            Command::Timer(t) => self.nanos(t.deadline) < self.wakes_at.load(Ordering::SeqCst),
            _ => true,
        };
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

/// The loop thread's body: runs until a `Stop` command.
pub(crate) fn run_loop(rt: Arc<Runtime>, lp: Arc<Loop>) {
    let mut state = LoopState {
        slab: Slab::new(),
        tokens: HashMap::new(),
        timers: Timers::default(),
        events: Vec::with_capacity(1024),
        register: Vec::new(),
        retry: Vec::new(),
        wake: Vec::new(),
    };
    let _ctx = crate::runtime::enter(&rt);
    loop {
        if !state.run_commands(&lp) {
            break;
        }
        let now = Instant::now();
        let mut timeout = state
            .timers
            .next_deadline()
            .map(|d| d.saturating_duration_since(now));
        if let Some(first) = state.retry.iter().map(|r| r.0).min() {
            let t = first.saturating_duration_since(now);
            timeout = Some(timeout.map_or(t, |x| x.min(t)));
        }
        lp.wakes_at.store(
            timeout.map_or(u64::MAX, |t| lp.nanos(now + t)),
            Ordering::SeqCst,
        );
        if lp.commands.about_to_sleep() {
            timeout = Some(Duration::ZERO);
        }
        let waited = lp.poller.wait(&mut state.events, timeout);
        lp.commands.awake();
        if let Err(e) = waited {
            tracing::error!(error = %e, "event loop wait failed");
            std::thread::sleep(Duration::from_millis(10));
        }
        batched(&rt.pool, || state.dispatch(&rt, &lp));
    }
    for source in state.slab.drain() {
        source.loop_stopped();
    }
}

struct LoopState {
    slab: Slab<Arc<dyn Source>>,
    /// Token of each registered source by identity (for deregistration by identity).
    tokens: HashMap<usize, u64>,
    timers: Timers,
    events: Vec<Event>,
    register: Vec<(RawFd, Arc<dyn Source>)>,
    retry: Vec<(Instant, u64)>,
    wake: Vec<Waker>,
}

impl LoopState {
    /// Runs queued commands; false on `Stop`.
    fn run_commands(&mut self, lp: &Loop) -> bool {
        let cmds = lp.commands.take();
        let mut go_on = true;
        for cmd in cmds {
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
                Command::Stop => go_on = false,
            }
        }
        go_on
    }

    fn register(&mut self, lp: &Loop, fd: RawFd, source: Arc<dyn Source>) {
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

    fn deregister(&mut self, lp: &Loop, token: u64, fd: RawFd) {
        if let Some(source) = self.slab.remove(token) {
            if source.by_identity() {
                self.tokens
                    .remove(&(Arc::as_ptr(&source) as *const () as usize));
            }
            let _ = lp.poller.deregister(fd);
        }
    }

    fn dispatch(&mut self, rt: &Arc<Runtime>, lp: &Arc<Loop>) {
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

/// Picks the loop for a new descriptor, spreading them round-robin.
pub(crate) fn pick(rt: &Runtime) -> &Arc<Loop> {
    let i = rt.next_loop.fetch_add(1, Ordering::Relaxed) % rt.loops.len();
    &rt.loops[i]
}

/// Checks that a loop command can be sent at all (the runtime is running).
pub(crate) fn ensure_running(rt: &Runtime) -> io::Result<()> {
    if rt.is_stopped() {
        Err(io::Error::other("the fibr runtime has been shut down"))
    } else {
        Ok(())
    }
}
