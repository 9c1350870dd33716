//! The engine: a runtime (loops + workers) serving a set of bindings.

use crate::engine::conn::udp::UdpSocketSource;
use crate::engine::conn::{Conn, Handler, Kind, Listener};
use crate::engine::reactor::Source;
use crate::engine::runtime::{Command, Config, Loop, Runtime};
use crate::engine::sys::socket;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
enum Addr {
    Tcp(SocketAddr),
    /// A listener made elsewhere (inherited, as prefork's children get theirs).
    TcpListener(Arc<std::net::TcpListener>),
    Unix(PathBuf),
    Udp(SocketAddr),
}

/// A group of addresses served by one handler.
pub struct Binding {
    addrs: Vec<Addr>,
    handler: Arc<dyn Handler>,
}

fn resolve(addr: impl ToSocketAddrs) -> io::Result<SocketAddr> {
    addr.to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "address resolved to nothing"))
}

impl Binding {
    /// A TCP binding; `addr` is resolved now (its first address is used).
    pub fn tcp(addr: impl ToSocketAddrs, handler: impl Handler) -> Binding {
        Binding::with_addr(resolve(addr).map(Addr::Tcp), handler)
    }

    /// A TCP binding on a listener that is already bound and listening (one inherited
    /// from a [`Prefork`](crate::prefork::Prefork) supervisor, say); the binding serves a
    /// duplicate of it, so the caller's copy stays usable.
    pub fn tcp_listener(listener: std::net::TcpListener, handler: impl Handler) -> Binding {
        Binding {
            addrs: vec![Addr::TcpListener(Arc::new(listener))],
            handler: Arc::new(handler),
        }
    }

    /// A Unix stream socket binding at `path`.
    pub fn unix(path: impl Into<PathBuf>, handler: impl Handler) -> Binding {
        Binding {
            addrs: vec![Addr::Unix(path.into())],
            handler: Arc::new(handler),
        }
    }

    /// A UDP binding: one logical connection per peer.
    pub fn udp(addr: impl ToSocketAddrs, handler: impl Handler) -> Binding {
        Binding::with_addr(resolve(addr).map(Addr::Udp), handler)
    }

    /// Adds another TCP address served by the same handler.
    pub fn and_tcp(mut self, addr: impl ToSocketAddrs) -> Binding {
        self.push(resolve(addr).map(Addr::Tcp));
        self
    }

    /// Adds another Unix socket path served by the same handler.
    pub fn and_unix(mut self, path: impl Into<PathBuf>) -> Binding {
        self.addrs.push(Addr::Unix(path.into()));
        self
    }

    /// Adds another UDP address served by the same handler.
    pub fn and_udp(mut self, addr: impl ToSocketAddrs) -> Binding {
        self.push(resolve(addr).map(Addr::Udp));
        self
    }

    fn with_addr(addr: io::Result<Addr>, handler: impl Handler) -> Binding {
        let mut b = Binding {
            addrs: Vec::new(),
            handler: Arc::new(handler),
        };
        b.push(addr);
        b
    }

    fn push(&mut self, addr: io::Result<Addr>) {
        match addr {
            Ok(a) => self.addrs.push(a),
            // Surface resolution failures from Engine::new/add_binding, not from a builder.
            Err(e) => self
                .addrs
                .push(Addr::Unix(PathBuf::from(format!("\0unresolved: {e}")))),
        }
    }
}

/// One open socket of a binding, registered on a loop.
struct Open {
    lp: Arc<Loop>,
    fd: RawFd,
    source: Arc<dyn Source<Runtime>>,
    bound: Option<SocketAddr>,
    unix_path: Option<PathBuf>,
}

struct BindingState {
    open: Vec<Open>,
}

struct EngineInner {
    rt: Arc<Runtime>,
    bindings: Mutex<Vec<Option<BindingState>>>,
    done: Mutex<bool>,
    done_cv: std::sync::Condvar,
}

