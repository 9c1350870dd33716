//! The client side of a SOCKS4 CONNECT, and SOCKS4a's host names (the address
//! 0.0.0.x with x nonzero, the name after the user id): one request, one 8-byte reply.

use super::{check_name, SocksError, Target, MAX_FIELD};
use crate::engine::net::handshake::Handshake;
use std::net::SocketAddr;

const REPLY_LEN: usize = 8;
const GRANTED: u8 = 90;

/// A SOCKS4 (or 4a) client handshake for one target.
pub(crate) struct Socks4 {
    request: Vec<u8>,
    input: Vec<u8>,
}

impl Socks4 {
    pub fn new(target: &Target, user_id: &str) -> Result<Socks4, SocksError> {
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
        let mut request = vec![4, 1];
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
                request.extend_from_slice(&[0, 0, 0, 1]);
                Some(name)
            }
        };
        request.extend_from_slice(user_id.as_bytes());
        request.push(0);
        if let Some(name) = name {
            request.extend_from_slice(name.as_bytes());
            request.push(0);
        }
        Ok(Socks4 {
            request,
            input: Vec::new(),
        })
    }
}

impl Handshake for Socks4 {
    type Error = SocksError;

    fn start(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.request);
    }

    fn want(&self) -> usize {
        REPLY_LEN - self.input.len()
    }

    fn receive(&mut self, input: &[u8], _out: &mut Vec<u8>) -> Result<bool, SocksError> {
        if input.is_empty() {
            return Err(SocksError::Truncated);
        }
        self.input.extend_from_slice(input);
        if self.input[0] != 0 {
            return Err(SocksError::Malformed(
                "the reply is not SOCKS4 (VN is not 0)",
            ));
        }
        if self.input.len() < REPLY_LEN {
            return Ok(false);
        }
        match self.input[1] {
            GRANTED => Ok(true),
            code => Err(SocksError::Rejected4(code)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(m: &mut Socks4, bytes: &[u8]) -> Result<bool, SocksError> {
        let mut out = Vec::new();
        m.receive(bytes, &mut out)
    }

    #[test]
    fn socks4_by_address_and_4a_by_name() {
        let mut m = Socks4::new(&Target::Addr("10.0.0.2:80".parse().unwrap()), "me").unwrap();
        let mut out = Vec::new();
        m.start(&mut out);
        assert_eq!(out, [4, 1, 0, 80, 10, 0, 0, 2, b'm', b'e', 0]);
        assert_eq!(m.want(), 8);
        assert_eq!(reply(&mut m, &[0, 90, 0, 0]), Ok(false));
        assert_eq!(m.want(), 4);
        assert_eq!(reply(&mut m, &[0, 0, 0, 0]), Ok(true));

        let mut m = Socks4::new(&Target::Name("h.example".into(), 443), "").unwrap();
        let mut out = Vec::new();
        m.start(&mut out);
        let mut want = vec![4, 1, 1, 187, 0, 0, 0, 1, 0];
        want.extend_from_slice(b"h.example\0");
        assert_eq!(out, want);
    }

    #[test]
    fn rejections_truncation_and_garbage() {
        let t = Target::Name("h".into(), 1);
        for code in [91, 92, 93, 0] {
            let mut m = Socks4::new(&t, "").unwrap();
            assert_eq!(
                reply(&mut m, &[0, code, 0, 0, 0, 0, 0, 0]),
                Err(SocksError::Rejected4(code))
            );
        }
        let mut m = Socks4::new(&t, "").unwrap();
        assert_eq!(reply(&mut m, &[0, 90, 0]), Ok(false));
        assert_eq!(reply(&mut m, &[]), Err(SocksError::Truncated));
        let mut m = Socks4::new(&t, "").unwrap();
        assert!(matches!(
            reply(&mut m, b"HTTP/1.0"),
            Err(SocksError::Malformed(_))
        ));
    }

    #[test]
    fn what_socks4_cannot_carry_is_refused_before_sending() {
        let v6 = Target::Addr("[::1]:80".parse().unwrap());
        assert_eq!(Socks4::new(&v6, "").err(), Some(SocksError::Ipv6OverSocks4));
        assert!(Socks4::new(&Target::Name("a".repeat(MAX_FIELD), 1), "").is_ok());
        let long = Target::Name("a".repeat(MAX_FIELD + 1), 1);
        assert!(matches!(
            Socks4::new(&long, ""),
            Err(SocksError::InvalidField(_))
        ));
        let t = Target::Name("h".into(), 1);
        assert!(Socks4::new(&t, &"u".repeat(MAX_FIELD)).is_ok());
        assert!(Socks4::new(&t, &"u".repeat(MAX_FIELD + 1)).is_err());
        assert!(Socks4::new(&t, "a\0b").is_err());
        assert!(Socks4::new(&Target::Name("a\0b".into(), 1), "").is_err());
    }
}
