//! The client side of a SOCKS5 handshake (RFC 1928, CONNECT) with RFC 1929
//! username/password: greeting, method choice, optional authentication, request, reply.
//! One message at a time (no pipelining: some servers read only what they expect).

use super::{check_name, SocksError, Target, MAX_FIELD};
use crate::engine::net::handshake::Handshake;
use std::net::SocketAddr;

const VERSION: u8 = 5;
const NO_AUTH: u8 = 0x00;
const USER_PASS: u8 = 0x02;
const NO_ACCEPTABLE: u8 = 0xff;
const CONNECT: u8 = 0x01;
const ATYP_V4: u8 = 0x01;
const ATYP_NAME: u8 = 0x03;
const ATYP_V6: u8 = 0x04;
/// VER REP RSV ATYP and the address's first byte (a name's length).
const REPLY_HEAD: usize = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Waiting for VER METHOD.
    Method,
    /// Waiting for the RFC 1929 VER STATUS.
    Auth,
    /// Waiting for VER REP RSV ATYP BND.ADDR BND.PORT.
    Reply,
    Open,
}

/// A SOCKS5 client handshake for one target.
pub(crate) struct Socks5 {
    state: State,
    /// The CONNECT request, encoded up front (so a name too long fails before a byte
    /// is sent).
    request: Vec<u8>,
    /// The username/password message, when there are credentials.
    auth: Option<Vec<u8>>,
    input: Vec<u8>,
}

impl Socks5 {
    pub fn new(target: &Target, auth: Option<(&str, &str)>) -> Result<Socks5, SocksError> {
        let mut request = vec![VERSION, CONNECT, 0];
        let port = match target {
            Target::Addr(SocketAddr::V4(a)) => {
                request.push(ATYP_V4);
                request.extend_from_slice(&a.ip().octets());
                a.port()
            }
            Target::Addr(SocketAddr::V6(a)) => {
                request.push(ATYP_V6);
                request.extend_from_slice(&a.ip().octets());
                a.port()
            }
            Target::Name(name, port) => {
                check_name(name)?;
                request.extend_from_slice(&[ATYP_NAME, name.len() as u8]);
                request.extend_from_slice(name.as_bytes());
                *port
            }
        };
        request.extend_from_slice(&port.to_be_bytes());
        let auth = auth
            .map(|(user, password)| {
                if user.is_empty() || user.len() > MAX_FIELD || password.len() > MAX_FIELD {
                    return Err(SocksError::InvalidField(
                        "a SOCKS5 user name is 1 to 255 bytes and a password at most 255",
                    ));
                }
                let mut m = vec![1, user.len() as u8];
                m.extend_from_slice(user.as_bytes());
                m.push(password.len() as u8);
                m.extend_from_slice(password.as_bytes());
                Ok(m)
            })
            .transpose()?;
        Ok(Socks5 {
            state: State::Method,
            request,
            auth,
            input: Vec::new(),
        })
    }

    /// The length of the whole reply, once its first [`REPLY_HEAD`] bytes are in.
    fn reply_len(&self) -> Result<usize, SocksError> {
        let addr = match self.input[3] {
            ATYP_V4 => 4,
            ATYP_V6 => 16,
            ATYP_NAME => 1 + self.input[4] as usize,
            _ => return Err(SocksError::Malformed("unknown address type in the reply")),
        };
        Ok(4 + addr + 2)
    }
}

impl Handshake for Socks5 {
    type Error = SocksError;

    fn start(&mut self, out: &mut Vec<u8>) {
        if self.auth.is_some() {
            out.extend_from_slice(&[VERSION, 2, NO_AUTH, USER_PASS]);
        } else {
            out.extend_from_slice(&[VERSION, 1, NO_AUTH]);
        }
    }

    fn want(&self) -> usize {
        let have = self.input.len();
        match self.state {
            State::Method | State::Auth => 2 - have,
            State::Reply if have < REPLY_HEAD => REPLY_HEAD - have,
            // The address type is known: a bad one is reported by `receive`.
            State::Reply => self.reply_len().map_or(1, |n| n - have),
            State::Open => 0,
        }
    }

