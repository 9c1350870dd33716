//! The send side: opening streams with request heads, DATA within the server's windows,
//! trailers, resets, and the credit that reopens the server's windows.

use super::{ClientConn, Remote, Stream};
use crate::proto::h2::conn::{self, give_back, StreamFlow};
use crate::proto::h2::fields::CONNECTION_SPECIFIC;
use crate::proto::h2::frame::{self, ErrorCode};
use bytes::Buf;
use http::{HeaderMap, Method};

/// A request head as HTTP/2 sends it: the pseudo-headers' parts and the fields.
pub(crate) struct RequestHead<'a> {
    pub method: &'a Method,
    pub scheme: &'a str,
    pub authority: &'a str,
    /// Path and query (origin form).
    pub path: &'a str,
    /// The `:protocol` of an extended CONNECT (RFC 8441): the stream then carries it.
    pub protocol: Option<&'a str>,
    pub headers: &'a HeaderMap,
}

impl ClientConn {
    /// Whether the server allows extended CONNECT (SETTINGS_ENABLE_CONNECT_PROTOCOL, RFC
    /// 8441); `None` until its SETTINGS came.
    pub(crate) fn extended_connect(&self) -> Option<bool> {
        self.core
            .got_settings
            .then_some(self.core.send.peer.enable_connect_protocol)
    }

    /// Whether a new stream may be opened now: the connection is usable and fewer streams
    /// are open than the server's SETTINGS_MAX_CONCURRENT_STREAMS (before its SETTINGS
    /// came, `initial_max_concurrent_streams`).
    pub(crate) fn can_open(&self) -> bool {
        let max = match self.core.send.peer.max_concurrent_streams {
            Some(n) => n,
            None if self.core.got_settings => u32::MAX,
            None => self.cfg.initial_max_concurrent_streams,
        };
        self.is_usable() && self.streams.len() < max as usize
    }

    /// Opens a stream for `req` (its HEADERS into `out`); `end_stream` when it has no
    /// body. `None` when no stream may be opened now (`can_open`).
    pub(crate) fn open(
        &mut self,
        req: &RequestHead<'_>,
        end_stream: bool,
        out: &mut Vec<u8>,
    ) -> Option<u32> {
        if !self.can_open() {
            return None;
        }
        let id = self.next_id;
        self.next_id += 2;
        let mark = frame::begin_headers(out);
        let e = &mut self.core.send.encoder;
        e.begin_block(out);
        e.encode_field(b":method", req.method.as_str().as_bytes(), false, out);
        // A plain CONNECT names only its authority (RFC 9113 §8.5); an extended one also
        // its scheme, path and protocol (RFC 8441 §4).
        let tunnel = req.method == Method::CONNECT && req.protocol.is_none();
        if !tunnel {
            e.encode_field(b":scheme", req.scheme.as_bytes(), false, out);
        }
        e.encode_field(b":authority", req.authority.as_bytes(), false, out);
        if !tunnel {
            e.encode_field(b":path", req.path.as_bytes(), false, out);
        }
        if let Some(p) = req.protocol {
            e.encode_field(b":protocol", p.as_bytes(), false, out);
        }
        for (name, value) in req.headers {
            let n = name.as_str();
            // Fields HTTP/2 forbids (§8.2.2) or carries as a pseudo-header (`host`) are not
            // sent; `te` goes only as `trailers`.
            let not_sent = CONNECTION_SPECIFIC.contains(&n) || n == "host";
            if not_sent || (n == "te" && value.as_bytes() != b"trailers") {
                continue;
            }
            e.encode_field(n.as_bytes(), value.as_bytes(), value.is_sensitive(), out);
        }
        let peer = &self.core.send.peer;
        frame::finish_headers(out, mark, id, end_stream, peer.max_frame_size);
        let flow = StreamFlow::new(peer.initial_window_size, self.cfg.initial_stream_window);
        self.streams.insert(
            id,
            Stream {
                flow,
                local_open: !end_stream,
                remote: Remote::Head,
                head_only: req.method == Method::HEAD,
            },
        );
        Some(id)
    }

