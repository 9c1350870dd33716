//! Writers: each appends one frame (or a header block's frames) to the round's output.
//! Lengths are the callers' to keep within the peer's SETTINGS_MAX_FRAME_SIZE (only
//! `finish_headers` splits); stream ids and increments are sent with the reserved bit
//! unset.

use super::*;

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

#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn write_priority(out: &mut Vec<u8>, stream: u32, priority: Priority) {
    write_head(out, 5, kind::PRIORITY, 0, stream);
    write_priority_fields(out, priority);
}

#[cfg(any(test, feature = "fuzzing"))]
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

#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn write_data(out: &mut Vec<u8>, stream: u32, data: &[u8], end_stream: bool) {
    write_data_head(out, stream, data.len(), end_stream);
    out.extend_from_slice(data);
}

#[cfg(any(test, feature = "fuzzing"))]
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

#[cfg(any(test, feature = "fuzzing"))]
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
