//! SOCKS5 authentication: the methods a client offers (RFC 1928 §3), and the
//! username/password subnegotiation (RFC 1929): VER 1, ULEN, UNAME, PLEN, PASSWD; the
//! answer VER STATUS (0: accepted).

use super::{SocksError, MAX_FIELD, NO_AUTH, USER_PASS, VERSION5};

/// RFC 1929's VER.
pub(crate) const VERSION: u8 = 1;
pub(crate) const STATUS_OK: u8 = 0;

/// A client's greeting: no authentication, and username/password when it has some.
pub(crate) fn encode_greeting(out: &mut Vec<u8>, with_password: bool) {
    if with_password {
        out.extend_from_slice(&[VERSION5, 2, NO_AUTH, USER_PASS]);
    } else {
        out.extend_from_slice(&[VERSION5, 1, NO_AUTH]);
    }
}

/// The username/password message, if the two fit in it.
pub(crate) fn encode_request(user: &str, password: &str) -> Result<Vec<u8>, SocksError> {
    if user.is_empty() || user.len() > MAX_FIELD || password.len() > MAX_FIELD {
        return Err(SocksError::InvalidField(
            "a SOCKS5 user name is 1 to 255 bytes and a password at most 255",
        ));
    }
    let mut m = vec![VERSION, user.len() as u8];
    m.extend_from_slice(user.as_bytes());
    m.push(password.len() as u8);
    m.extend_from_slice(password.as_bytes());
    Ok(m)
}

#[cfg(feature = "proxy")]
pub(crate) use server::{decode_request, encode_status, Request};

#[cfg(feature = "proxy")]
mod server {
    use super::{STATUS_OK, VERSION};
    use crate::proto::tunnel::Credentials;

    const STATUS_REFUSED: u8 = 1;

    /// The answer to a username/password message.
    pub(crate) fn encode_status(out: &mut Vec<u8>, ok: bool) {
        out.extend_from_slice(&[VERSION, if ok { STATUS_OK } else { STATUS_REFUSED }]);
    }

    /// A username/password message taken from the start of some bytes.
    #[derive(Debug, PartialEq, Eq)]
    pub(crate) enum Request {
        /// The credentials and the bytes they took.
        Complete(Credentials, usize),
        Partial,
        /// VER is not 1.
        BadVersion,
    }

    /// Decodes the username/password message `b` starts with.
    pub(crate) fn decode_request(b: &[u8]) -> Request {
        if b.len() < 2 {
            return Request::Partial;
        }
        if b[0] != VERSION {
            return Request::BadVersion;
        }
        let ulen = usize::from(b[1]);
        let Some(&plen) = b.get(2 + ulen) else {
            return Request::Partial;
        };
        let end = 3 + ulen + usize::from(plen);
        let Some(password) = b.get(3 + ulen..end) else {
            return Request::Partial;
        };
        let creds = Credentials {
            user: String::from_utf8_lossy(&b[2..2 + ulen]).into_owned(),
            password: String::from_utf8_lossy(password).into_owned(),
        };
        Request::Complete(creds, end)
    }
}

#[cfg(all(test, feature = "proxy"))]
mod tests {
    use super::*;
    use crate::proto::tunnel::Credentials;

    #[test]
    fn username_password_round_trips_at_every_split() {
        let m = encode_request("alice", "pw").unwrap();
        assert_eq!(m, [1, 5, b'a', b'l', b'i', b'c', b'e', 2, b'p', b'w']);
        let creds = Credentials {
            user: "alice".into(),
            password: "pw".into(),
        };
        assert_eq!(decode_request(&m), Request::Complete(creds, m.len()));
        for cut in 0..m.len() {
            assert_eq!(decode_request(&m[..cut]), Request::Partial);
        }
        assert_eq!(decode_request(&[5, 1, b'u']), Request::BadVersion);
    }

    #[test]
    fn fields_at_the_limit() {
        let at = "a".repeat(MAX_FIELD);
        let long = "a".repeat(MAX_FIELD + 1);
        assert!(encode_request(&at, &at).is_ok());
        assert!(encode_request(&at, "").is_ok());
        assert!(encode_request("", "p").is_err());
        assert!(encode_request(&long, "p").is_err());
        assert!(encode_request("u", &long).is_err());
    }
}
