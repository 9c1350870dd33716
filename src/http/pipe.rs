//! One HTTP/2 or HTTP/3 stream as a byte pipe, the output half: a bounded queue that the
//! response body ([`UpgradeBody`]) hands to the protocol's driver as DATA. The input half
//! is the request body (the same `Incoming` channel, so reading it is what opens the
//! stream's window). A WebSocket (RFC 8441, RFC 9220) and a CONNECT tunnel both run
//! over it.
//!
//! The driver polls the body only while the stream's window is open, so a writer fills
//! the queue up to its bound and then waits: writes are paced by flow control.

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// Wakes outside the stream's lock (a waker may run its task's poll at once).
fn wake(w: Option<Waker>) {
    if let Some(w) = w {
        w.wake();
    }
}

/// One stream's output and the state its two users share (the writer and the body).
pub(crate) struct StreamIo {
    write_limit: usize,
    inner: Mutex<StreamState>,
}

#[derive(Default)]
struct StreamState {
    /// Bytes the body has not handed to the driver yet.
    out: VecDeque<Bytes>,
    queued: usize,
    /// No more output: the body ends (END_STREAM), or it was dropped (the stream is gone).
    closed: bool,
    /// The writer gave up: the body fails, and the driver resets the stream.
    aborted: bool,
    /// The body's poller (the connection's driver).
    body: Option<Waker>,
    /// A sender waiting for `queued` to fall under the bound.
    drained: Option<Waker>,
    /// Reads are held (a WebSocket's inbox is full): its input task waits.
    #[cfg_attr(not(feature = "ws"), allow(dead_code))]
    held: bool,
    /// The input task, woken when reads resume or the output closes.
    input: Option<Waker>,
}

