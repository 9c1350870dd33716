//! Prefork (Linux): N worker processes serving the same listeners, under a supervisor
//! that restarts a child that dies, replaces them all on `SIGHUP` and stops them on
//! `SIGTERM`/`SIGINT`.
//!
//! ```no_run
//! # #[cfg(feature = "axum")] {
//! use fibr::prefork::Prefork;
//!
//! fn main() -> std::io::Result<()> {
//!     Prefork::new(4).listen("0.0.0.0:8080".parse().unwrap()).run(|mut child| {
//!         let listener = child.take_listener(0)?;
//!         let app = axum::Router::new().route("/", axum::routing::get(|| async { "hi" }));
//!         fibr::run(async move {
//!             let listener = fibr::net::TcpListener::from_std(listener)?;
//!             child.ready();
//!             fibr::serve(listener, app)
//!                 .with_graceful_shutdown(child.shutdown_signal())
//!                 .await
//!         })
//!     })
//! }
//! # }
//! ```
//!
//! The supervisor binds the listeners once, before it forks, and every child inherits
//! them: the children accept from one queue per address, so a child that exits (killed,
//! restarting, draining) never takes queued connections with it. The sockets have
//! `SO_REUSEPORT` set too, so a new supervisor (a binary upgrade) can bind beside a running
//! one. A child whose supervisor dies (even by `SIGKILL`) is sent `SIGTERM`, so no worker
//! outlives it.
//!
//! TLS session tickets (feature `tls`) are shared: `run` makes one ticket secret before it
//! forks (or takes the one given to [`Prefork::session_tickets`]), and every child, of
//! every generation, derives the same rotating keys from it ([`SharedTicketer`]), so a
//! ticket from one child resumes on another, also after a key rotation or a graceful
//! restart. `fibr::serve(..).with_tls(config)` uses it when `config` has no ticketer;
//! [`Child::ticketer`] hands it to a config used otherwise. (A rustls ticketer made before
//! `run` is not shared for good: on its first rotation each child picks a key of its own.)
//!
//! [`SharedTicketer`]: crate::tls::SharedTicketer

use crate::engine::sync_notify::Notify;
#[cfg(feature = "tls")]
use crate::tls::SharedTicketer;
use std::future::Future;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A supervisor of worker processes; see the [module](self) docs.
#[derive(Clone, Debug)]
pub struct Prefork {
    workers: usize,
    addrs: Vec<SocketAddr>,
    /// Longest wait for old children to exit on stop before they are killed.
    stop_timeout: Duration,
    /// Longest wait for new children's [`Child::ready`] in a restart.
    ready_timeout: Duration,
    /// A child that dies sooner than this after its start is replaced only this long after.
    restart_delay: Duration,
    /// The children's session tickets (made by `run` when not given).
    #[cfg(feature = "tls")]
    tickets: Option<Arc<SharedTicketer>>,
}

impl Prefork {
    /// `workers` processes (at least one); no listener yet.
    pub fn new(workers: usize) -> Prefork {
        Prefork {
            workers: workers.max(1),
            addrs: Vec::new(),
            stop_timeout: Duration::from_secs(30),
            ready_timeout: Duration::from_secs(10),
            restart_delay: Duration::from_secs(1),
            #[cfg(feature = "tls")]
            tickets: None,
        }
    }

    /// Adds a TCP address to listen on (its listener is [`Child::take_listener`]'s `i`-th,
    /// in the order added).
    #[must_use]
    pub fn listen(mut self, addr: SocketAddr) -> Prefork {
        self.addrs.push(addr);
        self
    }

    /// How long a stop waits for children to drain before killing them (30 s).
    #[must_use]
    pub fn stop_timeout(mut self, t: Duration) -> Prefork {
        self.stop_timeout = t;
        self
    }

    /// How long a restart waits for new children to be ready before stopping old ones
    /// anyway (10 s).
    #[must_use]
    pub fn ready_timeout(mut self, t: Duration) -> Prefork {
        self.ready_timeout = t;
        self
    }

    /// The pause before replacing a child that died within this long of starting (1 s),
    /// so a child that cannot start does not become a fork loop.
    #[must_use]
    pub fn restart_delay(mut self, t: Duration) -> Prefork {
        self.restart_delay = t;
        self
    }

