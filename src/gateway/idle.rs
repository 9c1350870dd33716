//! The time allowed without a byte (a response body's reads, a tunnel's traffic). The
//! timer is moved lazily: progress only notes its time, and the sleep is re-armed when
//! the waiter would wait.

use crate::engine::time::{sleep_until, Sleep};
use std::future::Future;
use std::pin::Pin;
use std::task::Context;
use std::time::{Duration, Instant};

pub(super) struct Idle {
    timeout: Duration,
    last: Instant,
    sleep: Option<Sleep>,
}

/// Nothing came for the idle timeout.
#[derive(Debug)]
pub(super) struct IdleTimeout(Duration);

impl std::fmt::Display for IdleTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "nothing moved for {:?}", self.0)
    }
}

impl std::error::Error for IdleTimeout {}

impl Idle {
    pub(super) fn new(timeout: Duration) -> Idle {
        Idle {
            timeout,
            last: Instant::now(),
            sleep: None,
        }
    }

    /// Something moved: the time starts over.
    pub(super) fn touch(&mut self) {
        self.last = Instant::now();
    }

    /// The error to end with once [`expired`](Self::expired).
    pub(super) fn error(&self) -> IdleTimeout {
        IdleTimeout(self.timeout)
    }

    /// Whether it has been quiet too long (if not, `cx` is woken when it may be).
    pub(super) fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        let deadline = self.last + self.timeout;
        let sleep = self.sleep.get_or_insert_with(|| sleep_until(deadline));
        if sleep.deadline() != deadline {
            sleep.reset(deadline);
        }
        Pin::new(sleep).poll(cx).is_ready()
    }
}
