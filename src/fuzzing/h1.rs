//! Thin wrappers around the sans-IO HTTP/1 codec, for the fuzz targets (`fuzz/`) and the
//! stable property tests (`tests/fuzz_fallback.rs`); public as `fibr::fuzzing::http`, with
//! HTTP/2's (`h2.rs`).

use crate::proto::h1;
use http::{HeaderMap, Method, StatusCode, Uri, Version};

/// Bounds on one request head (as `fibr::http::ServerConfig` sets them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_head_bytes: usize,
    pub max_headers: usize,
    pub max_uri_len: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        let l = h1::parse::Limits::default();
        Limits {
            max_head_bytes: l.max_head_bytes,
            max_headers: l.max_headers,
            max_uri_len: l.max_uri_len,
        }
    }
}

/// A parse or decode error: the status the server answers with, and which rule broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub status: StatusCode,
    /// The internal error's name (`Debug`), e.g. `"HeadTooLarge"`.
    pub kind: String,
}

impl From<h1::parse::ParseError> for Error {
    fn from(e: h1::parse::ParseError) -> Error {
        Error {
            status: e.status(),
            kind: format!("{e:?}"),
        }
    }
}

/// How the request body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Empty,
    Length(u64),
    Chunked,
}

/// A parsed request head.
#[derive(Debug)]
pub struct Head {
    pub method: Method,
    pub uri: Uri,
    pub version: Version,
    pub headers: HeaderMap,
    pub framing: Framing,
    pub keep_alive: bool,
    pub expect_continue: bool,
    pub upgrade: bool,
}

/// The server's head parser: `Ok(None)` = incomplete, `Ok(Some((head, consumed)))`.
pub fn parse_request_head(buf: &[u8], limits: &Limits) -> Result<Option<(Head, usize)>, Error> {
    let l = h1::parse::Limits {
        max_head_bytes: limits.max_head_bytes,
        max_headers: limits.max_headers,
        max_uri_len: limits.max_uri_len,
    };
    Ok(h1::parse::parse_request_head(buf, &l)?.map(|(h, n)| {
        let framing = match h.framing {
            h1::framing::BodyFraming::Empty => Framing::Empty,
            h1::framing::BodyFraming::Length(n) => Framing::Length(n),
            h1::framing::BodyFraming::Chunked => Framing::Chunked,
            h1::framing::BodyFraming::UntilClose => {
                unreachable!("a request body is never read until close")
            }
        };
        let head = Head {
            method: h.method,
            uri: h.uri,
            version: h.version,
            headers: h.headers,
            framing,
            keep_alive: h.keep_alive,
            expect_continue: h.expect_continue,
            upgrade: h.upgrade,
        };
        (head, n)
    }))
}

/// Feeds `pieces` (successive reads of one connection) to the server's connection
/// machine, with an echo service that answers every request with `METHOD target\n`
/// and its body as soon as the body is complete: what the server wrote, and whether it
/// closed the connection. The Date header is fixed, and no timeout expires.
pub fn serve_pieces(
    pieces: &[&[u8]],
    limits: &Limits,
    max_body_size: Option<u64>,
) -> (Vec<u8>, bool) {
    let cfg = crate::http::ServerConfig {
        max_head_bytes: limits.max_head_bytes,
        max_headers: limits.max_headers,
        max_uri_len: limits.max_uri_len,
        max_body_size,
        ..crate::http::ServerConfig::default()
    };
    h1::server::serve_pieces(pieces, &cfg.h1_limits())
}

/// What one `ChunkedDecoder::decode` call produced.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    Data(&'a [u8]),
    Done(Option<HeaderMap>),
    NeedMore,
}

/// The server's incremental chunked-body decoder, one call at a time.
#[derive(Debug)]
pub struct ChunkedDecoder(h1::chunked::ChunkedDecoder);

impl ChunkedDecoder {
    pub fn new(max_trailer_bytes: usize) -> ChunkedDecoder {
        ChunkedDecoder(h1::chunked::ChunkedDecoder::new(max_trailer_bytes))
    }

    pub fn decode<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Decoded<'a>), Error> {
        let (n, d) = self.0.decode(input)?;
        Ok((
            n,
            match d {
                h1::chunked::Decoded::Data(d) => Decoded::Data(d),
                h1::chunked::Decoded::Done(t) => Decoded::Done(t),
                h1::chunked::Decoded::NeedMore => Decoded::NeedMore,
            },
        ))
    }
}

/// How a whole chunked decode ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The body ended (the bytes after `consumed` are the next message).
    Done,
    /// Every piece was consumed and the body is not over.
    NeedMore,
    Error(Error),
    /// The decoder returned without consuming anything or producing data (a bug).
    Stuck,
}

