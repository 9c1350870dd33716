//! CONNECT tunnels in a handler (feature `tunnel`): a CONNECT over HTTP/1.1, HTTP/2 (RFC
//! 9113 §8.5), HTTP/3 (RFC 9114 §4.4), or an extended CONNECT (RFC 8441, RFC 9220),
//! answered `200`, becomes a [`Tunnel`]: a bidirectional byte stream paced by the
//! stream's flow control (a handler that does not read stops the peer at its window;
//! writes wait while the peer's window is closed).
//!
//! ```no_run
//! use fibr::http::tunnel::{self, UpgradeBody};
//! use http::{Request, Response, StatusCode};
//! # async fn handle(mut req: Request<fibr::body::Incoming>) -> Response<UpgradeBody> {
//! match tunnel::accept(&mut req) {
//!     Ok(connect) => connect.on_open(|mut tunnel| async move {
//!         let mut buf = [0u8; 4096];
//!         while let Ok(n @ 1..) = tunnel.read(&mut buf).await {
//!             if tunnel.write_all(&buf[..n]).await.is_err() {
//!                 break;
//!             }
//!         }
//!         let _ = tunnel.shutdown().await;
//!     }),
//!     Err(_) => {
//!         let mut res = Response::new(UpgradeBody::default());
//!         *res.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
//!         res
//!     }
//! }
//! # }
//! ```
//!
//! Over HTTP/2 and HTTP/3 the tunnel is the request's stream: its request body the input
//! (moved into a request extension by the driver, so the service's own body is empty)
//! and the `200`'s body, an [`UpgradeBody`], the output. Over HTTP/1.1 the connection
//! switches once the `200` is written (`switch.rs`), and the tunnel takes it.

mod conn;

#[cfg(feature = "hyper")]
use crate::http::pipe::put_cursor;
use crate::http::pipe::{copy_into, read_chunks, StreamIo, StreamPipe};
pub use crate::http::pipe::{TunnelAborted, UpgradeBody};
use crate::http::switch::{OnSwitch, Switched, Tunnel as Input};
use crate::http::{Incoming, Protocol};
use bytes::Bytes;
use conn::ConnPipe;
use http::uri::Authority;
use http::{Method, Request, Response};
use std::fmt;
use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The default bound on a tunnel's queued output (and, over HTTP/1.1, its unread input).
pub const DEFAULT_BUFFER: usize = 64 * 1024;

/// Why a request cannot become a tunnel.
#[derive(Debug)]
pub enum Rejection {
    /// Not a CONNECT.
    NotConnect,
    /// A CONNECT that did not come through a fibr server able to hand its stream or
    /// connection over (or whose tunnel was already taken).
    NotTunnelable,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rejection::NotConnect => "not a CONNECT request",
            Rejection::NotTunnelable => "this CONNECT's connection cannot become a tunnel",
        })
    }
}

impl std::error::Error for Rejection {}

/// A CONNECT that can become a tunnel: answer it with [`Connect::on_open`].
pub struct Connect {
    via: Via,
    authority: Option<Authority>,
    protocol: Option<Protocol>,
    buffer: usize,
}

enum Via {
    /// HTTP/2 or HTTP/3: the stream, its request body the input.
    Stream(Incoming),
    /// HTTP/1.1: the connection, switched once the `2xx` is written.
    Switch(OnSwitch),
}

/// Takes the tunnel out of a CONNECT request (its extensions), if it has one.
pub fn accept<B>(req: &mut Request<B>) -> Result<Connect, Rejection> {
    if req.method() != Method::CONNECT {
        return Err(Rejection::NotConnect);
    }
    let ext = req.extensions_mut();
    let via = match ext.remove::<Input>().and_then(|t| t.take()) {
        Some(input) => Via::Stream(input),
        None => Via::Switch(ext.remove::<OnSwitch>().ok_or(Rejection::NotTunnelable)?),
    };
    Ok(Connect {
        via,
        authority: req.uri().authority().cloned(),
        protocol: req.extensions().get::<Protocol>().cloned(),
        buffer: DEFAULT_BUFFER,
    })
}

impl Connect {
    /// The target the client named (`:authority`, or the request target over HTTP/1.1).
    pub fn authority(&self) -> Option<&Authority> {
        self.authority.as_ref()
    }

    /// An extended CONNECT's `:protocol`.
    pub fn protocol(&self) -> Option<&Protocol> {
        self.protocol.as_ref()
    }

    /// The bound on queued output (and, over HTTP/1.1, unread input); past it writes wait.
    pub fn buffer(mut self, bytes: usize) -> Self {
        self.buffer = bytes.max(1);
        self
    }

