//! The receiving side of the server machine, its [`Role`] on the connection core: each
//! frame the core hands over in its stream's state (RFC 9113 §5.1, §6), header blocks
//! into requests or trailers, and the rapid-reset bound.

use super::request::HeadBuilder;
use super::*;
use crate::proto::h2::conn::Role;

/// The server's [`Role`] for one `receive`.
pub(super) struct Rx<'a, B, X, D> {
    pub conn: &'a mut ServerConn<B, X>,
    pub clock: Clock,
    pub cfg: &'a Http2Config,
    pub d: &'a mut D,
    pub out: &'a mut Vec<u8>,
}

impl<B: StreamSink, X, D: Dispatch<Body = B, Exchange = X>> Role for Rx<'_, B, X, D> {
    fn parts(&mut self) -> (&mut Core, &mut Vec<u8>) {
        (&mut self.conn.core, self.out)
    }
    fn local(&self) -> Local {
        super::local(self.cfg)
    }
    fn fail(&mut self, code: ErrorCode, why: &'static str) {
        self.conn.fail(code, why, self.out);
    }
    fn reset_stream(&mut self, stream: u32, code: ErrorCode, why: &'static str) {
        self.conn.reset_stream(stream, code, why, self.out);
    }
    fn is_idle(&self, stream: u32) -> bool {
        self.conn.is_idle(stream)
    }
    fn flow(&mut self, stream: u32) -> Option<&mut StreamFlow> {
        self.conn
            .streams
            .get_mut(&stream)
            .map(|s| &mut s.state.flow)
    }
    fn apply_settings(
        &mut self,
        params: frame::SettingsParams<'_>,
    ) -> Result<(), (ErrorCode, &'static str)> {
        self.conn.apply_settings(params)
    }
    fn frame_seen(&mut self) {
        self.conn.last_frame = self.clock.now;
    }
    fn on_data(&mut self, stream: u32, end_stream: bool, data: &[u8]) {
        self.conn.on_data(stream, end_stream, data, self.out);
    }
    fn on_closed_data(&mut self, stream: u32) {
        // §6.1: STREAM_CLOSED.
        self.conn
            .write_reset(stream, ErrorCode::STREAM_CLOSED, self.out);
    }
    fn on_headers(&mut self, stream: u32) -> Option<bool> {
        self.conn.on_headers(stream, self.out)
    }
    fn on_block(&mut self, stream: u32, end_stream: bool, trailers: bool, block: &[u8]) {
        let (clock, cfg) = (self.clock, self.cfg);
        let conn = &mut *self.conn;
        conn.on_block(
            clock, stream, end_stream, trailers, block, cfg, self.d, self.out,
        );
    }
    fn on_rst_stream(&mut self, stream: u32, _code: ErrorCode) {
        self.conn
            .on_rst_stream(self.clock, stream, self.cfg, self.out);
    }
    fn on_goaway(&mut self, _last_stream: u32, _code: ErrorCode) {
        // The client opens no more streams; those in flight finish.
        self.conn.peer_done = true;
    }
}

impl<B: StreamSink, X> ServerConn<B, X> {
    /// Applies the client's SETTINGS to the core and the streams' send windows.
    fn apply_settings(
        &mut self,
        params: frame::SettingsParams<'_>,
    ) -> Result<(), (ErrorCode, &'static str)> {
        let flows = self.streams.values_mut().map(|s| &mut s.state.flow);
        self.core.apply_settings(params, flows)
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
        if let Err((code, why)) = self.apply_settings(frame::SettingsParams::new(settings)) {
            return self.fail(code, why, out);
        }
        self.last_stream = 1;
        let state = StreamState {
            body: None,
            remote_closed: true,
            sending: Sending::Head,
            head_only: head.method == http::Method::HEAD,
            flow: StreamFlow::new(self.core.send.peer.initial_window_size, 0),
            held: 0,
            progress: self.last_frame,
            stalled_since: None,
        };
        let (exchange, _) = d.dispatch(1, head, None);
        self.streams.insert(1, Stream { exchange, state });
    }

    pub(super) fn on_rst_stream(
        &mut self,
        clock: Clock,
        stream: u32,
        cfg: &Http2Config,
        out: &mut Vec<u8>,
    ) {
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

    /// Request body bytes within the windows, into the stream's sink.
    pub(super) fn on_data(
        &mut self,
        stream: u32,
        end_stream: bool,
        data: &[u8],
        out: &mut Vec<u8>,
    ) {
        let Some(s) = self.streams.get_mut(&stream) else {
            return;
        };
        let st = &mut s.state;
        let Some(body) = st.body.as_mut().filter(|_| !st.remote_closed) else {
            self.core.credit += data.len() as u64;
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
            self.core.credit += data.len() as u64;
            return self.reset_stream(
                stream,
                ErrorCode::PROTOCOL_ERROR,
                "DATA that does not match content-length",
                out,
            );
        }
        if body.sink.reader_gone() {
            self.core.credit += data.len() as u64;
            st.flow.credit += data.len() as u64;
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

    /// A HEADERS frame: a new request, or trailers on one whose body is arriving; returns
    /// whether it is trailers, `None` on a connection error.
    pub(super) fn on_headers(&mut self, stream: u32, out: &mut Vec<u8>) -> Option<bool> {
        if stream % 2 == 0 {
            let why = "HEADERS on a server-initiated stream id";
            self.fail(ErrorCode::PROTOCOL_ERROR, why, out);
            return None;
        }
        let reset = self.core.send.resets.contains(stream);
        if !reset && !self.streams.contains_key(&stream) && stream <= self.last_stream {
            // §5.1: a stream that ended; §5.1.1: an id lower than one already used.
            if self.recently_used.contains(&stream) {
                self.fail(ErrorCode::STREAM_CLOSED, "HEADERS on a closed stream", out)
            } else {
                let why = "HEADERS on a stream id below the last";
                self.fail(ErrorCode::PROTOCOL_ERROR, why, out)
            };
            return None;
        }
        // A block on a stream we reset is decoded as trailers (HPACK stays in sync), then
        // dropped by `on_trailers`.
        Some(reset || self.streams.contains_key(&stream))
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
            .core
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
        if self.core.phase != Phase::Open || self.peer_done {
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
            flow: StreamFlow::new(
                self.core.send.peer.initial_window_size,
                cfg.initial_stream_window,
            ),
            held: 0,
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
        self.core.idle_frames = self.core.idle_frames.saturating_sub(16);
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
        if self.core.send.resets.contains(stream) {
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
        let mut w = StreamWriter::new(stream, &mut st, &mut self.core.send, clock, out);
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
