//! Timers kept by an event loop in a min-heap; cancelled entries are dropped lazily.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Waker;
use std::time::Instant;

const WAITING: u8 = 0;
const FIRED: u8 = 1;
const CANCELLED: u8 = 2;

/// One armed timer, shared by its future and the loop.
pub(crate) struct TimerEntry {
    pub deadline: Instant,
    state: AtomicU8,
    waker: Mutex<Option<Waker>>,
}

impl TimerEntry {
    pub fn new(deadline: Instant, waker: Waker) -> Arc<TimerEntry> {
        Arc::new(TimerEntry {
            deadline,
            state: AtomicU8::new(WAITING),
            waker: Mutex::new(Some(waker)),
        })
    }

    pub fn has_fired(&self) -> bool {
        self.state.load(Ordering::Acquire) == FIRED
    }

    /// Replaces the waker to notify (a future polled from another task).
    pub fn set_waker(&self, waker: &Waker) {
        let mut w = self.waker.lock().unwrap();
        if !w.as_ref().is_some_and(|old| old.will_wake(waker)) {
            *w = Some(waker.clone());
        }
    }

    pub fn cancel(&self) {
        if self
            .state
            .compare_exchange(WAITING, CANCELLED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.waker.lock().unwrap().take();
        }
    }

    fn fire(&self) -> Option<Waker> {
        if self
            .state
            .compare_exchange(WAITING, FIRED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.waker.lock().unwrap().take()
        } else {
            None
        }
    }

    fn is_cancelled(&self) -> bool {
        self.state.load(Ordering::Acquire) == CANCELLED
    }
}

struct Armed(Arc<TimerEntry>);

impl PartialEq for Armed {
    fn eq(&self, other: &Self) -> bool {
        self.0.deadline == other.0.deadline
    }
}
impl Eq for Armed {}
impl PartialOrd for Armed {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for Armed {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        // Reversed: BinaryHeap is a max-heap and we want the earliest deadline on top.
        other.0.deadline.cmp(&self.0.deadline)
    }
}

/// Heap size that triggers a sweep of cancelled timers (doubles with the live count).
const FIRST_SWEEP: usize = 1024;

pub(crate) struct Timers {
    heap: BinaryHeap<Armed>,
    sweep_at: usize,
}

impl Default for Timers {
    fn default() -> Timers {
        Timers {
            heap: BinaryHeap::new(),
            sweep_at: FIRST_SWEEP,
        }
    }
}

impl Timers {
    pub fn add(&mut self, t: Arc<TimerEntry>) {
        if self.heap.len() >= self.sweep_at {
            // Cancelled timers behind a live one at the top would otherwise stay until
            // their deadline (a minute of churn's idle timers): drop them now and then,
            // amortized O(1) per add.
            self.heap.retain(|a| !a.0.is_cancelled());
            self.sweep_at = (self.heap.len() * 2).max(FIRST_SWEEP);
        }
        self.heap.push(Armed(t));
    }

    /// Fires every timer due by `now`, handing out their wakers.
    pub fn fire_due(&mut self, now: Instant, wake: &mut Vec<Waker>) {
        while let Some(top) = self.heap.peek() {
            if top.0.is_cancelled() {
                self.heap.pop();
                continue;
            }
            if top.0.deadline > now {
                break;
            }
            let Armed(t) = self.heap.pop().unwrap();
            if let Some(w) = t.fire() {
                wake.push(w);
            }
        }
    }

    /// The earliest live deadline.
    pub fn next_deadline(&mut self) -> Option<Instant> {
        while let Some(top) = self.heap.peek() {
            if top.0.is_cancelled() {
                self.heap.pop();
                continue;
            }
            return Some(top.0.deadline);
        }
        None
    }
}
