//! The worker pool and task executor: `spawn`, `JoinHandle`, `block_on`.

mod drive_gate;
mod next_slot;
pub(crate) mod pool;
#[cfg(feature = "client")]
pub(crate) mod recycled;
pub(crate) mod state;
mod task;

pub(crate) use task::spawn_on;
pub use task::{JoinError, JoinHandle};

#[cfg(fibr_loom)]
use loom::{
    sync::atomic::{AtomicBool, Ordering},
    thread::{self, Thread},
};
use std::future::Future;
use std::pin::pin;
#[cfg(not(fibr_loom))]
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
#[cfg(not(fibr_loom))]
use std::thread::{self, Thread};

/// Wakes a thread blocked in [`block_on`].
struct ThreadWaker {
    thread: Thread,
    notified: AtomicBool,
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if !self.notified.swap(true, Ordering::Release) {
            self.thread.unpark();
        }
    }
}

/// Drives `future` to completion on the calling thread, parking it between polls.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let tw = Arc::new(ThreadWaker {
        thread: thread::current(),
        notified: AtomicBool::new(false),
    });
    let waker = Waker::from(tw.clone());
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
        while !tw.notified.swap(false, Ordering::Acquire) {
            thread::park();
        }
    }
}

#[cfg(all(test, fibr_loom))]
mod loom_tests {
    use super::block_on;
    use loom::sync::Mutex;
    use std::future::poll_fn;
    use std::sync::Arc;
    use std::task::{Poll, Waker};

    /// A wake-up from another thread, racing block_on's poll and park, is never lost:
    /// block_on returns (loom reports a deadlock if it parks forever).
    #[test]
    fn wake_from_another_thread_is_never_lost() {
        loom::model(|| {
            let slot = Arc::new(Mutex::new((false, None::<Waker>)));
            let s2 = slot.clone();
            let t = loom::thread::spawn(move || {
                let waker = {
                    let mut g = s2.lock().unwrap();
                    g.0 = true;
                    g.1.take()
                };
                if let Some(w) = waker {
                    w.wake();
                }
            });
            block_on(poll_fn(|cx| {
                let mut g = slot.lock().unwrap();
                if g.0 {
                    Poll::Ready(())
                } else {
                    g.1 = Some(cx.waker().clone());
                    Poll::Pending
                }
            }));
            t.join().unwrap();
        });
    }
}
