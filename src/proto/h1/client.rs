//! The client side of the codec: request heads out (`encode_request_head`), response
//! heads in (`parse_response_head`, RFC 9112 §4, §6.3). Bodies reuse the server side's
//! pieces: `ChunkedDecoder` for chunked responses, `encode_chunk*` for chunked requests.

use std::fmt;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Version};

use super::encode::{put_dec, put_header};
use super::framing::BodyFraming;
use super::parse::{
    copy_head, list_elements, parse_content_length, HeaderSlots, TransferEncodingState,
};

/// Bounds on one response head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseLimits {
    /// Longest head (status line, header lines, final empty line), in bytes.
    pub max_head_bytes: usize,
    /// Most header field lines.
    pub max_headers: usize,
    /// Accept obsolete line folding (a header line starting with whitespace continues
    /// the previous one; RFC 9112 §5.2 lets a client accept it).
    pub allow_obsolete_folding: bool,
}

impl Default for ResponseLimits {
    fn default() -> Self {
        ResponseLimits {
            max_head_bytes: 64 * 1024,
            max_headers: 100,
            allow_obsolete_folding: false,
        }
    }
}

/// Why a response head was rejected. The connection cannot be trusted after any of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResponseError {
    /// The status line is not `HTTP/1.x SP 3DIGIT SP reason CRLF`.
    InvalidStatusLine,
    /// A header field name or value with a forbidden byte, or a bad line ending.
    InvalidHeader,
    /// More than `ResponseLimits::max_headers` header lines.
    TooManyHeaders,
    /// The head is longer than `ResponseLimits::max_head_bytes`.
    HeadTooLarge,
    /// A Content-Length that is not a number, or several that differ.
    InvalidContentLength,
    /// `chunked` applied more than once.
    InvalidTransferEncoding,
}

impl fmt::Display for ResponseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ResponseError::InvalidStatusLine => "malformed status line",
            ResponseError::InvalidHeader => "malformed header field",
            ResponseError::TooManyHeaders => "too many header fields",
            ResponseError::HeadTooLarge => "response head too large",
            ResponseError::InvalidContentLength => "invalid or conflicting Content-Length",
            ResponseError::InvalidTransferEncoding => "chunked applied more than once",
        })
    }
}

impl std::error::Error for ResponseError {}

/// A parsed response head.
#[derive(Debug)]
pub(crate) struct ResponseHead {
    pub status: StatusCode,
    pub version: Version,
    /// All header fields as received (names lowercased).
    pub headers: HeaderMap,
    pub framing: BodyFraming,
    /// Whether the connection may carry another request once this body is read.
    pub keep_alive: bool,
}

