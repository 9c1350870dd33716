//! A loop's command queue and the wake-up handshake that goes with it.
//!
//! One atomic word holds three flags: the loop is (about to be) sleeping, it has been
//! notified, commands are pending. Senders push and then set `PENDING` with a
//! read-modify-write that also tells them whether the loop sleeps un-notified; the loop
//! sets `SLEEPING` with a read-modify-write that tells it whether commands are pending. The
//! two operations are totally ordered, so either the loop sees the command before it
//! blocks or the sender wakes it. Wake-ups are coalesced: one per sleep at most.
//!
//! Whether a command needs a wake-up at all (a timer due after the loop's own wake-up
//! does not) is asked only once the sender has seen the loop sleeping, so what it reads
//! (the loop's wake-up time, stored before `SLEEPING`) is that sleep's and not an older
//! turn's: read before the push, it could be, and the loop would sleep past the timer.

#[cfg(fibr_loom)]
use loom::sync::{
    atomic::{AtomicUsize, Ordering},
    Mutex,
};
#[cfg(not(fibr_loom))]
use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Mutex,
};

const SLEEPING: usize = 1;
const NOTIFIED: usize = 2;
const PENDING: usize = 4;

pub(crate) struct CommandQueue<T> {
    queue: Mutex<Vec<T>>,
    state: AtomicUsize,
}

impl<T> CommandQueue<T> {
    pub fn new() -> CommandQueue<T> {
        CommandQueue {
            queue: Mutex::new(Vec::new()),
            state: AtomicUsize::new(0),
        }
    }

    /// Queues `cmd`; true when the caller must wake the loop: it sleeps, nobody has woken
    /// it yet, and `urgent()` says this command cannot wait for the loop's own wake-up
    /// (asked only then; see the module's doc).
    pub fn push(&self, cmd: T, urgent: impl FnOnce() -> bool) -> bool {
        self.queue.lock().unwrap().push(cmd);
        let prev = self.state.fetch_or(PENDING, Ordering::AcqRel);
        if prev & SLEEPING == 0 || prev & NOTIFIED != 0 || !urgent() {
            return false;
        }
        // Claim the wake-up, while the loop still sleeps and nobody else claimed it.
        let mut cur = self.state.load(Ordering::Acquire);
        loop {
            if cur & SLEEPING == 0 || cur & NOTIFIED != 0 {
                return false;
            }
            match self.state.compare_exchange_weak(
                cur,
                cur | NOTIFIED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(actual) => cur = actual,
            }
        }
    }

    /// The loop is about to block: true if commands are pending (so it must not block).
    pub fn about_to_sleep(&self) -> bool {
        self.state.fetch_or(SLEEPING, Ordering::AcqRel) & PENDING != 0
    }

    /// The loop is awake again.
    pub fn awake(&self) {
        self.state
            .fetch_and(!(SLEEPING | NOTIFIED), Ordering::AcqRel);
    }

    /// Takes every queued command.
    pub fn take(&self) -> Vec<T> {
        if self.state.load(Ordering::Acquire) & PENDING == 0 {
            return Vec::new();
        }
        let mut q = self.queue.lock().unwrap();
        self.state.fetch_and(!PENDING, Ordering::AcqRel);
        std::mem::take(&mut *q)
    }
}

#[cfg(all(test, fibr_loom))]
mod loom_tests {
    use super::CommandQueue;
    use loom::sync::atomic::{AtomicBool, Ordering};
    use loom::sync::Arc;
    use loom::thread;

    /// A command pushed while the loop goes to sleep is never stranded: either the loop
    /// sees it before blocking, or the sender is told to wake the loop.
    #[test]
    fn no_lost_wakeup() {
        loom::model(|| {
            let q = Arc::new(CommandQueue::new());
            let woke = Arc::new(AtomicBool::new(false));
            let (q2, woke2) = (q.clone(), woke.clone());
            let sender = thread::spawn(move || {
                if q2.push(1u32, || true) {
                    woke2.store(true, Ordering::SeqCst);
                }
            });
            let mut got = q.take();
            let blocked = got.is_empty() && !q.about_to_sleep();
            sender.join().unwrap();
            if blocked {
                assert!(
                    woke.load(Ordering::SeqCst),
                    "the loop slept with a command queued and no wake-up"
                );
            }
            q.awake();
            got.extend(q.take());
            assert_eq!(got, vec![1]);
        });
    }

    /// A timer sent while the loop goes to sleep: the loop's wake-up time the sender
    /// sees is that of an older turn (5, long past) until the loop stores this turn's
    /// (never: no timer of its own). The timer (due at 10) is either seen before the loop
    /// blocks, or wakes it: it never sleeps past it (before this model, the sender judged
    /// urgency by a wake-up time read before pushing, and CI hung once on it).
    #[test]
    fn a_timer_never_waits_for_a_later_wakeup() {
        loom::model(|| {
            use loom::sync::atomic::AtomicU64;
            let q = Arc::new(CommandQueue::new());
            let wakes_at = Arc::new(AtomicU64::new(5));
            let woke = Arc::new(AtomicBool::new(false));
            let (q2, w2, woke2) = (q.clone(), wakes_at.clone(), woke.clone());
            let sender = thread::spawn(move || {
                let due = 10u64;
                if q2.push(due, || due < w2.load(Ordering::SeqCst)) {
                    woke2.store(true, Ordering::SeqCst);
                }
            });
            let mut got = q.take();
            wakes_at.store(u64::MAX, Ordering::SeqCst);
            let blocked = got.is_empty() && !q.about_to_sleep();
            sender.join().unwrap();
            if blocked {
                assert!(
                    woke.load(Ordering::SeqCst),
                    "the loop slept past a timer queued while it went to sleep"
                );
            }
            q.awake();
            got.extend(q.take());
            assert_eq!(got, vec![10]);
        });
    }

    /// Two senders racing a sleeping loop wake it at most once.
    #[test]
    fn wakeups_coalesce() {
        loom::model(|| {
            let q = Arc::new(CommandQueue::new());
            assert!(!q.about_to_sleep());
            let q2 = q.clone();
            let t = thread::spawn(move || q2.push(1u32, || true) as u32);
            let mine = q.push(2u32, || true) as u32;
            let theirs = t.join().unwrap();
            assert_eq!(mine + theirs, 1);
            q.awake();
            assert_eq!(q.take().len(), 2);
        });
    }
}
