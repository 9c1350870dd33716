//! The client's handshakes: SOCKS5 (RFC 1928, CONNECT) with RFC 1929 username/password
//! (greeting, method choice, optional authentication, request, reply; one message at a
//! time, no pipelining: some servers read only what they expect), and SOCKS4/4a CONNECT
//! (one request, one 8-byte reply). Neither lets its driver read past the proxy's last
//! reply.

use super::addr::{self, Len};
use super::{auth, v4, SocksError, Target, CONNECT, NO_ACCEPTABLE, NO_AUTH, USER_PASS};
use super::{reply, reply4, VERSION5};
use crate::proto::tunnel::ClientHandshake;

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
        let mut request = vec![VERSION5, CONNECT, 0];
        addr::encode(&mut request, target)?;
        let auth = auth
            .map(|(user, password)| auth::encode_request(user, password))
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
        match addr::len(&self.input[3..]) {
            Len::Known(n) => Ok(3 + n),
            Len::Partial | Len::BadType => {
                Err(SocksError::Malformed("unknown address type in the reply"))
            }
        }
    }
}

impl ClientHandshake for Socks5 {
    type Error = SocksError;

    fn start(&mut self, out: &mut Vec<u8>) {
        auth::encode_greeting(out, self.auth.is_some());
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
                if self.input[0] != VERSION5 {
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
                if self.input[1] != auth::STATUS_OK {
                    return Err(SocksError::AuthFailed(self.input[1]));
                }
                out.extend_from_slice(&self.request);
                self.state = State::Reply;
                self.input.clear();
            }
            State::Reply => {
                if self.input[0] != VERSION5 {
                    return Err(SocksError::Malformed("the reply is not SOCKS5"));
                }
                // A failure is final as soon as its code is in (some servers close
                // without sending the rest).
                if have >= 2 && self.input[1] != reply::SUCCEEDED {
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

/// A SOCKS4 (or 4a) client handshake for one target.
pub(crate) struct Socks4 {
    request: Vec<u8>,
    input: Vec<u8>,
}

impl Socks4 {
    pub fn new(target: &Target, user_id: &str) -> Result<Socks4, SocksError> {
        Ok(Socks4 {
            request: v4::encode_request(CONNECT, target, user_id)?,
            input: Vec::new(),
        })
    }
}

impl ClientHandshake for Socks4 {
    type Error = SocksError;

    fn start(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.request);
    }

    fn want(&self) -> usize {
        v4::REPLY_LEN - self.input.len()
    }

    fn receive(&mut self, input: &[u8], _out: &mut Vec<u8>) -> Result<bool, SocksError> {
        if input.is_empty() {
            return Err(SocksError::Truncated);
        }
        self.input.extend_from_slice(input);
        if self.input[0] != v4::REPLY_VERSION {
            return Err(SocksError::Malformed(
                "the reply is not SOCKS4 (VN is not 0)",
            ));
        }
        if self.input.len() < v4::REPLY_LEN {
            return Ok(false);
        }
        match self.input[1] {
            reply4::GRANTED => Ok(true),
            code => Err(SocksError::Rejected4(code)),
        }
    }
}

#[cfg(test)]
mod tests;
