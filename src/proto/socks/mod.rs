//! SOCKS, sans-IO, both roles: SOCKS5 (RFC 1928: CONNECT, BIND, UDP ASSOCIATE) with no
//! authentication or username/password (RFC 1929), and SOCKS4 with 4a's host names.
//!
//! One codec serves the client dialer (`fibr::net::socks`, driven by `crate::dial`) and
//! the proxy server (`crate::proxy`): the target type ([`Target`]), the SOCKS5 address
//! (`addr`, also the UDP relay's header: `udp`), RFC 1929's messages (`auth`), SOCKS4's
//! request and reply (`v4`), the reply codes and the errors a client reports
//! ([`SocksError`]). On it stand the client's machines (`client`) and the server's
//! (`server`).

pub(crate) mod addr;
pub(crate) mod auth;
pub(crate) mod client;
mod error;
#[cfg(feature = "proxy")]
pub(crate) mod server;
#[cfg(feature = "proxy")]
pub(crate) mod udp;
pub(crate) mod v4;

pub use crate::proto::tunnel::Target;
pub use error::SocksError;

/// Longest host name, user name or password a SOCKS message can carry (one length byte
/// in SOCKS5; the same bound for SOCKS4a's NUL-terminated strings).
pub const MAX_FIELD: usize = 255;

/// SOCKS5's VER (RFC 1928).
pub(crate) const VERSION5: u8 = 5;
/// SOCKS4's VN in a request.
pub(crate) const VERSION4: u8 = 4;

// SOCKS5 methods (RFC 1928 §3).
pub(crate) const NO_AUTH: u8 = 0x00;
pub(crate) const USER_PASS: u8 = 0x02;
pub(crate) const NO_ACCEPTABLE: u8 = 0xff;

// Commands, the same numbers in SOCKS5 and SOCKS4 (SOCKS4 has no UDP ASSOCIATE).
pub(crate) const CONNECT: u8 = 0x01;
#[cfg(feature = "proxy")]
pub(crate) const BIND: u8 = 0x02;
#[cfg(feature = "proxy")]
pub(crate) const UDP_ASSOCIATE: u8 = 0x03;

/// SOCKS5 reply codes (RFC 1928 §6).
pub(crate) mod reply {
    pub(crate) const SUCCEEDED: u8 = 0x00;
    pub(crate) const GENERAL: u8 = 0x01;
    pub(crate) const NOT_ALLOWED: u8 = 0x02;
    pub(crate) const NET_UNREACHABLE: u8 = 0x03;
    pub(crate) const HOST_UNREACHABLE: u8 = 0x04;
    pub(crate) const REFUSED: u8 = 0x05;
    pub(crate) const TTL_EXPIRED: u8 = 0x06;
    pub(crate) const CMD_UNSUPPORTED: u8 = 0x07;
    pub(crate) const ATYP_UNSUPPORTED: u8 = 0x08;

    /// What a reply code means.
    pub(crate) fn text(code: u8) -> &'static str {
        match code {
            GENERAL => "general SOCKS server failure",
            NOT_ALLOWED => "connection not allowed by the proxy's rules",
            NET_UNREACHABLE => "network unreachable",
            HOST_UNREACHABLE => "host unreachable",
            REFUSED => "connection refused by the target",
            TTL_EXPIRED => "TTL expired",
            CMD_UNSUPPORTED => "command not supported",
            ATYP_UNSUPPORTED => "address type not supported",
            _ => "unassigned reply code",
        }
    }
}

/// SOCKS4 reply codes.
pub(crate) mod reply4 {
    pub(crate) const GRANTED: u8 = 90;
    /// "Rejected or failed": the one refusal a server without identd gives.
    pub(crate) const REJECTED: u8 = 91;
    const NO_IDENTD: u8 = 92;
    const IDENTD_MISMATCH: u8 = 93;

    /// What a refusal's code means.
    pub(crate) fn text(code: u8) -> &'static str {
        match code {
            REJECTED => "request rejected or failed",
            NO_IDENTD => "rejected: the proxy could not reach the client's identd",
            IDENTD_MISMATCH => "rejected: identd reports another user id",
            _ => "unknown reply code",
        }
    }
}

#[cfg(all(test, feature = "proxy"))]
mod tests;
