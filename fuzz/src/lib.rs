//! The properties the HTTP/1 fuzz targets check, shared with the stable fallback
//! (`tests/fuzz_fallback.rs` includes this file with `#[path]`), so libFuzzer on nightly
//! and proptest on stable hold the decoders to the same rules.
//!
//! Every check panics (with the offending input in the message) when a rule breaks.

#[path = "h2.rs"]
pub mod h2;

use fibr::fuzzing::http::{
    decode_chunked, encode_chunk, encode_chunk_header, encode_last_chunk, encode_request_head,
    is_forbidden_trailer, parse_request_head, parse_response_head, serve_pieces, ChunkedDecoder,
    Decoded, Framing, Head, Limits, Outcome, ResponseFraming, ResponseHead, ResponseLimits,
};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Version};

/// Small limits, so the fuzzer reaches every limit with short inputs.
pub const SMALL_LIMITS: Limits = Limits {
    max_head_bytes: 256,
    max_headers: 8,
    max_uri_len: 32,
};

/// The server's bound on a chunked body's trailer section.
pub const SERVER_MAX_TRAILER_BYTES: usize = 16 * 1024;

/// Trailer bounds the chunked checks pick from (by index, modulo the length).
pub const TRAILER_LIMITS: [usize; 6] = [0, 1, 16, 64, 1024, SERVER_MAX_TRAILER_BYTES];

fn show(data: &[u8]) -> String {
    const MAX: usize = 512;
    let s = String::from_utf8_lossy(&data[..data.len().min(MAX)]).into_owned();
    if data.len() > MAX {
        format!("{s:?}... ({} bytes)", data.len())
    } else {
        format!("{s:?}")
    }
}

// ---------------------------------------------------------------------------------------
// Request heads
// ---------------------------------------------------------------------------------------

/// All the request-head checks, with the default and the small limits: one head (see
/// `check_head`), then the whole input as a pipeline (see `check_pipeline`).
pub fn check_request_head(data: &[u8]) {
    for limits in [Limits::default(), SMALL_LIMITS] {
        check_head(data, &limits);
        check_pipeline(data, &limits);
    }
}

/// Parses one head at the start of `data` and checks, whatever the input:
/// - no panic; errors carry a status the server may answer with (400/414/431/501/505);
/// - incomplete (`Ok(None)`) only while the input fits in `max_head_bytes` (the server
///   never buffers more than the limit);
/// - a head: `0 < consumed <= len`, `consumed <= max_head_bytes`, at most `max_headers`
///   fields, version 1.0 or 1.1, framing consistent with the framing fields;
/// - a head is self-delimiting: the consumed bytes alone parse the same, and every strict
///   prefix of them is incomplete (a request split anywhere across reads is not refused);
/// - the limits are exact: `max_head_bytes = consumed` and `max_headers = fields` pass,
///   one less is 431.
///
/// Returns the head and the bytes consumed, if one was parsed.
pub fn check_head(data: &[u8], limits: &Limits) -> Option<(Head, usize)> {
    let (head, n) = match parse_request_head(data, limits) {
        Ok(None) => {
            assert!(
                data.len() <= limits.max_head_bytes,
                "incomplete past max_head_bytes {limits:?}: {}",
                show(data)
            );
            return None;
        }
        Err(e) => {
            assert!(
                matches!(e.status.as_u16(), 400 | 414 | 431 | 501 | 505),
                "unexpected status {e:?}"
            );
            return None;
        }
        Ok(Some(h)) => h,
    };
    let ctx = || format!("{limits:?} consumed {n}: {}", show(data));
    assert!(n > 0 && n <= data.len(), "consumed out of range; {}", ctx());
    assert!(
        n <= limits.max_head_bytes,
        "consumed past the limit; {}",
        ctx()
    );
    assert!(head.headers.len() <= limits.max_headers, "{}", ctx());
    assert!(
        head.version == Version::HTTP_10 || head.version == Version::HTTP_11,
        "{}",
        ctx()
    );
    check_framing(&head, &ctx);

    // Self-delimiting: the head alone gives the same.
    match parse_request_head(&data[..n], limits) {
        Ok(Some((again, m))) => {
            assert_eq!(m, n, "{}", ctx());
            assert_same_head(&head, &again, &ctx);
        }
        other => panic!("the head alone parses as {other:?}; {}", ctx()),
    }
    // Every strict prefix is incomplete (sampled on long heads).
    let step = (n / 256).max(1);
    for k in (0..n).step_by(step).chain(n.saturating_sub(4)..n) {
        match parse_request_head(&data[..k], limits) {
            Ok(None) => {}
            other => panic!(
                "prefix of {k} bytes parses as {other:?} (should be incomplete); {}",
                ctx()
            ),
        }
    }
    // Exact limits.
    let at = Limits {
        max_head_bytes: n,
        ..*limits
    };
    match parse_request_head(data, &at) {
        Ok(Some((_, m))) => assert_eq!(m, n, "{}", ctx()),
        other => panic!("max_head_bytes = consumed gives {other:?}; {}", ctx()),
    }
    let under = Limits {
        max_head_bytes: n - 1,
        ..*limits
    };
    match parse_request_head(data, &under) {
        Err(e) if e.status == 431 => {}
        other => panic!("max_head_bytes = consumed - 1 gives {other:?}; {}", ctx()),
    }
    let fields = head.headers.len();
    let at = Limits {
        max_headers: fields,
        ..*limits
    };
    assert!(
        matches!(parse_request_head(data, &at), Ok(Some((_, m))) if m == n),
        "max_headers = fields fails; {}",
        ctx()
    );
    if fields > 0 {
        let under = Limits {
            max_headers: fields - 1,
            ..*limits
        };
        match parse_request_head(data, &under) {
            Err(e) if e.status == 431 => {}
            other => panic!("max_headers = fields - 1 gives {other:?}; {}", ctx()),
        }
    }
    Some((head, n))
}

