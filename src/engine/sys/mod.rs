//! OS backends: readiness pollers and the raw socket calls the rest of fibr is built on.
//!
//! `pipe` (Linux) has the pipes and `splice(2)` of the relay's zero-copy path.
//!
//! Two pollers sit behind one type. The native one is edge-triggered epoll with direct
//! syscalls (Linux only). The portable one is the `polling` crate in one-shot mode (epoll
//! on Linux, kqueue on macOS and the BSDs, event ports on illumos), the lowest common
//! denominator: after each event the source is re-armed once the worker has drained it.
//!
//! What runs where: fibr is built and tested on Linux (x86_64) only, its whole suite once
//! on each backend, so the portable backend's one-shot re-arming is tested here, on
//! `polling`'s epoll. For macOS, FreeBSD and illumos (x86_64) the library is only known to
//! compile (`scripts/check-platforms`: `cargo check --lib`, every feature but
//! `tls-aws-lc`); nothing has run there: not `polling`'s kqueue or event ports, not the
//! non-Linux branches of `socket` (accept then fcntl, recvfrom and sendto loops instead of
//! recvmmsg/sendmmsg, sendfile through pread). Linux only: the epoll backend, the relay's
//! `splice(2)`, UDP GSO/GRO, and `fibr::prefork` (PR_SET_PDEATHSIG, sigtimedwait). On
//! illumos, [`Config::reuse_port`](crate::Config::reuse_port) is an error.
//!
//! fibr is Unix-only: raw descriptors (`std::os::fd`) and libc's socket calls run through
//! the whole crate, not only this module, so there is no IOCP (Windows) backend, and a
//! build for a non-Unix target stops at the `compile_error!` below.

#[cfg(not(unix))]
compile_error!(
    "fibr runs on Unix-like systems only (raw descriptors and libc socket calls throughout); \
     Windows is not supported"
);

#[cfg(target_os = "linux")]
mod epoll;
#[cfg(target_os = "linux")]
#[cfg_attr(not(feature = "proxy"), allow(dead_code))]
pub(crate) mod pipe;
mod portable;
pub(crate) mod socket;
pub(crate) mod udp;
pub(crate) mod unix_peer;

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// Which readiness poller the event loops use.
///
/// Tested on Linux only (both variants: CI runs the whole suite on each). On macOS, FreeBSD
/// and illumos fibr compiles, with [`Portable`](Backend::Portable) as the default, but has
/// never run there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Edge-triggered epoll through direct syscalls (Linux only; the default there).
    Epoll,
    /// The `polling` crate in one-shot mode: epoll on Linux (tested here), kqueue on macOS
    /// and the BSDs, event ports on illumos (those two compile, and are untested). Unix
    /// only: fibr does not build on Windows.
    Portable,
}

impl Backend {
    /// The backend named by `FIBR_BACKEND` (`epoll` or `portable`), else the native one.
    pub fn from_env() -> Backend {
        match std::env::var("FIBR_BACKEND").as_deref() {
            Ok("portable") => Backend::Portable,
            Ok("epoll") if cfg!(target_os = "linux") => Backend::Epoll,
            Ok(other) if !other.is_empty() => {
                tracing::warn!(backend = other, "unknown FIBR_BACKEND, using the default");
                Backend::native()
            }
            _ => Backend::native(),
        }
    }

    /// The best backend for this OS.
    pub fn native() -> Backend {
        if cfg!(target_os = "linux") {
            Backend::Epoll
        } else {
            Backend::Portable
        }
    }
}

/// What a registered descriptor wants to hear about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Interest {
    pub readable: bool,
    pub writable: bool,
}

impl Interest {
    pub const READ: Interest = Interest {
        readable: true,
        writable: false,
    };
    pub const BOTH: Interest = Interest {
        readable: true,
        writable: true,
    };
}

/// One readiness report.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Event {
    pub token: u64,
    pub readable: bool,
    pub writable: bool,
    /// Error or hang-up: the next read or write will tell which.
    pub closed: bool,
    /// The peer shut down its sending side (EPOLLRDHUP).
    pub read_closed: bool,
}

pub(crate) enum Poller {
    #[cfg(target_os = "linux")]
    Epoll(epoll::Poller),
    Portable(portable::Poller),
}

impl Poller {
    pub fn new(backend: Backend) -> io::Result<Poller> {
        match backend {
            #[cfg(target_os = "linux")]
            Backend::Epoll => Ok(Poller::Epoll(epoll::Poller::new()?)),
            #[cfg(not(target_os = "linux"))]
            Backend::Epoll => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the epoll backend exists only on Linux",
            )),
            Backend::Portable => Ok(Poller::Portable(portable::Poller::new()?)),
        }
    }

    /// True when a drained source must be re-armed (one-shot mode).
    #[inline]
    pub fn needs_rearm(&self) -> bool {
        matches!(self, Poller::Portable(_))
    }

    pub fn register(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        match self {
            #[cfg(target_os = "linux")]
            Poller::Epoll(p) => p.register(fd, token),
            Poller::Portable(p) => p.register(fd, token, interest),
        }
    }

    /// Asks again for the next readiness of a one-shot source; a no-op for edge-triggered epoll.
    #[inline]
    pub fn rearm(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        match self {
            #[cfg(target_os = "linux")]
            Poller::Epoll(_) => Ok(()),
            Poller::Portable(p) => p.rearm(fd, token, interest),
        }
    }

    pub fn deregister(&self, fd: RawFd) -> io::Result<()> {
        match self {
            #[cfg(target_os = "linux")]
            Poller::Epoll(p) => p.deregister(fd),
            Poller::Portable(p) => p.deregister(fd),
        }
    }

    /// Waits for readiness and appends what arrived to `out`. Returns early when notified.
    pub fn wait(&self, out: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            #[cfg(target_os = "linux")]
            Poller::Epoll(p) => p.wait(out, timeout),
            Poller::Portable(p) => p.wait(out, timeout),
        }
    }

    /// Wakes a thread blocked in [`Poller::wait`]; callable from any thread.
    pub fn notify(&self) -> io::Result<()> {
        match self {
            #[cfg(target_os = "linux")]
            Poller::Epoll(p) => p.notify(),
            Poller::Portable(p) => p.notify(),
        }
    }
}
