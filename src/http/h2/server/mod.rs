//! The server side of an HTTP/2 connection as a sans-IO machine.
//!
//! [`ServerConn`] holds everything HTTP/2 decides about one connection: the preface and
//! SETTINGS exchange, which frames are valid in which stream state, the header blocks
//! (HPACK), both directions' flow-control windows, the streams in flight and the limits
//! that protect the server. It owns no socket, thread, clock or task: the driver
//! (`http::server_h2`) gives it the bytes read and the time, calls the service for each
//! request it dispatches ([`Dispatch`]), writes responses through [`StreamWriter`] and
//! applies what [`ServerConn::end_round`] returns. Everything the machine writes goes into
//! the caller's output buffer, so a round's frames leave in one write.
//!
//! Request bodies go to a [`StreamSink`]; what the service has read comes back as credit
//! (`take_consumed`), and the windows are reopened in batches of half a window, so a slow
//! reader holds the client back instead of making the server buffer.

mod request;
mod send;
#[cfg(test)]
mod tests;

pub(crate) use request::RequestHead;
pub(crate) use send::StreamWriter;

use super::config::Http2Config;
use super::frame::{self, ErrorCode, Frame, FrameError, Settings, MAX_WINDOW, PREFACE};
use super::hpack::{Decoder, Encoder};
use crate::http::h1::server::{BodyFailure, BodySink, Clock};
use crate::http::ServerConfig;
use http::StatusCode;
use request::HeadBuilder;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::time::Instant;

/// A request body's sink with the credit HTTP/2 needs: how much the reader has taken.
pub(crate) trait StreamSink: BodySink {
    /// Body bytes the reader took since the last call (returned to the client's windows).
    fn take_consumed(&mut self) -> usize;
}

/// A request's body, as the driver is to make it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NewBody {
    /// The exact length, when the request declared a content-length.
    pub length: Option<u64>,
}

/// The driver's side of dispatching requests.
pub(crate) trait Dispatch {
    /// The driver's per-stream state (the service's future, then its response).
    type Exchange;
    type Body: StreamSink;
    /// A request arrived on `stream`: call the service. `body` is `None` when the request
    /// ended with its headers.
    fn dispatch(
        &mut self,
        stream: u32,
        head: RequestHead,
        body: Option<NewBody>,
    ) -> (Self::Exchange, Option<Self::Body>);
}

/// What the driver is to do after a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Actions {
    /// Close once the output is written.
    pub close: bool,
    /// Call [`ServerConn::end_round`] again at this time (a timeout or a keep-alive PING).
    pub deadline: Option<Instant>,
}

/// Where the connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the client's 24-byte preface.
    Preface,
    /// The preface came; the first frame must be SETTINGS (§3.4).
    FirstSettings,
    Open,
    /// A GOAWAY was sent (shutdown, idle, or the client's own GOAWAY): no new streams;
    /// the connection closes once the streams in flight end.
    Draining,
    /// A connection error: nothing more is read; close once the GOAWAY is written.
    Failed,
}

/// A request body that is still arriving.
struct BodyIn<B> {
    sink: B,
    /// The declared content-length, which the DATA must match.
    length: Option<u64>,
    received: u64,
}

/// What of a stream's response is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sending {
    /// Nothing yet.
    Head,
    /// The head is out; DATA (and maybe trailers) follow.
    Body,
    /// END_STREAM sent, or the stream was reset.
    Done,
}

/// One stream's protocol state (the driver's exchange sits beside it).
struct StreamState<B> {
    body: Option<BodyIn<B>>,
    /// The client ended its side (END_STREAM), or it was reset.
    remote_closed: bool,
    sending: Sending,
    /// A HEAD request: its response has no body.
    head_only: bool,
    /// What we may still send on this stream (the client's window for it).
    send_window: i64,
    /// What the client may still send on this stream.
    recv_window: i64,
    /// Body bytes in the sink the reader has not taken yet.
    held: u64,
    /// Bytes taken (or discarded) not yet returned with a WINDOW_UPDATE.
    credit: u64,
    /// When request body bytes last arrived (or the stream opened): `body_read_timeout`.
    progress: Instant,
    /// Since when the response has waited for the client's window
    /// (`Http2Config::window_stall_timeout`).
    stalled_since: Option<Instant>,
}

struct Stream<B, X> {
    exchange: X,
    state: StreamState<B>,
}

/// A header block (HEADERS + CONTINUATION) still arriving.
struct Block {
    stream: u32,
    end_stream: bool,
    bytes: Vec<u8>,
}

/// What the send side needs of the connection, apart from the streams.
pub(crate) struct SendState {
    encoder: Encoder,
    /// What we may still send on the connection.
    window: i64,
    /// The client's SETTINGS.
    peer: Settings,
}

/// Counts events in a fixed window of time (resets for the rapid-reset bound).
#[derive(Debug, Clone, Copy)]
struct WindowCount {
    since: Instant,
    count: u32,
}

