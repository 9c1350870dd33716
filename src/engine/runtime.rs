//! The runtime behind an engine: its configuration, event loops and worker pool, and the
//! thread-local "current runtime" that `spawn`, timers and the I/O types use.

use crate::engine::exec::pool::{WorkerPool, WorkerPoolConfig};
use crate::engine::reactor;
use crate::engine::sys::{Backend, Poller};
use std::cell::RefCell;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Engine-wide settings. Every limit has a sane default: start from `Config::default()`
/// and change what you need with the `with_*` setters (or by assigning fields), as in
/// `Config::default().with_workers(2)`. It is `#[non_exhaustive]`, so settings added later
/// do not break your code. (The HTTP server's own settings are `fibr::http::ServerConfig`.)
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// The readiness backend. Default: `FIBR_BACKEND` (`epoll` or `portable`) if set, else
    /// the native one (epoll on Linux).
    pub backend: Backend,
    /// Event loops (each with a standby thread); 0 means one per four cores, at least one.
    pub event_loops: usize,
    /// Worker threads kept running; 0 means the available parallelism.
    pub workers: usize,
    /// Upper bound on workers, counting replacements for blocked ones.
    pub max_workers: usize,
    /// A worker stuck in one task longer than this is replaced by a new worker.
    pub blocking_threshold: Duration,
    /// Extra workers (beyond `workers`) exit after idling this long.
    pub worker_idle_timeout: Duration,
    /// Size of the buffer a connection borrows to read into during a round.
    pub read_buffer_size: usize,
    /// Past this many queued output bytes, a connection stops reading.
    pub write_high_watermark: usize,
    /// Reads resume once the queue drains to this many bytes.
    pub write_low_watermark: usize,
    /// Optional bound on the queued output of all connections together: past it,
    /// connections with queued output stop reading until their queue drains.
    pub max_pending_bytes: Option<usize>,
    /// Listen backlog for TCP and Unix listeners.
    pub listen_backlog: i32,
    /// Set SO_REUSEPORT on TCP listeners, so several processes (prefork) or engines can
    /// share a port and the kernel spreads connections between them.
    pub reuse_port: bool,
    /// Set TCP_NODELAY on accepted and dialed TCP connections.
    pub tcp_nodelay: bool,
    /// A connection whose queued output makes no progress for this long (the peer stopped
    /// reading) is closed. `None` waits forever.
    pub write_timeout: Option<Duration>,
    /// A stream closed gracefully shuts its write side, then reads and drops what the peer
    /// still sends for up to this long before closing, so a reset cannot destroy the last
    /// response before the client reads it. `None` closes at once.
    pub linger_timeout: Option<Duration>,
    /// Most bytes read and dropped while lingering; past this the connection closes.
    pub linger_max_bytes: usize,
    /// A UDP peer with no datagram for this long is closed.
    pub udp_peer_idle_timeout: Duration,
    /// Most UDP peers tracked per socket; datagrams from further peers are dropped.
    pub udp_max_peers: usize,
    /// UDP sockets of bindings send several equal-size datagrams in one call with
    /// segmentation offload (Linux UDP_SEGMENT) where the kernel has it: see
    /// [`Conn::send_segments`](crate::Conn::send_segments). Off: one datagram per entry of
    /// the send batch, and [`Conn::max_segments`](crate::Conn::max_segments) is 1.
    pub udp_gso: bool,
    /// UDP sockets of bindings let the kernel coalesce received datagrams of one peer into
    /// one read (Linux UDP_GRO), split again before handlers see them. Off: one datagram
    /// per read.
    pub udp_gro: bool,
    /// Prefix of thread names.
    pub thread_name: String,
}

impl Default for Config {
    fn default() -> Config {
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        Config {
            backend: Backend::from_env(),
            event_loops: 0,
            workers: 0,
            max_workers: (cores * 8).max(64),
            blocking_threshold: Duration::from_millis(100),
            worker_idle_timeout: Duration::from_secs(10),
            read_buffer_size: 16 * 1024,
            write_high_watermark: 64 * 1024,
            write_low_watermark: 16 * 1024,
            max_pending_bytes: None,
            listen_backlog: 1024,
            reuse_port: false,
            tcp_nodelay: true,
            write_timeout: Some(Duration::from_secs(60)),
            linger_timeout: Some(Duration::from_secs(1)),
            linger_max_bytes: 1024 * 1024,
            udp_peer_idle_timeout: Duration::from_secs(60),
            udp_max_peers: 65_536,
            udp_gso: true,
            udp_gro: true,
            thread_name: "fibr".into(),
        }
    }
}

