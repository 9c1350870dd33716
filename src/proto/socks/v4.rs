//! SOCKS4's messages, and SOCKS4a's host names: the request VN 4, CD, DSTPORT, DSTIP,
//! USERID, NUL (4a: DSTIP 0.0.0.x with x nonzero, and the host name and a NUL after the
//! user id); the 8-byte reply VN 0, CD, DSTPORT, DSTIP.

use super::addr::check_name;
use super::{SocksError, Target, MAX_FIELD, VERSION4};
#[cfg(feature = "proxy")]
use std::net::Ipv4Addr;
use std::net::SocketAddr;

pub(crate) const REPLY_LEN: usize = 8;
/// A reply's VN.
pub(crate) const REPLY_VERSION: u8 = 0;
/// SOCKS4a's DSTIP: a host name follows the user id.
const NAME_FOLLOWS: [u8; 4] = [0, 0, 0, 1];

/// A request for `target`, if SOCKS4 (an IPv4 address) or 4a (a name) can carry it.
pub(crate) fn encode_request(
    command: u8,
    target: &Target,
    user_id: &str,
) -> Result<Vec<u8>, SocksError> {
    let no_nul = |s: &str, what| {
        if s.as_bytes().contains(&0) {
            Err(SocksError::InvalidField(what))
        } else {
            Ok(())
        }
    };
    if user_id.len() > MAX_FIELD {
        return Err(SocksError::InvalidField(
            "the SOCKS4 user id is longer than 255 bytes",
        ));
    }
    no_nul(user_id, "the SOCKS4 user id holds a NUL")?;
    let mut request = vec![VERSION4, command];
    let name = match target {
        Target::Addr(SocketAddr::V4(a)) => {
            request.extend_from_slice(&a.port().to_be_bytes());
            request.extend_from_slice(&a.ip().octets());
            None
        }
        Target::Addr(SocketAddr::V6(_)) => return Err(SocksError::Ipv6OverSocks4),
        Target::Name(name, port) => {
            check_name(name)?;
            no_nul(name, "the host name holds a NUL")?;
            request.extend_from_slice(&port.to_be_bytes());
            request.extend_from_slice(&NAME_FOLLOWS);
            Some(name)
        }
    };
    request.extend_from_slice(user_id.as_bytes());
    request.push(0);
    if let Some(name) = name {
        request.extend_from_slice(name.as_bytes());
        request.push(0);
    }
    Ok(request)
}

#[cfg(feature = "proxy")]
/// A reply: `code`, and the address it names (zeros without one, or for IPv6).
pub(crate) fn encode_reply(out: &mut Vec<u8>, code: u8, bound: Option<SocketAddr>) {
    let (ip, port) = match bound {
        Some(SocketAddr::V4(a)) => (a.ip().octets(), a.port()),
        _ => ([0; 4], 0),
    };
    out.extend_from_slice(&[REPLY_VERSION, code]);
    out.extend_from_slice(&port.to_be_bytes());
    out.extend_from_slice(&ip);
}

#[cfg(feature = "proxy")]
/// Longest user id or 4a host name a server reads, NUL included.
pub(crate) const MAX_STRING: usize = MAX_FIELD + 1;

#[cfg(feature = "proxy")]
/// A request taken from the start of some bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// The command, the target, and the bytes they took.
    Complete(u8, Target, usize),
    Partial,
    /// VN is not 4: not SOCKS4 (answered by closing).
    BadVersion,
    /// Anything else a server refuses with a reply: an unknown command, a user id or
    /// name past [`MAX_STRING`], a name that cannot be a host name.
    Refused,
}

#[cfg(feature = "proxy")]
/// Decodes the request `b` starts with (the user id is not kept).
pub(crate) fn decode_request(b: &[u8]) -> Request {
    if b.len() < 8 {
        return Request::Partial;
    }
    if b[0] != VERSION4 {
        return Request::BadVersion;
    }
    let command = b[1];
    if command != super::CONNECT && command != super::BIND {
        return Request::Refused;
    }
    let port = u16::from_be_bytes([b[2], b[3]]);
    let ip = [b[4], b[5], b[6], b[7]];
    let Some(mut end) = string_end(b, 8) else {
        return pending_or_refused(b, 8);
    };
    // 0.0.0.x (x != 0) is SOCKS4a's sign that a host name follows the user id.
    let target = if ip[..3] == [0, 0, 0] && ip[3] != 0 {
        let Some(name_end) = string_end(b, end) else {
            return pending_or_refused(b, end);
        };
        let Some(name) = super::addr::host_name(&b[end..name_end - 1]) else {
            return Request::Refused;
        };
        end = name_end;
        Target::Name(name, port)
    } else {
        Target::Addr(SocketAddr::new(Ipv4Addr::from(ip).into(), port))
    };
    Request::Complete(command, target, end)
}

#[cfg(feature = "proxy")]
/// The end (past its NUL) of the string at `from`, if its NUL is within bounds.
fn string_end(b: &[u8], from: usize) -> Option<usize> {
    let nul = b[from..].iter().take(MAX_STRING).position(|&c| c == 0)?;
    Some(from + nul + 1)
}

#[cfg(feature = "proxy")]
/// No NUL yet in the string at `from`: wait, or refuse one too long.
fn pending_or_refused(b: &[u8], from: usize) -> Request {
    if b.len() - from >= MAX_STRING {
        return Request::Refused;
    }
    Request::Partial
}
