//! HTTP/2: the frame codec, HPACK, and the server's connection machine
//! (`fuzz/fuzz_targets/h2_*.rs`, `hpack_decode.rs`, `tests/h2_fuzz_fallback.rs`).

use crate::proto::h2::frame::{self, ErrorCode};
use crate::proto::h2::hpack;
use crate::proto::h2::server as h2server;
use http::HeaderMap;

/// Length of a frame head.
pub const H2_HEAD_LEN: usize = frame::HEAD_LEN;
/// The client's connection preface.
pub const H2_PREFACE: &[u8; 24] = frame::PREFACE;
/// The largest SETTINGS_MAX_FRAME_SIZE (2^24 - 1).
pub const H2_MAX_MAX_FRAME_SIZE: u32 = frame::MAX_MAX_FRAME_SIZE;

/// A frame's 9-byte head (the reserved bit of the stream id dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct H2Head {
    pub len: u32,
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
}

pub fn h2_parse_head(b: &[u8; 9]) -> H2Head {
    let h = frame::parse_head(b);
    H2Head {
        len: h.len,
        kind: h.kind,
        flags: h.flags,
        stream: h.stream,
    }
}

/// A HEADERS or PRIORITY frame's priority fields (`weight` as on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct H2Priority {
    pub dependency: u32,
    pub exclusive: bool,
    pub weight: u8,
}

impl From<frame::Priority> for H2Priority {
    fn from(p: frame::Priority) -> H2Priority {
        H2Priority {
            dependency: p.dependency,
            exclusive: p.exclusive,
            weight: p.weight,
        }
    }
}

impl From<H2Priority> for frame::Priority {
    fn from(p: H2Priority) -> frame::Priority {
        frame::Priority {
            dependency: p.dependency,
            exclusive: p.exclusive,
            weight: p.weight,
        }
    }
}

/// One parsed frame, owned (error codes as their numbers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum H2Frame {
    Data {
        stream: u32,
        end_stream: bool,
        data: Vec<u8>,
        flow_len: u32,
    },
    Headers {
        stream: u32,
        end_stream: bool,
        end_headers: bool,
        priority: Option<H2Priority>,
        fragment: Vec<u8>,
    },
    Priority {
        stream: u32,
        priority: H2Priority,
    },
    RstStream {
        stream: u32,
        code: u32,
    },
    Settings {
        ack: bool,
        params: Vec<(u16, u32)>,
    },
    PushPromise {
        stream: u32,
        promised: u32,
        end_headers: bool,
        fragment: Vec<u8>,
    },
    Ping {
        ack: bool,
        data: [u8; 8],
    },
    GoAway {
        last_stream: u32,
        code: u32,
        debug: Vec<u8>,
    },
    WindowUpdate {
        stream: u32,
        increment: u32,
    },
    Continuation {
        stream: u32,
        end_headers: bool,
        fragment: Vec<u8>,
    },
    Unknown {
        kind: u8,
        stream: u32,
    },
}

impl From<frame::Frame<'_>> for H2Frame {
    fn from(f: frame::Frame<'_>) -> H2Frame {
        use frame::Frame as F;
        match f {
            F::Data {
                stream,
                end_stream,
                data,
                flow_len,
            } => H2Frame::Data {
                stream,
                end_stream,
                data: data.to_vec(),
                flow_len,
            },
            F::Headers {
                stream,
                end_stream,
                end_headers,
                priority,
                fragment,
            } => H2Frame::Headers {
                stream,
                end_stream,
                end_headers,
                priority: priority.map(H2Priority::from),
                fragment: fragment.to_vec(),
            },
            F::Priority { stream, priority } => H2Frame::Priority {
                stream,
                priority: priority.into(),
            },
            F::RstStream { stream, code } => H2Frame::RstStream {
                stream,
                code: code.0,
            },
            F::Settings { ack, params } => H2Frame::Settings {
                ack,
                params: params.collect(),
            },
            F::PushPromise {
                stream,
                promised,
                end_headers,
                fragment,
            } => H2Frame::PushPromise {
                stream,
                promised,
                end_headers,
                fragment: fragment.to_vec(),
            },
            F::Ping { ack, data } => H2Frame::Ping { ack, data },
            F::GoAway {
                last_stream,
                code,
                debug,
            } => H2Frame::GoAway {
                last_stream,
                code: code.0,
                debug: debug.to_vec(),
            },
            F::WindowUpdate { stream, increment } => H2Frame::WindowUpdate { stream, increment },
            F::Continuation {
                stream,
                end_headers,
                fragment,
            } => H2Frame::Continuation {
                stream,
                end_headers,
                fragment: fragment.to_vec(),
            },
            F::Unknown { kind, stream } => H2Frame::Unknown { kind, stream },
        }
    }
}

