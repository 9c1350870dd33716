//! A one-shot async event: set once, wakes every waiter, stays set.

use std::future::poll_fn;
use std::sync::Mutex;
use std::task::{Poll, Waker};

pub(crate) struct Notify {
    state: Mutex<(bool, Vec<Waker>)>,
}

impl Notify {
    pub fn new() -> Notify {
        Notify {
            state: Mutex::new((false, Vec::new())),
        }
    }

    /// Sets the event and wakes every waiter.
    pub fn notify(&self) {
        let wakers = {
            let mut st = self.state.lock().unwrap();
            st.0 = true;
            std::mem::take(&mut st.1)
        };
        for w in wakers {
            w.wake();
        }
    }

    /// Waits until the event is set.
    pub async fn wait(&self) {
        poll_fn(|cx| {
            let mut st = self.state.lock().unwrap();
            if st.0 {
                return Poll::Ready(());
            }
            if !st.1.iter().any(|w| w.will_wake(cx.waker())) {
                st.1.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }
}
