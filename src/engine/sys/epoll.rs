//! Edge-triggered epoll with an eventfd notifier, through direct syscalls.

use super::{socket::cvt, Event};
use std::cell::UnsafeCell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Token reserved for the notifier's eventfd.
const NOTIFY_TOKEN: u64 = u64::MAX;
const MAX_EVENTS: usize = 1024;

pub(crate) struct Poller {
    epfd: OwnedFd,
    eventfd: OwnedFd,
    /// Only the thread driving the owning loop (holding its state lock) calls `wait`, so
    /// only one thread at a time touches this buffer.
    buf: UnsafeCell<Vec<libc::epoll_event>>,
}

// SAFETY: `buf` is only used by `wait`, which only the thread holding the owning loop's state
// lock calls (one at a time); every other method goes through thread-safe syscalls on the
// descriptors.
unsafe impl Sync for Poller {}

impl Poller {
    pub fn new() -> io::Result<Poller> {
        // SAFETY: plain syscalls; the returned descriptors are checked and then owned.
        let epfd = unsafe { OwnedFd::from_raw_fd(cvt(libc::epoll_create1(libc::EPOLL_CLOEXEC))?) };
        // SAFETY: as above.
        let eventfd = unsafe {
            OwnedFd::from_raw_fd(cvt(libc::eventfd(
                0,
                libc::EFD_CLOEXEC | libc::EFD_NONBLOCK,
            ))?)
        };
        let p = Poller {
            epfd,
            eventfd,
            buf: UnsafeCell::new(Vec::with_capacity(MAX_EVENTS)),
        };
        p.ctl(libc::EPOLL_CTL_ADD, p.eventfd.as_raw_fd(), NOTIFY_TOKEN)?;
        Ok(p)
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: token,
        };
        // SAFETY: `ev` is a valid epoll_event that lives across the call.
        cvt(unsafe { libc::epoll_ctl(self.epfd.as_raw_fd(), op, fd, &mut ev) })?;
        Ok(())
    }

    /// Edge-triggered sources are registered once for both directions and never re-armed.
    pub fn register(&self, fd: RawFd, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, token)
    }

    pub fn deregister(&self, fd: RawFd) -> io::Result<()> {
        // SAFETY: a null event is allowed for EPOLL_CTL_DEL since Linux 2.6.9.
        cvt(unsafe {
            libc::epoll_ctl(
                self.epfd.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd,
                std::ptr::null_mut(),
            )
        })?;
        Ok(())
    }

    pub fn wait(&self, out: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        // SAFETY: only the holder of the owning loop's state lock calls `wait` (see the
        // `Sync` impl).
        let buf = unsafe { &mut *self.buf.get() };
        // SAFETY: the buffer has room for MAX_EVENTS entries; the kernel writes at most that.
        let n = unsafe {
            libc::epoll_wait(
                self.epfd.as_raw_fd(),
                buf.as_mut_ptr(),
                MAX_EVENTS as libc::c_int,
                timeout_millis(timeout),
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            return if err.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(err)
            };
        }
        // SAFETY: the kernel initialized the first `n` entries.
        unsafe { buf.set_len(n as usize) };
        for ev in buf.iter() {
            let token = ev.u64;
            if token == NOTIFY_TOKEN {
                self.drain_notifier();
                continue;
            }
            let bits = ev.events as libc::c_int;
            out.push(Event {
                token,
                readable: bits & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLPRI) != 0,
                writable: bits & libc::EPOLLOUT != 0,
                closed: bits & (libc::EPOLLHUP | libc::EPOLLERR) != 0,
                read_closed: bits & libc::EPOLLRDHUP != 0,
            });
        }
        buf.clear();
        Ok(())
    }

    fn drain_notifier(&self) {
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into a u64 from our own non-blocking eventfd.
        unsafe { libc::read(self.eventfd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }

    pub fn notify(&self) -> io::Result<()> {
        let one = 1u64;
        // SAFETY: writes 8 bytes from a u64 to our own eventfd.
        let n = unsafe { libc::write(self.eventfd.as_raw_fd(), (&one as *const u64).cast(), 8) };
        if n < 0 {
            let err = io::Error::last_os_error();
            // A full counter still leaves the eventfd readable, so the wake-up is not lost.
            if err.kind() != io::ErrorKind::WouldBlock {
                return Err(err);
            }
        }
        Ok(())
    }
}

/// Converts a timeout to whole milliseconds for poll calls, rounding up so a timer never
/// fires early and a sub-millisecond wait never becomes a busy spin.
fn timeout_millis(timeout: Option<Duration>) -> i32 {
    match timeout {
        None => -1,
        Some(d) => {
            let ms = d.as_nanos().div_ceil(1_000_000);
            ms.min(i32::MAX as u128) as i32
        }
    }
}