/// Why `parse` refused a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum H2FrameError {
    /// A connection error (GOAWAY with `code`).
    Connection { code: u32, reason: &'static str },
    /// A stream error: the frame (`consumed` bytes) is skipped, the stream reset.
    Stream {
        stream: u32,
        code: u32,
        reason: &'static str,
        consumed: usize,
    },
}

impl From<frame::FrameError> for H2FrameError {
    fn from(e: frame::FrameError) -> H2FrameError {
        match e {
            frame::FrameError::Connection { code, reason } => H2FrameError::Connection {
                code: code.0,
                reason,
            },
            frame::FrameError::Stream {
                stream,
                code,
                reason,
                consumed,
            } => H2FrameError::Stream {
                stream,
                code: code.0,
                reason,
                consumed,
            },
        }
    }
}

/// `frame::parse` on the front of `buf`: `Ok(None)` = incomplete.
pub fn h2_parse_frame(
    buf: &[u8],
    max_frame_size: u32,
) -> Result<Option<(H2Frame, usize)>, H2FrameError> {
    match frame::parse(buf, max_frame_size) {
        Ok(None) => Ok(None),
        Ok(Some((f, n))) => Ok(Some((f.into(), n))),
        Err(e) => Err(e.into()),
    }
}

/// The frames at the front of `bytes`, read the way the server reads them: each frame
/// or stream error in order, until the input is incomplete or a connection error
/// (the last item, if any). `consumed`: the bytes of the items before a connection
/// error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct H2Frames {
    pub items: Vec<Result<H2Frame, H2FrameError>>,
    pub consumed: usize,
}

pub fn h2_parse_frames(bytes: &[u8], max_frame_size: u32) -> H2Frames {
    let mut out = H2Frames {
        items: Vec::new(),
        consumed: 0,
    };
    while out.consumed < bytes.len() {
        match frame::parse(&bytes[out.consumed..], max_frame_size) {
            Ok(None) => break,
            Ok(Some((f, n))) => {
                out.items.push(Ok(f.into()));
                out.consumed += n;
            }
            Err(e @ frame::FrameError::Stream { consumed, .. }) => {
                out.items.push(Err(e.into()));
                out.consumed += consumed;
            }
            Err(e) => {
                out.items.push(Err(e.into()));
                break;
            }
        }
    }
    out
}

