//! The client side of an HTTP/2 connection as a sans-IO machine.
//!
//! [`ClientConn`] holds what HTTP/2 decides about one connection from the client's side:
//! the preface and SETTINGS, streams opened with odd ids (no more at once than the
//! server's SETTINGS_MAX_CONCURRENT_STREAMS), request heads (HPACK), response heads, DATA
//! and trailers per stream, both directions' flow-control windows, GOAWAY and RST_STREAM,
//! and limits against a hostile server. It owns no socket, task or clock: the driver
//! (`client::h2`) hands it the bytes read and gets [`Event`]s back; everything the machine
//! writes goes into the caller's output buffer.
//!
//! Response bodies are counted as held until the reader takes them ([`ClientConn::release`]);
//! windows reopen in batches of half a window ([`ClientConn::flush_credit`]), so a slow
//! reader holds the server back instead of making the client buffer.
//!
//! Time comes in as an argument (`receive`, [`ClientConn::poll_timers`]): keep-alive PINGs
//! and the SETTINGS ACK deadline are decided here, the driver only sleeps until the
//! instant the machine names.

mod response;
mod send;
#[cfg(test)]
mod tests;
mod timers;

pub(crate) use response::ResponseHead;
pub(crate) use send::RequestHead;

use super::frame::{self, ErrorCode, Frame, FrameError, Settings, MAX_WINDOW, PREFACE};
use super::hpack::{DecodeError, Decoder, Encoder};
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use response::HeadBuilder;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// HTTP/2 settings and limits of fibr's client (`client::Builder`'s `http2_*` options).
/// Every limit has a default; a server past one gets the RFC 9113 error code for it.
#[derive(Clone, Debug)]
pub(crate) struct ClientConfig {
    /// SETTINGS_INITIAL_WINDOW_SIZE: response body bytes one stream may have unread.
    pub initial_stream_window: u32,
    /// Response body bytes all streams together may have unread.
    pub initial_connection_window: u32,
    /// SETTINGS_MAX_FRAME_SIZE: the largest frame payload the server may send.
    pub max_frame_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE: the largest decoded response head (RFC 9113's
    /// size); a larger one fails its request. A header block larger than this on the wire
    /// closes the connection (the CONTINUATION flood).
    pub max_header_list_size: u32,
    /// SETTINGS_HEADER_TABLE_SIZE: the HPACK table the server may use towards us.
    pub header_table_size: u32,
    /// Streams opened at once before the server's SETTINGS say how many it takes.
    pub initial_max_concurrent_streams: u32,
    /// Frames that do no work (PING, SETTINGS, empty DATA, PRIORITY, unknown types) the
    /// server may send, less what responses earn, before the connection is closed with
    /// ENHANCE_YOUR_CALM.
    pub max_idle_frames: u32,
    /// A PING goes out after this long without anything from the server, so that a dead
    /// connection (a peer gone without a FIN, a middlebox that dropped it) fails its
    /// requests instead of leaving them waiting forever. None (the default, as hyper's):
    /// no PINGs.
    pub keep_alive_interval: Option<Duration>,
    /// How long a keep-alive PING may wait for its ACK; then the connection is closed and
    /// its requests fail with a timeout.
    pub keep_alive_timeout: Duration,
    /// Keep-alive PINGs while no request is in flight too (default false: an idle
    /// connection is left alone; the pool's idle timeout closes it).
    pub keep_alive_while_idle: bool,
    /// How long our SETTINGS may wait for the server's ACK before the connection is
    /// closed with SETTINGS_TIMEOUT (RFC 9113 §6.5.3): a server that never ACKs would
    /// leave us unsure which of our limits it applies.
    pub settings_timeout: Duration,
}

impl Default for ClientConfig {
    fn default() -> ClientConfig {
        ClientConfig {
            initial_stream_window: 1024 * 1024,
            initial_connection_window: 4 * 1024 * 1024,
            max_frame_size: 16 * 1024,
            max_header_list_size: 64 * 1024,
            header_table_size: 4096,
            initial_max_concurrent_streams: 100,
            max_idle_frames: 10_000,
            keep_alive_interval: None,
            keep_alive_timeout: Duration::from_secs(20),
            keep_alive_while_idle: false,
            settings_timeout: Duration::from_secs(20),
        }
    }
}

/// Why a stream ended without its response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Why {
    /// The server never processed it (REFUSED_STREAM, or above a GOAWAY's last stream):
    /// safe to send again, whatever the method.
    Refused,
    /// The server reset it with this code.
    Reset(ErrorCode),
    /// The server broke the protocol on it; we reset it.
    Protocol(&'static str),
    /// The connection failed or closed.
    Lost(&'static str),
    /// The server did not answer in time (a keep-alive PING, our SETTINGS): the connection
    /// was closed.
    TimedOut(&'static str),
}

/// What the driver is told after a `receive`.
#[derive(Debug)]
pub(crate) enum Event {
    /// The final response head (1xx heads are skipped).
    Head { stream: u32, head: ResponseHead },
    /// Response body bytes; the driver calls `release` once the reader takes them.
    Data { stream: u32, data: Bytes },
    /// The response ended (with trailers, if any).
    End {
        stream: u32,
        trailers: Option<HeaderMap>,
    },
    /// The stream is gone: its request gets no more DATA, its response no more frames.
    Reset { stream: u32, why: Why },
    /// The server sends no more responses beyond `last_stream`: open no new streams.
    GoAway { last_stream: u32, code: ErrorCode },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Open,
    /// The server sent GOAWAY: no new streams; those at or below its last id go on.
    Away,
    /// A connection error or the end of the stream: nothing more is read or sent.
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Remote {
    /// Awaiting the final response head.
    Head,
    /// The body is arriving.
    Body { length: Option<u64>, received: u64 },
    /// END_STREAM came.
    Closed,
}

struct Stream {
    /// What we may still send on this stream (the server's window for it).
    send_window: i64,
    /// What the server may still send on it.
    recv_window: i64,
    /// We may still send DATA (no END_STREAM yet).
    local_open: bool,
    remote: Remote,
    /// A HEAD request: its response carries no body whatever its content-length.
    head_only: bool,
    /// Bytes taken by the reader, not yet returned with a WINDOW_UPDATE.
    credit: u64,
}

/// A header block (HEADERS + CONTINUATION) still arriving.
struct Block {
    stream: u32,
    end_stream: bool,
    bytes: Vec<u8>,
}

/// One HTTP/2 client connection's protocol state.
pub(crate) struct ClientConn {
    cfg: ClientConfig,
    phase: Phase,
    /// The server's first frame (its SETTINGS) came.
    got_settings: bool,
    /// Our SETTINGS await the server's ACK, since then.
    settings_sent: Option<Instant>,
    /// When bytes last came from the server (keep-alive PINGs count from it).
    last_read: Instant,
    /// Our keep-alive PING awaits its ACK, since then.
    ping_sent: Option<Instant>,
    /// An incomplete frame kept across reads (no capacity when idle).
    kept: Vec<u8>,
    decoder: Decoder,
    encoder: Encoder,
    /// The server's SETTINGS.
    peer: Settings,
    /// What we may still send on the connection.
    send_window: i64,
    /// What the server may still send on the connection.
    recv_window: i64,
    /// Connection-level bytes taken or discarded, not yet returned.
    credit: u64,
    streams: HashMap<u32, Stream>,
    /// The id the next stream gets.
    next_id: u32,
    block: Option<Box<Block>>,
    idle_frames: u64,
}

impl ClientConn {
    /// A connection whose preface, SETTINGS and connection window go into `out` at once
    /// (§3.4: the client need not wait for the server's SETTINGS), written at `now`.
    pub(crate) fn new(cfg: &ClientConfig, now: Instant, out: &mut Vec<u8>) -> ClientConn {
        out.extend_from_slice(PREFACE);
        let max_frame = cfg
            .max_frame_size
            .clamp(frame::DEFAULT_MAX_FRAME_SIZE, frame::MAX_MAX_FRAME_SIZE);
        let stream_window = cfg.initial_stream_window.min(MAX_WINDOW);
        frame::write_settings(
            out,
            &[
                (frame::SETTINGS_HEADER_TABLE_SIZE, cfg.header_table_size),
                (frame::SETTINGS_ENABLE_PUSH, 0),
                (frame::SETTINGS_INITIAL_WINDOW_SIZE, stream_window),
                (frame::SETTINGS_MAX_FRAME_SIZE, max_frame),
                (
                    frame::SETTINGS_MAX_HEADER_LIST_SIZE,
                    cfg.max_header_list_size,
                ),
            ],
        );
        let default = i64::from(Settings::default().initial_window_size);
        let conn_window = i64::from(cfg.initial_connection_window.min(MAX_WINDOW));
        if conn_window > default {
            frame::write_window_update(out, 0, (conn_window - default) as u32);
        }
        let mut cfg = cfg.clone();
        cfg.max_frame_size = max_frame;
        cfg.initial_stream_window = stream_window;
        ClientConn {
            cfg,
            phase: Phase::Open,
            got_settings: false,
            settings_sent: Some(now),
            last_read: now,
            ping_sent: None,
            kept: Vec::new(),
            // Our SETTINGS_HEADER_TABLE_SIZE holds only once the server has ACKed it.
            decoder: Decoder::new(frame::DEFAULT_HEADER_TABLE_SIZE as usize),
            encoder: Encoder::new(),
            peer: Settings::default(),
            send_window: default,
            recv_window: conn_window.max(default),
            credit: 0,
            streams: HashMap::new(),
            next_id: 1,
            block: None,
            idle_frames: 0,
        }
    }

    /// Takes bytes read from the socket at `now`, handles every complete frame in them
    /// (answering SETTINGS and PINGs into `out`, events into `ev`) and keeps an incomplete
    /// one.
    pub(crate) fn receive(
        &mut self,
        now: Instant,
        data: &[u8],
        out: &mut Vec<u8>,
        ev: &mut Vec<Event>,
    ) {
        if self.phase == Phase::Failed {
            return;
        }
        if !data.is_empty() {
            // Anything at all shows the connection alive, even a part of a frame.
            self.last_read = now;
        }
        if self.kept.is_empty() {
            let used = self.process(data, out, ev);
            if used < data.len() && self.phase != Phase::Failed {
                self.kept.extend_from_slice(&data[used..]);
            }
        } else {
            let mut buf = std::mem::take(&mut self.kept);
            buf.extend_from_slice(data);
            let used = self.process(&buf, out, ev);
            buf.drain(..used.min(buf.len()));
            self.kept = buf;
        }
        if self.phase == Phase::Failed || self.kept.is_empty() {
            self.kept = Vec::new();
        }
    }

    fn process(&mut self, input: &[u8], out: &mut Vec<u8>, ev: &mut Vec<Event>) -> usize {
        let mut pos = 0;
        while pos < input.len() && self.phase != Phase::Failed {
            match frame::parse(&input[pos..], self.cfg.max_frame_size) {
                Ok(None) => break,
                Ok(Some((f, used))) => {
                    pos += used;
                    self.on_frame(f, out, ev);
                }
                Err(FrameError::Connection { code, reason }) => self.fail(code, reason, out, ev),
                Err(FrameError::Stream {
                    stream,
                    code,
                    reason,
                    consumed,
                }) => {
                    pos += consumed;
                    if !self.got_settings || self.block.is_some() {
                        self.fail(ErrorCode::PROTOCOL_ERROR, reason, out, ev);
                    } else {
                        self.reset_stream(stream, code, reason, out, ev);
                    }
                }
            }
        }
        if self.phase == Phase::Failed {
            input.len()
        } else {
            pos
        }
    }

    fn on_frame(&mut self, f: Frame<'_>, out: &mut Vec<u8>, ev: &mut Vec<Event>) {
        if !self.got_settings {
            if !matches!(f, Frame::Settings { ack: false, .. }) {
                let why = "the server's first frame is not SETTINGS";
                return self.fail(ErrorCode::PROTOCOL_ERROR, why, out, ev);
            }
            self.got_settings = true;
        }
        if let Some(block) = &self.block {
            let ok = matches!(f, Frame::Continuation { stream, .. } if stream == block.stream);
            if !ok {
                let why = "a frame other than CONTINUATION inside a header block";
                return self.fail(ErrorCode::PROTOCOL_ERROR, why, out, ev);
            }
        }
        match f {
            Frame::Data {
                stream,
                end_stream,
                data,
                flow_len,
            } => self.on_data(stream, end_stream, data, flow_len, out, ev),
            Frame::Headers {
                stream,
                end_stream,
                end_headers,
                fragment,
                ..
            } => self.on_headers(stream, end_stream, end_headers, fragment, out, ev),
            Frame::Continuation {
                end_headers,
                fragment,
                ..
            } => {
                if fragment.is_empty() && !end_headers {
                    self.idle_frame(out, ev);
                }
                let limit = self.cfg.max_header_list_size as usize;
                let Some(block) = self.block.as_mut() else {
                    let why = "CONTINUATION without HEADERS";
                    return self.fail(ErrorCode::PROTOCOL_ERROR, why, out, ev);
                };
                if block.bytes.len() + fragment.len() > limit {
                    let why = "a header block over max_header_list_size";
                    return self.fail(ErrorCode::ENHANCE_YOUR_CALM, why, out, ev);
                }
                block.bytes.extend_from_slice(fragment);
                if end_headers {
                    let b = self.block.take().expect("checked above");
                    self.on_block(b.stream, b.end_stream, &b.bytes, out, ev);
                }
            }
            Frame::Priority { .. } | Frame::Unknown { .. } => self.idle_frame(out, ev),
            Frame::RstStream { stream, code } => self.on_rst_stream(stream, code, out, ev),
            Frame::Settings { ack: true, .. } => {
                if self.settings_sent.take().is_some() {
                    self.decoder
                        .set_max_table_size(self.cfg.header_table_size as usize);
                } else {
                    self.idle_frame(out, ev);
                }
            }
            Frame::Settings { ack: false, params } => {
                self.idle_frame(out, ev);
                self.on_settings(params, out, ev);
            }
            Frame::PushPromise { .. } => {
                let why = "PUSH_PROMISE though SETTINGS_ENABLE_PUSH is 0";
                self.fail(ErrorCode::PROTOCOL_ERROR, why, out, ev)
            }
            Frame::Ping { ack: true, data }
                if data == frame::KEEP_ALIVE_PING && self.ping_sent.is_some() =>
            {
                self.ping_sent = None;
            }
            Frame::Ping { ack, data } => {
                if !ack {
                    frame::write_ping(out, true, data);
                }
                self.idle_frame(out, ev);
            }
            Frame::GoAway {
                last_stream, code, ..
            } => self.on_goaway(last_stream, code, ev),
            Frame::WindowUpdate { stream, increment } => {
                self.on_window_update(stream, increment, out, ev)
            }
        }
    }

    /// A frame that did no work: too many of them is a flood.
    fn idle_frame(&mut self, out: &mut Vec<u8>, ev: &mut Vec<Event>) {
        self.idle_frames += 1;
        if self.idle_frames > u64::from(self.cfg.max_idle_frames) {
            let why = "too many frames that do no work";
            self.fail(ErrorCode::ENHANCE_YOUR_CALM, why, out, ev);
        }
    }

    /// Whether `stream` is one we never opened (§5.1: idle), or a server-initiated id.
    fn is_idle(&self, stream: u32) -> bool {
        stream % 2 == 0 || stream >= self.next_id
    }

    fn on_settings(
        &mut self,
        params: frame::SettingsParams<'_>,
        out: &mut Vec<u8>,
        ev: &mut Vec<Event>,
    ) {
        let before = self.peer;
        if let Err(FrameError::Connection { code, reason }) = self.peer.apply(params) {
            return self.fail(code, reason, out, ev);
        }
        if self.peer.header_table_size != before.header_table_size {
            self.encoder
                .set_max_table_size(self.peer.header_table_size as usize);
        }
        // §6.9.2: a new initial window changes every stream's window by the difference.
        let delta =
            i64::from(self.peer.initial_window_size) - i64::from(before.initial_window_size);
        if delta != 0 {
            for s in self.streams.values_mut() {
                s.send_window += delta;
                if s.send_window > i64::from(MAX_WINDOW) {
                    let why = "SETTINGS_INITIAL_WINDOW_SIZE overflows a stream's window";
                    return self.fail(ErrorCode::FLOW_CONTROL_ERROR, why, out, ev);
                }
            }
        }
        frame::write_settings_ack(out);
    }

    fn on_window_update(
        &mut self,
        stream: u32,
        increment: u32,
        out: &mut Vec<u8>,
        ev: &mut Vec<Event>,
    ) {
        let inc = i64::from(increment);
        if stream == 0 {
            self.send_window += inc;
            if self.send_window > i64::from(MAX_WINDOW) {
                let why = "the connection window overflowed";
                self.fail(ErrorCode::FLOW_CONTROL_ERROR, why, out, ev);
            }
            return;
        }
        if self.is_idle(stream) {
            let why = "WINDOW_UPDATE on an idle stream";
            return self.fail(ErrorCode::PROTOCOL_ERROR, why, out, ev);
        }
        let Some(s) = self.streams.get_mut(&stream) else {
            return; // closed: allowed for a while after (§6.9)
        };
        s.send_window += inc;
        if s.send_window > i64::from(MAX_WINDOW) {
            let code = ErrorCode::FLOW_CONTROL_ERROR;
            self.reset_stream(stream, code, "a stream window overflowed", out, ev);
        }
    }

    fn on_rst_stream(
        &mut self,
        stream: u32,
        code: ErrorCode,
        out: &mut Vec<u8>,
        ev: &mut Vec<Event>,
    ) {
        if self.is_idle(stream) {
            let why = "RST_STREAM on an idle stream";
            return self.fail(ErrorCode::PROTOCOL_ERROR, why, out, ev);
        }
        if self.streams.remove(&stream).is_none() {
            return;
        }
        let why = if code == ErrorCode::REFUSED_STREAM {
            Why::Refused
        } else {
            Why::Reset(code)
        };
        ev.push(Event::Reset { stream, why });
    }

    /// §6.8: streams above `last_stream` were never processed and are given back as
    /// refused (after the GoAway event, so the driver knows first); the rest finish. No
    /// new streams are opened.
    fn on_goaway(&mut self, last_stream: u32, code: ErrorCode, ev: &mut Vec<Event>) {
        if self.phase == Phase::Open {
            self.phase = Phase::Away;
        }
        let mut refused: Vec<u32> = self
            .streams
            .keys()
            .copied()
            .filter(|&id| id > last_stream)
            .collect();
        refused.sort_unstable();
        ev.push(Event::GoAway { last_stream, code });
        for stream in refused {
            self.streams.remove(&stream);
            ev.push(Event::Reset {
                stream,
                why: Why::Refused,
            });
        }
    }

    fn on_data(
        &mut self,
        stream: u32,
        end_stream: bool,
        data: &[u8],
        flow_len: u32,
        out: &mut Vec<u8>,
        ev: &mut Vec<Event>,
    ) {
        let flow = i64::from(flow_len);
        self.recv_window -= flow;
        if self.recv_window < 0 {
            let why = "DATA beyond the connection window";
            return self.fail(ErrorCode::FLOW_CONTROL_ERROR, why, out, ev);
        }
        if self.is_idle(stream) {
            let why = "DATA on an idle stream";
            return self.fail(ErrorCode::PROTOCOL_ERROR, why, out, ev);
        }
        if flow_len == 0 && !end_stream {
            self.idle_frame(out, ev);
        }
        let padding = u64::from(flow_len) - data.len() as u64;
        let Some(s) = self.streams.get_mut(&stream) else {
            // A stream we reset: frames in flight still count against the connection.
            self.credit += u64::from(flow_len);
            return;
        };
        self.credit += padding;
        s.credit += padding;
        s.recv_window -= flow;
        let bad = if s.recv_window < 0 {
            Some((
                ErrorCode::FLOW_CONTROL_ERROR,
                "DATA beyond the stream window",
            ))
        } else {
            match &mut s.remote {
                Remote::Head => Some((ErrorCode::PROTOCOL_ERROR, "DATA before a response")),
                Remote::Closed => Some((ErrorCode::STREAM_CLOSED, "DATA after END_STREAM")),
                Remote::Body { length, received } => {
                    *received += data.len() as u64;
                    let too_long = length.is_some_and(|n| *received > n);
                    let too_short = end_stream && length.is_some_and(|n| *received < n);
                    (too_long || too_short).then_some((
                        ErrorCode::PROTOCOL_ERROR,
                        "DATA that does not match content-length",
                    ))
                }
            }
        };
        if let Some((code, why)) = bad {
            self.credit += data.len() as u64;
            return self.reset_stream(stream, code, why, out, ev);
        }
        if !data.is_empty() {
            ev.push(Event::Data {
                stream,
                data: Bytes::copy_from_slice(data),
            });
        }
        if end_stream {
            self.remote_end(stream, None, ev);
        }
    }

    fn on_headers(
        &mut self,
        stream: u32,
        end_stream: bool,
        end_headers: bool,
        fragment: &[u8],
        out: &mut Vec<u8>,
        ev: &mut Vec<Event>,
    ) {
        if self.is_idle(stream) {
            let why = "HEADERS on a stream the client did not open";
            return self.fail(ErrorCode::PROTOCOL_ERROR, why, out, ev);
        }
        if fragment.len() > self.cfg.max_header_list_size as usize {
            let why = "a header block over max_header_list_size";
            return self.fail(ErrorCode::ENHANCE_YOUR_CALM, why, out, ev);
        }
        if end_headers {
            self.on_block(stream, end_stream, fragment, out, ev);
        } else {
            self.block = Some(Box::new(Block {
                stream,
                end_stream,
                bytes: fragment.to_vec(),
            }));
        }
    }

    /// A whole header block: decoded always (HPACK stays in sync), then a response head,
    /// an informational head (skipped) or trailers.
    fn on_block(
        &mut self,
        stream: u32,
        end_stream: bool,
        block: &[u8],
        out: &mut Vec<u8>,
        ev: &mut Vec<Event>,
    ) {
        let remote = self.streams.get(&stream).map(|s| s.remote);
        let trailers = matches!(remote, Some(Remote::Body { .. }));
        let mut fields = if trailers {
            HeadBuilder::trailers()
        } else {
            HeadBuilder::default()
        };
        let limit = self.cfg.max_header_list_size as usize;
        let too_large = match self.decoder.decode(block, limit, |n, v| fields.field(n, v)) {
            Ok(()) => false,
            Err(DecodeError::ListTooLarge) => true,
            Err(e) => {
                tracing::debug!(error = ?e, "HPACK decoding failed");
                let why = "a header block HPACK cannot decode";
                return self.fail(ErrorCode::COMPRESSION_ERROR, why, out, ev);
            }
        };
        let Some(remote) = remote else {
            return; // a stream we reset
        };
        let reset = |this: &mut Self, code, why, out: &mut Vec<u8>, ev: &mut Vec<Event>| {
            this.reset_stream(stream, code, why, out, ev)
        };
        if too_large {
            let why = "a response head over max_header_list_size";
            return reset(self, ErrorCode::CANCEL, why, out, ev);
        }
        match remote {
            Remote::Closed => reset(
                self,
                ErrorCode::STREAM_CLOSED,
                "HEADERS after END_STREAM",
                out,
                ev,
            ),
            Remote::Body { length, received } => {
                if !end_stream {
                    let why = "trailers without END_STREAM";
                    return reset(self, ErrorCode::PROTOCOL_ERROR, why, out, ev);
                }
                let trailers = match fields.finish_trailers() {
                    Ok(t) if length.is_none_or(|n| n == received) => t,
                    Ok(_) => {
                        let why = "a body shorter than its content-length";
                        return reset(self, ErrorCode::PROTOCOL_ERROR, why, out, ev);
                    }
                    Err(why) => return reset(self, ErrorCode::PROTOCOL_ERROR, why, out, ev),
                };
                self.remote_end(stream, Some(trailers), ev);
            }
            Remote::Head => {
                let head = match fields.finish() {
                    Ok(head) => head,
                    Err(why) => return reset(self, ErrorCode::PROTOCOL_ERROR, why, out, ev),
                };
                if head.status.is_informational() {
                    if end_stream || head.status == StatusCode::SWITCHING_PROTOCOLS {
                        let why = "a 1xx response that ends the stream, or a 101";
                        return reset(self, ErrorCode::PROTOCOL_ERROR, why, out, ev);
                    }
                    return; // 100 Continue, 103 Early Hints: the final head follows
                }
                let Some(s) = self.streams.get_mut(&stream) else {
                    return;
                };
                let bodiless = s.head_only
                    || head.status == StatusCode::NO_CONTENT
                    || head.status == StatusCode::NOT_MODIFIED;
                let length = if bodiless { None } else { head.content_length };
                if end_stream && length.is_some_and(|n| n > 0) {
                    let why = "a response that ends before its content-length";
                    return reset(self, ErrorCode::PROTOCOL_ERROR, why, out, ev);
                }
                s.remote = Remote::Body {
                    length,
                    received: 0,
                };
                // A response is work: it earns its share of the frames that do none.
                self.idle_frames = self.idle_frames.saturating_sub(16);
                ev.push(Event::Head { stream, head });
                if end_stream {
                    self.remote_end(stream, None, ev);
                }
            }
        }
    }

    /// The server ended its side of `stream`.
    fn remote_end(&mut self, stream: u32, trailers: Option<HeaderMap>, ev: &mut Vec<Event>) {
        if let Some(s) = self.streams.get_mut(&stream) {
            s.remote = Remote::Closed;
            s.credit = 0;
            if !s.local_open {
                self.streams.remove(&stream);
            }
        }
        ev.push(Event::End { stream, trailers });
    }

    /// A stream error: RST_STREAM, and the driver is told.
    fn reset_stream(
        &mut self,
        stream: u32,
        code: ErrorCode,
        why: &'static str,
        out: &mut Vec<u8>,
        ev: &mut Vec<Event>,
    ) {
        tracing::debug!(stream, ?code, why, "resetting a stream");
        frame::write_rst_stream(out, stream, code);
        if self.streams.remove(&stream).is_some() {
            ev.push(Event::Reset {
                stream,
                why: Why::Protocol(why),
            });
        }
    }

    /// A connection error: GOAWAY with the code; every stream is lost.
    fn fail(&mut self, code: ErrorCode, why: &'static str, out: &mut Vec<u8>, ev: &mut Vec<Event>) {
        self.close_with(code, why, Why::Lost, out, ev);
    }

    /// Closes the connection: GOAWAY with `code` and `why` (a live peer learns why), and
    /// every stream ends with `kind(why)`.
    fn close_with(
        &mut self,
        code: ErrorCode,
        why: &'static str,
        kind: fn(&'static str) -> Why,
        out: &mut Vec<u8>,
        ev: &mut Vec<Event>,
    ) {
        if self.phase == Phase::Failed {
            return;
        }
        tracing::debug!(?code, why, "closing the HTTP/2 connection");
        frame::write_goaway(out, 0, code, why.as_bytes());
        self.lose_all(kind(why), ev);
    }

    /// Every stream ends with `why`; nothing more is read or sent.
    fn lose_all(&mut self, why: Why, ev: &mut Vec<Event>) {
        self.phase = Phase::Failed;
        self.block = None;
        self.kept = Vec::new();
        let mut ids: Vec<u32> = self.streams.drain().map(|(id, _)| id).collect();
        ids.sort_unstable();
        ev.extend(ids.into_iter().map(|stream| Event::Reset {
            stream,
            why: why.clone(),
        }));
    }

    /// The server closed the connection (or reading failed): every stream is lost.
    pub(crate) fn peer_closed(&mut self, ev: &mut Vec<Event>) {
        if self.phase != Phase::Failed {
            self.lose_all(Why::Lost("the server closed the connection"), ev);
        }
    }

    /// Whether the connection has failed (nothing more is read or sent).
    pub(crate) fn is_failed(&self) -> bool {
        self.phase == Phase::Failed
    }

    /// Whether new requests may come to this connection at all (no GOAWAY, no failure,
    /// stream ids left); `can_open` says whether one may start now.
    pub(crate) fn is_usable(&self) -> bool {
        self.phase == Phase::Open && self.next_id <= MAX_WINDOW
    }

    /// Streams in flight.
    #[cfg(test)]
    pub(crate) fn streams(&self) -> usize {
        self.streams.len()
    }
}
