//! A request on its way out: the encoded head, then the body frame by frame (chunked or
//! Content-Length framed), written to the stream and flushed.

use super::body::ReqBody;
use super::connect::Connection;
use super::error::{Error, ErrorKind};
use crate::http::pump::{poll_next, Next};
use crate::proto::h1::body::BodyEncoder;
use crate::proto::h1::framing::BodyFraming;
use bytes::Bytes;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// A request body at most this large is copied behind its head: one write for both.
const INLINE_BODY: usize = 16 * 1024;

/// Why an upload stopped early.
pub(crate) struct UploadFailure {
    pub error: Error,
    /// Whether any byte of the request reached the socket.
    pub any_written: bool,
}

/// Writes the concatenation of `parts` from byte `*written` on, gathered into one write
/// where the stream allows; `written` counts what went out.
fn poll_write_parts<Io: Connection>(
    io: &mut Io,
    cx: &mut Context<'_>,
    parts: &[&[u8]; 3],
    written: &mut usize,
) -> Poll<io::Result<()>> {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    while *written < total {
        let mut skip = *written;
        let mut slices = [IoSlice::new(&[]); 3];
        let mut k = 0;
        for p in parts {
            if skip >= p.len() {
                skip -= p.len();
                continue;
            }
            slices[k] = IoSlice::new(&p[skip..]);
            skip = 0;
            k += 1;
        }
        match hyper::rt::Write::poll_write_vectored(Pin::new(&mut *io), cx, &slices[..k]) {
            Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
            Poll::Ready(Ok(n)) => *written += n,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
    }
    Poll::Ready(Ok(()))
}

/// A request on its way out: the head, then the body frame by frame.
pub(crate) struct Upload {
    /// A streamed body (taken from the request); `Empty` once there is nothing to take.
    body: ReqBody,
    encoder: BodyEncoder,
    /// The frame being written: its head part (the request head, a chunk-size line), its
    /// data, its tail (a chunk's CRLF, the last chunk), and how much of them went out.
    prefix: Vec<u8>,
    data: Bytes,
    suffix: Vec<u8>,
    written: usize,
    /// Whether any byte reached the socket.
    any_written: bool,
    /// The body has ended and its end is encoded.
    finished: bool,
}

impl Upload {
    /// `head` is the encoded request head; a full body is cloned (a small one copied
    /// behind the head: one write for both), a streamed one taken from `body`.
    pub(crate) fn new(mut head: Vec<u8>, body: &mut ReqBody, framing: BodyFraming) -> Upload {
        let mut up = Upload {
            body: ReqBody::Empty,
            encoder: BodyEncoder::new(framing),
            prefix: Vec::new(),
            data: Bytes::new(),
            suffix: Vec::new(),
            written: 0,
            any_written: false,
            finished: true,
        };
        match body {
            ReqBody::Empty | ReqBody::Full(None) => {}
            ReqBody::Full(Some(b)) if b.len() <= INLINE_BODY => head.extend_from_slice(b),
            ReqBody::Full(Some(b)) => up.data = b.clone(),
            // A stream framed as empty has nothing to send: it is not polled.
            ReqBody::Boxed(_) if matches!(framing, BodyFraming::Empty | BodyFraming::Length(0)) => {
            }
            ReqBody::Boxed(_) => {
                up.body = std::mem::replace(body, ReqBody::Empty);
                up.finished = false;
            }
        }
        up.prefix = head;
        up
    }

    /// Whether any byte of the request reached the socket.
    pub(crate) fn any_written(&self) -> bool {
        self.any_written
    }

    /// The write buffer back, for the next request.
    pub(crate) fn into_buffer(self) -> Vec<u8> {
        self.prefix
    }

    /// Sends until the request is all out, or the body or the socket makes us wait.
    pub(crate) fn poll_send<Io: Connection>(
        &mut self,
        cx: &mut Context<'_>,
        io: &mut Io,
    ) -> Poll<Result<(), Error>> {
        loop {
            let parts = [&self.prefix[..], &self.data[..], &self.suffix[..]];
            let before = self.written;
            let r = poll_write_parts(io, cx, &parts, &mut self.written);
            self.any_written |= self.written > before;
            // A buffering stream (TLS, say) sends only when flushed; fibr's own flush at once.
            let r = match r {
                Poll::Ready(Ok(())) => Pin::new(&mut *io).poll_flush(cx),
                r => r,
            };
            if let Err(e) = ready!(r) {
                return Poll::Ready(Err(Error::from_exchange_io(e)));
            }
            if self.finished {
                return Poll::Ready(Ok(()));
            }
            self.prefix.clear();
            self.suffix.clear();
            self.data = Bytes::new();
            self.written = 0;
            match self.poll_next(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Polls the body for its next frame and encodes it.
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        let body_error = |e| Poll::Ready(Err(Error::new(ErrorKind::RequestBody, e)));
        let data = match ready!(poll_next(Pin::new(&mut self.body), cx)) {
            Next::Data(data, _) => data,
            Next::End => {
                if let Err(e) = self.encoder.finish(None, &mut self.suffix) {
                    return body_error(e);
                }
                self.finished = true;
                return Poll::Ready(Ok(()));
            }
            // Trailers end the body; only chunked framing can carry them.
            Next::Trailers(trailers) => {
                if self.encoder.framing() == BodyFraming::Chunked {
                    if let Err(e) = self.encoder.finish(Some(&trailers), &mut self.suffix) {
                        return body_error(e);
                    }
                    self.finished = true;
                }
                return Poll::Ready(Ok(()));
            }
            Next::Failed(e) => return Poll::Ready(Err(Error::new(ErrorKind::RequestBody, e))),
        };
        if data.is_empty() {
            return Poll::Ready(Ok(()));
        }
        if self.encoder.framing() == BodyFraming::Empty {
            return Poll::Ready(Err(Error::new(
                ErrorKind::RequestBody,
                "the body reported no data, then sent some",
            )));
        }
        if let Err(e) = self.encoder.begin_data(data.len(), &mut self.prefix) {
            return body_error(e);
        }
        self.encoder.end_data(&mut self.suffix);
        // The declared length is reached: the body is complete (whether or not its stream
        // has said so yet).
        self.finished = self.encoder.is_complete();
        self.data = data;
        Poll::Ready(Ok(()))
    }
}