fn check_framing(head: &Head, ctx: &dyn Fn() -> String) {
    let cl = head.headers.contains_key(http::header::CONTENT_LENGTH);
    let te = head.headers.contains_key(http::header::TRANSFER_ENCODING);
    match head.framing {
        Framing::Empty => assert!(!te, "Empty framing with Transfer-Encoding; {}", ctx()),
        Framing::Length(len) => {
            assert!(len > 0 && cl && !te, "Length framing; {}", ctx());
            // RFC 9110 §8.6: a list of identical values (`4, 4`) is accepted as that value.
            for value in head.headers.get_all(http::header::CONTENT_LENGTH) {
                let v = std::str::from_utf8(value.as_bytes()).unwrap_or("");
                for element in v.split(',') {
                    assert_eq!(element.trim().parse::<u64>().ok(), Some(len), "{}", ctx());
                }
            }
        }
        Framing::Chunked => {
            assert!(te && !cl, "Chunked framing; {}", ctx());
            assert_eq!(head.version, Version::HTTP_11, "{}", ctx());
        }
    }
    if head.version == Version::HTTP_11 {
        assert_eq!(
            head.headers.get_all(http::header::HOST).iter().count(),
            1,
            "HTTP/1.1 without exactly one Host; {}",
            ctx()
        );
    }
}

fn assert_same_head(a: &Head, b: &Head, ctx: &dyn Fn() -> String) {
    assert_eq!(a.method, b.method, "{}", ctx());
    assert_eq!(a.uri, b.uri, "{}", ctx());
    assert_eq!(a.version, b.version, "{}", ctx());
    assert_eq!(a.headers, b.headers, "{}", ctx());
    assert_eq!(a.framing, b.framing, "{}", ctx());
    assert_eq!(
        (a.keep_alive, a.expect_continue, a.upgrade),
        (b.keep_alive, b.expect_continue, b.upgrade),
        "{}",
        ctx()
    );
}

/// Reads `data` the way the dispatcher does: head, body per its framing, next head...
/// (at most 64 messages). Every head passes `check_head`; everything consumed stays
/// within the input. Returns the messages parsed.
pub fn check_pipeline(data: &[u8], limits: &Limits) -> usize {
    let mut pos = 0;
    let mut count = 0;
    while pos < data.len() && count < 64 {
        let Some((head, n)) = check_head(&data[pos..], limits) else {
            break;
        };
        count += 1;
        pos += n;
        match head.framing {
            Framing::Empty => {}
            Framing::Length(len) => {
                let rest = (data.len() - pos) as u64;
                if len > rest {
                    break;
                }
                pos += len as usize;
            }
            Framing::Chunked => {
                let r = decode_chunked(&[&data[pos..]], SERVER_MAX_TRAILER_BYTES);
                assert!(r.consumed <= data.len() - pos);
                if r.outcome != Outcome::Done {
                    break;
                }
                pos += r.consumed;
            }
        }
        assert!(pos <= data.len());
    }
    count
}

// ---------------------------------------------------------------------------------------
// Chunked bodies
// ---------------------------------------------------------------------------------------

/// Decodes arbitrary bytes as a chunked body, checking:
/// - no panic, no stall; the decode does not depend on how the input is split (all at
///   once, in two pieces at `split`, one byte at a time: same data, trailers, outcome and
///   consumed count);
/// - `consumed <= len`; `NeedMore` consumes everything; data is never longer than what
///   was consumed; errors carry 400 or 431;
/// - call by call: `Data` is a non-empty slice of the input ending at the consumed count,
///   `NeedMore` consumed the whole input, after `Done` the decoder stays done;
/// - a finished body is self-delimiting: its bytes alone decode the same.
pub fn check_chunked(data: &[u8], split: usize, max_trailer_bytes: usize) {
    let split = split % (data.len() + 1);
    let whole = decode_chunked(&[data], max_trailer_bytes);
    let ctx = || {
        format!(
            "split {split}, max_trailer {max_trailer_bytes}: {}",
            show(data)
        )
    };
    assert_ne!(whole.outcome, Outcome::Stuck, "{}", ctx());
    assert!(whole.consumed <= data.len(), "{}", ctx());
    assert!(whole.data.len() <= whole.consumed, "{}", ctx());
    match &whole.outcome {
        Outcome::NeedMore => assert_eq!(whole.consumed, data.len(), "{}", ctx()),
        Outcome::Error(e) => assert!(matches!(e.status.as_u16(), 400 | 431), "{e:?}; {}", ctx()),
        _ => {}
    }

    let two = decode_chunked(&[&data[..split], &data[split..]], max_trailer_bytes);
    let bytes: Vec<&[u8]> = data.chunks(1).collect();
    let each = decode_chunked(&bytes, max_trailer_bytes);
    for (what, other) in [("two pieces", &two), ("byte by byte", &each)] {
        assert_eq!(whole.outcome, other.outcome, "{what}; {}", ctx());
        if !matches!(whole.outcome, Outcome::Error(_)) {
            // (On an error, `consumed` only says where the failing call started.)
            assert_eq!(whole.consumed, other.consumed, "{what}; {}", ctx());
            assert_eq!(whole.data, other.data, "{what}; {}", ctx());
        } else {
            // Data before the error is the same, up to where the failing call started.
            let n = whole.data.len().min(other.data.len());
            assert_eq!(whole.data[..n], other.data[..n], "{what}; {}", ctx());
        }
        assert_eq!(whole.trailers, other.trailers, "{what}; {}", ctx());
    }

    // Call by call, in the two pieces.
    let mut dec = ChunkedDecoder::new(max_trailer_bytes);
    let mut done = false;
    'pieces: for piece in [&data[..split], &data[split..]] {
        let mut off = 0;
        loop {
            let input = &piece[off..];
            match dec.decode(input) {
                Err(_) => break 'pieces,
                Ok((n, Decoded::Data(d))) => {
                    assert!(!d.is_empty() && n <= input.len(), "{}", ctx());
                    let end = input.as_ptr() as usize + n;
                    assert_eq!(d.as_ptr() as usize + d.len(), end, "{}", ctx());
                    off += n;
                }
                Ok((n, Decoded::NeedMore)) => {
                    assert_eq!(n, input.len(), "NeedMore left bytes; {}", ctx());
                    break;
                }
                Ok((n, Decoded::Done(_))) => {
                    assert!(n <= input.len(), "{}", ctx());
                    done = true;
                    break 'pieces;
                }
            }
        }
    }
    assert_eq!(done, whole.outcome == Outcome::Done, "{}", ctx());
    if done {
        assert!(matches!(dec.decode(b"x"), Ok((0, Decoded::Done(None)))));
        let alone = decode_chunked(&[&data[..whole.consumed]], max_trailer_bytes);
        assert_eq!(alone.outcome, Outcome::Done, "{}", ctx());
        assert_eq!(alone.consumed, whole.consumed, "{}", ctx());
        assert_eq!(alone.data, whole.data, "{}", ctx());
        let short = decode_chunked(&[&data[..whole.consumed - 1]], max_trailer_bytes);
        assert_eq!(short.outcome, Outcome::NeedMore, "{}", ctx());
    }
}

