//! One HTTP/1.1 client connection: the stream, a read buffer and the request being sent
//! ([`Upload`]), driving the sans-IO `h1::client_conn::ClientConn`, which reads the
//! response heads and decides whether the connection may be reused. The task that sends a
//! request drives the exchange itself, and the response body reads the rest: no
//! connection task, no channel, no wake-up between tasks. (A response that arrives before
//! its request is all sent is the exception: see `duplex`.) The connection knows nothing
//! of its pool: `pool::Pooled` carries it there and back.
//!
//! Measured against hyper's client connection over the same sockets (`benches/client.rs`):
//! hyper's dispatcher costs a channel send, a oneshot and boxed futures per request,
//! which is most of the gap to a hand-written exchange.

use super::body::{take_bytes, ReqBody};
use super::connect::Connection;
use super::error::{Error, ErrorKind, Failure};
use super::upload::{Upload, UploadFailure};
use crate::proto::h1::client::{ResponseHead, ResponseLimits};
use crate::proto::h1::client_conn::{ClientConn, HeadError};
use crate::proto::h1::framing::BodyFraming;
use bytes::{Buf, Bytes, BytesMut};
use http::header::{HeaderValue, PROXY_AUTHORIZATION};
use http::Request;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// Read at least this much room at a time.
const READ_CHUNK: usize = 8 * 1024;

/// The HTTP/1 settings of a client.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct H1Options {
    pub limits: ResponseLimits,
    pub title_case_headers: bool,
}

/// A response head, and its whole body when it came with the head (the usual small
/// response).
pub(crate) struct Answer {
    pub head: ResponseHead,
    pub whole: Option<Bytes>,
}

/// One HTTP/1.1 client connection: the stream, a read buffer, the request being sent and
/// the protocol state (`h1::client_conn`), which decides what the bytes are and whether
/// the connection may be reused.
pub(crate) struct Http1Conn<Io> {
    io: Io,
    rbuf: BytesMut,
    /// The write buffer, lent to each upload and taken back.
    wbuf: Vec<u8>,
    /// The request still being sent.
    upload: Option<Upload>,
    upload_failed: Option<UploadFailure>,
    h1: ClientConn,
    /// Set when the stream leads to a forwarding HTTP proxy.
    proxy: Option<ProxyForm>,
}

/// Requests to a forwarding HTTP proxy: the absolute form's `scheme://authority` and the
/// `Proxy-Authorization` they carry.
pub(crate) struct ProxyForm {
    pub origin: String,
    pub authorization: Option<HeaderValue>,
}

impl<Io: Connection> Http1Conn<Io> {
    pub fn new(io: Io, opts: H1Options, proxy: Option<ProxyForm>) -> Http1Conn<Io> {
        Http1Conn {
            proxy,
            io,
            rbuf: BytesMut::new(),
            wbuf: Vec::new(),
            upload: None,
            upload_failed: None,
            h1: ClientConn::new(opts.limits, opts.title_case_headers),
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

    /// Whether the request is still being sent.
    pub(super) fn is_uploading(&self) -> bool {
        self.upload.is_some()
    }

    /// Sends `req` (its body framed as `framing`) and waits for its response head. A
    /// request without a streamed body is left as it was (a full body is cloned, not
    /// taken), so it can be sent again after a failure.
    pub async fn exchange(
        &mut self,
        req: &mut Request<ReqBody>,
        framing: BodyFraming,
        max_body: Option<u64>,
    ) -> Result<Answer, Failure> {
        // A forwarding proxy takes the target's absolute form, and its credentials.
        if let Some(auth) = self.proxy.as_ref().and_then(|p| p.authorization.clone()) {
            req.headers_mut().entry(PROXY_AUTHORIZATION).or_insert(auth);
        }
        let absolute;
        let mut target = req.uri().path_and_query().map_or("/", |p| p.as_str());
        if let Some(proxy) = &self.proxy {
            absolute = format!("{}{target}", proxy.origin);
            target = &absolute;
        }
        let mut out = std::mem::take(&mut self.wbuf);
        out.clear();
        self.h1.start(
            req.method(),
            target,
            req.version(),
            req.headers(),
            framing,
            &mut out,
        );
        self.upload_failed = None;
        self.upload = Some(Upload::new(out, req.body_mut(), framing));

        let head = poll_fn(|cx| self.poll_head(cx))
            .await
            .inspect_err(|_| self.h1.fail())?;
        if let (Some(limit), BodyFraming::Length(n)) = (max_body, head.framing) {
            if n > limit {
                self.h1.fail();
                return Err(Failure::Sent(Error::new(
                    ErrorKind::BodyTooLarge,
                    format!("content-length {n} over the limit of {limit}"),
                )));
            }
        }
        let whole = match head.framing {
            BodyFraming::Empty => Some(Bytes::new()),
            BodyFraming::Length(n) if self.rbuf.len() as u64 >= n => {
                // `n` fits: the buffer holds that many bytes.
                Some(take_bytes(&mut self.rbuf, n as usize))
            }
            _ => None,
        };
        Ok(Answer { head, whole })
    }

    /// Sends and reads until a final (non-1xx, or 101) response head is parsed. Reading
    /// starts before the request is all sent: a server may answer early (413, say).
    fn poll_head(&mut self, cx: &mut Context<'_>) -> Poll<Result<ResponseHead, Failure>> {
        loop {
            if !self.rbuf.is_empty() {
                match self.h1.read_head(&self.rbuf) {
                    Ok((n, head)) => {
                        self.rbuf.advance(n);
                        if let Some(head) = head {
                            return Poll::Ready(Ok(head));
                        }
                    }
                    Err(e) => return Poll::Ready(Err(Failure::Sent(protocol_error(e)))),
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

    /// What was read past the response head, for the response body.
    pub(super) fn take_read_buffer(&mut self) -> BytesMut {
        std::mem::take(&mut self.rbuf)
    }

    /// Reads response body bytes into `buf`. A failure of the request body, still being
    /// sent by another task, is reported here too.
    pub(super) fn read_body(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<Result<usize, Error>> {
        if self
            .upload_failed
            .as_ref()
            .is_some_and(|f| f.error.kind() == ErrorKind::RequestBody)
        {
            let f = self.upload_failed.take().expect("checked above");
            return Poll::Ready(Err(f.error));
        }
        read_into(&mut self.io, cx, buf).map_err(|e| Error::new(ErrorKind::IncompleteBody, e))
    }

    /// Whether request and response allow another exchange on this connection.
    pub(super) fn keeps_alive(&self) -> bool {
        self.h1.keeps_alive()
    }

    /// The response has ended (`rbuf`: what was read past it): whether the connection is
    /// fit for another exchange (request and response allow it, the request all sent,
    /// nothing extra read).
    pub(super) fn finish(&mut self, rbuf: BytesMut) -> bool {
        let all_sent = self.upload.is_none() && self.upload_failed.is_none();
        let reusable = self.h1.finish(all_sent, rbuf.len());
        self.rbuf = rbuf;
        reusable
    }
}

fn protocol_error(e: HeadError) -> Error {
    Error::new(ErrorKind::Protocol, e)
}

/// Reads what is there into `buf`; `Ok(0)` is the end of the stream.
fn read_into<Io: Connection>(
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
