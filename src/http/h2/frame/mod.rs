//! HTTP/2 frames (RFC 9113 §4 and §6): parsing from a round's buffer and writing into the
//! output buffer.
//!
//! Sans-IO and stateless: [`parse`] borrows the frame at the front of the round's buffer
//! (payloads are slices of it, never copies) and checks everything a frame can be checked
//! for without stream state; stream states, CONTINUATION sequencing and flow-control
//! windows are the connection machine's. The writers append to the round's one output
//! buffer. Nothing here panics on any input.

use std::fmt;

#[cfg(test)]
mod tests;

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

pub(crate) fn parse_head(b: &[u8; HEAD_LEN]) -> Head {
    Head {
        len: u32::from_be_bytes([0, b[0], b[1], b[2]]),
        kind: b[3],
        flags: b[4],
        stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & STREAM_MASK,
    }
}

/// Parses the frame at the front of `buf`. `Ok(None)`: incomplete, read more. A
/// connection error the head alone shows (a length over `max_frame_size`, a stream id or
/// length the type forbids) comes as soon as the head is in, so nobody buffers a frame
/// that is refused anyway; the rest once the whole frame is (a stream error consumes the
/// frame, so it needs all of it). `Ok(Some((frame, consumed)))` otherwise.
pub(crate) fn parse(
    buf: &[u8],
    max_frame_size: u32,
) -> Result<Option<(Frame<'_>, usize)>, FrameError> {
    let Some(head) = buf.first_chunk::<HEAD_LEN>() else {
        return Ok(None);
    };
    let head = parse_head(head);
    check_head(&head, max_frame_size)?;
    let end = head.frame_len();
    let Some(payload) = buf.get(HEAD_LEN..end) else {
        return Ok(None);
    };
    Ok(Some((parse_payload(&head, payload)?, end)))
}

/// The connection errors a head shows by itself (§4.2, §6).
fn check_head(head: &Head, max_frame_size: u32) -> Result<(), FrameError> {
    use ErrorCode as E;
    if head.len > max_frame_size {
        // §4.2 lets a non-field-block frame on a stream be a stream error; one rule for
        // all is simpler, and only a broken peer sends such a frame.
        return Err(conn(
            E::FRAME_SIZE_ERROR,
            "frame longer than SETTINGS_MAX_FRAME_SIZE",
        ));
    }
    let zero = head.stream == 0;
    let padded = u32::from(head.has(flag::PADDED));
    let (err, code, reason) = match head.kind {
        kind::DATA if zero => (true, E::PROTOCOL_ERROR, "DATA on stream 0"),
        kind::DATA => (
            head.len < padded,
            E::FRAME_SIZE_ERROR,
            "padded DATA without a pad length",
        ),
        kind::HEADERS if zero => (true, E::PROTOCOL_ERROR, "HEADERS on stream 0"),
        kind::HEADERS if head.len < padded => (
            true,
            E::FRAME_SIZE_ERROR,
            "padded HEADERS without a pad length",
        ),
        kind::HEADERS => (
            // §4.2: too small for its mandatory fields, and a field-block frame, so a
            // connection error.
            head.has(flag::PRIORITY) && head.len < padded + 5,
            E::FRAME_SIZE_ERROR,
            "HEADERS with PRIORITY shorter than its priority fields",
        ),
        kind::PRIORITY => (zero, E::PROTOCOL_ERROR, "PRIORITY on stream 0"),
        kind::RST_STREAM if zero => (true, E::PROTOCOL_ERROR, "RST_STREAM on stream 0"),
        kind::RST_STREAM => (
            head.len != 4,
            E::FRAME_SIZE_ERROR,
            "RST_STREAM length not 4",
        ),
        kind::SETTINGS if !zero => (true, E::PROTOCOL_ERROR, "SETTINGS on a stream"),
        kind::SETTINGS if head.has(flag::ACK) => (
            head.len != 0,
            E::FRAME_SIZE_ERROR,
            "SETTINGS ACK with a payload",
        ),
        kind::SETTINGS => (
            head.len % 6 != 0,
            E::FRAME_SIZE_ERROR,
            "SETTINGS length not a multiple of 6",
        ),
        kind::PUSH_PROMISE if zero => (true, E::PROTOCOL_ERROR, "PUSH_PROMISE on stream 0"),
        kind::PUSH_PROMISE if head.len < padded => (
            true,
            E::FRAME_SIZE_ERROR,
            "padded PUSH_PROMISE without a pad length",
        ),
        kind::PUSH_PROMISE => (
            head.len < padded + 4,
            E::FRAME_SIZE_ERROR,
            "PUSH_PROMISE shorter than its promised stream id",
        ),
        kind::PING if !zero => (true, E::PROTOCOL_ERROR, "PING on a stream"),
        kind::PING => (head.len != 8, E::FRAME_SIZE_ERROR, "PING length not 8"),
        kind::GOAWAY if !zero => (true, E::PROTOCOL_ERROR, "GOAWAY on a stream"),
        kind::GOAWAY => (head.len < 8, E::FRAME_SIZE_ERROR, "GOAWAY shorter than 8"),
        kind::WINDOW_UPDATE => (
            head.len != 4,
            E::FRAME_SIZE_ERROR,
            "WINDOW_UPDATE length not 4",
        ),
        kind::CONTINUATION => (zero, E::PROTOCOL_ERROR, "CONTINUATION on stream 0"),
        _ => (false, E::NO_ERROR, ""),
    };
    if err {
        Err(conn(code, reason))
    } else {
        Ok(())
    }
}

