//! A small edge-triggered epoll instance for the benches' own load generators (the
//! compare bench's WebSocket client, the proxy bench's ping-pong). Each bench includes this
//! file.
#![allow(dead_code)]

use std::io;

pub const EMPTY_EVENT: libc::epoll_event = libc::epoll_event { events: 0, u64: 0 };

/// An epoll instance, closed when dropped.
pub struct Epoll(i32);

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 takes flags only.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Epoll(fd))
    }

    /// Registers `fd` edge-triggered for reads and writes, with `key` as its data.
    pub fn add(&self, fd: i32, key: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLET | libc::EPOLLRDHUP) as u32,
            u64: key,
        };
        // SAFETY: both descriptors are open, and `ev` is a valid event for the call to read.
        if unsafe { libc::epoll_ctl(self.0, libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits up to `ms` for events; how many were written to `out`.
    pub fn wait(&self, out: &mut [libc::epoll_event], ms: i32) -> io::Result<usize> {
        loop {
            // SAFETY: `out` is writable for `out.len()` events.
            let n = unsafe { libc::epoll_wait(self.0, out.as_mut_ptr(), out.len() as i32, ms) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        // SAFETY: the descriptor is this value's own and is closed once.
        unsafe { libc::close(self.0) };
    }
}
