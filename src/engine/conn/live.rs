//! A server's live connections, counted from the moment its listener accepts them, so a
//! graceful drain waits for every one it took.
//!
//! A handler counts a connection when its `on_open` runs, but a connection exists before
//! that: in the command that registers it on its loop, in the worker pool's queue, and
//! through a whole TLS handshake (the HTTP server's `on_open` runs once the handshake is
//! done). A drain that saw only the opened ones could finish while such a connection is on
//! its way, and a process that exits then resets it. So the listener gives each connection
//! an [`Admission`] in its context slot as it accepts it; the server's `on_open` claims
//! it (the count passes to the server, which leaves it when the connection closes), and a
//! connection that closes first drops it with its context.
//!
//! A connection still in its TLS handshake when the drain begins has no request in flight
//! and would hold the drain for up to its handshake timeout: the drain closes it once it
//! has had the grace a new connection gets (as the HTTP server closes an opened
//! connection that sent nothing), so the count keeps the unclaimed ones that started a
//! layer ([`Admission::watch`]; a plain connection is opened at once and costs no lock).

use super::ConnInner;
use crate::engine::sync_notify::Notify;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// Connections a drain waits for, and whether draining has begun.
pub(crate) struct LiveCount {
    live: AtomicUsize,
    draining: AtomicBool,
    drained: Notify,
    /// Admitted connections in their handshake (by admission number), with when it began.
    unclaimed: Mutex<Unclaimed>,
}

#[derive(Default)]
struct Unclaimed {
    next: u64,
    conns: HashMap<u64, (Weak<ConnInner>, Instant)>,
}

impl LiveCount {
    pub fn new() -> LiveCount {
        LiveCount {
            live: AtomicUsize::new(0),
            draining: AtomicBool::new(false),
            drained: Notify::new(),
            unclaimed: Mutex::default(),
        }
    }

    /// One connection more, until [`left`](Self::left).
    pub fn entered(&self) {
        self.live.fetch_add(1, Ordering::AcqRel);
    }

    /// One connection fewer; the last one while draining completes [`drained`](Self::drained).
    pub fn left(&self) {
        if self.live.fetch_sub(1, Ordering::AcqRel) == 1 && self.draining() {
            self.drained.notify();
        }
    }

    /// From now on the count reaching zero completes [`drained`](Self::drained) (at once
    /// if it is zero now). A connection still in its TLS handshake is closed once `grace`
    /// from the handshake's start has passed (at once if it has).
    pub fn start_draining(&self, grace: Duration) {
        self.draining.store(true, Ordering::Release);
        if self.live.load(Ordering::Acquire) == 0 {
            self.drained.notify();
        }
        let now = Instant::now();
        let mut later: Vec<(Instant, Weak<ConnInner>)> = Vec::new();
        let unclaimed: Vec<_> = self
            .unclaimed
            .lock()
            .unwrap()
            .conns
            .values()
            .cloned()
            .collect();
        for (conn, began) in unclaimed {
            let at = began + grace;
            if at > now {
                later.push((at, conn));
            } else if let Some(conn) = conn.upgrade() {
                conn.close_in_handshake();
            }
        }
        if later.is_empty() {
            return;
        }
        later.sort_by_key(|(at, _)| *at);
        drop(crate::engine::runtime::spawn(async move {
            for (at, conn) in later {
                crate::engine::time::sleep_until(at).await;
                if let Some(conn) = conn.upgrade() {
                    conn.close_in_handshake();
                }
            }
        }));
    }

    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Set once draining has begun and no connection is left.
    pub fn drained(&self) -> &Notify {
        &self.drained
    }
}

/// An accepted connection's place in its server's [`LiveCount`] until the server's
/// `on_open` claims it; dropped (the place given up) if the connection closes before.
pub(crate) struct Admission {
    count: Option<Arc<LiveCount>>,
    /// Its place among the count's watched connections (see `watch`).
    key: Option<u64>,
}

impl Admission {
    pub fn new(count: &Arc<LiveCount>) -> Admission {
        count.entered();
        Admission {
            count: Some(count.clone()),
            key: None,
        }
    }

    /// The connection begins a handshake (its layer's): a drain that finds it still in
    /// it closes `conn` once the grace from now has passed.
    pub fn watch(&mut self, conn: Weak<ConnInner>) {
        let (Some(count), None) = (&self.count, self.key) else {
            return;
        };
        let mut unclaimed = count.unclaimed.lock().unwrap();
        let key = unclaimed.next;
        unclaimed.next += 1;
        unclaimed.conns.insert(key, (conn, Instant::now()));
        self.key = Some(key);
    }

    /// Gives up the watch (see `watch`).
    fn unwatch(&mut self) {
        if let (Some(count), Some(key)) = (&self.count, self.key.take()) {
            count.unclaimed.lock().unwrap().conns.remove(&key);
        }
    }

    /// Counts the connection in `count` from now on, for good (the caller owes the
    /// [`LiveCount::left`]): the admission's own place when it is `count`'s, else a new
    /// one (an admission of another server is given up).
    pub fn claim(mut self, count: &LiveCount) {
        self.unwatch();
        match self.count.take() {
            Some(own) if std::ptr::eq(&*own, count) => {}
            other => {
                count.entered();
                if let Some(other) = other {
                    other.left();
                }
            }
        }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.unwatch();
        if let Some(count) = self.count.take() {
            count.left();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;

    fn is_drained(count: &LiveCount) -> bool {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut wait = std::pin::pin!(count.drained().wait());
        wait.as_mut().poll(&mut cx).is_ready()
    }

    #[test]
    fn an_admitted_connection_holds_the_drain_until_it_is_claimed_and_leaves() {
        let count = Arc::new(LiveCount::new());
        let admission = Admission::new(&count);
        count.start_draining(Duration::ZERO);
        assert!(!is_drained(&count), "accepted, not yet opened");
        admission.claim(&count);
        assert!(!is_drained(&count), "opened");
        count.left();
        assert!(is_drained(&count));
    }

    #[test]
    fn an_admission_dropped_unclaimed_gives_its_place_up() {
        let count = Arc::new(LiveCount::new());
        let admission = Admission::new(&count);
        count.start_draining(Duration::ZERO);
        drop(admission);
        assert!(is_drained(&count));
    }

    #[test]
    fn an_admission_claimed_by_another_server_moves_there() {
        let (a, b) = (Arc::new(LiveCount::new()), Arc::new(LiveCount::new()));
        Admission::new(&a).claim(&b);
        a.start_draining(Duration::ZERO);
        b.start_draining(Duration::ZERO);
        assert!(is_drained(&a));
        assert!(!is_drained(&b));
        b.left();
        assert!(is_drained(&b));
    }
}
