//! Parsing a frame from the front of a round's buffer, with every check RFC 9113 lets a
//! frame codec make without stream state.

use super::*;

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
