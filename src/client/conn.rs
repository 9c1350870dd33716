//! One HTTP/1.1 client connection on fibr's own codec (`http::h1::client`): a read
//! buffer, the request being sent (an [`Upload`]) and the stream. The task that sends a
//! request drives the exchange itself, and the response body reads the rest: no
//! connection task, no channel, no wake-up between tasks. Whoever reads also moves the
//! upload along, so a request body keeps streaming while its response streams back.
//!
//! Measured against hyper's client connection over the same sockets (`benches/client.rs`):
//! hyper's dispatcher costs a channel send, a oneshot and boxed futures per request,
//! which is most of the gap to a hand-written exchange.

use super::body::{ReqBody, ResponseBody, Wire};
use super::error::{is_disconnect, Error, ErrorKind};
use super::pool::{Key, Pool};
use super::Connection;
use crate::http::h1::client::{
    encode_request_head, parse_response_head, RequestBodyFraming, ResponseBodyFraming,
    ResponseHead, ResponseLimits,
};
use crate::http::h1::encode::{encode_chunk_header, encode_last_chunk};
use bytes::{Buf, Bytes, BytesMut};
use http::header::CONNECTION;
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Weak;
use std::task::{Context, Poll};
use std::time::Instant;

/// A request body at most this large is copied behind its head: one write for both.
const INLINE_BODY: usize = 16 * 1024;
/// Read at least this much room at a time.
const READ_CHUNK: usize = 8 * 1024;

/// The HTTP/1 settings of a client.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct H1Options {
    pub limits: ResponseLimits,
    pub title_case_headers: bool,
}

/// How an exchange failed.
pub(crate) enum Failure {
    /// Nothing reached the server: the request may be sent again as it is.
    NotSent(Error),
    /// The request was (perhaps partly) sent.
    Sent(Error),
}

/// One connection, idle in its pool or carrying one exchange.
pub(crate) struct Conn<Io> {
    io: Io,
    rbuf: BytesMut,
    /// The write buffer, lent to each upload and taken back.
    wbuf: Vec<u8>,
    /// The request still being sent.
    upload: Option<Upload>,
    /// How the last upload failed, and whether any of it had been written.
    upload_failed: Option<(Error, bool)>,
    opts: H1Options,
    /// Whether the response allows another request on this connection.
    reusable: bool,
    pub key: Key,
    pub pool: Weak<Pool<Io>>,
    pub idle_since: Instant,
}

impl<Io: Connection> Conn<Io> {
    pub fn new(io: Io, opts: H1Options, key: Key, pool: Weak<Pool<Io>>) -> Conn<Io> {
        Conn {
            io,
            rbuf: BytesMut::new(),
            wbuf: Vec::new(),
            upload: None,
            upload_failed: None,
            opts,
            reusable: false,
            key,
            pool,
            idle_since: Instant::now(),
        }
    }

    /// Whether an idle connection can take a request: the server has neither closed it
    /// nor sent anything unasked. (fibr's sockets answer this from their readiness,
    /// without a syscall, while nothing arrived.)
    pub fn is_idle_alive(&mut self, cx: &mut Context<'_>) -> bool {
        self.rbuf.is_empty() && self.poll_fill(cx).is_pending()
    }