config_setters!(Config {
    set with_backend => backend: Backend,
    set with_event_loops => event_loops: usize,
    set with_workers => workers: usize,
    set with_max_workers => max_workers: usize,
    set with_blocking_threshold => blocking_threshold: Duration,
    set with_worker_idle_timeout => worker_idle_timeout: Duration,
    set with_read_buffer_size => read_buffer_size: usize,
    set with_write_high_watermark => write_high_watermark: usize,
    set with_write_low_watermark => write_low_watermark: usize,
    opt with_max_pending_bytes => max_pending_bytes: usize,
    set with_listen_backlog => listen_backlog: i32,
    set with_reuse_port => reuse_port: bool,
    set with_tcp_nodelay => tcp_nodelay: bool,
    opt with_write_timeout => write_timeout: Duration,
    opt with_linger_timeout => linger_timeout: Duration,
    set with_linger_max_bytes => linger_max_bytes: usize,
    set with_udp_peer_idle_timeout => udp_peer_idle_timeout: Duration,
    set with_udp_max_peers => udp_max_peers: usize,
    set with_udp_gso => udp_gso: bool,
    set with_udp_gro => udp_gro: bool,
    into with_thread_name => thread_name: String,
});

impl Config {
    fn loops(&self) -> usize {
        if self.event_loops > 0 {
            return self.event_loops;
        }
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        if cores <= 4 {
            1
        } else {
            cores.div_ceil(4).max(2)
        }
    }

    fn workers(&self) -> usize {
        if self.workers > 0 {
            self.workers
        } else {
            thread::available_parallelism().map_or(1, |n| n.get())
        }
    }
}

/// The runtime's event loop, command and readiness context (the reactor is generic over
/// its host, so that it does not depend on the runtime).
pub(crate) type Loop = reactor::Loop<Runtime>;
pub(crate) type Command = reactor::Command<Runtime>;
pub(crate) type ReadyCtx<'a> = reactor::ReadyCtx<'a, Runtime>;

pub(crate) struct Runtime {
    /// The tokio runtime every worker enters (feature `tokio`).
    #[cfg(feature = "tokio")]
    pub tokio: tokio::runtime::Handle,
    pub config: Config,
    pub loops: Vec<Arc<Loop>>,
    pub pool: WorkerPool,
    pub next_loop: AtomicUsize,
    /// Queued output bytes over all connections (for `max_pending_bytes`).
    pub pending_bytes: AtomicUsize,
    live_conns: Mutex<usize>,
    conns_changed: Condvar,
    stopped: AtomicBool,
    loop_threads: Mutex<Vec<JoinHandle<()>>>,
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Runtime>>> = const { RefCell::new(None) };
}

static DEFAULT: OnceLock<Arc<Runtime>> = OnceLock::new();

/// Restores the previous current runtime when dropped.
pub(crate) struct EnterGuard {
    prev: Option<Arc<Runtime>>,
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        let prev = self.prev.take();
        let _ = CURRENT.try_with(|c| *c.borrow_mut() = prev);
    }
}

/// Makes `rt` the current runtime of this thread until the guard drops.
pub(crate) fn enter(rt: &Arc<Runtime>) -> EnterGuard {
    let prev = CURRENT.with(|c| c.borrow_mut().replace(rt.clone()));
    EnterGuard { prev }
}

impl Runtime {
    pub fn start(config: Config) -> io::Result<Arc<Runtime>> {
        let mut loops = Vec::new();
        for i in 0..config.loops() {
            loops.push(Arc::new(Loop::new(i, Poller::new(config.backend)?)));
        }
        let workers = config.workers();
        let rt = Arc::new_cyclic(|weak: &std::sync::Weak<Runtime>| {
            let driver = Arc::new(LoopDriver { rt: weak.clone() });
            let weak = weak.clone();
            let pool = WorkerPool::new(WorkerPoolConfig {
                name: config.thread_name.clone(),
                workers,
                max_workers: config.max_workers.max(workers),
                blocking_threshold: config.blocking_threshold,
                idle_timeout: config.worker_idle_timeout,
                around: Some(Arc::new(move |work: &mut dyn FnMut()| {
                    let Some(rt) = weak.upgrade() else { return };
                    CURRENT.with(|c| *c.borrow_mut() = Some(rt.clone()));
                    #[cfg(feature = "tokio")]
                    let _tokio = rt.tokio.enter();
                    drop(rt);
                    work();
                    CURRENT.with(|c| *c.borrow_mut() = None);
                })),
                driver: Some(driver),
            });
            Runtime {
                #[cfg(feature = "tokio")]
                tokio: tokio_context::handle(),
                config,
                loops,
                pool,
                next_loop: AtomicUsize::new(0),
                pending_bytes: AtomicUsize::new(0),
                live_conns: Mutex::new(0),
                conns_changed: Condvar::new(),
                stopped: AtomicBool::new(false),
                loop_threads: Mutex::new(Vec::new()),
            }
        });
        rt.pool.start()?;
        let mut threads = Vec::new();
        for lp in rt.loops.iter() {
            let (rt2, lp2) = (rt.clone(), lp.clone());
            threads.push(
                thread::Builder::new()
                    .name(format!("{}-loop-{}", rt.config.thread_name, lp.index))
                    .spawn(move || {
                        let _ctx = enter(&rt2);
                        lp2.standby(&rt2, &rt2.pool);
                    })?,
            );
        }
        *rt.loop_threads.lock().unwrap() = threads;
        Ok(rt)
    }

