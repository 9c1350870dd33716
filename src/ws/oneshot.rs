//! A value handed from the connection to the task waiting for it (the socket after a
//! `101`), or an error if the connection ended first.

use super::Error;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

struct Slot<T> {
    value: Option<Result<T, Error>>,
    waker: Option<Waker>,
    sent: bool,
}

/// The connection's end: dropped unsent, it reports the connection closed.
pub(crate) struct Sender<T>(Arc<Mutex<Slot<T>>>);

/// The waiting task's end.
pub(crate) struct Receiver<T>(Arc<Mutex<Slot<T>>>);

pub(crate) fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let slot = Arc::new(Mutex::new(Slot {
        value: None,
        waker: None,
        sent: false,
    }));
    (Sender(slot.clone()), Receiver(slot))
}

impl<T> Sender<T> {
    pub(crate) fn send(self, v: Result<T, Error>) {
        self.put(v);
    }

    fn put(&self, v: Result<T, Error>) {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if slot.sent {
            return;
        }
        slot.value = Some(v);
        slot.sent = true;
        if let Some(w) = slot.waker.take() {
            w.wake();
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.put(Err(Error::closed()));
    }
}

impl<T> Future for Receiver<T> {
    type Output = Result<T, Error>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match slot.value.take() {
            Some(v) => Poll::Ready(v),
            None if slot.sent => Poll::Ready(Err(Error::closed())),
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
