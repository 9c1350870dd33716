//! The portable poller: the `polling` crate in one-shot mode.

use super::{Event, Interest};
use std::io;
use std::num::NonZeroUsize;
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::Mutex;
use std::time::Duration;

pub(crate) struct Poller {
    poller: polling::Poller,
    /// Only the owning loop waits; the mutex keeps the type `Sync` at no contention.
    events: Mutex<polling::Events>,
}

fn event(token: u64, interest: Interest) -> polling::Event {
    let key = token as usize;
    let mut ev = polling::Event::none(key);
    ev.readable = interest.readable;
    ev.writable = interest.writable;
    ev
}

impl Poller {
    pub fn new() -> io::Result<Poller> {
        Ok(Poller {
            poller: polling::Poller::new()?,
            events: Mutex::new(polling::Events::with_capacity(
                NonZeroUsize::new(1024).unwrap(),
            )),
        })
    }

    pub fn register(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        // SAFETY: every registered descriptor is deregistered by its owner before it is
        // closed (the reactor's close path and the I/O sources' Drop both do so).
        unsafe {
            self.poller
                .add_with_mode(fd, event(token, interest), polling::PollMode::Oneshot)
        }
    }

    pub fn rearm(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        // SAFETY: the caller owns `fd` and keeps it open for the duration of the call.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        self.poller
            .modify_with_mode(fd, event(token, interest), polling::PollMode::Oneshot)
    }

    pub fn deregister(&self, fd: RawFd) -> io::Result<()> {
        // SAFETY: the caller owns `fd` and keeps it open for the duration of the call.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        self.poller.delete(fd)
    }

    pub fn wait(&self, out: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        events.clear();
        match self.poller.wait(&mut events, timeout) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(e),
        }
        for ev in events.iter() {
            out.push(Event {
                token: ev.key as u64,
                readable: ev.readable,
                writable: ev.writable,
                closed: ev.is_err().unwrap_or(false),
                read_closed: false,
            });
        }
        Ok(())
    }

    pub fn notify(&self) -> io::Result<()> {
        self.poller.notify()
    }
}
