//! The header of a datagram through a SOCKS5 UDP relay (RFC 1928 §7): two reserved bytes,
//! a fragment number, the destination (or, back to the client, the source) as a SOCKS5
//! address; the payload follows.

use super::addr::{self, Address};
use super::Target;
use std::net::SocketAddr;

/// A client datagram taken apart: where it goes and what it carries.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Outgoing<'a> {
    pub target: Target,
    pub payload: &'a [u8],
}

/// Why a client datagram is dropped.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Malformed {
    /// Shorter than its header.
    Truncated,
    /// A fragment (FRAG != 0): reassembly is optional, and this relay does not do it.
    Fragment,
    /// An unknown address type or an impossible host name.
    BadAddress,
}

/// Parses the header of a datagram from the client.
pub(crate) fn parse_datagram(d: &[u8]) -> Result<Outgoing<'_>, Malformed> {
    if d.len() < 4 {
        return Err(Malformed::Truncated);
    }
    if d[2] != 0 {
        return Err(Malformed::Fragment);
    }
    match addr::decode(&d[3..]) {
        Address::Complete(target, len) => Ok(Outgoing {
            target,
            payload: &d[3 + len..],
        }),
        Address::Partial => Err(Malformed::Truncated),
        Address::BadName | Address::BadType => Err(Malformed::BadAddress),
    }
}

/// Writes the header of a datagram to the client: it came from `from`.
pub(crate) fn put_header(out: &mut Vec<u8>, from: SocketAddr) {
    out.extend_from_slice(&[0, 0, 0]);
    addr::encode_addr(out, from);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagram_headers_both_ways() {
        let d = [0, 0, 0, 1, 10, 0, 0, 7, 0, 53, b'q', b'?'];
        assert_eq!(
            parse_datagram(&d),
            Ok(Outgoing {
                target: Target::Addr("10.0.0.7:53".parse().unwrap()),
                payload: b"q?",
            })
        );
        let mut named = vec![0, 0, 0, 3, 4];
        named.extend_from_slice(b"host\x01\xbbdata");
        let got = parse_datagram(&named).unwrap();
        assert_eq!(got.target, Target::Name("host".into(), 443));
        assert_eq!(got.payload, b"data");
        // An empty payload is a datagram too.
        assert_eq!(parse_datagram(&d[..10]).unwrap().payload, b"");

        let mut out = Vec::new();
        put_header(&mut out, "[::1]:9".parse().unwrap());
        assert_eq!(out.len(), 3 + 1 + 16 + 2);
        assert_eq!(&out[..4], [0, 0, 0, 4]);
        assert_eq!(
            parse_datagram(&out).unwrap().target,
            Target::Addr("[::1]:9".parse().unwrap())
        );
    }

    #[test]
    fn malformed_datagrams_are_told_apart() {
        for (d, why) in [
            (&[0u8, 0, 0][..], Malformed::Truncated),
            (&[0, 0, 0, 1, 10, 0], Malformed::Truncated),
            (&[0, 0, 0, 3, 9, b'a'], Malformed::Truncated),
            (&[0, 0, 1, 1, 10, 0, 0, 7, 0, 53], Malformed::Fragment),
            (&[0, 0, 0, 9, 10, 0, 0, 7, 0, 53], Malformed::BadAddress),
            (&[0, 0, 0, 3, 1, b' ', 0, 53], Malformed::BadAddress),
        ] {
            assert_eq!(parse_datagram(d), Err(why), "{d:?}");
        }
    }
}