/// Bytes allowed in a header name (token characters).
const TOKEN: &[u8] =
    b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~";

/// A valid header name made of arbitrary bytes (mapped onto token characters), or one of
/// the forbidden trailer names when the first byte says so.
pub fn trailer_name(raw: &[u8]) -> HeaderName {
    const SOME_FORBIDDEN: [&str; 6] = [
        "content-length",
        "transfer-encoding",
        "host",
        "trailer",
        "set-cookie",
        "keep-alive",
    ];
    match raw.first() {
        Some(&b) if b >= 240 => HeaderName::from_static(SOME_FORBIDDEN[b as usize % 6]),
        _ => {
            let mut name: Vec<u8> = raw
                .iter()
                .map(|&b| TOKEN[b as usize % TOKEN.len()])
                .collect();
            if name.is_empty() {
                name.push(b'x');
            }
            name.truncate(64);
            HeaderName::from_bytes(&name).expect("token characters make a valid name")
        }
    }
}

/// A valid header value made of arbitrary bytes: control bytes become `x`, and no
/// whitespace at either end (a field value's ends are not preserved on the wire).
pub fn trailer_value(raw: &[u8]) -> HeaderValue {
    let mut v: Vec<u8> = raw
        .iter()
        .map(|&b| match b {
            b'\t' | b' '..=b'~' | 0x80..=0xff => b,
            _ => b'x',
        })
        .collect();
    while v.last().is_some_and(|b| matches!(b, b' ' | b'\t')) {
        v.pop();
    }
    let start = v
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t'))
        .unwrap_or(v.len());
    HeaderValue::from_bytes(&v[start..]).expect("visible, obs-text and inner whitespace only")
}

/// Encodes `chunks` (odd-indexed ones through `encode_chunk_header`, the others through
/// `encode_chunk`) and the last chunk with `trailers`, appends `next` (the next message),
/// and decodes it split at `split`: the body must come back exactly, `consumed` must end
/// exactly at the end of the body, and the trailers must be those sent minus the
/// forbidden ones; or, when the trailer section is longer than `max_trailer_bytes`, the
/// decode fails with 431.
pub fn check_chunked_round_trip(
    chunks: &[&[u8]],
    trailers: &HeaderMap,
    next: &[u8],
    split: usize,
    max_trailer_bytes: usize,
) {
    let mut wire = Vec::new();
    let mut body = Vec::new();
    for (i, c) in chunks.iter().enumerate() {
        body.extend_from_slice(c);
        if i % 2 == 1 && !c.is_empty() {
            encode_chunk_header(c.len(), &mut wire);
            wire.extend_from_slice(c);
            wire.extend_from_slice(b"\r\n");
        } else {
            let before = wire.len();
            encode_chunk(c, &mut wire);
            assert_eq!(
                c.is_empty(),
                wire.len() == before,
                "empty chunks write nothing"
            );
        }
    }
    let body_start_of_last = wire.len();
    encode_last_chunk(Some(trailers), &mut wire);
    let mut none = Vec::new();
    encode_last_chunk(None, &mut none);
    assert_eq!(none, b"0\r\n\r\n");

    let mut expected = HeaderMap::new();
    let mut trailer_bytes = 0;
    for (k, v) in trailers.iter() {
        if !is_forbidden_trailer(k) {
            expected.append(k.clone(), v.clone());
            trailer_bytes += k.as_str().len() + 2 + v.len() + 2;
        }
    }
    assert_eq!(
        wire.len() - body_start_of_last,
        3 + trailer_bytes + 2,
        "the last chunk is `0 CRLF trailers CRLF`"
    );
    let expected = if expected.is_empty() {
        None
    } else {
        Some(expected)
    };

    let body_len = wire.len();
    wire.extend_from_slice(next);
    let split = split % (wire.len() + 1);
    let r = decode_chunked(&[&wire[..split], &wire[split..]], max_trailer_bytes);
    let ctx = || {
        format!(
            "split {split}, max_trailer {max_trailer_bytes}, trailer bytes {trailer_bytes}: {}",
            show(&wire)
        )
    };
    if trailer_bytes > max_trailer_bytes {
        match r.outcome {
            Outcome::Error(e) if e.status == 431 => {}
            other => panic!("trailers over the limit gave {other:?}; {}", ctx()),
        }
        return;
    }
    assert_eq!(r.outcome, Outcome::Done, "{}", ctx());
    assert_eq!(r.consumed, body_len, "{}", ctx());
    assert!(r.data == body, "body differs; {}", ctx());
    assert_eq!(r.trailers, expected, "{}", ctx());
    // And the raw-input checks hold on the encoding too.
    check_chunked(&wire, split, max_trailer_bytes);
}

// ---------------------------------------------------------------------------------------
// The client's side: response heads in, request heads out
// ---------------------------------------------------------------------------------------

/// Small response limits, so the fuzzer reaches every limit with short inputs.
pub const SMALL_RESPONSE_LIMITS: ResponseLimits = ResponseLimits {
    max_head_bytes: 256,
    max_headers: 8,
    allow_obsolete_folding: false,
};

/// Every error `parse_response_head` gives (its `ResponseError` variants).
pub const RESPONSE_ERRORS: [&str; 6] = [
    "InvalidStatusLine",
    "InvalidHeader",
    "TooManyHeaders",
    "HeadTooLarge",
    "InvalidContentLength",
    "InvalidTransferEncoding",
];

