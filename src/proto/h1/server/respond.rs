//! The response side of the server machine: the next response in request order, its head
//! and framing, its body's bytes, and the errors the machine answers itself.

use super::{
    After, BodyFailure, BodySink, Clock, Continue, Front, Reading, ServerConn, Slot, SlotState,
    Started, CONTINUE,
};
use crate::proto::h1::body::{BodyEncoder, EncodeError};
use crate::proto::h1::encode::{encode_head, framing_for, response_wants_close};
use crate::proto::h1::framing::BodyFraming;
use bytes::Buf;
use http::{header, HeaderMap, HeaderValue, StatusCode, Version};
use std::collections::VecDeque;
use std::time::Instant;

impl<B: BodySink, X: 'static> ServerConn<B, X> {
    /// The response to write next. Before it, an owed `100 Continue` goes out here once
    /// the service has asked for the body and every earlier response is written.
    pub(crate) fn front(&mut self, out: &mut Vec<u8>) -> Option<Front<'_, X>> {
        if self.queue.len() == 1 {
            if let (Reading::Body(b), Some(SlotState::Pending(_))) =
                (&mut self.reading, self.queue.front().map(|s| &s.state))
            {
                if b.cont == Continue::Owed && b.sink.wanted() {
                    b.cont = Continue::Sent;
                    out.extend_from_slice(CONTINUE);
                }
            }
        }
        Some(match &mut self.queue.front_mut()?.state {
            SlotState::Pending(x) => Front::Pending(x),
            SlotState::Writing(x, _) => Front::Writing(x),
            SlotState::Canned(_) => Front::Canned,
        })
    }

    /// Writes the head of the front response (`Front::Pending`), deciding its framing and
    /// whether the connection stays open. `exact`: the body's exact size, if known.
    pub(crate) fn begin_response(
        &mut self,
        clock: Clock,
        parts: &mut http::response::Parts,
        exact: Option<u64>,
        out: &mut Vec<u8>,
    ) -> Started {
        let last_before_close = self.reads_no_more() && self.queue.len() == 1;
        let switching = matches!(self.reading, Reading::Switching) && self.queue.len() == 1;
        // Answered without the body the client was never told to send: whether it sends
        // it anyway cannot be known, so the connection is not reused.
        let body_unsent = self.queue.len() == 1
            && matches!(&self.reading, Reading::Body(b) if b.cont == Continue::Owed);
        let Some(slot) = self.queue.front_mut() else {
            return Started::Done(After::Close);
        };
        // A body of unknown size whose app set a Content-Length (tower-http's ServeDir
        // does) is sent with that length, held to it.
        let exact = exact.or_else(|| declared_length(&parts.headers));
        if slot.head_only
            && !parts.status.is_informational()
            && parts.status != StatusCode::NO_CONTENT
            && parts.status != StatusCode::NOT_MODIFIED
            && !parts.headers.contains_key(header::CONTENT_LENGTH)
            && !parts.headers.contains_key(header::TRANSFER_ENCODING)
        {
            // HEAD: the Content-Length a GET would get (as hyper does).
            if let Some(n) = exact.filter(|n| *n > 0) {
                parts
                    .headers
                    .insert(header::CONTENT_LENGTH, HeaderValue::from(n));
            }
        }
        // A `2xx` to CONNECT carries neither Content-Length nor Transfer-Encoding (RFC 9110
        // §9.3.6): the tunnel's bytes follow the head.
        let tunnel = slot.connect && parts.status.is_success();
        if tunnel {
            parts.headers.remove(header::CONTENT_LENGTH);
            parts.headers.remove(header::TRANSFER_ENCODING);
        }
        if switching && (parts.status == StatusCode::SWITCHING_PROTOCOLS || tunnel) {
            // The service may take the connection (if none does, the driver closes it):
            // what follows is the new protocol's, or the tunnel's.
            let date = (clock.date)();
            encode_head(
                slot.version,
                parts.status,
                &parts.headers,
                &BodyFraming::Empty,
                true,
                &date,
                out,
            );
            self.queue = VecDeque::new();
            self.reading = Reading::Upgraded { switched: true };
            return Started::Done(After::Next);
        }
        // A CONNECT with a body is not switched: the connection ends after the head, and
        // what the client sent after its CONNECT is never read as HTTP.
        let framing = if tunnel {
            BodyFraming::Empty
        } else {
            framing_for(slot.head_only, parts.status, exact, slot.version)
        };
        slot.keep_alive = slot.keep_alive
            && !body_unsent
            && !last_before_close
            && framing != BodyFraming::UntilClose
            // An app that says `connection: close` gets it.
            && !response_wants_close(&parts.headers);
        let date = (clock.date)();
        encode_head(
            slot.version,
            parts.status,
            &parts.headers,
            &framing,
            slot.keep_alive,
            &date,
            out,
        );
        if framing == BodyFraming::Empty {
            return Started::Done(self.complete_front(clock.now));
        }
        let state = std::mem::replace(&mut slot.state, SlotState::Canned(StatusCode::OK));
        slot.state = match state {
            SlotState::Pending(x) | SlotState::Writing(x, _) => {
                SlotState::Writing(x, BodyEncoder::new(framing))
            }
            canned => canned,
        };
        Started::Body(framing)
    }

    fn encoder(&mut self) -> Option<&mut BodyEncoder> {
        match &mut self.queue.front_mut()?.state {
            SlotState::Writing(_, enc) => Some(enc),
            _ => None,
        }
    }

    /// Body bytes still owed by the front response, under `Length` framing.
    pub(crate) fn body_remaining(&mut self) -> Option<u64> {
        self.encoder()?.remaining()
    }

    /// Writes a piece of the front response's body (`Front::Writing`), framed. An error
    /// (more than its Content-Length) means: `abort_response`.
    pub(crate) fn write_data(
        &mut self,
        data: &mut impl Buf,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        let len = data.remaining();
        let Some(enc) = self.encoder() else {
            return Ok(());
        };
        out.reserve(len + 20);
        if !enc.begin_data(len, out)? {
            data.advance(len);
            return Ok(());
        }
        while data.has_remaining() {
            let c = data.chunk();
            out.extend_from_slice(c);
            let n = c.len();
            data.advance(n);
        }
        enc.end_data(out);
        Ok(())
    }

    /// Counts `len` body bytes the driver sent itself (a file, by `sendfile`) for the
    /// front response.
    pub(crate) fn sent_elsewhere(&mut self, len: u64) -> Result<(), EncodeError> {
        match self.encoder() {
            Some(enc) => enc.count_sent(len),
            None => Ok(()),
        }
    }

    /// Ends the front response's body (with trailers, which only a chunked body carries).
    pub(crate) fn finish_body(
        &mut self,
        clock: Clock,
        trailers: Option<&HeaderMap>,
        out: &mut Vec<u8>,
    ) -> Result<After, EncodeError> {
        if let Some(enc) = self.encoder() {
            enc.finish(trailers, out)?;
        }
        Ok(self.complete_front(clock.now))
    }

    /// The front response's body failed after its head went out: only closing tells the
    /// client. Nothing else is written.
    pub(crate) fn abort_response(&mut self) {
        self.queue.clear();
        self.parked = false;
        if matches!(self.reading, Reading::Body(_)) {
            self.end_body(Err(BodyFailure::Incomplete));
        }
        self.reading = Reading::Stopped;
    }

    /// Answers the front request with an error response the driver chose (the service
    /// failed or panicked); `close`: end the connection after it.
    pub(crate) fn respond_error(
        &mut self,
        clock: Clock,
        status: StatusCode,
        close: bool,
        out: &mut Vec<u8>,
    ) -> After {
        let last_before_close = self.reads_no_more() && self.queue.len() == 1;
        let Some(slot) = self.queue.front_mut() else {
            return After::Close;
        };
        slot.keep_alive = slot.keep_alive && !close && !last_before_close;
        error_response(status, slot.version, slot.keep_alive, &(clock.date)(), out);
        self.complete_front(clock.now)
    }

    /// Writes the front response when it is one the machine answers itself
    /// (`Front::Canned`); the connection closes after it.
    pub(crate) fn write_canned(&mut self, clock: Clock, out: &mut Vec<u8>) -> After {
        if let Some(Slot {
            version,
            state: SlotState::Canned(status),
            ..
        }) = self.queue.front()
        {
            error_response(*status, *version, false, &(clock.date)(), out);
            if let Some(slot) = self.queue.front_mut() {
                slot.keep_alive = false;
            }
        }
        self.complete_front(clock.now)
    }

    /// The front response is written: the next one may follow, or the connection closes.
    fn complete_front(&mut self, now: Instant) -> After {
        let keep_alive = self.queue.pop_front().is_some_and(|s| s.keep_alive);
        if self.queue.is_empty() {
            self.idle_since = now;
        }
        if keep_alive {
            return After::Next;
        }
        // Nothing after a response that closes the connection is written or read (bar
        // the rest of a body still arriving, read to be discarded before the close).
        self.queue.clear();
        self.parked = false;
        match &mut self.reading {
            Reading::Body(b) => b.last = true,
            _ => self.reading = Reading::Stopped,
        }
        After::Close
    }
}

/// The app's own Content-Length, if it set exactly one valid value and no
/// Transfer-Encoding.
pub(super) fn declared_length(headers: &HeaderMap) -> Option<u64> {
    if headers.contains_key(header::TRANSFER_ENCODING) {
        return None;
    }
    let mut values = headers.get_all(header::CONTENT_LENGTH).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return None;
    }
    first.to_str().ok()?.trim().parse().ok()
}

/// A complete plain-text response for an error the server answers itself.
pub(super) fn error_response(
    status: StatusCode,
    version: Version,
    keep_alive: bool,
    date: &[u8],
    out: &mut Vec<u8>,
) {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    let body = status.canonical_reason().unwrap_or("error").as_bytes();
    encode_head(
        version,
        status,
        &headers,
        &BodyFraming::Length(body.len() as u64),
        keep_alive,
        date,
        out,
    );
    out.extend_from_slice(body);
}
