//! The client side of an HTTP/1.1 connection as a sans-IO machine: [`ClientConn`] knows
//! which exchange is in flight, reads response heads past interim (1xx) ones within a
//! bound, and decides whether the connection may carry another request. The I/O (the
//! stream, the upload, the response body's reads) is `client::conn`'s; the body is read
//! with the shared `BodyDecoder`.

use super::client::ResponseLimits;
use super::client::{encode_request_head, parse_response_head, ResponseError, ResponseHead};
use super::framing::BodyFraming;
use super::parse::list_elements;
use http::header::CONNECTION;
use http::{HeaderMap, Method, StatusCode, Version};
use std::fmt;

/// Why reading a response head failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeadError {
    Malformed(ResponseError),
    /// Interim responses past the head bound, with no final one.
    EndlessInterim,
}

impl fmt::Display for HeadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeadError::Malformed(e) => e.fmt(f),
            HeadError::EndlessInterim => f.write_str("interim (1xx) responses without end"),
        }
    }
}

impl std::error::Error for HeadError {}

/// Where the connection is in its exchanges.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Ready for a request.
    Idle,
    /// A request went (or is going) out; its response head is awaited. `interim`: bytes
    /// of 1xx heads skipped so far.
    AwaitingHead {
        method: Method,
        request_keeps_alive: bool,
        interim: usize,
    },
    /// The response body is being read; `keep_alive`: request and response allow reuse.
    Body { keep_alive: bool },
    /// No further exchange: the connection is to be closed.
    Done,
}

/// One client connection's HTTP/1 state.
#[derive(Debug)]
pub(crate) struct ClientConn {
    state: State,
    limits: ResponseLimits,
    title_case: bool,
}

impl ClientConn {
    pub(crate) fn new(limits: ResponseLimits, title_case: bool) -> ClientConn {
        ClientConn {
            state: State::Idle,
            limits,
            title_case,
        }
    }

    /// Starts an exchange: the request head (its body framed as `framing`) into `out`.
    /// `target` is origin-form (`/path?query`).
    pub(crate) fn start(
        &mut self,
        method: &Method,
        target: &str,
        version: Version,
        headers: &HeaderMap,
        framing: BodyFraming,
        out: &mut Vec<u8>,
    ) {
        debug_assert_eq!(self.state, State::Idle, "one exchange at a time");
        encode_request_head(
            method,
            target,
            version,
            headers,
            framing,
            self.title_case,
            out,
        );
        self.state = State::AwaitingHead {
            method: method.clone(),
            request_keeps_alive: request_keeps_alive(version, headers),
            interim: 0,
        };
    }

    /// Reads the response head from the start of `buf`, skipping interim (1xx) responses
    /// other than 101: the bytes used, and the final head once it is complete.
    pub(crate) fn read_head(
        &mut self,
        buf: &[u8],
    ) -> Result<(usize, Option<ResponseHead>), HeadError> {
        let State::AwaitingHead {
            method,
            request_keeps_alive,
            interim,
        } = &mut self.state
        else {
            return Ok((0, None));
        };
        let mut used = 0;
        loop {
            let parsed = parse_response_head(&buf[used..], method, &self.limits);
            let (head, n) = match parsed {
                Ok(Some(found)) => found,
                Ok(None) => return Ok((used, None)),
                Err(e) => {
                    self.state = State::Done;
                    return Err(HeadError::Malformed(e));
                }
            };
            used += n;
            if !head.status.is_informational() || head.status == StatusCode::SWITCHING_PROTOCOLS {
                // An upgraded connection is not reused (the upgrade is not handed out).
                let keep_alive = *request_keeps_alive
                    && head.keep_alive
                    && head.status != StatusCode::SWITCHING_PROTOCOLS;
                self.state = State::Body { keep_alive };
                return Ok((used, Some(head)));
            }
            // Interim responses are bounded like one head.
            *interim += n;
            if *interim > self.limits.max_head_bytes {
                self.state = State::Done;
                return Err(HeadError::EndlessInterim);
            }
        }
    }

    /// Whether request and response allow another exchange (so far).
    pub(crate) fn keeps_alive(&self) -> bool {
        matches!(self.state, State::Body { keep_alive: true })
    }

    /// The response body has ended: whether the connection may go back to its pool. It
    /// may if request and response allow it, the request was all sent and nothing was
    /// read past the response (`extra` bytes).
    pub(crate) fn finish(&mut self, request_all_sent: bool, extra: usize) -> bool {
        let reusable = self.keeps_alive() && request_all_sent && extra == 0;
        self.state = if reusable { State::Idle } else { State::Done };
        reusable
    }

