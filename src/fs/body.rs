//! The response body of [`super::ServeDir`]: cached bytes, or a file read on demand (sent
//! with sendfile(2) by fibr's HTTP/1 server when it can find it: see `SharedFile`).

use crate::http::file::SharedFileBody;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A [`super::ServeDir`] response's body.
#[derive(Debug)]
pub struct Body(Inner);

#[derive(Debug)]
enum Inner {
    Bytes(Option<Bytes>),
    File(SharedFileBody),
}

impl Body {
    pub(crate) fn bytes(b: Bytes) -> Body {
        Body(Inner::Bytes((!b.is_empty()).then_some(b)))
    }

    pub(crate) fn empty() -> Body {
        Body(Inner::Bytes(None))
    }

    pub(crate) fn file(f: SharedFileBody) -> Body {
        Body(Inner::File(f))
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match &mut self.0 {
            Inner::Bytes(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Inner::File(f) => Pin::new(f).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.0, Inner::Bytes(None))
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            Inner::Bytes(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Inner::File(f) => f.size_hint(),
        }
    }
}