/// Writes `f` with the frame writers (`frame::write_*`). Returns false, writing
/// nothing, for what no writer makes: padded DATA (`flow_len != data.len()`), HEADERS
/// with priority or without END_HEADERS (see `h2_write_header_block`), unknown types.
pub fn h2_write_frame(f: &H2Frame, out: &mut Vec<u8>) -> bool {
    match f {
        H2Frame::Data {
            stream,
            end_stream,
            data,
            flow_len,
        } => {
            if *flow_len as usize != data.len() {
                return false;
            }
            frame::write_data(out, *stream, data, *end_stream);
        }
        H2Frame::Headers {
            stream,
            end_stream,
            end_headers: true,
            priority: None,
            fragment,
        } => h2_write_header_block(out, *stream, fragment, *end_stream, H2_MAX_MAX_FRAME_SIZE),
        H2Frame::Headers { .. } | H2Frame::Unknown { .. } => return false,
        H2Frame::Priority { stream, priority } => {
            frame::write_priority(out, *stream, (*priority).into())
        }
        H2Frame::RstStream { stream, code } => {
            frame::write_rst_stream(out, *stream, ErrorCode(*code))
        }
        H2Frame::Settings { ack: true, params } if params.is_empty() => {
            frame::write_settings_ack(out)
        }
        H2Frame::Settings { ack: true, .. } => return false,
        H2Frame::Settings { ack: false, params } => frame::write_settings(out, params),
        H2Frame::PushPromise {
            stream,
            promised,
            end_headers,
            fragment,
        } => frame::write_push_promise(out, *stream, *promised, fragment, *end_headers),
        H2Frame::Ping { ack, data } => frame::write_ping(out, *ack, *data),
        H2Frame::GoAway {
            last_stream,
            code,
            debug,
        } => frame::write_goaway(out, *last_stream, ErrorCode(*code), debug),
        H2Frame::WindowUpdate { stream, increment } => {
            frame::write_window_update(out, *stream, *increment)
        }
        H2Frame::Continuation {
            stream,
            end_headers,
            fragment,
        } => frame::write_continuation(out, *stream, fragment, *end_headers),
    }
    true
}

/// A header block as the server writes one (`begin_headers`, the block, then
/// `finish_headers`): one HEADERS, or HEADERS + CONTINUATION past `max_frame_size`.
pub fn h2_write_header_block(
    out: &mut Vec<u8>,
    stream: u32,
    block: &[u8],
    end_stream: bool,
    max_frame_size: u32,
) {
    let mark = frame::begin_headers(out);
    out.extend_from_slice(block);
    frame::finish_headers(out, mark, stream, end_stream, max_frame_size);
}

/// Validates and applies SETTINGS params to the RFC's initial values, as the server
/// does with a client's: the error's reason, if refused.
pub fn h2_apply_settings(params: &[(u16, u32)]) -> Result<(), &'static str> {
    let mut bytes = Vec::new();
    for (id, v) in params {
        bytes.extend_from_slice(&id.to_be_bytes());
        bytes.extend_from_slice(&v.to_be_bytes());
    }
    let mut s = frame::Settings::default();
    s.apply(frame::SettingsParams::new(&bytes))
        .map_err(|e| e.reason())
}

/// A decoded header list: (name, value) bytes in order.
pub type HpackFields = Vec<(Vec<u8>, Vec<u8>)>;

/// One peer's HPACK decoder (`hpack::Decoder`).
#[derive(Debug)]
pub struct HpackDecoder(hpack::Decoder);

impl HpackDecoder {
    /// `max_table_size`: the SETTINGS_HEADER_TABLE_SIZE in force (the starting size).
    pub fn new(max_table_size: usize) -> HpackDecoder {
        HpackDecoder(hpack::Decoder::new(max_table_size))
    }

    /// A new SETTINGS_HEADER_TABLE_SIZE, acknowledged by the peer.
    pub fn set_max_table_size(&mut self, n: usize) {
        self.0.set_max_table_size(n)
    }

    /// Decodes one complete block; the error is the `DecodeError`'s name
    /// (`"ListTooLarge"` past `max_list`, the only one that is not a connection error).
    pub fn decode(&mut self, block: &[u8], max_list: usize) -> Result<HpackFields, String> {
        let mut fields = Vec::new();
        self.0
            .decode(block, max_list, |n, v| {
                fields.push((n.to_vec(), v.to_vec()))
            })
            .map_err(|e| format!("{e:?}"))?;
        Ok(fields)
    }
}

