//! The server's handshakes: SOCKS5 (RFC 1928, CONNECT, BIND and UDP ASSOCIATE) with no
//! authentication or username/password (RFC 1929), and SOCKS4 (CONNECT and BIND) with
//! 4a's host names. A BIND is answered twice, with the same message: `connected` once
//! with the listening address, then with the peer's.
//! Every message is bounded by its length fields (SOCKS4's NUL-terminated strings by
//! [`v4::MAX_STRING`]), so a machine keeps at most one message of input.

use super::addr::{self, Address, UNSPECIFIED};
use super::{auth, reply, v4, BIND, CONNECT, NO_ACCEPTABLE, NO_AUTH, UDP_ASSOCIATE, USER_PASS};
use super::{reply4, VERSION5};
use crate::proto::tunnel::{Auth, Failure, ServerHandshake, Step};
use std::net::SocketAddr;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State5 {
    Greeting,
    Auth,
    Request,
    /// The request was taken (or refused): nothing more is parsed.
    Done,
}

/// A SOCKS5 server handshake.
pub(crate) struct Socks5 {
    state: State5,
    /// Only username/password is offered when true, else only "no authentication".
    require_auth: bool,
    authed: bool,
    /// Input kept across reads until a whole message is there.
    input: Vec<u8>,
}

impl Socks5 {
    pub fn new(require_auth: bool) -> Socks5 {
        Socks5 {
            state: State5::Greeting,
            require_auth,
            authed: false,
            input: Vec::new(),
        }
    }

    /// Parses every complete message kept.
    fn parse(&mut self, out: &mut Vec<u8>) -> Step {
        loop {
            let step = match self.state {
                State5::Greeting => self.greeting(out),
                State5::Auth => self.auth(out),
                State5::Request => self.request(out),
                State5::Done => return Step::More,
            };
            match step {
                Some(Step::More) => {}
                Some(step) => return step,
                None => return Step::More,
            }
        }
    }

    /// Whether the kept input holds the first `min` bytes of a SOCKS5 message: `Err(None)`
    /// waits for more, `Err(Some(Close))` ends a handshake in another version.
    fn head(&mut self, min: usize, out: &mut Vec<u8>) -> Result<(), Option<Step>> {
        if self.input.len() < min {
            return Err(None);
        }
        if self.input[0] != VERSION5 {
            return Err(Some(self.refuse(out, None)));
        }
        Ok(())
    }

    /// Some(Step::More) when a message was handled and parsing goes on; None when more
    /// input is needed.
    fn greeting(&mut self, out: &mut Vec<u8>) -> Option<Step> {
        if let Err(step) = self.head(2, out) {
            return step;
        }
        let b = &self.input;
        let n = usize::from(b[1]);
        let methods = b.get(2..2 + n)?;
        let want = if self.require_auth {
            USER_PASS
        } else {
            NO_AUTH
        };
        if !methods.contains(&want) {
            out.extend_from_slice(&[VERSION5, NO_ACCEPTABLE]);
            return Some(self.refuse(out, None));
        }
        out.extend_from_slice(&[VERSION5, want]);
        self.input.drain(..2 + n);
        self.state = if self.require_auth {
            State5::Auth
        } else {
            State5::Request
        };
        Some(Step::More)
    }

    fn auth(&mut self, out: &mut Vec<u8>) -> Option<Step> {
        match auth::decode_request(&self.input) {
            auth::Request::Partial => None,
            auth::Request::BadVersion => {
                auth::encode_status(out, false);
                self.state = State5::Done;
                Some(Step::Close)
            }
            auth::Request::Complete(creds, len) => {
                self.input.drain(..len);
                Some(Step::Authenticate(creds))
            }
        }
    }

    fn request(&mut self, out: &mut Vec<u8>) -> Option<Step> {
        if let Err(step) = self.head(4, out) {
            return step;
        }
        let b = &self.input;
        let command = b[1];
        if ![CONNECT, BIND, UDP_ASSOCIATE].contains(&command) {
            return Some(self.refuse(out, Some(reply::CMD_UNSUPPORTED)));
        }
        let (target, len) = match addr::decode(&b[3..]) {
            Address::Complete(target, len) => (target, 3 + len),
            Address::Partial => return None,
            Address::BadName => return Some(self.refuse(out, Some(reply::GENERAL))),
            Address::BadType => return Some(self.refuse(out, Some(reply::ATYP_UNSUPPORTED))),
        };
        self.input.drain(..len);
        self.state = State5::Done;
        let auth = if self.authed {
            Auth::Verified
        } else {
            Auth::None
        };
        Some(match command {
            CONNECT => Step::Connect(target, auth),
            BIND => Step::Bind(target, auth),
            _ => Step::Associate(target, auth),
        })
    }