/// A running set of event loops and workers serving bindings. Cheap to clone; the threads
/// stop at [`Engine::shutdown`] (or when the last handle drops).
#[derive(Clone)]
pub struct Engine {
    inner: Arc<EngineInner>,
}

impl Engine {
    /// Starts the loops and workers and opens every binding.
    pub fn new(config: Config, bindings: impl IntoIterator<Item = Binding>) -> io::Result<Engine> {
        let rt = Runtime::start(config)?;
        let engine = Engine {
            inner: Arc::new(EngineInner {
                rt,
                bindings: Mutex::new(Vec::new()),
                done: Mutex::new(false),
                done_cv: std::sync::Condvar::new(),
            }),
        };
        for b in bindings {
            if let Err(e) = engine.add_binding(b) {
                engine.shutdown(Duration::ZERO);
                return Err(e);
            }
        }
        Ok(engine)
    }

    pub(crate) fn runtime(&self) -> &Arc<Runtime> {
        &self.inner.rt
    }

    /// Opens a binding while running; returns its index (for `binding_addrs`/`remove_binding`).
    pub fn add_binding(&self, binding: Binding) -> io::Result<usize> {
        let rt = &self.inner.rt;
        rt.ensure_running()?;
        let mut open = Vec::new();
        let result = (|| {
            for addr in binding.addrs.iter() {
                open.push(self.open_addr(addr, &binding.handler)?);
            }
            Ok(())
        })();
        if let Err(e) = result {
            for o in open {
                close_open(o);
            }
            return Err(e);
        }
        let mut bindings = self.inner.bindings.lock().unwrap();
        bindings.push(Some(BindingState { open }));
        Ok(bindings.len() - 1)
    }

    fn open_addr(&self, addr: &Addr, handler: &Arc<dyn Handler>) -> io::Result<Open> {
        let rt = &self.inner.rt;
        let lp = rt.pick_loop().clone();
        let backlog = rt.config.listen_backlog;
        let (fd, source, bound, unix_path): (RawFd, Arc<dyn Source<Runtime>>, _, _) = match addr {
            Addr::Tcp(a) => {
                let fd = socket::tcp_listener(*a, rt.config.reuse_port, backlog)?;
                let bound = socket::local_addr(fd.as_raw_fd());
                (
                    fd.as_raw_fd(),
                    self.listener(fd, Kind::Tcp, handler),
                    bound,
                    None,
                )
            }
            Addr::TcpListener(l) => {
                let dup = l.try_clone()?;
                dup.set_nonblocking(true)?;
                let fd = OwnedFd::from(dup);
                let bound = socket::local_addr(fd.as_raw_fd());
                (
                    fd.as_raw_fd(),
                    self.listener(fd, Kind::Tcp, handler),
                    bound,
                    None,
                )
            }
            Addr::Unix(p) => {
                if let Some(msg) = p.to_str().and_then(|s| s.strip_prefix('\0')) {
                    return Err(io::Error::new(io::ErrorKind::InvalidInput, msg.to_string()));
                }
                let fd = socket::unix_listener(p, backlog)?;
                (
                    fd.as_raw_fd(),
                    self.listener(fd, Kind::Unix, handler),
                    None,
                    Some(p.clone()),
                )
            }
            Addr::Udp(a) => {
                let fd = socket::udp_socket(*a)?;
                let bound = socket::local_addr(fd.as_raw_fd());
                let src = UdpSocketSource::new(fd, handler.clone(), &rt.config);
                (src.raw_fd(), src, bound, None)
            }
        };
        lp.send(Command::Register(fd, source.clone()));
        Ok(Open {
            lp,
            fd,
            source,
            bound,
            unix_path,
        })
    }

    fn listener(
        &self,
        fd: OwnedFd,
        kind: Kind,
        handler: &Arc<dyn Handler>,
    ) -> Arc<dyn Source<Runtime>> {
        Arc::new(Listener {
            fd,
            kind,
            handler: handler.clone(),
            admit: None,
        })
    }

