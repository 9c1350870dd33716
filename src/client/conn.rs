//! One HTTP/1.1 client connection on fibr's own codec (`http::h1::client`): the stream, a
//! read buffer and the request being sent ([`Upload`]). The task that sends a request
//! drives the exchange itself, and the response body reads the rest: no connection task,
//! no channel, no wake-up between tasks. (A response that arrives before its request is
//! all sent is the exception: see `duplex`.)
//!
//! Measured against hyper's client connection over the same sockets (`benches/client.rs`):
//! hyper's dispatcher costs a channel send, a oneshot and boxed futures per request,
//! which is most of the gap to a hand-written exchange.

use super::body::{ReqBody, ResponseBody, Wire};
use super::duplex;
use super::error::{Error, ErrorKind};
use super::pool::{Key, Pool};
use super::upload::{Upload, UploadFailure};
use super::Connection;
use crate::http::h1::client::{
    encode_request_head, parse_response_head, BodyFraming, ResponseHead, ResponseLimits,
};
use crate::http::h1::parse::list_elements;
use bytes::{Buf, Bytes, BytesMut};
use http::header::CONNECTION;
use http::{Method, Request, Response, StatusCode, Version};
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::Weak;
use std::task::{ready, Context, Poll};
use std::time::Instant;

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
    pub(super) io: Io,
    rbuf: BytesMut,
    /// The write buffer, lent to each upload and taken back.
    wbuf: Vec<u8>,
    /// The request still being sent.
    upload: Option<Upload>,
    pub(super) upload_failed: Option<UploadFailure>,
    opts: H1Options,
    /// Whether request and response allow another exchange on this connection.
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
        self.rbuf.is_empty() && read_into(&mut self.io, cx, &mut self.rbuf).is_pending()
    }

    /// Moves the upload along; ready once it has ended (sent, or failed).
    pub(super) fn poll_upload(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(up) = self.upload.as_mut() else {
            return Poll::Ready(());
        };
        let r = ready!(up.poll_send(cx, &mut self.io));
        let up = self.upload.take().expect("polled above");
        if let Err(error) = r {
            self.upload_failed = Some(UploadFailure {
                error,
                any_written: up.any_written(),
            });
        }
        self.wbuf = up.into_buffer();
        Poll::Ready(())
    }

    /// Sends `req` (its body framed as `framing`) and waits for its response head. A
    /// request without a streamed body is left as it was (a full body is cloned, not
    /// taken), so it can be sent again after a failure.
    pub async fn exchange(
        mut self: Box<Self>,
        req: &mut Request<ReqBody>,
        framing: BodyFraming,
        max_body: Option<u64>,
    ) -> Result<Response<ResponseBody>, Failure> {
        let method = req.method().clone();
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
        self.upload_failed = None;
        self.upload = Some(Upload::new(out, req.body_mut(), framing));

        let mut interim = 0;
        let head = poll_fn(|cx| self.poll_head(cx, &method, &mut interim)).await?;
        if let (Some(limit), BodyFraming::Length(n)) = (max_body, head.framing) {
            if n > limit {
                return Err(Failure::Sent(Error::new(
                    ErrorKind::BodyTooLarge,
                    format!("content-length {n} over the limit of {limit}"),
                )));
            }
        }
        self.reusable = head.keep_alive && request_keeps_alive(req);
        let mut res = Response::new(ResponseBody::empty());
        *res.status_mut() = head.status;
        *res.version_mut() = head.version;
        *res.headers_mut() = head.headers;
        // The whole body is here already (the usual small response), or it streams.
        let whole = match head.framing {
            BodyFraming::Empty => Some(Bytes::new()),
            BodyFraming::Length(n) if self.rbuf.len() as u64 >= n => {
                Some(take_bytes(&mut self.rbuf, n as usize))
            }
            _ => None,
        };
        let rbuf = std::mem::take(&mut self.rbuf);
        let wire: Box<dyn Wire> = if self.upload.is_some() {
            // The server answered before the request was all sent.
            duplex::finish_upload_in_background(self)
        } else {
            self
        };
        *res.body_mut() = match whole {
            // Handing the connection back before the caller even looks at the body.
            Some(bytes) => {
                wire.finish(rbuf);
                ResponseBody::full(bytes)
            }
            None => ResponseBody::streaming(wire, rbuf, head.framing, max_body),
        };
        Ok(res)
    }

    /// Sends and reads until a final (non-1xx, or 101) response head is parsed. Reading
    /// starts before the request is all sent: a server may answer early (413, say).
    /// `interim` counts the bytes of skipped 1xx heads, which are bounded like one head.
    fn poll_head(
        &mut self,
        cx: &mut Context<'_>,
        method: &Method,
        interim: &mut usize,
    ) -> Poll<Result<ResponseHead, Failure>> {
        loop {
            if !self.rbuf.is_empty() {
                match parse_response_head(&self.rbuf, method, &self.opts.limits) {
                    Ok(Some((head, n))) => {
                        self.rbuf.advance(n);
                        if !head.status.is_informational()
                            || head.status == StatusCode::SWITCHING_PROTOCOLS
                        {
                            return Poll::Ready(Ok(head));
                        }
                        *interim += n;
                        if *interim > self.opts.limits.max_head_bytes {
                            return Poll::Ready(Err(Failure::Sent(Error::new(
                                ErrorKind::Protocol,
                                "interim (1xx) responses without end",
                            ))));
                        }
                        continue;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        return Poll::Ready(Err(Failure::Sent(Error::new(ErrorKind::Protocol, e))))
                    }
                }
            }
            let _ = self.poll_upload(cx);
            let read = read_into(&mut self.io, cx, &mut self.rbuf);
            if let Some(f) = self.upload_failed.take() {
                // Nothing went out, or the request body itself failed: that is the
                // answer. A write error after the request went out may still have a
                // response behind it (the server answered and closed): read it first.
                if !f.any_written {
                    return Poll::Ready(Err(Failure::NotSent(f.error)));
                }
                // The peer went away (EPIPE, ECONNRESET): the read side ends soon after
                // (the answer, then the end of the stream or the reset), and its
                // readiness may lag the write's error, so wait for it rather than fail on
                // a read that is merely pending.
                if f.error.kind() != ErrorKind::ClosedBeforeResponse {
                    return Poll::Ready(Err(Failure::Sent(f.error)));
                }
                self.upload_failed = Some(f);
            }
            match read {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(0)) => {
                    let e = match self.upload_failed.take() {
                        Some(f) => f.error,
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
                Poll::Ready(Err(e)) => {
                    return Poll::Ready(Err(Failure::Sent(Error::from_exchange_io(e))))
                }
            }
        }
    }

    /// Whether request and response allow another exchange on this connection.
    pub(super) fn is_reusable(&self) -> bool {
        self.reusable
    }

    /// Back to the pool if the exchange left the connection clean (request and response
    /// allow it, the request all sent, nothing extra read); else closed.
    pub(super) fn release(mut self: Box<Self>, rbuf: BytesMut) {
        let clean = self.reusable
            && self.upload.is_none()
            && self.upload_failed.is_none()
            && rbuf.is_empty();
        self.reusable = false;
        self.rbuf = rbuf;
        if let (true, Some(pool)) = (clean, self.pool.upgrade()) {
            pool.put(self);
        }
    }
}