    /// Moves the upload along, then reads what is there into the read buffer; `Ok(0)`
    /// is the end of the stream.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if let Some(up) = self.upload.as_mut() {
            match up.poll_send(cx, &mut self.io) {
                Poll::Pending => {}
                Poll::Ready(r) => {
                    let up = self.upload.take().expect("polled above");
                    if let Err(e) = r {
                        self.upload_failed = Some((e, up.any_written));
                    }
                    self.wbuf = up.into_buffer();
                }
            }
        }
        if self.rbuf.capacity() - self.rbuf.len() < READ_CHUNK / 2 {
            self.rbuf.reserve(READ_CHUNK);
        }
        let mut buf = hyper::rt::ReadBuf::uninit(self.rbuf.spare_capacity_mut());
        match hyper::rt::Read::poll_read(Pin::new(&mut self.io), cx, buf.unfilled()) {
            Poll::Ready(Ok(())) => {
                let n = buf.filled().len();
                // SAFETY: `ReadBuf` counts as filled only bytes the reader initialized,
                // and they are the first `n` of the spare capacity.
                unsafe { self.rbuf.set_len(self.rbuf.len() + n) };
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Sends `req` and waits for its response head; the request body goes on streaming
    /// while the response is read. A request without a streamed body is left as it was
    /// (a full body is cloned, not taken), so it can be sent again after a failure.
    pub async fn exchange(
        mut self: Box<Self>,
        req: &mut Request<ReqBody>,
        max_body: Option<u64>,
    ) -> Result<Response<ResponseBody>, Failure> {
        let method = req.method().clone();
        let framing =
            RequestBodyFraming::choose(&method, req.headers(), req.body().size_hint().exact());
        let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
        let mut out = std::mem::take(&mut self.wbuf);
        out.clear();
        encode_request_head(
            &method,
            target,
            req.version(),
            req.headers(),
            framing,
            self.opts.title_case_headers,
            &mut out,
        );
        let asks_close = req
            .headers()
            .get_all(CONNECTION)
            .iter()
            .any(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
        self.upload_failed = None;
        self.upload = Some(Upload::new(out, req.body_mut(), framing));

        let head = poll_fn(|cx| self.poll_head(cx, &method)).await?;
        if let (Some(limit), ResponseBodyFraming::Length(n)) = (max_body, head.framing) {
            if n > limit {
                return Err(Failure::Sent(Error::new(
                    ErrorKind::BodyTooLarge,
                    format!("content-length {n} over the limit of {limit}"),
                )));
            }
        }
        self.reusable = head.keep_alive && !asks_close;
        let mut res = Response::new(ResponseBody::empty());
        *res.status_mut() = head.status;
        *res.version_mut() = head.version;
        *res.headers_mut() = head.headers;
        *res.body_mut() = match head.framing {
            ResponseBodyFraming::Empty => {
                self.release();
                ResponseBody::empty()
            }
            // The whole body is here already (the usual small response): the connection
            // goes back to the pool before the caller even looks at the body.
            ResponseBodyFraming::Length(n) if self.rbuf.len() as u64 >= n => {
                let body = take_bytes(&mut self.rbuf, n as usize);
                self.release();
                ResponseBody::full(body)
            }
            framing => ResponseBody::streaming(self, framing, max_body),
        };
        Ok(res)
    }

    /// Sends and reads until a final (non-1xx, or 101) response head is parsed. Reading
    /// starts before the request is all sent: a server may answer early (413, say).
    fn poll_head(
        &mut self,
        cx: &mut Context<'_>,
        method: &Method,
    ) -> Poll<Result<ResponseHead, Failure>> {
        loop {
            if !self.rbuf.is_empty() {
                match parse_response_head(&self.rbuf, method, &self.opts.limits) {
                    Ok(Some((head, n))) => {
                        self.rbuf.advance(n);
                        if head.status.is_informational()
                            && head.status != StatusCode::SWITCHING_PROTOCOLS
                        {
                            continue;
                        }
                        return Poll::Ready(Ok(head));
                    }
                    Ok(None) => {}
                    Err(e) => {
                        return Poll::Ready(Err(Failure::Sent(Error::new(ErrorKind::Protocol, e))))
                    }
                }
            }
            let read = self.poll_fill(cx);
            // A failed upload ends the wait, unless its answer is already here.
            if let Some((e, any_written)) = self.upload_failed.take() {
                if read.is_pending() || e.kind() == ErrorKind::RequestBody {
                    return Poll::Ready(Err(if any_written {
                        Failure::Sent(e)
                    } else {
                        Failure::NotSent(e)
                    }));
                }
                self.upload_failed = Some((e, any_written));
            }
            match read {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(0)) => {
                    let e = match self.upload_failed.take() {
                        Some((e, _)) => e,
                        None => Error::new(
                            ErrorKind::ClosedBeforeResponse,
                            if self.rbuf.is_empty() {
                                "the server closed the connection without answering"
                            } else {
                                "the server closed the connection within the response head"
                            },
                        ),
                    };
                    return Poll::Ready(Err(Failure::Sent(e)));
                }
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(Failure::Sent(closed(e)))),
            }
        }
    }

    /// Back to the pool if the exchange left the connection clean (response allows it,
    /// request all sent, nothing extra read); else closed.
    fn release(mut self: Box<Self>) {
        let clean = self.reusable
            && self.upload.is_none()
            && self.upload_failed.is_none()
            && self.rbuf.is_empty();
        self.reusable = false;
        if let (true, Some(pool)) = (clean, self.pool.upgrade()) {
            pool.put(self);
        }
    }
}