/// One HTTP/2 server connection's protocol state. `B` is the request body sink, `X` the
/// driver's per-stream state.
pub(crate) struct ServerConn<B, X> {
    phase: Phase,
    /// Bytes of an incomplete frame (or preface) kept across rounds (no capacity when
    /// idle).
    kept: Vec<u8>,
    decoder: Decoder,
    send: SendState,
    streams: HashMap<u32, Stream<B, X>, BuildHasherDefault<StreamIdHasher>>,
    /// The highest stream id the client has used: lower unused ids are closed (§5.1.1).
    last_stream: u32,
    block: Option<Box<Block>>,
    /// Our SETTINGS await the client's ACK.
    settings_unacked: bool,
    /// What the client may still send on the connection.
    recv_window: i64,
    /// Connection-level bytes taken or discarded, not yet returned.
    credit: u64,
    resets: WindowCount,
    /// Frames that did no work, against `max_idle_frames` plus what requests earn.
    idle_frames: u64,
    /// When the last frame arrived, and when the stream set last became empty.
    last_frame: Instant,
    idle_since: Instant,
    /// A keep-alive PING is out since then.
    ping_sent: Option<Instant>,
    /// The client sent GOAWAY, or EOF: no new streams from it.
    peer_done: bool,
    /// The client finished sending (EOF): close once the streams are done.
    peer_eof: bool,
    /// The last few stream ids the client used, to tell HEADERS on a stream that ended
    /// (STREAM_CLOSED) from an id below the last that was never used (PROTOCOL_ERROR,
    /// §5.1.1).
    recently_used: [u32; 8],
}

/// Hashes a stream id (a unique odd number) with one multiplication: no SipHash per frame.
#[derive(Default)]
struct StreamIdHasher(u64);

