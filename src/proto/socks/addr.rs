//! The SOCKS5 address (RFC 1928 §4/§5): ATYP, the address (4 bytes, 16 bytes, or a length
//! byte and a name), the port. Requests, replies and the UDP relay's header all carry it.

use super::{SocksError, Target, MAX_FIELD};
use std::net::{IpAddr, SocketAddr};
#[cfg(feature = "proxy")]
use std::net::{Ipv4Addr, Ipv6Addr};

pub(crate) const ATYP_V4: u8 = 0x01;
pub(crate) const ATYP_NAME: u8 = 0x03;
pub(crate) const ATYP_V6: u8 = 0x04;

/// How long the address at the start of some bytes is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Len {
    /// This many bytes, ATYP and port included.
    Known(usize),
    /// Its type (or a name's length byte) is not in yet.
    Partial,
    /// An unknown address type.
    BadType,
}

/// The length of the address `b` starts with, known from its first byte or two.
pub(crate) fn len(b: &[u8]) -> Len {
    match b.first() {
        None => Len::Partial,
        Some(&ATYP_V4) => Len::Known(1 + 4 + 2),
        Some(&ATYP_V6) => Len::Known(1 + 16 + 2),
        Some(&ATYP_NAME) => b
            .get(1)
            .map_or(Len::Partial, |&n| Len::Known(2 + usize::from(n) + 2)),
        Some(_) => Len::BadType,
    }
}

#[cfg(feature = "proxy")]
/// An address taken from the start of some bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Address {
    /// The address and the bytes it took.
    Complete(Target, usize),
    Partial,
    /// A name that cannot be a host name.
    BadName,
    /// An unknown address type.
    BadType,
}

#[cfg(feature = "proxy")]
/// Decodes the address that `b` starts with.
pub(crate) fn decode(b: &[u8]) -> Address {
    let n = match len(b) {
        Len::Known(n) => n,
        Len::Partial => return Address::Partial,
        Len::BadType => return Address::BadType,
    };
    let Some(a) = b.get(..n) else {
        return Address::Partial;
    };
    let port = u16::from_be_bytes([a[n - 2], a[n - 1]]);
    let ip: IpAddr = match a[0] {
        ATYP_V4 => Ipv4Addr::from(<[u8; 4]>::try_from(&a[1..5]).expect("4 bytes")).into(),
        ATYP_V6 => Ipv6Addr::from(<[u8; 16]>::try_from(&a[1..17]).expect("16 bytes")).into(),
        _ => {
            return match host_name(&a[2..n - 2]) {
                Some(name) => Address::Complete(Target::Name(name, port), n),
                None => Address::BadName,
            }
        }
    };
    Address::Complete(Target::Addr(SocketAddr::new(ip, port)), n)
}

/// Encodes `addr` (ATYP, address, port).
pub(crate) fn encode_addr(out: &mut Vec<u8>, addr: SocketAddr) {
    match addr.ip() {
        IpAddr::V4(ip) => {
            out.push(ATYP_V4);
            out.extend_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            out.push(ATYP_V6);
            out.extend_from_slice(&ip.octets());
        }
    }
    out.extend_from_slice(&addr.port().to_be_bytes());
}

/// Encodes `target`; a name must be one SOCKS can carry (refused before a byte is
/// written).
pub(crate) fn encode(out: &mut Vec<u8>, target: &Target) -> Result<(), SocksError> {
    match target {
        Target::Addr(a) => encode_addr(out, *a),
        Target::Name(name, port) => {
            check_name(name)?;
            out.extend_from_slice(&[ATYP_NAME, name.len() as u8]);
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(&port.to_be_bytes());
        }
    }
    Ok(())
}

#[cfg(feature = "proxy")]
/// The unspecified IPv4 address, port 0: what a failure reply names.
pub(crate) const UNSPECIFIED: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);

/// A host name a client can send: 1 to [`MAX_FIELD`] bytes.
pub(crate) fn check_name(name: &str) -> Result<(), SocksError> {
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

#[cfg(feature = "proxy")]
/// A host name a server takes, if it can be one: not empty, printable ASCII, no spaces.
pub(crate) fn host_name(b: &[u8]) -> Option<String> {
    let ok = !b.is_empty() && b.iter().all(|c| c.is_ascii_graphic());
    ok.then(|| String::from_utf8_lossy(b).into_owned())
}

#[cfg(all(test, feature = "proxy"))]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_and_splits() {
        for t in [
            Target::Addr("10.1.2.3:443".parse().unwrap()),
            Target::Addr("[2001:db8::1]:8080".parse().unwrap()),
            Target::Name("example.com".into(), 80),
            Target::Name("a".repeat(MAX_FIELD), 1),
        ] {
            let mut b = Vec::new();
            encode(&mut b, &t).unwrap();
            assert_eq!(len(&b), Len::Known(b.len()));
            b.extend_from_slice(b"tail");
            let n = b.len() - 4;
            assert_eq!(decode(&b), Address::Complete(t.clone(), n));
            // Every prefix short of the whole address waits.
            for cut in 0..n {
                assert_eq!(decode(&b[..cut]), Address::Partial, "{t} cut at {cut}");
            }
        }
    }

    #[test]
    fn encodings_on_the_wire() {
        let mut b = Vec::new();
        encode_addr(&mut b, "10.1.2.3:443".parse().unwrap());
        assert_eq!(b, [1, 10, 1, 2, 3, 1, 187]);
        b.clear();
        encode(&mut b, &Target::Name("ab".into(), 80)).unwrap();
        assert_eq!(b, [3, 2, b'a', b'b', 0, 80]);
        b.clear();
        encode_addr(&mut b, "[::1]:9".parse().unwrap());
        assert_eq!((b[0], b.len()), (ATYP_V6, 19));
    }

    #[test]
    fn bad_types_names_and_fields() {
        assert_eq!(len(&[9]), Len::BadType);
        assert_eq!(decode(&[0, 1, 2, 3, 4, 5, 6]), Address::BadType);
        assert_eq!(decode(&[3, 0, 0, 1]), Address::BadName);
        assert_eq!(decode(&[3, 2, b'a', b' ', 0, 1]), Address::BadName);
        let mut b = Vec::new();
        for bad in [String::new(), "a".repeat(MAX_FIELD + 1)] {
            let r = encode(&mut b, &Target::Name(bad, 1));
            assert!(matches!(r, Err(SocksError::InvalidField(_))));
        }
        assert!(b.is_empty(), "nothing written for a refused name");
    }
}