/// One peer's HPACK encoder (`hpack::Encoder`).
#[derive(Debug)]
pub struct HpackEncoder(hpack::Encoder);

impl Default for HpackEncoder {
    fn default() -> HpackEncoder {
        HpackEncoder::new()
    }
}

impl HpackEncoder {
    pub fn new() -> HpackEncoder {
        HpackEncoder(hpack::Encoder::new())
    }

    /// The peer's SETTINGS_HEADER_TABLE_SIZE (signalled at the next block's start).
    pub fn set_max_table_size(&mut self, n: usize) {
        self.0.set_max_table_size(n)
    }

    /// Starts a block: the size updates owed.
    pub fn begin_block(&mut self, out: &mut Vec<u8>) {
        self.0.begin_block(out)
    }

    /// One field by the encoder's policy.
    pub fn encode_field(&mut self, name: &[u8], value: &[u8], sensitive: bool, out: &mut Vec<u8>) {
        self.0.encode_field(name, value, sensitive, out)
    }

    /// One literal field with a literal name: `indexing` 0 incremental, 1 without,
    /// 2 never; `huffman` 0 always, 1 never, 2 if shorter.
    pub fn encode_literal(
        &mut self,
        name: &[u8],
        value: &[u8],
        indexing: u8,
        huffman: u8,
        out: &mut Vec<u8>,
    ) {
        let indexing = match indexing % 3 {
            0 => hpack::Indexing::Incremental,
            1 => hpack::Indexing::Without,
            _ => hpack::Indexing::Never,
        };
        let huffman = match huffman % 3 {
            0 => hpack::Huffman::Always,
            1 => hpack::Huffman::Never,
            _ => hpack::Huffman::IfShorter,
        };
        self.0
            .encode_literal(name, None, value, indexing, huffman, out)
    }

    /// A whole block of fields by the policy (`begin_block` first).
    pub fn encode(&mut self, fields: &[(Vec<u8>, Vec<u8>)], out: &mut Vec<u8>) {
        self.0.begin_block(out);
        for (n, v) in fields {
            self.0.encode_field(n, v, false, out);
        }
    }
}

/// The server machine's settings for `H2Conn` (an `Http2Config`'s limits) and how its
/// built-in service behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct H2Config {
    pub max_concurrent_streams: u32,
    pub initial_stream_window: u32,
    pub initial_connection_window: u32,
    pub max_frame_size: u32,
    pub max_header_list_size: u32,
    pub header_table_size: u32,
    pub max_resets: u32,
    pub max_idle_frames: u32,
    /// Answer requests after every read (else only in `finish`, so that nothing the
    /// machine does depends on where the reads end).
    pub answer_each_round: bool,
    /// The service reads request bodies as they come (credit for WINDOW_UPDATEs).
    pub read_bodies: bool,
    /// Keep request bodies and every frame written (else only counts: for measuring
    /// the machine's own memory).
    pub record: bool,
}

impl Default for H2Config {
    fn default() -> H2Config {
        let c = crate::http::Http2Config::default();
        H2Config {
            max_concurrent_streams: c.max_concurrent_streams,
            initial_stream_window: c.initial_stream_window,
            initial_connection_window: c.initial_connection_window,
            max_frame_size: c.max_frame_size,
            max_header_list_size: c.max_header_list_size,
            header_table_size: c.header_table_size,
            max_resets: c.max_resets,
            max_idle_frames: c.max_idle_frames,
            answer_each_round: true,
            read_bodies: true,
            record: true,
        }
    }
}

/// A request the machine dispatched, and what became of its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct H2Request {
    pub stream: u32,
    pub method: String,
    pub path: String,
    pub content_length: Option<u64>,
    /// The request has a body (it did not end with its headers).
    pub has_body: bool,
    /// Body bytes (only their count when not recording: `body_len`).
    pub body: Vec<u8>,
    pub body_len: u64,
    /// `Some(true)`: finished (with `trailers` fields), `Some(false)`: failed.
    pub ended: Option<bool>,
    pub trailers: Option<usize>,
}