/// The result of `decode_chunked`.
#[derive(Debug)]
pub struct Chunked {
    pub data: Vec<u8>,
    pub trailers: Option<HeaderMap>,
    /// Bytes consumed over all pieces (on an error: up to the start of the failing call).
    pub consumed: usize,
    pub outcome: Outcome,
}

/// Feeds `pieces` one after the other to one decoder, as a connection would (bytes a
/// call leaves unconsumed are kept and prepended to the next piece), collecting data.
pub fn decode_chunked(pieces: &[&[u8]], max_trailer_bytes: usize) -> Chunked {
    let mut dec = h1::chunked::ChunkedDecoder::new(max_trailer_bytes);
    let mut out = Chunked {
        data: Vec::new(),
        trailers: None,
        consumed: 0,
        outcome: Outcome::NeedMore,
    };
    let mut kept: Vec<u8> = Vec::new();
    for piece in pieces {
        kept.extend_from_slice(piece);
        let mut off = 0;
        while off < kept.len() {
            match dec.decode(&kept[off..]) {
                Err(e) => {
                    out.consumed += off;
                    out.outcome = Outcome::Error(e.into());
                    return out;
                }
                Ok((n, h1::chunked::Decoded::Data(d))) => {
                    if n == 0 || d.is_empty() {
                        out.consumed += off;
                        out.outcome = Outcome::Stuck;
                        return out;
                    }
                    out.data.extend_from_slice(d);
                    off += n;
                }
                Ok((n, h1::chunked::Decoded::Done(t))) => {
                    out.consumed += off + n;
                    out.trailers = t;
                    out.outcome = Outcome::Done;
                    return out;
                }
                Ok((n, h1::chunked::Decoded::NeedMore)) => {
                    off += n;
                    break;
                }
            }
        }
        out.consumed += off;
        kept.drain(..off);
    }
    out
}

/// `size CRLF data CRLF` (nothing for empty data).
pub fn encode_chunk(data: &[u8], out: &mut Vec<u8>) {
    h1::encode::encode_chunk(data, out)
}

/// `size CRLF` for a chunk of `len > 0` bytes (the caller writes data and CRLF).
pub fn encode_chunk_header(len: usize, out: &mut Vec<u8>) {
    h1::encode::encode_chunk_header(len, out)
}

/// `0 CRLF [trailers] CRLF` (forbidden trailer fields skipped).
pub fn encode_last_chunk(trailers: Option<&HeaderMap>, out: &mut Vec<u8>) {
    h1::encode::encode_last_chunk(trailers, out)
}

/// Whether a field is dropped from trailer sections (by decoder and encoder).
pub fn is_forbidden_trailer(name: &http::HeaderName) -> bool {
    h1::chunked::is_forbidden_trailer(name)
}

/// Bounds on one response head (as `fibr::client::Builder` sets them).
pub type ResponseLimits = h1::client::ResponseLimits;

/// How a response body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseFraming {
    Empty,
    Length(u64),
    Chunked,
    UntilClose,
}

/// A parsed response head.
#[derive(Debug)]
pub struct ResponseHead {
    pub status: StatusCode,
    pub version: Version,
    pub headers: HeaderMap,
    pub framing: ResponseFraming,
    pub keep_alive: bool,
}

/// The client's response-head parser, for a request with `method`: `Ok(None)` =
/// incomplete, `Ok(Some((head, consumed)))`; the error is the rule that broke.
pub fn parse_response_head(
    buf: &[u8],
    method: &Method,
    limits: &ResponseLimits,
) -> Result<Option<(ResponseHead, usize)>, String> {
    let parsed =
        h1::client::parse_response_head(buf, method, limits).map_err(|e| format!("{e:?}"))?;
    Ok(parsed.map(|(h, n)| {
        let framing = match h.framing {
            h1::framing::BodyFraming::Empty => ResponseFraming::Empty,
            h1::framing::BodyFraming::Length(n) => ResponseFraming::Length(n),
            h1::framing::BodyFraming::Chunked => ResponseFraming::Chunked,
            h1::framing::BodyFraming::UntilClose => ResponseFraming::UntilClose,
        };
        let head = ResponseHead {
            status: h.status,
            version: h.version,
            headers: h.headers,
            framing,
            keep_alive: h.keep_alive,
        };
        (head, n)
    }))
}

/// The client's request head for a body of `body_len` bytes (`None`: unknown, so
/// chunked unless `headers` declare a Content-Length); `None` if the body cannot be
/// framed (HTTP/1.0, unknown length, no Content-Length).
pub fn encode_request_head(
    method: &Method,
    target: &str,
    version: Version,
    headers: &HeaderMap,
    body_len: Option<u64>,
    title_case: bool,
) -> Option<Vec<u8>> {
    let framing = h1::framing::BodyFraming::choose(method, version, headers, body_len)?;
    let mut out = Vec::new();
    h1::client::encode_request_head(
        method, target, version, headers, framing, title_case, &mut out,
    );
    Some(out)
}
