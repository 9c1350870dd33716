//! The write timeout: a connection whose queued output makes no progress for
//! `Config::write_timeout` is closed, so a client that stops reading cannot hold a
//! connection (and its queued bytes) forever.

use crate::engine::time::Sleep;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

/// Armed while output is queued.
pub(super) struct Stall {
    timer: Sleep,
    last_progress: Instant,
}

impl Stall {
    pub fn start(timeout: Duration, waker: &Waker) -> Stall {
        let now = Instant::now();
        let mut s = Stall {
            timer: crate::engine::time::sleep_until(now + timeout),
            last_progress: now,
        };
        s.poll(waker);
        s
    }

    /// Bytes left: the clock starts again (cheaply: the timer is moved only when it fires).
    pub fn progressed(&mut self) {
        self.last_progress = Instant::now();
    }

    /// True once `timeout` passed with no progress; otherwise re-arms the timer if it fired
    /// early (progress moved the real deadline).
    pub fn expired(&mut self, timeout: Duration, waker: impl FnOnce() -> Waker) -> bool {
        if !self.timer.is_elapsed() {
            return false;
        }
        let due = self.last_progress + timeout;
        if Instant::now() >= due {
            return true;
        }
        self.timer.reset(due);
        self.poll(&waker());
        false
    }

    fn poll(&mut self, waker: &Waker) {
        // Registers the timer with the waker; a due timer is seen by `expired`.
        let _ = Pin::new(&mut self.timer).poll(&mut Context::from_waker(waker));
    }
}
