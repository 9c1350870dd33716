//! Incremental decoder for the chunked transfer coding (RFC 9112 §7.1).
//!
//! The decoder is a byte-level state machine that never copies body data: `Data` slices
//! point into the caller's input. The only thing it buffers is the trailer section
//! (bounded by `max_trailer_bytes`); chunk-size lines are parsed on the fly (their length
//! is bounded by `MAX_CHUNK_LINE`, extensions are validated and ignored).
//!
//! Line endings must be CRLF everywhere in the chunked framing (a bare LF is an error):
//! lenient chunk parsing is a request-smuggling vector.

use std::mem;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use super::error::ParseError;

/// Longest chunk-size line (size, BWS, extensions, CRLF) accepted.
pub(crate) const MAX_CHUNK_LINE: usize = 4096;

/// What one `decode` call produced.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Decoded<'a> {
    /// Body bytes (never empty), a slice of the input.
    Data(&'a [u8]),
    /// The last chunk and the trailer section were read; the body is complete. The
    /// trailers (`None` if there were none, or only forbidden ones). The bytes after the
    /// consumed count are the next message.
    Done(Option<HeaderMap>),
    /// All of the input was consumed (kept as state where needed); more is needed.
    NeedMore,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Start of a chunk-size line, no digit yet.
    SizeStart,
    /// In the hex digits.
    Size(u64),
    /// Whitespace after the size (only `;` or CR may follow).
    SizeWs(u64),
    /// In chunk extensions (ignored up to CR).
    Ext(u64),
    /// Saw the CR ending the size line.
    SizeLf(u64),
    /// In chunk data, this many bytes left.
    Data(u64),
    /// After chunk data, expecting CR.
    DataCr,
    /// After chunk data and CR, expecting LF.
    DataLf,
    /// At the start of a trailer line (or of the final empty line).
    TrailerLineStart,
    /// Inside a trailer line (being buffered).
    TrailerLine,
    /// Saw CR at the start of a line: the final CRLF.
    TrailerEndLf,
    /// Everything was read.
    Done,
}

/// Decoder state for one chunked body. Create one per message.
#[derive(Debug)]
pub(crate) struct ChunkedDecoder {
    state: State,
    /// Bytes of the current chunk-size line so far.
    line_len: usize,
    max_trailer_bytes: usize,
    /// The trailer lines seen so far, each ending in CRLF (empty unless trailers are sent).
    trailers: Vec<u8>,
    trailer_lines: usize,
}

impl ChunkedDecoder {
    /// A decoder that accepts at most `max_trailer_bytes` of trailer lines (431 beyond).
    pub(crate) fn new(max_trailer_bytes: usize) -> Self {
        ChunkedDecoder {
            state: State::SizeStart,
            line_len: 0,
            max_trailer_bytes,
            trailers: Vec::new(),
            trailer_lines: 0,
        }
    }

