//! hyper's (`feature = "hyper"`) and tokio's (`feature = "tokio"`) I/O traits for fibr's
//! streams, so hyper's own connections and tokio-based codecs run over fibr sockets.
//!
//! Both owned streams and shared references implement them (reads and writes take `&self`
//! underneath, as with `std::net::TcpStream`).

use super::registration::{Direction, Registration};
use super::{TcpStream, UnixStream};
use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Reads into possibly uninitialized memory (the kernel only writes what it returns).
///
/// hyper polls its connection's read side several times per message; while the loop has
/// reported nothing since the last read that would block or came up short, the poll waits
/// without a syscall (`Registration::poll_stream_io`).
fn read_uninit(
    reg: &Registration,
    cx: &mut Context<'_>,
    dst: &mut [MaybeUninit<u8>],
) -> Poll<io::Result<usize>> {
    reg.poll_stream_io(cx, Direction::Read, dst.len(), |fd| {
        // SAFETY: `dst` is valid for writes of `dst.len()` bytes; read(2) initializes the
        // bytes it reports and no others are read back.
        let n = unsafe { libc::read(fd, dst.as_mut_ptr().cast(), dst.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    })
}

#[cfg(feature = "hyper")]
macro_rules! hyper_io {
    ($t:ty, $base:ident) => {
        impl hyper::rt::Read for $t {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                mut buf: hyper::rt::ReadBufCursor<'_>,
            ) -> Poll<io::Result<()>> {
                // SAFETY: only bytes read(2) filled are marked filled.
                let n = match read_uninit(&self.reg, cx, unsafe { buf.as_mut() }) {
                    Poll::Ready(Ok(n)) => n,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => return Poll::Pending,
                };
                // SAFETY: read(2) initialized the first `n` unfilled bytes.
                unsafe { buf.advance(n) };
                Poll::Ready(Ok(()))
            }
        }

        impl hyper::rt::Write for $t {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                $base::poll_write(&self, cx, buf)
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                $base::poll_write_vectored(&self, cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                true
            }

            fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(Ok(()))
            }

            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                $base::poll_shutdown(&self, cx)
            }
        }
    };
}

#[cfg(feature = "hyper")]
hyper_io!(TcpStream, TcpStream);
#[cfg(feature = "hyper")]
hyper_io!(&TcpStream, TcpStream);
#[cfg(feature = "hyper")]
hyper_io!(UnixStream, UnixStream);
#[cfg(feature = "hyper")]
hyper_io!(&UnixStream, UnixStream);

#[cfg(feature = "tokio")]
macro_rules! tokio_io {
    ($t:ty, $base:ident) => {
        impl tokio::io::AsyncRead for $t {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                // SAFETY: only bytes read(2) filled are marked initialized and filled.
                let n = match read_uninit(&self.reg, cx, unsafe { buf.unfilled_mut() }) {
                    Poll::Ready(Ok(n)) => n,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => return Poll::Pending,
                };
                // SAFETY: read(2) initialized the first `n` unfilled bytes.
                unsafe { buf.assume_init(n) };
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
        }

        impl tokio::io::AsyncWrite for $t {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                $base::poll_write(&self, cx, buf)
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                $base::poll_write_vectored(&self, cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                true
            }

            fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(Ok(()))
            }

            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                $base::poll_shutdown(&self, cx)
            }
        }
    };
}

#[cfg(feature = "tokio")]
tokio_io!(TcpStream, TcpStream);
#[cfg(feature = "tokio")]
tokio_io!(&TcpStream, TcpStream);
#[cfg(feature = "tokio")]
tokio_io!(UnixStream, UnixStream);
#[cfg(feature = "tokio")]
tokio_io!(&UnixStream, UnixStream);

/// A tokio stream as hyper's I/O (for connections fibr hands to tokio's reactor).
#[cfg(all(feature = "hyper", feature = "tokio"))]
pub(crate) struct TokioIo<T>(T);

#[cfg(all(feature = "hyper", feature = "tokio"))]
impl<T> TokioIo<T> {
    pub(crate) fn new(inner: T) -> TokioIo<T> {
        TokioIo(inner)
    }

    #[cfg(feature = "tunnel")]
    pub(crate) fn into_inner(self) -> T {
        self.0
    }
}

#[cfg(all(feature = "hyper", feature = "tokio"))]
impl<T: tokio::io::AsyncRead + Unpin> hyper::rt::Read for TokioIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        // SAFETY: tokio's `ReadBuf` only initializes bytes of the cursor's unfilled part
        // (never de-initializes any), and `filled` counts the ones it initialized.
        let mut tbuf = tokio::io::ReadBuf::uninit(unsafe { buf.as_mut() });
        match Pin::new(&mut self.0).poll_read(cx, &mut tbuf) {
            Poll::Ready(Ok(())) => {
                let n = tbuf.filled().len();
                // SAFETY: the first `n` unfilled bytes were initialized by the read.
                unsafe { buf.advance(n) };
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

#[cfg(all(feature = "hyper", feature = "tokio"))]
impl<T: tokio::io::AsyncWrite + Unpin> hyper::rt::Write for TokioIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
