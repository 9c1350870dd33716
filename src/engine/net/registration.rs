//! A descriptor registered with a loop for async I/O: readiness bits plus wakers.
//!
//! The loop sets readiness and wakes the waiting task; the task does the I/O itself and
//! clears readiness only when the call would block. A tick counter in the readiness word
//! makes that clear conditional, so readiness that arrives between the failed call and the
//! clear is never lost (edge-triggered polling would not report it again).

use crate::engine::reactor::Source;
use crate::engine::runtime::{Command, Loop, ReadyCtx, Runtime};
use crate::engine::sys::{Event, Interest};
#[cfg(fibr_loom)]
use loom::sync::{
    atomic::{AtomicU64, Ordering},
    Mutex,
};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
#[cfg(not(fibr_loom))]
use std::sync::{
    atomic::{AtomicU64, Ordering},
    Mutex,
};
use std::task::{Context, Poll, Waker};

const READABLE: u64 = 1;
const WRITABLE: u64 = 2;
const CLOSED: u64 = 4;
/// The loop gave up on the source (it could not be registered, the engine's shutdown
/// deadline passed, or the loop stopped): no event will ever come again. Never cleared.
const ABORTED: u64 = 8;
/// The peer ended its side (a FIN: `EPOLLRDHUP`). Reads must go on until they see the end,
/// and no new edge will come for it, so a short read never clears it.
const READ_CLOSED: u64 = 16;
const TICK: u64 = 32;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Read,
    Write,
}

impl Direction {
    fn bits(self) -> u64 {
        match self {
            Direction::Read => READABLE | CLOSED | READ_CLOSED,
            Direction::Write => WRITABLE | CLOSED,
        }
    }

    fn ready_bit(self) -> u64 {
        match self {
            Direction::Read => READABLE,
            Direction::Write => WRITABLE,
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
    /// Whether readiness gates calls (edge-triggered epoll: its registration hears every
    /// edge). A one-shot registration hears nothing while disarmed, so there every call is
    /// tried and only a would-block clears readiness.
    gated: bool,
}

impl Source<Runtime> for IoSource {
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
        if ev.read_closed {
            bits |= READ_CLOSED;
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
        self.set_ready(CLOSED | ABORTED);
    }

    fn abort(&self) {
        self.set_ready(CLOSED | ABORTED);
    }
}

/// The error of I/O on a source its loop gave up on.
fn aborted() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "the socket's event loop stopped or gave up on it",
    )
}

impl IoSource {
    /// A source whose readiness starts as `ready` (see `Registration::new`).
    fn new(fd: OwnedFd, ready: u64) -> IoSource {
        IoSource {
            fd,
            token: AtomicU64::new(u64::MAX),
            readiness: AtomicU64::new(ready),
            readers: Mutex::new(None),
            writers: Mutex::new(None),
            arm: Mutex::new(()),
            gated: true,
        }
    }

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

