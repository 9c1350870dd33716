//! The receiving side of the server machine: each frame in its stream's state (RFC 9113
//! §5.1, §6), header blocks into requests or trailers, the client's SETTINGS and windows,
//! and the bounds against floods.

use super::request::HeadBuilder;
use super::*;

impl<B: StreamSink, X> ServerConn<B, X> {
    pub(super) fn on_frame<D>(
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
                        block.trailers,
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
                    if data == frame::KEEP_ALIVE_PING {
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
    pub(super) fn does_no_work(&self, f: &Frame<'_>) -> bool {
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
    pub(super) fn idle_frame(&mut self, cfg: &Http2Config, out: &mut Vec<u8>) {
        self.idle_frames += 1;
        if self.idle_frames > u64::from(cfg.max_idle_frames) {
            self.fail(
                ErrorCode::ENHANCE_YOUR_CALM,
                "too many frames that do no work",
                out,
            );
        }
    }

    pub(super) fn on_settings(&mut self, params: frame::SettingsParams<'_>, out: &mut Vec<u8>) {
        if self.apply_settings(params, out) {
            frame::write_settings_ack(out);
        }
    }

    /// Applies the client's SETTINGS; false if they were invalid (the connection failed).
    pub(super) fn apply_settings(
        &mut self,
        params: frame::SettingsParams<'_>,
        out: &mut Vec<u8>,
    ) -> bool {
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

    pub(super) fn on_window_update(&mut self, stream: u32, increment: u32, out: &mut Vec<u8>) {
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
        if self.send.resets.contains(stream) {
            return; // §5.1: sent before the client saw our reset
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

    pub(super) fn on_rst_stream(
        &mut self,
        clock: Clock,
        stream: u32,
        cfg: &Http2Config,
        out: &mut Vec<u8>,
    ) {
        if self.is_idle(stream) {
            return self.fail(
                ErrorCode::PROTOCOL_ERROR,
                "RST_STREAM on an idle stream",
                out,
            );
        }
        if self.send.resets.contains(stream) {
            // Crossed ours: not a cancel of the client's (the rapid-reset bound counts those).
            return;
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

    pub(super) fn on_data(
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
        if self.send.resets.contains(stream) {
            // Sent before the client saw our reset: ignored (§5.1), but counted against
            // the connection's window and given back (§6.9).
            self.credit += u64::from(flow_len);
            return;
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
    pub(super) fn on_headers<D>(
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
        let reset = self.send.resets.contains(stream);
        if !reset && !self.streams.contains_key(&stream) && stream <= self.last_stream {
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
        // A block on a stream we reset is decoded as trailers (HPACK stays in sync), then
        // dropped by `on_trailers`.
        let trailers = reset || self.streams.contains_key(&stream);
        if end_headers {
            self.on_block(clock, stream, end_stream, trailers, fragment, cfg, d, out);
        } else {
            self.block = Some(Box::new(Block {
                stream,
                end_stream,
                trailers,
                bytes: fragment.to_vec(),
            }));
        }
    }

    /// A whole header block: decode it (always, to keep HPACK in sync) and start the
    /// request, or end its body with trailers.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_block<D>(
        &mut self,
        clock: Clock,
        stream: u32,
        end_stream: bool,
        trailers: bool,
        block: &[u8],
        cfg: &Http2Config,
        d: &mut D,
        out: &mut Vec<u8>,
    ) where
        D: Dispatch<Body = B, Exchange = X>,
    {
        let mut fields = if trailers {
            HeadBuilder::trailers()
        } else {
            HeadBuilder::request(cfg.extended_connect)
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

    pub(super) fn on_trailers(
        &mut self,
        stream: u32,
        end_stream: bool,
        too_large: bool,
        fields: HeadBuilder,
        out: &mut Vec<u8>,
    ) {
        if self.send.resets.contains(stream) {
            return; // §5.1: sent before the client saw our reset
        }
        let Some(s) = self.streams.get_mut(&stream) else {
            // The stream ended while its second block arrived, after END_STREAM from the
            // client: §5.1's STREAM_CLOSED.
            return self.write_reset(stream, ErrorCode::STREAM_CLOSED, out);
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
    pub(super) fn answer(
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
            self.write_reset(stream, ErrorCode::NO_ERROR, out);
        }
    }

    /// Whether `stream` is one the client has not opened yet (§5.1: idle).
    pub(super) fn is_idle(&self, stream: u32) -> bool {
        stream > self.last_stream && !self.streams.contains_key(&stream)
    }
}