    /// Decodes from `input`; returns how many bytes of input were consumed and what came
    /// out. Call repeatedly with the unconsumed rest: `Data` is returned as soon as body
    /// bytes are found (one contiguous run per call), `NeedMore` means all of `input` was
    /// consumed and more bytes are needed, `Done` means the body ended (after `Done`,
    /// further calls return `(0, Done(None))`). Errors are final (answer `err.status()`
    /// and close the connection).
    pub(crate) fn decode<'a>(
        &mut self,
        input: &'a [u8],
    ) -> Result<(usize, Decoded<'a>), ParseError> {
        let mut i = 0;
        loop {
            match self.state {
                State::Data(remaining) => {
                    let avail = input.len() - i;
                    if avail == 0 {
                        return Ok((i, Decoded::NeedMore));
                    }
                    let n = remaining.min(avail as u64) as usize;
                    let left = remaining - n as u64;
                    self.state = if left == 0 {
                        State::DataCr
                    } else {
                        State::Data(left)
                    };
                    return Ok((i + n, Decoded::Data(&input[i..i + n])));
                }
                State::TrailerLine => {
                    let rest = &input[i..];
                    match rest.iter().position(|&b| b == b'\n') {
                        None => {
                            self.push_trailer(rest)?;
                            return Ok((input.len(), Decoded::NeedMore));
                        }
                        Some(lf) => {
                            self.push_trailer(&rest[..=lf])?;
                            if !self.trailers.ends_with(b"\r\n") {
                                return Err(ParseError::InvalidTrailer);
                            }
                            self.trailer_lines += 1;
                            self.state = State::TrailerLineStart;
                            i += lf + 1;
                        }
                    }
                }
                State::Done => return Ok((i, Decoded::Done(None))),
                _ => {
                    let Some(&b) = input.get(i) else {
                        return Ok((i, Decoded::NeedMore));
                    };
                    i += 1;
                    if self.step(b)? {
                        let trailers = self.finish_trailers()?;
                        return Ok((i, Decoded::Done(trailers)));
                    }
                }
            }
        }
    }

    /// One byte in a line state; true when the body just ended.
    fn step(&mut self, b: u8) -> Result<bool, ParseError> {
        if let State::SizeStart
        | State::Size(_)
        | State::SizeWs(_)
        | State::Ext(_)
        | State::SizeLf(_) = self.state
        {
            self.line_len += 1;
            if self.line_len > MAX_CHUNK_LINE {
                return Err(ParseError::ChunkLineTooLong);
            }
        }
        self.state = match (self.state, b) {
            (State::SizeStart, _) => State::Size(hex_val(b).ok_or(ParseError::InvalidChunkSize)?),
            (State::Size(v), _) if hex_val(b).is_some() => {
                if v > u64::MAX >> 4 {
                    return Err(ParseError::ChunkSizeOverflow);
                }
                State::Size(v << 4 | hex_val(b).unwrap_or(0))
            }
            (State::Size(v) | State::SizeWs(v), b' ' | b'\t') => State::SizeWs(v),
            (State::Size(v) | State::SizeWs(v), b';') => State::Ext(v),
            (State::Size(v) | State::SizeWs(v) | State::Ext(v), b'\r') => State::SizeLf(v),
            (State::Size(_) | State::SizeWs(_) | State::Ext(_), b'\n') => {
                return Err(ParseError::InvalidChunkLineEnding)
            }
            (State::Size(_) | State::SizeWs(_), _) => return Err(ParseError::InvalidChunkSize),
            (State::Ext(v), b'\t' | 0x20..=0x7e | 0x80..=0xff) => State::Ext(v),
            (State::Ext(_), _) => return Err(ParseError::InvalidChunkExtension),
            (State::SizeLf(v), b'\n') => {
                self.line_len = 0;
                if v == 0 {
                    State::TrailerLineStart
                } else {
                    State::Data(v)
                }
            }
            (State::SizeLf(_), _) => return Err(ParseError::InvalidChunkLineEnding),
            (State::DataCr, b'\r') => State::DataLf,
            (State::DataLf, b'\n') => State::SizeStart,
            (State::DataCr | State::DataLf, _) => return Err(ParseError::MissingChunkDataCrlf),
            (State::TrailerLineStart, b'\r') => State::TrailerEndLf,
            (State::TrailerLineStart, b'\n') => return Err(ParseError::InvalidTrailer),
            (State::TrailerLineStart, _) => {
                self.push_trailer(&[b])?;
                State::TrailerLine
            }
            (State::TrailerEndLf, b'\n') => {
                self.state = State::Done;
                return Ok(true);
            }
            (State::TrailerEndLf, _) => return Err(ParseError::InvalidTrailer),
            (State::Data(_) | State::TrailerLine | State::Done, _) => {
                unreachable!("handled in decode")
            }
        };
        Ok(false)
    }

    fn push_trailer(&mut self, bytes: &[u8]) -> Result<(), ParseError> {
        if self.trailers.len() + bytes.len() > self.max_trailer_bytes {
            return Err(ParseError::TrailersTooLarge);
        }
        self.trailers.extend_from_slice(bytes);
        Ok(())
    }

    fn finish_trailers(&mut self) -> Result<Option<HeaderMap>, ParseError> {
        if self.trailers.is_empty() {
            return Ok(None);
        }
        let mut buf = mem::take(&mut self.trailers);
        buf.extend_from_slice(b"\r\n");
        let mut slots = vec![httparse::EMPTY_HEADER; self.trailer_lines];
        let parsed = match httparse::parse_headers(&buf, &mut slots) {
            Ok(httparse::Status::Complete((n, parsed))) if n == buf.len() => parsed,
            _ => return Err(ParseError::InvalidTrailer),
        };
        let mut map =
            HeaderMap::try_with_capacity(parsed.len()).map_err(|_| ParseError::TrailersTooLarge)?;
        for h in parsed {
            let name = HeaderName::from_bytes(h.name.as_bytes())
                .map_err(|_| ParseError::InvalidTrailer)?;
            let value = HeaderValue::from_bytes(h.value).map_err(|_| ParseError::InvalidTrailer)?;
            if !is_forbidden_trailer(&name) {
                map.try_append(name, value)
                    .map_err(|_| ParseError::TrailersTooLarge)?;
            }
        }
        Ok(if map.is_empty() { None } else { Some(map) })
    }
}

