//! Request-head parsing (RFC 9112 §2-§3, §6) on top of `httparse`, plus the framing,
//! connection and validation rules that `httparse` leaves to its caller.

use std::fmt;
use std::mem::MaybeUninit;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Uri, Version};

pub(crate) use super::body::BodyFraming;

/// Bounds on one request head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Longest head (leading empty lines, request line, header lines and the final empty
    /// line), in bytes. Longer → 431.
    pub max_head_bytes: usize,
    /// Most header field lines. More → 431.
    pub max_headers: usize,
    /// Longest request-target, in bytes. Longer → 414. (`http::Uri` itself cannot hold
    /// more than 65534 bytes, so anything longer is 414 whatever this says.)
    pub max_uri_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head_bytes: 64 * 1024,
            max_headers: 100,
            max_uri_len: 8 * 1024,
        }
    }
}

/// Why a request head (or a chunked body, see `chunked.rs`) was rejected. `status()` is
/// the response to send; after any of these the connection must be closed, since the
/// message boundaries can no longer be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParseError {
    // ---- 400 Bad Request: request line ----
    /// More than a few empty lines before the request line.
    TooManyEmptyLines,
    /// The request line is not `method SP request-target SP HTTP-version CRLF`.
    InvalidRequestLine,
    /// The method is not a valid token.
    InvalidMethod,
    /// The request-target is not a valid URI reference.
    InvalidUri,
    /// Asterisk-form with a method other than OPTIONS, authority-form with a method other
    /// than CONNECT, or CONNECT with a target that is not in authority-form.
    InvalidTargetForm,
    /// The version is not `HTTP/DIGIT.DIGIT`.
    InvalidVersion,
    /// A line ended in something other than CRLF (or a bare LF).
    InvalidLineEnding,
    // ---- 400 Bad Request: header fields ----
    /// A header field name contains a byte that is not a token character.
    InvalidHeaderName,
    /// Whitespace between a header field name and the colon (RFC 9112 §5.1).
    WhitespaceBeforeColon,
    /// A header line starts with SP or HTAB (obsolete line folding, RFC 9112 §5.2).
    ObsFold,
    /// A header field value contains a forbidden byte (a control character).
    InvalidHeaderValue,
    /// HTTP/1.1 request without a Host header field.
    MissingHost,
    /// More than one Host header field line.
    MultipleHost,
    /// A Host header field value that is not `uri-host [ ":" port ]`.
    InvalidHost,
    /// A Content-Length value that is not 1*DIGIT or does not fit in a u64.
    InvalidContentLength,
    /// Several Content-Length values that differ.
    ConflictingContentLength,
    /// Both Content-Length and Transfer-Encoding.
    ContentLengthWithTransferEncoding,
    /// Transfer-Encoding in an HTTP/1.0 request.
    TransferEncodingInHttp10,
    /// A Transfer-Encoding with no coding, or with `chunked` more than once.
    InvalidTransferEncoding,
    // ---- 400 Bad Request: chunked body ----
    /// A chunk-size that is empty or has a non-hex digit.
    InvalidChunkSize,
    /// A chunk-size that does not fit in a u64.
    ChunkSizeOverflow,
    /// A chunk extension with a forbidden byte.
    InvalidChunkExtension,
    /// A chunk-size line (size plus extensions) longer than the decoder's bound.
    ChunkLineTooLong,
    /// A chunk-size line not ended by CRLF.
    InvalidChunkLineEnding,
    /// Chunk data not followed by CRLF.
    MissingChunkDataCrlf,
    /// A malformed trailer section.
    InvalidTrailer,
    // ---- 414 URI Too Long ----
    /// The request-target is longer than `Limits::max_uri_len`.
    UriTooLong,
    // ---- 431 Request Header Fields Too Large ----
    /// The head is longer than `Limits::max_head_bytes`.
    HeadTooLarge,
    /// More than `Limits::max_headers` header field lines.
    TooManyHeaders,
    /// The trailer section is longer than the decoder's `max_trailer_bytes`.
    TrailersTooLarge,
    // ---- 501 Not Implemented ----
    /// A transfer-coding other than `chunked`.
    UnsupportedTransferCoding,
    // ---- 505 HTTP Version Not Supported ----
    /// A well-formed HTTP version other than 1.0 and 1.1.
    UnsupportedVersion,
}

impl ParseError {
    /// The status code to answer with (before closing the connection).
    pub(crate) fn status(&self) -> StatusCode {
        use ParseError::*;
        match self {
            UriTooLong => StatusCode::URI_TOO_LONG,
            HeadTooLarge | TooManyHeaders | TrailersTooLarge => {
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
            }
            UnsupportedTransferCoding => StatusCode::NOT_IMPLEMENTED,
            UnsupportedVersion => StatusCode::HTTP_VERSION_NOT_SUPPORTED,
            _ => StatusCode::BAD_REQUEST,
        }
    }