/// What the first byte of an `h1_response_head` input picks: bit 0 the request's method
/// (GET / HEAD), bit 1 the limits (default / `SMALL_RESPONSE_LIMITS`), bit 2 obsolete
/// line folding allowed. (Bits 3-4 pick the target's mode; see the target.)
pub fn response_options(flags: u8) -> (Method, ResponseLimits) {
    let method = if flags & 1 == 0 {
        Method::GET
    } else {
        Method::HEAD
    };
    let mut limits = if flags & 2 == 0 {
        ResponseLimits::default()
    } else {
        SMALL_RESPONSE_LIMITS
    };
    limits.allow_obsolete_folding = flags & 4 != 0;
    (method, limits)
}

/// The raw-bytes mode of `h1_response_head`: byte 0 per `response_options`, the rest
/// is what the server sent, read as a stream of responses (`check_response_stream`,
/// which holds every head, the first included, to `check_response_head`).
pub fn check_response_input(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let (method, limits) = response_options(flags);
    if rest.is_empty() {
        assert!(matches!(
            parse_response_head(rest, &method, &limits),
            Ok(None)
        ));
    }
    check_response_stream(rest, &method, &limits);
}

/// Parses one response head at the start of `data` and checks, whatever the input:
/// - no panic; errors are `ResponseError`s, and `HeadTooLarge` only past
///   `max_head_bytes`;
/// - incomplete (`Ok(None)`) only while the input fits in `max_head_bytes` (the client
///   never buffers more than the limit);
/// - a head: `0 < consumed <= len`, `consumed <= max_head_bytes`, at most `max_headers`
///   fields, version 1.0 or 1.1; framing and `keep_alive` as RFC 9112 §6 says for the
///   fields, status and method (`check_response_framing`);
/// - a head is self-delimiting: the consumed bytes alone parse the same, and the sampled
///   strict prefixes of them are incomplete (the client parses again after every read,
///   so a head split anywhere across reads must neither fail nor end early);
/// - the limits are exact: `max_head_bytes = consumed` and `max_headers = fields` pass,
///   one less is `HeadTooLarge` / `TooManyHeaders`.
///
/// Returns the head and the bytes consumed, if one was parsed.
pub fn check_response_head(
    data: &[u8],
    method: &Method,
    limits: &ResponseLimits,
) -> Option<(ResponseHead, usize)> {
    let (head, n) = match parse_response_head(data, method, limits) {
        Ok(None) => {
            assert!(
                data.len() <= limits.max_head_bytes,
                "incomplete past max_head_bytes {limits:?}: {}",
                show(data)
            );
            return None;
        }
        Err(e) => {
            assert!(
                RESPONSE_ERRORS.contains(&e.as_str()),
                "unexpected error {e}"
            );
            assert!(
                e != "HeadTooLarge" || data.len() > limits.max_head_bytes,
                "HeadTooLarge within the limit {limits:?}: {}",
                show(data)
            );
            return None;
        }
        Ok(Some(h)) => h,
    };
    let ctx = || format!("{method} {limits:?} consumed {n}: {}", show(data));
    assert!(n > 0 && n <= data.len(), "consumed out of range; {}", ctx());
    assert!(
        n <= limits.max_head_bytes,
        "consumed past the limit; {}",
        ctx()
    );
    assert!(head.headers.len() <= limits.max_headers, "{}", ctx());
    assert!(
        head.version == Version::HTTP_10 || head.version == Version::HTTP_11,
        "{}",
        ctx()
    );
    check_response_framing(&head, method, &ctx);

    // Self-delimiting: the head alone gives the same.
    match parse_response_head(&data[..n], method, limits) {
        Ok(Some((again, m))) => {
            assert_eq!(m, n, "{}", ctx());
            assert_same_response(&head, &again, &ctx);
        }
        other => panic!("the head alone parses as {other:?}; {}", ctx()),
    }
    // Prefix-stable: a few strict prefixes (the ends, the middle) are incomplete.
    let mut prefixes = [0, 1, n / 4, n / 2, 3 * n / 4, n.saturating_sub(2), n - 1];
    prefixes.sort_unstable();
    for (i, &k) in prefixes.iter().enumerate() {
        if k >= n || (i > 0 && prefixes[i - 1] == k) {
            continue;
        }
        match parse_response_head(&data[..k], method, limits) {
            Ok(None) => {}
            other => panic!(
                "prefix of {k} bytes parses as {other:?} (should be incomplete); {}",
                ctx()
            ),
        }
    }
    // Exact limits.
    let at = ResponseLimits {
        max_head_bytes: n,
        ..*limits
    };
    match parse_response_head(data, method, &at) {
        Ok(Some((_, m))) => assert_eq!(m, n, "{}", ctx()),
        other => panic!("max_head_bytes = consumed gives {other:?}; {}", ctx()),
    }
    let under = ResponseLimits {
        max_head_bytes: n - 1,
        ..*limits
    };
    match parse_response_head(data, method, &under) {
        Err(e) if e == "HeadTooLarge" => {}
        other => panic!("max_head_bytes = consumed - 1 gives {other:?}; {}", ctx()),
    }
    let fields = head.headers.len();
    let at = ResponseLimits {
        max_headers: fields,
        ..*limits
    };
    assert!(
        matches!(parse_response_head(data, method, &at), Ok(Some((_, m))) if m == n),
        "max_headers = fields fails; {}",
        ctx()
    );
    if fields > 0 {
        let under = ResponseLimits {
            max_headers: fields - 1,
            ..*limits
        };
        match parse_response_head(data, method, &under) {
            Err(e) if e == "TooManyHeaders" => {}
            other => panic!("max_headers = fields - 1 gives {other:?}; {}", ctx()),
        }
    }
    Some((head, n))
}

/// The non-empty, OWS-trimmed elements of a comma-separated field value.
fn elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b',').filter_map(|e| {
        let start = e.iter().position(|&b| b != b' ' && b != b'\t')?;
        let end = e.iter().rposition(|&b| b != b' ' && b != b'\t')?;
        Some(&e[start..=end])
    })
}

/// Whether a response to `method` with `status` has no body (RFC 9112 §6.3 items 1-2).
pub fn bodiless(method: &Method, status: StatusCode) -> bool {
    *method == Method::HEAD
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
}