fn hex_val(b: u8) -> Option<u64> {
    match b {
        b'0'..=b'9' => Some(u64::from(b - b'0')),
        b'a'..=b'f' => Some(u64::from(b - b'a' + 10)),
        b'A'..=b'F' => Some(u64::from(b - b'A' + 10)),
        _ => None,
    }
}

/// Fields that must not be taken from (or sent in) a trailer section (RFC 9110 §6.5.1):
/// framing, routing, connection control, authentication, request modifiers, response
/// control and content description. The decoder drops them; `encode_last_chunk` skips
/// them.
pub(crate) fn is_forbidden_trailer(name: &HeaderName) -> bool {
    const FORBIDDEN: &[HeaderName] = &[
        header::TRANSFER_ENCODING,
        header::CONTENT_LENGTH,
        header::TRAILER,
        header::TE,
        header::HOST,
        header::CONNECTION,
        header::UPGRADE,
        header::EXPECT,
        header::MAX_FORWARDS,
        header::AUTHORIZATION,
        header::PROXY_AUTHORIZATION,
        header::PROXY_AUTHENTICATE,
        header::WWW_AUTHENTICATE,
        header::COOKIE,
        header::SET_COOKIE,
        header::CACHE_CONTROL,
        header::PRAGMA,
        header::EXPIRES,
        header::AGE,
        header::DATE,
        header::LOCATION,
        header::RETRY_AFTER,
        header::VARY,
        header::WARNING,
        header::RANGE,
        header::IF_MATCH,
        header::IF_NONE_MATCH,
        header::IF_MODIFIED_SINCE,
        header::IF_UNMODIFIED_SINCE,
        header::IF_RANGE,
        header::CONTENT_TYPE,
        header::CONTENT_ENCODING,
        header::CONTENT_RANGE,
    ];
    FORBIDDEN.contains(name) || name == "keep-alive" || name == "proxy-connection"
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::encode::{encode_chunk, encode_chunk_header, encode_last_chunk};
    use super::super::testutil::Rng;
    use super::*;

    pub(crate) use crate::proto::h1::body::MAX_TRAILER_BYTES as DEFAULT_MAX_TRAILER_BYTES;

    type Body = (Vec<u8>, Option<HeaderMap>, usize);

    /// Feeds `input` in pieces of the given sizes (the last piece takes the rest), the way
    /// a connection would; returns the body, the trailers and the total consumed bytes.
    fn decode_pieces(
        input: &[u8],
        sizes: &mut dyn Iterator<Item = usize>,
        max_trailer: usize,
    ) -> Result<Body, ParseError> {
        let mut dec = ChunkedDecoder::new(max_trailer);
        let mut body = Vec::new();
        let mut pos = 0;
        loop {
            let end = match sizes.next() {
                Some(n) => (pos + n).min(input.len()),
                None => input.len(),
            };
            let piece = &input[pos..end];
            let mut off = 0;
            loop {
                let (n, d) = dec.decode(&piece[off..])?;
                assert!(off + n <= piece.len());
                match d {
                    Decoded::Data(x) => {
                        assert!(!x.is_empty());
                        // A slice of the input, ending at the consumed count.
                        let p = piece[off..].as_ptr() as usize;
                        assert_eq!(x.as_ptr() as usize + x.len(), p + n);
                        body.extend_from_slice(x);
                        off += n;
                    }
                    Decoded::NeedMore => {
                        assert_eq!(off + n, piece.len());
                        break;
                    }
                    Decoded::Done(t) => {
                        assert_eq!(dec.state, State::Done);
                        return Ok((body, t, pos + off + n));
                    }
                }
            }
            pos = end;
            if pos == input.len() {
                panic!("input ended before the body did");
            }
        }
    }

    fn decode_all(input: &[u8]) -> Result<Body, ParseError> {
        decode_pieces(input, &mut std::iter::empty(), DEFAULT_MAX_TRAILER_BYTES)
    }

    fn decode_err(input: &[u8]) -> ParseError {
        let mut dec = ChunkedDecoder::new(DEFAULT_MAX_TRAILER_BYTES);
        let mut off = 0;
        loop {
            match dec.decode(&input[off..]) {
                Err(e) => return e,
                Ok((n, Decoded::Data(_))) => off += n,
                Ok((_, d)) => panic!(
                    "expected an error for {:?}, got {d:?}",
                    String::from_utf8_lossy(input)
                ),
            }
        }
    }

    fn trailers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.append(*k, HeaderValue::from_static(v));
        }
        m
    }

    #[test]
    fn simple() {
        let input = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
        let (body, t, n) = decode_all(input).unwrap();
        assert_eq!(body, b"hello world");
        assert_eq!(t, None);
        assert_eq!(n, input.len());
    }

    #[test]
    fn data_returned_in_steps() {
        let mut dec = ChunkedDecoder::new(100);
        let input = b"5\r\nhello\r\n0\r\n\r\n";
        assert_eq!(dec.decode(input).unwrap(), (8, Decoded::Data(b"hello")));
        assert_eq!(dec.decode(&input[8..]).unwrap(), (7, Decoded::Done(None)));
        assert_eq!(dec.state, State::Done);
        assert_eq!(dec.decode(b"more").unwrap(), (0, Decoded::Done(None)));
        let mut dec = ChunkedDecoder::new(100);
        assert_eq!(dec.decode(b"").unwrap(), (0, Decoded::NeedMore));
        assert_eq!(dec.decode(b"a\r\n01").unwrap(), (5, Decoded::Data(b"01")));
        assert_eq!(dec.decode(b"").unwrap(), (0, Decoded::NeedMore));
        assert_eq!(dec.decode(b"234").unwrap(), (3, Decoded::Data(b"234")));
        assert_eq!(
            dec.decode(b"56789\r").unwrap(),
            (5, Decoded::Data(b"56789"))
        );
        assert_eq!(dec.decode(b"\r").unwrap(), (1, Decoded::NeedMore));
        assert_eq!(dec.decode(b"\n0\r\n").unwrap(), (4, Decoded::NeedMore));
        assert_eq!(dec.decode(b"\r\n").unwrap(), (2, Decoded::Done(None)));
    }

    #[test]
    fn pipelined_next_message_untouched() {
        let input = b"3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\n";
        let (body, _, n) = decode_all(input).unwrap();
        assert_eq!(body, b"abc");
        assert_eq!(&input[n..], b"GET / HTTP/1.1\r\n");
    }

    #[test]
    fn sizes_and_extensions() {
        let (body, _, _) = decode_all(b"A\r\n0123456789\r\n0\r\n\r\n").unwrap();
        assert_eq!(body.len(), 10);
        let (body, _, _) = decode_all(b"00000000000000000003\r\nabc\r\n000\r\n\r\n").unwrap();
        assert_eq!(body, b"abc");
        let (body, _, _) =
            decode_all(b"3;name=value;other=\"q;uo\\\"ted\"\r\nabc\r\n0; last\r\n\r\n").unwrap();
        assert_eq!(body, b"abc");
        let (body, _, _) = decode_all(b"3 ;ext\r\nabc\r\n0\t\r\n\r\n").unwrap();
        assert_eq!(body, b"abc");
        let (body, _, _) = decode_all(b"3;\xff\tx\r\nabc\r\n0\r\n\r\n").unwrap();
        assert_eq!(body, b"abc");
    }

    #[test]
    fn bad_sizes_are_400() {
        for (input, e) in [
            (&b"\r\n"[..], ParseError::InvalidChunkSize),
            (b"g\r\n", ParseError::InvalidChunkSize),
            (b"-5\r\n", ParseError::InvalidChunkSize),
            (b"+5\r\n", ParseError::InvalidChunkSize),
            (b"0x5\r\n", ParseError::InvalidChunkSize),
            (b" 5\r\n", ParseError::InvalidChunkSize),
            (b"5 5\r\n", ParseError::InvalidChunkSize),
            (b";5\r\n", ParseError::InvalidChunkSize),
            (b"10000000000000000\r\n", ParseError::ChunkSizeOverflow),
            (b"ffffffffffffffff0\r\n", ParseError::ChunkSizeOverflow),
            (b"5\nhello\r\n", ParseError::InvalidChunkLineEnding),
            (b"5\rhello\r\n", ParseError::InvalidChunkLineEnding),
            (b"5\r\nhelloX\r\n", ParseError::MissingChunkDataCrlf),
            (b"5\r\nhello\rX", ParseError::MissingChunkDataCrlf),
            (b"5\r\nhello\n0\r\n\r\n", ParseError::MissingChunkDataCrlf),
            (b"5\r\nhello\r\n\r\n", ParseError::InvalidChunkSize),
            (b"3;a\x00b\r\n", ParseError::InvalidChunkExtension),
            (b"3;a\nb\r\n", ParseError::InvalidChunkLineEnding),
            (b"3;a\x7fb\r\n", ParseError::InvalidChunkExtension),
            (b"3;a\rb\r\n", ParseError::InvalidChunkLineEnding),
            (b"0\r\n\n", ParseError::InvalidTrailer),
            (b"0\r\n\rX", ParseError::InvalidTrailer),
        ] {
            assert_eq!(decode_err(input), e, "{:?}", String::from_utf8_lossy(input));
            assert_eq!(e.status().as_u16(), 400);
        }
        // The largest size is fine (the body just never ends here).
        let mut dec = ChunkedDecoder::new(0);
        assert_eq!(
            dec.decode(b"ffffffffffffffff\r\nab").unwrap(),
            (20, Decoded::Data(b"ab"))
        );
    }

    #[test]
    fn long_chunk_lines_are_rejected() {
        let mut line = b"5;".to_vec();
        line.extend(std::iter::repeat_n(b'x', MAX_CHUNK_LINE - 4));
        line.extend_from_slice(b"\r\nhello\r\n0\r\n\r\n");
        let (body, _, _) = decode_all(&line).unwrap();
        assert_eq!(body, b"hello");
        let mut line = b"5;".to_vec();
        line.extend(std::iter::repeat_n(b'x', MAX_CHUNK_LINE - 3));
        line.extend_from_slice(b"\r\nhello\r\n0\r\n\r\n");
        assert_eq!(decode_err(&line), ParseError::ChunkLineTooLong);
        // Leading zeros count too.
        let mut zeros = vec![b'0'; MAX_CHUNK_LINE + 1];
        zeros.extend_from_slice(b"\r\n\r\n");
        assert_eq!(decode_err(&zeros), ParseError::ChunkLineTooLong);
        // Byte by byte, nothing is buffered: the bound is on the count.
        let mut dec = ChunkedDecoder::new(0);
        dec.decode(b"1;").unwrap();
        let mut res = Ok((0, Decoded::NeedMore));
        for _ in 0..MAX_CHUNK_LINE {
            res = dec.decode(b"e");
            if res.is_err() {
                break;
            }
        }
        assert_eq!(res, Err(ParseError::ChunkLineTooLong));
    }

    #[test]
    fn trailers_parsed() {
        let input = b"3\r\nabc\r\n0\r\nX-Checksum: 123\r\nX-Other: a b\r\nx-checksum: 456\r\n\r\n";
        let (body, t, n) = decode_all(input).unwrap();
        assert_eq!(body, b"abc");
        assert_eq!(n, input.len());
        let t = t.unwrap();
        assert_eq!(t.len(), 3);
        let sums: Vec<_> = t.get_all("x-checksum").iter().collect();
        assert_eq!(sums, ["123", "456"]);
        assert_eq!(t["x-other"], "a b");
    }

    #[test]
    fn forbidden_trailers_dropped() {
        let input =
            b"0\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\nHost: x\r\nX-Ok: 1\r\n\r\n";
        let (_, t, _) = decode_all(input).unwrap();
        let t = t.unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t["x-ok"], "1");
        let (_, t, _) = decode_all(b"0\r\nContent-Length: 5\r\n\r\n").unwrap();
        assert_eq!(t, None);
    }

    #[test]
    fn bad_trailers_are_400() {
        for input in [
            &b"0\r\nX-A: b\r\n  folded\r\n\r\n"[..],
            b"0\r\nX-A : b\r\n\r\n",
            b"0\r\nnocolon\r\n\r\n",
            b"0\r\nX-A: a\x01b\r\n\r\n",
            b"0\r\nX-A: b\n\r\n",
            b"0\r\nX-A: b\rc\r\n\r\n",
        ] {
            assert_eq!(
                decode_err(input),
                ParseError::InvalidTrailer,
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn trailers_bounded_431() {
        let input = b"0\r\nX-A: 0123456789\r\n\r\n"; // trailer line: 17 bytes
        let (_, t, _) = decode_pieces(input, &mut std::iter::empty(), 17).unwrap();
        assert!(t.is_some());
        let e = decode_pieces(input, &mut std::iter::empty(), 16).unwrap_err();
        assert_eq!(e, ParseError::TrailersTooLarge);
        assert_eq!(e.status().as_u16(), 431);
        // Byte by byte too, and the buffer never grows past the bound.
        let e = decode_pieces(input, &mut std::iter::repeat(1), 16).unwrap_err();
        assert_eq!(e, ParseError::TrailersTooLarge);
        let mut dec = ChunkedDecoder::new(64);
        dec.decode(b"0\r\nX: ").unwrap();
        let mut res = Ok((0, Decoded::NeedMore));
        for _ in 0..1000 {
            res = dec.decode(b"aaaa");
            assert!(dec.trailers.len() <= 64);
            if res.is_err() {
                break;
            }
        }
        assert_eq!(res, Err(ParseError::TrailersTooLarge));
        // More trailer fields than a HeaderMap holds: an error, not a panic.
        let mut many = b"0\r\n".to_vec();
        for i in 0..40_000 {
            many.extend_from_slice(format!("h{i}:\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(
            decode_pieces(&many, &mut std::iter::empty(), 1 << 20).unwrap_err(),
            ParseError::TrailersTooLarge
        );
        // max_trailer_bytes = 0: no trailers at all, but the empty section is fine.
        assert!(decode_pieces(b"0\r\n\r\n", &mut std::iter::empty(), 0).is_ok());
        assert_eq!(
            decode_pieces(b"0\r\nA: b\r\n\r\n", &mut std::iter::empty(), 0).unwrap_err(),
            ParseError::TrailersTooLarge
        );
    }

    fn sample_bodies() -> Vec<(Vec<u8>, Vec<u8>, Option<HeaderMap>)> {
        let mut v = Vec::new();
        let mut enc = |chunks: &[&[u8]], t: Option<HeaderMap>| {
            let mut out = Vec::new();
            let mut body = Vec::new();
            for c in chunks {
                encode_chunk(c, &mut out);
                body.extend_from_slice(c);
            }
            encode_last_chunk(t.as_ref(), &mut out);
            v.push((out, body, t));
        };
        enc(&[], None);
        enc(&[b"x"], None);
        enc(&[b"hello", b" ", b"world"], None);
        enc(&[&[0xab; 300], b"", &[b'\r'; 17], b"\r\n0\r\n\r\n"], None);
        enc(
            &[b"data"],
            Some(trailers(&[
                ("x-sum", "abc"),
                ("x-sum", "def"),
                ("grpc-status", "0"),
            ])),
        );
        enc(&[], Some(trailers(&[("x-empty", "")])));
        // Hand-written, with extensions and odd spacing.
        v.push((
            b"2;a=b\r\nhi\r\n1 ; q=\"x;y\"\r\n!\r\n0;end\r\nX-T: 1\r\n\r\n".to_vec(),
            b"hi!".to_vec(),
            Some(trailers(&[("x-t", "1")])),
        ));
        v
    }

    #[test]
    fn every_split_point() {
        for (input, body, t) in sample_bodies() {
            for split in 0..=input.len() {
                let got = decode_pieces(&input, &mut [split].into_iter(), 1024).unwrap();
                assert_eq!(got.0, body, "split {split}");
                assert_eq!(got.1, t, "split {split}");
                assert_eq!(got.2, input.len());
            }
            // Every pair of split points for the short ones.
            if input.len() <= 64 {
                for a in 0..=input.len() {
                    for b in 0..=input.len() - a {
                        let got = decode_pieces(&input, &mut [a, b].into_iter(), 1024).unwrap();
                        assert_eq!((got.0, got.1), (body.clone(), t.clone()));
                    }
                }
            }
        }
    }

    #[test]
    fn byte_by_byte() {
        for (input, body, t) in sample_bodies() {
            let got = decode_pieces(&input, &mut std::iter::repeat(1), 1024).unwrap();
            assert_eq!(got.0, body);
            assert_eq!(got.1, t);
            assert_eq!(got.2, input.len());
        }
    }

    #[test]
    fn random_round_trips() {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for _ in 0..500 {
            let mut out = Vec::new();
            let mut body = Vec::new();
            for _ in 0..rng.below(8) {
                let len = match rng.below(4) {
                    0 => rng.below(3),
                    1 => rng.below(40),
                    2 => rng.below(5000),
                    _ => 1 + rng.below(70_000),
                };
                let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                if rng.below(2) == 0 && !data.is_empty() {
                    encode_chunk_header(data.len(), &mut out);
                    out.extend_from_slice(&data);
                    out.extend_from_slice(b"\r\n");
                } else {
                    encode_chunk(&data, &mut out);
                }
                body.extend_from_slice(&data);
            }
            let t = if rng.below(3) == 0 {
                let mut m = HeaderMap::new();
                for i in 0..1 + rng.below(4) {
                    let name = HeaderName::from_bytes(format!("x-t{i}").as_bytes()).unwrap();
                    let value = HeaderValue::from_str(&rng.next().to_string()).unwrap();
                    m.append(name, value);
                }
                Some(m)
            } else {
                None
            };
            encode_last_chunk(t.as_ref(), &mut out);
            let mut sizes = std::iter::from_fn(|| {
                Some(match rng.below(3) {
                    0 => rng.below(4),
                    1 => rng.below(100),
                    _ => rng.below(10_000),
                })
            });
            let got = decode_pieces(&out, &mut sizes, 4096).unwrap();
            assert_eq!(got.0, body);
            assert_eq!(got.1, t);
            assert_eq!(got.2, out.len());
        }
    }

    #[test]
    fn random_garbage_never_panics() {
        let mut rng = Rng(0xdead_beef_cafe_f00d);
        let alphabet: &[u8] = b"0123456789abcdefABCDEFxg;= \t\r\n\r\n:X-\x00\xff\"";
        for round in 0..20_000 {
            let mut input: Vec<u8> = if round % 2 == 0 {
                (0..rng.below(200))
                    .map(|_| alphabet[rng.below(alphabet.len())])
                    .collect()
            } else {
                let (mut b, _, _) = sample_bodies().swap_remove(rng.below(7));
                for _ in 0..1 + rng.below(3) {
                    let i = rng.below(b.len());
                    b[i] = alphabet[rng.below(alphabet.len())];
                }
                b
            };
            if rng.below(3) == 0 {
                input.extend((0..rng.below(50)).map(|_| rng.next() as u8));
            }
            let mut dec = ChunkedDecoder::new(64);
            let mut pos = 0;
            while pos < input.len() {
                let end = (pos + 1 + rng.below(16)).min(input.len());
                match dec.decode(&input[pos..end]) {
                    Ok((n, Decoded::Data(d))) => {
                        assert!(!d.is_empty() && n <= end - pos);
                        pos += n;
                    }
                    Ok((n, Decoded::NeedMore)) => {
                        assert_eq!(pos + n, end);
                        pos = end;
                    }
                    Ok((_, Decoded::Done(_))) | Err(_) => break,
                }
                assert!(dec.trailers.len() <= 64);
            }
        }
    }

    #[test]
    fn state_is_small() {
        assert!(mem::size_of::<ChunkedDecoder>() <= 80);
        assert!(is_forbidden_trailer(&header::CONTENT_LENGTH));
        assert!(is_forbidden_trailer(&HeaderName::from_static("keep-alive")));
        assert!(!is_forbidden_trailer(&HeaderName::from_static(
            "grpc-status"
        )));
    }
}
