//! Request bodies: [`Incoming`], fed by a connection's rounds and read by the service.
//!
//! The connection pushes decoded body bytes into a small shared channel; the service reads
//! frames from it. When the channel holds more than its bound, the connection stops reading
//! the socket until the service catches up (the reader wakes it), so a slow consumer never
//! makes the server buffer a whole upload. The first read tells the connection the body is
//! wanted, which is when an `Expect: 100-continue` is answered, in the response order.

use crate::proto::shared::{BodyFailure, BodySink};
use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// Why reading a request body failed.
#[derive(Debug)]
pub struct BodyError {
    kind: BodyErrorKind,
}

#[derive(Debug)]
enum BodyErrorKind {
    /// The connection closed before the body was complete.
    Incomplete,
    /// The body could not be decoded (bad chunked framing).
    Malformed(String),
    /// The body is larger than the server allows.
    TooLarge(u64),
    /// No body bytes arrived within the server's `body_read_timeout`.
    TimedOut,
}

impl BodyError {
    pub(crate) fn incomplete() -> BodyError {
        BodyError {
            kind: BodyErrorKind::Incomplete,
        }
    }
    pub(crate) fn malformed(why: impl Into<String>) -> BodyError {
        BodyError {
            kind: BodyErrorKind::Malformed(why.into()),
        }
    }
    pub(crate) fn timed_out() -> BodyError {
        BodyError {
            kind: BodyErrorKind::TimedOut,
        }
    }

    pub(crate) fn too_large(limit: u64) -> BodyError {
        BodyError {
            kind: BodyErrorKind::TooLarge(limit),
        }
    }

    /// True if the body exceeded the server's `max_body_size`.
    pub fn is_too_large(&self) -> bool {
        matches!(self.kind, BodyErrorKind::TooLarge(_))
    }
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            BodyErrorKind::Incomplete => {
                f.write_str("the connection closed before the request body was complete")
            }
            BodyErrorKind::Malformed(why) => write!(f, "malformed request body: {why}"),
            BodyErrorKind::TimedOut => {
                f.write_str("the request body stalled past the server's body_read_timeout")
            }
            BodyErrorKind::TooLarge(limit) => {
                write!(f, "request body larger than the limit of {limit} bytes")
            }
        }
    }
}

impl std::error::Error for BodyError {}

/// A request body as it arrives from the connection.
pub struct Incoming {
    source: Source,
}

/// Where a body's bytes come from (a tag and a `Bytes`: every request carries one).
enum Source {
    /// No bytes (left).
    Empty,
    /// The whole body, when it was all there as the request was dispatched (HTTP/1 with a
    /// Content-Length): no channel is needed.
    Whole(Bytes),
    /// Fed by the connection's rounds.
    Chan(Arc<BodyChan>),
    /// The body of a request hyper parsed (a connection handed to hyper for an upgrade).
    #[cfg(feature = "hyper")]
    Hyper(Box<hyper::body::Incoming>),
}

impl Incoming {
    /// A body with no bytes.
    pub fn empty() -> Incoming {
        Incoming {
            source: Source::Empty,
        }
    }

    /// Wraps a body hyper parsed.
    #[cfg(feature = "hyper")]
    pub(crate) fn from_hyper(body: hyper::body::Incoming) -> Incoming {
        Incoming {
            source: Source::Hyper(Box::new(body)),
        }
    }

    /// A body that is all here: one data frame, then the end.
    pub(crate) fn whole(data: Bytes) -> Incoming {
        Incoming {
            source: if data.is_empty() {
                Source::Empty
            } else {
                Source::Whole(data)
            },
        }
    }

    /// A body fed by a connection; `conn` is woken when the reader makes room in a full
    /// buffer or drops the body, and (`expect_continue`: the client waits to be asked)
    /// when it first wants the body.
    pub(crate) fn channel(
        conn: Waker,
        length: Option<u64>,
        expect_continue: bool,
        limit: usize,
    ) -> (Incoming, BodySender) {
        Incoming::make_channel(conn, length, expect_continue, limit, usize::MAX)
    }

    /// A body fed by an HTTP/2 stream whose window is `window`: the connection is woken
    /// each time the reader has taken half of it, so the window reopens in batches.
    pub(crate) fn stream_channel(
        conn: Waker,
        length: Option<u64>,
        window: usize,
    ) -> (Incoming, BodySender) {
        Incoming::make_channel(conn, length, false, window, (window / 2).max(1))
    }