/// A frame the server wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct H2Written {
    pub kind: u8,
    pub stream: u32,
    pub flags: u8,
    pub len: u32,
    /// RST_STREAM's and GOAWAY's code; WINDOW_UPDATE's increment.
    pub code: Option<u32>,
    /// A response head's `:status`.
    pub status: Option<u16>,
}

/// What a connection did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct H2Summary {
    pub requests: Vec<H2Request>,
    pub frames: Vec<H2Written>,
    /// `end_round` said to close (at some point).
    pub closed: bool,
    /// The machine failed (a connection error).
    pub failed: bool,
    /// The most streams open at once (after each read).
    pub most_open: usize,
    /// What the server wrote that does not read back as frames (a bug), if anything.
    pub bad_output: Option<String>,
    /// Frames written (also when not recording).
    pub frame_count: usize,
}

#[derive(Default)]
struct H2BodyLog {
    data: Vec<u8>,
    len: u64,
    unread: usize,
    ended: Option<bool>,
    trailers: Option<usize>,
}

struct H2Sink {
    log: std::rc::Rc<std::cell::RefCell<H2BodyLog>>,
    record: bool,
    read: bool,
}

impl crate::proto::shared::BodySink for H2Sink {
    fn push(&mut self, data: &[u8]) {
        let mut l = self.log.borrow_mut();
        if self.record {
            l.data.extend_from_slice(data);
        }
        l.len += data.len() as u64;
        l.unread += data.len();
    }
    fn has_room(&self) -> bool {
        true
    }
    fn reader_gone(&self) -> bool {
        false
    }
    fn wanted(&self) -> bool {
        true
    }
    fn finish(self, trailers: Option<HeaderMap>) {
        let mut l = self.log.borrow_mut();
        l.ended = Some(true);
        l.trailers = trailers.map(|t| t.len());
    }
    fn fail(self, _why: crate::proto::shared::BodyFailure) {
        self.log.borrow_mut().ended = Some(false);
    }
}

impl h2server::StreamSink for H2Sink {
    fn take_consumed(&mut self) -> usize {
        if self.read {
            std::mem::take(&mut self.log.borrow_mut().unread)
        } else {
            0
        }
    }
}

/// One stream's exchange: its request's index, body log and the reply being sent.
struct H2Exchange {
    body: Option<std::rc::Rc<std::cell::RefCell<H2BodyLog>>>,
    reply: Vec<u8>,
    sent: usize,
    line: String,
}

struct H2Recorder {
    cfg: H2Config,
    requests: Vec<(
        H2Request,
        Option<std::rc::Rc<std::cell::RefCell<H2BodyLog>>>,
    )>,
    dispatched: usize,
}

impl h2server::Dispatch for H2Recorder {
    type Exchange = H2Exchange;
    type Body = H2Sink;
    fn dispatch(
        &mut self,
        stream: u32,
        head: h2server::RequestHead,
        body: Option<h2server::NewBody>,
    ) -> (H2Exchange, Option<H2Sink>) {
        self.dispatched += 1;
        let log = body.map(|_| std::rc::Rc::new(std::cell::RefCell::new(H2BodyLog::default())));
        let path = head
            .uri
            .path_and_query()
            .map_or_else(String::new, |p| p.as_str().to_owned());
        if self.cfg.record {
            self.requests.push((
                H2Request {
                    stream,
                    method: head.method.to_string(),
                    path,
                    content_length: head.content_length,
                    has_body: body.is_some(),
                    body: Vec::new(),
                    body_len: 0,
                    ended: None,
                    trailers: None,
                },
                log.clone(),
            ));
        }
        let line = if self.cfg.record {
            format!("{} {}", head.method, stream)
        } else {
            String::new()
        };
        let sink = log.as_ref().map(|l| H2Sink {
            log: l.clone(),
            record: self.cfg.record,
            read: self.cfg.read_bodies,
        });
        (
            H2Exchange {
                body: log,
                reply: Vec::new(),
                sent: 0,
                line,
            },
            sink,
        )
    }
}

