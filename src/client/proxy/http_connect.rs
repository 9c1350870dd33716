//! The client side of HTTP `CONNECT` (RFC 9110 §9.3.6) as a sans-IO machine: the request
//! out, the proxy's response head in (parsed by the client's own HTTP/1 codec, with its
//! limits); a 2xx opens the tunnel, anything else is the proxy's refusal.

use crate::proto::h1::client::{parse_response_head, ResponseError, ResponseLimits};
use crate::proto::tunnel::ClientHandshake;
use http::{HeaderValue, Method, StatusCode};
use std::fmt;

/// Why a `CONNECT` did not open a tunnel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ConnectError {
    /// The proxy answered with a status other than 2xx (407: it wants credentials, or
    /// refused the ones sent).
    Status {
        status: StatusCode,
        sent_credentials: bool,
    },
    /// The response head is not HTTP/1, or over the limits.
    Malformed(ResponseError),
    /// The proxy closed before its response head was complete.
    Truncated,
    /// The proxy sent bytes after its 2xx head before the client spoke.
    Unasked,
}

impl ConnectError {
    /// The proxy wants (other) credentials: 407, or 401 (which tinyproxy answers; before
    /// the tunnel opens only the proxy can be speaking).
    pub fn is_auth(&self) -> bool {
        matches!(self, ConnectError::Status { status, .. } if is_auth_status(*status))
    }
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Status {
                status,
                sent_credentials,
            } => {
                write!(f, "the HTTP proxy answered CONNECT with {status}")?;
                if is_auth_status(*status) {
                    f.write_str(if *sent_credentials {
                        ": it refused the credentials"
                    } else {
                        ": it requires credentials (user:password@ in the proxy URL)"
                    })?;
                }
                Ok(())
            }
            ConnectError::Malformed(e) => write!(f, "the HTTP proxy's CONNECT response: {e}"),
            ConnectError::Truncated => f.write_str(
                "the HTTP proxy closed the connection before its CONNECT response was complete",
            ),
            ConnectError::Unasked => {
                f.write_str("the HTTP proxy sent bytes after its CONNECT response, unasked")
            }
        }
    }
}

impl std::error::Error for ConnectError {}

fn is_auth_status(status: StatusCode) -> bool {
    status == StatusCode::PROXY_AUTHENTICATION_REQUIRED || status == StatusCode::UNAUTHORIZED
}

/// End of a response head.
const HEAD_END: &[u8] = b"\r\n\r\n";

/// A `CONNECT host:port` handshake.
pub(crate) struct HttpConnect {
    request: Vec<u8>,
    sent_credentials: bool,
    limits: ResponseLimits,
    input: Vec<u8>,
}

impl HttpConnect {
    /// `authority` is `host:port` (an IPv6 host in brackets).
    pub fn new(
        authority: &str,
        authorization: Option<&HeaderValue>,
        limits: ResponseLimits,
    ) -> HttpConnect {
        let mut request = Vec::with_capacity(64 + 2 * authority.len());
        for part in [
            "CONNECT ",
            authority,
            " HTTP/1.1\r\nHost: ",
            authority,
            "\r\n",
        ] {
            request.extend_from_slice(part.as_bytes());
        }
        if let Some(v) = authorization {
            request.extend_from_slice(b"Proxy-Authorization: ");
            request.extend_from_slice(v.as_bytes());
            request.extend_from_slice(b"\r\n");
        }
        request.extend_from_slice(b"\r\n");
        HttpConnect {
            request,
            sent_credentials: authorization.is_some(),
            limits,
            input: Vec::new(),
        }
    }
}

impl ClientHandshake for HttpConnect {
    type Error = ConnectError;