    /// The session tickets every child seals and opens (feature `tls`): by default a
    /// [`SharedTicketer`] with a new secret, made by `run` before it forks; give one made
    /// [`from_secret`](SharedTicketer::from_secret) to share tickets with other machines,
    /// or [`with_period`](SharedTicketer::with_period) for another rotation period.
    #[cfg(feature = "tls")]
    #[must_use]
    pub fn session_tickets(mut self, ticketer: SharedTicketer) -> Prefork {
        self.tickets = Some(Arc::new(ticketer));
        self
    }

    /// Binds the listeners, forks the children (each runs `child_main` and exits with
    /// its result), and supervises them until `SIGTERM` or `SIGINT` has stopped them all.
    ///
    /// Call it from `main` before anything starts a thread (a runtime, a logger's
    /// thread): only the forking thread lives on in a child. It is refused otherwise.
    pub fn run<F>(
        #[cfg_attr(not(feature = "tls"), allow(unused_mut))] mut self,
        child_main: F,
    ) -> io::Result<()>
    where
        F: Fn(Child) -> io::Result<()>,
    {
        if threads()? != 1 {
            return Err(io::Error::other(
                "Prefork::run must be called before any thread is started",
            ));
        }
        #[cfg(feature = "tls")]
        if self.tickets.is_none() {
            self.tickets = Some(Arc::new(SharedTicketer::new().map_err(io::Error::other)?));
        }
        let listeners = self
            .addrs
            .iter()
            .map(|a| shared_listener(*a))
            .collect::<io::Result<Vec<_>>>()?;
        let signals = SignalSet::supervisor();
        signals.block()?;
        let (ready_rx, ready_tx) = pipe()?;
        let mut sup = Supervisor {
            config: self,
            listeners,
            ready_rx,
            ready_tx,
            children: Vec::new(),
            generation: 0,
            child_main: &child_main,
        };
        sup.run(&signals)
    }
}

/// What a child process gets: its listeners, a shutdown signal, a way to say it serves.
pub struct Child {
    index: usize,
    generation: u64,
    listeners: Vec<Option<TcpListener>>,
    ready_tx: OwnedFd,
    shutdown: Arc<Notify>,
    #[cfg(feature = "tls")]
    tickets: Arc<SharedTicketer>,
}

impl Child {
    /// Which of the workers this is (0..workers); a replacement keeps the index.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Bumped by each graceful restart (`SIGHUP`).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The `i`-th listener (inherited, shared with the other children). For
    /// [`net::TcpListener::from_std`](crate::engine::net::TcpListener::from_std) and `serve`.
    pub fn take_listener(&mut self, i: usize) -> io::Result<TcpListener> {
        self.listeners
            .get_mut(i)
            .and_then(Option::take)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such listener (or taken)"))
    }

    /// Tells the supervisor this child serves: a restart stops the old children once the
    /// new ones are ready.
    pub fn ready(&self) {
        let pid = std::process::id().to_ne_bytes();
        // SAFETY: a write of 4 bytes from a live buffer to a pipe this child owns; the
        // pipe is non-blocking and a write under PIPE_BUF is atomic.
        let _ = unsafe { libc::write(self.ready_tx.as_raw_fd(), pid.as_ptr().cast(), 4) };
    }

    /// The session tickets this child shares with the others (feature `tls`): for
    /// `ServerConfig::ticketer` (`fibr::serve(..).with_tls(config)` sets it when the
    /// config has none).
    #[cfg(feature = "tls")]
    pub fn ticketer(&self) -> Arc<SharedTicketer> {
        self.tickets.clone()
    }

    /// Completes on `SIGTERM` or `SIGINT` (for `with_graceful_shutdown`).
    pub fn shutdown_signal(&self) -> impl Future<Output = ()> + Send + 'static {
        let shutdown = self.shutdown.clone();
        async move { shutdown.wait().await }
    }
}

struct ChildProc {
    pid: libc::pid_t,
    index: usize,
    generation: u64,
    started: Instant,
    /// Sent SIGTERM (stopping or replaced): not restarted when it exits.
    retiring: bool,
    ready: bool,
}

struct Supervisor<'a, F> {
    config: Prefork,
    listeners: Vec<TcpListener>,
    ready_rx: OwnedFd,
    ready_tx: OwnedFd,
    children: Vec<ChildProc>,
    generation: u64,
    child_main: &'a F,
}

/// What the supervisor waits for next.
enum Event {
    ChildExited,
    Restart,
    Stop,
    Tick,
}