/// Parses one response head at the start of `buf`, for a request with `method`.
///
/// `Ok(None)`: incomplete, read more and call again with the whole buffer.
/// `Ok(Some((head, consumed)))`: `buf[..consumed]` was the head; the body follows.
/// Interim (1xx) responses come back like any other: the caller skips them.
pub(crate) fn parse_response_head(
    buf: &[u8],
    method: &Method,
    limits: &ResponseLimits,
) -> Result<Option<(ResponseHead, usize)>, ResponseError> {
    let window = &buf[..buf.len().min(limits.max_head_bytes)];
    let mut slots = HeaderSlots::new(limits.max_headers, limits.max_head_bytes);
    let mut res = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default()
        .allow_obsolete_multiline_headers_in_responses(limits.allow_obsolete_folding)
        .parse_response_with_uninit_headers(&mut res, window, slots.get());
    match parsed {
        Ok(httparse::Status::Complete(n)) => Ok(Some((
            build_head(&res, &window[..n], method, limits.allow_obsolete_folding)?,
            n,
        ))),
        Ok(httparse::Status::Partial) if buf.len() > limits.max_head_bytes => {
            Err(ResponseError::HeadTooLarge)
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err(ResponseError::TooManyHeaders),
        Err(
            httparse::Error::HeaderName | httparse::Error::HeaderValue | httparse::Error::NewLine,
        ) => Err(ResponseError::InvalidHeader),
        Err(_) => Err(ResponseError::InvalidStatusLine),
    }
}

/// `folded`: obsolete line folding was allowed, so a value may hold CR/LF (without it,
/// httparse refuses a folded line and no value holds either).
fn build_head(
    res: &httparse::Response<'_, '_>,
    head: &[u8],
    method: &Method,
    folded: bool,
) -> Result<ResponseHead, ResponseError> {
    let (Some(code), Some(minor)) = (res.code, res.version) else {
        return Err(ResponseError::InvalidStatusLine);
    };
    let status = StatusCode::from_u16(code).map_err(|_| ResponseError::InvalidStatusLine)?;
    let version = if minor == 1 {
        Version::HTTP_11
    } else {
        Version::HTTP_10
    };

    // One copy of the head; header values are slices of it.
    let shared = copy_head(head);
    let base = head.as_ptr() as usize;
    let share = |s: &[u8]| {
        let start = s.as_ptr() as usize - base;
        shared.slice(start..start + s.len())
    };

    // Room for one field more than came: a proxy adds its `Via`, which would otherwise
    // grow (rehash) a full map.
    let mut headers = crate::proto::header_maps::take(res.headers.len() + 1)
        .map_err(|_| ResponseError::TooManyHeaders)?;
    let mut content_length: Option<u64> = None;
    let mut te = TransferEncodingState::default();
    let (mut close, mut keep_alive) = (false, false);
    for h in res.headers.iter() {
        let name =
            HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| ResponseError::InvalidHeader)?;
        // A folded value holds CR/LF, which HeaderValue refuses: fold it to spaces.
        let value = if folded && h.value.iter().any(|&b| b == b'\r' || b == b'\n') {
            let unfolded: Vec<u8> = h
                .value
                .iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
                .collect();
            HeaderValue::from_bytes(&unfolded)
        } else {
            Ok(super::parse::header_value(share(h.value)))
        }
        .map_err(|_| ResponseError::InvalidHeader)?;
        if name == header::CONTENT_LENGTH {
            let n = parse_content_length(value.as_bytes())
                .map_err(|_| ResponseError::InvalidContentLength)?;
            if content_length.is_some_and(|prev| prev != n) {
                return Err(ResponseError::InvalidContentLength);
            }
            content_length = Some(n);
        } else if name == header::TRANSFER_ENCODING {
            te.add(value.as_bytes());
        } else if name == header::CONNECTION {
            for token in list_elements(value.as_bytes()) {
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        }
        headers
            .try_append(name, value)
            .map_err(|_| ResponseError::TooManyHeaders)?;
    }

    let bodiless = *method == Method::HEAD
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    // Transfer-Encoding overrides Content-Length; a coding other than a final chunked
    // leaves the end to the connection's close (RFC 9112 §6.3, items 3 and 4).
    let framing = if bodiless {
        BodyFraming::Empty
    } else if te.present {
        if te.chunked_more_than_once() {
            return Err(ResponseError::InvalidTransferEncoding);
        }
        if te.chunked_last() {
            BodyFraming::Chunked
        } else {
            BodyFraming::UntilClose
        }
    } else {
        match content_length {
            Some(0) => BodyFraming::Empty,
            Some(n) => BodyFraming::Length(n),
            None => BodyFraming::UntilClose,
        }
    };
    // Both framings at once is how responses get smuggled, and Transfer-Encoding has no
    // place in HTTP/1.0: read this one, then close (RFC 9112 §6.1, §6.3).
    let reusable_framing = framing != BodyFraming::UntilClose
        && !(te.present && (content_length.is_some() || version == Version::HTTP_10) && !bodiless);
    let keep_alive = reusable_framing
        && !close
        && (version == Version::HTTP_11 || keep_alive)
        && status != StatusCode::SWITCHING_PROTOCOLS;
    Ok(ResponseHead {
        status,
        version,
        headers,
        framing,
        keep_alive,
    })
}

impl BodyFraming {
    /// The framing for a body whose exact size is `exact` (if known) on a request with
    /// `method`, `version` and `headers`. A known size is announced as it is (replacing
    /// any Content-Length the caller set); for an unknown size, the caller's
    /// Content-Length is used (the body must then match it), else the body is chunked.
    /// `None`: an HTTP/1.0 body of unknown length, which nothing can frame (no chunked
    /// coding in HTTP/1.0, RFC 9112 §6.1).
    pub(crate) fn choose(
        method: &Method,
        version: Version,
        headers: &HeaderMap,
        exact: Option<u64>,
    ) -> Option<Self> {
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| parse_content_length(v.as_bytes()).ok());
        Some(match (exact, declared) {
            (Some(0), _) if !expects_body(method) => BodyFraming::Empty,
            (Some(n), _) => BodyFraming::Length(n),
            (None, Some(n)) => BodyFraming::Length(n),
            (None, None) if version == Version::HTTP_10 => return None,
            (None, None) => BodyFraming::Chunked,
        })
    }
}

/// Methods whose empty body is still announced with `Content-Length: 0` (as hyper and
/// browsers do), since servers may wait for a body otherwise.
fn expects_body(method: &Method) -> bool {
    matches!(*method, Method::POST | Method::PUT | Method::PATCH)
}

