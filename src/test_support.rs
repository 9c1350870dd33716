//! What the unit tests and the loom models share (loom's atomics under loom).

#[cfg(fibr_loom)]
use loom::sync::atomic::{AtomicUsize, Ordering};
#[cfg(not(fibr_loom))]
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};

/// A waker that counts its wake-ups.
pub(crate) struct Count(AtomicUsize);

impl Count {
    pub fn wakes(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A counting waker and its counter.
pub(crate) fn counting_waker() -> (Arc<Count>, Waker) {
    let c = Arc::new(Count(AtomicUsize::new(0)));
    (c.clone(), Waker::from(c))
}
