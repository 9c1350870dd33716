//! SOCKS handshakes as sans-IO machines: SOCKS5 (RFC 1928, CONNECT, BIND and UDP
//! ASSOCIATE) with no authentication or username/password (RFC 1929), and SOCKS4 (CONNECT
//! and BIND) with 4a's host names. A BIND is answered twice, with the same message:
//! `connected` once with the listening address, then with the peer's.
//! Every message is bounded by its length fields (SOCKS4's NUL-terminated strings by
//! [`MAX_STRING`]), so a machine keeps at most one message of input.

use super::{Auth, Credentials, Failure, Handshake, Step, Target};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Longest SOCKS4 user id or SOCKS4a host name, NUL included (SOCKS5 names fit in 255).
const MAX_STRING: usize = 256;

// SOCKS5 methods, commands, address types and replies (RFC 1928).
const NO_AUTH: u8 = 0x00;
const USER_PASS: u8 = 0x02;
const NO_METHOD: u8 = 0xff;
const CMD_CONNECT: u8 = 0x01;
const CMD_BIND: u8 = 0x02;
const CMD_UDP_ASSOCIATE: u8 = 0x03;
pub(crate) const ATYP_V4: u8 = 0x01;
pub(crate) const ATYP_NAME: u8 = 0x03;
pub(crate) const ATYP_V6: u8 = 0x04;
const REP_OK: u8 = 0x00;
const REP_GENERAL: u8 = 0x01;
const REP_NOT_ALLOWED: u8 = 0x02;
const REP_NET_UNREACHABLE: u8 = 0x03;
const REP_HOST_UNREACHABLE: u8 = 0x04;
const REP_REFUSED: u8 = 0x05;
const REP_TTL_EXPIRED: u8 = 0x06;
const REP_CMD_UNSUPPORTED: u8 = 0x07;
const REP_ATYP_UNSUPPORTED: u8 = 0x08;
// SOCKS4 replies: granted, and "rejected or failed" (its other codes are about identd).
const S4_GRANTED: u8 = 90;
const S4_REJECTED: u8 = 91;

/// Input kept across reads until a whole message is there.
#[derive(Default)]
struct Input {
    buf: Vec<u8>,
}

impl Input {
    fn consume(&mut self, n: usize) {
        self.buf.drain(..n);
    }
}

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
    input: Input,
}