    /// Ends the handshake, with a reply carrying `code` if there is one.
    fn refuse(&mut self, out: &mut Vec<u8>, code: Option<u8>) -> Step {
        if let Some(code) = code {
            reply5(out, code, UNSPECIFIED);
        }
        self.state = State5::Done;
        Step::Close
    }
}

/// A SOCKS5 reply: VER REP RSV and the bound address (failures carry 0.0.0.0:0).
fn reply5(out: &mut Vec<u8>, code: u8, bound: SocketAddr) {
    out.extend_from_slice(&[VERSION5, code, 0]);
    addr::encode_addr(out, bound);
}

impl ServerHandshake for Socks5 {
    fn receive(&mut self, data: &[u8], out: &mut Vec<u8>) -> Step {
        if self.state == State5::Done {
            return Step::More;
        }
        self.input.extend_from_slice(data);
        self.parse(out)
    }

    fn authenticated(&mut self, ok: bool, out: &mut Vec<u8>) -> Step {
        auth::encode_status(out, ok);
        if !ok {
            self.state = State5::Done;
            return Step::Close;
        }
        self.authed = true;
        self.state = State5::Request;
        self.parse(out)
    }

    fn connected(&mut self, bound: SocketAddr, out: &mut Vec<u8>) {
        reply5(out, reply::SUCCEEDED, bound);
    }

    fn failed(&mut self, why: Failure, out: &mut Vec<u8>) {
        let code = match why {
            Failure::NotAllowed | Failure::AuthRequired => reply::NOT_ALLOWED,
            Failure::Refused => reply::REFUSED,
            Failure::NetworkUnreachable => reply::NET_UNREACHABLE,
            Failure::HostUnreachable => reply::HOST_UNREACHABLE,
            // RFC 1928 has no "timed out"; its "TTL expired" is the nearest.
            Failure::TimedOut => reply::TTL_EXPIRED,
            Failure::General => reply::GENERAL,
        };
        reply5(out, code, UNSPECIFIED);
    }

    fn timed_out(&mut self, _out: &mut Vec<u8>) {}

    fn take_rest(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.input)
    }
}

/// A SOCKS4 or SOCKS4a server handshake (CONNECT and BIND; the user id is not checked).
#[derive(Default)]
pub(crate) struct Socks4 {
    done: bool,
    input: Vec<u8>,
}

impl Socks4 {
    pub fn new() -> Socks4 {
        Socks4::default()
    }

    fn parse(&mut self, out: &mut Vec<u8>) -> Step {
        let (command, target, end) = match v4::decode_request(&self.input) {
            v4::Request::Complete(command, target, end) => (command, target, end),
            v4::Request::Partial => return Step::More,
            v4::Request::BadVersion => return self.refuse(out, false),
            v4::Request::Refused => return self.refuse(out, true),
        };
        self.input.drain(..end);
        self.done = true;
        if command == BIND {
            Step::Bind(target, Auth::None)
        } else {
            Step::Connect(target, Auth::None)
        }
    }

    fn refuse(&mut self, out: &mut Vec<u8>, reply: bool) -> Step {
        if reply {
            self.failed(Failure::General, out);
        }
        self.done = true;
        Step::Close
    }
}

impl ServerHandshake for Socks4 {
    fn receive(&mut self, data: &[u8], out: &mut Vec<u8>) -> Step {
        if self.done {
            return Step::More;
        }
        self.input.extend_from_slice(data);
        self.parse(out)
    }

    fn connected(&mut self, bound: SocketAddr, out: &mut Vec<u8>) {
        v4::encode_reply(out, reply4::GRANTED, Some(bound));
    }

    fn failed(&mut self, _why: Failure, out: &mut Vec<u8>) {
        v4::encode_reply(out, reply4::REJECTED, None);
    }

    fn timed_out(&mut self, _out: &mut Vec<u8>) {}

    fn take_rest(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.input)
    }
}

#[cfg(test)]
mod tests;
