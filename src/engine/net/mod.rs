//! Async sockets on fibr's loops, public as `fibr::net` (see the facade in `lib.rs`, which
//! adds `socks`, dialing through a SOCKS proxy, from `crate::dial`).

#[cfg(any(feature = "hyper", feature = "tokio"))]
mod compat;
#[cfg(all(feature = "hyper", feature = "tokio"))]
pub(crate) use compat::TokioIo;
mod registration;
mod resolve;

use crate::engine::sys::{socket, udp};
use registration::{Direction, Registration};
pub(crate) use resolve::resolve;
pub use resolve::{lookup_host, ToSocketAddrs};
use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::task::{ready, Context, Poll};

/// Tries `f` on each address in turn, returning the first success or the last error.
fn first_ok<T>(
    addrs: Vec<SocketAddr>,
    mut f: impl FnMut(SocketAddr) -> io::Result<T>,
) -> io::Result<T> {
    let mut last = None;
    for a in addrs {
        match f(a) {
            Ok(v) => return Ok(v),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address")))
}

/// The stream half shared by TCP and Unix streams: reads, writes and shutdown.
macro_rules! stream_io {
    ($t:ty) => {
        impl $t {
            /// Polls a read into `buf`; `Ok(0)` means end of stream.
            pub fn poll_read(
                &self,
                cx: &mut Context<'_>,
                buf: &mut [u8],
            ) -> Poll<io::Result<usize>> {
                self.reg
                    .poll_stream_io(cx, Direction::Read, buf.len(), |fd| socket::read(fd, buf))
            }

            /// Polls a write of (part of) `buf`.
            pub fn poll_write(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
                self.poll_write_vectored(cx, &[IoSlice::new(buf)])
            }

            /// Polls a gathered write of (part of) `bufs`.
            pub fn poll_write_vectored(
                &self,
                cx: &mut Context<'_>,
                bufs: &[IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                let len = bufs.iter().map(|b| b.len()).sum();
                self.reg.poll_stream_io(cx, Direction::Write, len, |fd| {
                    socket::send_vectored(fd, bufs)
                })
            }

            /// Shuts down the write half (the peer reads end of stream).
            pub fn poll_shutdown(&self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(socket::shutdown_write(self.reg.fd()))
            }

            /// Reads into `buf`; `Ok(0)` means end of stream.
            pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
                poll_fn(|cx| self.poll_read(cx, buf)).await
            }

            /// Reads exactly `buf.len()` bytes.
            pub async fn read_exact(&self, buf: &mut [u8]) -> io::Result<()> {
                let mut done = 0;
                while done < buf.len() {
                    match self.read(&mut buf[done..]).await? {
                        0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                        n => done += n,
                    }
                }
                Ok(())
            }

            /// Writes (part of) `buf`.
            pub async fn write(&self, buf: &[u8]) -> io::Result<usize> {
                poll_fn(|cx| self.poll_write(cx, buf)).await
            }

            /// Writes all of `buf`.
            pub async fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
                while !buf.is_empty() {
                    match self.write(buf).await? {
                        0 => return Err(io::ErrorKind::WriteZero.into()),
                        n => buf = &buf[n..],
                    }
                }
                Ok(())
            }

            /// Shuts down the write half.
            pub async fn shutdown(&self) -> io::Result<()> {
                poll_fn(|cx| self.poll_shutdown(cx)).await
            }

            /// Waits until the stream is readable.
            pub async fn readable(&self) -> io::Result<()> {
                poll_fn(|cx| self.reg.poll_ready(cx, Direction::Read)).await;
                Ok(())
            }

            /// Waits until the stream is writable.
            pub async fn writable(&self) -> io::Result<()> {
                poll_fn(|cx| self.reg.poll_ready(cx, Direction::Write)).await;
                Ok(())
            }
        }

        impl AsRawFd for $t {
            fn as_raw_fd(&self) -> RawFd {
                self.reg.fd()
            }
        }
    };
}

/// A TCP listener on fibr's loops.
pub struct TcpListener {
    reg: Registration,
}

impl TcpListener {
    /// Binds to `addr` (the first resolved address that binds).
    pub async fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        let addrs = resolve(addr).await?;
        let backlog = crate::engine::runtime::Runtime::current()
            .config
            .listen_backlog;
        let fd = first_ok(addrs, |a| socket::tcp_listener(a, false, backlog))?;
        Ok(TcpListener {
            reg: Registration::new(fd)?,
        })
    }

    /// Adopts a bound std listener (made non-blocking here).
    pub fn from_std(listener: std::net::TcpListener) -> io::Result<TcpListener> {
        listener.set_nonblocking(true)?;
        Ok(TcpListener {
            reg: Registration::new(OwnedFd::from(listener))?,
        })
    }

    /// Accepts the next connection.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// Polls for the next connection.
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        let (fd, peer) = match self.reg.poll_io(cx, Direction::Read, socket::accept) {
            Poll::Ready(Ok(v)) => v,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        if self.reg.runtime().config.tcp_nodelay {
            let _ = socket::set_nodelay(fd.as_raw_fd());
        }
        let peer =
            peer.ok_or_else(|| io::Error::other("accepted a connection without an address"))?;
        Poll::Ready(Registration::new(fd).map(|reg| (TcpStream { reg }, peer)))
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        socket::local_addr(self.reg.fd()).ok_or_else(|| io::Error::other("no local address"))
    }

    pub(crate) fn into_fd(
        self,
    ) -> io::Result<(OwnedFd, std::sync::Arc<crate::engine::runtime::Runtime>)> {
        self.reg.into_fd()
    }
}