/// The frame from a complete payload whose head passed [`check_head`].
fn parse_payload<'a>(head: &Head, payload: &'a [u8]) -> Result<Frame<'a>, FrameError> {
    use ErrorCode as E;
    let stream = head.stream;
    let stream_err = |code, reason| FrameError::Stream {
        stream,
        code,
        reason,
        consumed: head.frame_len(),
    };
    Ok(match head.kind {
        kind::DATA => {
            let (_, data) = unpad(head, payload, 0)?;
            Frame::Data {
                stream,
                end_stream: head.has(flag::END_STREAM),
                data,
                flow_len: head.len,
            }
        }
        kind::HEADERS => {
            let fixed = if head.has(flag::PRIORITY) { 5 } else { 0 };
            let (fields, fragment) = unpad(head, payload, fixed)?;
            let priority = match fields.first_chunk::<5>() {
                Some(fields) => {
                    let priority = parse_priority(fields);
                    if priority.dependency == stream {
                        // RFC 7540 §5.3.1 makes this a stream error, but resetting the
                        // stream would drop the field block and desync HPACK (§4.3), so
                        // it is a connection error instead (§5.4.1 allows it).
                        return Err(conn(
                            E::PROTOCOL_ERROR,
                            "HEADERS depending on its own stream",
                        ));
                    }
                    Some(priority)
                }
                None => None,
            };
            Frame::Headers {
                stream,
                end_stream: head.has(flag::END_STREAM),
                end_headers: head.has(flag::END_HEADERS),
                priority,
                fragment,
            }
        }
        kind::PRIORITY => {
            let Some(fields) = payload.first_chunk::<5>().filter(|_| payload.len() == 5) else {
                // §6.3: a stream error, so it waits for the whole frame to consume it.
                return Err(stream_err(E::FRAME_SIZE_ERROR, "PRIORITY length not 5"));
            };
            let priority = parse_priority(fields);
            if priority.dependency == stream {
                return Err(stream_err(
                    E::PROTOCOL_ERROR,
                    "PRIORITY depending on its own stream",
                ));
            }
            Frame::Priority { stream, priority }
        }
        kind::RST_STREAM => Frame::RstStream {
            stream,
            code: ErrorCode(be_u32(payload)),
        },
        kind::SETTINGS => Frame::Settings {
            ack: head.has(flag::ACK),
            params: SettingsParams(payload),
        },
        kind::PUSH_PROMISE => {
            let (fields, fragment) = unpad(head, payload, 4)?;
            let promised = be_u32(fields) & STREAM_MASK;
            if promised == 0 {
                // §6.6: the promised id must be a valid new stream id, which 0 never is
                // (§5.1.1).
                return Err(conn(E::PROTOCOL_ERROR, "PUSH_PROMISE promising stream 0"));
            }
            Frame::PushPromise {
                stream,
                promised,
                end_headers: head.has(flag::END_HEADERS),
                fragment,
            }
        }
        kind::PING => Frame::Ping {
            ack: head.has(flag::ACK),
            data: payload.first_chunk::<8>().copied().unwrap_or_default(),
        },
        kind::GOAWAY => Frame::GoAway {
            last_stream: be_u32(payload) & STREAM_MASK,
            code: ErrorCode(be_u32(payload.get(4..).unwrap_or_default())),
            debug: payload.get(8..).unwrap_or_default(),
        },
        kind::WINDOW_UPDATE => {
            let increment = be_u32(payload) & STREAM_MASK;
            if increment == 0 {
                // §6.9: an error on the window the frame is for.
                return Err(if stream == 0 {
                    conn(E::PROTOCOL_ERROR, "WINDOW_UPDATE of 0 on the connection")
                } else {
                    stream_err(E::PROTOCOL_ERROR, "WINDOW_UPDATE of 0 on a stream")
                });
            }
            Frame::WindowUpdate { stream, increment }
        }
        kind::CONTINUATION => Frame::Continuation {
            stream,
            end_headers: head.has(flag::END_HEADERS),
            fragment: payload,
        },
        kind => Frame::Unknown { kind, stream },
    })
}