    fn message(&self) -> &'static str {
        use ParseError::*;
        match self {
            TooManyEmptyLines => "too many empty lines before the request line",
            InvalidRequestLine => "malformed request line",
            InvalidMethod => "invalid request method",
            InvalidUri => "invalid request-target",
            InvalidTargetForm => {
                "request-target form does not match the method \
                 (`*` is for OPTIONS only, authority-form for CONNECT only)"
            }
            InvalidVersion => "malformed HTTP version",
            InvalidLineEnding => "invalid line ending (expected CRLF)",
            InvalidHeaderName => "invalid header field name",
            WhitespaceBeforeColon => "whitespace between header field name and colon",
            ObsFold => "header line starts with whitespace (obsolete line folding)",
            InvalidHeaderValue => "invalid byte in header field value",
            MissingHost => "HTTP/1.1 request without Host header",
            MultipleHost => "more than one Host header",
            InvalidHost => "invalid Host header value",
            InvalidContentLength => "invalid Content-Length value",
            ConflictingContentLength => "conflicting Content-Length values",
            ContentLengthWithTransferEncoding => "both Content-Length and Transfer-Encoding",
            TransferEncodingInHttp10 => "Transfer-Encoding in an HTTP/1.0 request",
            InvalidTransferEncoding => {
                "invalid Transfer-Encoding (empty, or chunked applied more than once)"
            }
            InvalidChunkSize => "invalid chunk size",
            ChunkSizeOverflow => "chunk size too large",
            InvalidChunkExtension => "invalid chunk extension",
            ChunkLineTooLong => "chunk size line (with extensions) too long",
            InvalidChunkLineEnding => "chunk size line not terminated by CRLF",
            MissingChunkDataCrlf => "chunk data not followed by CRLF",
            InvalidTrailer => "invalid trailer field",
            UriTooLong => "request-target too long",
            HeadTooLarge => "request head too large",
            TooManyHeaders => "too many header fields",
            TrailersTooLarge => "trailer section too large",
            UnsupportedTransferCoding => "unsupported transfer-coding (only chunked is supported)",
            UnsupportedVersion => "unsupported HTTP version (only HTTP/1.0 and HTTP/1.1)",
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for ParseError {}

/// A parsed and validated request head.
#[derive(Debug)]
pub(crate) struct RequestHead {
    pub method: Method,
    pub uri: Uri,
    pub version: Version,
    /// All header fields as received (names lowercased), framing fields included.
    pub headers: HeaderMap,
    pub framing: BodyFraming,
    /// HTTP/1.1: true unless `Connection: close`. HTTP/1.0: true only with
    /// `Connection: keep-alive` (and no `close`).
    pub keep_alive: bool,
    /// `Expect: 100-continue` on an HTTP/1.1 request.
    pub expect_continue: bool,
    /// HTTP/1.1 request with an `upgrade` Connection option and an Upgrade header.
    pub upgrade: bool,
}

/// At most this many empty lines are skipped before the request line (RFC 9112 §2.2).
pub(crate) const MAX_LEADING_EMPTY_LINES: usize = 8;

/// `http::Uri` refuses targets longer than this.
const URI_HARD_MAX: usize = u16::MAX as usize - 1;

/// Parses one request head at the start of `buf`.
///
/// `Ok(None)`: the head is incomplete, read more and call again with the whole buffer
/// (the parse starts over). `Ok(Some((head, consumed)))`: `buf[..consumed]` was the head
/// (including any skipped leading empty lines); the body, if any, starts at
/// `buf[consumed..]`. Errors are final: answer with `err.status()` and close.
pub(crate) fn parse_request_head(
    buf: &[u8],
    limits: &Limits,
) -> Result<Option<(RequestHead, usize)>, ParseError> {
    let skip = match skip_empty_lines(buf)? {
        Some(n) => n,
        None => return incomplete(buf, limits),
    };
    if skip > limits.max_head_bytes {
        return Err(ParseError::HeadTooLarge);
    }
    // Never look past max_head_bytes: a complete head must fit in it.
    let window = &buf[skip..buf.len().min(limits.max_head_bytes)];

    let mut slots = HeaderSlots::new(limits.max_headers, limits.max_head_bytes);
    let mut req = httparse::Request::new(&mut []);
    match req.parse_with_uninit_headers(window, slots.get()) {
        Ok(httparse::Status::Complete(n)) => {
            let head = build_head(&req, &window[..n], limits)?;
            Ok(Some((head, skip + n)))
        }
        Ok(httparse::Status::Partial) => {
            check_partial_target(window, limits)?;
            incomplete(buf, limits)
        }
        Err(e) => match classify(e, window) {
            // A version like "HTTP/2" whose line is not complete yet.
            None => {
                check_partial_target(window, limits)?;
                incomplete(buf, limits)
            }
            Some(err) => Err(err),
        },
    }
}

/// Header slots on the stack; more (per the head's `max_headers`) go on the heap.
const STACK_HEADERS: usize = 64;

/// Room for the header lines httparse finds, on the stack unless there are many.
pub(crate) struct HeaderSlots<'b> {
    stack: [MaybeUninit<httparse::Header<'b>>; STACK_HEADERS],
    heap: Vec<MaybeUninit<httparse::Header<'b>>>,
    len: usize,
}

impl<'b> HeaderSlots<'b> {
    /// Slots for `max_headers` lines in a head of at most `max_head_bytes`. A header line
    /// takes at least 3 bytes ("a:\n"), so no more than that many can fit: a larger
    /// `max_headers` needs no more slots.
    pub(crate) fn new(max_headers: usize, max_head_bytes: usize) -> HeaderSlots<'b> {
        let len = max_headers.min(max_head_bytes / 3 + 1);
        let mut heap = Vec::new();
        if len > STACK_HEADERS {
            heap.resize_with(len, MaybeUninit::uninit);
        }
        HeaderSlots {
            stack: [const { MaybeUninit::uninit() }; STACK_HEADERS],
            heap,
            len,
        }
    }

    pub(crate) fn get(&mut self) -> &mut [MaybeUninit<httparse::Header<'b>>] {
        if self.len <= STACK_HEADERS {
            &mut self.stack[..self.len]
        } else {
            &mut self.heap[..]
        }
    }
}

fn incomplete<T>(buf: &[u8], limits: &Limits) -> Result<Option<T>, ParseError> {
    if buf.len() > limits.max_head_bytes {
        Err(ParseError::HeadTooLarge)
    } else {
        Ok(None)
    }
}

/// Skips leading empty lines; `Ok(None)` if `buf` holds nothing else yet.
fn skip_empty_lines(buf: &[u8]) -> Result<Option<usize>, ParseError> {
    let mut i = 0;
    let mut lines = 0;
    loop {
        match buf.get(i) {
            None => return Ok(None),
            Some(b'\r') => match buf.get(i + 1) {
                None => return Ok(None),
                Some(b'\n') => i += 2,
                Some(_) => return Err(ParseError::InvalidLineEnding),
            },
            Some(b'\n') => i += 1,
            Some(_) => return Ok(Some(i)),
        }
        lines += 1;
        if lines > MAX_LEADING_EMPTY_LINES {
            return Err(ParseError::TooManyEmptyLines);
        }
    }
}

/// On an incomplete head, reports 414 as soon as the request-target seen so far is too
/// long (rather than waiting for 431 at max_head_bytes).
fn check_partial_target(window: &[u8], limits: &Limits) -> Result<(), ParseError> {
    let max = limits.max_uri_len.min(URI_HARD_MAX);
    let Some(sp) = window.iter().position(|&b| b == b' ') else {
        return Ok(());
    };
    if window[..sp].contains(&b'\n') {
        return Ok(());
    }
    let rest = &window[sp + 1..];
    let len = rest
        .iter()
        .position(|&b| matches!(b, b' ' | b'\r' | b'\n'))
        .unwrap_or(rest.len());
    if len > max {
        Err(ParseError::UriTooLong)
    } else {
        Ok(())
    }
}

/// Turns an httparse error into ours; `None` means "incomplete after all".
fn classify(e: httparse::Error, window: &[u8]) -> Option<ParseError> {
    Some(match e {
        httparse::Error::TooManyHeaders => ParseError::TooManyHeaders,
        httparse::Error::HeaderValue => ParseError::InvalidHeaderValue,
        httparse::Error::HeaderName => diagnose_header_name(window),
        httparse::Error::Token | httparse::Error::Status => ParseError::InvalidRequestLine,
        httparse::Error::NewLine => {
            // Bad version suffix ("HTTP/1.1x") or a bad line ending somewhere.
            let (line, _) = first_line(window);
            match version_token(line) {
                Some(v) if version_syntax(v) == VersionSyntax::Valid => {
                    ParseError::InvalidLineEnding
                }
                _ => ParseError::InvalidRequestLine,
            }
        }
        httparse::Error::Version => {
            let (line, terminated) = first_line(window);
            let Some(v) = version_token(line) else {
                return Some(ParseError::InvalidVersion);
            };
            match version_syntax(v) {
                VersionSyntax::Valid if terminated => ParseError::UnsupportedVersion,
                VersionSyntax::Valid | VersionSyntax::Prefix if !terminated => return None,
                _ => ParseError::InvalidVersion,
            }
        }
    })
}

/// The request line without its terminator, and whether the terminator was seen.
fn first_line(window: &[u8]) -> (&[u8], bool) {
    match window.iter().position(|&b| b == b'\n') {
        Some(lf) => {
            let line = &window[..lf];
            (line.strip_suffix(b"\r").unwrap_or(line), true)
        }
        // Not terminated yet; a final CR may be the start of the CRLF.
        None => (window.strip_suffix(b"\r").unwrap_or(window), false),
    }
}

/// What follows the second SP of the request line.
fn version_token(line: &[u8]) -> Option<&[u8]> {
    let mut parts = line.splitn(3, |&b| b == b' ');
    parts.next()?;
    parts.next()?;
    parts.next()
}

#[derive(Debug, PartialEq, Eq)]
enum VersionSyntax {
    /// `HTTP/DIGIT.DIGIT`.
    Valid,
    /// A proper prefix of that.
    Prefix,
    Invalid,
}

fn version_syntax(v: &[u8]) -> VersionSyntax {
    const PATTERN: &[u8; 8] = b"HTTP/0.0";
    if v.len() > PATTERN.len() {
        return VersionSyntax::Invalid;
    }
    for (i, &b) in v.iter().enumerate() {
        let ok = if PATTERN[i] == b'0' {
            b.is_ascii_digit()
        } else {
            b == PATTERN[i]
        };
        if !ok {
            return VersionSyntax::Invalid;
        }
    }
    if v.len() == PATTERN.len() {
        VersionSyntax::Valid
    } else {
        VersionSyntax::Prefix
    }
}

/// httparse reports one error for every header-name problem; say which one it was.
fn diagnose_header_name(window: &[u8]) -> ParseError {
    let mut lines = window.split(|&b| b == b'\n');
    lines.next(); // request line
    for line in lines {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        match line.first() {
            None => break,
            Some(b' ' | b'\t') => return ParseError::ObsFold,
            Some(_) => {}
        }
        if let Some(colon) = line.iter().position(|&b| b == b':') {
            if matches!(line[..colon].last(), Some(b' ' | b'\t')) {
                return ParseError::WhitespaceBeforeColon;
            }
        }
    }
    ParseError::InvalidHeaderName
}

/// Validates the parsed head and builds a `RequestHead`; `head` is exactly the bytes
/// httparse consumed (no leading empty lines).
fn build_head(
    req: &httparse::Request<'_, '_>,
    head: &[u8],
    limits: &Limits,
) -> Result<RequestHead, ParseError> {
    let (Some(method), Some(path), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(ParseError::InvalidRequestLine);
    };
    let version = if minor == 1 {
        Version::HTTP_11
    } else {
        Version::HTTP_10
    };
    let method = Method::from_bytes(method.as_bytes()).map_err(|_| ParseError::InvalidMethod)?;
    if path.len() > limits.max_uri_len || path.len() > URI_HARD_MAX {
        return Err(ParseError::UriTooLong);
    }

    // One copy of the head; the URI and header values are slices of it (no copy each).
    let shared = Bytes::copy_from_slice(head);
    let base = head.as_ptr() as usize;
    let share = |s: &[u8]| -> Bytes {
        let start = s.as_ptr() as usize - base;
        debug_assert!(start + s.len() <= head.len());
        shared.slice(start..start + s.len())
    };

    let uri = Uri::from_maybe_shared(share(path.as_bytes())).map_err(|_| ParseError::InvalidUri)?;
    check_target_form(&method, &uri, path)?;

    // HeaderMap holds at most 32768 entries (and panics beyond if not asked nicely).
    let mut headers =
        HeaderMap::try_with_capacity(req.headers.len()).map_err(|_| ParseError::TooManyHeaders)?;
    let mut content_length: Option<u64> = None;
    let mut te = TransferEncodingState::default();
    let mut hosts = 0usize;
    let (mut conn_close, mut conn_keep_alive, mut conn_upgrade) = (false, false, false);
    let mut has_upgrade = false;
    let mut expect_continue = false;

    for h in req.headers.iter() {
        let name =
            HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| ParseError::InvalidHeaderName)?;
        let value = HeaderValue::from_maybe_shared(share(h.value))
            .map_err(|_| ParseError::InvalidHeaderValue)?;
        if name == header::CONTENT_LENGTH {
            let n = parse_content_length(h.value)?;
            match content_length {
                Some(prev) if prev != n => return Err(ParseError::ConflictingContentLength),
                _ => content_length = Some(n),
            }
        } else if name == header::TRANSFER_ENCODING {
            te.add(h.value);
        } else if name == header::HOST {
            hosts += 1;
            if !valid_host(h.value) {
                return Err(ParseError::InvalidHost);
            }
        } else if name == header::CONNECTION {
            for token in list_elements(h.value) {
                if token.eq_ignore_ascii_case(b"close") {
                    conn_close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") {
                    conn_keep_alive = true;
                } else if token.eq_ignore_ascii_case(b"upgrade") {
                    conn_upgrade = true;
                }
            }
        } else if name == header::UPGRADE {
            has_upgrade = true;
        } else if name == header::EXPECT && trim_ows(h.value).eq_ignore_ascii_case(b"100-continue")
        {
            expect_continue = true;
        }
        headers
            .try_append(name, value)
            .map_err(|_| ParseError::TooManyHeaders)?;
    }

