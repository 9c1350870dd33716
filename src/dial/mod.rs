//! Dialing through proxies: the driver of a client-side proxy handshake (SOCKS, in
//! `socks.rs`, public as `fibr::net::socks`; HTTP `CONNECT` in the client). The machine
//! (`proto::socks::client`, the client's `http_connect.rs`) says what to write and how
//! much it may read, the driver does the I/O on a fibr `TcpStream`. A machine never lets
//! the driver read past its last reply, so bytes the target sends first stay in the
//! socket for whoever uses the tunnel.

pub mod socks;

use crate::engine::net::TcpStream;
use crate::proto::tunnel::ClientHandshake;
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

/// Runs `machine` on `stream` until the tunnel is open.
pub(crate) async fn drive<H: ClientHandshake>(
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
