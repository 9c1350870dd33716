//! The sans-IO arpc machine (github.com/lesismal/arpc's wire format, `WIRE.md` in the
//! conformance folder): frames split out of a byte stream, checked as arpc checks them,
//! pings answered; frame heads written; the calls one side has in flight, matched to their
//! responses and expired at their deadlines. No socket, clock or task: `arpc/` drives it.
//!
//! What bad input does (as arpc does it): a body length over the limit or an unknown
//! command fails the connection ([`Error`]); a frame whose method is empty, longer than
//! 127 bytes or longer than its body is dropped without an answer; a response to no call
//! in flight is dropped; a truncated frame is kept (at most one frame's bytes, within the
//! limit) until the rest comes or the connection ends.

mod calls;
mod encode;
mod header;

#[cfg(test)]
mod tests;

pub(crate) use calls::Calls;
pub(crate) use encode::{check_method, encode_frame, Head, MethodError};
pub(crate) use header::{
    Cmd, FLAG_ASYNC, FLAG_ERROR, HEADER_LEN, MAX_METHOD_LEN, STREAM_EOF, STREAM_LOCAL,
};

use header::{body_len, Header, CMD_MASK};
use std::fmt;

/// Bounds on what a peer can make the machine hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The largest `bodyLen` (method plus payload) accepted; past it the connection fails.
    /// It is checked as soon as a header's first 4 bytes are in, before anything is kept.
    pub max_body_len: u32,
}

impl Default for Limits {
    /// arpc's own default: 64 MiB less the header.
    fn default() -> Limits {
        Limits {
            max_body_len: (64 << 20) - HEADER_LEN as u32,
        }
    }
}

/// What a frame is, past the checks every frame but ping and pong goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A call to answer.
    Request,
    /// An answer to one of our calls (or a late one; [`Calls`] tells).
    Response,
    /// A one-way message.
    Notify,
    /// Stream data: `local` is set by the side that opened the stream, `eof` ends its half.
    Stream {
        /// The sender opened the stream.
        local: bool,
        /// The sender sends nothing more on it.
        eof: bool,
    },
}

/// One frame that passed the checks; its bytes borrow the input (or the kept partial).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Frame<'a> {
    pub kind: Kind,
    /// The error and async bits.
    pub flag: u8,
    pub seq: u64,
    /// 1..=127 bytes, compared as bytes.
    pub method: &'a [u8],
    /// Whatever the codec made; may be empty.
    pub payload: &'a [u8],
}

impl Frame<'_> {
    /// The async bit: a response must carry the request's.
    pub(crate) fn is_async(&self) -> bool {
        self.flag & FLAG_ASYNC != 0
    }

    /// The error bit: the payload is an error's text.
    pub(crate) fn is_error(&self) -> bool {
        self.flag & FLAG_ERROR != 0
    }
}

/// Why the connection fails. Everything else a peer can send is answered or dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Error {
    /// A header announced a body over [`Limits::max_body_len`].
    TooLarge { len: u32, max: u32 },
    /// A frame that passed the method checks had command 0 or 7..=63.
    UnknownCommand(u8),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::TooLarge { len, max } => {
                write!(
                    f,
                    "arpc frame body of {len} bytes is over the limit of {max}"
                )
            }
            Error::UnknownCommand(c) => write!(f, "arpc frame with unknown command {c}"),
        }
    }
}

impl std::error::Error for Error {}

/// The pong every ping gets: 16 bytes, all zero but `cmd`.
const PONG: [u8; HEADER_LEN] = [0, 0, 0, 0, 0, Cmd::Pong as u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];

/// Splits a byte stream into frames. Holds only an incomplete frame between reads (none
/// when a read ends on a frame's end, as it nearly always does).
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    limits: Limits,
    /// The start of a frame whose end has not come yet.
    partial: Vec<u8>,
    failed: bool,
    dropped: u64,
}

impl Decoder {
    pub(crate) fn new(limits: Limits) -> Decoder {
        Decoder {
            limits,
            ..Decoder::default()
        }
    }