    let http11 = version == Version::HTTP_11;
    if hosts > 1 {
        return Err(ParseError::MultipleHost);
    }
    if http11 && hosts == 0 {
        return Err(ParseError::MissingHost);
    }

    let framing = if te.present {
        if !http11 {
            return Err(ParseError::TransferEncodingInHttp10);
        }
        if content_length.is_some() {
            return Err(ParseError::ContentLengthWithTransferEncoding);
        }
        if te.unknown {
            return Err(ParseError::UnsupportedTransferCoding);
        }
        if te.chunked != 1 {
            return Err(ParseError::InvalidTransferEncoding);
        }
        BodyFraming::Chunked
    } else {
        match content_length {
            None | Some(0) => BodyFraming::Empty,
            Some(n) => BodyFraming::Length(n),
        }
    };

    Ok(RequestHead {
        method,
        uri,
        version,
        headers,
        framing,
        keep_alive: if http11 {
            !conn_close
        } else {
            conn_keep_alive && !conn_close
        },
        expect_continue: http11 && expect_continue,
        upgrade: http11 && conn_upgrade && has_upgrade,
    })
}

/// RFC 9112 §3.2: asterisk-form only for OPTIONS, authority-form only (and always) for
/// CONNECT; origin-form and absolute-form for everything else.
fn check_target_form(method: &Method, uri: &Uri, raw: &str) -> Result<(), ParseError> {
    let asterisk = raw == "*";
    let authority_form =
        uri.scheme().is_none() && uri.authority().is_some() && uri.path_and_query().is_none();
    let ok = if *method == Method::CONNECT {
        authority_form
    } else if asterisk {
        *method == Method::OPTIONS
    } else {
        !authority_form
    };
    if ok {
        Ok(())
    } else {
        Err(ParseError::InvalidTargetForm)
    }
}