/// Framing and reuse, worked out again from the fields as the application sees them
/// (`head.headers`), must be what the parser decided (RFC 9112 §6.1, §6.3, §9.3):
/// - no body for HEAD, 1xx, 204, 304; else Transfer-Encoding wins: chunked if `chunked`
///   is its last coding and appears once, else until close; else Content-Length (every
///   element the same number; 0 is no body); else until close;
/// - the connection is reused only with a self-delimited body, no `close` token, HTTP/1.1
///   or a `keep-alive` token, not after 101, and not when the framing is suspect: both
///   Transfer-Encoding and Content-Length, or Transfer-Encoding in HTTP/1.0 (RFC 9112
///   §6.1: "MUST treat the message as if the framing is faulty ... and close the
///   connection after processing the message").
pub fn check_response_framing(head: &ResponseHead, method: &Method, ctx: &dyn Fn() -> String) {
    let h = &head.headers;
    let te: Vec<&[u8]> = h
        .get_all(http::header::TRANSFER_ENCODING)
        .iter()
        .flat_map(|v| elements(v.as_bytes()))
        .collect();
    let te_present = h.contains_key(http::header::TRANSFER_ENCODING);
    let chunked_last = te
        .last()
        .is_some_and(|c| c.eq_ignore_ascii_case(b"chunked"))
        && te
            .iter()
            .filter(|c| c.eq_ignore_ascii_case(b"chunked"))
            .count()
            == 1;
    let mut cl: Option<u64> = None;
    for value in h.get_all(http::header::CONTENT_LENGTH) {
        for e in value.as_bytes().split(|&b| b == b',') {
            let e = std::str::from_utf8(e)
                .unwrap_or("x")
                .trim_matches([' ', '\t']);
            let ok = !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit());
            let n = e.parse::<u64>().ok().filter(|_| ok);
            assert!(
                n.is_some() && (cl.is_none() || cl == n),
                "a head with a bad Content-Length parsed; {}",
                ctx()
            );
            cl = n;
        }
    }
    let no_body = bodiless(method, head.status);
    let framing = if no_body {
        ResponseFraming::Empty
    } else if te_present {
        if chunked_last {
            ResponseFraming::Chunked
        } else {
            ResponseFraming::UntilClose
        }
    } else {
        match cl {
            Some(0) => ResponseFraming::Empty,
            Some(n) => ResponseFraming::Length(n),
            None => ResponseFraming::UntilClose,
        }
    };
    assert_eq!(head.framing, framing, "framing; {}", ctx());

    let tokens = || {
        h.get_all(http::header::CONNECTION)
            .into_iter()
            .flat_map(|v| elements(v.as_bytes()))
    };
    let close = tokens().any(|t| t.eq_ignore_ascii_case(b"close"));
    let keep_alive_token = tokens().any(|t| t.eq_ignore_ascii_case(b"keep-alive"));
    let http10 = head.version == Version::HTTP_10;
    let keep_alive = framing != ResponseFraming::UntilClose
        && !close
        && (!http10 || keep_alive_token)
        && head.status != StatusCode::SWITCHING_PROTOCOLS
        && !(te_present && cl.is_some() && !no_body)
        && !(te_present && http10 && !no_body);
    assert_eq!(head.keep_alive, keep_alive, "keep_alive; {}", ctx());
}

fn assert_same_response(a: &ResponseHead, b: &ResponseHead, ctx: &dyn Fn() -> String) {
    assert_eq!(a.status, b.status, "{}", ctx());
    assert_eq!(a.version, b.version, "{}", ctx());
    assert_eq!(a.headers, b.headers, "{}", ctx());
    assert_eq!(a.framing, b.framing, "{}", ctx());
    assert_eq!(a.keep_alive, b.keep_alive, "{}", ctx());
}

/// Reads `data` the way the client does on one connection: head, body per its framing,
/// next head... (at most 64 responses; interim 1xx ones do not end the exchange, a final
/// one that is not `keep_alive` or is delimited by the close does). Every head passes
/// `check_response_head`. Returns the responses parsed.
pub fn check_response_stream(data: &[u8], method: &Method, limits: &ResponseLimits) -> usize {
    let mut pos = 0;
    let mut count = 0;
    while pos < data.len() && count < 64 {
        let Some((head, n)) = check_response_head(&data[pos..], method, limits) else {
            break;
        };
        count += 1;
        pos += n;
        match head.framing {
            ResponseFraming::Empty => {}
            ResponseFraming::Length(len) => {
                if len > (data.len() - pos) as u64 {
                    break;
                }
                pos += len as usize;
            }
            ResponseFraming::Chunked => {
                let r = decode_chunked(&[&data[pos..]], SERVER_MAX_TRAILER_BYTES);
                assert!(r.consumed <= data.len() - pos);
                if r.outcome != Outcome::Done {
                    break;
                }
                pos += r.consumed;
            }
            ResponseFraming::UntilClose => break,
        }
        assert!(pos <= data.len());
        if !head.keep_alive && !head.status.is_informational() {
            break;
        }
    }
    count
}

/// How a generated response's body is framed.
#[derive(Debug, Clone)]
pub enum BodySpec {
    /// No framing field: the body runs until the close (the following bytes included).
    Absent(Vec<u8>),
    /// `Content-Length`.
    Length(Vec<u8>),
    /// `Content-Length: n, n` and a second `content-length: n` line.
    LengthList(Vec<u8>),
    /// `Transfer-Encoding: chunked`.
    Chunked(Vec<Vec<u8>>),
    /// `Transfer-Encoding: gzip`: until the close.
    Coded(Vec<u8>),
    /// `Transfer-Encoding: gzip` and a second line `transfer-encoding: chunked`: chunked.
    CodedChunked(Vec<Vec<u8>>),
    /// `Content-Length` and `Transfer-Encoding: chunked`: chunked, and never reused.
    LengthAndChunked(Vec<Vec<u8>>),
}

/// A response built by hand (the server's encoder is not reachable from
/// `fibr::fuzzing::http`), from arbitrary values mapped onto valid ones.
#[derive(Debug, Clone)]
pub struct ResponseSpec {
    /// The request was HEAD (else GET).
    pub head_request: bool,
    /// Mapped onto 100..=999 (`spec_status`).
    pub status: u16,
    /// Mapped onto reason-phrase bytes; empty: no reason and no space after the code.
    pub reason: Vec<u8>,
    pub http10: bool,
    /// `x-` names (mapped onto token characters) and values (`trailer_value`).
    pub fields: Vec<(Vec<u8>, Vec<u8>)>,
    /// A Connection field, by index into `CONNECTION_VALUES` (0: none).
    pub connection: u8,
    pub body: BodySpec,
    /// Bare LF line ends in the head (the body's chunked framing keeps CRLF).
    pub bare_lf: bool,
    /// What follows the message on the connection.
    pub next: Vec<u8>,
}

