//! The properties the HTTP/1 fuzz targets check, shared with the stable fallback
//! (`tests/fuzz_fallback.rs` includes this file with `#[path]`), so libFuzzer on nightly
//! and proptest on stable hold the decoders to the same rules.
//!
//! Every check panics (with the offending input in the message) when a rule breaks.

use fibr::http::fuzzing::{
    decode_chunked, encode_chunk, encode_chunk_header, encode_last_chunk, is_forbidden_trailer,
    parse_request_head, ChunkedDecoder, Decoded, Framing, Head, Limits, Outcome,
};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::Version;

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
