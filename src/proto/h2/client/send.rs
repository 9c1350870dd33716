//! The send side: opening streams with request heads, DATA within the server's windows,
//! trailers, resets, and the credit that reopens the server's windows.

use super::{ClientConn, Phase, Remote, Stream};
use crate::proto::h2::fields::CONNECTION_SPECIFIC;
use crate::proto::h2::frame::{self, ErrorCode, MAX_WINDOW};
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
        self.got_settings
            .then_some(self.peer.enable_connect_protocol)
    }

    /// Whether a new stream may be opened now: the connection is usable and fewer streams
    /// are open than the server's SETTINGS_MAX_CONCURRENT_STREAMS (before its SETTINGS
    /// came, `initial_max_concurrent_streams`).
    pub(crate) fn can_open(&self) -> bool {
        let max = match self.peer.max_concurrent_streams {
            Some(n) => n,
            None if self.got_settings => u32::MAX,
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
        let e = &mut self.encoder;
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
        frame::finish_headers(out, mark, id, end_stream, self.peer.max_frame_size);
        self.streams.insert(
            id,
            Stream {
                send_window: i64::from(self.peer.initial_window_size),
                recv_window: i64::from(self.cfg.initial_stream_window),
                local_open: !end_stream,
                remote: Remote::Head,
                head_only: req.method == Method::HEAD,
                credit: 0,
            },
        );
        Some(id)
    }

    /// Whether `stream` still takes request DATA (not ended, not reset).
    pub(crate) fn is_sending(&self, stream: u32) -> bool {
        self.phase != Phase::Failed && self.streams.get(&stream).is_some_and(|s| s.local_open)
    }

    /// Request body bytes both windows allow on `stream` now.
    pub(crate) fn window(&self, stream: u32) -> usize {
        match self.streams.get(&stream) {
            Some(s) if s.local_open && self.phase != Phase::Failed => {
                s.send_window.min(self.send_window).max(0) as usize
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
        loop {
            let remaining = data.remaining();
            if remaining == 0 {
                if end_stream {
                    frame::write_data_head(out, stream, 0, true);
                    self.local_end(stream);
                }
                return true;
            }
            let n = remaining
                .min(self.window(stream))
                .min(self.peer.max_frame_size as usize);
            if n == 0 {
                return false;
            }
            let last = end_stream && n == remaining;
            frame::write_data_head(out, stream, n, last);
            let mut left = n;
            while left > 0 {
                let chunk = data.chunk();
                let k = chunk.len().min(left);
                out.extend_from_slice(&chunk[..k]);
                data.advance(k);
                left -= k;
            }
            self.send_window -= n as i64;
            if let Some(s) = self.streams.get_mut(&stream) {
                s.send_window -= n as i64;
            }
            if last {
                self.local_end(stream);
                return true;
            }
        }
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
            self.encoder.encode_trailers(trailers, out);
            frame::finish_headers(out, mark, stream, true, self.peer.max_frame_size);
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
        if self.phase != Phase::Failed && self.streams.remove(&stream).is_some() {
            frame::write_rst_stream(out, stream, code);
        }
    }

    /// The reader took `n` body bytes of `stream` (or they were dropped): credit for both
    /// windows, returned by `flush_credit`.
    pub(crate) fn release(&mut self, stream: u32, n: usize) {
        self.credit += n as u64;
        if let Some(s) = self.streams.get_mut(&stream) {
            if s.remote != Remote::Closed {
                s.credit += n as u64;
            }
        }
    }

    /// WINDOW_UPDATEs for what the readers took: a stream's once half its window is owed,
    /// the connection's once half of its own is.
    pub(crate) fn flush_credit(&mut self, out: &mut Vec<u8>) {
        if self.phase == Phase::Failed {
            return;
        }
        let stream_half = u64::from(self.cfg.initial_stream_window / 2).max(1);
        for (&id, s) in self.streams.iter_mut() {
            if s.credit >= stream_half && s.remote != Remote::Closed {
                let inc = s.credit.min(u64::from(MAX_WINDOW)) as u32;
                frame::write_window_update(out, id, inc);
                s.recv_window += i64::from(inc);
                s.credit -= u64::from(inc);
            }
        }
        let conn_half = u64::from(self.cfg.initial_connection_window.min(MAX_WINDOW) / 2).max(1);
        if self.credit >= conn_half {
            let inc = self.credit.min(u64::from(MAX_WINDOW)) as u32;
            frame::write_window_update(out, 0, inc);
            self.recv_window += i64::from(inc);
            self.credit -= u64::from(inc);
        }
    }

    /// A graceful close from our side: GOAWAY(NO_ERROR); nothing more is sent or read.
    pub(crate) fn close(&mut self, out: &mut Vec<u8>) {
        if self.phase != Phase::Failed {
            frame::write_goaway(out, 0, ErrorCode::NO_ERROR, b"");
            self.phase = Phase::Failed;
            self.streams.clear();
        }
    }
}
