//! Message bodies on the wire, for both roles: how a body is delimited ([`BodyFraming`]),
//! one decoder for what arrives ([`BodyDecoder`]) and one encoder for what leaves
//! ([`BodyEncoder`]). The server's request bodies and responses, and the client's
//! responses and uploads, all go through these, so every framing rule and bound lives
//! here once.

use super::chunked::{ChunkedDecoder, Decoded};
use super::encode::{encode_chunk_header, encode_last_chunk};
use super::error::ParseError;
use super::framing::BodyFraming;
use http::HeaderMap;
use std::fmt;

/// Most trailer bytes accepted at the end of a chunked body (431 past it on the server,
/// a protocol error on the client).
pub(crate) const MAX_TRAILER_BYTES: usize = 16 * 1024;

/// What one [`BodyDecoder::decode`] call produced.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BodyChunk<'a> {
    /// Body bytes (never empty), a slice of the input.
    Data(&'a [u8]),
    /// The body is complete, with its trailers if a chunked body had any. Bytes after
    /// the consumed count belong to the next message.
    End(Option<HeaderMap>),
    /// All of the input was used; more is needed.
    NeedMore,
}

/// The peer closed before the body was complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(feature = "client"), allow(dead_code))] // the client's response bodies
pub(crate) struct Truncated;

/// Reads one body off the wire, whatever its framing. No copies: data comes back as
/// slices of the input.
#[derive(Debug)]
pub(crate) enum BodyDecoder {
    /// This many bytes are left (never 0: that is `Done`).
    Length(u64),
    /// Boxed: the chunked state is larger than the rest, and most bodies are not chunked.
    Chunked(Box<ChunkedDecoder>),
    UntilClose,
    /// The body has ended.
    Done,
}

impl BodyDecoder {
    pub(crate) fn new(framing: BodyFraming) -> BodyDecoder {
        match framing {
            BodyFraming::Empty | BodyFraming::Length(0) => BodyDecoder::Done,
            BodyFraming::Length(n) => BodyDecoder::Length(n),
            BodyFraming::Chunked => {
                BodyDecoder::Chunked(Box::new(ChunkedDecoder::new(MAX_TRAILER_BYTES)))
            }
            BodyFraming::UntilClose => BodyDecoder::UntilClose,
        }
    }

    /// Decodes from `input`: the bytes used and what came out. Call again with the rest
    /// after `Data`; `End` is returned once (then `(0, End(None))`). Errors are final: the
    /// message boundaries can no longer be trusted.
    pub(crate) fn decode<'a>(
        &mut self,
        input: &'a [u8],
    ) -> Result<(usize, BodyChunk<'a>), ParseError> {
        match self {
            BodyDecoder::Done => Ok((0, BodyChunk::End(None))),
            _ if input.is_empty() => Ok((0, BodyChunk::NeedMore)),
            BodyDecoder::Length(left) => {
                let n = (*left).min(input.len() as u64) as usize;
                *left -= n as u64;
                if *left == 0 {
                    *self = BodyDecoder::Done;
                }
                Ok((n, BodyChunk::Data(&input[..n])))
            }
            BodyDecoder::UntilClose => Ok((input.len(), BodyChunk::Data(input))),
            BodyDecoder::Chunked(dec) => match dec.decode(input)? {
                (n, Decoded::Data(d)) => Ok((n, BodyChunk::Data(d))),
                (n, Decoded::NeedMore) => Ok((n, BodyChunk::NeedMore)),
                (n, Decoded::Done(trailers)) => {
                    *self = BodyDecoder::Done;
                    Ok((n, BodyChunk::End(trailers)))
                }
            },
        }
    }

    /// The peer closed: the end of a body read until close, else a truncated one (unless
    /// it had already ended).
    #[cfg_attr(not(feature = "client"), allow(dead_code))] // the client's response bodies
    pub(crate) fn at_eof(&mut self) -> Result<(), Truncated> {
        match self {
            BodyDecoder::Done => Ok(()),
            BodyDecoder::UntilClose => {
                *self = BodyDecoder::Done;
                Ok(())
            }
            _ => Err(Truncated),
        }
    }

    #[cfg_attr(not(feature = "client"), allow(dead_code))] // the client's response bodies
    pub(crate) fn is_done(&self) -> bool {
        matches!(self, BodyDecoder::Done)
    }

    /// Bytes still to come, when the framing says.
    pub(crate) fn remaining(&self) -> Option<u64> {
        match self {
            BodyDecoder::Length(n) => Some(*n),
            BodyDecoder::Done => Some(0),
            _ => None,
        }
    }
}