    /// The exchange failed: the connection is not reused.
    pub(crate) fn fail(&mut self) {
        self.state = State::Done;
    }
}

/// Whether a request lets the connection persist (RFC 9112 §9.3): HTTP/1.1 unless it says
/// `Connection: close`, HTTP/1.0 only if it says `keep-alive`.
fn request_keeps_alive(version: Version, headers: &HeaderMap) -> bool {
    let (mut close, mut keep_alive) = (false, false);
    for v in headers.get_all(CONNECTION) {
        for token in list_elements(v.as_bytes()) {
            close |= token.eq_ignore_ascii_case(b"close");
            keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
        }
    }
    !close && (version == Version::HTTP_11 || keep_alive)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn started(version: Version, connection: Option<&'static str>) -> ClientConn {
        let mut c = ClientConn::new(ResponseLimits::default(), false);
        let mut headers = HeaderMap::new();
        if let Some(v) = connection {
            headers.insert(CONNECTION, HeaderValue::from_static(v));
        }
        let mut out = Vec::new();
        c.start(
            &Method::GET,
            "/",
            version,
            &headers,
            BodyFraming::Empty,
            &mut out,
        );
        assert!(out.starts_with(b"GET / HTTP/1."));
        c
    }

    #[test]
    fn interim_heads_are_skipped_then_the_final_one_read() {
        let mut c = started(Version::HTTP_11, None);
        let input = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n\
                      HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi";
        let (used, head) = c.read_head(input).unwrap();
        let head = head.unwrap();
        assert_eq!(head.status, 200);
        assert_eq!(&input[used..], b"hi");
        assert!(c.keeps_alive());
        assert!(c.finish(true, 0));
        // Idle again: another exchange may start.
        let mut out = Vec::new();
        c.start(
            &Method::GET,
            "/2",
            Version::HTTP_11,
            &HeaderMap::new(),
            BodyFraming::Empty,
            &mut out,
        );
    }

    #[test]
    fn a_head_in_pieces_uses_nothing_until_complete() {
        let mut c = started(Version::HTTP_11, None);
        let input = b"HTTP/1.1 204 No Content\r\n\r\n";
        for end in 1..input.len() {
            assert!(matches!(c.read_head(&input[..end]), Ok((0, None))));
        }
        assert_eq!(c.read_head(input).unwrap().0, input.len());
    }

    #[test]
    fn endless_interim_responses_are_an_error() {
        let mut c = ClientConn::new(
            ResponseLimits {
                max_head_bytes: 100,
                ..ResponseLimits::default()
            },
            false,
        );
        let mut out = Vec::new();
        c.start(
            &Method::GET,
            "/",
            Version::HTTP_11,
            &HeaderMap::new(),
            BodyFraming::Empty,
            &mut out,
        );
        let flood = b"HTTP/1.1 100 Continue\r\n\r\n".repeat(5);
        assert!(matches!(
            c.read_head(&flood),
            Err(HeadError::EndlessInterim)
        ));
        assert!(!c.finish(true, 0));
    }

    #[test]
    fn reuse_needs_both_sides_the_whole_request_and_nothing_extra() {
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        let mut c = started(Version::HTTP_11, Some("close"));
        c.read_head(ok).unwrap();
        assert!(!c.finish(true, 0), "the request said close");

        let mut c = started(Version::HTTP_10, None);
        c.read_head(ok).unwrap();
        assert!(!c.finish(true, 0), "HTTP/1.0 without keep-alive");
        let mut c = started(Version::HTTP_10, Some("keep-alive"));
        c.read_head(ok).unwrap();
        assert!(c.finish(true, 0), "HTTP/1.0 with keep-alive");

        let mut c = started(Version::HTTP_11, None);
        c.read_head(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\r\n")
            .unwrap();
        assert!(!c.finish(true, 0), "the response said close");

        let mut c = started(Version::HTTP_11, None);
        c.read_head(ok).unwrap();
        assert!(!c.finish(false, 0), "the request was not all sent");
        let mut c = started(Version::HTTP_11, None);
        c.read_head(ok).unwrap();
        assert!(!c.finish(true, 3), "bytes past the response");

        let mut c = started(Version::HTTP_11, None);
        c.read_head(
            b"HTTP/1.1 101 Switching Protocols\r\nupgrade: x\r\nconnection: upgrade\r\n\r\n",
        )
        .unwrap();
        assert!(!c.finish(true, 0), "an upgraded connection");
    }

    #[test]
    fn a_malformed_head_ends_the_connection() {
        let mut c = started(Version::HTTP_11, None);
        assert!(matches!(
            c.read_head(b"HTTP/1.1 2000 Nope\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
        assert!(!c.finish(true, 0));
    }
}
