//! The server side of an HTTP/2 connection as a sans-IO machine.
//!
//! [`ServerConn`] is the server's role on the shared connection core (`h2::conn`, which
//! reads the frames and keeps SETTINGS, windows, PING and GOAWAY): which frames are valid
//! in which stream state, requests from header blocks (HPACK), the streams in flight and
//! the limits that protect the server. It owns no socket, thread, clock or task: the driver
//! (`http::server_h2`) gives it the bytes read and the time, calls the service for each
//! request it dispatches ([`Dispatch`]), writes responses through [`StreamWriter`] and
//! applies what [`ServerConn::end_round`] returns. Everything the machine writes goes into
//! the caller's output buffer, so a round's frames leave in one write.
//!
//! Request bodies go to a [`StreamSink`]; what the service has read comes back as credit
//! (`take_consumed`), and the windows are reopened in batches of half a window, so a slow
//! reader holds the client back instead of making the server buffer.

mod frames;
mod request;
mod round;
mod send;
#[cfg(test)]
mod tests;

pub(crate) use request::RequestHead;
pub(crate) use send::StreamWriter;

use super::config::{Http2Config, ServerLimits};
use super::conn::{self, Core, Local, Phase, Side, StreamFlow, Streams};
use super::frame::{self, ErrorCode};
use crate::proto::shared::{BodyFailure, BodySink, Clock};
use http::StatusCode;
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
    flow: StreamFlow,
    /// Body bytes in the sink the reader has not taken yet.
    held: u64,
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

/// Counts events in a fixed window of time (resets for the rapid-reset bound).
#[derive(Debug, Clone, Copy)]
struct WindowCount {
    since: Instant,
    count: u32,
}

/// One HTTP/2 server connection's protocol state. `B` is the request body sink, `X` the
/// driver's per-stream state.
pub(crate) struct ServerConn<B, X> {
    core: Core,
    streams: Streams<Stream<B, X>>,
    /// The highest stream id the client has used: lower unused ids are closed (§5.1.1).
    last_stream: u32,
    resets: WindowCount,
    /// When the last frame arrived, and when the stream set last became empty.
    last_frame: Instant,
    idle_since: Instant,
    /// The client sent GOAWAY, or EOF: no new streams from it.
    peer_done: bool,
    /// The client finished sending (EOF): close once the streams are done.
    peer_eof: bool,
    /// The last few stream ids the client used, to tell HEADERS on a stream that ended
    /// (STREAM_CLOSED) from an id below the last that was never used (PROTOCOL_ERROR,
    /// §5.1.1).
    recently_used: [u32; 8],
}

/// The server's own settings as the core enforces them.
fn local(cfg: &Http2Config) -> Local {
    Local {
        max_frame_size: cfg.max_frame_size,
        max_header_list_size: cfg.max_header_list_size,
        header_table_size: cfg.header_table_size,
        max_idle_frames: cfg.max_idle_frames,
        resets_remembered: cfg.reset_streams_remembered,
    }
}

impl<B: StreamSink, X> ServerConn<B, X> {
    /// A connection that waits for the client's preface; our SETTINGS (and the connection
    /// window beyond the default) go into `out` at once, as §3.4 allows.
    pub(crate) fn new(now: Instant, limits: &ServerLimits, out: &mut Vec<u8>) -> ServerConn<B, X> {
        let cfg = &limits.http2;
        let settings = [
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
            // Last, so that a server without it sends the SETTINGS it always did.
            (frame::SETTINGS_ENABLE_CONNECT_PROTOCOL, 1),
        ];
        let n = settings.len() - usize::from(!cfg.extended_connect);
        let window = cfg.initial_connection_window;
        ServerConn {
            core: Core::new(Side::Server, &local(cfg), &settings[..n], window, out),
            streams: Streams::default(),
            last_stream: 0,
            resets: WindowCount {
                since: now,
                count: 0,
            },
            last_frame: now,
            idle_since: now,
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
        limits: &ServerLimits,
        d: &mut D,
        out: &mut Vec<u8>,
    ) where
        D: Dispatch<Body = B, Exchange = X>,
    {
        let mut rx = frames::Rx {
            conn: self,
            clock,
            cfg: &limits.http2,
            d,
            out,
        };
        conn::receive(&mut rx, data);
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

    /// RST_STREAM on a stream the client opened (or one its frames named); the id is
    /// remembered so that what the client sent before seeing it is ignored. A reset on an
    /// idle stream (a malformed PRIORITY) is not: DATA on it stays a connection error.
    fn write_reset(&mut self, stream: u32, code: ErrorCode, out: &mut Vec<u8>) {
        if !self.is_idle(stream) {
            self.core.send.resets.record(stream);
        }
        frame::write_rst_stream(out, stream, code);
    }

    /// A stream left the map: its body fails (if still arriving) and what it held goes
    /// back to the connection's window.
    fn stream_gone(&mut self, st: StreamState<B>, why: BodyFailure) {
        self.core.credit += st.held;
        if let Some(body) = st.body {
            body.sink.fail(why);
        }
        if self.streams.is_empty() {
            self.idle_since = self.last_frame;
        }
    }

    /// A connection error: GOAWAY with the code, and nothing more is read.
    fn fail(&mut self, code: ErrorCode, reason: &'static str, out: &mut Vec<u8>) {
        if !self.core.goaway(self.last_stream, code, reason, out) {
            return;
        }
        for (_, s) in std::mem::take(&mut self.streams) {
            if let Some(body) = s.state.body {
                body.sink.fail(BodyFailure::Incomplete);
            }
        }
    }

    /// Graceful shutdown: GOAWAY with the last stream id; streams up to it finish, then
    /// the connection closes.
    pub(crate) fn drain(&mut self, out: &mut Vec<u8>) {
        if self.core.phase == Phase::Open {
            frame::write_goaway(out, self.last_stream, ErrorCode::NO_ERROR, b"");
            self.core.phase = Phase::Away;
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
        if !self.core.got_settings {
            self.core.stop();
        }
    }

    /// Whether the connection has failed (nothing more is read).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn is_failed(&self) -> bool {
        self.core.is_failed()
    }

    /// Streams in flight.
    #[cfg(any(test, feature = "fuzzing"))]
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
            let mut w = StreamWriter::new(id, &mut s.state, &mut self.core.send, clock, out);
            f(&mut s.exchange, &mut w);
            finished |= s.state.sending == Sending::Done;
        }
        if finished {
            self.forget_finished(out);
        }
    }
}