/// Encodes a request head: `method target version`, the caller's headers (framing
/// headers replaced by `framing`'s), the final CRLF. `target` is origin-form
/// (`/path?query`).
pub(crate) fn encode_request_head(
    method: &Method,
    target: &str,
    version: Version,
    headers: &HeaderMap,
    framing: BodyFraming,
    title_case: bool,
    out: &mut Vec<u8>,
) {
    let mut need = method.as_str().len() + target.len() + 12 + 40;
    for (name, value) in headers.iter() {
        need += name.as_str().len() + value.len() + 4;
    }
    out.reserve(need);
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(if version == Version::HTTP_10 {
        b" HTTP/1.0\r\n"
    } else {
        b" HTTP/1.1\r\n"
    });
    for (name, value) in headers.iter() {
        if *name == header::CONTENT_LENGTH || *name == header::TRANSFER_ENCODING {
            continue;
        }
        if title_case {
            put_title_case(name.as_str().as_bytes(), out);
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        } else {
            put_header(name.as_str().as_bytes(), value.as_bytes(), out);
        }
    }
    match framing {
        // A request body is never delimited by closing (`choose` never picks it).
        BodyFraming::Empty | BodyFraming::UntilClose => {}
        BodyFraming::Length(n) => {
            out.extend_from_slice(if title_case {
                b"Content-Length: "
            } else {
                b"content-length: "
            });
            put_dec(n, out);
            out.extend_from_slice(b"\r\n");
        }
        BodyFraming::Chunked => out.extend_from_slice(if title_case {
            b"Transfer-Encoding: chunked\r\n"
        } else {
            b"transfer-encoding: chunked\r\n"
        }),
    }
    out.extend_from_slice(b"\r\n");
}

