//! Request bodies as the connection sends them, and [`ResponseBody`], which streams the
//! response while driving its connection.

use super::error::{BoxError, Error, ErrorKind};
use bytes::{Buf, Bytes};
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full};
use std::any::Any;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

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
        ReqBody::Boxed(UnsyncBoxBody::new(
            body.map_frame(|f| f.map_data(|mut d| d.copy_to_bytes(d.remaining())))
                .map_err(Into::into),
        ))
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

/// A pooled connection as a response body drives it.
pub(crate) trait Driver: Send {
    /// Moves the connection's I/O along; true once the connection has finished.
    fn poll_conn(&mut self, cx: &mut Context<'_>) -> bool;
    /// The response body is complete: return the connection to its pool if it can be
    /// reused, else close it.
    fn finish(self: Box<Self>, cx: &mut Context<'_>);
}

/// Makes a `Send` value `Sync` by never handing out a shared reference to it (only
/// `&mut`), so `&Exclusive<T>` gives no access at all.
struct Exclusive<T>(T);

// SAFETY: no method gives access to the value through `&self`, so sharing `&Exclusive<T>`
// between threads shares nothing; `&mut` access is exclusive, which `Send` covers.
unsafe impl<T: Send> Sync for Exclusive<T> {}

impl<T> Exclusive<T> {
    fn get_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

/// A response body. It streams: frames arrive as the server sends them. The connection
/// it came on is driven by whoever polls this body (no background task), and returns to
/// the pool when the body has been read to its end; dropping the body early closes the
/// connection.
pub struct ResponseBody {
    inner: hyper::body::Incoming,
    driver: Exclusive<Option<Box<dyn Driver>>>,
    limit: Option<u64>,
    seen: u64,
}

impl ResponseBody {
    pub(crate) fn new(
        inner: hyper::body::Incoming,
        driver: Option<Box<dyn Driver>>,
        limit: Option<u64>,
    ) -> ResponseBody {
        ResponseBody {
            inner,
            driver: Exclusive(driver),
            limit,
            seen: 0,
        }
    }

    fn release(&mut self, cx: &mut Context<'_>) {
        if let Some(d) = self.driver.get_mut().take() {
            d.finish(cx);
        }
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
        if let Some(d) = this.driver.get_mut().as_mut() {
            d.poll_conn(cx);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(limit), Some(data)) = (this.limit, frame.data_ref()) {
                    this.seen += data.len() as u64;
                    if this.seen > limit {
                        *this.driver.get_mut() = None;
                        return Poll::Ready(Some(Err(Error::new(
                            ErrorKind::BodyTooLarge,
                            format!("more than {limit} bytes"),
                        ))));
                    }
                }
                if this.inner.is_end_stream() {
                    this.release(cx);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                *this.driver.get_mut() = None;
                Poll::Ready(Some(Err(Error::from_hyper(e, true))))
            }
            Poll::Ready(None) => {
                this.release(cx);
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseBody").finish_non_exhaustive()
    }
}