/// How an outgoing body broke its framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EncodeError {
    /// More bytes than the declared Content-Length.
    TooLong { declared: u64 },
    /// The body ended before its declared Content-Length.
    TooShort { declared: u64, sent: u64 },
    /// Bytes sent around the encoder into a chunked body.
    NeedsChunks,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::TooLong { declared } => {
                write!(f, "the body is longer than its content-length {declared}")
            }
            EncodeError::TooShort { declared, sent } => write!(
                f,
                "the body ended after {sent} of its content-length {declared} bytes"
            ),
            EncodeError::NeedsChunks => f.write_str("unframed bytes in a chunked body"),
        }
    }
}

impl std::error::Error for EncodeError {}

/// Frames one outgoing body: chunk lines for chunked, the count held to a Content-Length.
/// The caller writes the data itself between `begin_data` and `end_data` (copied into the
/// same buffer, or sent as its own slice), so large data is never copied here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BodyEncoder {
    framing: BodyFraming,
    sent: u64,
}

impl BodyEncoder {
    /// `UntilClose` means close-delimited (an HTTP/1.0 peer with a body of unknown size).
    pub(crate) fn new(framing: BodyFraming) -> BodyEncoder {
        BodyEncoder { framing, sent: 0 }
    }

    #[cfg_attr(not(feature = "client"), allow(dead_code))] // the client's uploads
    pub(crate) fn framing(&self) -> BodyFraming {
        self.framing
    }

    /// Body bytes still owed under `Length` framing.
    pub(crate) fn remaining(&self) -> Option<u64> {
        match self.framing {
            BodyFraming::Length(n) => Some(n - self.sent),
            BodyFraming::Empty => Some(0),
            _ => None,
        }
    }

