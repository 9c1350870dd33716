//! One HTTP/2 or HTTP/3 stream as a byte pipe, the output half: a bounded queue that the
//! response body ([`UpgradeBody`]) hands to the protocol's driver as DATA. The input half
//! is the request body (the same `Incoming` channel, so reading it is what opens the
//! stream's window). A WebSocket (RFC 8441, RFC 9220) and a CONNECT tunnel both run
//! over it.
//!
//! The driver polls the body only while the stream's window is open, so a writer fills
//! the queue up to its bound and then waits: writes are paced by flow control.
//!
//! The same two halves serve the client's side of a stream (a tunnel through an HTTP/2
//! proxy, the gateway's WebSocket to an HTTP/2 or HTTP/3 upstream): the queue's
//! `UpgradeBody` is then the request body and the response body the input. [`StreamPipe`]
//! joins the two as one byte stream, whichever side holds it.

use bytes::{Buf, Bytes};
use http_body::{Body, Frame, SizeHint};
use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{ready, Context, Poll, Waker};

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
    #[cfg_attr(not(feature = "tunnel"), allow(dead_code))]
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
    #[cfg_attr(not(feature = "tunnel"), allow(dead_code))]
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

/// Hands `put` what is left of `pending`, or else the next chunk `next` yields; returns
/// what `put` took, `Ok(0)` at the end of the input. Readers of chunked input (a stream's
/// DATA, a connection's reads) into a caller's buffer share it.
pub(crate) fn read_chunks(
    pending: &mut Bytes,
    mut next: impl FnMut() -> Poll<io::Result<Option<Bytes>>>,
    put: impl FnOnce(&[u8]) -> usize,
) -> Poll<io::Result<usize>> {
    while pending.is_empty() {
        match ready!(next())? {
            Some(data) => *pending = data,
            None => return Poll::Ready(Ok(0)),
        }
    }
    let n = put(pending).min(pending.len());
    pending.advance(n);
    Poll::Ready(Ok(n))
}

/// Copies the front of `data` into `buf`; how much.
#[cfg_attr(not(feature = "tunnel"), allow(dead_code))]
pub(crate) fn copy_into(buf: &mut [u8], data: &[u8]) -> usize {
    let n = buf.len().min(data.len());
    buf[..n].copy_from_slice(&data[..n]);
    n
}

/// Copies the front of `data` into hyper's `buf`; how much.
#[cfg(feature = "hyper")]
pub(crate) fn put_cursor(buf: &mut hyper::rt::ReadBufCursor<'_>, data: &[u8]) -> usize {
    let n = buf.remaining().min(data.len());
    buf.put_slice(&data[..n]);
    n
}

/// A stream as one byte stream: its input body read, its output queued (`output`'s
/// [`UpgradeBody`] is the other body of the exchange). Reads end (`Ok(0)`) with the
/// input; a failed input (the stream reset) is `ConnectionReset`. Dropped, the output
/// ends as [`StreamPipe::shutdown`] ends it.
pub(crate) struct StreamPipe<B> {
    input: B,
    output: Arc<StreamIo>,
    /// Read from the input and not yet handed out.
    pending: Bytes,
}

impl<B> StreamPipe<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    pub(crate) fn new(input: B, output: Arc<StreamIo>) -> StreamPipe<B> {
        StreamPipe {
            input,
            output,
            pending: Bytes::new(),
        }
    }

    /// Hands what was read to `put`, reading the input's next DATA when nothing is left.
    pub(crate) fn poll_put(
        &mut self,
        cx: &mut Context<'_>,
        put: impl FnOnce(&[u8]) -> usize,
    ) -> Poll<io::Result<usize>> {
        let input = &mut self.input;
        let next = || {
            Poll::Ready(match ready!(Pin::new(&mut *input).poll_frame(cx)) {
                None => Ok(None),
                Some(Err(e)) => Err(io::Error::new(io::ErrorKind::ConnectionReset, e)),
                // Trailers carry nothing for a byte stream.
                Some(Ok(frame)) => Ok(Some(frame.into_data().unwrap_or_default())),
            })
        };
        read_chunks(&mut self.pending, next, put)
    }

    /// Reads into `buf`; `Ok(0)` is the end of the peer's side.
    #[cfg_attr(not(feature = "tunnel"), allow(dead_code))]
    pub(crate) fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_put(cx, |data| copy_into(buf, data))
    }

    /// Queues all of `data` once the output is under its bound (the driver sends it as
    /// the stream's window allows); `BrokenPipe` once the stream is gone.
    pub(crate) fn poll_write(&self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        match ready!(self.output.poll_room(cx)) {
            false => Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
            true => Poll::Ready(self.output.send(data).map(|()| data.len())),
        }
    }
}