/// `content-type` as `Content-Type`.
fn put_title_case(name: &[u8], out: &mut Vec<u8>) {
    let mut upper = true;
    for &b in name {
        out.push(if upper { b.to_ascii_uppercase() } else { b });
        upper = b == b'-';
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &[u8]) -> ResponseHead {
        let (head, n) = parse_response_head(raw, &Method::GET, &ResponseLimits::default())
            .unwrap()
            .unwrap();
        assert_eq!(&raw[n..], b"BODY");
        head
    }

    #[test]
    fn framing_follows_rfc_9112_section_6_3() {
        let h = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nBODY");
        assert_eq!(h.framing, BodyFraming::Length(4));
        assert!(h.keep_alive);
        let h = parse(b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\nBODY");
        assert_eq!(h.framing, BodyFraming::Chunked);
        let h = parse(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked, gzip\r\n\r\nBODY");
        assert_eq!(h.framing, BodyFraming::UntilClose);
        assert!(!h.keep_alive);
        let h = parse(b"HTTP/1.1 200 OK\r\n\r\nBODY");
        assert_eq!(h.framing, BodyFraming::UntilClose);
        assert!(!h.keep_alive);
        // Both framings: chunked wins, and the connection is not reused.
        let h = parse(
            b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\nBODY",
        );
        assert_eq!(h.framing, BodyFraming::Chunked);
        assert!(!h.keep_alive);
        for status in [b"204", b"304", b"100"] {
            let mut raw = b"HTTP/1.1 ".to_vec();
            raw.extend_from_slice(status);
            raw.extend_from_slice(b" X\r\ncontent-length: 9\r\n\r\nBODY");
            assert_eq!(parse(&raw).framing, BodyFraming::Empty);
        }
        let (h, _) = parse_response_head(
            b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n",
            &Method::HEAD,
            &ResponseLimits::default(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(h.framing, BodyFraming::Empty);
        assert!(h.keep_alive);
    }

    #[test]
    fn connection_reuse_by_version_and_connection_header() {
        assert!(
            !parse(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\r\nBODY")
                .keep_alive
        );
        assert!(!parse(b"HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\nBODY").keep_alive);
        let h =
            parse(b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\ncontent-length: 0\r\n\r\nBODY");
        assert!(h.keep_alive);
        assert_eq!(h.version, Version::HTTP_10);
        assert!(
            !parse(b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\r\nBODY")
                .keep_alive
        );
    }

    #[test]
    fn bad_heads_are_refused() {
        let limits = ResponseLimits::default();
        let bad: [(&[u8], ResponseError); 6] = [
            (
                b"HTTP/1.1 2000 OK\r\n\r\n",
                ResponseError::InvalidStatusLine,
            ),
            (b"garbage garbage\r\n\r\n", ResponseError::InvalidStatusLine),
            (
                b"HTTP/1.1 200 OK\r\nbad name: x\r\n\r\n",
                ResponseError::InvalidHeader,
            ),
            (
                b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n",
                ResponseError::InvalidContentLength,
            ),
            (
                b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n",
                ResponseError::InvalidContentLength,
            ),
            (
                b"HTTP/1.1 200 OK\r\n folded: x\r\n\r\n",
                ResponseError::InvalidHeader,
            ),
        ];
        for (raw, want) in bad {
            let got = parse_response_head(raw, &Method::GET, &limits).unwrap_err();
            assert_eq!(got, want, "{}", String::from_utf8_lossy(raw));
        }
        assert!(
            parse_response_head(b"HTTP/1.1 200 OK\r\ncontent-le", &Method::GET, &limits)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn limits_are_enforced_at_their_bounds() {
        let head = |n: usize| {
            let mut raw = b"HTTP/1.1 200 OK\r\n".to_vec();
            for i in 0..n {
                raw.extend_from_slice(format!("x-{i}: v\r\n").as_bytes());
            }
            raw.extend_from_slice(b"\r\n");
            raw
        };
        let limits = ResponseLimits {
            max_headers: 40,
            ..ResponseLimits::default()
        };
        assert!(parse_response_head(&head(40), &Method::GET, &limits)
            .unwrap()
            .is_some());
        assert_eq!(
            parse_response_head(&head(41), &Method::GET, &limits).unwrap_err(),
            ResponseError::TooManyHeaders
        );
        let raw = head(10);
        let limits = ResponseLimits {
            max_head_bytes: raw.len(),
            ..ResponseLimits::default()
        };
        assert!(parse_response_head(&raw, &Method::GET, &limits)
            .unwrap()
            .is_some());
        let limits = ResponseLimits {
            max_head_bytes: raw.len() - 1,
            ..ResponseLimits::default()
        };
        assert_eq!(
            parse_response_head(&raw, &Method::GET, &limits).unwrap_err(),
            ResponseError::HeadTooLarge
        );
    }

    #[test]
    fn folded_headers_only_when_allowed() {
        let raw = b"HTTP/1.1 200 OK\r\nx-a: one\r\n two\r\ncontent-length: 0\r\n\r\n";
        let limits = ResponseLimits {
            allow_obsolete_folding: true,
            ..ResponseLimits::default()
        };
        let (h, _) = parse_response_head(raw, &Method::GET, &limits)
            .unwrap()
            .unwrap();
        let v = h.headers["x-a"].to_str().unwrap();
        assert!(v.starts_with("one") && v.ends_with("two"), "{v:?}");
        assert!(parse_response_head(raw, &Method::GET, &ResponseLimits::default()).is_err());
    }

    #[test]
    fn request_heads_carry_exactly_one_framing() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("h"));
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("99"));
        headers.insert("x-custom-name", HeaderValue::from_static("v"));
        let mut out = Vec::new();
        let framing =
            BodyFraming::choose(&Method::POST, Version::HTTP_11, &headers, Some(3)).unwrap();
        encode_request_head(
            &Method::POST,
            "/p?q",
            Version::HTTP_11,
            &headers,
            framing,
            false,
            &mut out,
        );
        assert_eq!(
            out,
            b"POST /p?q HTTP/1.1\r\nhost: h\r\nx-custom-name: v\r\ncontent-length: 3\r\n\r\n"
        );
        out.clear();
        let framing =
            BodyFraming::choose(&Method::PUT, Version::HTTP_11, &HeaderMap::new(), None).unwrap();
        encode_request_head(
            &Method::PUT,
            "/",
            Version::HTTP_11,
            &headers,
            framing,
            true,
            &mut out,
        );
        assert_eq!(
            out,
            b"PUT / HTTP/1.1\r\nHost: h\r\nX-Custom-Name: v\r\nTransfer-Encoding: chunked\r\n\r\n"
        );
        assert_eq!(
            BodyFraming::choose(&Method::GET, Version::HTTP_11, &HeaderMap::new(), Some(0)),
            Some(BodyFraming::Empty)
        );
        assert_eq!(
            BodyFraming::choose(&Method::POST, Version::HTTP_11, &HeaderMap::new(), Some(0)),
            Some(BodyFraming::Length(0))
        );
        assert_eq!(
            BodyFraming::choose(&Method::POST, Version::HTTP_11, &headers, None),
            Some(BodyFraming::Length(99))
        );
        assert_eq!(
            BodyFraming::choose(&Method::POST, Version::HTTP_10, &HeaderMap::new(), None),
            None
        );
    }
}
