//! The client side of an HTTP/2 connection as a sans-IO machine.
//!
//! [`ClientConn`] is the client's role on the shared connection core (`h2::conn`, which
//! reads the frames and keeps SETTINGS, windows, PING and GOAWAY): streams opened with odd
//! ids (no more at once than the server's SETTINGS_MAX_CONCURRENT_STREAMS), request heads
//! (HPACK), response heads, DATA and trailers per stream, and limits against a hostile
//! server. It owns no socket, task or clock: the driver
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

use super::conn::{self, Core, Local, Phase, Role, Side, StreamFlow, Streams};
use super::frame::{self, ErrorCode, MAX_WINDOW};
use super::hpack::DecodeError;
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use response::HeadBuilder;
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
enum Remote {
    /// Awaiting the final response head.
    Head,
    /// The body is arriving.
    Body { length: Option<u64>, received: u64 },
    /// END_STREAM came.
    Closed,
}

struct Stream {
    flow: StreamFlow,
    /// We may still send DATA (no END_STREAM yet).
    local_open: bool,
    remote: Remote,
    /// A HEAD request: its response carries no body whatever its content-length.
    head_only: bool,
}

/// One HTTP/2 client connection's protocol state.
pub(crate) struct ClientConn {
    cfg: ClientConfig,
    core: Core,
    /// When our SETTINGS went out (the server has `settings_timeout` to ACK them).
    settings_sent: Instant,
    /// When bytes last came from the server (keep-alive PINGs count from it).
    last_read: Instant,
    streams: Streams<Stream>,
    /// The id the next stream gets.
    next_id: u32,
}

/// The client's [`Role`] for one `receive`.
struct Rx<'a> {
    conn: &'a mut ClientConn,
    out: &'a mut Vec<u8>,
    ev: &'a mut Vec<Event>,
}

impl Role for Rx<'_> {
    fn parts(&mut self) -> (&mut Core, &mut Vec<u8>) {
        (&mut self.conn.core, self.out)
    }
    fn local(&self) -> Local {
        local(&self.conn.cfg)
    }
    fn fail(&mut self, code: ErrorCode, why: &'static str) {
        self.conn.fail(code, why, self.out, self.ev);
    }
    fn reset_stream(&mut self, stream: u32, code: ErrorCode, why: &'static str) {
        self.conn.reset_stream(stream, code, why, self.out, self.ev);
    }
    fn is_idle(&self, stream: u32) -> bool {
        stream % 2 == 0 || stream >= self.conn.next_id
    }
    fn flow(&mut self, stream: u32) -> Option<&mut StreamFlow> {
        self.conn.streams.get_mut(&stream).map(|s| &mut s.flow)
    }
    fn apply_settings(
        &mut self,
        params: frame::SettingsParams<'_>,
    ) -> Result<(), (ErrorCode, &'static str)> {
        let flows = self.conn.streams.values_mut().map(|s| &mut s.flow);
        self.conn.core.apply_settings(params, flows)
    }
    fn on_data(&mut self, stream: u32, end_stream: bool, data: &[u8]) {
        self.conn
            .on_data(stream, end_stream, data, self.out, self.ev);
    }
    fn on_closed_data(&mut self, _stream: u32) {}
    fn on_headers(&mut self, stream: u32) -> Option<bool> {
        if self.is_idle(stream) {
            let why = "HEADERS on a stream the client did not open";
            self.fail(ErrorCode::PROTOCOL_ERROR, why);
            return None;
        }
        let remote = self.conn.streams.get(&stream).map(|s| s.remote);
        Some(matches!(remote, Some(Remote::Body { .. })))
    }
    fn on_block(&mut self, stream: u32, end_stream: bool, trailers: bool, block: &[u8]) {
        self.conn
            .on_block(stream, end_stream, trailers, block, self.out, self.ev);
    }
    fn on_rst_stream(&mut self, stream: u32, code: ErrorCode) {
        if self.conn.streams.remove(&stream).is_none() {
            return;
        }
        let why = if code == ErrorCode::REFUSED_STREAM {
            Why::Refused
        } else {
            Why::Reset(code)
        };
        self.ev.push(Event::Reset { stream, why });
    }
    fn on_goaway(&mut self, last_stream: u32, code: ErrorCode) {
        self.conn.on_goaway(last_stream, code, self.ev);
    }
}

/// The client's own settings as the core enforces them (its frame size already clamped).
fn local(cfg: &ClientConfig) -> Local {
    Local {
        max_frame_size: cfg.max_frame_size,
        max_header_list_size: cfg.max_header_list_size,
        header_table_size: cfg.header_table_size,
        max_idle_frames: cfg.max_idle_frames,
        resets_remembered: 0,
    }
}