impl<B> StreamPipe<B> {
    /// Ends our side (END_STREAM) once what is queued is sent. Reading goes on.
    pub(crate) fn shutdown(&self) {
        self.output.close();
    }

    /// Resets the stream: what is queued is dropped and the peer sees an error.
    #[cfg_attr(not(feature = "tunnel"), allow(dead_code))]
    pub(crate) fn abort(&self) {
        self.output.abort();
    }
}

impl<B> Drop for StreamPipe<B> {
    fn drop(&mut self) {
        self.output.close();
    }
}

#[cfg(feature = "hyper")]
impl<B> hyper::rt::Read for StreamPipe<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        self.get_mut()
            .poll_put(cx, |data| put_cursor(&mut buf, data))
            .map_ok(drop)
    }
}

#[cfg(feature = "hyper")]
impl<B> hyper::rt::Write for StreamPipe<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        StreamPipe::poll_write(&self, cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // What is queued goes as the window allows; nothing waits for a flush.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.shutdown();
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::counting_waker;

    fn poll_body(body: &mut UpgradeBody) -> Poll<Option<Result<Frame<Bytes>, TunnelAborted>>> {
        Pin::new(body).poll_frame(&mut Context::from_waker(Waker::noop()))
    }

    /// Writes wait past the bound and go on once the driver took enough; the end comes
    /// after what was queued.
    #[test]
    fn writes_wait_at_the_bound_until_the_body_drains() {
        let io = StreamIo::new(8);
        let mut body = UpgradeBody::stream(io.clone(), None);
        let (count, waker) = counting_waker();
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
        assert_eq!(count.wakes(), 1, "the writer is woken");
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

    /// A body of the given frames, then its end.
    struct Frames(std::collections::VecDeque<Result<Frame<Bytes>, io::Error>>);

    impl Body for Frames {
        type Data = Bytes;
        type Error = io::Error;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
            Poll::Ready(self.0.pop_front())
        }
    }

    /// Reads cross the input's DATA frames in pieces of any size, skip trailers, and end
    /// with the input; a failed input is a reset; writes go out through the output's body,
    /// and a shutdown ends it.
    #[test]
    fn a_stream_pipe_reads_its_input_and_writes_its_output() {
        let mut cx = Context::from_waker(Waker::noop());
        let input = Frames(
            [
                Ok(Frame::data(Bytes::from_static(b"hello"))),
                Ok(Frame::trailers(http::HeaderMap::new())),
                Ok(Frame::data(Bytes::from_static(b" world"))),
            ]
            .into(),
        );
        let io = StreamIo::new(8);
        let mut body = UpgradeBody::stream(io.clone(), None);
        let mut pipe = StreamPipe::new(input, io);
        let mut buf = [0u8; 3];
        let mut got = Vec::new();
        while let Poll::Ready(Ok(n @ 1..)) = pipe.poll_read(&mut cx, &mut buf) {
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, b"hello world");
        assert_eq!(
            pipe.poll_write(&mut cx, b"back").map(|r| r.ok()),
            Poll::Ready(Some(4))
        );
        pipe.shutdown();
        let Poll::Ready(Some(Ok(f))) = poll_body(&mut body) else {
            panic!("the write")
        };
        assert_eq!(f.into_data().unwrap(), &b"back"[..]);
        assert!(matches!(poll_body(&mut body), Poll::Ready(None)));

        let failing = Frames([Err(io::Error::other("reset"))].into());
        let mut pipe = StreamPipe::new(failing, StreamIo::new(8));
        let Poll::Ready(Err(e)) = pipe.poll_read(&mut cx, &mut buf) else {
            panic!("a failed input")
        };
        assert_eq!(e.kind(), io::ErrorKind::ConnectionReset);
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