fn h2_date() -> [u8; crate::proto::date::DATE_LEN] {
    *b"Sun, 06 Nov 1994 08:49:37 GMT"
}

/// The server's HTTP/2 connection machine, driven read by read without a socket: a
/// built-in service answers each request (once its body has ended) with 200 and a
/// short body (`METHOD stream body-length`), or resets it when its body failed; no
/// timeout expires (one instant for the whole run).
pub struct H2Conn {
    conn: h2server::ServerConn<H2Sink, H2Exchange>,
    cfg: crate::http::ServerConfig,
    h2cfg: H2Config,
    d: H2Recorder,
    out: Vec<u8>,
    now: std::time::Instant,
    /// The client's view of our header blocks (to read `:status`).
    client_dec: hpack::Decoder,
    block: Option<(u32, Vec<u8>)>,
    summary: H2Summary,
}

impl H2Conn {
    pub fn new(c: &H2Config) -> H2Conn {
        let mut cfg = crate::http::ServerConfig::default();
        let h = &mut cfg.http2;
        h.max_concurrent_streams = c.max_concurrent_streams;
        h.initial_stream_window = c.initial_stream_window;
        h.initial_connection_window = c.initial_connection_window;
        h.max_frame_size = c.max_frame_size;
        h.max_header_list_size = c.max_header_list_size;
        h.header_table_size = c.header_table_size;
        h.max_resets = c.max_resets;
        h.max_idle_frames = c.max_idle_frames;
        let now = std::time::Instant::now();
        let mut out = Vec::new();
        let conn = h2server::ServerConn::new(now, &cfg.h2_limits(), &mut out);
        let mut me = H2Conn {
            conn,
            cfg,
            h2cfg: *c,
            d: H2Recorder {
                cfg: *c,
                requests: Vec::new(),
                dispatched: 0,
            },
            out,
            now,
            client_dec: hpack::Decoder::new(frame::DEFAULT_HEADER_TABLE_SIZE as usize),
            block: None,
            summary: H2Summary::default(),
        };
        me.collect();
        me
    }

    fn clock(&self) -> crate::proto::shared::Clock {
        crate::proto::shared::Clock {
            now: self.now,
            date: h2_date,
        }
    }

    /// One read: the bytes go to the machine, then (if `answer_each_round`) the
    /// service answers, then the round ends.
    pub fn receive(&mut self, bytes: &[u8]) {
        let clock = self.clock();
        self.conn.receive(
            clock,
            bytes,
            &self.cfg.h2_limits(),
            &mut self.d,
            &mut self.out,
        );
        if self.h2cfg.answer_each_round {
            self.answer();
        }
        self.end_round();
    }

    /// After the last read: the service answers, and one more round ends.
    pub fn finish(&mut self) {
        self.answer();
        self.end_round();
    }

    /// Streams open in the machine now.
    pub fn open_streams(&self) -> usize {
        self.conn.streams()
    }

    /// Requests dispatched so far.
    pub fn dispatched(&self) -> usize {
        self.d.dispatched
    }

    pub fn is_failed(&self) -> bool {
        self.conn.is_failed()
    }

    fn answer(&mut self) {
        let clock = self.clock();
        self.conn.each_stream(clock, &mut self.out, |ex, w| {
            if w.awaits_head() {
                let (ready, failed, len) = match &ex.body {
                    None => (true, false, 0),
                    Some(b) => {
                        let b = b.borrow();
                        (b.ended.is_some(), b.ended == Some(false), b.len)
                    }
                };
                if !ready {
                    return;
                }
                if failed {
                    return w.reset(ErrorCode::CANCEL);
                }
                let mut parts = http::Response::new(()).into_parts().0;
                ex.reply = format!("{} {len}\n", ex.line).into_bytes();
                if !w.respond(&mut parts, Some(ex.reply.len() as u64)) {
                    return;
                }
            }
            let mut rest = &ex.reply[ex.sent..];
            w.send_data(&mut rest, true);
            ex.sent = ex.reply.len() - rest.len();
        });
    }

