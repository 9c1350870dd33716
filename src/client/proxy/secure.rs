//! Proxies spoken to over TLS or HTTP/2: the tunnel they give ([`ProxyTunnel`]) and what
//! opens it ([`Secure`]). Opening one takes the client's TLS driver and its HTTP/2
//! connections, which sit above this module (they import the connector, which imports
//! this), so the client's builder lends them to its connector as a `Secure`
//! (`client/proxied.rs`).

use super::Proxy;
use crate::client::error::Error;
use crate::engine::net::TcpStream;
use crate::proto::h1::client::ResponseLimits;
use std::fmt;
use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Opens tunnels through proxies spoken to over TLS or HTTP/2.
pub(crate) trait Secure: Send + Sync + 'static {
    /// A tunnel to `authority` (`host:port`) through `proxy`; the caller bounds it by the
    /// proxy's handshake timeout.
    fn tunnel<'a>(
        &'a self,
        proxy: &'a Proxy,
        authority: &'a str,
        limits: ResponseLimits,
    ) -> Pin<Box<dyn Future<Output = Result<ProxyTunnel, Error>> + Send + 'a>>;
}

/// A tunnel through a proxy, as the connector gets it.
pub(crate) enum Opened {
    /// SOCKS, or an HTTP/1.1 `CONNECT` over TCP: the connection itself.
    Tcp(TcpStream),
    /// Over TLS or HTTP/2.
    Proxied(ProxyTunnel),
}

/// A tunnel through a proxy spoken to over TLS or HTTP/2 (see
/// [`Proxy`](super::Proxy)): a `CONNECT` stream of an HTTP/2 connection to the proxy (its
/// DATA both ways, paced by the stream's flow control; a reset stream is a
/// `ConnectionReset` error), or a TLS connection to the proxy after its HTTP/1.1 `2xx`.
pub struct ProxyTunnel {
    io: Box<dyn TunnelIo>,
}

trait TunnelIo: hyper::rt::Read + hyper::rt::Write + Send + Unpin {}

impl<T: hyper::rt::Read + hyper::rt::Write + Send + Unpin> TunnelIo for T {}

impl ProxyTunnel {
    pub(crate) fn new<T>(io: T) -> ProxyTunnel
    where
        T: hyper::rt::Read + hyper::rt::Write + Send + Unpin + 'static,
    {
        ProxyTunnel { io: Box::new(io) }
    }
}

impl fmt::Debug for ProxyTunnel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ProxyTunnel")
    }
}

impl hyper::rt::Read for ProxyTunnel {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.io).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for ProxyTunnel {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.io).poll_shutdown(cx)
    }
}
