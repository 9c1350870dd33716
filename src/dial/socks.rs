//! Dialing through a SOCKS proxy: SOCKS5 (RFC 1928, with RFC 1929 username/password) and
//! SOCKS4/4a. The answer is the same [`TcpStream`] a direct [`TcpStream::connect`]
//! gives, with the tunnel open and nothing of the target's read from it.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use fibr::net::socks;
//! // The proxy resolves the name (socks5h in curl's terms).
//! let s = socks::connect("127.0.0.1:1080", ("example.com", 80), None).await?;
//! s.write_all(b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n").await?;
//! # Ok(()) }
//! ```
//!
//! Each handshake is a sans-IO machine, on the SOCKS codec fibr's proxy server shares. A
//! failure is an `io::Error` whose kind follows the proxy's reply (reply 5 is
//! `ConnectionRefused`, a refused password is `PermissionDenied`, ...) and whose inner
//! error is a [`SocksError`] that says exactly what the proxy answered. Neither function
//! has a timeout: wrap the call in `fibr::time::timeout` to bound a proxy that never
//! answers.

use super::{drive, Failed};
use crate::engine::net::{TcpStream, ToSocketAddrs};
use crate::proto::socks::client::{Socks4, Socks5};
pub use crate::proto::socks::{SocksError, Target, MAX_FIELD};
use std::io;

fn into_io(f: Failed<SocksError>) -> io::Error {
    match f {
        Failed::Io(e) => e,
        Failed::Proxy(e) => e.into(),
    }
}

/// Connects to the SOCKS5 proxy at `proxy` and through it to `target`, with `auth` (user
/// name, password) if the proxy asks for it. A [`Target::Name`] is resolved by the proxy.
pub async fn connect(
    proxy: impl ToSocketAddrs,
    target: impl Into<Target>,
    auth: Option<(&str, &str)>,
) -> io::Result<TcpStream> {
    let machine = Socks5::new(&target.into(), auth)?;
    let stream = TcpStream::connect(proxy).await?;
    drive(&stream, machine).await.map_err(into_io)?;
    Ok(stream)
}

/// Connects to the SOCKS4 proxy at `proxy` and through it to `target` with `user_id`
/// (often empty). A [`Target::Name`] is sent for the proxy to resolve (SOCKS4a); an
/// address must be IPv4.
pub async fn connect_v4(
    proxy: impl ToSocketAddrs,
    target: impl Into<Target>,
    user_id: &str,
) -> io::Result<TcpStream> {
    let machine = Socks4::new(&target.into(), user_id)?;
    let stream = TcpStream::connect(proxy).await?;
    drive(&stream, machine).await.map_err(into_io)?;
    Ok(stream)
}
