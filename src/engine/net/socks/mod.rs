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
//! Each handshake is a sans-IO machine (`v5.rs`, `v4.rs`). A failure is an `io::Error`
//! whose kind follows the proxy's reply (reply 5 is `ConnectionRefused`, a refused
//! password is `PermissionDenied`, ...) and whose inner error is a [`SocksError`] that
//! says exactly what the proxy answered. Neither function has a timeout: wrap the call in
//! `fibr::time::timeout` to bound a proxy that never answers.

mod v4;
mod v5;

pub(crate) use v4::Socks4;
pub(crate) use v5::Socks5;

use super::handshake::{drive, Failed};
use super::{TcpStream, ToSocketAddrs};
use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};

/// Longest host name, user name or password a SOCKS message can carry (one length byte
/// in SOCKS5; the same bound for SOCKS4a's NUL-terminated strings).
pub const MAX_FIELD: usize = 255;

/// Where the tunnel should lead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// An address the client resolved.
    Addr(SocketAddr),
    /// A host name for the proxy to resolve (SOCKS5's domain names, SOCKS4a).
    Name(String, u16),
}

impl From<SocketAddr> for Target {
    fn from(a: SocketAddr) -> Target {
        Target::Addr(a)
    }
}

impl From<(IpAddr, u16)> for Target {
    fn from((ip, port): (IpAddr, u16)) -> Target {
        Target::Addr(SocketAddr::new(ip, port))
    }
}

/// A host and port: an IP literal (brackets allowed) becomes an address, anything else a
/// name for the proxy.
impl From<(&str, u16)> for Target {
    fn from((host, port): (&str, u16)) -> Target {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        match bare.parse::<IpAddr>() {
            Ok(ip) => Target::Addr(SocketAddr::new(ip, port)),
            Err(_) => Target::Name(host.to_string(), port),
        }
    }
}

impl From<(String, u16)> for Target {
    fn from((host, port): (String, u16)) -> Target {
        Target::from((host.as_str(), port))
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Addr(a) => write!(f, "{a}"),
            Target::Name(h, p) => write!(f, "{h}:{p}"),
        }
    }
}

/// Why a SOCKS handshake failed: the proxy's answer, or what could not be asked.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SocksError {
    /// The SOCKS5 proxy answered the request with this reply code (RFC 1928 §6).
    Reply(u8),
    /// The SOCKS4 proxy answered with this code instead of 90 (granted).
    Rejected4(u8),
    /// The SOCKS5 proxy accepts none of the methods offered (0xff); `offered_password`
    /// tells whether username/password was among them.
    NoAcceptableMethod {
        /// Whether username/password (method 2) was offered.
        offered_password: bool,
    },
    /// The SOCKS5 proxy refused the username and password (RFC 1929 status).
    AuthFailed(u8),
    /// The proxy sent something that is not the protocol.
    Malformed(&'static str),
    /// The proxy closed the connection before its reply was complete.
    Truncated,
    /// A host name, user name or password longer than [`MAX_FIELD`] bytes (refused before
    /// anything is sent), or one that cannot be carried (empty, or a NUL for SOCKS4).
    InvalidField(&'static str),
    /// SOCKS4 carries IPv4 addresses only.
    Ipv6OverSocks4,
}

/// What a SOCKS5 reply code means (RFC 1928 §6).
fn reply_text(code: u8) -> &'static str {
    match code {
        0x01 => "general SOCKS server failure",
        0x02 => "connection not allowed by the proxy's rules",
        0x03 => "network unreachable",
        0x04 => "host unreachable",
        0x05 => "connection refused by the target",
        0x06 => "TTL expired",
        0x07 => "command not supported",
        0x08 => "address type not supported",
        _ => "unassigned reply code",
    }
}

impl fmt::Display for SocksError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SocksError::Reply(code) => write!(
                f,
                "the SOCKS5 proxy failed the request: {} (reply {code:#04x})",
                reply_text(*code)
            ),
            SocksError::Rejected4(code) => {
                let why = match code {
                    91 => "request rejected or failed",
                    92 => "rejected: the proxy could not reach the client's identd",
                    93 => "rejected: identd reports another user id",
                    _ => "unknown reply code",
                };
                write!(f, "the SOCKS4 proxy refused the request: {why} ({code})")
            }
            SocksError::NoAcceptableMethod { offered_password } => {
                f.write_str(if *offered_password {
                    "the SOCKS5 proxy accepts neither no authentication nor username/password"
                } else {
                    "the SOCKS5 proxy requires authentication (give a user name and password)"
                })
            }
            SocksError::AuthFailed(status) => write!(
                f,
                "the SOCKS5 proxy refused the user name and password (status {status:#04x})"
            ),
            SocksError::Malformed(what) => {
                write!(f, "the SOCKS proxy's reply is malformed: {what}")
            }
            SocksError::Truncated => {
                f.write_str("the SOCKS proxy closed the connection before its reply was complete")
            }
            SocksError::InvalidField(what) => write!(f, "cannot ask a SOCKS proxy: {what}"),
            SocksError::Ipv6OverSocks4 => f.write_str("SOCKS4 cannot carry an IPv6 target"),
        }
    }
}