impl<Io: Connection> Wire for Conn<Io> {
    fn buffered(&mut self) -> &mut BytesMut {
        &mut self.rbuf
    }

    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        Conn::poll_fill(self, cx)
    }

    fn finish(self: Box<Self>) {
        self.release();
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

/// An I/O failure during an exchange: the peer went away, or something else.
fn closed(e: io::Error) -> Error {
    let kind = if is_disconnect(&e) {
        ErrorKind::ClosedBeforeResponse
    } else {
        ErrorKind::Other
    };
    Error::new(kind, e)
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
struct Upload {
    /// A streamed body (taken from the request); `Empty` once there is nothing to take.
    body: ReqBody,
    framing: RequestBodyFraming,
    /// The frame being written: its head part (the request head, a chunk-size line), its
    /// data, its tail (a chunk's CRLF, the last chunk), and how much of them went out.
    prefix: Vec<u8>,
    data: Bytes,
    suffix: Vec<u8>,
    written: usize,
    /// Whether any byte reached the socket.
    any_written: bool,
    /// Body bytes taken so far (checked against a Content-Length).
    taken: u64,
    /// The body has ended and its end is encoded.
    finished: bool,
}

impl Upload {
    /// `head` is the encoded request head; a full body is cloned (a small one copied
    /// behind the head: one write for both), a streamed one taken from `body`.
    fn new(mut head: Vec<u8>, body: &mut ReqBody, framing: RequestBodyFraming) -> Upload {
        let mut up = Upload {
            body: ReqBody::Empty,
            framing,
            prefix: Vec::new(),
            data: Bytes::new(),
            suffix: Vec::new(),
            written: 0,
            any_written: false,
            taken: 0,
            finished: true,
        };
        match body {
            ReqBody::Empty | ReqBody::Full(None) => {}
            ReqBody::Full(Some(b)) if b.len() <= INLINE_BODY => head.extend_from_slice(b),
            ReqBody::Full(Some(b)) => up.data = b.clone(),
            ReqBody::Boxed(_) => {
                up.body = std::mem::replace(body, ReqBody::Empty);
                up.finished = false;
            }
        }
        up.prefix = head;
        up
    }

    /// The write buffer back, for the next request.
    fn into_buffer(self) -> Vec<u8> {
        self.prefix
    }

    /// Sends until the request is all out, or the body or the socket makes us wait.
    fn poll_send<Io: Connection>(
        &mut self,
        cx: &mut Context<'_>,
        io: &mut Io,
    ) -> Poll<Result<(), Error>> {
        loop {
            let parts = [&self.prefix[..], &self.data[..], &self.suffix[..]];
            let before = self.written;
            let r = poll_write_parts(io, cx, &parts, &mut self.written);
            self.any_written |= self.written > before;
            match r {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(closed(e))),
                Poll::Pending => return Poll::Pending,
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
        let frame = match Pin::new(&mut self.body).poll_frame(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(None) => None,
            Poll::Ready(Some(Ok(f))) => Some(f),
            Poll::Ready(Some(Err(e))) => {
                return Poll::Ready(Err(Error::new(ErrorKind::RequestBody, e)))
            }
        };
        let Some(frame) = frame else {
            match self.framing {
                RequestBodyFraming::Chunked => encode_last_chunk(None, &mut self.suffix),
                RequestBodyFraming::Length(n) if self.taken != n => {
                    return Poll::Ready(Err(Error::new(
                        ErrorKind::RequestBody,
                        format!(
                            "the body ended after {} of its content-length {n} bytes",
                            self.taken
                        ),
                    )))
                }
                _ => {}
            }
            self.finished = true;
            return Poll::Ready(Ok(()));
        };
        let data = match frame.into_data() {
            Ok(data) => data,
            Err(frame) => {
                // Trailers end the body; only chunked framing can carry them.
                if let Ok(trailers) = frame.into_trailers() {
                    if self.framing == RequestBodyFraming::Chunked {
                        encode_last_chunk(Some(&trailers), &mut self.suffix);
                        self.finished = true;
                    }
                }
                return Poll::Ready(Ok(()));
            }
        };
        if data.is_empty() {
            return Poll::Ready(Ok(()));
        }
        self.taken += data.len() as u64;
        match self.framing {
            RequestBodyFraming::Chunked => {
                encode_chunk_header(data.len(), &mut self.prefix);
                self.suffix.extend_from_slice(b"\r\n");
            }
            RequestBodyFraming::Length(n) if self.taken > n => {
                return Poll::Ready(Err(Error::new(
                    ErrorKind::RequestBody,
                    format!("the body is longer than its content-length {n}"),
                )))
            }
            RequestBodyFraming::Length(_) => {}
            RequestBodyFraming::None => {
                return Poll::Ready(Err(Error::new(
                    ErrorKind::RequestBody,
                    "the body reported no data, then sent some",
                )))
            }
        }
        self.data = data;
        Poll::Ready(Ok(()))
    }
}
