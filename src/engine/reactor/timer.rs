//! Timers kept by an event loop in a min-heap; cancelled entries are dropped lazily.

#[cfg(fibr_loom)]
use loom::sync::{
    atomic::{AtomicU8, Ordering},
    Mutex,
};
use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::sync::Arc;
#[cfg(not(fibr_loom))]
use std::sync::{
    atomic::{AtomicU8, Ordering},
    Mutex,
};
use std::task::{Poll, Waker};
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

    /// A poll of the future this entry arms: ready once fired; else `waker` is stored
    /// (replacing an older one) and checked against a fire that raced the store.
    pub fn poll(&self, waker: &Waker) -> Poll<()> {
        if self.has_fired() {
            return Poll::Ready(());
        }
        self.set_waker(waker);
        if self.has_fired() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// Replaces the waker to notify (a future polled from another task).
    fn set_waker(&self, waker: &Waker) {
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

#[cfg(all(test, fibr_loom))]
mod loom_tests {
    //! A timer entry shared by its `Sleep` future (poll, re-poll from another task, reset,
    //! drop) and the loop (`Timers::fire_due`): every interleaving loom finds. The loop side
    //! is the real `Timers`; the future side is `TimerEntry::poll`, which `Sleep::poll`
    //! runs once armed (arming needs a runtime).

    use super::{TimerEntry, Timers};
    use crate::test_support::counting_waker;
    use loom::thread;
    use std::sync::Arc;
    use std::time::Instant;

    /// The loop's turn: fire what is due and wake it, as `LoopState::dispatch` does.
    fn loop_turn(timers: &mut Timers, now: Instant) -> usize {
        let mut wake = Vec::new();
        timers.fire_due(now, &mut wake);
        let n = wake.len();
        for w in wake {
            w.wake();
        }
        n
    }

    /// Fire against cancel (a `Sleep` dropped, or `reset`, at its deadline): exactly one
    /// wins. If the timer fired, its waker was woken exactly once; if it was cancelled, it
    /// never fires and the waker is not woken.
    #[test]
    fn fire_or_cancel_exactly_once() {
        loom::model(|| {
            let now = Instant::now();
            let (count, waker) = counting_waker();
            let e = TimerEntry::new(now, waker);
            let mut timers = Timers::default();
            timers.add(e.clone());
            let lp = thread::spawn(move || {
                let fired = loop_turn(&mut timers, now);
                // Nothing is left to fire a second time.
                assert_eq!(loop_turn(&mut timers, now), 0);
                assert_eq!(timers.next_deadline(), None);
                fired
            });
            e.cancel();
            let fired = lp.join().unwrap();
            assert!(fired <= 1);
            assert_eq!(
                e.has_fired(),
                fired == 1,
                "fired without a wake or the reverse"
            );
            assert_eq!(count.wakes(), fired, "woken {} times", count.wakes());
            // A cancelled entry keeps no waker (it would pin the task).
            if fired == 0 {
                assert!(e.waker.lock().unwrap().is_none());
            }
        });
    }

    /// Fire against a re-poll from another task (the future moved, e.g. a `timeout` passed
    /// between tasks): the newest waker must learn of the fire, either by `poll` returning
    /// Ready or by being woken. Waking only the old waker would be a lost wake-up.
    #[test]
    fn fire_during_repoll_reaches_the_new_waker() {
        loom::model(|| {
            let now = Instant::now();
            let (old_count, old) = counting_waker();
            let e = TimerEntry::new(now, old);
            let mut timers = Timers::default();
            timers.add(e.clone());
            let lp = thread::spawn(move || loop_turn(&mut timers, now));
            let (new_count, new) = counting_waker();
            let polled = e.poll(&new);
            assert_eq!(lp.join().unwrap(), 1, "a due timer did not fire");
            assert!(
                polled.is_ready() || new_count.wakes() == 1,
                "pending with the timer fired and the new waker never woken"
            );
            assert!(old_count.wakes() + new_count.wakes() == 1, "woken twice");
            assert!(e.poll(&new).is_ready());
        });
    }

    /// Reschedule (`Sleep::reset` then a poll arms a new entry) while the loop fires the
    /// old one: the old entry fires at most once (a spurious wake-up is fine), the new one
    /// fires exactly once when due, and a cancelled entry left in the heap never fires.
    #[test]
    fn reset_races_fire_of_the_old_entry() {
        loom::model(|| {
            let t0 = Instant::now();
            let t1 = t0 + std::time::Duration::from_millis(1);
            let (count, waker) = counting_waker();
            let old = TimerEntry::new(t0, waker.clone());
            let timers = Arc::new(loom::sync::Mutex::new(Timers::default()));
            timers.lock().unwrap().add(old.clone());
            let timers2 = timers.clone();
            let lp = thread::spawn(move || loop_turn(&mut timers2.lock().unwrap(), t0));
            // The task: reset (cancel the old entry), then the next poll arms a new one.
            old.cancel();
            let new = TimerEntry::new(t1, waker.clone());
            timers.lock().unwrap().add(new.clone());
            let first = lp.join().unwrap();
            assert!(first <= 1);
            assert!(!new.has_fired(), "the new entry fired before its deadline");
            // Later turn, past both deadlines: only the new entry fires.
            let second = loop_turn(&mut timers.lock().unwrap(), t1);
            assert_eq!(second, 1, "the rescheduled timer did not fire exactly once");
            assert!(new.has_fired());
            assert_eq!(count.wakes(), first + second);
            assert_eq!(loop_turn(&mut timers.lock().unwrap(), t1), 0);
        });
    }

    /// Cancel against a waker update: a `Sleep` polled and dropped on two tasks at once
    /// (cannot happen through `&mut`, but the entry is shared with the loop) still never
    /// fires after the cancel.
    #[test]
    fn cancel_then_fire_never_wakes() {
        loom::model(|| {
            let now = Instant::now();
            let (count, waker) = counting_waker();
            let e = TimerEntry::new(now, waker.clone());
            let e2 = e.clone();
            let t = thread::spawn(move || e2.cancel());
            let _ = e.poll(&waker);
            t.join().unwrap();
            let mut timers = Timers::default();
            timers.add(e.clone());
            assert_eq!(loop_turn(&mut timers, now), 0);
            assert_eq!(count.wakes(), 0);
            assert!(!e.has_fired());
        });
    }
}
