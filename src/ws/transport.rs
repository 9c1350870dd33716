//! What a WebSocket runs over: a connection of its own (HTTP/1.1's upgrade, the client),
//! or one HTTP/2 stream (extended CONNECT, RFC 8441) whose DATA carry the frames.
//!
//! The stream's output is a bounded queue the response body ([`UpgradeBody`]) hands to
//! the HTTP/2 driver; its input is the request body, read by a task of its own that
//! pauses while reads are held.

use crate::engine::conn::Conn;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// The operations the socket's driver needs of what carries it.
pub(crate) enum Transport {
    Conn(Conn),
    Stream(Arc<StreamIo>),
}

impl Transport {
    pub(crate) fn send(&self, data: &[u8]) -> io::Result<()> {
        match self {
            Transport::Conn(c) => c.send(data),
            Transport::Stream(s) => s.send(data),
        }
    }

    pub(crate) fn close(&self) {
        match self {
            Transport::Conn(c) => c.close(),
            Transport::Stream(s) => s.close(),
        }
    }

    /// The client's half-close; a stream (always a server's) just ends its output.
    pub(crate) fn shutdown_write(&self) {
        match self {
            Transport::Conn(c) => c.shutdown_write(),
            Transport::Stream(s) => s.close(),
        }
    }

    pub(crate) fn hold_reads(&self) {
        match self {
            Transport::Conn(c) => c.hold_reads(),
            Transport::Stream(s) => s.lock().held = true,
        }
    }

    pub(crate) fn resume_reads(&self) {
        match self {
            Transport::Conn(c) => c.resume_reads(),
            Transport::Stream(s) => {
                let input = {
                    let mut st = s.lock();
                    st.held = false;
                    st.input.take()
                };
                wake(input);
            }
        }
    }

    pub(crate) fn queued_bytes(&self) -> usize {
        match self {
            Transport::Conn(c) => c.queued_bytes(),
            Transport::Stream(s) => s.lock().queued,
        }
    }

    /// Wakes a sender once the output is under the write bound again: a connection calls
    /// its handler's `on_drained`; a stream wakes `waker` itself.
    pub(crate) fn wake_when_drained(&self, waker: &Waker) {
        match self {
            Transport::Conn(c) => c.wake_when_drained(),
            Transport::Stream(s) => {
                let mut st = s.lock();
                if st.queued > s.write_limit {
                    st.drained = Some(waker.clone());
                    return;
                }
                drop(st);
                waker.wake_by_ref();
            }
        }
    }

    pub(crate) fn is_open(&self) -> bool {
        match self {
            Transport::Conn(c) => c.is_open(),
            Transport::Stream(s) => !s.lock().closed,
        }
    }
}

/// Wakes outside the stream's lock (a waker may run its task's poll at once).
fn wake(w: Option<Waker>) {
    if let Some(w) = w {
        w.wake();
    }
}

/// One HTTP/2 stream's two directions, shared by the socket and its response body.
pub(crate) struct StreamIo {
    write_limit: usize,
    inner: Mutex<StreamState>,
}

#[derive(Default)]
struct StreamState {
    /// Encoded frames the body has not handed to the driver yet.
    out: VecDeque<Bytes>,
    queued: usize,
    /// No more output: the body ends (END_STREAM), or it was dropped (the stream is gone).
    closed: bool,
    /// The body's poller (the HTTP/2 connection).
    body: Option<Waker>,
    /// A sender waiting for `queued` to fall under the bound.
    drained: Option<Waker>,
    /// Reads are held (the inbox is full): the input task waits.
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

    fn send(&self, data: &[u8]) -> io::Result<()> {
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

    fn close(&self) {
        let (body, input) = {
            let mut st = self.lock();
            st.closed = true;
            (st.body.take(), st.input.take())
        };
        wake(body);
        wake(input);
    }

    /// Whether the input task reads on (`Pending` while reads are held); `false` once
    /// the output is closed: the socket is done, and dropping the request body lets the
    /// stream go (RST_STREAM(NO_ERROR) if the client is still sending).
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

/// The body of the answer to a WebSocket handshake: empty for HTTP/1.1's `101` (the
/// connection itself carries the socket), the socket's output for HTTP/2's `200`.
pub struct UpgradeBody {
    stream: Option<Arc<StreamIo>>,
    /// Starts the socket once the body is first polled (the `200` is written); dropped
    /// unstarted, it reports the failed upgrade.
    start: Option<Box<dyn FnOnce() + Send>>,
}

impl Default for UpgradeBody {
    /// The empty body (of a `101`).
    fn default() -> UpgradeBody {
        UpgradeBody {
            stream: None,
            start: None,
        }
    }
}

impl UpgradeBody {
    pub(crate) fn stream(io: Arc<StreamIo>, start: Box<dyn FnOnce() + Send>) -> UpgradeBody {
        UpgradeBody {
            stream: Some(io),
            start: Some(start),
        }
    }

    /// A client's request body: the socket's output, from the start.
    #[cfg(feature = "client")]
    pub(crate) fn output(io: Arc<StreamIo>) -> UpgradeBody {
        UpgradeBody {
            stream: Some(io),
            start: None,
        }
    }
}

impl Body for UpgradeBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(start) = self.start.take() {
            start();
        }
        let Some(io) = &self.stream else {
            return Poll::Ready(None);
        };
        let mut st = io.lock();
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
            st.closed && st.out.is_empty()
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