impl AsRawFd for TcpListener {
    fn as_raw_fd(&self) -> RawFd {
        self.reg.fd()
    }
}

/// A TCP connection on fibr's loops. Methods take `&self`, so one task can read while
/// another writes.
pub struct TcpStream {
    reg: Registration,
}

impl TcpStream {
    /// Connects to `addr`, trying each resolved address in turn.
    pub async fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        let mut last = None;
        for a in resolve(addr).await? {
            match TcpStream::connect_one(a).await {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap())
    }

    async fn connect_one(addr: SocketAddr) -> io::Result<TcpStream> {
        let stream = TcpStream {
            reg: Registration::connecting(socket::tcp_connect(addr)?)?,
        };
        poll_fn(|cx| stream.reg.poll_ready(cx, Direction::Write)).await;
        if let Some(e) = socket::take_error(stream.reg.fd())? {
            return Err(e);
        }
        if socket::peer_addr(stream.reg.fd()).is_none() {
            return Err(io::ErrorKind::ConnectionRefused.into());
        }
        Ok(stream)
    }

    /// Adopts a connected, non-blocking descriptor (an upgrade handed to hyper).
    #[cfg(all(feature = "hyper", not(feature = "tokio")))]
    pub(crate) fn from_owned_fd(fd: OwnedFd) -> io::Result<TcpStream> {
        Ok(TcpStream {
            reg: Registration::new(fd)?,
        })
    }

    /// The descriptor back from the loops (a WebSocket fibr runs after hyper's `101`).
    #[cfg(all(feature = "hyper", feature = "tunnel", not(feature = "tokio")))]
    pub(crate) fn into_fd(self) -> io::Result<OwnedFd> {
        Ok(self.reg.into_fd()?.0)
    }

    /// Adopts a connected std stream (made non-blocking here).
    pub fn from_std(stream: std::net::TcpStream) -> io::Result<TcpStream> {
        stream.set_nonblocking(true)?;
        Ok(TcpStream {
            reg: Registration::new(OwnedFd::from(stream))?,
        })
    }

    /// The remote address (`NotConnected` once the peer is gone).
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        socket::peer_addr(self.reg.fd()).ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        socket::local_addr(self.reg.fd()).ok_or_else(|| io::Error::other("no local address"))
    }

    /// Sets TCP_NODELAY (on: small writes go out at once instead of waiting for an ACK).
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        // SAFETY: the descriptor stays owned by the registration; the temporary std stream
        // is turned back into a raw fd without closing it.
        let s = unsafe { std::net::TcpStream::from_raw_fd(self.reg.fd()) };
        let r = s.set_nodelay(on);
        let _ = s.into_raw_fd();
        r
    }

    /// Shuts down one or both halves.
    pub fn shutdown_std(&self, how: Shutdown) -> io::Result<()> {
        // SAFETY: as in set_nodelay.
        let s = unsafe { std::net::TcpStream::from_raw_fd(self.reg.fd()) };
        let r = s.shutdown(how);
        let _ = s.into_raw_fd();
        r
    }
}

stream_io!(TcpStream);

/// A Unix stream listener on fibr's loops.
pub struct UnixListener {
    reg: Registration,
}

impl UnixListener {
    /// Binds to `path` (which must not exist).
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixListener> {
        let backlog = crate::engine::runtime::Runtime::current()
            .config
            .listen_backlog;
        let fd = socket::unix_listener(path.as_ref(), backlog)?;
        Ok(UnixListener {
            reg: Registration::new(fd)?,
        })
    }

    /// Adopts a bound std listener.
    pub fn from_std(listener: std::os::unix::net::UnixListener) -> io::Result<UnixListener> {
        listener.set_nonblocking(true)?;
        Ok(UnixListener {
            reg: Registration::new(OwnedFd::from(listener))?,
        })
    }

    pub(crate) fn into_fd(
        self,
    ) -> io::Result<(OwnedFd, std::sync::Arc<crate::engine::runtime::Runtime>)> {
        self.reg.into_fd()
    }

