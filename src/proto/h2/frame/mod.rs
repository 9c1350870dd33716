//! HTTP/2 frames (RFC 9113 §4 and §6): parsing from a round's buffer and writing into the
//! output buffer.
//!
//! Sans-IO and stateless: [`parse`] borrows the frame at the front of the round's buffer
//! (payloads are slices of it, never copies) and checks everything a frame can be checked
//! for without stream state; stream states, CONTINUATION sequencing and flow-control
//! windows are the connection machine's. The writers append to the round's one output
//! buffer. Nothing here panics on any input.

use std::fmt;

mod parse;
mod settings;
#[cfg(test)]
mod tests;
mod write;

pub(crate) use parse::parse;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use parse::parse_head;
pub(crate) use settings::Settings;
pub(crate) use write::*;

/// What a client sends first (RFC 9113 §3.4), before its SETTINGS.
pub(crate) const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Length of a frame head (§4.1).
pub(crate) const HEAD_LEN: usize = 9;
/// SETTINGS_MAX_FRAME_SIZE's initial value, the most every endpoint must accept (§4.2).
pub(crate) const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;
/// The largest SETTINGS_MAX_FRAME_SIZE allowed (§6.5.2): the 24-bit length's maximum.
pub(crate) const MAX_MAX_FRAME_SIZE: u32 = (1 << 24) - 1;
/// The largest flow-control window (§6.9.1), and the largest increment.
pub(crate) const MAX_WINDOW: u32 = (1 << 31) - 1;
/// SETTINGS_INITIAL_WINDOW_SIZE's initial value (§6.5.2).
pub(crate) const DEFAULT_INITIAL_WINDOW_SIZE: u32 = 65_535;
/// SETTINGS_HEADER_TABLE_SIZE's initial value (§6.5.2).
pub(crate) const DEFAULT_HEADER_TABLE_SIZE: u32 = 4_096;
/// The opaque data of fibr's keep-alive PINGs (both roles): an ACK carrying it answers
/// ours, any other is the peer's business.
pub(crate) const KEEP_ALIVE_PING: [u8; 8] = *b"fibr-ka!";

/// The 31 bits of a stream id (the reserved bit is ignored on receipt, unset when sent).
const STREAM_MASK: u32 = MAX_WINDOW;

/// Frame type codes (§6), for matching a [`Head`]'s `kind`.
pub(crate) mod kind {
    pub(crate) const DATA: u8 = 0x0;
    pub(crate) const HEADERS: u8 = 0x1;
    pub(crate) const PRIORITY: u8 = 0x2;
    pub(crate) const RST_STREAM: u8 = 0x3;
    pub(crate) const SETTINGS: u8 = 0x4;
    pub(crate) const PUSH_PROMISE: u8 = 0x5;
    pub(crate) const PING: u8 = 0x6;
    pub(crate) const GOAWAY: u8 = 0x7;
    pub(crate) const WINDOW_UPDATE: u8 = 0x8;
    pub(crate) const CONTINUATION: u8 = 0x9;
}

/// Frame flags (§6); each means something only on the types named.
pub(crate) mod flag {
    /// DATA, HEADERS.
    pub(crate) const END_STREAM: u8 = 0x1;
    /// SETTINGS, PING.
    pub(crate) const ACK: u8 = 0x1;
    /// HEADERS, PUSH_PROMISE, CONTINUATION.
    pub(crate) const END_HEADERS: u8 = 0x4;
    /// DATA, HEADERS, PUSH_PROMISE.
    pub(crate) const PADDED: u8 = 0x8;
    /// HEADERS.
    pub(crate) const PRIORITY: u8 = 0x20;
}

/// SETTINGS parameter ids (§6.5.2, RFC 8441 §3).
pub(crate) const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
pub(crate) const SETTINGS_ENABLE_PUSH: u16 = 0x2;
pub(crate) const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub(crate) const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
pub(crate) const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;
pub(crate) const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;
pub(crate) const SETTINGS_ENABLE_CONNECT_PROTOCOL: u16 = 0x8;