/// What the Transfer-Encoding field lines of one message say, summed up.
#[derive(Default)]
pub(crate) struct TransferEncodingState {
    pub present: bool,
    chunked: usize,
    unknown: bool,
    /// The last coding seen is `chunked`.
    last_chunked: bool,
}

impl TransferEncodingState {
    pub(crate) fn add(&mut self, value: &[u8]) {
        self.present = true;
        for coding in list_elements(value) {
            self.last_chunked = coding.eq_ignore_ascii_case(b"chunked");
            if self.last_chunked {
                self.chunked += 1;
            } else {
                // Anything else (gzip, chunked;ext=1, ...) is a coding we can't decode.
                self.unknown = true;
            }
        }
    }

    /// `chunked` is applied more than once (RFC 9112 §7: never).
    pub(crate) fn chunked_more_than_once(&self) -> bool {
        self.chunked > 1
    }

    /// `chunked` is applied once, last: the body's end is the last chunk (RFC 9112 §6.3).
    pub(crate) fn chunked_last(&self) -> bool {
        self.last_chunked && self.chunked == 1
    }
}

/// Content-Length = 1*DIGIT, possibly repeated as a comma-separated list of identical
/// values (RFC 9110 §8.6).
pub(crate) fn parse_content_length(value: &[u8]) -> Result<u64, ParseError> {
    let mut result: Option<u64> = None;
    for part in value.split(|&b| b == b',') {
        let part = trim_ows(part);
        if part.is_empty() {
            return Err(ParseError::InvalidContentLength);
        }
        let mut n: u64 = 0;
        for &b in part {
            if !b.is_ascii_digit() {
                return Err(ParseError::InvalidContentLength);
            }
            n = n
                .checked_mul(10)
                .and_then(|n| n.checked_add(u64::from(b - b'0')))
                .ok_or(ParseError::InvalidContentLength)?;
        }
        match result {
            Some(prev) if prev != n => return Err(ParseError::ConflictingContentLength),
            _ => result = Some(n),
        }
    }
    result.ok_or(ParseError::InvalidContentLength)
}

/// Host = uri-host [ ":" port ]; empty is allowed (RFC 9110 §7.2). This is a character
/// check (no userinfo, path, query, fragment or whitespace), not a full grammar.
fn valid_host(value: &[u8]) -> bool {
    value.iter().all(|&b| {
        b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'%'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b':'
                    | b'['
                    | b']'
            )
    })
}