    fn make_channel(
        conn: Waker,
        length: Option<u64>,
        expect_continue: bool,
        limit: usize,
        credit_wake: usize,
    ) -> (Incoming, BodySender) {
        let chan = Arc::new(BodyChan {
            length,
            state: Mutex::new(ChanState {
                chunks: VecDeque::new(),
                buffered: 0,
                end: None,
                reader: None,
                reader_gone: false,
                wanted: false,
                expect_continue,
                full: false,
                consumed: 0,
                #[cfg(all(feature = "http3", feature = "tunnel"))]
                wake_when_gone: false,
            }),
            conn,
            limit,
            credit_wake,
        });
        (
            Incoming {
                source: Source::Chan(chan.clone()),
            },
            BodySender { chan },
        )
    }
}

impl fmt::Debug for Incoming {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Incoming")
            .field("length", &self.size_hint().exact())
            .finish()
    }
}

struct BodyChan {
    /// Exact length when the request framed it with Content-Length.
    length: Option<u64>,
    state: Mutex<ChanState>,
    /// The connection's waker.
    conn: Waker,
    /// Bytes buffered before the connection holds reads.
    limit: usize,
    /// HTTP/2: the connection is woken once the reader has taken this many bytes, to
    /// reopen the client's window (`usize::MAX`: HTTP/1, which has no windows).
    credit_wake: usize,
}

enum End {
    Done(Option<HeaderMap>),
    Failed(BodyError),
}

struct ChanState {
    chunks: VecDeque<Bytes>,
    buffered: usize,
    end: Option<End>,
    reader: Option<Waker>,
    reader_gone: bool,
    /// The reader has asked for the body.
    wanted: bool,
    /// The connection is to hear when the body is first wanted.
    expect_continue: bool,
    /// The buffer reached its bound: the connection waits for room.
    full: bool,
    /// Bytes the reader took that the connection has not counted yet (HTTP/2's credit).
    consumed: usize,
    /// The connection is to hear when the reader goes (an HTTP/3 tunnel's pump, which
    /// otherwise waits on the stream).
    #[cfg(all(feature = "http3", feature = "tunnel"))]
    wake_when_gone: bool,
}

/// The connection's end of a body channel.
pub(crate) struct BodySender {
    chan: Arc<BodyChan>,
}

impl BodySender {
    /// The connection's waker runs when the reader goes, even with room left.
    #[cfg(all(feature = "http3", feature = "tunnel"))]
    pub(crate) fn wake_when_reader_gone(&self) {
        self.chan.state.lock().unwrap().wake_when_gone = true;
    }

