//! Request-head parsing (RFC 9112 §2-§3, §6) on top of `httparse`, plus the framing,
//! connection and validation rules that `httparse` leaves to its caller.

use std::mem::MaybeUninit;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Uri, Version};

pub(crate) use super::error::ParseError;
use super::framing::BodyFraming;
pub(crate) use head_copy::copy_head;

mod head_copy;

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
    /// The connection may leave HTTP/1 after this request: an HTTP/1.1 request with an
    /// `upgrade` Connection option and an Upgrade header (a `101` switches), or a
    /// CONNECT (a `2xx` makes it a tunnel, RFC 9110 §9.3.6).
    pub upgrade: bool,
}

impl RequestHead {
    /// Nothing about this request changes how the bytes after it are read: it has no body,
    /// asks for no upgrade and keeps the connection open.
    pub(crate) fn is_plain(&self) -> bool {
        self.framing == BodyFraming::Empty && !self.upgrade && self.keep_alive
    }
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

/// A header value httparse has accepted (unfolded), without checking its bytes again.
pub(crate) fn header_value(bytes: Bytes) -> HeaderValue {
    // httparse accepts in a value exactly the bytes `HeaderValue` does (HTAB, 0x20-0x7E,
    // 0x80-0xFF; its HEADER_VALUE_MAP and SIMD paths), which the debug check confirms.
    debug_assert!(HeaderValue::from_maybe_shared(bytes.clone()).is_ok());
    // SAFETY: every byte of `bytes` is one `HeaderValue` allows (above): the only
    // invariant `from_maybe_shared_unchecked` leaves to its caller.
    unsafe { HeaderValue::from_maybe_shared_unchecked(bytes) }
}

/// Header slots on the stack; more (per the head's `max_headers`) go on the heap. It
/// covers the default `max_headers` (100): below it, every request paid a 3.2 KB heap
/// allocation for its slots (4 KB of stack, uninitialized, costs nothing to set up).
const STACK_HEADERS: usize = 128;

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
    let shared = copy_head(head);
    let base = head.as_ptr() as usize;
    let share = |s: &[u8]| -> Bytes {
        let start = s.as_ptr() as usize - base;
        debug_assert!(start + s.len() <= head.len());
        shared.slice(start..start + s.len())
    };

    let uri = Uri::from_maybe_shared(share(path.as_bytes())).map_err(|_| ParseError::InvalidUri)?;
    check_target_form(&method, &uri, path)?;

    // HeaderMap holds at most 32768 entries (and panics beyond if not asked nicely). Room
    // for the fields a proxy adds (`Forwarded`, `X-Forwarded-For`, `X-Forwarded-Proto`,
    // `Via`): a full map would grow (rehash) for them.
    let mut headers = crate::proto::header_maps::take(req.headers.len() + 4)
        .map_err(|_| ParseError::TooManyHeaders)?;
    let mut content_length: Option<u64> = None;
    let mut te = TransferEncodingState::default();
    let mut hosts = 0usize;
    let (mut conn_close, mut conn_keep_alive, mut conn_upgrade) = (false, false, false);
    let mut has_upgrade = false;
    let mut expect_continue = false;

    for h in req.headers.iter() {
        let name =
            HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| ParseError::InvalidHeaderName)?;
        let value = header_value(share(h.value));
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

    let connect = method == Method::CONNECT;
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
        upgrade: http11 && conn_upgrade && has_upgrade || connect,
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

    #[cfg(any(feature = "client", feature = "fuzzing"))]
    /// `chunked` is applied more than once (RFC 9112 §7: never).
    pub(crate) fn chunked_more_than_once(&self) -> bool {
        self.chunked > 1
    }

    #[cfg(any(feature = "client", feature = "fuzzing"))]
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
    value.iter().all(|&b| HOST_BYTES[usize::from(b)])
}

/// The bytes a Host value may hold: a table, as a per-byte `matches!` costs ~10
/// instructions a byte on every request.
static HOST_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
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
            );
        b += 1;
    }
    table
};

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
mod tests;