    /// One wait of the readiness protocol: runs `op` until it stops returning
    /// `WouldBlock`; then clears this direction's readiness (unless newer readiness
    /// arrived, in which case it tries again) and parks the waker. Pending means parked:
    /// the caller re-arms a one-shot registration. `stopped` ends the wait with an error.
    ///
    /// While this direction's readiness is clear, the call that last would block is the
    /// newest news of the descriptor, so `op` is not tried (a system call that can only
    /// answer `EAGAIN`): the task parks, and the loop's next edge wakes it.
    ///
    /// `drained` says whether a result shows the call used up the readiness (a short read
    /// emptied the socket, a short write filled its buffer): then readiness is cleared as
    /// for a would-block, unless newer readiness arrived, and the next call waits for an
    /// edge instead of making the failing call first.
    fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
        mut op: impl FnMut() -> io::Result<R>,
        drained: impl Fn(&R) -> bool,
        stopped: impl Fn() -> bool,
    ) -> Poll<io::Result<R>> {
        loop {
            let seen = self.readiness.load(Ordering::Acquire);
            let cleared = seen & !dir.bits();
            if !self.gated || seen & (dir.bits() | ABORTED) != 0 {
                match op() {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Ok(r) => {
                        if self.gated && seen & ABORTED == 0 && drained(&r) {
                            // CLOSED and READ_CLOSED stay: a FIN behind the data gets no new edge.
                            let _ = self.readiness.compare_exchange(
                                seen,
                                seen & !dir.ready_bit(),
                                Ordering::AcqRel,
                                Ordering::Acquire,
                            );
                        }
                        return Poll::Ready(Ok(r));
                    }
                    Err(e) => return Poll::Ready(Err(e)),
                }
                if seen & ABORTED != 0 {
                    return Poll::Ready(Err(aborted()));
                }
                // Would block: clear this direction's readiness unless new readiness arrived.
                if self
                    .readiness
                    .compare_exchange(seen, cleared, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    continue;
                }
            }
            if stopped() {
                return Poll::Ready(Err(io::Error::other("the fibr runtime has been shut down")));
            }
            *self.waiter(dir).lock().unwrap() = Some(cx.waker().clone());
            // Readiness may have come while the waker was being stored.
            if self.readiness.load(Ordering::Acquire) != cleared {
                continue;
            }
            return Poll::Pending;
        }
    }

    /// Waits until the descriptor is ready in `dir` (or aborted), without doing I/O.
    fn poll_ready(&self, cx: &mut Context<'_>, dir: Direction) -> Poll<()> {
        let wanted = dir.bits() | ABORTED;
        if self.readiness.load(Ordering::Acquire) & wanted != 0 {
            return Poll::Ready(());
        }
        *self.waiter(dir).lock().unwrap() = Some(cx.waker().clone());
        if self.readiness.load(Ordering::Acquire) & wanted != 0 {
            return Poll::Ready(());
        }
        Poll::Pending
    }

    fn waiter(&self, dir: Direction) -> &Mutex<Option<Waker>> {
        match dir {
            Direction::Read => &self.readers,
            Direction::Write => &self.writers,
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
        if bits & Direction::Read.bits() != 0 {
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
    ///
    /// A descriptor may already have bytes or room (an accepted socket often has its
    /// request waiting), so both directions start ready: the first I/O is tried at once
    /// instead of waiting for the loop to register it and report.
    pub fn new(fd: OwnedFd) -> io::Result<Registration> {
        Registration::with_readiness(fd, READABLE | WRITABLE)
    }

    /// Registers a socket whose non-blocking connect is under way: nothing is ready until
    /// the loop reports it writable, which is when the connect has ended (either way).
    pub fn connecting(fd: OwnedFd) -> io::Result<Registration> {
        Registration::with_readiness(fd, 0)
    }

    fn with_readiness(fd: OwnedFd, ready: u64) -> io::Result<Registration> {
        let rt = Runtime::current();
        rt.ensure_running()?;
        let lp = rt.pick_loop().clone();
        let mut src = IoSource::new(fd, ready);
        src.gated = !lp.poller.needs_rearm();
        let src = Arc::new(src);
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
        let fd = crate::engine::sys::socket::dup(self.fd())?;
        Ok((fd, self.rt.clone()))
    }

    /// Runs `op` until it stops returning `WouldBlock`, waiting for readiness in between.
    pub fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
        op: impl FnMut(RawFd) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        self.poll_io_drained(cx, dir, op, |_| false)
    }

    /// `poll_io` for a byte stream's read or write of `len` bytes: a short count means the
    /// socket is drained (or its send buffer full), so the next call waits for the loop's
    /// edge instead of first making a call that can only answer `EAGAIN`.
    ///
    /// Only on edge-triggered epoll (`IoSource::gated`): a one-shot registration is disarmed
    /// after its event and re-armed only when a task parks, so a clear bit there does not
    /// mean nothing came since (a peer's FIN while no task reads would go unseen by the
    /// next poll, as the client's check of a pooled connection at checkout does).
    pub fn poll_stream_io(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
        len: usize,
        op: impl FnMut(RawFd) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        self.poll_io_drained(cx, dir, op, |&n| n > 0 && n < len)
    }

    fn poll_io_drained<R>(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
        mut op: impl FnMut(RawFd) -> io::Result<R>,
        drained: impl Fn(&R) -> bool,
    ) -> Poll<io::Result<R>> {
        let fd = self.fd();
        let r = self
            .src
            .poll_io(cx, dir, || op(fd), drained, || self.rt.is_stopped());
        if r.is_pending() {
            self.rearm();
        }
        r
    }

    /// Waits until the descriptor is ready in `dir` (without doing I/O).
    pub fn poll_ready(&self, cx: &mut Context<'_>, dir: Direction) -> Poll<()> {
        let r = self.src.poll_ready(cx, dir);
        if r.is_pending() {
            self.rearm();
        }
        r
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

#[cfg(all(test, not(fibr_loom)))]
mod tests {
    use super::{Direction, IoSource, READABLE, READ_CLOSED, WRITABLE};
    use std::cell::Cell;
    use std::io;
    use std::sync::atomic::Ordering;
    use std::task::{Context, Poll, Waker};

    /// The system calls a task makes: one on a fresh source, none while its readiness is
    /// clear after a would-block, one again once the loop reports the direction ready.
    #[test]
    fn no_call_while_readiness_is_clear() {
        let src = IoSource::new(
            std::fs::File::open("/dev/null").unwrap().into(),
            READABLE | WRITABLE,
        );
        let calls = Cell::new(0);
        let would_block = || -> io::Result<usize> {
            calls.set(calls.get() + 1);
            Err(io::ErrorKind::WouldBlock.into())
        };
        let mut cx = Context::from_waker(Waker::noop());
        let mut poll = || src.poll_io(&mut cx, Direction::Read, would_block, |_| false, || false);
        assert!(poll().is_pending());
        assert_eq!(calls.get(), 1, "a fresh source tries the call at once");
        assert!(poll().is_pending());
        assert_eq!(calls.get(), 1, "tried the call with no readiness reported");
        src.set_ready(READABLE);
        assert!(poll().is_pending());
        assert_eq!(calls.get(), 2, "did not try the call once readable");
        assert_eq!(src.readiness.load(Ordering::SeqCst) & READABLE, 0);
    }

    /// A short read clears readability, but not a peer's FIN that came with the data
    /// (one edge reported both): the next read is tried and sees the end of the stream.
    /// A one-shot registration (the portable backend) hears nothing while disarmed: every
    /// call is tried whatever the readiness word says, and a short count clears nothing.
    #[test]
    fn an_ungated_source_tries_every_call() {
        let mut src = IoSource::new(std::fs::File::open("/dev/null").unwrap().into(), 0);
        src.gated = false;
        let calls = Cell::new(0);
        let short = || -> io::Result<usize> {
            calls.set(calls.get() + 1);
            Ok(1)
        };
        let mut cx = Context::from_waker(Waker::noop());
        let poll =
            |cx: &mut Context<'_>| src.poll_io(cx, Direction::Read, short, |&n| n < 64, || false);
        assert!(matches!(poll(&mut cx), Poll::Ready(Ok(1))));
        assert!(matches!(poll(&mut cx), Poll::Ready(Ok(1))));
        assert_eq!(
            calls.get(),
            2,
            "a call was skipped on a clear readiness word"
        );
    }

    #[test]
    fn fin_behind_a_short_read_is_still_read() {
        let src = IoSource::new(std::fs::File::open("/dev/null").unwrap().into(), 0);
        src.set_ready(READABLE | READ_CLOSED);
        let queued = Cell::new(vec![26, 0]);
        let read = || -> io::Result<usize> {
            let mut q = queued.take();
            let n = q.remove(0);
            queued.set(q);
            Ok(n)
        };
        let mut cx = Context::from_waker(Waker::noop());
        let mut poll = || src.poll_io(&mut cx, Direction::Read, read, |&n| n > 0, || false);
        assert!(matches!(poll(), Poll::Ready(Ok(26))));
        assert_eq!(src.readiness.load(Ordering::SeqCst) & READABLE, 0);
        assert!(
            matches!(poll(), Poll::Ready(Ok(0))),
            "the FIN behind a short read was not read: nothing will report it again"
        );
    }
}

#[cfg(all(test, fibr_loom))]
mod loom_tests {
    //! The readiness word's protocol under every interleaving loom finds: the loop's
    //! `IoSource::set_ready` / `abort` against a task in `IoSource::poll_io` / `poll_ready`
    //! (what `Registration`'s methods run, less the one-shot re-arm). The "socket" is an atomic
    //! byte count the loop fills before it reports the edge, as the kernel does.

    use super::{Direction, IoSource, CLOSED, READABLE, WRITABLE};
    use crate::engine::reactor::Source;
    use crate::test_support::counting_waker;
    use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use loom::thread;
    use std::io;
    use std::sync::Arc;
    use std::task::{Context, Poll};

    /// A source as a task finds it after its last call would block: no readiness, so
    /// `poll_io` parks without trying the call until the loop reports.
    fn source() -> Arc<IoSource> {
        let src = fresh_source();
        src.readiness.store(0, Ordering::SeqCst);
        src
    }

    /// A source as registered: both directions assumed ready, so the first call is tried.
    fn fresh_source() -> Arc<IoSource> {
        let fd = std::fs::File::open("/dev/null")
            .expect("open /dev/null")
            .into();
        Arc::new(IoSource::new(fd, READABLE | WRITABLE))
    }

    /// A non-blocking read of the modelled socket: all bytes queued, or WouldBlock.
    fn read(queued: &AtomicUsize) -> io::Result<usize> {
        match queued.swap(0, Ordering::SeqCst) {
            0 => Err(io::ErrorKind::WouldBlock.into()),
            n => Ok(n),
        }
    }

    /// The edge-triggered lost wake-up: data arrives (and the loop reports the one edge it
    /// will ever get) while the task is between a read that would block and parking.
    /// Either the task reads the data now, or it is woken, and the next poll reads it.
    #[test]
    fn readable_edge_is_never_lost() {
        readable_edge_with(source);
    }

    /// The same, on a source just registered (readiness assumed, the first read tried).
    #[test]
    fn readable_edge_is_never_lost_on_a_fresh_source() {
        readable_edge_with(fresh_source);
    }

    fn readable_edge_with(make: fn() -> Arc<IoSource>) {
        loom::model(move || {
            let src = make();
            let queued = Arc::new(AtomicUsize::new(0));
            let (src2, queued2) = (src.clone(), queued.clone());
            let lp = thread::spawn(move || {
                queued2.fetch_add(1, Ordering::SeqCst);
                src2.set_ready(READABLE);
            });
            let (count, waker) = counting_waker();
            let mut cx = Context::from_waker(&waker);
            let first = src.poll_io(
                &mut cx,
                Direction::Read,
                || read(&queued),
                |_| false,
                || false,
            );
            lp.join().unwrap();
            match first {
                Poll::Ready(r) => assert_eq!(r.unwrap(), 1),
                Poll::Pending => {
                    assert!(
                        count.wakes() >= 1,
                        "parked with readiness reported and no wake-up"
                    );
                    match src.poll_io(
                        &mut cx,
                        Direction::Read,
                        || read(&queued),
                        |_| false,
                        || false,
                    ) {
                        Poll::Ready(r) => assert_eq!(r.unwrap(), 1),
                        Poll::Pending => panic!("woken, but the data was not there"),
                    }
                }
            }
            assert_eq!(queued.load(Ordering::SeqCst), 0);
        });
    }

    /// Two edges for one task, the second possibly racing the task's would-block clear
    /// (the tick must make that clear fail): the task polls until it parks, then, like an
    /// executor, polls again whenever it was woken. By the end it has read every byte.
    #[test]
    fn clear_never_erases_newer_readiness() {
        two_edges_all_read(|_| false);
    }

    /// The same where every read is short (a stream read that drained the socket), so a
    /// successful read clears readiness too and the next poll waits without a call.
    #[test]
    fn short_read_clear_never_erases_newer_readiness() {
        two_edges_all_read(|&n| n > 0);
    }

    fn two_edges_all_read(drained: fn(&usize) -> bool) {
        loom::model(move || {
            let src = source();
            let queued = Arc::new(AtomicUsize::new(0));
            let (src2, queued2) = (src.clone(), queued.clone());
            let lp = thread::spawn(move || {
                for _ in 0..2 {
                    queued2.fetch_add(1, Ordering::SeqCst);
                    src2.set_ready(READABLE);
                }
            });
            let (count, waker) = counting_waker();
            let mut cx = Context::from_waker(&waker);
            let mut got = 0;
            let mut run = |got: &mut usize| {
                while let Poll::Ready(r) = src.poll_io(
                    &mut cx,
                    Direction::Read,
                    || read(&queued),
                    drained,
                    || false,
                ) {
                    *got += r.unwrap();
                }
            };
            run(&mut got);
            lp.join().unwrap();
            let mut handled = 0;
            while count.wakes() > handled {
                handled = count.wakes();
                run(&mut got);
            }
            assert_eq!(got, 2, "parked with a byte unread and no wake-up to come");
        });
    }

    /// A reader and a writer parked on the same word while one event reports both
    /// directions: neither clear may swallow the other direction's readiness.
    #[test]
    fn reader_and_writer_both_hear_one_event() {
        // Three threads and two mutexes: bound the preemptions (3 covers every ordering of
        // the two tasks' clear/store/re-check around the one event) to keep this ~5 s.
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(3);
        model.check(|| {
            let src = source();
            let queued = Arc::new(AtomicUsize::new(0));
            let room = Arc::new(AtomicBool::new(false));
            let (src2, queued2, room2) = (src.clone(), queued.clone(), room.clone());
            let lp = thread::spawn(move || {
                queued2.fetch_add(1, Ordering::SeqCst);
                room2.store(true, Ordering::SeqCst);
                src2.set_ready(READABLE | WRITABLE);
            });
            let (src3, room3) = (src.clone(), room.clone());
            let writer = thread::spawn(move || {
                let (count, waker) = counting_waker();
                let mut cx = Context::from_waker(&waker);
                let write = || match room3.load(Ordering::SeqCst) {
                    true => Ok(1usize),
                    false => Err(io::Error::from(io::ErrorKind::WouldBlock)),
                };
                let first = src3.poll_io(&mut cx, Direction::Write, write, |_| false, || false);
                (first.is_ready(), count)
            });
            let (count, waker) = counting_waker();
            let mut cx = Context::from_waker(&waker);
            let reader_ready = src.poll_io(
                &mut cx,
                Direction::Read,
                || read(&queued),
                |_| false,
                || false,
            );
            lp.join().unwrap();
            let (writer_ready, wcount) = writer.join().unwrap();
            assert!(
                reader_ready.is_ready() || count.wakes() >= 1,
                "reader parked and never woken"
            );
            assert!(
                writer_ready || wcount.wakes() >= 1,
                "writer parked and never woken"
            );
        });
    }

    /// `poll_ready` (wait without I/O) against the loop's report.
    #[test]
    fn poll_ready_is_never_lost() {
        loom::model(|| {
            let src = source();
            let src2 = src.clone();
            let lp = thread::spawn(move || src2.set_ready(WRITABLE));
            let (count, waker) = counting_waker();
            let mut cx = Context::from_waker(&waker);
            let r = src.poll_ready(&mut cx, Direction::Write);
            lp.join().unwrap();
            assert!(r.is_ready() || count.wakes() >= 1);
            assert!(src.poll_ready(&mut cx, Direction::Write).is_ready());
        });
    }

    /// An aborted source (the loop could not register the descriptor, or `AbortAll` at an
    /// engine's shutdown deadline) reports CLOSED once and will never report anything
    /// again. A task whose I/O then would block must not park: nothing would wake it.
    /// (A would-block clear used to take CLOSED with it and park the task for good; the
    /// sticky ABORTED bit is what this checks.)
    #[test]
    fn abort_is_not_swallowed_by_a_clear() {
        loom::model(|| {
            let src = source();
            let src2 = src.clone();
            let lp = thread::spawn(move || src2.abort());
            let (_count, waker) = counting_waker();
            let mut cx = Context::from_waker(&waker);
            let never = || -> io::Result<usize> { Err(io::ErrorKind::WouldBlock.into()) };
            let first = src.poll_io(&mut cx, Direction::Read, never, |_| false, || false);
            lp.join().unwrap();
            assert!(src.readiness.load(Ordering::SeqCst) & CLOSED != 0 || first.is_pending());
            // After the abort, every poll must end (an error), never park.
            assert!(
                src.poll_io(&mut cx, Direction::Read, never, |_| false, || false)
                    .is_ready(),
                "parked on an aborted source: no event will ever wake this task"
            );
        });
    }
}
