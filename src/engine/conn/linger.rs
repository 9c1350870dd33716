//! Lingering close: how a stream connection closes after its last response, and at a
//! timeout (the write timeout, the TLS handshake's).
//!
//! Closing a socket whose receive queue still holds data makes the kernel send a reset,
//! and a reset can destroy the response the client has not read yet (a 413 to a client
//! still sending its body, the answer before a pipelined request we will not serve, what
//! the kernel still holds for a client that paused reading past the write timeout). So a
//! close that finds unread input first shuts our side (a FIN after the output),
//! then reads and drops what the peer still sends until its own FIN, a byte bound or a
//! deadline (`Config::linger_timeout`, `Config::linger_max_bytes`), and only then closes.
//! A close that finds nothing unread (the usual one) closes at once: lingering costs a
//! timer and a round, which connection churn would pay on every connection.

use crate::engine::buf::PooledBuf;
use crate::engine::sys::socket;
use crate::engine::time::Sleep;
use std::future::Future;
use std::io;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

/// A lingering close in progress.
pub(super) struct Linger {
    deadline: Sleep,
    discarded: usize,
}

/// What became of a lingering connection after reading what was there.
pub(super) enum Outcome {
    /// Keep waiting for the peer's FIN.
    Wait,
    /// Close now: the peer finished, failed, sent too much, or the deadline passed.
    Close,
}

/// Reads (and drops) a little of what the peer has sent: true if there was something
/// unread, i.e. closing now could reset the connection. (Lingering drains the rest.)
pub(super) fn unread_input(fd: RawFd) -> bool {
    let mut buf = [0u8; 512];
    loop {
        match socket::read(fd, &mut buf) {
            Ok(n) => return n > 0,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

impl Linger {
    /// Shuts the write side (the output is already flushed) and starts the clock; `waker`
    /// runs the connection's round when the deadline passes.
    pub fn start(fd: RawFd, timeout: Duration, waker: &Waker) -> io::Result<Linger> {
        socket::shutdown_write(fd)?;
        let mut deadline = crate::engine::time::sleep_until(Instant::now() + timeout);
        // Registers the timer; it cannot be due yet unless the timeout is zero.
        if Pin::new(&mut deadline)
            .poll(&mut Context::from_waker(waker))
            .is_ready()
        {
            return Err(io::ErrorKind::TimedOut.into());
        }
        Ok(Linger {
            deadline,
            discarded: 0,
        })
    }

    /// Reads and drops what the peer sent, up to `max_bytes` in all.
    pub fn round(&mut self, fd: RawFd, max_bytes: usize) -> Outcome {
        if self.deadline.is_elapsed() {
            return Outcome::Close;
        }
        let mut buf = PooledBuf::take(16 * 1024);
        loop {
            match socket::read(fd, &mut buf) {
                Ok(0) => return Outcome::Close,
                Ok(n) => {
                    self.discarded += n;
                    if self.discarded > max_bytes {
                        return Outcome::Close;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Outcome::Wait,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Outcome::Close,
            }
        }
    }
}