impl<F: Fn(Child) -> io::Result<()>> Supervisor<'_, F> {
    fn run(&mut self, signals: &SignalSet) -> io::Result<()> {
        for index in 0..self.config.workers {
            self.spawn(index)?;
        }
        // Replacements waiting for their restart delay: (when, index).
        let mut due: Vec<(Instant, usize)> = Vec::new();
        loop {
            match signals.wait(Duration::from_millis(100))? {
                Event::Stop => return self.stop(signals),
                Event::Restart => self.restart(signals)?,
                Event::ChildExited | Event::Tick => {}
            }
            self.read_ready();
            for (exited, _status) in reap() {
                let Some(pos) = self.children.iter().position(|c| c.pid == exited) else {
                    continue;
                };
                let c = self.children.swap_remove(pos);
                if !c.retiring {
                    let wait = self
                        .config
                        .restart_delay
                        .saturating_sub(c.started.elapsed());
                    due.push((Instant::now() + wait, c.index));
                }
            }
            let now = Instant::now();
            let mut i = 0;
            while i < due.len() {
                if due[i].0 <= now {
                    let (_, index) = due.swap_remove(i);
                    self.spawn(index)?;
                } else {
                    i += 1;
                }
            }
        }
    }

    fn spawn(&mut self, index: usize) -> io::Result<()> {
        let supervisor = std::process::id() as libc::pid_t;
        // SAFETY: this process has one thread (checked in `run`), so the child starts in a
        // consistent state; it runs `child_main` and leaves with `_exit`, never returning
        // into the supervisor's stack.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            let code = self.child(index, supervisor);
            // SAFETY: ends the child without running the supervisor's atexit handlers or
            // destructors (they belong to the parent's copy of this state).
            unsafe { libc::_exit(code) };
        }
        self.children.push(ChildProc {
            pid,
            index,
            generation: self.generation,
            started: Instant::now(),
            retiring: false,
            ready: false,
        });
        Ok(())
    }

    /// The child's side of a fork: its signals, its listeners, then `child_main`.
    fn child(&mut self, index: usize, supervisor: libc::pid_t) -> i32 {
        // A supervisor that dies (even by SIGKILL) stops its children gracefully; the
        // check after catches a supervisor that died before the request was made.
        // SAFETY: prctl with an integer option and signal number.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
        // SAFETY: getppid has no preconditions.
        if unsafe { libc::getppid() } != supervisor {
            return 1;
        }
        let shutdown = Arc::new(Notify::new());
        if let Err(e) = SignalSet::child().watch(shutdown.clone()) {
            eprintln!("fibr prefork child: {e}");
            return 1;
        }
        let dup = |l: &TcpListener| l.try_clone().ok();
        let child = Child {
            index,
            generation: self.generation,
            listeners: self.listeners.iter().map(dup).collect(),
            ready_tx: match self.ready_tx.try_clone() {
                Ok(fd) => fd,
                Err(_) => return 1,
            },
            shutdown,
            #[cfg(feature = "tls")]
            tickets: self.config.tickets.clone().expect("made by run"),
        };
        #[cfg(feature = "tls")]
        crate::tls::set_process_ticketer(child.ticketer());
        match (self.child_main)(child) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("fibr prefork child {index}: {e}");
                1
            }
        }
    }

    /// Marks the children that said they are ready.
    fn read_ready(&mut self) {
        let mut buf = [0u8; 4 * 64];
        loop {
            // SAFETY: reads into a live buffer of the given length from a non-blocking
            // pipe this process owns.
            let n = unsafe {
                libc::read(
                    self.ready_rx.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            };
            if n <= 0 {
                return;
            }
            for pid in buf[..n as usize].chunks_exact(4) {
                let pid = libc::pid_t::from_ne_bytes(pid.try_into().expect("4 bytes"));
                if let Some(c) = self.children.iter_mut().find(|c| c.pid == pid) {
                    c.ready = true;
                }
            }
        }
    }

    /// A graceful restart: a new generation, then the old one stopped once it serves.
    fn restart(&mut self, signals: &SignalSet) -> io::Result<()> {
        self.generation += 1;
        let generation = self.generation;
        for index in 0..self.config.workers {
            self.spawn(index)?;
        }
        let until = Instant::now() + self.config.ready_timeout;
        loop {
            self.read_ready();
            let new_ready = self
                .children
                .iter()
                .filter(|c| c.generation == generation)
                .all(|c| c.ready);
            if new_ready || Instant::now() >= until {
                break;
            }
            if let Event::Stop = signals.wait(Duration::from_millis(20))? {
                return self.stop(signals);
            }
        }
        for c in self
            .children
            .iter_mut()
            .filter(|c| c.generation < generation)
        {
            c.retiring = true;
            // SAFETY: signals a child of ours by pid (reaped only by this process).
            unsafe { libc::kill(c.pid, libc::SIGTERM) };
        }
        Ok(())
    }

    /// Stops every child (SIGTERM, then SIGKILL past the stop timeout) and returns.
    fn stop(&mut self, signals: &SignalSet) -> io::Result<()> {
        for c in &mut self.children {
            c.retiring = true;
            // SAFETY: as in `restart`.
            unsafe { libc::kill(c.pid, libc::SIGTERM) };
        }
        let until = Instant::now() + self.config.stop_timeout;
        while !self.children.is_empty() {
            for (pid, _) in reap() {
                self.children.retain(|c| c.pid != pid);
            }
            if Instant::now() >= until {
                for c in &self.children {
                    // SAFETY: as in `restart`.
                    unsafe { libc::kill(c.pid, libc::SIGKILL) };
                }
            }
            if !self.children.is_empty() {
                signals.wait(Duration::from_millis(20))?;
            }
        }
        Ok(())
    }
}