/// Splits a payload into its fixed fields (`fixed` bytes after the pad length, if any)
/// and its body, padding stripped (§6.1, §6.2, §6.6).
fn unpad<'a>(
    head: &Head,
    payload: &'a [u8],
    fixed: usize,
) -> Result<(&'a [u8], &'a [u8]), FrameError> {
    let (pad, rest) = match (head.has(flag::PADDED), payload.split_first()) {
        (false, _) => (0, payload),
        (true, Some((&pad, rest))) => (usize::from(pad), rest),
        // check_head refused it already.
        (true, None) => {
            return Err(conn(
                ErrorCode::FRAME_SIZE_ERROR,
                "padded frame without a pad length",
            ))
        }
    };
    let Some((fields, body)) = rest.split_at_checked(fixed) else {
        return Err(conn(
            ErrorCode::FRAME_SIZE_ERROR,
            "frame shorter than its fixed fields",
        ));
    };
    match body.len().checked_sub(pad) {
        Some(len) => Ok((fields, &body[..len])),
        // §6.1, §6.2, §6.6: padding as long as what is left for it or longer.
        None => Err(conn(
            ErrorCode::PROTOCOL_ERROR,
            "padding longer than the frame's payload",
        )),
    }
}

fn parse_priority(b: &[u8; 5]) -> Priority {
    let word = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Priority {
        dependency: word & STREAM_MASK,
        exclusive: word & !STREAM_MASK != 0,
        weight: b[4],
    }
}

/// The big-endian u32 at the front of `b` (0 if `b` is shorter: lengths are checked
/// before, and this keeps the parser free of panicking indexing).
fn be_u32(b: &[u8]) -> u32 {
    b.first_chunk::<4>().map_or(0, |b| u32::from_be_bytes(*b))
}

/// SETTINGS values (§6.5.2) with their defaults; [`Settings::apply`] validates and applies
/// one SETTINGS frame's params. `None` is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Settings {
    pub header_table_size: u32,
    pub enable_push: bool,
    pub max_concurrent_streams: Option<u32>,
    pub initial_window_size: u32,
    pub max_frame_size: u32,
    pub max_header_list_size: Option<u32>,
    /// RFC 8441 (extended CONNECT).
    pub enable_connect_protocol: bool,
}

impl Default for Settings {
    /// The RFC's initial values (§6.5.2), what holds before the peer's SETTINGS.
    fn default() -> Self {
        Settings {
            header_table_size: DEFAULT_HEADER_TABLE_SIZE,
            enable_push: true,
            max_concurrent_streams: None,
            initial_window_size: DEFAULT_INITIAL_WINDOW_SIZE,
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            max_header_list_size: None,
            enable_connect_protocol: false,
        }
    }
}

