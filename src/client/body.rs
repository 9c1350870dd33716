//! Request bodies as the connection sends them, and [`ResponseBody`], which streams the
//! response while driving its connection.

use super::error::{BoxError, Error, ErrorKind};
use crate::proto::h1::body::{BodyChunk, BodyDecoder, Truncated};
use crate::proto::h1::framing::BodyFraming;
use bytes::{Buf, Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{Empty, Full};
use std::any::Any;
use std::fmt;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

pin_project_lite::pin_project! {
    /// A body with its data as `Bytes` and its errors boxed. Unlike `map_frame` (whose
    /// size hint is always "unknown"), it keeps the inner body's size hint and end, which
    /// pick the request's framing.
    struct IntoBytes<B> {
        #[pin]
        inner: B,
    }
}

impl<B> Body for IntoBytes<B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let frame = ready!(self.project().inner.poll_frame(cx));
        Poll::Ready(frame.map(|r| {
            r.map(|f| f.map_data(|mut d| d.copy_to_bytes(d.remaining())))
                .map_err(Into::into)
        }))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Any request body, with the common fixed ones kept unboxed.
pub(crate) enum ReqBody {
    Empty,
    Full(Option<Bytes>),
    Boxed(UnsyncBoxBody<Bytes, BoxError>),
}

impl ReqBody {
    pub(crate) fn new<B>(body: B) -> ReqBody
    where
        B: Body + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let mut slot = Some(body);
        let any = &mut slot as &mut dyn Any;
        if any.downcast_mut::<Option<Empty<Bytes>>>().is_some() {
            return ReqBody::Empty;
        }
        if let Some(s) = any.downcast_mut::<Option<String>>() {
            let s = s.take().unwrap_or_default();
            return ReqBody::full(Bytes::from(s));
        }
        if let Some(full) = any.downcast_mut::<Option<Full<Bytes>>>() {
            // A Full yields its bytes in one ready frame.
            let mut full = full.take().unwrap_or_default();
            let mut cx = Context::from_waker(std::task::Waker::noop());
            return match Pin::new(&mut full).poll_frame(&mut cx) {
                Poll::Ready(Some(Ok(f))) => match f.into_data() {
                    Ok(b) => ReqBody::full(b),
                    Err(_) => ReqBody::Empty,
                },
                _ => ReqBody::Empty,
            };
        }
        let body = slot.expect("taken only by a matching downcast");
        ReqBody::Boxed(UnsyncBoxBody::new(IntoBytes { inner: body }))
    }

    /// A copy for sending again, when the body is still whole (none, or full bytes).
    pub(crate) fn try_clone(&self) -> Option<ReqBody> {
        match self {
            ReqBody::Empty => Some(ReqBody::Empty),
            ReqBody::Full(b) => Some(ReqBody::Full(b.clone())),
            ReqBody::Boxed(_) => None,
        }
    }

    fn full(b: Bytes) -> ReqBody {
        if b.is_empty() {
            ReqBody::Empty
        } else {
            ReqBody::Full(Some(b))
        }
    }
}

impl Body for ReqBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            ReqBody::Empty => Poll::Ready(None),
            ReqBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            ReqBody::Boxed(b) => Pin::new(b).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ReqBody::Empty => true,
            ReqBody::Full(b) => b.is_none(),
            ReqBody::Boxed(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ReqBody::Empty => SizeHint::with_exact(0),
            ReqBody::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            ReqBody::Boxed(b) => b.size_hint(),
        }
    }
}

/// The connection under a streaming response body, whatever its stream type.
pub(crate) trait Wire: Send {
    /// Reads more into `buf`; `Ok(0)` is the end of the stream. A failure of the request
    /// body, still being sent, is reported here too.
    fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut BytesMut)
        -> Poll<Result<usize, Error>>;
    /// The response was read to its end; `rbuf` holds what was read past it (nothing, on a
    /// connection fit for reuse). Back to the pool if the connection is reusable.
    fn finish(self: Box<Self>, rbuf: BytesMut);
}

/// Makes a `Send` value `Sync` by never handing out a shared reference to it (only
/// `&mut`), so `&Exclusive<T>` gives no access at all.
struct Exclusive<T>(T);

// SAFETY: nothing reaches the value through `&self` (only `get_mut(&mut self)` and
// `into_inner(self)` touch it), so a shared `&Exclusive<T>` shares nothing; `&mut`
// access is exclusive, which `Send` covers.
unsafe impl<T: Send> Sync for Exclusive<T> {}

impl<T> Exclusive<T> {
    fn get_mut(&mut self) -> &mut T {
        &mut self.0
    }

    fn into_inner(self) -> T {
        self.0
    }
}

struct Streaming {
    wire: Exclusive<Box<dyn Wire>>,
    /// Read and not yet consumed.
    rbuf: BytesMut,
    decoder: BodyDecoder,
}

enum State {
    /// Nothing (more) to read.
    Done,
    /// The whole body, read along with the head.
    Full(Bytes),
    /// The body streams in over its connection.
    Streaming(Streaming),
    /// The body comes from a stream of an HTTP/2 or HTTP/3 connection.
    Multiplexed(Box<dyn StreamBody>),
}

/// A response body on a stream of a multiplexed connection (HTTP/2, HTTP/3). Their
/// modules implement it, so this one does not depend on them.
pub(crate) trait StreamBody: Send + Sync {
    /// The next frame; `None` at the end.
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>>;
    /// The bytes still to come, when the server declared a length.
    fn remaining(&self) -> Option<u64>;
    /// Nothing more will come.
    fn is_end(&self) -> bool;
}