/// Connection values for `ResponseSpec::connection`: (value, has `close`, has
/// `keep-alive`).
pub const CONNECTION_VALUES: [(&str, bool, bool); 8] = [
    ("", false, false),
    ("close", true, false),
    ("keep-alive", false, true),
    ("Keep-Alive", false, true),
    ("upgrade", false, false),
    ("foo, CLOSE", true, false),
    ("keep-alive , close", true, true),
    ("keep-alive\t,x", false, true),
];

/// Status codes worth hitting often (the others come from the whole range).
const STATUSES: [u16; 16] = [
    100, 101, 103, 199, 200, 201, 204, 206, 299, 301, 304, 404, 500, 599, 600, 999,
];

/// A status code in 100..=999 from any `u16`: half the time one of `STATUSES`.
pub fn spec_status(s: u16) -> StatusCode {
    let code = if s & 0x8000 == 0 {
        STATUSES[s as usize % STATUSES.len()]
    } else {
        100 + s % 900
    };
    StatusCode::from_u16(code).expect("100..=999")
}

/// A field name `x-...` from arbitrary bytes (token characters, case kept on the wire).
pub fn extension_name(raw: &[u8]) -> String {
    let mut name = String::from("x-");
    name.extend(
        raw.iter()
            .take(32)
            .map(|&b| TOKEN[b as usize % TOKEN.len()] as char),
    );
    name
}

/// Builds the response `spec` describes, parses it back with the default limits, and
/// checks: the head is `consumed` exactly; status, version and every field (framing and
/// Connection ones included) come back; framing and `keep_alive` are what the spec
/// calls for; the body read per the framing is the body sent, and what follows it is
/// `next`; the raw-input checks hold on the bytes too.
pub fn check_response_round_trip(spec: &ResponseSpec) {
    let method = if spec.head_request {
        Method::HEAD
    } else {
        Method::GET
    };
    let status = spec_status(spec.status);
    let eol: &[u8] = if spec.bare_lf { b"\n" } else { b"\r\n" };
    let version = if spec.http10 {
        Version::HTTP_10
    } else {
        Version::HTTP_11
    };
    let mut wire = Vec::new();
    wire.extend_from_slice(if spec.http10 {
        b"HTTP/1.0 "
    } else {
        b"HTTP/1.1 "
    });
    wire.extend_from_slice(status.as_str().as_bytes());
    if !spec.reason.is_empty() {
        wire.push(b' ');
        wire.extend(spec.reason.iter().take(64).map(|&b| match b {
            b'\t' | b' '..=b'~' | 0x80..=0xff => b,
            _ => b'x',
        }));
    }
    wire.extend_from_slice(eol);
    let mut headers = HeaderMap::new();
    let mut line = |wire: &mut Vec<u8>, name: &str, value: &HeaderValue| {
        wire.extend_from_slice(name.as_bytes());
        wire.extend_from_slice(b": ");
        wire.extend_from_slice(value.as_bytes());
        wire.extend_from_slice(eol);
        headers.append(
            HeaderName::from_bytes(name.as_bytes()).expect("a token"),
            value.clone(),
        );
    };
    for (name, value) in spec.fields.iter().take(40) {
        let value = trailer_value(&value[..value.len().min(128)]);
        line(&mut wire, &extension_name(name), &value);
    }
    let (conn, close, keep_alive_token) =
        CONNECTION_VALUES[spec.connection as usize % CONNECTION_VALUES.len()];
    if !conn.is_empty() {
        line(&mut wire, "Connection", &HeaderValue::from_static(conn));
    }
    let chunked_wire = |chunks: &[Vec<u8>]| {
        let mut w = Vec::new();
        for c in chunks {
            encode_chunk(c, &mut w);
        }
        encode_last_chunk(None, &mut w);
        (w, chunks.concat())
    };
    let len_value = |n: usize| HeaderValue::from(n);
    // (body bytes on the wire, the body, framing unless bodiless, framing is suspect)
    let (body_wire, body, framing, te, cl) = match &spec.body {
        BodySpec::Absent(b) => (
            b.clone(),
            b.clone(),
            ResponseFraming::UntilClose,
            false,
            false,
        ),
        BodySpec::Length(b) | BodySpec::LengthList(b) => {
            if matches!(spec.body, BodySpec::LengthList(_)) {
                let list = format!("{0}, {0}", b.len());
                line(
                    &mut wire,
                    "Content-Length",
                    &HeaderValue::from_str(&list).unwrap(),
                );
                line(&mut wire, "content-length", &len_value(b.len()));
            } else {
                line(&mut wire, "Content-Length", &len_value(b.len()));
            }
            let framing = if b.is_empty() {
                ResponseFraming::Empty
            } else {
                ResponseFraming::Length(b.len() as u64)
            };
            (b.clone(), b.clone(), framing, false, true)
        }
        BodySpec::Chunked(chunks) => {
            line(
                &mut wire,
                "Transfer-Encoding",
                &HeaderValue::from_static("chunked"),
            );
            let (w, b) = chunked_wire(chunks);
            (w, b, ResponseFraming::Chunked, true, false)
        }
        BodySpec::Coded(b) => {
            line(
                &mut wire,
                "Transfer-Encoding",
                &HeaderValue::from_static("gzip"),
            );
            (
                b.clone(),
                b.clone(),
                ResponseFraming::UntilClose,
                true,
                false,
            )
        }
        BodySpec::CodedChunked(chunks) => {
            line(
                &mut wire,
                "Transfer-Encoding",
                &HeaderValue::from_static("gzip"),
            );
            line(
                &mut wire,
                "transfer-encoding",
                &HeaderValue::from_static("chunked"),
            );
            let (w, b) = chunked_wire(chunks);
            (w, b, ResponseFraming::Chunked, true, false)
        }
        BodySpec::LengthAndChunked(chunks) => {
            let (w, b) = chunked_wire(chunks);
            line(&mut wire, "Content-Length", &len_value(w.len()));
            line(
                &mut wire,
                "Transfer-Encoding",
                &HeaderValue::from_static("chunked"),
            );
            (w, b, ResponseFraming::Chunked, true, true)
        }
    };
    wire.extend_from_slice(eol);
    let head_len = wire.len();
    let no_body = bodiless(&method, status);
    let (framing, body) = if no_body {
        (ResponseFraming::Empty, Vec::new())
    } else {
        wire.extend_from_slice(&body_wire);
        (framing, body)
    };
    let body_end = wire.len();
    wire.extend_from_slice(&spec.next);
    let keep_alive = framing != ResponseFraming::UntilClose
        && !close
        && (!spec.http10 || keep_alive_token)
        && status != StatusCode::SWITCHING_PROTOCOLS
        && !(te && cl && !no_body)
        && !(te && spec.http10 && !no_body);

    let ctx = || format!("{method} {spec:?}: {}", show(&wire));
    let limits = ResponseLimits::default();
    let (head, n) = match parse_response_head(&wire, &method, &limits) {
        Ok(Some(h)) => h,
        other => panic!("a valid response parses as {other:?}; {}", ctx()),
    };
    assert_eq!(n, head_len, "consumed; {}", ctx());
    assert_eq!(head.status, status, "{}", ctx());
    assert_eq!(head.version, version, "{}", ctx());
    assert_eq!(head.headers, headers, "{}", ctx());
    assert_eq!(head.framing, framing, "{}", ctx());
    assert_eq!(head.keep_alive, keep_alive, "keep_alive; {}", ctx());
    let rest = &wire[n..];
    match framing {
        ResponseFraming::Empty | ResponseFraming::Length(_) => {
            assert_eq!(&rest[..body.len()], &body[..], "{}", ctx());
            assert_eq!(&rest[body.len()..], &spec.next[..], "{}", ctx());
        }
        ResponseFraming::Chunked => {
            let r = decode_chunked(&[rest], SERVER_MAX_TRAILER_BYTES);
            assert_eq!(r.outcome, Outcome::Done, "{}", ctx());
            assert_eq!(n + r.consumed, body_end, "{}", ctx());
            assert!(r.data == body, "chunked body differs; {}", ctx());
        }
        ResponseFraming::UntilClose => assert_eq!(&rest[..body.len()], &body[..], "{}", ctx()),
    }
    check_response_head(&wire, &method, &limits);
    check_response_stream(&wire, &method, &limits);
}

