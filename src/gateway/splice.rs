//! A WebSocket's two ends joined: the client's (an upgraded HTTP/1.1 connection, or an
//! HTTP/2 or HTTP/3 stream) and the upstream's (a connection after its `101`, over TCP or
//! TLS, or a stream of an HTTP/2 or HTTP/3 connection), whichever pair it is. Both are
//! [`End`]s, byte streams with hyper's `Read` and `Write`; one task moves bytes both
//! ways through a bounded buffer per direction, so a slow reader holds the other side.

use super::idle::Idle;
use crate::client::BoxError;
use crate::engine::net::TcpStream;
use crate::http::pipe::StreamPipe;
use bytes::Bytes;
use http_body::Body;
use hyper::rt::{Read, Write};
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// One end of a joined tunnel.
pub(super) trait End: Read + Write + Send + Unpin {
    /// Ends it as a failure where it can say so (a stream is reset), rather than as the
    /// clean end dropping it makes.
    fn abort(&mut self) {}
}

impl End for hyper::upgrade::Upgraded {}

impl End for TcpStream {}

#[cfg(feature = "tls")]
impl End for crate::client::TlsStream<TcpStream> {}

#[cfg(feature = "tunnel")]
impl End for crate::http::tunnel::Tunnel {
    fn abort(&mut self) {
        self.reset();
    }
}

impl<B> End for StreamPipe<B>
where
    B: Body<Data = Bytes> + Send + Unpin,
    B::Error: Into<BoxError>,
{
    fn abort(&mut self) {
        StreamPipe::abort(self);
    }
}

/// Moves bytes both ways until both sides have ended, one fails (then both are aborted),
/// or nothing moves for the idle timeout; `first` goes to the client before anything
/// else. An end of one side is passed on as a shutdown of the other's writing, so each
/// side's close handshake gets through.
pub(super) async fn splice(
    mut client: Box<dyn End>,
    mut upstream: Box<dyn End>,
    first: Vec<u8>,
    buffer: usize,
    mut idle: Option<Idle>,
) {
    let mut up = Pipe::new(buffer, &[]);
    let mut down = Pipe::new(buffer, &first);
    let result = poll_fn(|cx| {
        let moved = up.moved + down.moved;
        let a = up.poll(cx, &mut *client, &mut *upstream);
        let b = down.poll(cx, &mut *upstream, &mut *client);
        match (a, b) {
            (Poll::Ready(Err(e)), _) | (_, Poll::Ready(Err(e))) => Poll::Ready(Err(e)),
            (Poll::Ready(Ok(())), Poll::Ready(Ok(()))) => Poll::Ready(Ok(())),
            _ => {
                let Some(idle) = &mut idle else {
                    return Poll::Pending;
                };
                if up.moved + down.moved != moved {
                    idle.touch();
                }
                if !idle.expired(cx) {
                    return Poll::Pending;
                }
                let quiet = io::Error::new(io::ErrorKind::TimedOut, idle.error());
                Poll::Ready(Err(quiet))
            }
        }
    })
    .await;
    if let Err(e) = result {
        tracing::debug!(error = %e, "upgraded tunnel ended with an error");
        client.abort();
        upstream.abort();
    }
}

/// One direction of the tunnel: what was read and not yet written (at most `buffer`
/// bytes, so a slow reader holds the other side's reads).
struct Pipe {
    buf: Box<[u8]>,
    /// Bytes read so far (the idle timer's progress).
    moved: u64,
    start: usize,
    end: usize,
    /// Written and not flushed yet (TLS may hold the last record back until then).
    unflushed: bool,
    eof: bool,
    done: bool,
}

impl Pipe {
    fn new(buffer: usize, first: &[u8]) -> Pipe {
        let mut buf = vec![0; buffer.max(first.len())].into_boxed_slice();
        buf[..first.len()].copy_from_slice(first);
        Pipe {
            buf,
            moved: 0,
            start: 0,
            end: first.len(),
            unflushed: false,
            eof: false,
            done: false,
        }
    }

    /// Moves bytes from `from` to `to` until it has to wait; ready once `from` has ended,
    /// everything is written and `to` is shut down.
    fn poll(
        &mut self,
        cx: &mut Context<'_>,
        from: &mut dyn End,
        to: &mut dyn End,
    ) -> Poll<io::Result<()>> {
        loop {
            if self.done {
                return Poll::Ready(Ok(()));
            }
            if self.start < self.end {
                let n = ready!(Pin::new(&mut *to).poll_write(cx, &self.buf[self.start..self.end]))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                self.unflushed = true;
                self.start += n;
                if self.start == self.end {
                    (self.start, self.end) = (0, 0);
                }
            } else if self.unflushed {
                ready!(Pin::new(&mut *to).poll_flush(cx))?;
                self.unflushed = false;
            } else if self.eof {
                ready!(Pin::new(&mut *to).poll_shutdown(cx))?;
                self.done = true;
            } else {
                let mut rb = hyper::rt::ReadBuf::new(&mut self.buf);
                ready!(Pin::new(&mut *from).poll_read(cx, rb.unfilled()))?;
                match rb.filled().len() {
                    0 => self.eof = true,
                    n => {
                        self.end = n;
                        self.moved += n as u64;
                    }
                }
            }
        }
    }
}
