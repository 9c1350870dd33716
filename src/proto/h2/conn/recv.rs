//! The frame loop both roles share: bytes in, the preface and first SETTINGS checked,
//! frames parsed and checked against the connection's state, header blocks assembled,
//! and what only a role can decide handed to its [`Role`].

use super::{Block, Core, Local, Side, StreamFlow};
use crate::proto::h2::frame::{self, ErrorCode, Frame, FrameError, MAX_WINDOW, PREFACE};

/// What one role (client or server) decides about the frames the core reads.
pub(crate) trait Role {
    /// The connection's core, and the output that frames go into.
    fn parts(&mut self) -> (&mut Core, &mut Vec<u8>);
    /// Our own settings, from the role's config.
    fn local(&self) -> Local;
    /// A connection error: GOAWAY, every stream ends.
    fn fail(&mut self, code: ErrorCode, why: &'static str);
    /// A stream error: RST_STREAM, the stream ends.
    fn reset_stream(&mut self, stream: u32, code: ErrorCode, why: &'static str);
    /// Whether `stream` is idle (§5.1): never opened by either side.
    fn is_idle(&self, stream: u32) -> bool;
    /// A live stream's flow control.
    fn flow(&mut self, stream: u32) -> Option<&mut StreamFlow>;
    /// Applies the peer's SETTINGS ([`Core::apply_settings`] with the streams' flows).
    fn apply_settings(
        &mut self,
        params: frame::SettingsParams<'_>,
    ) -> Result<(), (ErrorCode, &'static str)>;
    /// A complete frame arrived (before it is handled).
    fn frame_seen(&mut self) {}
    /// DATA within the windows on a live stream.
    fn on_data(&mut self, stream: u32, end_stream: bool, data: &[u8]);
    /// DATA on a stream that is over (its flow already given back to the connection).
    fn on_closed_data(&mut self, stream: u32);
    /// A HEADERS frame: `Some(trailers)` when its block is to be read (and whether it
    /// is trailers), `None` once the role has dealt with it.
    fn on_headers(&mut self, stream: u32) -> Option<bool>;
    /// A whole header block.
    fn on_block(&mut self, stream: u32, end_stream: bool, trailers: bool, block: &[u8]);
    /// RST_STREAM on a stream that is not idle and not one we reset.
    fn on_rst_stream(&mut self, stream: u32, code: ErrorCode);
    fn on_goaway(&mut self, last_stream: u32, code: ErrorCode);
}

/// Takes bytes read from the socket, handles every complete frame in them and keeps an
/// incomplete one.
pub(crate) fn receive<R: Role>(r: &mut R, data: &[u8]) {
    let core = r.parts().0;
    if core.is_failed() {
        return;
    }
    if core.kept.is_empty() {
        let used = process(r, data);
        let core = r.parts().0;
        if used < data.len() && !core.is_failed() {
            core.kept.extend_from_slice(&data[used..]);
        }
    } else {
        let mut buf = std::mem::take(&mut core.kept);
        buf.extend_from_slice(data);
        let used = process(r, &buf);
        buf.drain(..used.min(buf.len()));
        r.parts().0.kept = buf;
    }
    let core = r.parts().0;
    if core.is_failed() || core.kept.is_empty() {
        core.kept = Vec::new();
    }
}

/// Handles the frames in `input`; returns the bytes used.
fn process<R: Role>(r: &mut R, input: &[u8]) -> usize {
    let mut pos = 0;
    let core = r.parts().0;
    if core.awaiting_preface {
        let n = input.len().min(PREFACE.len());
        if input[..n] != PREFACE[..n] {
            r.fail(ErrorCode::PROTOCOL_ERROR, "not the HTTP/2 preface");
            return input.len();
        }
        if n < PREFACE.len() {
            return 0;
        }
        pos = n;
        core.awaiting_preface = false;
    }
    let max_frame = r.local().max_frame_size;
    while pos < input.len() && !r.parts().0.is_failed() {
        match frame::parse(&input[pos..], max_frame) {
            Ok(None) => break,
            Ok(Some((f, used))) => {
                pos += used;
                r.frame_seen();
                on_frame(r, f);
            }
            Err(FrameError::Connection { code, reason }) => r.fail(code, reason),
            Err(FrameError::Stream {
                stream,
                code,
                reason,
                consumed,
            }) => {
                pos += consumed;
                let core = r.parts().0;
                if !core.got_settings || core.block.is_some() {
                    r.fail(ErrorCode::PROTOCOL_ERROR, reason);
                } else {
                    r.reset_stream(stream, code, reason);
                }
            }
        }
    }
    if r.parts().0.is_failed() {
        input.len()
    } else {
        pos
    }
}

/// Whether a frame does no work for the peer (control frames, empty DATA or
/// CONTINUATION, unknown types): what a flood is made of.
fn does_no_work(core: &Core, f: &Frame<'_>) -> bool {
    match *f {
        Frame::Ping { ack: true, data } => {
            data != frame::KEEP_ALIVE_PING || core.ping_sent.is_none()
        }
        Frame::Priority { .. }
        | Frame::Ping { .. }
        | Frame::Unknown { .. }
        | Frame::Settings { ack: false, .. } => true,
        Frame::Settings { ack: true, .. } => !core.settings_unacked,
        Frame::Data {
            flow_len: 0,
            end_stream: false,
            ..
        } => true,
        Frame::Continuation {
            fragment,
            end_headers: false,
            ..
        } => fragment.is_empty(),
        _ => false,
    }
}

fn on_frame<R: Role>(r: &mut R, f: Frame<'_>) {
    let local = r.local();
    let (core, out) = r.parts();
    if !core.got_settings {
        if !matches!(f, Frame::Settings { ack: false, .. }) {
            let why = match core.side {
                Side::Client => "the server's first frame is not SETTINGS",
                Side::Server => "the first frame is not SETTINGS",
            };
            return r.fail(ErrorCode::PROTOCOL_ERROR, why);
        }
        core.got_settings = true;
    }
    if does_no_work(core, &f) && core.idle_frame(&local) {
        return r.fail(
            ErrorCode::ENHANCE_YOUR_CALM,
            "too many frames that do no work",
        );
    }
    if let Some(block) = &core.block {
        // §6.10: nothing but the block's CONTINUATION frames until it ends.
        let ok = matches!(f, Frame::Continuation { stream, .. } if stream == block.stream);
        if !ok {
            let why = "a frame other than CONTINUATION inside a header block";
            return r.fail(ErrorCode::PROTOCOL_ERROR, why);
        }
    }
    match f {
        Frame::Data {
            stream,
            end_stream,
            data,
            flow_len,
        } => on_data(r, stream, end_stream, data, flow_len),
        Frame::Headers {
            stream,
            end_stream,
            end_headers,
            fragment,
            ..
        } => {
            let Some(trailers) = r.on_headers(stream) else {
                return;
            };
            let block = Block {
                stream,
                end_stream,
                trailers,
                bytes: Vec::new(),
            };
            on_fragment(r, block, end_headers, fragment);
        }
        Frame::Continuation {
            end_headers,
            fragment,
            ..
        } => match core.block.take() {
            Some(block) => on_fragment(r, *block, end_headers, fragment),
            None => r.fail(ErrorCode::PROTOCOL_ERROR, "CONTINUATION without HEADERS"),
        },
        Frame::Priority { .. } | Frame::Unknown { .. } => {}
        Frame::RstStream { stream, code } => {
            if r.is_idle(stream) {
                return r.fail(ErrorCode::PROTOCOL_ERROR, "RST_STREAM on an idle stream");
            }
            // Crossed ours: not the peer's own cancel.
            if !r.parts().0.send.resets.contains(stream) {
                r.on_rst_stream(stream, code);
            }
        }
        Frame::Settings { ack: true, .. } => {
            if std::mem::take(&mut core.settings_unacked) {
                let size = local.header_table_size as usize;
                core.decoder.set_max_table_size(size);
            }
        }
        Frame::Settings { ack: false, params } => match r.apply_settings(params) {
            Ok(()) => frame::write_settings_ack(r.parts().1),
            Err((code, why)) => r.fail(code, why),
        },
        Frame::PushPromise { .. } => {
            let why = match core.side {
                Side::Client => "PUSH_PROMISE though SETTINGS_ENABLE_PUSH is 0",
                Side::Server => "PUSH_PROMISE from a client",
            };
            r.fail(ErrorCode::PROTOCOL_ERROR, why)
        }
        Frame::Ping { ack: true, data }
            if data == frame::KEEP_ALIVE_PING && core.ping_sent.is_some() =>
        {
            core.ping_sent = None;
        }
        Frame::Ping { ack, data } => {
            if !ack {
                frame::write_ping(out, true, data);
            }
        }
        Frame::GoAway {
            last_stream, code, ..
        } => r.on_goaway(last_stream, code),
        Frame::WindowUpdate { stream, increment } => on_window_update(r, stream, increment),
    }
}

/// A HEADERS or CONTINUATION fragment of `block`: kept until END_HEADERS, then the whole
/// block goes to the role. A block larger than our header list limit on the wire closes
/// the connection (the CONTINUATION flood).
fn on_fragment<R: Role>(r: &mut R, mut block: Block, end_headers: bool, fragment: &[u8]) {
    let max = r.local().max_header_list_size as usize;
    let core = r.parts().0;
    if block.bytes.len() + fragment.len() > max {
        let why = "a header block over max_header_list_size";
        return r.fail(ErrorCode::ENHANCE_YOUR_CALM, why);
    }
    if !end_headers {
        block.bytes.extend_from_slice(fragment);
        core.block = Some(Box::new(block));
    } else if block.bytes.is_empty() {
        r.on_block(block.stream, block.end_stream, block.trailers, fragment);
    } else {
        block.bytes.extend_from_slice(fragment);
        r.on_block(block.stream, block.end_stream, block.trailers, &block.bytes);
    }
}

/// DATA: counted against both windows (padding included, and given back at once), then
/// the payload goes to the role.
fn on_data<R: Role>(r: &mut R, stream: u32, end_stream: bool, data: &[u8], flow_len: u32) {
    let core = r.parts().0;
    let flow = i64::from(flow_len);
    core.recv_window -= flow;
    if core.recv_window < 0 {
        return r.fail(
            ErrorCode::FLOW_CONTROL_ERROR,
            "DATA beyond the connection window",
        );
    }
    if r.is_idle(stream) {
        return r.fail(ErrorCode::PROTOCOL_ERROR, "DATA on an idle stream");
    }
    let core = r.parts().0;
    if core.send.resets.contains(stream) {
        // Sent before the peer saw our reset: ignored (§5.1), but counted against the
        // connection's window and given back (§6.9).
        core.credit += u64::from(flow_len);
        return;
    }
    let padding = u64::from(flow_len) - data.len() as u64;
    let Some(s) = r.flow(stream) else {
        // Closed: counted against the connection and given back.
        r.parts().0.credit += u64::from(flow_len);
        return r.on_closed_data(stream);
    };
    s.credit += padding;
    s.recv -= flow;
    let over = s.recv < 0;
    let core = r.parts().0;
    core.credit += padding;
    if over {
        core.credit += data.len() as u64;
        let why = "DATA beyond the stream window";
        return r.reset_stream(stream, ErrorCode::FLOW_CONTROL_ERROR, why);
    }
    r.on_data(stream, end_stream, data);
}

fn on_window_update<R: Role>(r: &mut R, stream: u32, increment: u32) {
    let inc = i64::from(increment);
    if stream == 0 {
        let core = r.parts().0;
        core.send.window += inc;
        if core.send.window > i64::from(MAX_WINDOW) {
            r.fail(
                ErrorCode::FLOW_CONTROL_ERROR,
                "the connection window overflowed",
            );
        }
        return;
    }
    if r.is_idle(stream) {
        return r.fail(ErrorCode::PROTOCOL_ERROR, "WINDOW_UPDATE on an idle stream");
    }
    if r.parts().0.send.resets.contains(stream) {
        return; // §5.1: sent before the peer saw our reset
    }
    let Some(s) = r.flow(stream) else {
        return; // closed: allowed for a while after (§6.9)
    };
    s.send += inc;
    if s.send > i64::from(MAX_WINDOW) {
        let why = "a stream window overflowed";
        r.reset_stream(stream, ErrorCode::FLOW_CONTROL_ERROR, why);
    }
}
