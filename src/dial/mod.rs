//! Dialing through proxies: the driver of a client-side proxy handshake (SOCKS, in
//! `socks.rs`, public as `fibr::net::socks`; HTTP `CONNECT` in the client). The machine
//! (`proto::socks::client`, the client's `http_connect.rs`) says what to write and how
//! much it may read, the driver does the I/O on a fibr `TcpStream` (or, for the client's
//! TLS to an HTTPS proxy, on any [`HandshakeIo`]). A machine never lets the driver read
//! past its last reply, so bytes the target sends first stay in the stream for whoever
//! uses the tunnel.

pub mod socks;

use crate::engine::net::TcpStream;
use crate::proto::tunnel::ClientHandshake;
use std::future::Future;
use std::io;

/// How a handshake failed: the stream, or the proxy's answer.
#[derive(Debug)]
pub(crate) enum Failed<E> {
    Io(io::Error),
    Proxy(E),
}

impl<E> From<io::Error> for Failed<E> {
    fn from(e: io::Error) -> Self {
        Failed::Io(e)
    }
}

/// The stream a handshake runs on: what the driver needs of it.
pub(crate) trait HandshakeIo {
    /// Writes all of `data`.
    fn write_all(&mut self, data: &[u8]) -> impl Future<Output = io::Result<()>> + Send;
    /// Reads at most `buf.len()` bytes; 0 at the end.
    fn read(&mut self, buf: &mut [u8]) -> impl Future<Output = io::Result<usize>> + Send;
}

impl HandshakeIo for &TcpStream {
    fn write_all(&mut self, data: &[u8]) -> impl Future<Output = io::Result<()>> + Send {
        TcpStream::write_all(self, data)
    }

    fn read(&mut self, buf: &mut [u8]) -> impl Future<Output = io::Result<usize>> + Send {
        TcpStream::read(self, buf)
    }
}

/// A hyper stream (the client's TLS to a proxy, the gateway's upstreams) as a
/// [`HandshakeIo`].
#[cfg(feature = "client")]
pub(crate) struct HyperIo<'a, S>(pub &'a mut S);

#[cfg(feature = "client")]
impl<S> HandshakeIo for HyperIo<'_, S>
where
    S: hyper::rt::Read + hyper::rt::Write + Unpin + Send,
{
    async fn write_all(&mut self, mut data: &[u8]) -> io::Result<()> {
        use std::pin::Pin;
        while !data.is_empty() {
            let n = std::future::poll_fn(|cx| Pin::new(&mut *self.0).poll_write(cx, data)).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            data = &data[n..];
        }
        std::future::poll_fn(|cx| Pin::new(&mut *self.0).poll_flush(cx)).await
    }

    async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        std::future::poll_fn(|cx| {
            let mut rb = hyper::rt::ReadBuf::new(&mut *buf);
            std::task::ready!(std::pin::Pin::new(&mut *self.0).poll_read(cx, rb.unfilled()))?;
            std::task::Poll::Ready(Ok(rb.filled().len()))
        })
        .await
    }
}

/// Runs `machine` on `stream` until the tunnel is open.
pub(crate) async fn drive<S: HandshakeIo, H: ClientHandshake>(
    mut stream: S,
    mut machine: H,
) -> Result<(), Failed<H::Error>> {
    let mut out = Vec::new();
    machine.start(&mut out);
    let mut buf = [0u8; 512];
    loop {
        if !out.is_empty() {
            stream.write_all(&out).await?;
            out.clear();
        }
        let want = machine.want().clamp(1, buf.len());
        let n = stream.read(&mut buf[..want]).await?;
        let open = machine
            .receive(&buf[..n], &mut out)
            .map_err(Failed::Proxy)?;
        if open {
            return Ok(());
        }
    }
}