    /// The addresses binding `index` is bound to (with the real port when 0 was asked).
    /// Unix sockets have none.
    pub fn binding_addrs(&self, index: usize) -> Vec<SocketAddr> {
        let bindings = self.inner.bindings.lock().unwrap();
        match bindings.get(index) {
            Some(Some(b)) => b.open.iter().filter_map(|o| o.bound).collect(),
            _ => Vec::new(),
        }
    }

    /// Stops accepting on binding `index` (its connections go on). False if unknown.
    pub fn remove_binding(&self, index: usize) -> bool {
        let state = {
            let mut bindings = self.inner.bindings.lock().unwrap();
            bindings.get_mut(index).and_then(|b| b.take())
        };
        match state {
            Some(b) => {
                for o in b.open {
                    close_open(o);
                }
                true
            }
            None => false,
        }
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        self.inner.rt.live_conns()
    }

    /// Output bytes queued over all connections now: what `Config::max_pending_bytes`
    /// bounds (one counter, so a reading is exact, unlike a sum of per-connection ones).
    pub fn queued_bytes(&self) -> usize {
        self.inner
            .rt
            .pending_bytes
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Worker threads alive now (replacements for blocked workers included).
    pub fn workers(&self) -> usize {
        self.inner.rt.pool.live_workers()
    }

    /// Spawns a future on this engine's workers.
    pub fn spawn<F>(&self, future: F) -> crate::engine::exec::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        crate::engine::exec::spawn_on(&self.inner.rt.pool, future)
    }

    /// Runs `future` to completion on the calling thread with this engine as the current
    /// runtime (so `fibr::spawn`, timers and `fibr::net` use it).
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        let _g = crate::engine::runtime::enter(&self.inner.rt);
        crate::engine::exec::block_on(future)
    }

    /// Blocks the calling thread until the engine has shut down.
    pub fn run(&self) -> io::Result<()> {
        let mut done = self.inner.done.lock().unwrap();
        while !*done {
            done = self.inner.done_cv.wait(done).unwrap();
        }
        Ok(())
    }

    /// Stops accepting, waits up to `deadline` for open connections to finish, closes the
    /// rest, then stops the loops and workers. Returns once all of that is done.
    pub fn shutdown(&self, deadline: Duration) {
        let until = Instant::now() + deadline;
        let all: Vec<BindingState> = {
            let mut bindings = self.inner.bindings.lock().unwrap();
            bindings.iter_mut().filter_map(|b| b.take()).collect()
        };
        for b in all {
            for o in b.open {
                close_open(o);
            }
        }
        let rt = &self.inner.rt;
        if !rt.wait_conns_closed(until) {
            tracing::debug!(
                open = rt.live_conns(),
                "shutdown deadline passed; closing connections"
            );
            for lp in rt.loops.iter() {
                lp.send(Command::AbortAll);
            }
            rt.wait_conns_closed(Instant::now() + Duration::from_millis(500));
        }
        rt.stop(Duration::from_millis(500));
        *self.inner.done.lock().unwrap() = true;
        self.inner.done_cv.notify_all();
    }
}

fn close_open(o: Open) {
    // The listener's descriptor closes when the loop drops the last reference.
    o.lp.send(Command::Deregister(o.source, o.fd));
    if let Some(p) = o.unix_path {
        let _ = std::fs::remove_file(p);
    }
}

impl Drop for EngineInner {
    fn drop(&mut self) {
        if !self.rt.is_stopped() {
            self.rt.stop(Duration::from_millis(100));
        }
    }
}

// `Conn::dial` takes the engine, so it lives here rather than in `conn`, which the engine
// is built on.
impl Conn {
    /// Starts a non-blocking TCP connect; `handler.on_open` runs once it completes, or
    /// `on_close` with the error if it fails. Output sent before that is queued.
    pub fn dial(engine: &Engine, addr: SocketAddr, handler: impl Handler) -> io::Result<Conn> {
        Conn::dial_on(engine.runtime(), addr, Arc::new(handler))
    }
}