/// An error code (RFC 9113 §7); unknown codes are kept as they came (§7: they must not
/// trigger special behavior, but a GOAWAY's code is still worth logging as sent).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct ErrorCode(pub u32);

// The RFC's whole list: not every code is sent by fibr, but all are named (`Debug`).
#[allow(dead_code)]
impl ErrorCode {
    pub(crate) const NO_ERROR: ErrorCode = ErrorCode(0x0);
    pub(crate) const PROTOCOL_ERROR: ErrorCode = ErrorCode(0x1);
    pub(crate) const INTERNAL_ERROR: ErrorCode = ErrorCode(0x2);
    pub(crate) const FLOW_CONTROL_ERROR: ErrorCode = ErrorCode(0x3);
    pub(crate) const SETTINGS_TIMEOUT: ErrorCode = ErrorCode(0x4);
    pub(crate) const STREAM_CLOSED: ErrorCode = ErrorCode(0x5);
    pub(crate) const FRAME_SIZE_ERROR: ErrorCode = ErrorCode(0x6);
    pub(crate) const REFUSED_STREAM: ErrorCode = ErrorCode(0x7);
    pub(crate) const CANCEL: ErrorCode = ErrorCode(0x8);
    pub(crate) const COMPRESSION_ERROR: ErrorCode = ErrorCode(0x9);
    pub(crate) const CONNECT_ERROR: ErrorCode = ErrorCode(0xa);
    pub(crate) const ENHANCE_YOUR_CALM: ErrorCode = ErrorCode(0xb);
    pub(crate) const INADEQUATE_SECURITY: ErrorCode = ErrorCode(0xc);
    pub(crate) const HTTP_1_1_REQUIRED: ErrorCode = ErrorCode(0xd);

    /// The RFC's name, or `None` for a code it does not define.
    pub(crate) fn name(self) -> Option<&'static str> {
        const NAMES: [&str; 14] = [
            "NO_ERROR",
            "PROTOCOL_ERROR",
            "INTERNAL_ERROR",
            "FLOW_CONTROL_ERROR",
            "SETTINGS_TIMEOUT",
            "STREAM_CLOSED",
            "FRAME_SIZE_ERROR",
            "REFUSED_STREAM",
            "CANCEL",
            "COMPRESSION_ERROR",
            "CONNECT_ERROR",
            "ENHANCE_YOUR_CALM",
            "INADEQUATE_SECURITY",
            "HTTP_1_1_REQUIRED",
        ];
        NAMES.get(self.0 as usize).copied()
    }
}

impl fmt::Debug for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "ErrorCode({:#x})", self.0),
        }
    }
}

/// A stream's priority as RFC 7540 §5.3 signalled it (deprecated by RFC 9113 §5.3.2, but
/// still on the wire and still parsed). `weight` is the wire value: the weight minus 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Priority {
    pub dependency: u32,
    pub exclusive: bool,
    pub weight: u8,
}

/// One parsed frame; its slices borrow the round's buffer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame<'a> {
    /// `flow_len`: the whole payload incl. padding, which flow control counts (§6.1).
    Data {
        stream: u32,
        end_stream: bool,
        data: &'a [u8],
        flow_len: u32,
    },
    Headers {
        stream: u32,
        end_stream: bool,
        end_headers: bool,
        priority: Option<Priority>,
        fragment: &'a [u8],
    },
    Priority {
        stream: u32,
        priority: Priority,
    },
    RstStream {
        stream: u32,
        code: ErrorCode,
    },
    /// The values are not checked here: [`Settings::apply`] does, so that a SETTINGS is
    /// validated and applied in one pass.
    Settings {
        ack: bool,
        params: SettingsParams<'a>,
    },
    PushPromise {
        stream: u32,
        promised: u32,
        end_headers: bool,
        fragment: &'a [u8],
    },
    Ping {
        ack: bool,
        data: [u8; 8],
    },
    GoAway {
        last_stream: u32,
        code: ErrorCode,
        debug: &'a [u8],
    },
    /// `stream` 0 is the connection's window.
    WindowUpdate {
        stream: u32,
        increment: u32,
    },
    Continuation {
        stream: u32,
        end_headers: bool,
        fragment: &'a [u8],
    },
    /// An unknown type: ignored (§4.1, §5.5), but the machine must still see it (e.g.
    /// inside a header block it is a PROTOCOL_ERROR).
    Unknown {
        kind: u8,
        stream: u32,
    },
}