impl Settings {
    /// Validates and applies one SETTINGS frame's params in order (§6.5.3: a later value
    /// for the same id wins). All or nothing: on an error `self` is unchanged.
    pub(crate) fn apply(&mut self, params: SettingsParams<'_>) -> Result<(), FrameError> {
        let mut next = *self;
        for (id, value) in params {
            next.apply_one(id, value)?;
        }
        *self = next;
        Ok(())
    }

    /// Validates and applies one parameter; unknown ids are ignored (§6.5.2).
    pub(crate) fn apply_one(&mut self, id: u16, value: u32) -> Result<(), FrameError> {
        use ErrorCode as E;
        match id {
            SETTINGS_HEADER_TABLE_SIZE => self.header_table_size = value,
            SETTINGS_ENABLE_PUSH => {
                self.enable_push = match value {
                    0 => false,
                    1 => true,
                    _ => return Err(conn(E::PROTOCOL_ERROR, "SETTINGS_ENABLE_PUSH not 0 or 1")),
                }
            }
            SETTINGS_MAX_CONCURRENT_STREAMS => self.max_concurrent_streams = Some(value),
            SETTINGS_INITIAL_WINDOW_SIZE => {
                if value > MAX_WINDOW {
                    return Err(conn(
                        E::FLOW_CONTROL_ERROR,
                        "SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1",
                    ));
                }
                self.initial_window_size = value;
            }
            SETTINGS_MAX_FRAME_SIZE => {
                if !(DEFAULT_MAX_FRAME_SIZE..=MAX_MAX_FRAME_SIZE).contains(&value) {
                    return Err(conn(
                        E::PROTOCOL_ERROR,
                        "SETTINGS_MAX_FRAME_SIZE outside 2^14..=2^24-1",
                    ));
                }
                self.max_frame_size = value;
            }
            SETTINGS_MAX_HEADER_LIST_SIZE => self.max_header_list_size = Some(value),
            SETTINGS_ENABLE_CONNECT_PROTOCOL => {
                self.enable_connect_protocol = match value {
                    0 => false,
                    1 => true,
                    _ => {
                        return Err(conn(
                            E::PROTOCOL_ERROR,
                            "SETTINGS_ENABLE_CONNECT_PROTOCOL not 0 or 1",
                        ))
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

// Writers: each appends one frame (or a header block's frames) to `out`. Lengths are the
// callers' to keep within the peer's SETTINGS_MAX_FRAME_SIZE (only `finish_headers`
// splits); stream ids and increments are sent with the reserved bit unset.

fn write_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    debug_assert!(len <= MAX_MAX_FRAME_SIZE as usize, "frame length {len}");
    out.extend_from_slice(&head_bytes(len, kind, flags, stream));
}

fn head_bytes(len: usize, kind: u8, flags: u8, stream: u32) -> [u8; HEAD_LEN] {
    let [_, l0, l1, l2] = (len as u32).to_be_bytes();
    let [s0, s1, s2, s3] = (stream & STREAM_MASK).to_be_bytes();
    [l0, l1, l2, kind, flags, s0, s1, s2, s3]
}

fn flag_if(cond: bool, flag: u8) -> u8 {
    if cond {
        flag
    } else {
        0
    }
}

pub(crate) fn write_settings(out: &mut Vec<u8>, params: &[(u16, u32)]) {
    write_head(out, params.len() * 6, kind::SETTINGS, 0, 0);
    for &(id, value) in params {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

pub(crate) fn write_settings_ack(out: &mut Vec<u8>) {
    write_head(out, 0, kind::SETTINGS, flag::ACK, 0);
}

pub(crate) fn write_ping(out: &mut Vec<u8>, ack: bool, data: [u8; 8]) {
    write_head(out, 8, kind::PING, flag_if(ack, flag::ACK), 0);
    out.extend_from_slice(&data);
}

pub(crate) fn write_goaway(out: &mut Vec<u8>, last_stream: u32, code: ErrorCode, debug: &[u8]) {
    write_head(out, 8 + debug.len(), kind::GOAWAY, 0, 0);
    out.extend_from_slice(&(last_stream & STREAM_MASK).to_be_bytes());
    out.extend_from_slice(&code.0.to_be_bytes());
    out.extend_from_slice(debug);
}

pub(crate) fn write_rst_stream(out: &mut Vec<u8>, stream: u32, code: ErrorCode) {
    write_head(out, 4, kind::RST_STREAM, 0, stream);
    out.extend_from_slice(&code.0.to_be_bytes());
}

pub(crate) fn write_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    write_head(out, 4, kind::WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&(increment & STREAM_MASK).to_be_bytes());
}

pub(crate) fn write_priority(out: &mut Vec<u8>, stream: u32, priority: Priority) {
    write_head(out, 5, kind::PRIORITY, 0, stream);
    write_priority_fields(out, priority);
}

fn write_priority_fields(out: &mut Vec<u8>, p: Priority) {
    let word = (p.dependency & STREAM_MASK) | if p.exclusive { !STREAM_MASK } else { 0 };
    out.extend_from_slice(&word.to_be_bytes());
    out.push(p.weight);
}

/// A DATA frame's 9-byte head only: the payload follows (appended by the caller, or sent
/// as its own iovec), so a body is never copied just to frame it.
pub(crate) fn write_data_head(out: &mut Vec<u8>, stream: u32, len: usize, end_stream: bool) {
    write_head(
        out,
        len,
        kind::DATA,
        flag_if(end_stream, flag::END_STREAM),
        stream,
    );
}

pub(crate) fn write_data(out: &mut Vec<u8>, stream: u32, data: &[u8], end_stream: bool) {
    write_data_head(out, stream, data.len(), end_stream);
    out.extend_from_slice(data);
}

/// A CONTINUATION carrying `fragment` as it is (no splitting).
pub(crate) fn write_continuation(
    out: &mut Vec<u8>,
    stream: u32,
    fragment: &[u8],
    end_headers: bool,
) {
    write_head(
        out,
        fragment.len(),
        kind::CONTINUATION,
        flag_if(end_headers, flag::END_HEADERS),
        stream,
    );
    out.extend_from_slice(fragment);
}

/// A PUSH_PROMISE carrying `fragment` as it is (no splitting, no padding).
pub(crate) fn write_push_promise(
    out: &mut Vec<u8>,
    stream: u32,
    promised: u32,
    fragment: &[u8],
    end_headers: bool,
) {
    write_head(
        out,
        4 + fragment.len(),
        kind::PUSH_PROMISE,
        flag_if(end_headers, flag::END_HEADERS),
        stream,
    );
    out.extend_from_slice(&(promised & STREAM_MASK).to_be_bytes());
    out.extend_from_slice(fragment);
}

/// Where a header block being written in place starts in `out`: [`begin_headers`]'s
/// reserved head. Not Copy, so a block is finished once.
#[must_use = "a header block is sent only once finish_headers fills in its head"]
#[derive(Debug)]
pub(crate) struct HeadersMark(usize);

/// Reserves a HEADERS head at the end of `out`; the caller appends the HPACK block
/// straight after it and then calls [`finish_headers`], so the block is never copied on
/// the common path.
pub(crate) fn begin_headers(out: &mut Vec<u8>) -> HeadersMark {
    let mark = HeadersMark(out.len());
    out.extend_from_slice(&[0; HEAD_LEN]);
    mark
}

/// Fills in the head reserved by `mark` for the block after it (everything appended to
/// `out` since). A block over `max_frame_size` (the peer's; clamped to what a head can
/// say) becomes HEADERS + CONTINUATION frames (§4.3), split in place: the block grows by
/// one head per extra frame and its pieces move back by those heads, from the last piece
/// to the first. END_STREAM goes on the HEADERS (§8.1), END_HEADERS on the last frame.
pub(crate) fn finish_headers(
    out: &mut Vec<u8>,
    mark: HeadersMark,
    stream: u32,
    end_stream: bool,
    max_frame_size: u32,
) {
    let start = mark.0;
    let max = max_frame_size.clamp(1, MAX_MAX_FRAME_SIZE) as usize;
    let block_len = out.len() - start - HEAD_LEN;
    let end_stream = flag_if(end_stream, flag::END_STREAM);
    if block_len <= max {
        let head = head_bytes(
            block_len,
            kind::HEADERS,
            end_stream | flag::END_HEADERS,
            stream,
        );
        out[start..start + HEAD_LEN].copy_from_slice(&head);
        return;
    }
    let frames = block_len.div_ceil(max);
    out.resize(out.len() + (frames - 1) * HEAD_LEN, 0);
    let block = start + HEAD_LEN;
    // Piece i (of `max` bytes, the last one shorter) moves back by the i heads before it.
    for i in (0..frames).rev() {
        let from = block + i * max;
        let len = max.min(block_len - i * max);
        let at = start + i * (HEAD_LEN + max);
        out.copy_within(from..from + len, at + HEAD_LEN);
        let (kind, flags) = match i {
            0 => (kind::HEADERS, end_stream),
            _ if i == frames - 1 => (kind::CONTINUATION, flag::END_HEADERS),
            _ => (kind::CONTINUATION, 0),
        };
        out[at..at + HEAD_LEN].copy_from_slice(&head_bytes(len, kind, flags, stream));
    }
}

/// Any frame, as given, for building peer-side and invalid test input.
#[cfg(test)]
pub(crate) fn write_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    out.extend_from_slice(&head_bytes(payload.len(), kind, flags, 0));
    // The stream id as given, reserved bit and all.
    let at = out.len() - 4;
    out[at..].copy_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// A HEADERS frame with everything a peer may put in one (padding, priority), no
/// splitting: test input.
#[cfg(test)]
pub(crate) fn write_headers(
    out: &mut Vec<u8>,
    stream: u32,
    block: &[u8],
    end_stream: bool,
    end_headers: bool,
    priority: Option<Priority>,
    pad: Option<u8>,
) {
    let flags = flag_if(end_stream, flag::END_STREAM)
        | flag_if(end_headers, flag::END_HEADERS)
        | flag_if(priority.is_some(), flag::PRIORITY)
        | flag_if(pad.is_some(), flag::PADDED);
    let pad_len = pad.map_or(0, |p| 1 + usize::from(p));
    let prio_len = if priority.is_some() { 5 } else { 0 };
    write_head(
        out,
        pad_len + prio_len + block.len(),
        kind::HEADERS,
        flags,
        stream,
    );
    if let Some(pad) = pad {
        out.push(pad);
    }
    if let Some(priority) = priority {
        write_priority_fields(out, priority);
    }
    out.extend_from_slice(block);
    out.resize(out.len() + usize::from(pad.unwrap_or(0)), 0);
}

/// A padded DATA frame: test input.
#[cfg(test)]
pub(crate) fn write_data_padded(
    out: &mut Vec<u8>,
    stream: u32,
    data: &[u8],
    end_stream: bool,
    pad: u8,
) {
    let flags = flag_if(end_stream, flag::END_STREAM) | flag::PADDED;
    write_head(
        out,
        1 + data.len() + usize::from(pad),
        kind::DATA,
        flags,
        stream,
    );
    out.push(pad);
    out.extend_from_slice(data);
    out.resize(out.len() + usize::from(pad), 0);
}

/// A padded PUSH_PROMISE: test input.
#[cfg(test)]
pub(crate) fn write_push_promise_padded(
    out: &mut Vec<u8>,
    stream: u32,
    promised: u32,
    fragment: &[u8],
    end_headers: bool,
    pad: u8,
) {
    let flags = flag_if(end_headers, flag::END_HEADERS) | flag::PADDED;
    write_head(
        out,
        1 + 4 + fragment.len() + usize::from(pad),
        kind::PUSH_PROMISE,
        flags,
        stream,
    );
    out.push(pad);
    out.extend_from_slice(&(promised & STREAM_MASK).to_be_bytes());
    out.extend_from_slice(fragment);
    out.resize(out.len() + usize::from(pad), 0);
}