    /// The current thread's runtime, else the process-wide default one (started on first use).
    pub fn current() -> Arc<Runtime> {
        if let Some(rt) = CURRENT.with(|c| c.borrow().clone()) {
            return rt;
        }
        DEFAULT
            .get_or_init(|| {
                Runtime::start(Config {
                    thread_name: "fibr-default".into(),
                    ..Config::default()
                })
                .expect("start the default fibr runtime")
            })
            .clone()
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Checks that a loop command can be sent at all (the runtime is running).
    pub fn ensure_running(&self) -> io::Result<()> {
        if self.is_stopped() {
            Err(io::Error::other("the fibr runtime has been shut down"))
        } else {
            Ok(())
        }
    }

    /// Picks the loop for a new descriptor, spreading them round-robin.
    pub fn pick_loop(&self) -> &Arc<Loop> {
        let i = self.next_loop.fetch_add(1, Ordering::Relaxed) % self.loops.len();
        &self.loops[i]
    }

    pub fn conn_opened(&self) {
        *self.live_conns.lock().unwrap() += 1;
    }

    pub fn conn_closed(&self) {
        let mut n = self.live_conns.lock().unwrap();
        *n -= 1;
        if *n == 0 {
            self.conns_changed.notify_all();
        }
    }

    pub fn live_conns(&self) -> usize {
        *self.live_conns.lock().unwrap()
    }

    /// Waits until no connection is open, or `deadline` passes; true if none is left.
    pub fn wait_conns_closed(&self, deadline: Instant) -> bool {
        let mut n = self.live_conns.lock().unwrap();
        while *n > 0 {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            n = self
                .conns_changed
                .wait_timeout(n, deadline - now)
                .unwrap()
                .0;
        }
        true
    }

    /// Stops the loops and the workers. Idempotent.
    pub fn stop(&self, deadline: Duration) {
        if self.stopped.swap(true, Ordering::AcqRel) {
            return;
        }
        for lp in self.loops.iter() {
            lp.stop();
        }
        let me = thread::current().id();
        for t in self.loop_threads.lock().unwrap().drain(..) {
            t.thread().unpark();
            if t.thread().id() != me {
                let _ = t.join();
            }
        }
        self.pool.shutdown(deadline);
        // What the workers sent the loops while stopping (closes, mostly).
        for lp in self.loops.iter() {
            lp.finish();
        }
    }
}

#[cfg(feature = "tokio")]
mod tokio_context {
    use std::sync::OnceLock;
    use tokio::runtime::{Builder, Handle, Runtime};

    /// The tokio runtime fibr's workers enter: the caller's, if there is one (so tokio
    /// code in handlers shares the app's runtime), else a small background one.
    pub(super) fn handle() -> Handle {
        if let Ok(h) = Handle::try_current() {
            return h;
        }
        static BACKGROUND: OnceLock<Runtime> = OnceLock::new();
        BACKGROUND
            .get_or_init(|| {
                Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("fibr-tokio")
                    .enable_all()
                    .build()
                    .expect("start fibr's background tokio runtime")
            })
            .handle()
            .clone()
    }
}

/// Lets the pool's idle workers drive the runtime's loops.
struct LoopDriver {
    rt: std::sync::Weak<Runtime>,
}

impl crate::engine::exec::pool::Drive for LoopDriver {
    fn turn(&self, worker: usize, max_wait: Option<Duration>) -> bool {
        let Some(rt) = self.rt.upgrade() else {
            return false;
        };
        let n = rt.loops.len();
        (0..n).any(|i| rt.loops[(worker + i) % n].try_turn(&rt, max_wait))
    }

    fn interrupt(&self) {
        if let Some(rt) = self.rt.upgrade() {
            // Unconditional: the worker may be just about to wait. The notification
            // stays pending until some turn consumes it, so it cannot be lost.
            for lp in rt.loops.iter() {
                let _ = lp.poller.notify();
            }
        }
    }
}

/// Spawns a future on the current runtime's workers (the default runtime outside one).
pub fn spawn<F>(future: F) -> crate::engine::exec::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    crate::engine::exec::spawn_on(&Runtime::current().pool, future)
}

/// Runs `future` to completion on the calling thread, with the current runtime (or the
/// process-wide default one, started on first use) driving its I/O, timers and spawns.
pub fn run<F: std::future::Future>(future: F) -> F::Output {
    let rt = Runtime::current();
    let _g = enter(&rt);
    #[cfg(feature = "tokio")]
    let _tokio = rt.tokio.enter();
    crate::engine::exec::block_on(future)
}

/// Yields to other tasks once.
pub async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await
}
