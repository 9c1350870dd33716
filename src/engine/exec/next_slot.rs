//! A worker's "next" slot: one task that runs right after the current one.
//!
//! Its owner touches it on every hand-off, the pool's monitor only when it rescues a stuck
//! worker, so a spin lock whose unlock is a plain store beats a `Mutex` (whose unlock is an
//! atomic swap).

#[cfg(fibr_loom)]
use loom::{
    cell::UnsafeCell,
    hint::spin_loop,
    sync::atomic::{AtomicBool, Ordering},
};
#[cfg(not(fibr_loom))]
use std::{
    hint::spin_loop,
    sync::atomic::{AtomicBool, Ordering},
};

pub(crate) struct NextSlot<T> {
    locked: AtomicBool,
    item: UnsafeCell<Option<T>>,
}

// SAFETY: `item` is only accessed while `locked` is held, by one thread at a time; T moves
// between threads through it, hence T: Send.
unsafe impl<T: Send> Sync for NextSlot<T> {}

impl<T> NextSlot<T> {
    pub fn new() -> NextSlot<T> {
        NextSlot {
            locked: AtomicBool::new(false),
            item: UnsafeCell::new(None),
        }
    }

    /// Runs `f` on the slot's content under the lock.
    #[inline]
    pub fn with<R>(&self, f: impl FnOnce(&mut Option<T>) -> R) -> R {
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spin_loop();
        }
        // SAFETY: we hold the lock, so no other reference to `item` exists.
        let r = self.item.with_mut(|item| f(unsafe { &mut *item }));
        self.locked.store(false, Ordering::Release);
        r
    }
}

/// `std`'s cell behind loom's closure-style interface, so one implementation serves both.
#[cfg(not(fibr_loom))]
struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(fibr_loom))]
impl<T> UnsafeCell<T> {
    const fn new(v: T) -> UnsafeCell<T> {
        UnsafeCell(std::cell::UnsafeCell::new(v))
    }

    #[inline]
    fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(all(test, fibr_loom))]
mod loom_tests {
    use super::NextSlot;
    use loom::sync::Arc;
    use loom::thread;

    /// The owner hands off while the monitor rescues: each item is taken exactly once,
    /// and loom checks that the two never touch the slot at the same time.
    #[test]
    fn owner_and_monitor_exclude_each_other() {
        loom::model(|| {
            let slot = Arc::new(NextSlot::new());
            let monitor = {
                let slot = slot.clone();
                thread::spawn(move || slot.with(|n| n.take()))
            };
            let displaced = slot.with(|n| n.replace(1u32));
            let second = slot.with(|n| n.replace(2u32));
            let rescued = monitor.join().unwrap();
            let left = slot.with(|n| n.take());
            // 1 and 2 each end up in exactly one place.
            let mut seen: Vec<u32> = [displaced, second, rescued, left]
                .into_iter()
                .flatten()
                .collect();
            seen.sort();
            assert_eq!(seen, vec![1, 2]);
        });
    }
}
