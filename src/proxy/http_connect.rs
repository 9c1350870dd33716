//! HTTP `CONNECT` (RFC 9110 §9.3.6) as a sans-IO machine: a request head in, a target
//! and the offered `Proxy-Authorization: Basic` credentials out, and the status line that
//! answers it. Any other request asks for forwarding (`Step::Forward`): the driver hands
//! the connection, this head included, to the forwarding server (`forward.rs`).

use super::{Auth, Credentials, Failure, Handshake, Step, Target};
use base64::Engine as _;
use std::net::SocketAddr;

/// Most header fields a `CONNECT` head may carry.
const MAX_HEADERS: usize = 64;

pub(crate) struct HttpConnect {
    input: Vec<u8>,
    max_head: usize,
    done: bool,
}

impl HttpConnect {
    pub fn new(max_head: usize) -> HttpConnect {
        HttpConnect {
            input: Vec::new(),
            max_head,
            done: false,
        }
    }

    fn refuse(&mut self, out: &mut Vec<u8>, status: &str) -> Step {
        respond(out, status, "");
        self.done = true;
        Step::Close
    }

    fn parse(&mut self, out: &mut Vec<u8>) -> Step {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let len = match req.parse(&self.input) {
            Ok(httparse::Status::Complete(len)) if len <= self.max_head => len,
            Ok(httparse::Status::Complete(_)) => {
                return self.refuse(out, "431 Request Header Fields Too Large")
            }
            Ok(httparse::Status::Partial) if self.input.len() > self.max_head => {
                return self.refuse(out, "431 Request Header Fields Too Large")
            }
            Ok(httparse::Status::Partial) => return Step::More,
            Err(httparse::Error::TooManyHeaders) => {
                return self.refuse(out, "431 Request Header Fields Too Large")
            }
            Err(_) => return self.refuse(out, "400 Bad Request"),
        };
        if req.method != Some("CONNECT") {
            // Left in `input`: the forwarding server parses the head again.
            self.done = true;
            return Step::Forward;
        }
        let Some(target) = req.path.and_then(authority) else {
            return self.refuse(out, "400 Bad Request");
        };
        let auth = req
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("proxy-authorization"))
            .and_then(|h| basic(h.value))
            .map_or(Auth::None, Auth::Offered);
        self.input.drain(..len);
        self.done = true;
        Step::Connect(target, auth)
    }
}

/// A `CONNECT` request target: `host:port` (RFC 9110 §9.3.6), the host a name, an IPv4
/// address or a bracketed IPv6 one; the port is required.
fn authority(s: &str) -> Option<Target> {
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Some(Target::Addr(addr));
    }
    let (host, port) = s.rsplit_once(':')?;
    let port = port.parse::<u16>().ok()?;
    let name_ok = !host.is_empty()
        && host.len() <= 255
        && host
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.' || c == b'_');
    name_ok.then(|| Target::Name(host.to_owned(), port))
}

/// The credentials of a `Basic` authorization value.
pub(crate) fn basic(value: &[u8]) -> Option<Credentials> {
    let value = std::str::from_utf8(value).ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some(Credentials {
        user: user.to_owned(),
        password: password.to_owned(),
    })
}