    /// The `200` to return; once it is written, `callback` runs with the tunnel on a task
    /// of its own. If the answer is never written (the connection ended), it never runs.
    pub fn on_open<F, Fut>(self, callback: F) -> Response<UpgradeBody>
    where
        F: FnOnce(Tunnel) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let buffer = self.buffer;
        let body = match self.via {
            Via::Stream(input) => {
                let output = StreamIo::new(buffer);
                let tunnel = Tunnel {
                    io: Io::Stream(StreamPipe::new(input, output.clone())),
                };
                let start = move || drop(crate::engine::runtime::spawn(callback(tunnel)));
                UpgradeBody::stream(output, Some(Box::new(start)))
            }
            Via::Switch(switch) => {
                switch.claim(Box::new(move |sw: Switched| {
                    let tunnel = Tunnel::switched(sw, buffer);
                    drop(crate::engine::runtime::spawn(callback(tunnel)));
                }));
                UpgradeBody::default()
            }
        };
        Response::new(body)
    }
}

/// A CONNECT's byte stream, both ways. Reads end (`Ok(0)`) when the peer half-closes;
/// [`Tunnel::shutdown`] half-closes ours; [`Tunnel::abort`] resets the stream (HTTP/2's
/// CONNECT_ERROR, HTTP/3's H3_CONNECT_ERROR; over HTTP/1.1 the connection closes).
/// Dropped, the tunnel ends its output as `shutdown` does.
pub struct Tunnel {
    io: Io,
}

enum Io {
    Stream(StreamPipe<Incoming>),
    Conn {
        pipe: ConnPipe,
        /// Read and not yet handed out.
        pending: Bytes,
    },
}

impl Tunnel {
    /// A connection that switched (after a CONNECT's `2xx` or a `101`) as a tunnel, with
    /// `buffer` the bound on its queued output and unread input.
    pub(crate) fn switched(sw: Switched, buffer: usize) -> Tunnel {
        Tunnel {
            io: Io::Conn {
                pipe: ConnPipe::start(sw.conn, sw.read, buffer),
                pending: Bytes::new(),
            },
        }
    }

    /// Reads into `buf`; `Ok(0)` is the end of the peer's side.
    pub fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        match &mut self.io {
            Io::Stream(pipe) => pipe.poll_read(cx, buf),
            Io::Conn { pipe, pending } => {
                read_chunks(pending, || pipe.poll_read(cx), |data| copy_into(buf, data))
            }
        }
    }

    /// Writes all of `data` once there is room (the output under its bound).
    pub fn poll_write(&mut self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        match &self.io {
            Io::Stream(pipe) => pipe.poll_write(cx, data),
            Io::Conn { pipe, .. } => pipe.poll_write(cx, data).map_ok(|()| data.len()),
        }
    }

    /// Reads into `buf`; `Ok(0)` is the end of the peer's side.
    pub async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        poll_fn(|cx| self.poll_read(cx, buf)).await
    }

    /// Writes all of `data`, waiting while the output is over its bound.
    pub async fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        poll_fn(|cx| self.poll_write(cx, data)).await.map(drop)
    }

    /// Ends our side (END_STREAM; over HTTP/1.1 a TCP half-close) once what is queued is
    /// sent. Reading goes on.
    pub fn poll_shutdown(&mut self) -> Poll<io::Result<()>> {
        match &self.io {
            Io::Stream(pipe) => pipe.shutdown(),
            Io::Conn { pipe, .. } => pipe.shutdown(),
        }
        Poll::Ready(Ok(()))
    }

    /// Ends our side; see [`Tunnel::poll_shutdown`].
    pub async fn shutdown(&mut self) -> io::Result<()> {
        poll_fn(|_| self.poll_shutdown()).await
    }

    /// Resets the tunnel: what is queued is dropped and the peer sees an error.
    pub fn abort(self) {
        self.reset();
    }

    /// [`Tunnel::abort`] for one who holds it by reference.
    pub(crate) fn reset(&self) {
        match &self.io {
            Io::Stream(pipe) => pipe.abort(),
            Io::Conn { pipe, .. } => pipe.abort(),
        }
    }
}

/// With feature `hyper`, a tunnel is a hyper stream (what hyper's connections and
/// fibr's client run over).
#[cfg(feature = "hyper")]
impl hyper::rt::Read for Tunnel {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let put = |data: &[u8]| put_cursor(&mut buf, data);
        match &mut this.io {
            Io::Stream(pipe) => pipe.poll_put(cx, put),
            Io::Conn { pipe, pending } => read_chunks(pending, || pipe.poll_read(cx), put),
        }
        .map_ok(drop)
    }
}

#[cfg(feature = "tokio")]
impl tokio::io::AsyncRead for Tunnel {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let n = std::task::ready!(this.poll_read(cx, buf.initialize_unfilled()))?;
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

/// hyper's and tokio's `Write`: the same three calls (a write is queued whole; there is
/// nothing to flush).
macro_rules! write_impl {
    ($feature:literal, $trait:path) => {
        #[cfg(feature = $feature)]
        impl $trait for Tunnel {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                self.get_mut().poll_write(cx, buf)
            }

            fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(Ok(()))
            }

            fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                self.get_mut().poll_shutdown()
            }
        }
    };
}

write_impl!("hyper", hyper::rt::Write);
write_impl!("tokio", tokio::io::AsyncWrite);