impl Socks5 {
    pub fn new(require_auth: bool) -> Socks5 {
        Socks5 {
            state: State5::Greeting,
            require_auth,
            authed: false,
            input: Input::default(),
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

    /// Some(Step::More) when a message was handled and parsing goes on; None when more
    /// input is needed.
    fn greeting(&mut self, out: &mut Vec<u8>) -> Option<Step> {
        let b = &self.input.buf;
        if b.len() < 2 {
            return None;
        }
        if b[0] != 5 {
            return Some(self.refuse(out, None));
        }
        let n = usize::from(b[1]);
        let methods = b.get(2..2 + n)?;
        let want = if self.require_auth {
            USER_PASS
        } else {
            NO_AUTH
        };
        if !methods.contains(&want) {
            out.extend_from_slice(&[5, NO_METHOD]);
            return Some(self.refuse(out, None));
        }
        out.extend_from_slice(&[5, want]);
        self.input.consume(2 + n);
        self.state = if self.require_auth {
            State5::Auth
        } else {
            State5::Request
        };
        Some(Step::More)
    }

    fn auth(&mut self, out: &mut Vec<u8>) -> Option<Step> {
        let b = &self.input.buf;
        if b.len() < 2 {
            return None;
        }
        if b[0] != 1 {
            out.extend_from_slice(&[1, 1]);
            self.state = State5::Done;
            return Some(Step::Close);
        }
        let ulen = usize::from(b[1]);
        let plen = usize::from(*b.get(2 + ulen)?);
        let end = 3 + ulen + plen;
        let password = b.get(3 + ulen..end)?;
        let creds = Credentials {
            user: String::from_utf8_lossy(&b[2..2 + ulen]).into_owned(),
            password: String::from_utf8_lossy(password).into_owned(),
        };
        self.input.consume(end);
        Some(Step::Authenticate(creds))
    }

    fn request(&mut self, out: &mut Vec<u8>) -> Option<Step> {
        let b = &self.input.buf;
        if b.len() < 4 {
            return None;
        }
        if b[0] != 5 {
            return Some(self.refuse(out, None));
        }
        let command = b[1];
        if ![CMD_CONNECT, CMD_BIND, CMD_UDP_ASSOCIATE].contains(&command) {
            return Some(self.refuse(out, Some(REP_CMD_UNSUPPORTED)));
        }
        let (target, len) = match address(&b[3..]) {
            Address::Complete(target, len) => (target, 3 + len),
            Address::Partial => return None,
            Address::BadName => return Some(self.refuse(out, Some(REP_GENERAL))),
            Address::BadType => return Some(self.refuse(out, Some(REP_ATYP_UNSUPPORTED))),
        };
        self.input.consume(len);
        self.state = State5::Done;
        let auth = if self.authed {
            Auth::Verified
        } else {
            Auth::None
        };
        Some(match command {
            CMD_CONNECT => Step::Connect(target, auth),
            CMD_BIND => Step::Bind(target, auth),
            _ => Step::Associate(target, auth),
        })
    }

    /// Ends the handshake, with a reply carrying `code` if there is one.
    fn refuse(&mut self, out: &mut Vec<u8>, code: Option<u8>) -> Step {
        if let Some(code) = code {
            reply5(out, code, None);
        }
        self.state = State5::Done;
        Step::Close
    }
}

/// A SOCKS5 address (ATYP, address, port) at the start of some bytes.
pub(crate) enum Address {
    /// The address and the bytes it took.
    Complete(Target, usize),
    Partial,
    /// A name that cannot be a host name.
    BadName,
    /// An unknown address type.
    BadType,
}

/// Parses the SOCKS5 address that `b` starts with (requests and UDP headers share it).
pub(crate) fn address(b: &[u8]) -> Address {
    let Some(&atyp) = b.first() else {
        return Address::Partial;
    };
    match atyp {
        ATYP_V4 => match b.get(1..7) {
            Some(a) => {
                let ip = Ipv4Addr::new(a[0], a[1], a[2], a[3]);
                Address::Complete(Target::Addr(SocketAddr::new(ip.into(), port(&a[4..]))), 7)
            }
            None => Address::Partial,
        },
        ATYP_V6 => match b.get(1..19) {
            Some(a) => {
                let ip: [u8; 16] = a[..16].try_into().expect("16 bytes");
                let addr = SocketAddr::new(Ipv6Addr::from(ip).into(), port(&a[16..]));
                Address::Complete(Target::Addr(addr), 19)
            }
            None => Address::Partial,
        },
        ATYP_NAME => {
            let Some(&n) = b.get(1) else {
                return Address::Partial;
            };
            let n = usize::from(n);
            let Some(a) = b.get(2..4 + n) else {
                return Address::Partial;
            };
            match host_name(&a[..n]) {
                Some(name) => Address::Complete(Target::Name(name, port(&a[n..])), 4 + n),
                None => Address::BadName,
            }
        }
        _ => Address::BadType,
    }
}

/// Writes `addr` as a SOCKS5 address (ATYP, address, port).
pub(crate) fn put_address(out: &mut Vec<u8>, addr: SocketAddr) {
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

/// A SOCKS5 reply; failures carry 0.0.0.0:0.
fn reply5(out: &mut Vec<u8>, code: u8, bound: Option<SocketAddr>) {
    let bound = bound.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
    out.extend_from_slice(&[5, code, 0]);
    put_address(out, bound);
}

fn port(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

/// A host name as sent, if it can be one: not empty, printable ASCII, no spaces.
fn host_name(b: &[u8]) -> Option<String> {
    let ok = !b.is_empty() && b.iter().all(|c| c.is_ascii_graphic());
    ok.then(|| String::from_utf8_lossy(b).into_owned())
}

impl Handshake for Socks5 {
    fn receive(&mut self, data: &[u8], out: &mut Vec<u8>) -> Step {
        if self.state == State5::Done {
            return Step::More;
        }
        self.input.buf.extend_from_slice(data);
        self.parse(out)
    }

    fn authenticated(&mut self, ok: bool, out: &mut Vec<u8>) -> Step {
        out.extend_from_slice(&[1, if ok { 0 } else { 1 }]);
        if !ok {
            self.state = State5::Done;
            return Step::Close;
        }
        self.authed = true;
        self.state = State5::Request;
        self.parse(out)
    }

    fn connected(&mut self, bound: SocketAddr, out: &mut Vec<u8>) {
        reply5(out, REP_OK, Some(bound));
    }

    fn failed(&mut self, why: Failure, out: &mut Vec<u8>) {
        let code = match why {
            Failure::NotAllowed | Failure::AuthRequired => REP_NOT_ALLOWED,
            Failure::Refused => REP_REFUSED,
            Failure::NetworkUnreachable => REP_NET_UNREACHABLE,
            Failure::HostUnreachable => REP_HOST_UNREACHABLE,
            // RFC 1928 has no "timed out"; its "TTL expired" is the nearest.
            Failure::TimedOut => REP_TTL_EXPIRED,
            Failure::General => REP_GENERAL,
        };
        reply5(out, code, None);
    }

    fn timed_out(&mut self, _out: &mut Vec<u8>) {}

    fn take_rest(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.input.buf)
    }
}

/// A SOCKS4 or SOCKS4a server handshake (CONNECT only; the user id is not checked).
#[derive(Default)]
pub(crate) struct Socks4 {
    done: bool,
    input: Input,
}

impl Socks4 {
    pub fn new() -> Socks4 {
        Socks4::default()
    }

    fn parse(&mut self, out: &mut Vec<u8>) -> Step {
        let b = &self.input.buf;
        if b.len() < 8 {
            return Step::More;
        }
        if b[0] != 4 {
            return self.refuse(out, false);
        }
        let command = b[1];
        if command != CMD_CONNECT && command != CMD_BIND {
            return self.refuse(out, true);
        }
        let port = port(&b[2..4]);
        let ip = Ipv4Addr::new(b[4], b[5], b[6], b[7]);
        let Some(user_end) = nul_within(&b[8..]) else {
            return self.pending_or_refuse(8, out);
        };
        let mut end = 8 + user_end + 1;
        // 0.0.0.x (x != 0) is SOCKS4a's sign that a host name follows the user id.
        let [a, b2, c, d] = ip.octets();
        let target = if a == 0 && b2 == 0 && c == 0 && d != 0 {
            let Some(name_end) = nul_within(&b[end..]) else {
                return self.pending_or_refuse(end, out);
            };
            let Some(name) = host_name(&b[end..end + name_end]) else {
                return self.refuse(out, true);
            };
            end += name_end + 1;
            Target::Name(name, port)
        } else {
            Target::Addr(SocketAddr::new(ip.into(), port))
        };
        self.input.consume(end);
        self.done = true;
        if command == CMD_BIND {
            Step::Bind(target, Auth::None)
        } else {
            Step::Connect(target, Auth::None)
        }
    }

    /// No NUL yet in the string that starts at `from`: wait, or refuse one too long.
    fn pending_or_refuse(&mut self, from: usize, out: &mut Vec<u8>) -> Step {
        if self.input.buf.len() - from >= MAX_STRING {
            return self.refuse(out, true);
        }
        Step::More
    }

    fn refuse(&mut self, out: &mut Vec<u8>, reply: bool) -> Step {
        if reply {
            self.failed(Failure::General, out);
        }
        self.done = true;
        Step::Close
    }
}

/// Where the NUL ending a string at the start of `b` is, if it is within bounds.
fn nul_within(b: &[u8]) -> Option<usize> {
    b.iter().take(MAX_STRING).position(|&c| c == 0)
}

fn reply4(out: &mut Vec<u8>, code: u8, bound: Option<SocketAddr>) {
    let (ip, port) = match bound {
        Some(SocketAddr::V4(a)) => (a.ip().octets(), a.port()),
        _ => ([0; 4], 0),
    };
    out.extend_from_slice(&[0, code]);
    out.extend_from_slice(&port.to_be_bytes());
    out.extend_from_slice(&ip);
}

impl Handshake for Socks4 {
    fn receive(&mut self, data: &[u8], out: &mut Vec<u8>) -> Step {
        if self.done {
            return Step::More;
        }
        self.input.buf.extend_from_slice(data);
        self.parse(out)
    }

    fn authenticated(&mut self, _ok: bool, _out: &mut Vec<u8>) -> Step {
        // SOCKS4 never asks for credentials.
        Step::Close
    }

    fn connected(&mut self, bound: SocketAddr, out: &mut Vec<u8>) {
        reply4(out, S4_GRANTED, Some(bound));
    }

    fn failed(&mut self, _why: Failure, out: &mut Vec<u8>) {
        reply4(out, S4_REJECTED, None);
    }

    fn timed_out(&mut self, _out: &mut Vec<u8>) {}

    fn take_rest(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.input.buf)
    }
}

#[cfg(test)]
mod tests;