/// Trims optional whitespace (SP / HTAB) on both sides.
pub(crate) fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// The non-empty elements of a comma-separated list, trimmed.
pub(crate) fn list_elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(trim_ows)
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Rng;
    use super::*;

    fn limits() -> Limits {
        Limits::default()
    }

    fn parse(buf: &[u8]) -> Result<Option<(RequestHead, usize)>, ParseError> {
        parse_request_head(buf, &limits())
    }

    fn ok(buf: &[u8]) -> (RequestHead, usize) {
        match parse(buf) {
            Ok(Some(r)) => r,
            other => panic!(
                "expected a head for {:?}, got {:?}",
                String::from_utf8_lossy(buf),
                other.map(|o| o.map(|(h, n)| (h.method, h.uri, n)))
            ),
        }
    }

    fn err(buf: &[u8]) -> ParseError {
        match parse(buf) {
            Err(e) => e,
            Ok(o) => panic!(
                "expected an error for {:?}, got {:?}",
                String::from_utf8_lossy(buf),
                o.map(|(h, n)| (h.method, h.uri, n))
            ),
        }
    }

    fn status(buf: &[u8]) -> u16 {
        err(buf).status().as_u16()
    }

    #[test]
    fn simple_get() {
        let buf = b"GET /index.html?a=b HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n";
        let (h, n) = ok(buf);
        assert_eq!(n, buf.len());
        assert_eq!(h.method, Method::GET);
        assert_eq!(h.uri.path(), "/index.html");
        assert_eq!(h.uri.query(), Some("a=b"));
        assert_eq!(h.version, Version::HTTP_11);
        assert_eq!(h.headers.len(), 2);
        assert_eq!(h.headers["host"], "example.com");
        assert_eq!(h.headers["accept"], "*/*");
        assert_eq!(h.framing, BodyFraming::Empty);
        assert!(h.keep_alive);
        assert!(!h.expect_continue);
        assert!(!h.upgrade);
    }

    #[test]
    fn incomplete_at_every_prefix() {
        let buf = b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello";
        let head_len = buf.len() - 5;
        for i in 0..head_len {
            assert!(
                matches!(parse(&buf[..i]), Ok(None)),
                "prefix {i} should be incomplete"
            );
        }
        for i in head_len..=buf.len() {
            let (h, n) = ok(&buf[..i]);
            assert_eq!(n, head_len);
            assert_eq!(h.framing, BodyFraming::Length(5));
        }
    }

    #[test]
    fn pipelined_heads_consumed_exactly() {
        let first = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
        let second = b"GET /b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
        let mut buf = first.to_vec();
        buf.extend_from_slice(second);
        let (h1, n1) = ok(&buf);
        assert_eq!(n1, first.len());
        assert_eq!(h1.uri.path(), "/a");
        assert!(h1.keep_alive);
        let (h2, n2) = ok(&buf[n1..]);
        assert_eq!(n2, second.len());
        assert_eq!(h2.uri.path(), "/b");
        assert!(!h2.keep_alive);
    }

    #[test]
    fn pipelined_with_body_in_between() {
        let buf = b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\nHost: h\r\n\r\n";
        let (h1, n1) = ok(buf);
        assert_eq!(h1.framing, BodyFraming::Length(3));
        assert_eq!(&buf[n1..n1 + 3], b"abc");
        let (h2, n2) = ok(&buf[n1 + 3..]);
        assert_eq!(h2.uri.path(), "/b");
        assert_eq!(n1 + 3 + n2, buf.len());
    }

    #[test]
    fn leading_empty_lines_ignored() {
        let buf = b"\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
        let (h, n) = ok(buf);
        assert_eq!(n, buf.len());
        assert_eq!(h.method, Method::GET);
        let buf = b"\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
        assert_eq!(ok(buf).1, buf.len());
        // Only empty lines so far: incomplete.
        assert!(matches!(parse(b"\r\n\r\n"), Ok(None)));
        assert!(matches!(parse(b"\r"), Ok(None)));
        // Too many.
        let mut many = b"\r\n".repeat(MAX_LEADING_EMPTY_LINES + 1);
        many.extend_from_slice(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(err(&many), ParseError::TooManyEmptyLines);
        assert_eq!(status(&many), 400);
        let mut max = b"\r\n".repeat(MAX_LEADING_EMPTY_LINES);
        max.extend_from_slice(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(ok(&max).1, max.len());
        // A bare CR is not an empty line.
        assert_eq!(
            err(b"\rxGET / HTTP/1.1\r\n\r\n"),
            ParseError::InvalidLineEnding
        );
    }

    #[test]
    fn bare_lf_line_endings_accepted() {
        let buf = b"GET / HTTP/1.1\nHost: h\n\n";
        let (h, n) = ok(buf);
        assert_eq!(n, buf.len());
        assert_eq!(h.headers["host"], "h");
    }

    #[test]
    fn malformed_request_lines_are_400() {
        for buf in [
            &b"GET  / HTTP/1.1\r\nHost: h\r\n\r\n"[..],
            b"GET / HTTP/1.1 \r\nHost: h\r\n\r\n",
            b"GET /\r\nHost: h\r\n\r\n",
            b"GET\r\n\r\n",
            b" GET / HTTP/1.1\r\nHost: h\r\n\r\n",
            b"G(T / HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET /a\x01b HTTP/1.1\r\nHost: h\r\n\r\n",
            b"GET / HTTP/1.1\rHost: h\r\n\r\n",
            b"GET / http/1.1\r\nHost: h\r\n\r\n",
            b"GET / HTTP/1.10\r\nHost: h\r\n\r\n",
            b"GET / HTTP/1.1x\r\nHost: h\r\n\r\n",
            b"GET / HTTP/11\r\nHost: h\r\n\r\n",
            b"GET / FOO/1.1\r\nHost: h\r\n\r\n",
            b"GET / HTTP/a.b\r\nHost: h\r\n\r\n",
            b"GET /\xff HTTP/1.1\r\nHost: h\r\n\r\n",
        ] {
            assert_eq!(status(buf), 400, "{:?}", String::from_utf8_lossy(buf));
        }
        assert_eq!(
            err(b"GET / HTTP/a.b\r\nHost: h\r\n\r\n"),
            ParseError::InvalidVersion
        );
        assert_eq!(
            err(b"GET / HTTP/1.1x\r\nHost: h\r\n\r\n"),
            ParseError::InvalidRequestLine
        );
    }

    #[test]
    fn unsupported_versions_are_505() {
        for buf in [
            &b"GET / HTTP/2.0\r\nHost: h\r\n\r\n"[..],
            b"GET / HTTP/1.2\r\nHost: h\r\n\r\n",
            b"GET / HTTP/3.0\r\n\r\n",
            b"GET / HTTP/0.9\r\n\r\n",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        ] {
            assert_eq!(
                err(buf),
                ParseError::UnsupportedVersion,
                "{:?}",
                String::from_utf8_lossy(buf)
            );
            assert_eq!(status(buf), 505);
        }
        // Until the line ends we can't tell "HTTP/2.0\r\n" from "HTTP/2.0x".
        assert!(matches!(parse(b"GET / HTTP/2"), Ok(None)));
        assert!(matches!(parse(b"GET / HTTP/2.0"), Ok(None)));
        assert!(matches!(parse(b"GET / HTTP/2.0\r"), Ok(None)));
        assert_eq!(err(b"GET / HTTP/2.0x"), ParseError::InvalidVersion);
        assert_eq!(err(b"GET / HTTP/2x"), ParseError::InvalidVersion);
    }

    #[test]
    fn http10() {
        let (h, _) = ok(b"GET / HTTP/1.0\r\n\r\n");
        assert_eq!(h.version, Version::HTTP_10);
        assert!(!h.keep_alive);
        let (h, _) = ok(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
        assert!(h.keep_alive);
        let (h, _) = ok(b"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n");
        assert!(!h.keep_alive);
        // No Expect or Upgrade semantics in 1.0.
        let (h, _) = ok(
            b"GET / HTTP/1.0\r\nExpect: 100-continue\r\nConnection: upgrade\r\nUpgrade: x\r\n\r\n",
        );
        assert!(!h.expect_continue);
        assert!(!h.upgrade);
        // Body by Content-Length is fine.
        let (h, _) = ok(b"POST / HTTP/1.0\r\nContent-Length: 7\r\n\r\n");
        assert_eq!(h.framing, BodyFraming::Length(7));
    }

    #[test]
    fn transfer_encoding_in_http10_is_400() {
        let e = err(b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert_eq!(e, ParseError::TransferEncodingInHttp10);
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn connection_keep_alive_http11() {
        let (h, _) = ok(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: CLOSE\r\n\r\n");
        assert!(!h.keep_alive);
        let (h, _) =
            ok(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: foo\r\nConnection: bar, close\r\n\r\n");
        assert!(!h.keep_alive);
        let (h, _) = ok(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: closed\r\n\r\n");
        assert!(h.keep_alive);
    }

    #[test]
    fn expect_continue() {
        let (h, _) =
            ok(b"PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nExpect: 100-Continue\r\n\r\n");
        assert!(h.expect_continue);
        let (h, _) = ok(b"PUT / HTTP/1.1\r\nHost: h\r\nExpect: something-else\r\n\r\n");
        assert!(!h.expect_continue);
        assert_eq!(h.headers["expect"], "something-else");
    }

    #[test]
    fn upgrade() {
        let (h, _) = ok(b"GET /ws HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n");
        assert!(h.upgrade);
        assert!(h.keep_alive);
        let (h, _) = ok(b"GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n\r\n");
        assert!(!h.upgrade);
        let (h, _) = ok(b"GET /ws HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\n\r\n");
        assert!(!h.upgrade);
    }

    #[test]
    fn host_rules() {
        assert_eq!(err(b"GET / HTTP/1.1\r\n\r\n"), ParseError::MissingHost);
        assert_eq!(status(b"GET / HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(
            err(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
            ParseError::MultipleHost
        );
        assert_eq!(
            err(b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"),
            ParseError::MultipleHost
        );
        assert_eq!(
            err(b"GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n"),
            ParseError::MultipleHost
        );
        assert_eq!(status(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
        assert_eq!(
            err(b"GET / HTTP/1.1\r\nHost: user@evil\r\n\r\n"),
            ParseError::InvalidHost
        );
        assert_eq!(
            err(b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"),
            ParseError::InvalidHost
        );
        assert_eq!(
            err(b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n"),
            ParseError::InvalidHost
        );
        // Allowed forms.
        ok(b"GET / HTTP/1.1\r\nHost:\r\n\r\n");
        ok(b"GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n");
        ok(b"GET / HTTP/1.1\r\nHost: example.com:80\r\n\r\n");
        ok(b"GET / HTTP/1.0\r\n\r\n");
    }

    #[test]
    fn content_length_rules() {
        let (h, _) = ok(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(h.framing, BodyFraming::Empty);
        let (h, _) =
            ok(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 18446744073709551615\r\n\r\n");
        assert_eq!(h.framing, BodyFraming::Length(u64::MAX));
        // Identical duplicates are fine, as separate lines or as a list.
        let (h, _) =
            ok(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n");
        assert_eq!(h.framing, BodyFraming::Length(5));
        let (h, _) = ok(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5,5\r\n\r\n");
        assert_eq!(h.framing, BodyFraming::Length(5));
        let (h, _) = ok(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 007\r\n\r\n");
        assert_eq!(h.framing, BodyFraming::Length(7));

        for (v, e) in [
            (
                &b"5\r\nContent-Length: 6"[..],
                ParseError::ConflictingContentLength,
            ),
            (b"5, 6", ParseError::ConflictingContentLength),
            (b"5,,5", ParseError::InvalidContentLength),
            (b"", ParseError::InvalidContentLength),
            (b"+5", ParseError::InvalidContentLength),
            (b"-5", ParseError::InvalidContentLength),
            (b"5a", ParseError::InvalidContentLength),
            (b"0x5", ParseError::InvalidContentLength),
            (b"5 5", ParseError::InvalidContentLength),
            (b"1.0", ParseError::InvalidContentLength),
            (b"18446744073709551616", ParseError::InvalidContentLength),
            (b"99999999999999999999999", ParseError::InvalidContentLength),
        ] {
            let mut buf = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: ".to_vec();
            buf.extend_from_slice(v);
            buf.extend_from_slice(b"\r\n\r\n");
            assert_eq!(err(&buf), e, "{:?}", String::from_utf8_lossy(v));
            assert_eq!(status(&buf), 400);
        }
    }

    #[test]
    fn transfer_encoding_rules() {
        let buf = b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n";
        let (h, n) = ok(buf);
        assert_eq!(h.framing, BodyFraming::Chunked);
        assert_eq!(n, buf.len() - 3);
        let (h, _) = ok(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: CHUNKED\r\n\r\n");
        assert_eq!(h.framing, BodyFraming::Chunked);
        let (h, _) = ok(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: ,chunked\r\n\r\n");
        assert_eq!(h.framing, BodyFraming::Chunked);

        let cases: [(&[u8], ParseError); 9] = [
            (
                b"Transfer-Encoding: chunked\r\nContent-Length: 5",
                ParseError::ContentLengthWithTransferEncoding,
            ),
            (
                b"Content-Length: 5\r\nTransfer-Encoding: chunked",
                ParseError::ContentLengthWithTransferEncoding,
            ),
            (
                b"Transfer-Encoding: gzip, chunked",
                ParseError::UnsupportedTransferCoding,
            ),
            (
                b"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked",
                ParseError::UnsupportedTransferCoding,
            ),
            (
                b"Transfer-Encoding: chunked, gzip",
                ParseError::UnsupportedTransferCoding,
            ),
            (
                b"Transfer-Encoding: gzip",
                ParseError::UnsupportedTransferCoding,
            ),
            (
                b"Transfer-Encoding: chunked;x=1",
                ParseError::UnsupportedTransferCoding,
            ),
            (
                b"Transfer-Encoding: chunked, chunked",
                ParseError::InvalidTransferEncoding,
            ),
            (b"Transfer-Encoding: ", ParseError::InvalidTransferEncoding),
        ];
        for (hdrs, e) in cases {
            let mut buf = b"POST / HTTP/1.1\r\nHost: h\r\n".to_vec();
            buf.extend_from_slice(hdrs);
            buf.extend_from_slice(b"\r\n\r\n");
            assert_eq!(err(&buf), e, "{:?}", String::from_utf8_lossy(hdrs));
            let want = if e == ParseError::UnsupportedTransferCoding {
                501
            } else {
                400
            };
            assert_eq!(status(&buf), want);
        }
    }

    #[test]
    fn header_syntax_errors() {
        // Whitespace before colon: httparse rejects it for requests.
        let e = err(b"GET / HTTP/1.1\r\nHost : h\r\n\r\n");
        assert_eq!(e, ParseError::WhitespaceBeforeColon);
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            err(b"GET / HTTP/1.1\r\nHost: h\r\nX-A\t: b\r\n\r\n"),
            ParseError::WhitespaceBeforeColon
        );
        // Obs-fold.
        let e = err(b"GET / HTTP/1.1\r\nHost: h\r\nX-A: b\r\n  c\r\n\r\n");
        assert_eq!(e, ParseError::ObsFold);
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            err(b"GET / HTTP/1.1\r\nHost: h\r\nX-A: b\r\n\tc\r\n\r\n"),
            ParseError::ObsFold
        );
        // Whitespace before the first header line.
        assert_eq!(
            err(b"GET / HTTP/1.1\r\n Host: h\r\n\r\n"),
            ParseError::ObsFold
        );
        // Bad names and values.
        assert_eq!(
            err(b"GET / HTTP/1.1\r\nHost: h\r\nX(A): b\r\n\r\n"),
            ParseError::InvalidHeaderName
        );
        assert_eq!(
            err(b"GET / HTTP/1.1\r\nHost: h\r\nnocolon\r\n\r\n"),
            ParseError::InvalidHeaderName
        );
        assert_eq!(
            err(b"GET / HTTP/1.1\r\nHost: h\r\n: empty\r\n\r\n"),
            ParseError::InvalidHeaderName
        );
        for v in [&b"a\x00b"[..], b"a\x7fb", b"a\x01", b"a\rb"] {
            let mut buf = b"GET / HTTP/1.1\r\nHost: h\r\nX: ".to_vec();
            buf.extend_from_slice(v);
            buf.extend_from_slice(b"\r\n\r\n");
            assert_eq!(status(&buf), 400, "{v:?}");
        }
        assert_eq!(
            err(b"GET / HTTP/1.1\r\nHost: h\r\nX: a\x00b\r\n\r\n"),
            ParseError::InvalidHeaderValue
        );
    }

    #[test]
    fn header_values_keep_bytes() {
        let (h, _) = ok(b"GET / HTTP/1.1\r\nHost: h\r\nX-Obs: caf\xc3\xa9 \xff\r\nX-Empty:\r\nX-Tab: \ta\tb\t\r\n\r\n");
        assert_eq!(h.headers["x-obs"].as_bytes(), b"caf\xc3\xa9 \xff");
        assert_eq!(h.headers["x-empty"].as_bytes(), b"");
        assert_eq!(h.headers["x-tab"].as_bytes(), b"a\tb");
        let (h, _) = ok(b"GET / HTTP/1.1\r\nHost: h\r\nX-M: 1\r\nx-m: 2\r\n\r\n");
        let all: Vec<_> = h.headers.get_all("x-m").iter().collect();
        assert_eq!(all, ["1", "2"]);
    }

    #[test]
    fn too_many_headers_is_431() {
        let l = Limits {
            max_headers: 3,
            ..limits()
        };
        let ok3 = b"GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n";
        assert!(matches!(parse_request_head(ok3, &l), Ok(Some(_))));
        let bad = b"GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
        let e = parse_request_head(bad, &l).unwrap_err();
        assert_eq!(e, ParseError::TooManyHeaders);
        assert_eq!(e.status().as_u16(), 431);
        // With the heap path (more than STACK_HEADERS).
        let l = Limits {
            max_headers: STACK_HEADERS + 10,
            ..limits()
        };
        let mut buf = b"GET / HTTP/1.1\r\nHost: h\r\n".to_vec();
        for i in 0..STACK_HEADERS + 9 {
            buf.extend_from_slice(format!("X-{i}: {i}\r\n").as_bytes());
        }
        let mut exact = buf.clone();
        exact.extend_from_slice(b"\r\n");
        let (h, _) = parse_request_head(&exact, &l).unwrap().unwrap();
        assert_eq!(h.headers.len(), STACK_HEADERS + 10);
        buf.extend_from_slice(b"Y: 1\r\n\r\n");
        assert_eq!(
            parse_request_head(&buf, &l).unwrap_err(),
            ParseError::TooManyHeaders
        );
        // A huge max_headers is bounded by HeaderMap's capacity (no panic) and by the
        // head size for the slot allocation.
        let l = Limits {
            max_headers: usize::MAX,
            max_head_bytes: 1 << 20,
            ..limits()
        };
        let mut buf = b"GET / HTTP/1.0\r\n".to_vec();
        for i in 0..40_000 {
            buf.extend_from_slice(format!("h{i}:\r\n").as_bytes());
        }
        buf.extend_from_slice(b"\r\n");
        assert_eq!(
            parse_request_head(&buf, &l).unwrap_err(),
            ParseError::TooManyHeaders
        );
        // max_headers = 0: any header is too many.
        let l = Limits {
            max_headers: 0,
            ..limits()
        };
        assert!(matches!(
            parse_request_head(b"GET / HTTP/1.0\r\n\r\n", &l),
            Ok(Some(_))
        ));
        assert_eq!(
            parse_request_head(b"GET / HTTP/1.0\r\nA: b\r\n\r\n", &l).unwrap_err(),
            ParseError::TooManyHeaders
        );
    }

    #[test]
    fn head_too_large_is_431() {
        let buf = b"GET / HTTP/1.1\r\nHost: h\r\nX-Long: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
        let l = Limits {
            max_head_bytes: buf.len(),
            ..limits()
        };
        assert!(matches!(parse_request_head(buf, &l), Ok(Some(_))));
        let l = Limits {
            max_head_bytes: buf.len() - 1,
            ..limits()
        };
        let e = parse_request_head(buf, &l).unwrap_err();
        assert_eq!(e, ParseError::HeadTooLarge);
        assert_eq!(e.status().as_u16(), 431);
        // Incomplete but already over the limit.
        let l = Limits {
            max_head_bytes: 20,
            ..limits()
        };
        assert!(matches!(
            parse_request_head(b"GET / HTTP/1.1\r\nHost", &l),
            Ok(None)
        ));
        assert_eq!(
            parse_request_head(b"GET / HTTP/1.1\r\nHost:", &l).unwrap_err(),
            ParseError::HeadTooLarge
        );
        // A complete head that fits, followed by lots of body: fine.
        let mut big = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n".to_vec();
        let head_len = big.len();
        big.extend_from_slice(&[b'x'; 100]);
        let l = Limits {
            max_head_bytes: head_len,
            ..limits()
        };
        let (_, n) = parse_request_head(&big, &l).unwrap().unwrap();
        assert_eq!(n, head_len);
        // Leading empty lines count.
        let mut lead = b"\r\n\r\n".to_vec();
        lead.extend_from_slice(&big[..head_len]);
        assert_eq!(
            parse_request_head(&lead, &l).unwrap_err(),
            ParseError::HeadTooLarge
        );
    }

    #[test]
    fn uri_too_long_is_414() {
        let l = Limits {
            max_uri_len: 10,
            ..limits()
        };
        let fits = b"GET /123456789 HTTP/1.1\r\nHost: h\r\n\r\n";
        assert!(matches!(parse_request_head(fits, &l), Ok(Some(_))));
        let long = b"GET /1234567890 HTTP/1.1\r\nHost: h\r\n\r\n";
        let e = parse_request_head(long, &l).unwrap_err();
        assert_eq!(e, ParseError::UriTooLong);
        assert_eq!(e.status().as_u16(), 414);
        // Reported as soon as the target is too long, before the line is complete.
        assert!(matches!(
            parse_request_head(b"GET /123456789", &l),
            Ok(None)
        ));
        assert_eq!(
            parse_request_head(b"GET /1234567890", &l).unwrap_err(),
            ParseError::UriTooLong
        );
        // Request line complete, headers not.
        assert_eq!(
            parse_request_head(b"GET /1234567890 HTTP/1.1\r\nHo", &l).unwrap_err(),
            ParseError::UriTooLong
        );
        // Over http::Uri's own limit: 414 even with a generous max_uri_len.
        let l = Limits {
            max_uri_len: usize::MAX,
            max_head_bytes: 1 << 20,
            ..limits()
        };
        let mut buf = b"GET /".to_vec();
        buf.extend_from_slice(&vec![b'a'; 70_000]);
        buf.extend_from_slice(b" HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(
            parse_request_head(&buf, &l).unwrap_err(),
            ParseError::UriTooLong
        );
    }

    #[test]
    fn target_forms() {
        // origin-form
        let (h, _) = ok(b"GET /p?q HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(h.uri.path_and_query().unwrap().as_str(), "/p?q");
        // absolute-form
        let (h, _) =
            ok(b"GET http://example.com:8080/p?q HTTP/1.1\r\nHost: example.com:8080\r\n\r\n");
        assert_eq!(h.uri.scheme_str(), Some("http"));
        assert_eq!(h.uri.authority().unwrap().as_str(), "example.com:8080");
        assert_eq!(h.uri.path(), "/p");
        // authority-form (CONNECT)
        let (h, _) = ok(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
        assert_eq!(h.method, Method::CONNECT);
        assert_eq!(h.uri.authority().unwrap().as_str(), "example.com:443");
        assert_eq!(h.uri.host(), Some("example.com"));
        assert_eq!(h.uri.port_u16(), Some(443));
        // asterisk-form (OPTIONS)
        let (h, _) = ok(b"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(h.method, Method::OPTIONS);
        assert_eq!(h.uri.path(), "*");
        // Mismatches.
        for buf in [
            &b"GET * HTTP/1.1\r\nHost: h\r\n\r\n"[..],
            b"GET example.com:443 HTTP/1.1\r\nHost: h\r\n\r\n",
            b"CONNECT / HTTP/1.1\r\nHost: h\r\n\r\n",
            b"CONNECT * HTTP/1.1\r\nHost: h\r\n\r\n",
            b"CONNECT http://example.com/ HTTP/1.1\r\nHost: h\r\n\r\n",
        ] {
            assert_eq!(
                err(buf),
                ParseError::InvalidTargetForm,
                "{:?}",
                String::from_utf8_lossy(buf)
            );
        }
        // Garbage targets.
        assert_eq!(
            err(b"GET http:// HTTP/1.1\r\nHost: h\r\n\r\n"),
            ParseError::InvalidUri
        );
    }

    #[test]
    fn methods() {
        for (m, want) in [
            ("GET", Method::GET),
            ("HEAD", Method::HEAD),
            ("POST", Method::POST),
            ("PUT", Method::PUT),
            ("DELETE", Method::DELETE),
            ("PATCH", Method::PATCH),
            ("TRACE", Method::TRACE),
        ] {
            let buf = format!("{m} / HTTP/1.1\r\nHost: h\r\n\r\n");
            assert_eq!(ok(buf.as_bytes()).0.method, want);
        }
        let (h, _) = ok(b"PROPFIND / HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(h.method.as_str(), "PROPFIND");
        let (h, _) = ok(b"get / HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(h.method.as_str(), "get"); // methods are case-sensitive
        assert_ne!(h.method, Method::GET);
    }

    #[test]
    fn errors_have_status_and_text() {
        let all = [
            ParseError::TooManyEmptyLines,
            ParseError::InvalidRequestLine,
            ParseError::InvalidMethod,
            ParseError::InvalidUri,
            ParseError::InvalidTargetForm,
            ParseError::InvalidVersion,
            ParseError::InvalidLineEnding,
            ParseError::InvalidHeaderName,
            ParseError::WhitespaceBeforeColon,
            ParseError::ObsFold,
            ParseError::InvalidHeaderValue,
            ParseError::MissingHost,
            ParseError::MultipleHost,
            ParseError::InvalidHost,
            ParseError::InvalidContentLength,
            ParseError::ConflictingContentLength,
            ParseError::ContentLengthWithTransferEncoding,
            ParseError::TransferEncodingInHttp10,
            ParseError::InvalidTransferEncoding,
            ParseError::InvalidChunkSize,
            ParseError::ChunkSizeOverflow,
            ParseError::InvalidChunkExtension,
            ParseError::ChunkLineTooLong,
            ParseError::InvalidChunkLineEnding,
            ParseError::MissingChunkDataCrlf,
            ParseError::InvalidTrailer,
            ParseError::UriTooLong,
            ParseError::HeadTooLarge,
            ParseError::TooManyHeaders,
            ParseError::TrailersTooLarge,
            ParseError::UnsupportedTransferCoding,
            ParseError::UnsupportedVersion,
        ];
        let mut texts = std::collections::HashSet::new();
        for e in all {
            let s = e.to_string();
            assert!(!s.is_empty());
            assert!(texts.insert(s), "duplicate text for {e:?}");
            assert!(matches!(e.status().as_u16(), 400 | 414 | 431 | 501 | 505));
        }
        assert_eq!(
            ParseError::ContentLengthWithTransferEncoding.to_string(),
            "both Content-Length and Transfer-Encoding"
        );
    }

    #[test]
    fn helpers() {
        assert_eq!(trim_ows(b" \t a b \t"), b"a b");
        assert_eq!(trim_ows(b"   "), b"");
        let v: Vec<&[u8]> = list_elements(b" a, ,b ,\tc,").collect();
        assert_eq!(v, [&b"a"[..], b"b", b"c"]);
        assert_eq!(version_syntax(b"HTTP/1.1"), VersionSyntax::Valid);
        assert_eq!(version_syntax(b"HTTP/"), VersionSyntax::Prefix);
        assert_eq!(version_syntax(b""), VersionSyntax::Prefix);
        assert_eq!(version_syntax(b"HTTP/1.1 "), VersionSyntax::Invalid);
        assert_eq!(version_syntax(b"HTTX"), VersionSyntax::Invalid);
    }

    #[test]
    fn random_garbage_never_panics() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let l = Limits {
            max_head_bytes: 512,
            max_headers: 8,
            max_uri_len: 64,
        };
        let alphabet: &[u8] =
            b"GET /HTTP1.0\r\n: \t,;=chunkedContent-LengthTransfer-EncodingHost*\x00\x7f\xff";
        let seeds: [&[u8]; 3] = [
            b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n",
            b"POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nConnection: upgrade\r\nUpgrade: a\r\n\r\n",
            b"CONNECT a:1 HTTP/1.0\r\nExpect: 100-continue\r\n\r\n",
        ];
        for _ in 0..30_000 {
            let mut buf: Vec<u8> = match rng.below(3) {
                0 => (0..rng.below(600)).map(|_| rng.next() as u8).collect(),
                1 => (0..rng.below(600))
                    .map(|_| alphabet[rng.below(alphabet.len())])
                    .collect(),
                _ => {
                    // Mutate a valid request.
                    let mut b = seeds[rng.below(seeds.len())].to_vec();
                    for _ in 0..1 + rng.below(4) {
                        let i = rng.below(b.len());
                        match rng.below(3) {
                            0 => b[i] = alphabet[rng.below(alphabet.len())],
                            1 => {
                                b.remove(i);
                            }
                            _ => b.insert(i, rng.next() as u8),
                        }
                    }
                    b
                }
            };
            if rng.below(4) == 0 {
                buf.truncate(rng.below(buf.len() + 1));
            }
            if let Ok(Some((_, n))) = parse_request_head(&buf, &l) {
                assert!(n <= buf.len());
                assert!(n <= l.max_head_bytes);
            }
        }
    }
}
