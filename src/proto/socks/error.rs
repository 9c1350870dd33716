//! What a client's SOCKS handshake reports when it fails.

use super::{reply, reply4};
use std::fmt;
use std::io;

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
    /// A host name, user name or password longer than [`MAX_FIELD`](super::MAX_FIELD)
    /// bytes (refused before anything is sent), or one that cannot be carried (empty, or a
    /// NUL for SOCKS4).
    InvalidField(&'static str),
    /// SOCKS4 carries IPv4 addresses only.
    Ipv6OverSocks4,
}

impl fmt::Display for SocksError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SocksError::Reply(code) => write!(
                f,
                "the SOCKS5 proxy failed the request: {} (reply {code:#04x})",
                reply::text(*code)
            ),
            SocksError::Rejected4(code) => write!(
                f,
                "the SOCKS4 proxy refused the request: {} ({code})",
                reply4::text(*code)
            ),
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
            SocksError::Reply(reply::NOT_ALLOWED) => io::ErrorKind::PermissionDenied,
            SocksError::Reply(reply::NET_UNREACHABLE) => io::ErrorKind::NetworkUnreachable,
            SocksError::Reply(reply::HOST_UNREACHABLE) => io::ErrorKind::HostUnreachable,
            SocksError::Reply(reply::REFUSED) => io::ErrorKind::ConnectionRefused,
            SocksError::Reply(reply::TTL_EXPIRED) => io::ErrorKind::TimedOut,
            SocksError::Reply(reply::CMD_UNSUPPORTED | reply::ATYP_UNSUPPORTED) => {
                io::ErrorKind::Unsupported
            }
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let texts: std::collections::HashSet<_> = (1..=9).map(reply::text).collect();
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