    fn end(&self, end: End) {
        let mut st = self.chan.state.lock().unwrap();
        if st.end.is_none() {
            st.end = Some(end);
        }
        let waker = st.reader.take();
        drop(st);
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl BodySink for BodySender {
    /// Bytes for a dropped body are discarded.
    fn push(&mut self, data: &[u8]) {
        let mut st = self.chan.state.lock().unwrap();
        if st.reader_gone || data.is_empty() {
            return;
        }
        st.buffered += data.len();
        st.chunks.push_back(Bytes::copy_from_slice(data));
        st.full = st.buffered >= self.chan.limit;
        let waker = st.reader.take();
        drop(st);
        if let Some(w) = waker {
            w.wake();
        }
    }

    fn has_room(&self) -> bool {
        let st = self.chan.state.lock().unwrap();
        st.reader_gone || !st.full
    }

    fn reader_gone(&self) -> bool {
        self.chan.state.lock().unwrap().reader_gone
    }

    fn wanted(&self) -> bool {
        self.chan.state.lock().unwrap().wanted
    }

    fn finish(self, trailers: Option<HeaderMap>) {
        self.end(End::Done(trailers));
    }

    fn fail(self, why: BodyFailure) {
        let err = match why {
            BodyFailure::Incomplete => BodyError::incomplete(),
            BodyFailure::Malformed(e) => BodyError::malformed(e.to_string()),
            BodyFailure::TooLarge(limit) => BodyError::too_large(limit),
            BodyFailure::TimedOut => BodyError::timed_out(),
        };
        self.end(End::Failed(err));
    }
}

impl crate::proto::h2::server::StreamSink for BodySender {
    fn take_consumed(&mut self) -> usize {
        std::mem::take(&mut self.chan.state.lock().unwrap().consumed)
    }
}

impl Drop for BodySender {
    fn drop(&mut self) {
        // A body the connection stopped feeding without finishing it is incomplete.
        self.end(End::Failed(BodyError::incomplete()));
    }
}

impl Body for Incoming {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        let chan = match &mut this.source {
            Source::Empty => return Poll::Ready(None),
            Source::Whole(data) => {
                let data = std::mem::take(data);
                this.source = Source::Empty;
                return Poll::Ready(Some(Ok(Frame::data(data))));
            }
            Source::Chan(chan) => chan,
            #[cfg(feature = "hyper")]
            Source::Hyper(body) => {
                return Pin::new(&mut **body)
                    .poll_frame(cx)
                    .map_err(|e| BodyError::malformed(e.to_string()));
            }
        };
        let mut st = chan.state.lock().unwrap();
        if let Some(data) = st.chunks.pop_front() {
            st.buffered -= data.len();
            let before = st.consumed;
            st.consumed += data.len();
            if before < chan.credit_wake && st.consumed >= chan.credit_wake {
                // Enough to reopen the client's window (HTTP/2).
                drop(st);
                chan.conn.wake_by_ref();
                return Poll::Ready(Some(Ok(Frame::data(data))));
            }
            if st.full && st.buffered < chan.limit / 2 {
                // Room again: the connection reads on.
                st.full = false;
                drop(st);
                chan.conn.wake_by_ref();
            }
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        match st.end.take() {
            Some(End::Done(Some(trailers))) => {
                st.end = Some(End::Done(None));
                return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
            }
            Some(End::Done(None)) => {
                st.end = Some(End::Done(None));
                return Poll::Ready(None);
            }
            Some(End::Failed(e)) => {
                st.end = Some(End::Done(None));
                return Poll::Ready(Some(Err(e)));
            }
            None => {}
        }
        st.reader = Some(cx.waker().clone());
        if !st.wanted {
            st.wanted = true;
            if st.expect_continue {
                // The connection may now ask the client for the body (100 Continue).
                drop(st);
                chan.conn.wake_by_ref();
            }
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        match &self.source {
            Source::Empty => true,
            Source::Whole(_) => false,
            Source::Chan(chan) => {
                let st = chan.state.lock().unwrap();
                st.chunks.is_empty() && matches!(st.end, Some(End::Done(None)))
            }
            #[cfg(feature = "hyper")]
            Source::Hyper(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.source {
            Source::Empty => SizeHint::with_exact(0),
            Source::Whole(data) => SizeHint::with_exact(data.len() as u64),
            Source::Chan(chan) => chan
                .length
                .map_or_else(SizeHint::default, SizeHint::with_exact),
            #[cfg(feature = "hyper")]
            Source::Hyper(body) => body.size_hint(),
        }
    }
}

impl Drop for Incoming {
    fn drop(&mut self) {
        if let Source::Chan(chan) = &self.source {
            let mut st = chan.state.lock().unwrap();
            st.reader_gone = true;
            st.chunks.clear();
            st.buffered = 0;
            let full = std::mem::take(&mut st.full);
            #[cfg(all(feature = "http3", feature = "tunnel"))]
            let full = full || st.wake_when_gone;
            drop(st);
            if full {
                // The connection discards the rest of this body (up to its drain bound).
                chan.conn.wake_by_ref();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[test]
    fn a_whole_body_is_one_frame_then_the_end() {
        let mut body = Incoming::whole(Bytes::from_static(b"hello"));
        assert_eq!(body.size_hint().exact(), Some(5));
        assert!(!body.is_end_stream());
        let got = crate::engine::exec::block_on(async move {
            let frame = body.frame().await.unwrap().unwrap();
            assert!(body.is_end_stream());
            assert_eq!(body.size_hint().exact(), Some(0));
            assert!(body.frame().await.is_none());
            frame.into_data().unwrap()
        });
        assert_eq!(got, "hello");
        assert!(Incoming::whole(Bytes::new()).is_end_stream());
    }

    #[test]
    fn a_body_is_a_tag_and_a_bytes() {
        // Every request carries one, on every protocol.
        assert!(std::mem::size_of::<Incoming>() <= 40);
    }
}