#[cfg(test)]
impl Frame<'_> {
    /// The stream the frame is on (0 for the connection-level types).
    pub(crate) fn stream(&self) -> u32 {
        match *self {
            Frame::Data { stream, .. }
            | Frame::Headers { stream, .. }
            | Frame::Priority { stream, .. }
            | Frame::RstStream { stream, .. }
            | Frame::PushPromise { stream, .. }
            | Frame::WindowUpdate { stream, .. }
            | Frame::Continuation { stream, .. }
            | Frame::Unknown { stream, .. } => stream,
            Frame::Settings { .. } | Frame::Ping { .. } | Frame::GoAway { .. } => 0,
        }
    }
}

/// A SETTINGS frame's parameters (§6.5.1), read as they are iterated: `(id, value)`.
/// Copy, so a machine can look at them and still hand them to [`Settings::apply`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct SettingsParams<'a>(&'a [u8]);

impl<'a> SettingsParams<'a> {
    /// Over a payload of 6-byte parameters; a trailing partial parameter is never read.
    pub(crate) fn new(payload: &'a [u8]) -> Self {
        SettingsParams(payload)
    }
}

impl Iterator for SettingsParams<'_> {
    type Item = (u16, u32);

    fn next(&mut self) -> Option<(u16, u32)> {
        let (param, rest) = self.0.split_first_chunk::<6>()?;
        self.0 = rest;
        let id = u16::from_be_bytes([param[0], param[1]]);
        let value = u32::from_be_bytes([param[2], param[3], param[4], param[5]]);
        Some((id, value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.0.len() / 6;
        (n, Some(n))
    }
}

impl ExactSizeIterator for SettingsParams<'_> {}

impl fmt::Debug for SettingsParams<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(*self).finish()
    }
}

/// Why a frame was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameError {
    /// Close the connection with GOAWAY(code).
    Connection {
        code: ErrorCode,
        reason: &'static str,
    },
    /// Reset this stream (RST_STREAM(code)); the frame is consumed (`consumed` bytes) and
    /// the connection goes on.
    Stream {
        stream: u32,
        code: ErrorCode,
        reason: &'static str,
        consumed: usize,
    },
}

impl FrameError {
    /// The error code to send (in the GOAWAY or the RST_STREAM).
    pub(crate) fn code(&self) -> ErrorCode {
        match *self {
            FrameError::Connection { code, .. } | FrameError::Stream { code, .. } => code,
        }
    }

    /// What was wrong, for logs and GOAWAY debug data.
    pub(crate) fn reason(&self) -> &'static str {
        match *self {
            FrameError::Connection { reason, .. } | FrameError::Stream { reason, .. } => reason,
        }
    }
}

fn conn(code: ErrorCode, reason: &'static str) -> FrameError {
    FrameError::Connection { code, reason }
}

/// The 9-byte head (§4.1), for callers that want to look before the payload arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head {
    pub len: u32,
    pub kind: u8,
    pub flags: u8,
    /// The reserved bit dropped.
    pub stream: u32,
}

impl Head {
    /// The whole frame's length, head included.
    pub(crate) fn frame_len(&self) -> usize {
        HEAD_LEN + self.len as usize
    }

    fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}
