//! The scheduling state shared by every task (a connection or a spawned future).
//!
//! One atomic word holds a `SCHEDULED` flag and a set of pending event bits. Whoever sets
//! `SCHEDULED` (from clear) must hand the task to the pool; the runner takes the pending
//! bits, handles them, and clears `SCHEDULED` only if no new bit arrived meanwhile. So at
//! most one worker runs a task at a time, and no event is lost or handled out of order.

#[cfg(fibr_loom)]
use loom::sync::atomic::{AtomicU32, Ordering};
#[cfg(not(fibr_loom))]
use std::sync::atomic::{AtomicU32, Ordering};

/// Set while the task is queued or running.
pub(crate) const SCHEDULED: u32 = 1;

pub(crate) struct SchedState(AtomicU32);

impl SchedState {
    pub fn new() -> SchedState {
        SchedState(AtomicU32::new(0))
    }

    /// A state that is already scheduled with `bits` pending: for a task that is submitted
    /// by its creator right away.
    pub fn scheduled(bits: u32) -> SchedState {
        SchedState(AtomicU32::new(SCHEDULED | bits))
    }

    /// Records `bits`; true when the caller must submit the task (it was idle).
    #[inline]
    pub fn notify(&self, bits: u32) -> bool {
        let prev = self.0.fetch_or(bits | SCHEDULED, Ordering::AcqRel);
        prev & SCHEDULED == 0
    }

    /// Called by the runner: takes the pending bits, leaving the task scheduled.
    #[inline]
    pub fn take(&self) -> u32 {
        self.0.fetch_and(SCHEDULED, Ordering::AcqRel) & !SCHEDULED
    }

    /// Called by the runner when done: clears `SCHEDULED` unless new bits arrived, in which
    /// case the task stays scheduled and the runner must run (or resubmit) it again.
    #[inline]
    pub fn try_idle(&self) -> bool {
        self.0
            .compare_exchange(SCHEDULED, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The pending bits, for the unit tests.
    #[cfg(all(test, not(fibr_loom)))]
    pub fn peek(&self) -> u32 {
        self.0.load(Ordering::Acquire)
    }
}

#[cfg(all(test, not(fibr_loom)))]
mod tests {
    use super::*;

    #[test]
    fn notify_take_idle() {
        let s = SchedState::new();
        assert!(s.notify(2));
        assert!(!s.notify(4), "already scheduled");
        assert_eq!(s.take(), 6);
        assert!(s.try_idle());
        assert_eq!(s.peek(), 0);
        assert!(s.notify(2));
        let _ = s.take();
        assert!(!s.notify(8));
        assert!(!s.try_idle(), "a bit arrived while running");
        assert_eq!(s.take(), 8);
        assert!(s.try_idle());
    }
}

#[cfg(all(test, fibr_loom))]
mod loom_tests {
    use super::SchedState;
    use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use loom::sync::Arc;
    use loom::thread;

    /// What a worker does with a task it was handed: run rounds until it can go idle.
    fn run(s: &SchedState, running: &AtomicBool, seen: &AtomicU32) {
        loop {
            assert!(!running.swap(true, Ordering::SeqCst), "two runners at once");
            let bits = s.take();
            seen.fetch_or(bits, Ordering::SeqCst);
            running.store(false, Ordering::SeqCst);
            if s.try_idle() {
                return;
            }
        }
    }

    /// Two threads notify concurrently; whoever must submit runs the task. Never two
    /// runners at once, every event handled, and the task ends idle.
    #[test]
    fn one_runner_and_no_lost_event() {
        loom::model(|| {
            let s = Arc::new(SchedState::new());
            let running = Arc::new(AtomicBool::new(false));
            let seen = Arc::new(AtomicU32::new(0));
            let spawn = |bit: u32| {
                let (s, running, seen) = (s.clone(), running.clone(), seen.clone());
                thread::spawn(move || {
                    if s.notify(bit) {
                        run(&s, &running, &seen);
                    }
                })
            };
            let a = spawn(2);
            let b = spawn(4);
            a.join().unwrap();
            b.join().unwrap();
            assert_eq!(seen.load(Ordering::SeqCst), 6);
            assert_eq!(s.0.load(Ordering::SeqCst), 0, "the task must end idle");
        });
    }

    /// An event that arrives while the runner works is handled by that same runner
    /// (the notifier is not told to submit a second copy).
    #[test]
    fn notify_during_run_is_picked_up() {
        loom::model(|| {
            let s = Arc::new(SchedState::new());
            assert!(s.notify(2));
            let running = Arc::new(AtomicBool::new(false));
            let seen = Arc::new(AtomicU32::new(0));
            let (s2, r2, seen2) = (s.clone(), running.clone(), seen.clone());
            let notifier = thread::spawn(move || {
                if s2.notify(8) {
                    run(&s2, &r2, &seen2);
                }
            });
            run(&s, &running, &seen);
            notifier.join().unwrap();
            assert_eq!(seen.load(Ordering::SeqCst), 10);
        });
    }
}
