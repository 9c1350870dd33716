//! The driver of a client-side proxy handshake (SOCKS here, HTTP `CONNECT` in the client):
//! the machine says what to write and how much it may read, the driver does the I/O on a
//! fibr `TcpStream`. A machine never lets the driver read past its last reply, so bytes
//! the target sends first stay in the socket for whoever uses the tunnel.

use super::TcpStream;
use std::io;

/// A client's handshake with a proxy, as a sans-IO machine.
pub(crate) trait Handshake {
    /// Why the proxy's answer ends the handshake.
    type Error;
    /// The client's first message into `out` (the client speaks first).
    fn start(&mut self, out: &mut Vec<u8>);
    /// The most bytes the next read may take: never past the end of the reply being read.
    fn want(&self) -> usize;
    /// Bytes the proxy sent (at most [`want`](Handshake::want); empty: it closed), the next
    /// message to send into `out`. `Ok(true)` once the tunnel is open.
    fn receive(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<bool, Self::Error>;
}

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

/// Runs `machine` on `stream` until the tunnel is open.
pub(crate) async fn drive<H: Handshake>(
    stream: &TcpStream,
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