    /// Accepts the next connection.
    pub async fn accept(&self) -> io::Result<UnixStream> {
        poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// Polls for the next connection.
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<UnixStream>> {
        match self.reg.poll_io(cx, Direction::Read, socket::accept) {
            Poll::Ready(Ok((fd, _))) => {
                Poll::Ready(Registration::new(fd).map(|reg| UnixStream { reg }))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// A Unix stream connection on fibr's loops.
pub struct UnixStream {
    reg: Registration,
}

impl UnixStream {
    /// Connects to the socket at `path`.
    pub async fn connect(path: impl AsRef<Path>) -> io::Result<UnixStream> {
        let stream = UnixStream {
            reg: Registration::connecting(socket::unix_connect(path.as_ref())?)?,
        };
        poll_fn(|cx| stream.reg.poll_ready(cx, Direction::Write)).await;
        if let Some(e) = socket::take_error(stream.reg.fd())? {
            return Err(e);
        }
        Ok(stream)
    }

    /// Adopts a connected, non-blocking descriptor (an upgrade handed to hyper).
    #[cfg(all(feature = "hyper", not(feature = "tokio")))]
    pub(crate) fn from_owned_fd(fd: OwnedFd) -> io::Result<UnixStream> {
        Ok(UnixStream {
            reg: Registration::new(fd)?,
        })
    }

    /// The descriptor back from the loops (a WebSocket fibr runs after hyper's `101`).
    #[cfg(all(feature = "hyper", feature = "tunnel", not(feature = "tokio")))]
    pub(crate) fn into_fd(self) -> io::Result<OwnedFd> {
        Ok(self.reg.into_fd()?.0)
    }

    /// Adopts a connected std stream.
    pub fn from_std(stream: std::os::unix::net::UnixStream) -> io::Result<UnixStream> {
        stream.set_nonblocking(true)?;
        Ok(UnixStream {
            reg: Registration::new(OwnedFd::from(stream))?,
        })
    }
}

stream_io!(UnixStream);

/// A UDP socket on fibr's loops.
pub struct UdpSocket {
    reg: Registration,
}

impl UdpSocket {
    /// Binds to `addr`.
    pub async fn bind(addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        let fd = first_ok(resolve(addr).await?, socket::udp_socket)?;
        Ok(UdpSocket {
            reg: Registration::new(fd)?,
        })
    }

    /// Adopts a bound std socket.
    pub fn from_std(sock: std::net::UdpSocket) -> io::Result<UdpSocket> {
        sock.set_nonblocking(true)?;
        Ok(UdpSocket {
            reg: Registration::new(OwnedFd::from(sock))?,
        })
    }

    /// Sets the default peer for `send`/`recv` and filters other senders.
    pub async fn connect(&self, addr: impl ToSocketAddrs) -> io::Result<()> {
        let addr = resolve(addr).await?[0];
        // SAFETY: borrowed for the call and handed back without closing.
        let s = unsafe { std::net::UdpSocket::from_raw_fd(self.reg.fd()) };
        let r = s.connect(addr);
        let _ = s.into_raw_fd();
        r
    }

    /// Sends one datagram to `target` (the first address it resolves to).
    pub async fn send_to(&self, buf: &[u8], target: impl ToSocketAddrs) -> io::Result<usize> {
        let to = resolve(target).await?[0];
        poll_fn(|cx| {
            self.reg
                .poll_io(cx, Direction::Write, |fd| udp::send_to(fd, buf, Some(to)))
        })
        .await
    }

    /// Receives one datagram into `buf` (truncated if longer), with its sender.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        poll_fn(|cx| self.poll_recv_from(cx, buf)).await
    }

    /// One datagram and its sender, or `Pending` with `cx` woken when one arrives (for
    /// drivers that poll: HTTP/3's client connection).
    pub(crate) fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddr)>> {
        let (n, from) = ready!(self
            .reg
            .poll_io(cx, Direction::Read, |fd| udp::recv_from(fd, buf)))?;
        Poll::Ready(Ok((
            n,
            from.ok_or_else(|| io::Error::other("datagram without a sender address"))?,
        )))
    }

    /// Sends to `to` now, or fails (`WouldBlock` when the socket's buffer is full).
    #[cfg(all(feature = "client", feature = "http3"))]
    pub(crate) fn try_send_to(&self, buf: &[u8], to: SocketAddr) -> io::Result<usize> {
        udp::send_to(self.reg.fd(), buf, Some(to))
    }

    /// Sends to the connected peer.
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        poll_fn(|cx| {
            self.reg
                .poll_io(cx, Direction::Write, |fd| udp::send_to(fd, buf, None))
        })
        .await
    }

    /// Receives from the connected peer.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        poll_fn(|cx| {
            self.reg
                .poll_io(cx, Direction::Read, |fd| socket::read(fd, buf))
        })
        .await
    }

    /// The local address (the port the OS chose, after binding port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        socket::local_addr(self.reg.fd()).ok_or_else(|| io::Error::other("no local address"))
    }
}

impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.reg.fd()
    }
}
