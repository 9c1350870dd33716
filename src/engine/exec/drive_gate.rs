//! The pact between a worker about to wait in an event loop's poller (instead of parking)
//! and a thread queueing work for the pool.
//!
//! A submission wakes a parked worker if there is one; a worker blocked in a poller is
//! not parked, so the submitter must interrupt its wait instead. The two sides form a
//! Dekker pair over two SeqCst counters: the worker registers (`driving`) and then looks
//! at the queue; the submitter stores the queue length and then looks at `driving`, each
//! with a SeqCst fence between its write and its read. One of them sees the other, so
//! work is never left queued while every worker waits. (Fences, not just SeqCst accesses:
//! that is the form of the guarantee loom can check.)

#[cfg(fibr_loom)]
use loom::sync::atomic::{fence, AtomicUsize, Ordering::SeqCst};
#[cfg(not(fibr_loom))]
use std::sync::atomic::{fence, AtomicUsize, Ordering::SeqCst};

#[cfg(fibr_loom)]
loom::thread_local! {
    /// The gate (its address) this thread is registered with, between `enter` and
    /// `leave`; 0 for none. Per gate: a driver of one runtime that queues work for another
    /// must still interrupt that one's drivers.
    static DRIVING_HERE: std::cell::Cell<usize> = std::cell::Cell::new(0);
}
#[cfg(not(fibr_loom))]
std::thread_local! {
    /// The gate (its address) this thread is registered with, between `enter` and
    /// `leave`; 0 for none. Per gate: a driver of one runtime that queues work for another
    /// must still interrupt that one's drivers.
    static DRIVING_HERE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

pub(crate) struct DriveGate {
    /// Mirrors the pool's queue length (stored under the queue's lock), so the hot path
    /// can skip the lock when it is empty.
    queued: AtomicUsize,
    driving: AtomicUsize,
}

impl DriveGate {
    pub fn new() -> DriveGate {
        DriveGate {
            queued: AtomicUsize::new(0),
            driving: AtomicUsize::new(0),
        }
    }

    /// The queue length now (see `set_queued`).
    #[inline]
    pub fn queued(&self) -> usize {
        self.queued.load(SeqCst)
    }

    /// Publishes the queue length; call under the queue's lock after changing it.
    #[inline]
    pub fn set_queued(&self, n: usize) {
        self.queued.store(n, SeqCst);
    }

    /// A worker is about to wait for readiness: registers it and says whether it may
    /// (no work queued). Call [`leave`] afterwards either way.
    ///
    /// [`leave`]: DriveGate::leave
    pub fn enter(&self) -> bool {
        self.driving.fetch_add(1, SeqCst);
        DRIVING_HERE.with(|d| d.set(self.addr()));
        fence(SeqCst);
        self.queued() == 0
    }

    fn addr(&self) -> usize {
        self as *const DriveGate as usize
    }

    pub fn leave(&self) {
        DRIVING_HERE.with(|d| d.set(0));
        self.driving.fetch_sub(1, SeqCst);
    }

    /// Work was queued (and `set_queued` called), with no parked worker to wake: true if a
    /// worker may be waiting in a poller and must be interrupted. A driver queueing what
    /// its own turn readied does not count itself: it is running, not waiting, and it
    /// looks at the queue before it waits again (`enter`), so interrupting it would only
    /// cost an eventfd write and a wasted wait.
    pub fn must_interrupt(&self) -> bool {
        fence(SeqCst);
        let me = usize::from(DRIVING_HERE.with(|d| d.get()) == self.addr());
        self.driving.load(SeqCst) > me
    }
}

#[cfg(all(test, fibr_loom))]
mod loom_tests {
    use super::DriveGate;
    use loom::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use loom::sync::Arc;
    use loom::thread;

    /// A worker decides to wait while another thread queues a task (a plain submitter, or
    /// a driver queueing its own turn's work): the worker either sees the task or is
    /// interrupted. (A worker that decided to wait stays registered until its wait ends,
    /// which here is after the submitter is done.)
    fn queued_work_is_seen_or_interrupts_when(submitter_drives: bool) {
        loom::model(move || {
            let gate = Arc::new(DriveGate::new());
            let interrupted = Arc::new(AtomicBool::new(false));
            let submitter = {
                let (gate, interrupted) = (gate.clone(), interrupted.clone());
                thread::spawn(move || {
                    if submitter_drives {
                        let _ = gate.enter();
                    }
                    gate.set_queued(1);
                    if gate.must_interrupt() {
                        interrupted.store(true, SeqCst);
                    }
                    if submitter_drives {
                        gate.leave();
                    }
                })
            };
            let waits = gate.enter();
            if !waits {
                gate.leave();
            }
            submitter.join().unwrap();
            assert!(
                !waits || interrupted.load(SeqCst),
                "a worker waits in the poller with a task queued and nobody interrupts it"
            );
            if waits {
                gate.leave();
            }
        });
    }

    #[test]
    fn queued_work_is_seen_or_interrupts() {
        queued_work_is_seen_or_interrupts_when(false);
    }

    /// A driver leaves only itself out of the count: it still interrupts the other one.
    #[test]
    fn a_driver_submitting_interrupts_the_other_driver() {
        queued_work_is_seen_or_interrupts_when(true);
    }
}

#[cfg(all(test, not(fibr_loom)))]
mod tests {
    use super::DriveGate;
    use std::sync::Arc;

    #[test]
    fn a_driver_does_not_interrupt_itself_but_does_another() {
        let gate = Arc::new(DriveGate::new());
        assert!(gate.enter());
        gate.set_queued(1);
        assert!(
            !gate.must_interrupt(),
            "alone: no eventfd write to wake itself"
        );
        let other = gate.clone();
        let (entered, go) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
        let th = std::thread::spawn(move || {
            let _ = other.enter();
            entered.0.send(()).unwrap();
            go.1.recv().unwrap();
            other.leave();
        });
        entered.1.recv().unwrap();
        assert!(gate.must_interrupt(), "another driver may be waiting");
        go.0.send(()).unwrap();
        th.join().unwrap();
        gate.leave();
        assert!(!gate.must_interrupt(), "nobody drives");
    }

    #[test]
    fn a_driver_of_one_gate_still_interrupts_another_gates_driver() {
        let (a, b) = (Arc::new(DriveGate::new()), Arc::new(DriveGate::new()));
        let other = b.clone();
        let (entered, go) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
        let th = std::thread::spawn(move || {
            let _ = other.enter();
            entered.0.send(()).unwrap();
            go.1.recv().unwrap();
            other.leave();
        });
        entered.1.recv().unwrap();
        assert!(a.enter());
        b.set_queued(1);
        assert!(b.must_interrupt(), "this thread drives a, not b");
        a.leave();
        go.0.send(()).unwrap();
        th.join().unwrap();
    }
}
