//! The send side of one stream: its response head, DATA under both flow-control windows,
//! trailers, and resets, written into the round's output.

use super::{Sending, StreamState};
use crate::proto::h1::encode::decimal;
use crate::proto::h2::conn::{self, SendHalf};
use crate::proto::h2::fields::CONNECTION_SPECIFIC;
use crate::proto::h2::frame::{self, ErrorCode};
use crate::proto::shared::Clock;
use bytes::Buf;
use http::header::{self, HeaderMap};
use http::{response, StatusCode};

/// Writes one stream's response (handed to the driver by `ServerConn::each_stream`).
pub(crate) struct StreamWriter<'a, B> {
    id: u32,
    st: &'a mut StreamState<B>,
    send: &'a mut SendHalf,
    clock: Clock,
    out: &'a mut Vec<u8>,
}

impl<'a, B> StreamWriter<'a, B> {
    pub(super) fn new(
        id: u32,
        st: &'a mut StreamState<B>,
        send: &'a mut SendHalf,
        clock: Clock,
        out: &'a mut Vec<u8>,
    ) -> StreamWriter<'a, B> {
        StreamWriter {
            id,
            st,
            send,
            clock,
            out,
        }
    }

    /// The stream's id.
    pub(crate) fn id(&self) -> u32 {
        self.id
    }

    /// Whether the response head is still to be written.
    pub(crate) fn awaits_head(&self) -> bool {
        self.st.sending == Sending::Head
    }

    /// Writes the response head (with `date`, and `content-length` when `exact` is known).
    /// Returns whether a body follows; if not (HEAD, 204, 304, an empty body) the stream's
    /// side is ended and the driver drops the body.
    pub(crate) fn respond(&mut self, parts: &mut response::Parts, exact: Option<u64>) -> bool {
        if self.st.sending != Sending::Head {
            return false;
        }
        // One pass over the few fields a response has (not a hash lookup per forbidden name).
        let forbidden = |n: &header::HeaderName| CONNECTION_SPECIFIC.contains(&n.as_str());
        if parts.headers.keys().any(forbidden) {
            for name in CONNECTION_SPECIFIC {
                if parts.headers.remove(name).is_some() {
                    tracing::debug!(name, "dropped a connection-specific response field");
                }
            }
        }
        let status = parts.status;
        let no_body_status = status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED;
        let body = !(self.st.head_only || no_body_status || exact == Some(0));
        let mark = frame::begin_headers(self.out);
        let encoder = &mut self.send.encoder;
        encoder.encode_response(status, &parts.headers, self.out);
        if !parts.headers.contains_key(header::DATE) {
            encoder.encode_field(b"date", &(self.clock.date)(), false, self.out);
        }
        if let Some(n) = exact.filter(|_| !no_body_status) {
            if !parts.headers.contains_key(header::CONTENT_LENGTH) {
                let mut buf = [0; 20];
                let digits = decimal(n, &mut buf);
                encoder.encode_field(b"content-length", digits, false, self.out);
            }
        }
        frame::finish_headers(
            self.out,
            mark,
            self.id,
            !body,
            self.send.peer.max_frame_size,
        );
        self.st.sending = if body { Sending::Body } else { Sending::Done };
        body
    }

    /// How many body bytes both windows allow now.
    pub(crate) fn window(&self) -> usize {
        self.st.flow.send.min(self.send.window).max(0) as usize
    }

    /// The response waits for the client's window (none is open now): counted against
    /// `window_stall_timeout`.
    pub(crate) fn wait_for_window(&mut self) {
        self.st.stalled_since.get_or_insert(self.clock.now);
    }

    /// Writes as much of `data` as the windows allow, in frames of at most the client's
    /// SETTINGS_MAX_FRAME_SIZE; `end_stream` marks the last DATA once all of it is out.
    /// Returns whether all of `data` was written (if not, the rest waits for a
    /// WINDOW_UPDATE; the driver keeps it).
    pub(crate) fn send_data(&mut self, data: &mut impl Buf, end_stream: bool) -> bool {
        if self.st.sending != Sending::Body {
            data.advance(data.remaining());
            return true;
        }
        let windows = (&mut self.send.window, &mut self.st.flow.send);
        let max_frame = self.send.peer.max_frame_size;
        let sent = conn::send_data(self.out, self.id, data, end_stream, windows, max_frame);
        if sent.progressed {
            self.st.stalled_since = None;
        }
        if !sent.all {
            self.wait_for_window();
        } else if end_stream {
            self.st.sending = Sending::Done;
        }
        sent.all
    }

    /// Ends the response: with trailers (a HEADERS frame with END_STREAM), or an empty
    /// DATA frame with END_STREAM.
    pub(crate) fn finish(&mut self, trailers: Option<&HeaderMap>) {
        if self.st.sending != Sending::Body {
            return;
        }
        match trailers.filter(|t| !t.is_empty()) {
            Some(t) => {
                let mark = frame::begin_headers(self.out);
                self.send.encoder.encode_trailers(t, self.out);
                frame::finish_headers(self.out, mark, self.id, true, self.send.peer.max_frame_size);
            }
            None => frame::write_data_head(self.out, self.id, 0, true),
        }
        self.st.sending = Sending::Done;
    }

    /// Abandons the stream (a failed body or service): RST_STREAM with `code`.
    pub(crate) fn reset(&mut self, code: ErrorCode) {
        if self.st.sending == Sending::Done && self.st.remote_closed {
            return;
        }
        frame::write_rst_stream(self.out, self.id, code);
        self.send.resets.record(self.id);
        self.st.sending = Sending::Done;
        self.st.remote_closed = true;
    }
}