impl ClientConn {
    /// A connection whose preface, SETTINGS and connection window go into `out` at once
    /// (§3.4: the client need not wait for the server's SETTINGS), written at `now`.
    pub(crate) fn new(cfg: &ClientConfig, now: Instant, out: &mut Vec<u8>) -> ClientConn {
        let max_frame = cfg
            .max_frame_size
            .clamp(frame::DEFAULT_MAX_FRAME_SIZE, frame::MAX_MAX_FRAME_SIZE);
        let stream_window = cfg.initial_stream_window.min(MAX_WINDOW);
        let settings = [
            (frame::SETTINGS_HEADER_TABLE_SIZE, cfg.header_table_size),
            (frame::SETTINGS_ENABLE_PUSH, 0),
            (frame::SETTINGS_INITIAL_WINDOW_SIZE, stream_window),
            (frame::SETTINGS_MAX_FRAME_SIZE, max_frame),
            (
                frame::SETTINGS_MAX_HEADER_LIST_SIZE,
                cfg.max_header_list_size,
            ),
        ];
        let window = cfg.initial_connection_window;
        let mut cfg = cfg.clone();
        cfg.max_frame_size = max_frame;
        cfg.initial_stream_window = stream_window;
        let core = Core::new(Side::Client, &local(&cfg), &settings, window, out);
        ClientConn {
            cfg,
            core,
            settings_sent: now,
            last_read: now,
            streams: Streams::default(),
            next_id: 1,
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
        if !data.is_empty() && !self.core.is_failed() {
            // Anything at all shows the connection alive, even a part of a frame.
            self.last_read = now;
        }
        conn::receive(
            &mut Rx {
                conn: self,
                out,
                ev,
            },
            data,
        );
    }

    /// §6.8: streams above `last_stream` were never processed and are given back as
    /// refused (after the GoAway event, so the driver knows first); the rest finish. No
    /// new streams are opened.
    fn on_goaway(&mut self, last_stream: u32, code: ErrorCode, ev: &mut Vec<Event>) {
        if self.core.phase == Phase::Open {
            self.core.phase = Phase::Away;
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

    /// DATA within the windows: the body's length is checked, the bytes go to the driver.
    fn on_data(
        &mut self,
        stream: u32,
        end_stream: bool,
        data: &[u8],
        out: &mut Vec<u8>,
        ev: &mut Vec<Event>,
    ) {
        let Some(s) = self.streams.get_mut(&stream) else {
            return;
        };
        let bad = match &mut s.remote {
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
        };
        if let Some((code, why)) = bad {
            self.core.credit += data.len() as u64;
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

    /// A whole header block: decoded always (HPACK stays in sync), then a response head,
    /// an informational head (skipped) or trailers.
    fn on_block(
        &mut self,
        stream: u32,
        end_stream: bool,
        trailers: bool,
        block: &[u8],
        out: &mut Vec<u8>,
        ev: &mut Vec<Event>,
    ) {
        let remote = self.streams.get(&stream).map(|s| s.remote);
        let mut fields = if trailers {
            HeadBuilder::trailers()
        } else {
            HeadBuilder::default()
        };
        let limit = self.cfg.max_header_list_size as usize;
        let too_large = match self
            .core
            .decoder
            .decode(block, limit, |n, v| fields.field(n, v))
        {
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
                self.core.idle_frames = self.core.idle_frames.saturating_sub(16);
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
            s.flow.credit = 0;
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
        if self.core.goaway(0, code, why, out) {
            self.lose_all(kind(why), ev);
        }
    }

    /// Every stream ends with `why`; nothing more is read or sent.
    fn lose_all(&mut self, why: Why, ev: &mut Vec<Event>) {
        self.core.stop();
        let mut ids: Vec<u32> = self.streams.drain().map(|(id, _)| id).collect();
        ids.sort_unstable();
        ev.extend(ids.into_iter().map(|stream| Event::Reset {
            stream,
            why: why.clone(),
        }));
    }

    /// The server closed the connection (or reading failed): every stream is lost.
    pub(crate) fn peer_closed(&mut self, ev: &mut Vec<Event>) {
        if !self.core.is_failed() {
            self.lose_all(Why::Lost("the server closed the connection"), ev);
        }
    }

    /// Whether the connection has failed (nothing more is read or sent).
    pub(crate) fn is_failed(&self) -> bool {
        self.core.is_failed()
    }

    /// Whether new requests may come to this connection at all (no GOAWAY, no failure,
    /// stream ids left); `can_open` says whether one may start now.
    pub(crate) fn is_usable(&self) -> bool {
        self.core.phase == Phase::Open && self.next_id <= MAX_WINDOW
    }

    /// Streams in flight.
    #[cfg(test)]
    pub(crate) fn streams(&self) -> usize {
        self.streams.len()
    }
}