/// A request head the client encodes, from arbitrary values mapped onto valid ones.
#[derive(Debug, Clone)]
pub struct RequestSpec {
    /// By index into `REQUEST_METHODS`; past its end, an extension method made of
    /// `custom_method`.
    pub method: u8,
    pub custom_method: Vec<u8>,
    /// Mapped onto origin-form characters after a leading `/`.
    pub target: Vec<u8>,
    pub http10: bool,
    /// `x-` names and values, after a `Host`.
    pub fields: Vec<(Vec<u8>, Vec<u8>)>,
    /// The caller's own Content-Length, by index into: none, `n`, `n, n`, `abc`, two lines
    /// `n` then `n + 1` (the encoder reads the first).
    pub content_length: u8,
    pub declared: u64,
    /// The caller's own `Transfer-Encoding: gzip` (the encoder drops it).
    pub transfer_encoding: bool,
    /// The body's exact length, if known.
    pub body_len: Option<u64>,
    pub title_case: bool,
}

/// Methods `RequestSpec::method` picks from (CONNECT needs authority-form targets).
pub const REQUEST_METHODS: [Method; 8] = [
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
    Method::OPTIONS,
    Method::TRACE,
];

/// Characters of generated origin-form targets (path and query, no `%` or `#`).
const TARGET: &[u8] =
    b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@/?";

