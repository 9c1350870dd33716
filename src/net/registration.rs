//! A descriptor registered with a loop for async I/O: readiness bits plus wakers.
//!
//! The loop sets readiness and wakes the waiting task; the task does the I/O itself and
//! clears readiness only when the call would block. A tick counter in the readiness word
//! makes that clear conditional, so readiness that arrives between the failed call and the
//! clear is never lost (edge-triggered polling would not report it again).

use crate::reactor::{Command, Loop, ReadyCtx, Source};
use crate::runtime::Runtime;
use crate::sys::{Event, Interest};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

const READABLE: u64 = 1;
const WRITABLE: u64 = 2;
const CLOSED: u64 = 4;
const TICK: u64 = 8;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Read,
    Write,
}

impl Direction {
    fn bits(self) -> u64 {
        match self {
            Direction::Read => READABLE | CLOSED,
            Direction::Write => WRITABLE | CLOSED,
        }
    }
}

struct IoSource {
    fd: OwnedFd,
    token: AtomicU64,
    readiness: AtomicU64,
    readers: Mutex<Option<Waker>>,
    writers: Mutex<Option<Waker>>,
    /// Held while re-arming a one-shot registration.
    arm: Mutex<()>,
}

impl Source for IoSource {
    fn ready(&self, ev: Event, ctx: &mut ReadyCtx<'_>) {
        let mut bits = 0;
        if ev.readable {
            bits |= READABLE;
        }
        if ev.writable {
            bits |= WRITABLE;
        }
        if ev.closed {
            bits |= CLOSED;
        }
        self.set_ready(bits);
        // A one-shot event disarmed both directions: keep waiting for the one still wanted.
        self.rearm_waiters(ctx.lp, ctx.token());
    }

    fn registered(&self, token: u64) {
        self.token.store(token, Ordering::Release);
    }

    fn interest(&self) -> Interest {
        Interest::BOTH
    }

    fn loop_stopped(&self) {
        self.set_ready(CLOSED);
    }

    fn abort(&self) {
        self.set_ready(CLOSED);
    }
}

impl IoSource {
    /// Re-arms a one-shot registration for the directions that have a waiting task.
    fn rearm_waiters(&self, lp: &Loop, token: u64) {
        if token == u64::MAX || !lp.poller.needs_rearm() {
            return;
        }
        // Serialized so a stale interest never overwrites a newer one.
        let _arming = self.arm.lock().unwrap();
        let interest = Interest {
            readable: self.readers.lock().unwrap().is_some(),
            writable: self.writers.lock().unwrap().is_some(),
        };
        if interest.readable || interest.writable {
            lp.rearm(self.fd.as_raw_fd(), token, interest);
        }
    }

    fn set_ready(&self, bits: u64) {
        let mut cur = self.readiness.load(Ordering::Acquire);
        loop {
            let next = (cur | bits).wrapping_add(TICK);
            match self.readiness.compare_exchange_weak(
                cur,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(actual) => cur = actual,
            }
        }
        if bits & (READABLE | CLOSED) != 0 {
            if let Some(w) = self.readers.lock().unwrap().take() {
                w.wake();
            }
        }
        if bits & (WRITABLE | CLOSED) != 0 {
            if let Some(w) = self.writers.lock().unwrap().take() {
                w.wake();
            }
        }
    }
}

/// Owns a descriptor registered with one of the current runtime's loops.
pub(crate) struct Registration {
    src: Arc<IoSource>,
    lp: Arc<Loop>,
    rt: Arc<Runtime>,
}

impl Registration {
    /// Registers `fd` (already non-blocking) with a loop of the current runtime.
    pub fn new(fd: OwnedFd) -> io::Result<Registration> {
        let rt = Runtime::current();
        crate::reactor::ensure_running(&rt)?;
        let lp = crate::reactor::pick(&rt).clone();
        let src = Arc::new(IoSource {
            fd,
            token: AtomicU64::new(u64::MAX),
            readiness: AtomicU64::new(0),
            readers: Mutex::new(None),
            writers: Mutex::new(None),
            arm: Mutex::new(()),
        });
        lp.send(Command::Register(src.fd.as_raw_fd(), src.clone()));
        Ok(Registration { src, lp, rt })
    }

    pub fn fd(&self) -> RawFd {
        self.src.fd.as_raw_fd()
    }

    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.rt
    }

    /// Gives the descriptor to another owner: a duplicate is returned and this
    /// registration (with its original descriptor) is dropped.
    pub fn into_fd(self) -> io::Result<(OwnedFd, Arc<Runtime>)> {
        let fd = crate::sys::socket::dup(self.fd())?;
        Ok((fd, self.rt.clone()))
    }

    /// Runs `op` until it stops returning `WouldBlock`, waiting for readiness in between.
    pub fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
        mut op: impl FnMut(RawFd) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        loop {
            let seen = self.src.readiness.load(Ordering::Acquire);
            match op(self.fd()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => return Poll::Ready(other),
            }
            if self.rt.is_stopped() {
                return Poll::Ready(Err(io::Error::other("the fibr runtime has been shut down")));
            }
            // Would block: clear this direction's readiness unless new readiness arrived.
            let cleared = seen & !dir.bits();
            if self
                .src
                .readiness
                .compare_exchange(seen, cleared, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue;
            }
            let slot = match dir {
                Direction::Read => &self.src.readers,
                Direction::Write => &self.src.writers,
            };
            *slot.lock().unwrap() = Some(cx.waker().clone());
            // Readiness may have come while the waker was being stored.
            if self.src.readiness.load(Ordering::Acquire) != cleared {
                continue;
            }
            self.rearm();
            return Poll::Pending;
        }
    }

    /// Waits until the descriptor is ready in `dir` (without doing I/O).
    pub fn poll_ready(&self, cx: &mut Context<'_>, dir: Direction) -> Poll<()> {
        let seen = self.src.readiness.load(Ordering::Acquire);
        if seen & dir.bits() != 0 {
            return Poll::Ready(());
        }
        let slot = match dir {
            Direction::Read => &self.src.readers,
            Direction::Write => &self.src.writers,
        };
        *slot.lock().unwrap() = Some(cx.waker().clone());
        if self.src.readiness.load(Ordering::Acquire) & dir.bits() != 0 {
            return Poll::Ready(());
        }
        self.rearm();
        Poll::Pending
    }

    fn rearm(&self) {
        self.src
            .rearm_waiters(&self.lp, self.src.token.load(Ordering::Acquire));
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // The loop deregisters, then the descriptor closes with the source's last reference.
        self.lp.send(Command::Deregister(
            self.src.clone(),
            self.src.fd.as_raw_fd(),
        ));
    }
}