    /// Takes what the peer sent: each complete frame that passes the checks goes to
    /// `on_frame`, pongs for pings are written to `out`. Err once the connection must
    /// fail; input after that is ignored.
    pub(crate) fn receive(
        &mut self,
        mut input: &[u8],
        out: &mut Vec<u8>,
        on_frame: &mut impl FnMut(Frame<'_>),
    ) -> Result<(), Error> {
        if self.failed {
            return Ok(());
        }
        let r = self.run(&mut input, out, on_frame);
        if r.is_err() {
            self.failed = true;
            self.partial = Vec::new();
        }
        r
    }

    fn run(
        &mut self,
        input: &mut &[u8],
        out: &mut Vec<u8>,
        on_frame: &mut impl FnMut(Frame<'_>),
    ) -> Result<(), Error> {
        if !self.partial.is_empty() {
            // Top up the kept frame: its length first, then the rest of it.
            if self.partial.len() < 4 {
                self.take(input, 4);
                if self.partial.len() < 4 {
                    return Ok(());
                }
            }
            let total = self.frame_len(&self.partial)?;
            self.take(input, total);
            if self.partial.len() < total {
                return Ok(());
            }
            let frame = std::mem::take(&mut self.partial);
            self.handle(&frame, out, on_frame)?;
        }
        while input.len() >= 4 {
            let total = self.frame_len(input)?;
            if input.len() < total {
                break;
            }
            let (frame, rest) = input.split_at(total);
            self.handle(frame, out, on_frame)?;
            *input = rest;
        }
        self.partial.extend_from_slice(input);
        Ok(())
    }

    /// Moves bytes from `input` to the kept frame until it is `upto` long.
    fn take(&mut self, input: &mut &[u8], upto: usize) {
        let n = (upto - self.partial.len()).min(input.len());
        self.partial.extend_from_slice(&input[..n]);
        *input = &input[n..];
    }

    /// The whole length of the frame starting `b` (at least 4 bytes), checked.
    fn frame_len(&self, b: &[u8]) -> Result<usize, Error> {
        let len = body_len(b[..4].try_into().expect("4 bytes"));
        let max = self.limits.max_body_len;
        if len > max {
            return Err(Error::TooLarge { len, max });
        }
        Ok(HEADER_LEN + len as usize)
    }

    /// One complete frame, in WIRE.md §3's order: ping and pong, the method checks, the
    /// command.
    fn handle(
        &mut self,
        frame: &[u8],
        out: &mut Vec<u8>,
        on_frame: &mut impl FnMut(Frame<'_>),
    ) -> Result<(), Error> {
        let (head, rest) = frame.split_at(HEADER_LEN);
        let h = Header::decode(head.try_into().expect("16 bytes"));
        let cmd = Cmd::from_byte(h.cmd);
        match cmd {
            Some(Cmd::Ping) => {
                out.extend_from_slice(&PONG);
                return Ok(());
            }
            Some(Cmd::Pong) => return Ok(()),
            _ => {}
        }
        let ml = usize::from(h.method_len);
        if ml == 0 || ml > MAX_METHOD_LEN || ml > rest.len() {
            self.dropped += 1;
            return Ok(());
        }
        let kind = match cmd {
            Some(Cmd::Request) => Kind::Request,
            Some(Cmd::Response) => Kind::Response,
            Some(Cmd::Notify) => Kind::Notify,
            Some(Cmd::Stream) => Kind::Stream {
                local: h.cmd & STREAM_LOCAL != 0,
                eof: h.cmd & STREAM_EOF != 0,
            },
            _ => return Err(Error::UnknownCommand(h.cmd & CMD_MASK)),
        };
        let (method, payload) = rest.split_at(ml);
        on_frame(Frame {
            kind,
            flag: h.flag,
            seq: h.seq,
            method,
            payload,
        });
        Ok(())
    }

    /// Frames dropped for their method length (for logs).
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Bytes kept of an incomplete frame.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn held_bytes(&self) -> usize {
        self.partial.len()
    }
}