    fn start(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.request);
    }

    /// What can still complete `\r\n\r\n`: a read never takes a byte past the head
    /// (unless the proxy ends lines with a bare LF, which `receive` catches).
    fn want(&self) -> usize {
        let kept = (1..HEAD_END.len())
            .rev()
            .find(|&k| self.input.ends_with(&HEAD_END[..k]))
            .unwrap_or(0);
        HEAD_END.len() - kept
    }

    fn receive(&mut self, input: &[u8], _out: &mut Vec<u8>) -> Result<bool, ConnectError> {
        if input.is_empty() {
            return Err(ConnectError::Truncated);
        }
        self.input.extend_from_slice(input);
        loop {
            let Some((head, used)) =
                parse_response_head(&self.input, &Method::CONNECT, &self.limits)
                    .map_err(ConnectError::Malformed)?
            else {
                return Ok(false);
            };
            if head.status.is_informational() {
                self.input.drain(..used);
                continue;
            }
            if !head.status.is_success() {
                return Err(ConnectError::Status {
                    status: head.status,
                    sent_credentials: self.sent_credentials,
                });
            }
            if used < self.input.len() {
                return Err(ConnectError::Unasked);
            }
            return Ok(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(auth: Option<&str>) -> HttpConnect {
        let auth = auth.map(|a| HeaderValue::from_str(a).unwrap());
        HttpConnect::new("h.test:443", auth.as_ref(), ResponseLimits::default())
    }

    /// Feeds `reply` as the driver would: at most `want` bytes at a time.
    fn feed(m: &mut HttpConnect, reply: &[u8]) -> Result<bool, ConnectError> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < reply.len() {
            let n = m.want().min(reply.len() - at);
            assert!(n >= 1);
            if m.receive(&reply[at..at + n], &mut out)? {
                assert_eq!(at + n, reply.len(), "open before the reply's end");
                return Ok(true);
            }
            at += n;
        }
        Ok(false)
    }

    #[test]
    fn the_request_names_the_target_and_carries_credentials() {
        let mut out = Vec::new();
        machine(Some("Basic YTpi")).start(&mut out);
        assert_eq!(
            out,
            b"CONNECT h.test:443 HTTP/1.1\r\nHost: h.test:443\r\n\
              Proxy-Authorization: Basic YTpi\r\n\r\n"
        );
    }

    #[test]
    fn a_2xx_opens_the_tunnel_without_reading_past_its_head() {
        let mut m = machine(None);
        let reply = b"HTTP/1.1 200 Connection established\r\nProxy-agent: x\r\n\r\n";
        assert_eq!(feed(&mut m, reply), Ok(true));
        // An interim response first is skipped.
        let mut m = machine(None);
        let reply = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\n\r\n";
        assert_eq!(feed(&mut m, reply), Ok(true));
    }

    #[test]
    fn proxy_refusals_keep_their_status() {
        for (reply, status, auth) in [
            (
                &b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n"[..],
                407,
                false,
            ),
            (
                b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 3\r\n\r\nbad",
                502,
                false,
            ),
            (b"HTTP/1.1 403 Forbidden\r\n\r\n", 403, true),
            (b"HTTP/1.0 401 Unauthorized\r\n\r\n", 401, true),
        ] {
            let mut m = machine(auth.then_some("Basic YTpi"));
            let e = feed(&mut m, reply).unwrap_err();
            assert_eq!(
                e,
                ConnectError::Status {
                    status: StatusCode::from_u16(status).unwrap(),
                    sent_credentials: auth
                }
            );
            assert_eq!(e.is_auth(), status == 407 || status == 401);
        }
        let e = ConnectError::Status {
            status: StatusCode::PROXY_AUTHENTICATION_REQUIRED,
            sent_credentials: true,
        };
        assert!(e.to_string().contains("refused the credentials"), "{e}");
    }

    #[test]
    fn truncated_garbage_and_oversized_heads() {
        let mut m = machine(None);
        assert_eq!(feed(&mut m, b"HTTP/1.1 200 OK\r\n"), Ok(false));
        assert_eq!(
            m.receive(&[], &mut Vec::new()),
            Err(ConnectError::Truncated)
        );
        let mut m = machine(None);
        assert!(matches!(
            feed(&mut m, b"\x05\x00garbage\r\n\r\n"),
            Err(ConnectError::Malformed(_))
        ));
        // Bare-LF lines let a read take bytes past the head: they are not the tunnel's.
        let mut m = machine(None);
        let mut out = Vec::new();
        assert_eq!(m.receive(b"HTTP/1.1 200 OK\n", &mut out), Ok(false));
        assert_eq!(m.receive(b"\nSSH-", &mut out), Err(ConnectError::Unasked));
    }

    proptest::proptest! {
        /// Any bytes, and valid responses cut anywhere: no panic, and reads of any size
        /// (within `want`) end the same way.
        #[test]
        fn any_reply_any_split(
            garbage in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..96),
            cut in 0usize..60,
            split in 1usize..6,
        ) {
            let valid = b"HTTP/1.1 200 OK\r\nX: y\r\n\r\n";
            let cut_valid = &valid[..cut.min(valid.len())];
            for reply in [&garbage[..], cut_valid] {
                let outcome = |split: usize| {
                    let mut m = machine(None);
                    let mut at = 0;
                    loop {
                        let n = m.want().min(split).min(reply.len() - at);
                        match m.receive(&reply[at..at + n], &mut Vec::new()) {
                            Ok(false) => at += n,
                            done => return done,
                        }
                    }
                };
                proptest::prop_assert_eq!(outcome(usize::MAX), outcome(split));
            }
        }
    }

    #[test]
    fn the_head_limit_holds_at_its_edge() {
        let reply = b"HTTP/1.1 200 OK\r\nX: yy\r\n\r\n";
        let limits = |n| ResponseLimits {
            max_head_bytes: n,
            ..ResponseLimits::default()
        };
        let mut m = HttpConnect::new("h:1", None, limits(reply.len()));
        assert_eq!(feed(&mut m, reply), Ok(true));
        let mut m = HttpConnect::new("h:1", None, limits(reply.len() - 1));
        assert_eq!(
            feed(&mut m, reply),
            Err(ConnectError::Malformed(ResponseError::HeadTooLarge))
        );
    }
}