impl Hasher for StreamIdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u32(&mut self, id: u32) {
        // Client ids are odd: drop the constant bit, then multiply by an odd constant (a
        // bijection on the low bits, which pick the bucket; the high bits, the tag, mix all).
        self.0 = u64::from(id >> 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The opaque data of our keep-alive PINGs.
const KEEP_ALIVE_PING: [u8; 8] = *b"fibr-ka!";

impl<B: StreamSink, X> ServerConn<B, X> {
    /// A connection that waits for the client's preface; our SETTINGS (and the connection
    /// window beyond the default) go into `out` at once, as §3.4 allows.
    pub(crate) fn new(now: Instant, cfg: &Http2Config, out: &mut Vec<u8>) -> ServerConn<B, X> {
        frame::write_settings(
            out,
            &[
                (frame::SETTINGS_HEADER_TABLE_SIZE, cfg.header_table_size),
                (frame::SETTINGS_ENABLE_PUSH, 0),
                (
                    frame::SETTINGS_MAX_CONCURRENT_STREAMS,
                    cfg.max_concurrent_streams,
                ),
                (
                    frame::SETTINGS_INITIAL_WINDOW_SIZE,
                    cfg.initial_stream_window,
                ),
                (frame::SETTINGS_MAX_FRAME_SIZE, cfg.max_frame_size),
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
        ServerConn {
            phase: Phase::Preface,
            kept: Vec::new(),
            // Our SETTINGS_HEADER_TABLE_SIZE holds only once the client has ACKed it.
            decoder: Decoder::new(frame::DEFAULT_HEADER_TABLE_SIZE as usize),
            send: SendState {
                encoder: Encoder::new(),
                window: default,
                peer: Settings::default(),
            },
            streams: HashMap::default(),
            last_stream: 0,
            block: None,
            settings_unacked: true,
            recv_window: conn_window.max(default),
            credit: 0,
            resets: WindowCount {
                since: now,
                count: 0,
            },
            idle_frames: 0,
            last_frame: now,
            idle_since: now,
            ping_sent: None,
            peer_done: false,
            peer_eof: false,
            recently_used: [0; 8],
        }
    }

    /// Takes bytes read from the socket, handles every complete frame in them (dispatching
    /// requests, feeding bodies, answering SETTINGS and PINGs) and keeps an incomplete one.
    pub(crate) fn receive<D>(
        &mut self,
        clock: Clock,
        data: &[u8],
        cfg: &Http2Config,
        d: &mut D,
        out: &mut Vec<u8>,
    ) where
        D: Dispatch<Body = B, Exchange = X>,
    {
        if matches!(self.phase, Phase::Failed) {
            return;
        }
        if self.kept.is_empty() {
            let used = self.process(clock, data, cfg, d, out);
            if used < data.len() && self.phase != Phase::Failed {
                self.kept.extend_from_slice(&data[used..]);
            }
        } else {
            let mut buf = std::mem::take(&mut self.kept);
            buf.extend_from_slice(data);
            let used = self.process(clock, &buf, cfg, d, out);
            buf.drain(..used);
            self.kept = buf;
        }
        if self.phase == Phase::Failed || self.kept.is_empty() {
            self.kept = Vec::new();
        }
    }

    /// Handles the frames in `input`; returns the bytes used.
    fn process<D>(
        &mut self,
        clock: Clock,
        input: &[u8],
        cfg: &Http2Config,
        d: &mut D,
        out: &mut Vec<u8>,
    ) -> usize
    where
        D: Dispatch<Body = B, Exchange = X>,
    {
        let mut pos = 0;
        if self.phase == Phase::Preface {
            let n = input.len().min(PREFACE.len());
            if input[..n] != PREFACE[..n] {
                self.fail(ErrorCode::PROTOCOL_ERROR, "not the HTTP/2 preface", out);
                return input.len();
            }
            if n < PREFACE.len() {
                return 0;
            }
            pos = n;
            self.phase = Phase::FirstSettings;
        }
        while pos < input.len() && self.phase != Phase::Failed {
            match frame::parse(&input[pos..], cfg.max_frame_size) {
                Ok(None) => break,
                Ok(Some((f, used))) => {
                    pos += used;
                    self.last_frame = clock.now;
                    self.on_frame(clock, f, cfg, d, out);
                }
                Err(FrameError::Connection { code, reason }) => {
                    self.fail(code, reason, out);
                }
                Err(FrameError::Stream {
                    stream,
                    code,
                    reason,
                    consumed,
                }) => {
                    pos += consumed;
                    if self.phase == Phase::FirstSettings || self.block.is_some() {
                        self.fail(ErrorCode::PROTOCOL_ERROR, reason, out);
                    } else {
                        self.reset_stream(stream, code, reason, out);
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

    fn on_frame<D>(
        &mut self,
        clock: Clock,
        f: Frame<'_>,
        cfg: &Http2Config,
        d: &mut D,
        out: &mut Vec<u8>,
    ) where
        D: Dispatch<Body = B, Exchange = X>,
    {
        if self.phase == Phase::FirstSettings {
            if !matches!(f, Frame::Settings { ack: false, .. }) {
                return self.fail(
                    ErrorCode::PROTOCOL_ERROR,
                    "the first frame is not SETTINGS",
                    out,
                );
            }
            self.phase = Phase::Open;
        }
        if self.does_no_work(&f) {
            self.idle_frame(cfg, out);
            if self.phase == Phase::Failed {
                return; // nothing is written after the GOAWAY
            }
        }
        if let Some(block) = &self.block {
            // §6.10: nothing but the block's CONTINUATION frames until it ends.
            let ok = matches!(f, Frame::Continuation { stream, .. } if stream == block.stream);
            if !ok {
                return self.fail(
                    ErrorCode::PROTOCOL_ERROR,
                    "a frame other than CONTINUATION inside a header block",
                    out,
                );
            }
        }
        match f {
            Frame::Data {
                stream,
                end_stream,
                data,
                flow_len,
            } => self.on_data(stream, end_stream, data, flow_len, out),
            Frame::Headers {
                stream,
                end_stream,
                end_headers,
                fragment,
                ..
            } => self.on_headers(
                clock,
                stream,
                end_stream,
                end_headers,
                fragment,
                cfg,
                d,
                out,
            ),
            Frame::Continuation {
                stream: _,
                end_headers,
                fragment,
            } => {
                let Some(block) = self.block.as_mut() else {
                    return self.fail(
                        ErrorCode::PROTOCOL_ERROR,
                        "CONTINUATION without HEADERS",
                        out,
                    );
                };
                if block.bytes.len() + fragment.len() > cfg.max_header_list_size as usize {
                    return self.fail(
                        ErrorCode::ENHANCE_YOUR_CALM,
                        "a header block over max_header_list_size",
                        out,
                    );
                }
                block.bytes.extend_from_slice(fragment);
                if end_headers {
                    let block = self.block.take().expect("checked above");
                    self.on_block(
                        clock,
                        block.stream,
                        block.end_stream,
                        &block.bytes,
                        cfg,
                        d,
                        out,
                    );
                }
            }
            Frame::Priority { .. } | Frame::Unknown { .. } => {}
            Frame::RstStream { stream, code: _ } => self.on_rst_stream(clock, stream, cfg, out),
            Frame::Settings { ack: true, .. } => {
                if self.settings_unacked {
                    self.decoder
                        .set_max_table_size(cfg.header_table_size as usize);
                }
                self.settings_unacked = false;
            }
            Frame::Settings { ack: false, params } => self.on_settings(params, out),
            Frame::PushPromise { .. } => {
                self.fail(ErrorCode::PROTOCOL_ERROR, "PUSH_PROMISE from a client", out)
            }
            Frame::Ping { ack, data } => {
                if ack {
                    if data == KEEP_ALIVE_PING {
                        self.ping_sent = None;
                    }
                } else {
                    frame::write_ping(out, true, data);
                }
            }
            Frame::GoAway { .. } => {
                // The client opens no more streams; those in flight finish.
                self.peer_done = true;
            }
            Frame::WindowUpdate { stream, increment } => {
                self.on_window_update(stream, increment, out)
            }
        }
    }

    /// Whether a frame does no work for the client (control frames, empty DATA or
    /// CONTINUATION, unknown types): what a flood is made of.
    fn does_no_work(&self, f: &Frame<'_>) -> bool {
        match *f {
            Frame::Priority { .. }
            | Frame::Ping { .. }
            | Frame::Unknown { .. }
            | Frame::Settings { ack: false, .. } => true,
            Frame::Settings { ack: true, .. } => !self.settings_unacked,
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

    /// A frame that did no work: too many of them is a flood.
    fn idle_frame(&mut self, cfg: &Http2Config, out: &mut Vec<u8>) {
        self.idle_frames += 1;
        if self.idle_frames > u64::from(cfg.max_idle_frames) {
            self.fail(
                ErrorCode::ENHANCE_YOUR_CALM,
                "too many frames that do no work",
                out,
            );
        }
    }

    fn on_settings(&mut self, params: frame::SettingsParams<'_>, out: &mut Vec<u8>) {
        if self.apply_settings(params, out) {
            frame::write_settings_ack(out);
        }
    }

    /// Applies the client's SETTINGS; false if they were invalid (the connection failed).
    fn apply_settings(&mut self, params: frame::SettingsParams<'_>, out: &mut Vec<u8>) -> bool {
        let before = self.send.peer;
        if let Err(e) = self.send.peer.apply(params) {
            self.fail(e.code(), e.reason(), out);
            return false;
        }
        let peer = self.send.peer;
        if peer.header_table_size != before.header_table_size {
            self.send
                .encoder
                .set_max_table_size(peer.header_table_size as usize);
        }
        // §6.9.2: a new initial window changes every stream's window by the difference.
        let delta = i64::from(peer.initial_window_size) - i64::from(before.initial_window_size);
        if delta != 0 {
            for s in self.streams.values_mut() {
                s.state.send_window += delta;
                if s.state.send_window > i64::from(MAX_WINDOW) {
                    self.fail(
                        ErrorCode::FLOW_CONTROL_ERROR,
                        "SETTINGS_INITIAL_WINDOW_SIZE overflows a stream's window",
                        out,
                    );
                    return false;
                }
            }
        }
        true
    }

    /// A connection upgraded from HTTP/1.1 (`Upgrade: h2c`, RFC 7540 §3.2): the client's
    /// SETTINGS came in its `HTTP2-Settings` header, and its request (which had no body)
    /// becomes stream 1, half-closed (remote); the client's preface follows.
    pub(crate) fn accept_upgrade<D>(
        &mut self,
        settings: &[u8],
        head: RequestHead,
        d: &mut D,
        out: &mut Vec<u8>,
    ) where
        D: Dispatch<Body = B, Exchange = X>,
    {
        if settings.len() % 6 != 0 {
            return self.fail(
                ErrorCode::PROTOCOL_ERROR,
                "an HTTP2-Settings of bad length",
                out,
            );
        }
        if !self.apply_settings(frame::SettingsParams::new(settings), out) {
            return;
        }
        self.last_stream = 1;
        let state = StreamState {
            body: None,
            remote_closed: true,
            sending: Sending::Head,
            head_only: head.method == http::Method::HEAD,
            send_window: i64::from(self.send.peer.initial_window_size),
            recv_window: 0,
            held: 0,
            credit: 0,
            progress: self.last_frame,
            stalled_since: None,
        };
        let (exchange, _) = d.dispatch(1, head, None);
        self.streams.insert(1, Stream { exchange, state });
    }

    fn on_window_update(&mut self, stream: u32, increment: u32, out: &mut Vec<u8>) {
        let inc = i64::from(increment);
        if stream == 0 {
            self.send.window += inc;
            if self.send.window > i64::from(MAX_WINDOW) {
                self.fail(
                    ErrorCode::FLOW_CONTROL_ERROR,
                    "the connection window overflowed",
                    out,
                );
            }
            return;
        }
        if self.is_idle(stream) {
            return self.fail(
                ErrorCode::PROTOCOL_ERROR,
                "WINDOW_UPDATE on an idle stream",
                out,
            );
        }
        let Some(s) = self.streams.get_mut(&stream) else {
            return; // closed: allowed for a while after (§6.9)
        };
        s.state.send_window += inc;
        if s.state.send_window > i64::from(MAX_WINDOW) {
            self.reset_stream(
                stream,
                ErrorCode::FLOW_CONTROL_ERROR,
                "window overflow",
                out,
            );
        }
    }

    fn on_rst_stream(&mut self, clock: Clock, stream: u32, cfg: &Http2Config, out: &mut Vec<u8>) {
        if self.is_idle(stream) {
            return self.fail(
                ErrorCode::PROTOCOL_ERROR,
                "RST_STREAM on an idle stream",
                out,
            );
        }
        let Some(s) = self.streams.remove(&stream) else {
            return;
        };
        self.stream_gone(s.state, BodyFailure::Incomplete);
        // The rapid-reset bound: a client that makes the server start work and cancels it
        // at once, over and over.
        if clock.now.duration_since(self.resets.since) > cfg.reset_window {
            self.resets = WindowCount {
                since: clock.now,
                count: 0,
            };
        }
        self.resets.count += 1;
        if self.resets.count > cfg.max_resets {
            self.fail(
                ErrorCode::ENHANCE_YOUR_CALM,
                "too many streams reset by the client",
                out,
            );
        }
    }

    fn on_data(
        &mut self,
        stream: u32,
        end_stream: bool,
        data: &[u8],
        flow_len: u32,
        out: &mut Vec<u8>,
    ) {
        let flow = i64::from(flow_len);
        self.recv_window -= flow;
        if self.recv_window < 0 {
            return self.fail(
                ErrorCode::FLOW_CONTROL_ERROR,
                "DATA beyond the connection window",
                out,
            );
        }
        if self.is_idle(stream) {
            return self.fail(ErrorCode::PROTOCOL_ERROR, "DATA on an idle stream", out);
        }
        let padding = u64::from(flow_len) - data.len() as u64;
        let Some(s) = self.streams.get_mut(&stream) else {
            // Closed: counted against the connection and given back (§6.1: STREAM_CLOSED).
            self.credit += u64::from(flow_len);
            return self.write_reset(stream, ErrorCode::STREAM_CLOSED, out);
        };
        let st = &mut s.state;
        self.credit += padding;
        st.credit += padding;
        st.recv_window -= flow;
        if st.recv_window < 0 {
            self.credit += data.len() as u64;
            return self.reset_stream(
                stream,
                ErrorCode::FLOW_CONTROL_ERROR,
                "DATA beyond the stream window",
                out,
            );
        }
        let Some(body) = st.body.as_mut().filter(|_| !st.remote_closed) else {
            self.credit += data.len() as u64;
            return self.reset_stream(
                stream,
                ErrorCode::STREAM_CLOSED,
                "DATA after END_STREAM",
                out,
            );
        };
        body.received += data.len() as u64;
        st.progress = self.last_frame;
        let too_long = body.length.is_some_and(|n| body.received > n);
        let too_short = end_stream && body.length.is_some_and(|n| body.received < n);
        if too_long || too_short {
            self.credit += data.len() as u64;
            return self.reset_stream(
                stream,
                ErrorCode::PROTOCOL_ERROR,
                "DATA that does not match content-length",
                out,
            );
        }
        if body.sink.reader_gone() {
            self.credit += data.len() as u64;
            st.credit += data.len() as u64;
        } else {
            body.sink.push(data);
            st.held += data.len() as u64;
        }
        if end_stream {
            st.remote_closed = true;
            if let Some(body) = st.body.take() {
                body.sink.finish(None);
            }
        }
    }

    /// A HEADERS frame: a new request, or trailers on one whose body is arriving.
    #[allow(clippy::too_many_arguments)]
    fn on_headers<D>(
        &mut self,
        clock: Clock,
        stream: u32,
        end_stream: bool,
        end_headers: bool,
        fragment: &[u8],
        cfg: &Http2Config,
        d: &mut D,
        out: &mut Vec<u8>,
    ) where
        D: Dispatch<Body = B, Exchange = X>,
    {
        if stream % 2 == 0 {
            return self.fail(
                ErrorCode::PROTOCOL_ERROR,
                "HEADERS on a server-initiated stream id",
                out,
            );
        }
        if !self.streams.contains_key(&stream) && stream <= self.last_stream {
            // §5.1: a stream that ended; §5.1.1: an id lower than one already used.
            return if self.recently_used.contains(&stream) {
                self.fail(ErrorCode::STREAM_CLOSED, "HEADERS on a closed stream", out)
            } else {
                self.fail(
                    ErrorCode::PROTOCOL_ERROR,
                    "HEADERS on a stream id below the last",
                    out,
                )
            };
        }
        if fragment.len() > cfg.max_header_list_size as usize {
            return self.fail(
                ErrorCode::ENHANCE_YOUR_CALM,
                "a header block over max_header_list_size",
                out,
            );
        }
        if end_headers {
            self.on_block(clock, stream, end_stream, fragment, cfg, d, out);
        } else {
            self.block = Some(Box::new(Block {
                stream,
                end_stream,
                bytes: fragment.to_vec(),
            }));
        }
    }

    /// A whole header block: decode it (always, to keep HPACK in sync) and start the
    /// request, or end its body with trailers.
    #[allow(clippy::too_many_arguments)]
    fn on_block<D>(
        &mut self,
        clock: Clock,
        stream: u32,
        end_stream: bool,
        block: &[u8],
        cfg: &Http2Config,
        d: &mut D,
        out: &mut Vec<u8>,
    ) where
        D: Dispatch<Body = B, Exchange = X>,
    {
        let trailers = self.streams.contains_key(&stream);
        let mut fields = if trailers {
            HeadBuilder::trailers()
        } else {
            HeadBuilder::default()
        };
        let decoded = self
            .decoder
            .decode(block, cfg.max_header_list_size as usize, |n, v| {
                fields.field(n, v)
            });
        let too_large = match decoded {
            Ok(()) => false,
            Err(e) if !e.is_connection_error() => true,
            Err(e) => {
                tracing::debug!(error = ?e, "HPACK decoding failed");
                return self.fail(
                    ErrorCode::COMPRESSION_ERROR,
                    "a header block HPACK cannot decode",
                    out,
                );
            }
        };
        if trailers {
            return self.on_trailers(stream, end_stream, too_large, fields, out);
        }
        self.last_stream = stream;
        self.recently_used.rotate_right(1);
        self.recently_used[0] = stream;
        if self.phase != Phase::Open || self.peer_done {
            // After GOAWAY: streams above its last id are not processed (§6.8).
            return;
        }
        if self.streams.len() >= cfg.max_concurrent_streams as usize {
            return self.write_reset(stream, ErrorCode::REFUSED_STREAM, out);
        }
        let mut st = StreamState {
            body: None,
            remote_closed: end_stream,
            sending: Sending::Head,
            head_only: false,
            send_window: i64::from(self.send.peer.initial_window_size),
            recv_window: i64::from(cfg.initial_stream_window),
            held: 0,
            credit: 0,
            progress: clock.now,
            stalled_since: None,
        };
        if too_large {
            return self.answer(
                clock,
                stream,
                st,
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                out,
            );
        }
        let head = match fields.finish() {
            Ok(head) => head,
            Err(why) => {
                tracing::debug!(stream, why, "malformed request");
                return self.write_reset(stream, ErrorCode::PROTOCOL_ERROR, out);
            }
        };
        if end_stream && head.content_length.is_some_and(|n| n > 0) {
            return self.write_reset(stream, ErrorCode::PROTOCOL_ERROR, out);
        }
        // A request is work: it earns its share of the frames that do none.
        self.idle_frames = self.idle_frames.saturating_sub(16);
        st.head_only = head.method == http::Method::HEAD;
        let length = head.content_length;
        let body = (!end_stream).then_some(NewBody { length });
        let (exchange, sink) = d.dispatch(stream, head, body);
        st.body = sink.map(|sink| BodyIn {
            sink,
            length,
            received: 0,
        });
        if st.body.is_none() {
            // A driver that takes no body: what arrives is discarded (and credited).
            st.remote_closed |= body.is_none();
        }
        self.streams.insert(
            stream,
            Stream {
                exchange,
                state: st,
            },
        );
    }

    fn on_trailers(
        &mut self,
        stream: u32,
        end_stream: bool,
        too_large: bool,
        fields: HeadBuilder,
        out: &mut Vec<u8>,
    ) {
        let Some(s) = self.streams.get_mut(&stream) else {
            return;
        };
        if s.state.remote_closed {
            return self.reset_stream(
                stream,
                ErrorCode::STREAM_CLOSED,
                "HEADERS after END_STREAM",
                out,
            );
        }
        if !end_stream {
            // §8.1: a second header block must end the stream.
            return self.reset_stream(
                stream,
                ErrorCode::PROTOCOL_ERROR,
                "trailers without END_STREAM",
                out,
            );
        }
        let trailers = match fields.finish_trailers() {
            Ok(t) if !too_large => t,
            _ => {
                return self.reset_stream(
                    stream,
                    ErrorCode::PROTOCOL_ERROR,
                    "malformed trailers",
                    out,
                )
            }
        };
        let st = &mut s.state;
        if let Some(body) = st.body.take() {
            if body.length.is_some_and(|n| n != body.received) {
                st.body = Some(body);
                return self.reset_stream(
                    stream,
                    ErrorCode::PROTOCOL_ERROR,
                    "body shorter than content-length",
                    out,
                );
            }
            body.sink.finish(Some(trailers));
        }
        st.remote_closed = true;
    }

    /// A response the machine makes itself (no service call), e.g. 431.
    fn answer(
        &mut self,
        clock: Clock,
        stream: u32,
        state: StreamState<B>,
        status: StatusCode,
        out: &mut Vec<u8>,
    ) {
        let mut st = state;
        let mut w = StreamWriter::new(stream, &mut st, &mut self.send, clock, out);
        let mut parts = http::Response::new(()).into_parts().0;
        parts.status = status;
        w.respond(&mut parts, Some(0));
        if !st.remote_closed {
            frame::write_rst_stream(out, stream, ErrorCode::NO_ERROR);
        }
    }

    /// Whether `stream` is one the client has not opened yet (§5.1: idle).
    fn is_idle(&self, stream: u32) -> bool {
        stream > self.last_stream && !self.streams.contains_key(&stream)
    }

    /// Resets one stream (a stream error): RST_STREAM, its body fails, it is forgotten.
    fn reset_stream(
        &mut self,
        stream: u32,
        code: ErrorCode,
        reason: &'static str,
        out: &mut Vec<u8>,
    ) {
        tracing::debug!(stream, ?code, reason, "resetting a stream");
        if let Some(s) = self.streams.remove(&stream) {
            self.stream_gone(s.state, BodyFailure::Incomplete);
        }
        self.write_reset(stream, code, out);
    }

    fn write_reset(&mut self, stream: u32, code: ErrorCode, out: &mut Vec<u8>) {
        frame::write_rst_stream(out, stream, code);
    }

    /// A stream left the map: its body fails (if still arriving) and what it held goes
    /// back to the connection's window.
    fn stream_gone(&mut self, st: StreamState<B>, why: BodyFailure) {
        self.credit += st.held;
        if let Some(body) = st.body {
            body.sink.fail(why);
        }
        if self.streams.is_empty() {
            self.idle_since = self.last_frame;
        }
    }

    /// A connection error: GOAWAY with the code, and nothing more is read.
    fn fail(&mut self, code: ErrorCode, reason: &'static str, out: &mut Vec<u8>) {
        if self.phase == Phase::Failed {
            return;
        }
        tracing::debug!(?code, reason, "HTTP/2 connection error");
        frame::write_goaway(out, self.last_stream, code, reason.as_bytes());
        self.phase = Phase::Failed;
        self.block = None;
        for (_, s) in std::mem::take(&mut self.streams) {
            if let Some(body) = s.state.body {
                body.sink.fail(BodyFailure::Incomplete);
            }
        }
    }

    /// Graceful shutdown: GOAWAY with the last stream id; streams up to it finish, then
    /// the connection closes.
    pub(crate) fn drain(&mut self, out: &mut Vec<u8>) {
        if matches!(
            self.phase,
            Phase::Open | Phase::FirstSettings | Phase::Preface
        ) {
            frame::write_goaway(out, self.last_stream, ErrorCode::NO_ERROR, b"");
            self.phase = Phase::Draining;
        }
    }

    /// The client finished sending: bodies still arriving fail; responses in flight are
    /// still written, then the connection closes.
    pub(crate) fn peer_closed(&mut self) {
        self.peer_done = true;
        self.peer_eof = true;
        for s in self.streams.values_mut() {
            if let Some(body) = s.state.body.take() {
                body.sink.fail(BodyFailure::Incomplete);
            }
            s.state.remote_closed = true;
        }
        if self.phase == Phase::Preface || self.phase == Phase::FirstSettings {
            self.phase = Phase::Failed;
        }
    }

    /// Whether the connection has failed (nothing more is read).
    pub(crate) fn is_failed(&self) -> bool {
        self.phase == Phase::Failed
    }

    /// Streams in flight.
    pub(crate) fn streams(&self) -> usize {
        self.streams.len()
    }

    /// Runs `f` on every stream with its writer; streams whose exchange is over (response
    /// sent and request read, or reset) are forgotten afterwards.
    pub(crate) fn each_stream(
        &mut self,
        clock: Clock,
        out: &mut Vec<u8>,
        mut f: impl FnMut(&mut X, &mut StreamWriter<'_, B>),
    ) {
        let mut finished = false;
        for (&id, s) in self.streams.iter_mut() {
            if s.state.sending == Sending::Done {
                finished = true;
                continue;
            }
            let mut w = StreamWriter::new(id, &mut s.state, &mut self.send, clock, out);
            f(&mut s.exchange, &mut w);
            finished |= s.state.sending == Sending::Done;
        }
        if finished {
            self.forget_finished(out);
        }
    }

    /// Forgets streams whose response is done: a request body still arriving is stopped
    /// with RST_STREAM(NO_ERROR) once its reader is gone (§8.1).
    fn forget_finished(&mut self, out: &mut Vec<u8>) {
        let mut gone = Vec::new();
        for (&id, s) in self.streams.iter_mut() {
            let st = &s.state;
            if st.sending != Sending::Done {
                continue;
            }
            let reader_gone = st.body.as_ref().is_none_or(|b| b.sink.reader_gone());
            if st.remote_closed || reader_gone {
                if !st.remote_closed {
                    frame::write_rst_stream(out, id, ErrorCode::NO_ERROR);
                }
                gone.push(id);
            }
        }
        for id in gone {
            if let Some(s) = self.streams.remove(&id) {
                self.stream_gone(s.state, BodyFailure::Incomplete);
            }
        }
    }

    /// Ends a round: returns the windows the services' reads reopened (in batches of half
    /// a window), handles the deadlines, and says whether to close.
    pub(crate) fn end_round(
        &mut self,
        clock: Clock,
        cfg: &ServerConfig,
        out: &mut Vec<u8>,
    ) -> Actions {
        if self.phase != Phase::Failed {
            self.return_credit(clock.now, &cfg.http2, out);
            self.forget_finished(out);
        }
        if self.streams.is_empty() && self.streams.capacity() > 0 {
            // An idle connection keeps no stream table (a map never shrinks by itself).
            self.streams = HashMap::default();
        }
        let now = clock.now;
        let mut deadline = None;
        let mut at = |t: Instant| deadline = Some(deadline.map_or(t, |d: Instant| d.min(t)));
        let done = Actions {
            close: true,
            deadline: None,
        };
        match self.phase {
            Phase::Failed => return done,
            Phase::Draining if self.streams.is_empty() => return done,
            Phase::Preface | Phase::FirstSettings => {
                // The preface and the first SETTINGS are the request head of HTTP/2.
                if let Some(limit) = cfg.header_read_timeout {
                    if now >= self.idle_since + limit {
                        return done;
                    }
                    at(self.idle_since + limit);
                }
            }
            _ => {}
        }
        if self.peer_eof && self.streams.is_empty() {
            return done;
        }
        if self.streams.is_empty() && self.phase == Phase::Open {
            if let Some(limit) = cfg.idle_timeout {
                let t = self.idle_since.max(self.last_frame) + limit;
                if now >= t {
                    frame::write_goaway(out, self.last_stream, ErrorCode::NO_ERROR, b"idle");
                    return done;
                }
                at(t);
            }
        }
        self.stream_deadlines(now, cfg, out, &mut at);
        let h2 = &cfg.http2;
        if let Some(sent) = self.ping_sent {
            let t = sent + h2.keep_alive_timeout;
            if now >= t {
                self.fail(ErrorCode::NO_ERROR, "keep-alive PING unanswered", out);
                return Actions {
                    close: true,
                    deadline: None,
                };
            }
            at(t);
        } else if let Some(interval) = h2.keep_alive_interval {
            let t = self.last_frame + interval;
            if now >= t {
                frame::write_ping(out, false, KEEP_ALIVE_PING);
                self.ping_sent = Some(now);
                at(now + h2.keep_alive_timeout);
            } else {
                at(t);
            }
        }
        Actions {
            close: false,
            deadline,
        }
    }

    /// Per-stream timeouts: a request body that stalls past `body_read_timeout` fails and
    /// its stream is reset; so is a response that waits past `window_stall_timeout` for a
    /// client that does not open its window (it would hold its memory forever).
    fn stream_deadlines(
        &mut self,
        now: Instant,
        cfg: &ServerConfig,
        out: &mut Vec<u8>,
        at: &mut impl FnMut(Instant),
    ) {
        let mut expired = Vec::new();
        for (&id, s) in &self.streams {
            let st = &s.state;
            // Only while the client may send: a window the service has not reopened yet
            // is not the client stalling.
            let body_limit = cfg
                .body_read_timeout
                .filter(|_| st.body.is_some() && st.recv_window > 0);
            let stall_limit = cfg.http2.window_stall_timeout;
            let due = [
                body_limit.map(|l| (st.progress + l, BodyFailure::TimedOut)),
                st.stalled_since
                    .zip(stall_limit)
                    .map(|(since, l)| (since + l, BodyFailure::Incomplete)),
            ];
            for (t, why) in due.into_iter().flatten() {
                if now >= t {
                    expired.push((id, why));
                    break;
                }
                at(t);
            }
        }
        for (id, why) in expired {
            tracing::debug!(stream = id, ?why, "a stream timed out");
            if let Some(s) = self.streams.remove(&id) {
                self.stream_gone(s.state, why);
            }
            frame::write_rst_stream(out, id, ErrorCode::CANCEL);
        }
    }

    /// WINDOW_UPDATEs for what the readers took: a stream's once half its window is
    /// owed, the connection's once half of its own is.
    fn return_credit(&mut self, now: Instant, cfg: &Http2Config, out: &mut Vec<u8>) {
        let stream_half = u64::from(cfg.initial_stream_window / 2).max(1);
        for (&id, s) in self.streams.iter_mut() {
            let st = &mut s.state;
            if let Some(body) = st.body.as_mut() {
                let taken = if body.sink.reader_gone() {
                    st.held
                } else {
                    (body.sink.take_consumed() as u64).min(st.held)
                };
                st.held -= taken;
                st.credit += taken;
                self.credit += taken;
            }
            if st.remote_closed {
                st.credit = 0;
            } else if st.credit >= stream_half {
                frame::write_window_update(out, id, st.credit as u32);
                st.recv_window += st.credit as i64;
                st.credit = 0;
                // The body-read timeout counts from when the client may send again.
                st.progress = now;
            }
        }
        let conn_half = u64::from(cfg.initial_connection_window.min(MAX_WINDOW) / 2).max(1);
        if self.credit >= conn_half {
            frame::write_window_update(out, 0, self.credit as u32);
            self.recv_window += self.credit as i64;
            self.credit = 0;
        }
    }
}