    /// Whether `stream` still takes request DATA (not ended, not reset).
    pub(crate) fn is_sending(&self, stream: u32) -> bool {
        !self.core.is_failed() && self.streams.get(&stream).is_some_and(|s| s.local_open)
    }

    /// Request body bytes both windows allow on `stream` now.
    #[cfg(test)]
    pub(crate) fn window(&self, stream: u32) -> usize {
        match self.streams.get(&stream) {
            Some(s) if s.local_open && !self.core.is_failed() => {
                s.flow.send.min(self.core.send.window).max(0) as usize
            }
            _ => 0,
        }
    }

    /// Writes as much of `data` as the windows allow, in frames of at most the server's
    /// SETTINGS_MAX_FRAME_SIZE; `end_stream` marks the last DATA once all of it is out.
    /// Returns whether all of `data` went (the rest waits for a WINDOW_UPDATE). On a
    /// stream that takes no more DATA, the data is dropped.
    pub(crate) fn send_data(
        &mut self,
        stream: u32,
        data: &mut impl Buf,
        end_stream: bool,
        out: &mut Vec<u8>,
    ) -> bool {
        if !self.is_sending(stream) {
            data.advance(data.remaining());
            return true;
        }
        let Some(s) = self.streams.get_mut(&stream) else {
            return true;
        };
        let windows = (&mut self.core.send.window, &mut s.flow.send);
        let max_frame = self.core.send.peer.max_frame_size;
        let sent = conn::send_data(out, stream, data, end_stream, windows, max_frame);
        if sent.all && end_stream {
            self.local_end(stream);
        }
        sent.all
    }

    /// Ends the request body with trailers (or, with none, an empty END_STREAM DATA).
    pub(crate) fn send_trailers(&mut self, stream: u32, trailers: &HeaderMap, out: &mut Vec<u8>) {
        if !self.is_sending(stream) {
            return;
        }
        if trailers.is_empty() {
            frame::write_data_head(out, stream, 0, true);
        } else {
            let mark = frame::begin_headers(out);
            let send = &mut self.core.send;
            send.encoder.encode_trailers(trailers, out);
            frame::finish_headers(out, mark, stream, true, send.peer.max_frame_size);
        }
        self.local_end(stream);
    }

    fn local_end(&mut self, stream: u32) {
        if let Some(s) = self.streams.get_mut(&stream) {
            s.local_open = false;
            if s.remote == Remote::Closed {
                self.streams.remove(&stream);
            }
        }
    }

    /// Abandons `stream` (the caller dropped the response, or the request body failed):
    /// RST_STREAM with `code`, unless the stream is already over.
    pub(crate) fn reset(&mut self, stream: u32, code: ErrorCode, out: &mut Vec<u8>) {
        if !self.core.is_failed() && self.streams.remove(&stream).is_some() {
            frame::write_rst_stream(out, stream, code);
        }
    }

    /// The reader took `n` body bytes of `stream` (or they were dropped): credit for both
    /// windows, returned by `flush_credit`.
    pub(crate) fn release(&mut self, stream: u32, n: usize) {
        self.core.credit += n as u64;
        if let Some(s) = self.streams.get_mut(&stream) {
            if s.remote != Remote::Closed {
                s.flow.credit += n as u64;
            }
        }
    }

    /// WINDOW_UPDATEs for what the readers took: a stream's once half its window is owed,
    /// the connection's once half of its own is.
    pub(crate) fn flush_credit(&mut self, out: &mut Vec<u8>) {
        if self.core.is_failed() {
            return;
        }
        let stream_half = u64::from(self.cfg.initial_stream_window / 2).max(1);
        for (&id, s) in self.streams.iter_mut() {
            if s.remote != Remote::Closed {
                give_back(out, id, &mut s.flow.credit, &mut s.flow.recv, stream_half);
            }
        }
        self.core.give_back(self.cfg.initial_connection_window, out);
    }

    /// A graceful close from our side: GOAWAY(NO_ERROR); nothing more is sent or read.
    pub(crate) fn close(&mut self, out: &mut Vec<u8>) {
        if !self.core.is_failed() {
            frame::write_goaway(out, 0, ErrorCode::NO_ERROR, b"");
            self.core.stop();
            self.streams.clear();
        }
    }
}