/// Children that exited, with their wait status.
fn reap() -> Vec<(libc::pid_t, i32)> {
    let mut out = Vec::new();
    loop {
        let mut status = 0;
        // SAFETY: waitpid with a live status pointer; WNOHANG never blocks.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return out;
        }
        out.push((pid, status));
    }
}

/// A set of signals, blocked so that they are taken synchronously (sigtimedwait).
struct SignalSet {
    set: libc::sigset_t,
}

impl SignalSet {
    fn of(signals: &[libc::c_int]) -> SignalSet {
        // SAFETY: sigemptyset/sigaddset initialise and fill a sigset_t we own.
        unsafe {
            let mut set = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for &s in signals {
                libc::sigaddset(&mut set, s);
            }
            SignalSet { set }
        }
    }

    fn supervisor() -> SignalSet {
        SignalSet::of(&[libc::SIGCHLD, libc::SIGHUP, libc::SIGTERM, libc::SIGINT])
    }

    fn child() -> SignalSet {
        SignalSet::of(&[libc::SIGTERM, libc::SIGINT])
    }

    /// Blocks the set in this thread (and the threads it starts from now on).
    fn block(&self) -> io::Result<()> {
        // SAFETY: sets this thread's mask from a valid set; the old mask is not wanted.
        let r =
            unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.set, std::ptr::null_mut()) };
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        Ok(())
    }

    /// Waits up to `timeout` for one of the set.
    fn wait(&self, timeout: Duration) -> io::Result<Event> {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
        };
        // SAFETY: a valid set and timespec; the siginfo is not wanted.
        let sig = unsafe { libc::sigtimedwait(&self.set, std::ptr::null_mut(), &ts) };
        Ok(match sig {
            libc::SIGCHLD => Event::ChildExited,
            libc::SIGHUP => Event::Restart,
            libc::SIGTERM | libc::SIGINT => Event::Stop,
            _ => {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EINTR) => Event::Tick,
                    _ => return Err(e),
                }
            }
        })
    }

    /// In a fresh child: blocks the set and starts a thread that waits for it and sets
    /// `shutdown` (every thread started later inherits the mask, so the signal comes here).
    fn watch(self, shutdown: Arc<Notify>) -> io::Result<()> {
        self.block()?;
        std::thread::Builder::new()
            .name("fibr-prefork-signals".into())
            .spawn(move || loop {
                if let Ok(Event::Stop) = self.wait(Duration::from_secs(3600)) {
                    shutdown.notify();
                }
            })?;
        Ok(())
    }
}

// SAFETY: a sigset_t is plain data, read only by the thread that owns the SignalSet.
unsafe impl Send for SignalSet {}

/// A listener for every child: SO_REUSEADDR and SO_REUSEPORT, inherited across fork.
fn shared_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let fd = crate::engine::sys::socket::tcp_listener(addr, true, 1024)?;
    let listener = TcpListener::from(fd);
    // std's sockets are close-on-exec, which fork keeps open (only exec closes them).
    Ok(listener)
}

/// A non-blocking pipe (read end, write end) for the children's readiness.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two fds into a live array; each is owned once wrapped.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Threads in this process now.
fn threads() -> io::Result<usize> {
    Ok(std::fs::read_dir("/proc/self/task")?.count())
}