impl<Io: Connection> Wire for Conn<Io> {
    fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<Result<usize, Error>> {
        read_into(&mut self.io, cx, buf).map_err(|e| Error::new(ErrorKind::IncompleteBody, e))
    }

    fn finish(self: Box<Self>, rbuf: BytesMut) {
        self.release(rbuf);
    }
}

/// Whether the request lets the connection persist (RFC 9112 §9.3): HTTP/1.1 unless it
/// says `Connection: close`, HTTP/1.0 only if it says `keep-alive`.
fn request_keeps_alive<B>(req: &Request<B>) -> bool {
    let (mut close, mut keep_alive) = (false, false);
    for v in req.headers().get_all(CONNECTION) {
        for token in list_elements(v.as_bytes()) {
            close |= token.eq_ignore_ascii_case(b"close");
            keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
        }
    }
    !close && (req.version() == Version::HTTP_11 || keep_alive)
}

/// Reads what is there into `buf`; `Ok(0)` is the end of the stream.
pub(super) fn read_into<Io: Connection>(
    io: &mut Io,
    cx: &mut Context<'_>,
    buf: &mut BytesMut,
) -> Poll<io::Result<usize>> {
    if buf.capacity() - buf.len() < READ_CHUNK / 2 {
        buf.reserve(READ_CHUNK);
    }
    let mut rb = hyper::rt::ReadBuf::uninit(buf.spare_capacity_mut());
    ready!(hyper::rt::Read::poll_read(Pin::new(io), cx, rb.unfilled()))?;
    let n = rb.filled().len();
    // SAFETY: `ReadBuf` counts as filled only bytes the reader initialized, and they are
    // the first `n` of the spare capacity.
    unsafe { buf.set_len(buf.len() + n) };
    Poll::Ready(Ok(n))
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