/// Encodes the request head `spec` describes with `encode_request_head` and parses it
/// back with the server's parser: it is one whole head; method, target, version come
/// back; the fields are the caller's minus Content-Length / Transfer-Encoding, plus the
/// one framing field the body calls for: none for an empty body on a method that does
/// not expect one, `content-length` for a known length (or, unknown, the caller's own
/// valid one), else `transfer-encoding: chunked`; the server's framing says the same.
/// The raw-input checks of the request parser hold on the bytes too.
pub fn check_request_round_trip(spec: &RequestSpec) {
    let method = match REQUEST_METHODS.get(spec.method as usize % 10) {
        Some(m) => m.clone(),
        None => {
            let mut m = b"X".to_vec();
            m.extend(spec.custom_method.iter().take(15).map(|&b| b'A' + b % 26));
            Method::from_bytes(&m).expect("a token")
        }
    };
    let mut target = String::from("/");
    target.extend(
        spec.target
            .iter()
            .take(64)
            .map(|&b| TARGET[b as usize % TARGET.len()] as char),
    );
    let version = if spec.http10 {
        Version::HTTP_10
    } else {
        Version::HTTP_11
    };
    let mut headers = HeaderMap::new();
    headers.append(
        http::header::HOST,
        HeaderValue::from_static("example.com:8080"),
    );
    for (name, value) in spec.fields.iter().take(40) {
        headers.append(
            HeaderName::from_bytes(extension_name(name).as_bytes()).expect("a token"),
            trailer_value(&value[..value.len().min(128)]),
        );
    }
    let mut expected = headers.clone();
    let n = spec.declared;
    let declared = match spec.content_length % 5 {
        0 => None,
        1 => {
            headers.append(http::header::CONTENT_LENGTH, HeaderValue::from(n));
            Some(n)
        }
        2 => {
            let list = format!("{n}, {n}");
            headers.append(
                http::header::CONTENT_LENGTH,
                HeaderValue::from_str(&list).unwrap(),
            );
            Some(n)
        }
        3 => {
            headers.append(
                http::header::CONTENT_LENGTH,
                HeaderValue::from_static("abc"),
            );
            None
        }
        _ => {
            headers.append(http::header::CONTENT_LENGTH, HeaderValue::from(n));
            headers.append(
                http::header::CONTENT_LENGTH,
                HeaderValue::from(n.wrapping_add(1)),
            );
            Some(n)
        }
    };
    if spec.transfer_encoding {
        headers.append(
            http::header::TRANSFER_ENCODING,
            HeaderValue::from_static("gzip"),
        );
    }
    // The framing field the encoder must write (`None`: none at all).
    let expects_body = matches!(method, Method::POST | Method::PUT | Method::PATCH);
    let field = match (spec.body_len, declared) {
        (Some(0), _) if !expects_body => None,
        (Some(len), _) | (None, Some(len)) => Some(Framing::Length(len)),
        (None, None) => Some(Framing::Chunked),
    };
    let framing = match field {
        None | Some(Framing::Length(0)) => Framing::Empty,
        Some(f) => f,
    };
    match field {
        Some(Framing::Length(len)) => {
            expected.append(http::header::CONTENT_LENGTH, HeaderValue::from(len));
        }
        Some(Framing::Chunked) => {
            expected.append(
                http::header::TRANSFER_ENCODING,
                HeaderValue::from_static("chunked"),
            );
        }
        None | Some(Framing::Empty) => {}
    }

    // HTTP/1.0 has no chunked coding: a body of unknown length cannot be framed there.
    let Some(bytes) = encode_request_head(
        &method,
        &target,
        version,
        &headers,
        spec.body_len,
        spec.title_case,
    ) else {
        assert!(
            version == Version::HTTP_10 && field == Some(Framing::Chunked),
            "the encoder refused a request it can frame: {spec:?}"
        );
        return;
    };
    assert!(
        !(version == Version::HTTP_10 && field == Some(Framing::Chunked)),
        "an HTTP/1.0 body of unknown length was framed: {spec:?}"
    );
    let ctx = || format!("{spec:?}: {}", show(&bytes));
    let limits = Limits::default();
    let (head, consumed) = match parse_request_head(&bytes, &limits) {
        Ok(Some(h)) => h,
        other => panic!(
            "the server parses the client's head as {other:?}; {}",
            ctx()
        ),
    };
    assert_eq!(consumed, bytes.len(), "{}", ctx());
    assert_eq!(head.method, method, "{}", ctx());
    assert_eq!(head.uri.to_string(), target, "{}", ctx());
    assert_eq!(head.version, version, "{}", ctx());
    if spec.http10 && field == Some(Framing::Chunked) {
        // HTTP/1.0 has no chunked coding (RFC 9112 §6.1: a client MUST NOT send
        // Transfer-Encoding unless it knows the server handles HTTP/1.1), and the server
        // refuses it. How the body is sent instead is the client's choice (buffered to a
        // Content-Length, or refused before this point); only the rest must hold.
        let mut got = head.headers.clone();
        got.remove(http::header::CONTENT_LENGTH);
        expected.remove(http::header::TRANSFER_ENCODING);
        assert_eq!(got, expected, "{}", ctx());
        assert_ne!(head.framing, Framing::Chunked, "{}", ctx());
    } else {
        assert_eq!(head.headers, expected, "{}", ctx());
        assert_eq!(head.framing, framing, "{}", ctx());
    }
    check_head(&bytes, &limits);
}

// ---------------------------------------------------------------------------------------
// The server's connection machine
// ---------------------------------------------------------------------------------------

/// Serves `data` as one connection's input through the server's connection machine (an
/// echo service answers every request) and checks, whatever the input:
/// - no panic, and what is written is responses (`HTTP/1.1 ` first);
/// - the reads do not matter: `data` in one read, split in two at `split`, and byte by
///   byte (the first 512 bytes) give the same answers and the same close. Two leeways: a
///   head that breaks two rules may be refused for either, depending on how much of it
///   had arrived (a long URI is refused before the rest of its head comes), so a closing
///   error response at the end may differ in its status; and `100 Continue` goes out only
///   while no body byte has arrived;
/// - the head limits and a body limit (small and default) hold the same way.
pub fn check_server_conn(data: &[u8], split: usize) {
    for (limits, max_body) in [(Limits::default(), None), (SMALL_LIMITS, Some(64))] {
        let whole = serve_pieces(&[data], &limits, max_body);
        if !whole.0.is_empty() {
            assert!(
                whole.0.starts_with(b"HTTP/1.1 "),
                "not a response: {}; input {}",
                show(&whole.0),
                show(data)
            );
        }
        let at = split % (data.len() + 1);
        let halves = serve_pieces(&[&data[..at], &data[at..]], &limits, max_body);
        assert_same_answers(&whole, &halves, &format!("split at {at}"), data);
        let head = &data[..data.len().min(512)];
        let bytes: Vec<&[u8]> = head.chunks(1).collect();
        let one = serve_pieces(&[head], &limits, max_body);
        let by_byte = serve_pieces(&bytes, &limits, max_body);
        assert_same_answers(&one, &by_byte, "byte-by-byte reads", head);
    }
}

/// The same output and close, but for the status of a final closing error response, and
/// for `100 Continue`, which a server may omit once the body has (partly) arrived.
fn assert_same_answers(a: &(Vec<u8>, bool), b: &(Vec<u8>, bool), how: &str, data: &[u8]) {
    let (a, b) = (&without_continue(a), &without_continue(b));
    let same = a == b || {
        let (ea, eb) = (final_error(&a.0), final_error(&b.0));
        a.1 && b.1 && ea.is_some() && ea == eb
    };
    assert!(
        same,
        "{how} changed the answer:\n{}\nvs\n{}\ninput {}",
        show(&a.0),
        show(&b.0),
        show(data)
    );
}

fn without_continue(answer: &(Vec<u8>, bool)) -> (Vec<u8>, bool) {
    const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
    let mut out = Vec::with_capacity(answer.0.len());
    let mut rest = &answer.0[..];
    while let Some(at) = rest.windows(CONTINUE.len()).position(|w| w == CONTINUE) {
        out.extend_from_slice(&rest[..at]);
        rest = &rest[at + CONTINUE.len()..];
    }
    out.extend_from_slice(rest);
    (out, answer.1)
}

/// Where the last response starts, if it is an error response that closes: what comes
/// before it.
fn final_error(out: &[u8]) -> Option<&[u8]> {
    let start = out.windows(9).rposition(|w| w == b"HTTP/1.1 ")?;
    let last = &out[start..];
    let error = last.get(9).is_some_and(|c| *c == b'4' || *c == b'5');
    let closes = last.windows(19).any(|w| w == b"connection: close\r\n");
    (error && closes).then_some(&out[..start])
}