fn respond(out: &mut Vec<u8>, status: &str, headers: &str) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(headers.as_bytes());
    if !status.starts_with('2') {
        out.extend_from_slice(b"Content-Length: 0\r\nConnection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

impl Handshake for HttpConnect {
    fn receive(&mut self, data: &[u8], out: &mut Vec<u8>) -> Step {
        if self.done {
            return Step::More;
        }
        self.input.extend_from_slice(data);
        self.parse(out)
    }

    fn connected(&mut self, _bound: SocketAddr, out: &mut Vec<u8>) {
        respond(out, "200 Connection Established", "");
    }

    fn failed(&mut self, why: Failure, out: &mut Vec<u8>) {
        match why {
            Failure::NotAllowed => respond(out, "403 Forbidden", ""),
            Failure::AuthRequired => respond(
                out,
                "407 Proxy Authentication Required",
                "Proxy-Authenticate: Basic realm=\"proxy\"\r\n",
            ),
            Failure::TimedOut => respond(out, "504 Gateway Timeout", ""),
            Failure::Refused
            | Failure::NetworkUnreachable
            | Failure::HostUnreachable
            | Failure::General => respond(out, "502 Bad Gateway", ""),
        }
    }

    fn timed_out(&mut self, out: &mut Vec<u8>) {
        respond(out, "408 Request Timeout", "");
    }

    fn take_rest(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.input)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(input: &[u8]) -> (Step, String) {
        let mut m = HttpConnect::new(1024);
        let mut out = Vec::new();
        let step = m.receive(input, &mut out);
        (step, String::from_utf8(out).unwrap())
    }

    #[test]
    fn connect_by_name_and_address() {
        let (step, out) = run(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
        assert_eq!(
            step,
            Step::Connect(Target::Name("example.com".into(), 443), Auth::None)
        );
        assert!(out.is_empty());
        let (step, _) = run(b"CONNECT [::1]:8080 HTTP/1.1\r\n\r\n");
        assert_eq!(
            step,
            Step::Connect(Target::Addr("[::1]:8080".parse().unwrap()), Auth::None)
        );
    }

    #[test]
    fn head_split_across_reads_and_rest_kept() {
        let mut m = HttpConnect::new(1024);
        let mut out = Vec::new();
        assert_eq!(m.receive(b"CONNECT 10.0.0.1:22 HT", &mut out), Step::More);
        let step = m.receive(b"TP/1.1\r\n\r\nSSH-2.0", &mut out);
        assert_eq!(
            step,
            Step::Connect(Target::Addr("10.0.0.1:22".parse().unwrap()), Auth::None)
        );
        assert_eq!(m.take_rest(), b"SSH-2.0");
    }

    #[test]
    fn basic_credentials_are_offered() {
        // alice:s3cret
        let (step, _) =
            run(b"CONNECT h:1 HTTP/1.1\r\nProxy-Authorization: Basic YWxpY2U6czNjcmV0\r\n\r\n");
        let creds = Credentials {
            user: "alice".into(),
            password: "s3cret".into(),
        };
        assert_eq!(
            step,
            Step::Connect(Target::Name("h".into(), 1), Auth::Offered(creds))
        );
        let (step, _) = run(b"CONNECT h:1 HTTP/1.1\r\nProxy-Authorization: Bearer x\r\n\r\n");
        assert_eq!(step, Step::Connect(Target::Name("h".into(), 1), Auth::None));
    }

    #[test]
    fn bad_requests_get_their_status() {
        for (input, status) in [
            (&b"CONNECT example.com HTTP/1.1\r\n\r\n"[..], "400 "),
            (b"CONNECT a b:1 HTTP/1.1\r\n\r\n", "400 "),
            (b"CONNECT /x:1 HTTP/1.1\r\n\r\n", "400 "),
            (b"CONNECT h:99999 HTTP/1.1\r\n\r\n", "400 "),
            (b"\x00\x01garbage\r\n\r\n", "400 "),
        ] {
            let (step, out) = run(input);
            assert_eq!(step, Step::Close, "{input:?}");
            assert!(out.starts_with(&format!("HTTP/1.1 {status}")), "{out}");
        }
    }

    #[test]
    fn other_methods_ask_for_forwarding_and_keep_the_head() {
        let mut m = HttpConnect::new(1024);
        let mut out = Vec::new();
        assert_eq!(
            m.receive(b"GET http://a/ HTTP/1.1\r\n", &mut out),
            Step::More
        );
        assert_eq!(m.receive(b"Host: a\r\n\r\nrest", &mut out), Step::Forward);
        assert!(out.is_empty());
        assert_eq!(
            m.take_rest(),
            b"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\nrest"
        );
    }

    #[test]
    fn head_limit() {
        let head = |pad: usize| {
            let mut h = b"CONNECT h:1 HTTP/1.1\r\nX: ".to_vec();
            h.extend(std::iter::repeat_n(b'a', pad));
            h.extend_from_slice(b"\r\n\r\n");
            h
        };
        let at = head(1024 - head(0).len());
        assert_eq!(at.len(), 1024);
        assert!(matches!(run(&at).0, Step::Connect(..)));
        let (step, out) = run(&head(1025 - head(0).len()));
        assert_eq!(step, Step::Close);
        assert!(out.starts_with("HTTP/1.1 431 "));
        // Unfinished and past the bound: refused without waiting for the end.
        let (step, out) = run(&[b'a'; 1025]);
        assert_eq!(step, Step::Close);
        assert!(out.starts_with("HTTP/1.1 431 ") || out.starts_with("HTTP/1.1 400 "));
    }

    #[test]
    fn failures_map_to_statuses() {
        for (why, status) in [
            (Failure::NotAllowed, "403"),
            (Failure::AuthRequired, "407"),
            (Failure::TimedOut, "504"),
            (Failure::Refused, "502"),
            (Failure::HostUnreachable, "502"),
        ] {
            let mut out = Vec::new();
            HttpConnect::new(64).failed(why, &mut out);
            let out = String::from_utf8(out).unwrap();
            assert!(out.starts_with(&format!("HTTP/1.1 {status} ")), "{out}");
        }
        let mut out = Vec::new();
        HttpConnect::new(64).failed(Failure::AuthRequired, &mut out);
        assert!(String::from_utf8(out)
            .unwrap()
            .contains("Proxy-Authenticate: Basic"));
    }
}