impl std::error::Error for SocksError {}

impl SocksError {
    /// The `io::ErrorKind` closest to what the proxy said.
    pub fn io_kind(&self) -> io::ErrorKind {
        match self {
            SocksError::Reply(0x02) => io::ErrorKind::PermissionDenied,
            SocksError::Reply(0x03) => io::ErrorKind::NetworkUnreachable,
            SocksError::Reply(0x04) => io::ErrorKind::HostUnreachable,
            SocksError::Reply(0x05) => io::ErrorKind::ConnectionRefused,
            SocksError::Reply(0x06) => io::ErrorKind::TimedOut,
            SocksError::Reply(0x07 | 0x08) => io::ErrorKind::Unsupported,
            SocksError::Reply(_) | SocksError::Rejected4(_) => io::ErrorKind::Other,
            SocksError::NoAcceptableMethod { .. } | SocksError::AuthFailed(_) => {
                io::ErrorKind::PermissionDenied
            }
            SocksError::Malformed(_) => io::ErrorKind::InvalidData,
            SocksError::Truncated => io::ErrorKind::UnexpectedEof,
            SocksError::InvalidField(_) | SocksError::Ipv6OverSocks4 => io::ErrorKind::InvalidInput,
        }
    }
}

impl From<SocksError> for io::Error {
    fn from(e: SocksError) -> io::Error {
        io::Error::new(e.io_kind(), e)
    }
}

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

/// A host name SOCKS can carry: 1 to [`MAX_FIELD`] bytes.
fn check_name(name: &str) -> Result<(), SocksError> {
    if name.is_empty() {
        return Err(SocksError::InvalidField("the host name is empty"));
    }
    if name.len() > MAX_FIELD {
        return Err(SocksError::InvalidField(
            "the host name is longer than 255 bytes",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::net::handshake::Handshake;
    use proptest::prelude::*;

    /// Feeds `replies` as the driver would (at most `want` bytes a time, `split` bounding
    /// each read): the outcome, and the bytes taken.
    fn drive_bytes<H: Handshake<Error = SocksError>>(
        mut m: H,
        replies: &[u8],
        split: usize,
    ) -> (Result<bool, SocksError>, usize) {
        let mut out = Vec::new();
        m.start(&mut out);
        let mut at = 0;
        loop {
            let want = m.want();
            assert!(want >= 1, "a handshake in progress wants a byte");
            let n = want.min(split).min(replies.len() - at);
            let r = m.receive(&replies[at..at + n], &mut out);
            at += n;
            if !matches!(r, Ok(false)) {
                return (r, at);
            }
        }
    }

    proptest! {
        /// Whatever a proxy sends: no panic, the same outcome however it is split (a
        /// failure may be seen sooner with smaller reads), and a handshake that opens has
        /// taken nothing past its last reply.
        #[test]
        fn any_reply_bytes_any_split(
            replies in proptest::collection::vec(any::<u8>(), 0..64),
            split in 1usize..8,
            password in any::<bool>(),
        ) {
            let t = Target::Name("h.test".into(), 80);
            let auth = password.then_some(("u", "p"));
            let whole = drive_bytes(Socks5::new(&t, auth).unwrap(), &replies, usize::MAX);
            let split5 = drive_bytes(Socks5::new(&t, auth).unwrap(), &replies, split);
            prop_assert_eq!(&whole.0, &split5.0);
            if whole.0 == Ok(true) {
                prop_assert_eq!(whole.1, split5.1);
            }
            let whole = drive_bytes(Socks4::new(&t, "").unwrap(), &replies, usize::MAX);
            let split4 = drive_bytes(Socks4::new(&t, "").unwrap(), &replies, split);
            prop_assert_eq!(&whole.0, &split4.0);
            if whole.0 == Ok(true) {
                prop_assert_eq!((whole.1, split4.1), (8, 8));
            }
        }
    }

    #[test]
    fn targets_from_host_and_port() {
        assert_eq!(
            Target::from(("127.0.0.1", 80)),
            Target::Addr("127.0.0.1:80".parse().unwrap())
        );
        assert_eq!(
            Target::from(("[::1]", 443)),
            Target::Addr("[::1]:443".parse().unwrap())
        );
        assert_eq!(
            Target::from(("example.com", 80)),
            Target::Name("example.com".into(), 80)
        );
    }

    #[test]
    fn every_reply_code_has_its_own_words_and_kind() {
        use io::ErrorKind::*;
        let kinds: Vec<_> = (1..=9).map(|c| SocksError::Reply(c).io_kind()).collect();
        assert_eq!(
            kinds,
            [
                Other,
                PermissionDenied,
                NetworkUnreachable,
                HostUnreachable,
                ConnectionRefused,
                TimedOut,
                Unsupported,
                Unsupported,
                Other
            ]
        );
        let texts: std::collections::HashSet<_> = (1..=9).map(reply_text).collect();
        assert_eq!(texts.len(), 9, "each code is told apart");
        let refused = io::Error::from(SocksError::Reply(5));
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
        assert!(refused.to_string().contains("refused by the target"));
        assert!(refused
            .get_ref()
            .unwrap()
            .downcast_ref::<SocksError>()
            .is_some());
    }
}