    fn end_round(&mut self) {
        let clock = self.clock();
        let actions = self
            .conn
            .end_round(clock, &self.cfg.h2_limits(), &mut self.out);
        self.summary.closed |= actions.close;
        self.summary.most_open = self.summary.most_open.max(self.conn.streams());
        self.collect();
    }

    /// Reads what the server wrote back as frames.
    fn collect(&mut self) {
        let out = std::mem::take(&mut self.out);
        let mut pos = 0;
        while pos < out.len() && self.summary.bad_output.is_none() {
            let (f, n) = match frame::parse(&out[pos..], frame::MAX_MAX_FRAME_SIZE) {
                Ok(Some(x)) => x,
                other => {
                    self.summary.bad_output = Some(format!("at {pos} of {}: {other:?}", out.len()));
                    break;
                }
            };
            pos += n;
            let head = frame::parse_head(out[pos - n..].first_chunk().expect("a frame"));
            let mut w = H2Written {
                kind: head.kind,
                stream: head.stream,
                flags: head.flags,
                len: head.len,
                code: None,
                status: None,
            };
            let mut block_done = None;
            match f {
                frame::Frame::RstStream { code, .. } | frame::Frame::GoAway { code, .. } => {
                    w.code = Some(code.0)
                }
                frame::Frame::WindowUpdate { increment, .. } => w.code = Some(increment),
                frame::Frame::Headers {
                    stream,
                    end_headers,
                    fragment,
                    ..
                } => {
                    if end_headers {
                        block_done = Some(fragment.to_vec());
                    } else {
                        self.block = Some((stream, fragment.to_vec()));
                    }
                }
                frame::Frame::Continuation {
                    end_headers,
                    fragment,
                    ..
                } => match self.block.as_mut() {
                    Some((_, b)) => {
                        b.extend_from_slice(fragment);
                        if end_headers {
                            block_done = self.block.take().map(|(_, b)| b);
                        }
                    }
                    None => self.summary.bad_output = Some("CONTINUATION without HEADERS".into()),
                },
                _ => {}
            }
            if let Some(block) = block_done {
                let mut status = None;
                let r = self.client_dec.decode(&block, usize::MAX, |n, v| {
                    if n == b":status" {
                        status = std::str::from_utf8(v).ok().and_then(|s| s.parse().ok());
                    }
                });
                if let Err(e) = r {
                    self.summary.bad_output = Some(format!("our header block: {e:?}"));
                }
                // The status on the frame that ended the block.
                w.status = status;
            }
            self.summary.frame_count += 1;
            if self.h2cfg.record {
                self.summary.frames.push(w);
            }
        }
        self.summary.failed = self.conn.is_failed();
    }

    /// What happened so far.
    pub fn summary(&self) -> H2Summary {
        let mut s = self.summary.clone();
        s.requests = self
            .d
            .requests
            .iter()
            .map(|(r, log)| {
                let mut r = r.clone();
                if let Some(l) = log {
                    let l = l.borrow();
                    r.body = l.data.clone();
                    r.body_len = l.len;
                    r.ended = l.ended;
                    r.trailers = l.trailers;
                }
                r
            })
            .collect();
        s
    }
}

/// `data` as successive reads of one connection through `H2Conn`, then `finish`.
pub fn h2_serve_pieces(pieces: &[&[u8]], cfg: &H2Config) -> H2Summary {
    let mut c = H2Conn::new(cfg);
    for p in pieces {
        c.receive(p);
    }
    c.finish();
    c.summary()
}