    /// Before `len` bytes of data (`len > 0`): their framing prefix, into `out`. Returns
    /// whether the data is to be written at all (a body framed as empty, say a HEAD
    /// response's, is dropped).
    pub(crate) fn begin_data(
        &mut self,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<bool, EncodeError> {
        if len == 0 {
            return Ok(false);
        }
        let len64 = len as u64;
        match self.framing {
            BodyFraming::Empty => return Ok(false),
            BodyFraming::Length(declared) if self.sent + len64 > declared => {
                return Err(EncodeError::TooLong { declared })
            }
            BodyFraming::Chunked => encode_chunk_header(len, out),
            BodyFraming::Length(_) | BodyFraming::UntilClose => {}
        }
        self.sent += len64;
        Ok(true)
    }

    /// Counts `len` bytes sent by other means (a file, by `sendfile`): only a body without
    /// chunk framing can be sent that way.
    pub(crate) fn count_sent(&mut self, len: u64) -> Result<(), EncodeError> {
        match self.framing {
            BodyFraming::Length(declared) if self.sent.saturating_add(len) > declared => {
                Err(EncodeError::TooLong { declared })
            }
            BodyFraming::Length(_) | BodyFraming::UntilClose => {
                self.sent += len;
                Ok(())
            }
            BodyFraming::Empty => Ok(()),
            BodyFraming::Chunked => Err(EncodeError::NeedsChunks),
        }
    }

    /// After data `begin_data` accepted: its framing suffix, into `out`.
    pub(crate) fn end_data(&self, out: &mut Vec<u8>) {
        if self.framing == BodyFraming::Chunked {
            out.extend_from_slice(b"\r\n");
        }
    }

    /// Whether a `Length` body got all its bytes (so it is complete, whether or not its
    /// stream has said so yet).
    #[cfg_attr(not(feature = "client"), allow(dead_code))] // the client's uploads
    pub(crate) fn is_complete(&self) -> bool {
        self.remaining() == Some(0)
    }

    /// The end of the body (trailers only go out on a chunked body): the last chunk, or a
    /// check that a `Length` body got all its bytes.
    pub(crate) fn finish(
        &mut self,
        trailers: Option<&HeaderMap>,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        match self.framing {
            BodyFraming::Chunked => encode_last_chunk(trailers, out),
            BodyFraming::Length(declared) if self.sent != declared => {
                return Err(EncodeError::TooShort {
                    declared,
                    sent: self.sent,
                })
            }
            _ => {}
        }
        // Nothing more may be written.
        self.framing = BodyFraming::Empty;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `input` fed in pieces of `step` bytes, as the rounds would.
    fn decode_all(framing: BodyFraming, input: &[u8], step: usize) -> (Vec<u8>, bool, usize) {
        let mut dec = BodyDecoder::new(framing);
        let mut body = Vec::new();
        let mut kept = Vec::new();
        let mut fed = 0;
        let mut used_total = 0;
        while fed < input.len() {
            let end = (fed + step).min(input.len());
            kept.extend_from_slice(&input[fed..end]);
            fed = end;
            loop {
                let (n, chunk) = dec.decode(&kept).unwrap();
                let done = match chunk {
                    BodyChunk::Data(d) => {
                        body.extend_from_slice(d);
                        false
                    }
                    BodyChunk::End(_) => true,
                    BodyChunk::NeedMore => {
                        kept.drain(..n);
                        used_total += n;
                        break;
                    }
                };
                kept.drain(..n);
                used_total += n;
                if done || dec.is_done() {
                    return (body, true, used_total);
                }
                if kept.is_empty() {
                    break;
                }
            }
        }
        (body, dec.is_done(), used_total)
    }

    #[test]
    fn every_framing_in_any_split() {
        let chunked = b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\nNEXT";
        for step in 1..chunked.len() {
            let (body, done, used) = decode_all(BodyFraming::Chunked, chunked, step);
            assert_eq!((body.as_slice(), done, used), (&b"abcde"[..], true, 20));
            let (body, done, used) = decode_all(BodyFraming::Length(5), b"abcdeNEXT", step);
            assert_eq!((body.as_slice(), done, used), (&b"abcde"[..], true, 5));
        }
        let (body, done, _) = decode_all(BodyFraming::UntilClose, b"all of it", 4);
        assert_eq!((body.as_slice(), done), (&b"all of it"[..], false));
    }

    #[test]
    fn eof_ends_only_a_body_read_until_close() {
        let mut d = BodyDecoder::new(BodyFraming::UntilClose);
        assert_eq!(d.at_eof(), Ok(()));
        assert!(d.is_done());
        let mut d = BodyDecoder::new(BodyFraming::Length(3));
        assert_eq!(d.decode(b"ab").unwrap().0, 2);
        assert_eq!(d.remaining(), Some(1));
        assert_eq!(d.at_eof(), Err(Truncated));
        let mut d = BodyDecoder::new(BodyFraming::Chunked);
        assert_eq!(d.at_eof(), Err(Truncated));
        let mut d = BodyDecoder::new(BodyFraming::Empty);
        assert_eq!(d.decode(b"GET").unwrap(), (0, BodyChunk::End(None)));
        assert_eq!(d.at_eof(), Ok(()));
    }

    #[test]
    fn chunked_trailers_and_errors_come_through() {
        let mut d = BodyDecoder::new(BodyFraming::Chunked);
        let (n, c) = d.decode(b"0\r\nx-t: 1\r\n\r\n").unwrap();
        assert_eq!(n, 13);
        let BodyChunk::End(Some(t)) = c else {
            panic!("{c:?}")
        };
        assert_eq!(t["x-t"], "1");
        let mut d = BodyDecoder::new(BodyFraming::Chunked);
        assert!(d.decode(b"zz\r\n").is_err());
        // The trailer bound is the one constant.
        let mut d = BodyDecoder::new(BodyFraming::Chunked);
        let mut big = b"0\r\n".to_vec();
        while big.len() <= MAX_TRAILER_BYTES + 16 {
            big.extend_from_slice(b"x-pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
        }
        assert!(d.decode(&big).is_err());
    }

    #[test]
    fn encoder_frames_and_holds_the_length() {
        let mut out = Vec::new();
        let mut e = BodyEncoder::new(BodyFraming::Chunked);
        assert!(e.begin_data(3, &mut out).unwrap());
        out.extend_from_slice(b"abc");
        e.end_data(&mut out);
        e.finish(None, &mut out).unwrap();
        assert_eq!(out, b"3\r\nabc\r\n0\r\n\r\n");

        let mut out = Vec::new();
        let mut e = BodyEncoder::new(BodyFraming::Length(4));
        assert!(e.begin_data(3, &mut out).unwrap());
        assert!(!e.is_complete());
        assert_eq!(
            e.begin_data(2, &mut out),
            Err(EncodeError::TooLong { declared: 4 })
        );
        assert_eq!(
            e.finish(None, &mut out),
            Err(EncodeError::TooShort {
                declared: 4,
                sent: 3
            })
        );
        assert!(e.begin_data(1, &mut out).unwrap());
        assert!(e.is_complete());
        assert_eq!(e.finish(None, &mut out), Ok(()));
        assert!(out.is_empty());

        let mut e = BodyEncoder::new(BodyFraming::Empty);
        assert!(!e.begin_data(10, &mut out).unwrap());
        assert_eq!(e.finish(None, &mut out), Ok(()));
        assert!(out.is_empty());
    }
}