    fn receive(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<bool, SocksError> {
        if input.is_empty() {
            return Err(SocksError::Truncated);
        }
        self.input.extend_from_slice(input);
        let have = self.input.len();
        match self.state {
            State::Method if have == 2 => {
                if self.input[0] != VERSION {
                    return Err(SocksError::Malformed("the method reply is not SOCKS5"));
                }
                match (self.input[1], &self.auth) {
                    (NO_AUTH, _) => {
                        out.extend_from_slice(&self.request);
                        self.state = State::Reply;
                    }
                    (USER_PASS, Some(m)) => {
                        out.extend_from_slice(m);
                        self.state = State::Auth;
                    }
                    (NO_ACCEPTABLE, auth) => {
                        return Err(SocksError::NoAcceptableMethod {
                            offered_password: auth.is_some(),
                        })
                    }
                    _ => {
                        return Err(SocksError::Malformed(
                            "the proxy chose a method not offered",
                        ))
                    }
                }
                self.input.clear();
            }
            // RFC 1929's VER is 1, though some servers answer 5: only STATUS counts.
            State::Auth if have == 2 => {
                if self.input[1] != 0 {
                    return Err(SocksError::AuthFailed(self.input[1]));
                }
                out.extend_from_slice(&self.request);
                self.state = State::Reply;
                self.input.clear();
            }
            State::Reply => {
                if self.input[0] != VERSION {
                    return Err(SocksError::Malformed("the reply is not SOCKS5"));
                }
                // A failure is final as soon as its code is in (some servers close
                // without sending the rest).
                if have >= 2 && self.input[1] != 0 {
                    return Err(SocksError::Reply(self.input[1]));
                }
                if have >= REPLY_HEAD && have == self.reply_len()? {
                    self.state = State::Open;
                    self.input = Vec::new();
                    return Ok(true);
                }
            }
            State::Method | State::Auth => {}
            State::Open => return Err(SocksError::Malformed("bytes after the reply")),
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `replies` one byte at a time (as a slow proxy would), collecting what the
    /// client writes.
    fn run(mut m: Socks5, replies: &[u8]) -> (Vec<u8>, Result<bool, SocksError>) {
        let mut out = Vec::new();
        m.start(&mut out);
        let mut last = Ok(false);
        for b in replies {
            assert!(m.want() >= 1, "the machine wants nothing but is fed");
            last = m.receive(&[*b], &mut out);
            if !matches!(last, Ok(false)) {
                break;
            }
        }
        (out, last)
    }

    fn target() -> Target {
        Target::Name("example.com".into(), 80)
    }

    #[test]
    fn no_auth_connect_by_name() {
        let m = Socks5::new(&target(), None).unwrap();
        let (out, r) = run(m, &[5, 0, 5, 0, 0, 1, 10, 0, 0, 1, 0x1f, 0x90]);
        assert_eq!(r, Ok(true));
        let mut want = vec![5, 1, 0, 5, 1, 0, 3, 11];
        want.extend_from_slice(b"example.com");
        want.extend_from_slice(&[0, 80]);
        assert_eq!(out, want);
    }

    #[test]
    fn connect_by_address_both_families() {
        let m = Socks5::new(&Target::Addr("10.1.2.3:443".parse().unwrap()), None).unwrap();
        let (out, _) = run(m, &[5, 0]);
        assert_eq!(&out[3..], &[5, 1, 0, 1, 10, 1, 2, 3, 1, 187]);
        let m = Socks5::new(&Target::Addr("[::1]:80".parse().unwrap()), None).unwrap();
        let (out, _) = run(m, &[5, 0]);
        assert_eq!(out[6], ATYP_V6);
        assert_eq!(out.len(), 3 + 4 + 16 + 2);
    }

    #[test]
    fn username_password_accepted() {
        let m = Socks5::new(&target(), Some(("al", "pw"))).unwrap();
        // The reply's bound address is IPv6.
        let mut replies = vec![5, 2, 1, 0, 5, 0, 0, ATYP_V6];
        replies.extend_from_slice(&[0; 16]);
        replies.extend_from_slice(&[0, 80]);
        let (out, r) = run(m, &replies);
        assert_eq!(r, Ok(true));
        assert_eq!(&out[..4], &[5, 2, 0, 2], "both methods offered");
        assert_eq!(&out[4..11], &[1, 2, b'a', b'l', 2, b'p', b'w']);
        assert_eq!(out[11..13], [5, 1]);
    }

    #[test]
    fn refused_password_and_no_method() {
        let m = Socks5::new(&target(), Some(("al", "bad"))).unwrap();
        assert_eq!(run(m, &[5, 2, 1, 1]).1, Err(SocksError::AuthFailed(1)));
        let m = Socks5::new(&target(), None).unwrap();
        assert_eq!(
            run(m, &[5, 0xff]).1,
            Err(SocksError::NoAcceptableMethod {
                offered_password: false
            })
        );
        // Username/password chosen though not offered.
        let m = Socks5::new(&target(), None).unwrap();
        assert!(matches!(run(m, &[5, 2]).1, Err(SocksError::Malformed(_))));
    }

    #[test]
    fn every_failure_reply_is_reported_with_its_code() {
        for code in 1..=0xffu8 {
            let m = Socks5::new(&target(), None).unwrap();
            // Only VER and REP: the rest never comes.
            assert_eq!(run(m, &[5, 0, 5, code]).1, Err(SocksError::Reply(code)));
        }
    }

    #[test]
    fn truncated_and_garbage_replies() {
        for cut in 0..12 {
            let reply = [5, 0, 5, 0, 0, 1, 10, 0, 0, 1, 0, 80];
            let mut m = Socks5::new(&target(), None).unwrap();
            let mut out = Vec::new();
            m.start(&mut out);
            for b in &reply[..cut] {
                assert_eq!(m.receive(&[*b], &mut out), Ok(false));
            }
            assert_eq!(m.receive(&[], &mut out), Err(SocksError::Truncated));
        }
        let m = Socks5::new(&target(), None).unwrap();
        assert!(matches!(
            run(m, b"HTTP/1.1 400").1,
            Err(SocksError::Malformed(_))
        ));
        let m = Socks5::new(&target(), None).unwrap();
        assert!(matches!(
            run(m, &[5, 0, 5, 0, 0, 9, 0]).1,
            Err(SocksError::Malformed(_))
        ));
        let m = Socks5::new(&target(), None).unwrap();
        assert!(matches!(run(m, &[4, 0]).1, Err(SocksError::Malformed(_))));
    }

    #[test]
    fn never_asks_for_more_than_the_reply() {
        let mut m = Socks5::new(&target(), None).unwrap();
        let mut out = Vec::new();
        m.start(&mut out);
        assert_eq!(m.want(), 2);
        m.receive(&[5, 0], &mut out).unwrap();
        assert_eq!(m.want(), REPLY_HEAD);
        m.receive(&[5, 0, 0, 3, 4], &mut out).unwrap();
        // The bound name's 4 bytes and the port: exactly the rest.
        assert_eq!(m.want(), 4 + 2);
        assert_eq!(m.receive(b"host\x00\x50", &mut out), Ok(true));
    }

    #[test]
    fn names_and_credentials_at_the_limit() {
        let at = "a".repeat(MAX_FIELD);
        assert!(Socks5::new(&Target::Name(at.clone(), 1), None).is_ok());
        let over = Target::Name("a".repeat(MAX_FIELD + 1), 1);
        assert!(matches!(
            Socks5::new(&over, None),
            Err(SocksError::InvalidField(_))
        ));
        assert!(matches!(
            Socks5::new(&Target::Name(String::new(), 1), None),
            Err(SocksError::InvalidField(_))
        ));
        assert!(Socks5::new(&target(), Some((&at, &at))).is_ok());
        let long = "a".repeat(MAX_FIELD + 1);
        assert!(Socks5::new(&target(), Some((&long, "p"))).is_err());
        assert!(Socks5::new(&target(), Some(("u", &long))).is_err());
    }
}