/// A response body. It streams: frames arrive as the server sends them, read by whoever
/// polls the body. The connection returns to the pool when the body has been read to its
/// end (a small body already read with the head returns it at once); dropping the body
/// early closes the connection.
pub struct ResponseBody {
    state: State,
    limit: Option<u64>,
    seen: u64,
}

impl ResponseBody {
    pub(crate) fn empty() -> ResponseBody {
        ResponseBody::full(Bytes::new())
    }

    pub(crate) fn full(b: Bytes) -> ResponseBody {
        ResponseBody {
            state: if b.is_empty() {
                State::Done
            } else {
                State::Full(b)
            },
            limit: None,
            seen: 0,
        }
    }

    /// A body read from `wire` (`rbuf`: what was read past the head), delimited by
    /// `framing`.
    pub(crate) fn streaming(
        wire: Box<dyn Wire>,
        rbuf: BytesMut,
        framing: BodyFraming,
        limit: Option<u64>,
    ) -> ResponseBody {
        let decoder = BodyDecoder::new(framing);
        ResponseBody {
            state: State::Streaming(Streaming {
                wire: Exclusive(wire),
                rbuf,
                decoder,
            }),
            limit,
            seen: 0,
        }
    }

    /// A body on a stream of an HTTP/2 or HTTP/3 connection.
    pub(crate) fn multiplexed(stream: Box<dyn StreamBody>, limit: Option<u64>) -> ResponseBody {
        ResponseBody {
            state: State::Multiplexed(stream),
            limit,
            seen: 0,
        }
    }

    /// Counts `n` more body bytes against the limit.
    fn over_limit(&mut self, n: usize) -> Option<Error> {
        self.seen += n as u64;
        let limit = self.limit?;
        (self.seen > limit)
            .then(|| Error::new(ErrorKind::BodyTooLarge, format!("more than {limit} bytes")))
    }
}

impl Streaming {
    /// The next frame; `Ok(None)` at the end of the body.
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Frame<Bytes>>, Error>> {
        loop {
            let buf = &mut self.rbuf;
            let (used, chunk) = self
                .decoder
                .decode(buf)
                .map_err(|e| Error::new(ErrorKind::Protocol, e))?;
            match chunk {
                BodyChunk::Data(d) => {
                    let len = d.len();
                    buf.advance(used - len);
                    return Poll::Ready(Ok(Some(Frame::data(take_bytes(buf, len)))));
                }
                BodyChunk::End(trailers) => {
                    buf.advance(used);
                    return Poll::Ready(Ok(trailers.map(Frame::trailers)));
                }
                BodyChunk::NeedMore => buf.advance(used),
            }
            if ready!(self.wire.get_mut().poll_read(cx, &mut self.rbuf))? == 0 {
                return match self.decoder.at_eof() {
                    Ok(()) => Poll::Ready(Ok(None)),
                    Err(Truncated) => Poll::Ready(Err(Error::new(
                        ErrorKind::IncompleteBody,
                        "the server closed the connection within the body",
                    ))),
                };
            }
        }
    }

    /// Whether nothing is left to read.
    fn is_end(&self) -> bool {
        self.decoder.is_done()
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = self.get_mut();
        // A stream of a multiplexed connection: its frame, or its end.
        let multiplexed = match &mut this.state {
            State::Multiplexed(s) => Some(ready!(s.poll_frame(cx))),
            _ => None,
        };
        let frame = match (multiplexed, &mut this.state) {
            (Some(Some(Ok(f))), _) => f,
            (Some(end), _) => {
                this.state = State::Done;
                return Poll::Ready(end);
            }
            (None, State::Done) => return Poll::Ready(None),
            (None, State::Full(_)) => {
                let State::Full(b) = std::mem::replace(&mut this.state, State::Done) else {
                    unreachable!("matched above")
                };
                Frame::data(b)
            }
            (None, State::Streaming(s)) => match s.poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => {
                    this.state = State::Done;
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Ready(Ok(frame)) => {
                    // Done: hand the connection back before the caller sees the end.
                    if s.is_end() {
                        if let State::Streaming(s) = std::mem::replace(&mut this.state, State::Done)
                        {
                            s.wire.into_inner().finish(s.rbuf);
                        }
                    }
                    match frame {
                        Some(f) => f,
                        None => return Poll::Ready(None),
                    }
                }
            },
            (None, _) => unreachable!("a multiplexed stream's body was polled above"),
        };
        if let Some(data) = frame.data_ref() {
            if let Some(e) = this.over_limit(data.len()) {
                // The connection is dropped (closed) with the rest unread.
                this.state = State::Done;
                return Poll::Ready(Some(Err(e)));
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        match &self.state {
            State::Done => true,
            State::Full(_) => false,
            State::Streaming(s) => s.is_end(),
            State::Multiplexed(s) => s.is_end(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.state {
            State::Done => SizeHint::with_exact(0),
            State::Full(b) => SizeHint::with_exact(b.len() as u64),
            State::Streaming(s) => match s.decoder.remaining() {
                Some(n) => SizeHint::with_exact(n),
                None => SizeHint::default(),
            },
            State::Multiplexed(s) => match s.remaining() {
                Some(n) => SizeHint::with_exact(n),
                None => SizeHint::default(),
            },
        }
    }
}

impl fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseBody").finish_non_exhaustive()
    }
}

/// The first `n` bytes of `buf`, as their own `Bytes`. Small runs are copied, so the read
/// buffer stays unshared and is reused in place; large ones are split off without a copy.
pub(crate) fn take_bytes(buf: &mut BytesMut, n: usize) -> Bytes {
    if n <= 4096 {
        let b = Bytes::copy_from_slice(&buf[..n]);
        buf.advance(n);
        b
    } else {
        buf.split_to(n).freeze()
    }
}