impl StreamIo {
    pub(crate) fn new(write_limit: usize) -> Arc<StreamIo> {
        Arc::new(StreamIo {
            write_limit,
            inner: Mutex::new(StreamState::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, StreamState> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `data` (whatever the bound: callers wait with [`StreamIo::poll_room`]).
    pub(crate) fn send(&self, data: &[u8]) -> io::Result<()> {
        let mut st = self.lock();
        if st.closed {
            return Err(io::ErrorKind::NotConnected.into());
        }
        st.queued += data.len();
        st.out.push_back(Bytes::copy_from_slice(data));
        let body = st.body.take();
        drop(st);
        wake(body);
        Ok(())
    }

    /// Ends the output once what is queued is sent (END_STREAM).
    pub(crate) fn close(&self) {
        let (body, input) = {
            let mut st = self.lock();
            st.closed = true;
            (st.body.take(), st.input.take())
        };
        wake(body);
        wake(input);
    }

    /// Drops what is queued and makes the body fail: the driver resets the stream.
    pub(crate) fn abort(&self) {
        let (body, input) = {
            let mut st = self.lock();
            st.closed = true;
            st.aborted = true;
            st.out.clear();
            st.queued = 0;
            (st.body.take(), st.input.take())
        };
        wake(body);
        wake(input);
    }

    #[cfg_attr(not(feature = "ws"), allow(dead_code))]
    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }

    #[cfg_attr(not(feature = "ws"), allow(dead_code))]
    pub(crate) fn queued(&self) -> usize {
        self.lock().queued
    }

    #[cfg_attr(not(feature = "ws"), allow(dead_code))]
    pub(crate) fn hold_reads(&self) {
        self.lock().held = true;
    }

    #[cfg_attr(not(feature = "ws"), allow(dead_code))]
    pub(crate) fn resume_reads(&self) {
        let input = {
            let mut st = self.lock();
            st.held = false;
            st.input.take()
        };
        wake(input);
    }

    /// `Ready(true)` while the output is under its bound, `Ready(false)` once it is
    /// closed; `Pending` (and `cx` woken when it drains) past the bound.
    pub(crate) fn poll_room(&self, cx: &mut Context<'_>) -> Poll<bool> {
        let mut st = self.lock();
        if st.closed {
            return Poll::Ready(false);
        }
        if st.queued <= self.write_limit {
            return Poll::Ready(true);
        }
        st.drained = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Whether a WebSocket's input task reads on (`Pending` while reads are held); `false` once
    /// the output is closed: the user is done, and dropping the request body lets the
    /// stream go (RST_STREAM(NO_ERROR) if the client is still sending).
    #[cfg_attr(not(feature = "ws"), allow(dead_code))]
    pub(crate) fn poll_input(&self, cx: &mut Context<'_>) -> Poll<bool> {
        let mut st = self.lock();
        if st.closed {
            return Poll::Ready(false);
        }
        if !st.input.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            st.input = Some(cx.waker().clone());
        }
        if st.held {
            Poll::Pending
        } else {
            Poll::Ready(true)
        }
    }
}

/// Why an [`UpgradeBody`] failed: its tunnel was aborted, and the stream is reset
/// (HTTP/2's CONNECT_ERROR, HTTP/3's H3_CONNECT_ERROR).
#[derive(Debug)]
pub struct TunnelAborted;

impl fmt::Display for TunnelAborted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the tunnel was aborted")
    }
}

impl std::error::Error for TunnelAborted {}

impl TunnelAborted {
    /// Whether a failed body's error is (or wraps, as axum's body does) an aborted tunnel.
    pub(crate) fn caused(err: &(dyn std::error::Error + 'static)) -> bool {
        let mut cause = Some(err);
        while let Some(e) = cause {
            if e.is::<TunnelAborted>() {
                return true;
            }
            cause = e.source();
        }
        false
    }
}

/// The body of the answer to an upgrade or a CONNECT: empty for HTTP/1.1 (the connection
/// itself carries what follows), the stream's output over HTTP/2 and HTTP/3.
pub struct UpgradeBody {
    stream: Option<Arc<StreamIo>>,
    /// Runs once the body is first polled (the head is written); dropped unrun, it
    /// reports the failed upgrade.
    start: Option<Box<dyn FnOnce() + Send>>,
}

impl Default for UpgradeBody {
    /// The empty body (of a `101`, or an HTTP/1.1 CONNECT's `200`).
    fn default() -> UpgradeBody {
        UpgradeBody {
            stream: None,
            start: None,
        }
    }
}

impl UpgradeBody {
    pub(crate) fn stream(io: Arc<StreamIo>, start: Option<Box<dyn FnOnce() + Send>>) -> Self {
        UpgradeBody {
            stream: Some(io),
            start,
        }
    }
}

impl Body for UpgradeBody {
    type Data = Bytes;
    type Error = TunnelAborted;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, TunnelAborted>>> {
        if let Some(start) = self.start.take() {
            start();
        }
        let Some(io) = &self.stream else {
            return Poll::Ready(None);
        };
        let mut st = io.lock();
        if st.aborted {
            return Poll::Ready(Some(Err(TunnelAborted)));
        }
        if let Some(data) = st.out.pop_front() {
            st.queued -= data.len();
            let under = st.queued <= io.write_limit;
            let drained = st.drained.take_if(|_| under);
            drop(st);
            wake(drained);
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        if st.closed {
            return Poll::Ready(None);
        }
        st.body = Some(cx.waker().clone());
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.stream.as_ref().is_none_or(|io| {
            let st = io.lock();
            st.closed && !st.aborted && st.out.is_empty()
        })
    }

    fn size_hint(&self) -> SizeHint {
        match self.stream {
            None => SizeHint::with_exact(0),
            Some(_) => SizeHint::default(),
        }
    }
}

impl Drop for UpgradeBody {
    /// The stream is gone (answered, reset or its connection closed): sends fail.
    fn drop(&mut self) {
        if let Some(io) = &self.stream {
            let (drained, input) = {
                let mut st = io.lock();
                st.closed = true;
                (st.drained.take(), st.input.take())
            };
            wake(drained);
            wake(input);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll_body(body: &mut UpgradeBody) -> Poll<Option<Result<Frame<Bytes>, TunnelAborted>>> {
        Pin::new(body).poll_frame(&mut Context::from_waker(Waker::noop()))
    }

    /// Writes wait past the bound and go on once the driver took enough; the end comes
    /// after what was queued.
    #[test]
    fn writes_wait_at_the_bound_until_the_body_drains() {
        let io = StreamIo::new(8);
        let mut body = UpgradeBody::stream(io.clone(), None);
        let count = Arc::new(Count::default());
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        assert_eq!(io.poll_room(&mut cx), Poll::Ready(true));
        io.send(b"01234567").unwrap();
        assert_eq!(io.poll_room(&mut cx), Poll::Ready(true), "at the bound");
        io.send(b"8").unwrap();
        assert_eq!(io.poll_room(&mut cx), Poll::Pending, "past it");
        let Poll::Ready(Some(Ok(f))) = poll_body(&mut body) else {
            panic!("queued data")
        };
        assert_eq!(f.into_data().unwrap(), &b"01234567"[..]);
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "the writer is woken");
        assert_eq!(io.poll_room(&mut cx), Poll::Ready(true));
        io.close();
        assert!(!body.is_end_stream(), "one chunk left");
        assert!(matches!(poll_body(&mut body), Poll::Ready(Some(Ok(_)))));
        assert!(matches!(poll_body(&mut body), Poll::Ready(None)));
        assert_eq!(io.poll_room(&mut cx), Poll::Ready(false), "closed");
        assert!(io.send(b"late").is_err());
    }

    /// An abort drops what is queued and fails the body, however wrapped its error is.
    #[test]
    fn an_abort_fails_the_body() {
        let io = StreamIo::new(8);
        let mut body = UpgradeBody::stream(io.clone(), None);
        io.send(b"dropped").unwrap();
        io.abort();
        let Poll::Ready(Some(Err(e))) = poll_body(&mut body) else {
            panic!("the body fails")
        };
        // As axum's body wraps it: the aborted tunnel as the source.
        #[derive(Debug)]
        struct Wrapped(TunnelAborted);
        impl fmt::Display for Wrapped {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("wrapped")
            }
        }
        impl std::error::Error for Wrapped {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        assert!(TunnelAborted::caused(&Wrapped(e)));
        assert!(!TunnelAborted::caused(&io::Error::other("other")));
    }

    /// The driver dropping the body (a reset stream) fails later writes.
    #[test]
    fn a_dropped_body_closes_the_stream() {
        let io = StreamIo::new(8);
        drop(UpgradeBody::stream(io.clone(), None));
        assert!(io.is_closed());
        assert!(io.send(b"x").is_err());
    }
}
