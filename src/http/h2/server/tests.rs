//! The HTTP/2 server machine, driven without sockets: a client made of the frame codec and
//! an HPACK encoder, a recording dispatcher, a fake clock.

use super::*;
use crate::http::h1::date::DATE_LEN;
use crate::http::h2::frame::{Head, HEAD_LEN};
use http::HeaderMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn date() -> [u8; DATE_LEN] {
    *b"Sun, 06 Nov 1994 08:49:37 GMT"
}

/// What a request body's sink saw.
#[derive(Default, Debug)]
struct SinkLog {
    data: Vec<u8>,
    finished: Option<Option<HeaderMap>>,
    failed: Option<BodyFailure>,
    /// Bytes the test's "reader" has taken, not yet reported.
    consumed: usize,
    gone: bool,
}

struct TestSink(Arc<Mutex<SinkLog>>);

impl BodySink for TestSink {
    fn push(&mut self, data: &[u8]) {
        self.0.lock().unwrap().data.extend_from_slice(data);
    }
    fn has_room(&self) -> bool {
        true
    }
    fn reader_gone(&self) -> bool {
        self.0.lock().unwrap().gone
    }
    fn wanted(&self) -> bool {
        true
    }
    fn finish(self, trailers: Option<HeaderMap>) {
        self.0.lock().unwrap().finished = Some(trailers);
    }
    fn fail(self, why: BodyFailure) {
        self.0.lock().unwrap().failed = Some(why);
    }
}

impl StreamSink for TestSink {
    fn take_consumed(&mut self) -> usize {
        std::mem::take(&mut self.0.lock().unwrap().consumed)
    }
}

/// Records every dispatched request; the exchange is the stream id.
#[derive(Default)]
struct Recorder {
    requests: Vec<(u32, RequestHead, Option<NewBody>)>,
    sinks: Vec<(u32, Arc<Mutex<SinkLog>>)>,
}

impl Dispatch for Recorder {
    type Exchange = u32;
    type Body = TestSink;
    fn dispatch(
        &mut self,
        stream: u32,
        head: RequestHead,
        body: Option<NewBody>,
    ) -> (u32, Option<TestSink>) {
        self.requests.push((stream, head, body));
        let sink = body.map(|_| {
            let log = Arc::new(Mutex::new(SinkLog::default()));
            self.sinks.push((stream, log.clone()));
            TestSink(log)
        });
        (stream, sink)
    }
}

impl Recorder {
    fn sink(&self, stream: u32) -> Arc<Mutex<SinkLog>> {
        self.sinks
            .iter()
            .find(|(s, _)| *s == stream)
            .unwrap()
            .1
            .clone()
    }
}

/// A frame the server wrote, owned, with header blocks decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Got {
    Settings {
        ack: bool,
    },
    Headers {
        stream: u32,
        end_stream: bool,
        fields: Vec<(String, String)>,
    },
    Data {
        stream: u32,
        end_stream: bool,
        data: Vec<u8>,
    },
    Rst {
        stream: u32,
        code: ErrorCode,
    },
    GoAway {
        last: u32,
        code: ErrorCode,
    },
    WindowUpdate {
        stream: u32,
        increment: u32,
    },
    Ping {
        ack: bool,
        data: [u8; 8],
    },
}

/// The test: a server machine, a client's codec state, and the clock.
struct T {
    conn: ServerConn<TestSink, u32>,
    cfg: ServerConfig,
    d: Recorder,
    now: Instant,
    enc: Encoder,
    dec: Decoder,
    /// What the server wrote, not yet looked at.
    out: Vec<u8>,
}

fn clock(now: Instant) -> Clock {
    Clock { now, date }
}

impl T {
    fn new() -> T {
        T::with(ServerConfig::default())
    }

    fn with(cfg: ServerConfig) -> T {
        let now = Instant::now();
        let mut out = Vec::new();
        let conn = ServerConn::new(now, &cfg.http2, &mut out);
        T {
            conn,
            cfg,
            d: Recorder::default(),
            now,
            enc: Encoder::new(),
            dec: Decoder::new(4096),
            out,
        }
    }

    /// A connection past the preface and the SETTINGS exchange.
    fn open() -> T {
        T::open_with(ServerConfig::default())
    }

    fn open_with(cfg: ServerConfig) -> T {
        let mut t = T::with(cfg);
        let mut input = PREFACE.to_vec();
        frame::write_settings(&mut input, &[]);
        t.recv(&input);
        let got = t.take();
        assert!(got.contains(&Got::Settings { ack: false }), "{got:?}");
        assert!(got.contains(&Got::Settings { ack: true }), "{got:?}");
        t
    }

    fn recv(&mut self, bytes: &[u8]) {
        self.conn.receive(
            clock(self.now),
            bytes,
            &self.cfg.http2,
            &mut self.d,
            &mut self.out,
        );
    }

    fn end_round(&mut self) -> Actions {
        self.conn
            .end_round(clock(self.now), &self.cfg, &mut self.out)
    }

    /// The frames written since the last look.
    fn take(&mut self) -> Vec<Got> {
        let bytes = std::mem::take(&mut self.out);
        let mut got = Vec::new();
        let mut pos = 0;
        let mut block: Option<(u32, bool, Vec<u8>)> = None;
        while pos < bytes.len() {
            let (f, used) = frame::parse(&bytes[pos..], frame::MAX_MAX_FRAME_SIZE)
                .expect("the server writes valid frames")
                .expect("the server writes whole frames");
            pos += used;
            match f {
                Frame::Settings { ack, .. } => got.push(Got::Settings { ack }),
                Frame::Headers {
                    stream,
                    end_stream,
                    end_headers,
                    fragment,
                    ..
                } => {
                    block = Some((stream, end_stream, fragment.to_vec()));
                    if end_headers {
                        got.push(self.decode_block(block.take().unwrap()));
                    }
                }
                Frame::Continuation {
                    end_headers,
                    fragment,
                    ..
                } => {
                    block.as_mut().unwrap().2.extend_from_slice(fragment);
                    if end_headers {
                        got.push(self.decode_block(block.take().unwrap()));
                    }
                }
                Frame::Data {
                    stream,
                    end_stream,
                    data,
                    ..
                } => got.push(Got::Data {
                    stream,
                    end_stream,
                    data: data.to_vec(),
                }),
                Frame::RstStream { stream, code } => got.push(Got::Rst { stream, code }),
                Frame::GoAway {
                    last_stream, code, ..
                } => got.push(Got::GoAway {
                    last: last_stream,
                    code,
                }),
                Frame::WindowUpdate { stream, increment } => {
                    got.push(Got::WindowUpdate { stream, increment })
                }
                Frame::Ping { ack, data } => got.push(Got::Ping { ack, data }),
                other => panic!("the server wrote {other:?}"),
            }
        }
        got
    }

    fn decode_block(&mut self, (stream, end_stream, bytes): (u32, bool, Vec<u8>)) -> Got {
        let mut fields = Vec::new();
        self.dec
            .decode(&bytes, usize::MAX, |n, v| {
                fields.push((
                    String::from_utf8(n.to_vec()).unwrap(),
                    String::from_utf8(v.to_vec()).unwrap(),
                ))
            })
            .unwrap();
        Got::Headers {
            stream,
            end_stream,
            fields,
        }
    }

    /// A request's header block from the client's encoder.
    fn block(&mut self, fields: &[(&str, &str)]) -> Vec<u8> {
        let mut b = Vec::new();
        for (n, v) in fields {
            self.enc
                .encode_field(n.as_bytes(), v.as_bytes(), false, &mut b);
        }
        b
    }

    /// HEADERS (one frame) with these fields.
    fn headers(&mut self, stream: u32, fields: &[(&str, &str)], end_stream: bool) -> Vec<u8> {
        let block = self.block(fields);
        let mut out = Vec::new();
        let mark = frame::begin_headers(&mut out);
        out.extend_from_slice(&block);
        frame::finish_headers(
            &mut out,
            mark,
            stream,
            end_stream,
            frame::MAX_MAX_FRAME_SIZE,
        );
        out
    }

    fn get(&mut self, stream: u32) -> Vec<u8> {
        self.headers(stream, &GET, true)
    }

    /// Answers every stream whose head is due with `status` and `body` (whole).
    fn respond_all(&mut self, status: u16, body: &[u8]) {
        let status = StatusCode::from_u16(status).unwrap();
        self.conn
            .each_stream(clock(self.now), &mut self.out, |_, w| {
                if w.awaits_head() {
                    let mut parts = http::Response::new(()).into_parts().0;
                    parts.status = status;
                    if w.respond(&mut parts, Some(body.len() as u64)) {
                        let mut b = body;
                        assert!(w.send_data(&mut b, true));
                    }
                }
            });
    }
}

const GET: [(&str, &str); 4] = [
    (":method", "GET"),
    (":scheme", "http"),
    (":authority", "example.com"),
    (":path", "/hello?x=1"),
];

fn post(len: usize) -> Vec<(&'static str, String)> {
    vec![
        (":method", "POST".into()),
        (":scheme", "http".into()),
        (":authority", "example.com".into()),
        (":path", "/upload".into()),
        ("content-length", len.to_string()),
    ]
}

fn as_refs<'a>(v: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    v.iter().map(|(n, s)| (*n, s.as_str())).collect()
}

fn goaway(code: ErrorCode) -> impl Fn(&Got) -> bool {
    move |g| matches!(g, Got::GoAway { code: c, .. } if *c == code)
}

#[test]
fn a_get_is_dispatched_and_answered_with_headers_and_data() {
    let mut t = T::open();
    let get = t.get(1);
    t.recv(&get);
    assert_eq!(t.d.requests.len(), 1);
    let (stream, head, body) = &t.d.requests[0];
    assert_eq!(*stream, 1);
    assert_eq!(head.method, http::Method::GET);
    assert_eq!(head.uri, "http://example.com/hello?x=1");
    assert!(body.is_none());
    t.respond_all(200, b"hello");
    let got = t.take();
    assert_eq!(got.len(), 2, "{got:?}");
    let Got::Headers {
        stream: 1,
        end_stream: false,
        fields,
    } = &got[0]
    else {
        panic!("{got:?}")
    };
    assert_eq!(fields[0], (":status".into(), "200".into()));
    assert!(fields.contains(&("content-length".into(), "5".into())));
    assert!(fields.contains(&("date".into(), String::from_utf8(date().to_vec()).unwrap())));
    assert_eq!(
        got[1],
        Got::Data {
            stream: 1,
            end_stream: true,
            data: b"hello".to_vec()
        }
    );
    assert_eq!(t.conn.streams(), 0, "a finished stream is forgotten");
    assert!(!t.end_round().close);
    assert_eq!(
        t.conn.streams.capacity(),
        0,
        "an idle connection keeps no stream table"
    );
    assert_eq!(t.conn.kept.capacity(), 0, "nor any input");
}

#[test]
fn our_settings_go_out_before_the_preface_arrives() {
    let mut t = T::new();
    let got = t.take();
    assert_eq!(got[0], Got::Settings { ack: false });
    // The connection window is opened to the configured size at once.
    let extra = ServerConfig::default().http2.initial_connection_window - 65_535;
    assert_eq!(
        got[1],
        Got::WindowUpdate {
            stream: 0,
            increment: extra
        }
    );
}

#[test]
fn a_preface_split_anywhere_is_accepted() {
    for cut in 1..PREFACE.len() {
        let mut t = T::new();
        t.take();
        t.recv(&PREFACE[..cut]);
        let mut rest = PREFACE[cut..].to_vec();
        frame::write_settings(&mut rest, &[]);
        t.recv(&rest);
        assert_eq!(t.take(), vec![Got::Settings { ack: true }], "cut at {cut}");
    }
}

#[test]
fn not_the_preface_is_a_protocol_error() {
    let mut t = T::new();
    t.take();
    t.recv(b"GET / HTTP/1.1\r\n\r\n");
    assert!(t.take().iter().any(goaway(ErrorCode::PROTOCOL_ERROR)));
    assert!(t.end_round().close);
}

#[test]
fn the_first_frame_must_be_settings() {
    let mut t = T::new();
    t.take();
    let mut input = PREFACE.to_vec();
    frame::write_ping(&mut input, false, [0; 8]);
    t.recv(&input);
    assert!(t.take().iter().any(goaway(ErrorCode::PROTOCOL_ERROR)));
}

#[test]
fn requests_split_at_every_byte_are_the_same() {
    let mut whole = T::open();
    let mut input = whole.get(1);
    input.extend(whole.get(3));
    whole.recv(&input);
    let expected: Vec<_> = whole
        .d
        .requests
        .iter()
        .map(|r| (r.0, r.1.uri.clone()))
        .collect();
    assert_eq!(expected.len(), 2);
    for cut in 1..input.len() {
        let mut t = T::open();
        t.recv(&input[..cut]);
        t.recv(&input[cut..]);
        let got: Vec<_> =
            t.d.requests
                .iter()
                .map(|r| (r.0, r.1.uri.clone()))
                .collect();
        assert_eq!(got, expected, "cut at {cut}");
    }
}

#[test]
fn ping_is_answered() {
    let mut t = T::open();
    let mut p = Vec::new();
    frame::write_ping(&mut p, false, *b"12345678");
    t.recv(&p);
    assert_eq!(
        t.take(),
        vec![Got::Ping {
            ack: true,
            data: *b"12345678"
        }]
    );
}

#[test]
fn a_request_body_reaches_the_sink_and_reopens_the_window_as_it_is_read() {
    let mut t = T::open();
    let fields = post(56_000);
    let h = t.headers(1, &as_refs(&fields), false);
    t.recv(&h);
    assert_eq!(
        t.d.requests[0].2,
        Some(NewBody {
            length: Some(56_000)
        })
    );
    let mut data = Vec::new();
    for b in [7, 8, 9] {
        frame::write_data(&mut data, 1, &[b; 16_000], false);
    }
    t.recv(&data);
    let sink = t.d.sink(1);
    assert_eq!(sink.lock().unwrap().data.len(), 48_000);
    // Nothing read yet: no WINDOW_UPDATE.
    t.end_round();
    assert_eq!(t.take(), vec![]);
    // Less than half the window read: still none (updates are batched).
    sink.lock().unwrap().consumed = 32_000;
    t.end_round();
    assert_eq!(t.take(), vec![]);
    // Past half: the stream's window reopens by all that was read, and no more than was
    // delivered.
    sink.lock().unwrap().consumed = 100_000;
    t.end_round();
    assert_eq!(
        t.take(),
        vec![Got::WindowUpdate {
            stream: 1,
            increment: 48_000
        }]
    );
    let mut last = Vec::new();
    frame::write_data(&mut last, 1, &[9; 8_000], true);
    t.recv(&last);
    let log = sink.lock().unwrap();
    assert_eq!(log.data.len(), 56_000);
    assert!(matches!(log.finished, Some(None)));
}

#[test]
fn the_connection_window_reopens_once_half_of_it_is_read() {
    let mut cfg = ServerConfig::default();
    cfg.http2.initial_connection_window = 100_000;
    cfg.http2.initial_stream_window = 60_000;
    let mut t = T::open_with(cfg);
    let mut input = Vec::new();
    for id in [1, 3] {
        let fields = post(100_000);
        input.extend(t.headers(id, &as_refs(&fields), false));
        frame::write_data(&mut input, id, &[1; 16_000], false);
        frame::write_data(&mut input, id, &[1; 16_000], false);
    }
    t.recv(&input);
    t.take();
    for id in [1, 3] {
        t.d.sink(id).lock().unwrap().consumed = 32_000;
    }
    t.end_round();
    let got = t.take();
    assert!(
        got.contains(&Got::WindowUpdate {
            stream: 1,
            increment: 32_000
        }),
        "{got:?}"
    );
    assert!(
        got.contains(&Got::WindowUpdate {
            stream: 3,
            increment: 32_000
        }),
        "{got:?}"
    );
    assert!(
        got.contains(&Got::WindowUpdate {
            stream: 0,
            increment: 64_000
        }),
        "{got:?}"
    );
    // Beyond the connection window (100,000, 64,000 given back): a connection error.
    let mut flood = Vec::new();
    for _ in 0..7 {
        frame::write_data(&mut flood, 1, &[1; 16_000], false);
        frame::write_data(&mut flood, 3, &[1; 16_000], false);
    }
    t.recv(&flood);
    assert!(t.take().iter().any(goaway(ErrorCode::FLOW_CONTROL_ERROR)));
}

#[test]
fn data_beyond_the_stream_window_resets_the_stream() {
    let mut cfg = ServerConfig::default();
    cfg.http2.initial_stream_window = 100;
    let mut t = T::open_with(cfg);
    let fields = post(1_000);
    let h = t.headers(1, &as_refs(&fields), false);
    t.recv(&h);
    let mut data = Vec::new();
    frame::write_data(&mut data, 1, &[1; 100], false);
    t.recv(&data);
    assert_eq!(t.take(), vec![], "exactly the window is fine");
    let mut more = Vec::new();
    frame::write_data(&mut more, 1, &[1; 1], false);
    t.recv(&more);
    assert_eq!(
        t.take(),
        vec![Got::Rst {
            stream: 1,
            code: ErrorCode::FLOW_CONTROL_ERROR
        }]
    );
    assert_eq!(
        t.d.sink(1).lock().unwrap().failed,
        Some(BodyFailure::Incomplete)
    );
}

#[test]
fn a_body_longer_or_shorter_than_content_length_is_malformed() {
    for (sent, end) in [(11, false), (9, true)] {
        let mut t = T::open();
        let fields = post(10);
        let h = t.headers(1, &as_refs(&fields), false);
        t.recv(&h);
        let mut data = Vec::new();
        frame::write_data(&mut data, 1, &vec![1; sent], end);
        t.recv(&data);
        assert_eq!(
            t.take(),
            vec![Got::Rst {
                stream: 1,
                code: ErrorCode::PROTOCOL_ERROR
            }],
            "{sent} bytes"
        );
    }
}

#[test]
fn request_trailers_end_the_body() {
    let mut t = T::open();
    let mut fields = post(3);
    fields.pop();
    let h = t.headers(1, &as_refs(&fields), false);
    t.recv(&h);
    let mut data = Vec::new();
    frame::write_data(&mut data, 1, b"abc", false);
    t.recv(&data);
    let tr = t.headers(1, &[("grpc-status", "0")], true);
    t.recv(&tr);
    let log = t.d.sink(1);
    let log = log.lock().unwrap();
    let trailers = log.finished.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(trailers["grpc-status"], "0");
}

#[test]
fn trailers_without_end_stream_reset_the_stream() {
    let mut t = T::open();
    let mut fields = post(3);
    fields.pop();
    let h = t.headers(1, &as_refs(&fields), false);
    t.recv(&h);
    let tr = t.headers(1, &[("x", "y")], false);
    t.recv(&tr);
    assert_eq!(
        t.take(),
        vec![Got::Rst {
            stream: 1,
            code: ErrorCode::PROTOCOL_ERROR
        }]
    );
}

#[test]
fn malformed_requests_are_reset_with_protocol_error() {
    let cases: [&[(&str, &str)]; 9] = [
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            ("Upper", "x"),
        ],
        &[(":method", "GET"), (":scheme", "http")],
        &[(":method", "GET"), (":path", "/")],
        &[(":scheme", "http"), (":path", "/")],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            ("connection", "close"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            ("te", "gzip"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            ("x", "y"),
            (":path", "/"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":status", "200"),
        ],
        &[
            (":method", "GET"),
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
        ],
    ];
    for fields in cases {
        let mut t = T::open();
        let h = t.headers(1, fields, true);
        t.recv(&h);
        assert_eq!(
            t.take(),
            vec![Got::Rst {
                stream: 1,
                code: ErrorCode::PROTOCOL_ERROR
            }],
            "{fields:?}"
        );
        assert!(t.d.requests.is_empty());
        // The connection goes on: HPACK stayed in sync.
        let get = t.get(3);
        t.recv(&get);
        assert_eq!(t.d.requests.len(), 1, "{fields:?}");
    }
}

#[test]
fn te_trailers_is_allowed() {
    let mut t = T::open();
    let mut fields = GET.to_vec();
    fields.push(("te", "trailers"));
    let h = t.headers(1, &fields, true);
    t.recv(&h);
    assert_eq!(t.d.requests.len(), 1);
}

#[test]
fn a_header_list_over_the_limit_gets_431_and_the_connection_goes_on() {
    let mut cfg = ServerConfig::default();
    cfg.http2.max_header_list_size = 200;
    let mut t = T::open_with(cfg);
    let big = "v".repeat(100);
    let mut fields = GET.to_vec();
    fields.push(("x-big", &big));
    let h = t.headers(1, &fields, true);
    t.recv(&h);
    let got = t.take();
    let Got::Headers {
        stream: 1,
        end_stream: true,
        fields,
    } = &got[0]
    else {
        panic!("{got:?}")
    };
    assert_eq!(fields[0], (":status".into(), "431".into()));
    assert!(t.d.requests.is_empty());
    let get = t.get(3);
    t.recv(&get);
    assert_eq!(t.d.requests.len(), 1);
}

#[test]
fn continuation_joins_a_header_block() {
    let mut t = T::open();
    let block = t.block(&GET);
    let (a, b) = block.split_at(block.len() / 2);
    let mut input = Vec::new();
    frame::write_headers(&mut input, 1, a, true, false, None, None);
    frame::write_continuation(&mut input, 1, b, true);
    t.recv(&input);
    assert_eq!(t.d.requests.len(), 1);
    assert_eq!(t.d.requests[0].1.uri, "http://example.com/hello?x=1");
}

#[test]
fn a_frame_inside_a_header_block_is_a_protocol_error() {
    let mut t = T::open();
    let block = t.block(&GET);
    let mut input = Vec::new();
    frame::write_headers(&mut input, 1, &block, true, false, None, None);
    frame::write_ping(&mut input, false, [0; 8]);
    t.recv(&input);
    assert!(t.take().iter().any(goaway(ErrorCode::PROTOCOL_ERROR)));
    assert!(t.end_round().close);
}

#[test]
fn a_continuation_flood_is_cut_off_at_max_header_list_size() {
    let mut cfg = ServerConfig::default();
    cfg.http2.max_header_list_size = 1_000;
    let mut t = T::open_with(cfg);
    let mut input = Vec::new();
    frame::write_headers(&mut input, 1, &[0x82], false, false, None, None);
    // 999 bytes in all: still within the bound.
    for _ in 0..9 {
        frame::write_continuation(&mut input, 1, &[0x82; 111], false);
    }
    t.recv(&input);
    assert!(!t.take().iter().any(goaway(ErrorCode::ENHANCE_YOUR_CALM)));
    let mut one_more = Vec::new();
    frame::write_continuation(&mut one_more, 1, &[0x82; 2], false);
    t.recv(&one_more);
    assert!(t.take().iter().any(goaway(ErrorCode::ENHANCE_YOUR_CALM)));
}

#[test]
fn headers_on_an_even_or_closed_stream_end_the_connection() {
    let mut t = T::open();
    let h = t.get(2);
    t.recv(&h);
    assert!(t.take().iter().any(goaway(ErrorCode::PROTOCOL_ERROR)));

    // A stream that ended: STREAM_CLOSED (§5.1); an id below the last that was never used:
    // PROTOCOL_ERROR (§5.1.1).
    for (again, code) in [
        (5, ErrorCode::STREAM_CLOSED),
        (3, ErrorCode::PROTOCOL_ERROR),
    ] {
        let mut t = T::open();
        let h = t.get(5);
        t.recv(&h);
        t.respond_all(200, b"");
        t.take();
        let h = t.get(again);
        t.recv(&h);
        assert!(t.take().iter().any(goaway(code)), "stream {again}");
    }
}

#[test]
fn the_clients_goaway_keeps_the_connection_until_its_eof() {
    let mut t = T::open();
    let mut input = Vec::new();
    frame::write_goaway(&mut input, 0, ErrorCode::NO_ERROR, b"");
    t.recv(&input);
    assert!(!t.end_round().close);
    let mut ping = Vec::new();
    frame::write_ping(&mut ping, false, [3; 8]);
    t.recv(&ping);
    assert_eq!(
        t.take(),
        vec![Got::Ping {
            ack: true,
            data: [3; 8]
        }]
    );
    // No new streams after it.
    let h = t.get(1);
    t.recv(&h);
    assert!(t.d.requests.is_empty());
    t.conn.peer_closed();
    assert!(t.end_round().close);
}

#[test]
fn streams_over_max_concurrent_are_refused() {
    let mut cfg = ServerConfig::default();
    cfg.http2.max_concurrent_streams = 3;
    let mut t = T::open_with(cfg);
    let mut input = Vec::new();
    for id in [1, 3, 5, 7] {
        input.extend(t.get(id));
    }
    t.recv(&input);
    assert_eq!(t.d.requests.len(), 3);
    assert_eq!(
        t.take(),
        vec![Got::Rst {
            stream: 7,
            code: ErrorCode::REFUSED_STREAM
        }]
    );
    // Once one finishes, a new one is taken.
    t.respond_all(204, b"");
    t.take();
    let h = t.get(9);
    t.recv(&h);
    assert_eq!(t.d.requests.len(), 4);
}

#[test]
fn rapid_resets_end_the_connection_past_max_resets() {
    let mut cfg = ServerConfig::default();
    cfg.http2.max_resets = 10;
    let mut t = T::open_with(cfg);
    let mut input = Vec::new();
    for i in 0..10u32 {
        let id = 2 * i + 1;
        input.extend(t.get(id));
        frame::write_rst_stream(&mut input, id, ErrorCode::CANCEL);
    }
    t.recv(&input);
    assert_eq!(t.conn.streams(), 0, "reset streams are dropped at once");
    assert!(!t.take().iter().any(goaway(ErrorCode::ENHANCE_YOUR_CALM)));
    let mut one_more = t.get(21);
    frame::write_rst_stream(&mut one_more, 21, ErrorCode::CANCEL);
    t.recv(&one_more);
    assert!(t.take().iter().any(goaway(ErrorCode::ENHANCE_YOUR_CALM)));
}

#[test]
fn resets_spread_over_time_are_fine() {
    let mut cfg = ServerConfig::default();
    cfg.http2.max_resets = 10;
    cfg.http2.reset_window = Duration::from_secs(1);
    let mut t = T::open_with(cfg);
    for i in 0..30u32 {
        let id = 2 * i + 1;
        let mut input = t.get(id);
        frame::write_rst_stream(&mut input, id, ErrorCode::CANCEL);
        t.recv(&input);
        t.now += Duration::from_millis(200);
    }
    assert!(!t.take().iter().any(goaway(ErrorCode::ENHANCE_YOUR_CALM)));
}

#[test]
fn a_ping_flood_is_cut_off_at_max_idle_frames() {
    let mut cfg = ServerConfig::default();
    cfg.http2.max_idle_frames = 50;
    let mut t = T::open_with(cfg);
    let mut input = Vec::new();
    // The client's first SETTINGS counted as one already.
    for _ in 0..49 {
        frame::write_ping(&mut input, false, [1; 8]);
    }
    t.recv(&input);
    assert!(!t.take().iter().any(goaway(ErrorCode::ENHANCE_YOUR_CALM)));
    let mut one_more = Vec::new();
    frame::write_ping(&mut one_more, false, [1; 8]);
    t.recv(&one_more);
    assert!(t.take().iter().any(goaway(ErrorCode::ENHANCE_YOUR_CALM)));
}

#[test]
fn a_response_waits_for_the_clients_window() {
    let mut t = T::open();
    let mut s = Vec::new();
    frame::write_settings(&mut s, &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 10)]);
    t.recv(&s);
    assert_eq!(t.take(), vec![Got::Settings { ack: true }]);
    let get = t.get(1);
    t.recv(&get);
    let mut rest: &[u8] = b"0123456789abcdefghijklmno";
    t.conn.each_stream(clock(t.now), &mut t.out, |_, w| {
        let mut parts = http::Response::new(()).into_parts().0;
        assert!(w.respond(&mut parts, None));
        assert!(!w.send_data(&mut rest, true), "only 10 bytes fit");
        assert_eq!(w.window(), 0);
    });
    let got = t.take();
    assert_eq!(
        got[1],
        Got::Data {
            stream: 1,
            end_stream: false,
            data: b"0123456789".to_vec()
        }
    );
    let mut wu = Vec::new();
    frame::write_window_update(&mut wu, 1, 100);
    t.recv(&wu);
    t.conn.each_stream(clock(t.now), &mut t.out, |_, w| {
        assert!(w.send_data(&mut rest, true));
    });
    assert_eq!(
        t.take(),
        vec![Got::Data {
            stream: 1,
            end_stream: true,
            data: b"abcdefghijklmno".to_vec()
        }]
    );
    assert_eq!(t.conn.streams(), 0);
}

#[test]
fn a_window_past_2_31_is_a_flow_control_error() {
    let mut t = T::open();
    let mut wu = Vec::new();
    frame::write_window_update(&mut wu, 0, MAX_WINDOW);
    t.recv(&wu);
    assert!(t.take().iter().any(goaway(ErrorCode::FLOW_CONTROL_ERROR)));

    let mut t = T::open();
    let get = t.get(1);
    t.recv(&get);
    let mut wu = Vec::new();
    frame::write_window_update(&mut wu, 1, MAX_WINDOW);
    t.recv(&wu);
    assert_eq!(
        t.take(),
        vec![Got::Rst {
            stream: 1,
            code: ErrorCode::FLOW_CONTROL_ERROR
        }]
    );
}

#[test]
fn frames_on_idle_streams_are_protocol_errors() {
    for which in 0..3 {
        let mut t = T::open();
        let mut input = Vec::new();
        match which {
            0 => frame::write_data(&mut input, 1, b"x", false),
            1 => frame::write_rst_stream(&mut input, 1, ErrorCode::CANCEL),
            _ => frame::write_window_update(&mut input, 1, 1),
        }
        t.recv(&input);
        assert!(
            t.take().iter().any(goaway(ErrorCode::PROTOCOL_ERROR)),
            "case {which}"
        );
    }
}

#[test]
fn drain_finishes_the_streams_in_flight_then_closes() {
    let mut t = T::open();
    let get = t.get(1);
    t.recv(&get);
    t.conn.drain(&mut t.out);
    assert_eq!(
        t.take(),
        vec![Got::GoAway {
            last: 1,
            code: ErrorCode::NO_ERROR
        }]
    );
    // A stream opened after the GOAWAY is not processed.
    let late = t.get(3);
    t.recv(&late);
    assert_eq!(t.d.requests.len(), 1);
    assert!(!t.end_round().close, "stream 1 is still answering");
    t.respond_all(200, b"ok");
    assert!(t.end_round().close);
}

#[test]
fn an_idle_connection_closes_after_idle_timeout() {
    let mut t = T::open();
    let a = t.end_round();
    assert!(!a.close);
    let limit = t.cfg.idle_timeout.unwrap();
    assert_eq!(a.deadline, Some(t.now + limit));
    t.now += limit;
    assert!(t.end_round().close);
    assert!(t.take().iter().any(goaway(ErrorCode::NO_ERROR)));
}

#[test]
fn a_missing_preface_times_out() {
    let mut t = T::new();
    let a = t.end_round();
    let limit = t.cfg.header_read_timeout.unwrap();
    assert_eq!(a.deadline, Some(t.now + limit));
    t.now += limit;
    assert!(t.end_round().close);
}

#[test]
fn keep_alive_pings_close_a_silent_peer() {
    let mut cfg = ServerConfig::default();
    cfg.http2.keep_alive_interval = Some(Duration::from_secs(5));
    cfg.http2.keep_alive_timeout = Duration::from_secs(2);
    cfg.idle_timeout = None;
    let mut t = T::open_with(cfg);
    t.now += Duration::from_secs(5);
    let a = t.end_round();
    assert!(!a.close);
    assert_eq!(
        t.take(),
        vec![Got::Ping {
            ack: false,
            data: KEEP_ALIVE_PING
        }]
    );
    t.now += Duration::from_secs(2);
    assert!(t.end_round().close);
}

#[test]
fn a_settings_window_change_moves_open_streams_windows() {
    let mut t = T::open();
    let get = t.get(1);
    t.recv(&get);
    let mut s = Vec::new();
    frame::write_settings(&mut s, &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 0)]);
    t.recv(&s);
    t.take();
    t.conn.each_stream(clock(t.now), &mut t.out, |_, w| {
        let mut parts = http::Response::new(()).into_parts().0;
        assert!(w.respond(&mut parts, None));
        assert_eq!(w.window(), 0);
    });
    let mut s = Vec::new();
    frame::write_settings(&mut s, &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, MAX_WINDOW)]);
    frame::write_window_update(&mut s, 1, 1);
    t.recv(&s);
    assert!(t.take().contains(&Got::Rst {
        stream: 1,
        code: ErrorCode::FLOW_CONTROL_ERROR
    }));
}

#[test]
fn the_clients_table_size_setting_reaches_the_encoder() {
    let mut t = T::open();
    let mut s = Vec::new();
    frame::write_settings(&mut s, &[(frame::SETTINGS_HEADER_TABLE_SIZE, 0)]);
    t.recv(&s);
    t.take();
    t.dec.set_max_table_size(0);
    let get = t.get(1);
    t.recv(&get);
    t.respond_all(200, b"x");
    // Decodes with a zero-size table: the server emitted the size update first.
    let got = t.take();
    assert!(matches!(got[0], Got::Headers { stream: 1, .. }), "{got:?}");
}

#[test]
fn an_eof_fails_bodies_and_closes_after_the_responses() {
    let mut t = T::open();
    let fields = post(10);
    let h = t.headers(1, &as_refs(&fields), false);
    t.recv(&h);
    t.conn.peer_closed();
    assert_eq!(
        t.d.sink(1).lock().unwrap().failed,
        Some(BodyFailure::Incomplete)
    );
    assert!(!t.end_round().close);
    t.respond_all(200, b"");
    assert!(t.end_round().close);
}

#[test]
fn a_frame_head_over_max_frame_size_fails_before_its_payload() {
    let mut t = T::open();
    let mut head = [0u8; HEAD_LEN];
    let len = t.cfg.http2.max_frame_size + 1;
    head[..3].copy_from_slice(&len.to_be_bytes()[1..]);
    head[3] = 0; // DATA
    head[8] = 1;
    let _ = Head {
        len,
        kind: 0,
        flags: 0,
        stream: 1,
    };
    t.recv(&head);
    assert!(t.take().iter().any(goaway(ErrorCode::FRAME_SIZE_ERROR)));
}

#[test]
fn an_upgraded_request_is_stream_1_and_the_preface_follows() {
    let mut t = T::new();
    t.take();
    let mut settings = Vec::new();
    // The client's SETTINGS payload from HTTP2-Settings: a small initial window.
    settings.extend_from_slice(&frame::SETTINGS_INITIAL_WINDOW_SIZE.to_be_bytes());
    settings.extend_from_slice(&3u32.to_be_bytes());
    let head = RequestHead {
        method: http::Method::GET,
        uri: "/up".parse().unwrap(),
        headers: HeaderMap::new(),
        content_length: None,
    };
    t.conn.accept_upgrade(&settings, head, &mut t.d, &mut t.out);
    assert_eq!(t.d.requests.len(), 1);
    assert_eq!(t.d.requests[0].0, 1);
    let mut input = PREFACE.to_vec();
    frame::write_settings(&mut input, &[]);
    t.recv(&input);
    assert_eq!(t.take(), vec![Got::Settings { ack: true }]);
    // The window from HTTP2-Settings applies to stream 1.
    let mut rest: &[u8] = b"hello";
    t.conn.each_stream(clock(t.now), &mut t.out, |_, w| {
        let mut parts = http::Response::new(()).into_parts().0;
        assert!(w.respond(&mut parts, None));
        assert!(!w.send_data(&mut rest, true));
    });
    let got = t.take();
    assert_eq!(
        got[1],
        Got::Data {
            stream: 1,
            end_stream: false,
            data: b"hel".to_vec()
        }
    );
    // Stream 1 is half-closed (remote): more HEADERS on it are a stream error.
    let h = t.get(1);
    t.recv(&h);
    assert_eq!(
        t.take(),
        vec![Got::Rst {
            stream: 1,
            code: ErrorCode::STREAM_CLOSED
        }]
    );
    assert_eq!(t.d.requests.len(), 1);
}

#[test]
fn bad_http2_settings_in_an_upgrade_fail_the_connection() {
    let mut t = T::new();
    t.take();
    let head = RequestHead {
        method: http::Method::GET,
        uri: "/".parse().unwrap(),
        headers: HeaderMap::new(),
        content_length: None,
    };
    t.conn
        .accept_upgrade(&[0, 4, 0xff, 0xff, 0xff, 0xff], head, &mut t.d, &mut t.out);
    assert!(t.take().iter().any(goaway(ErrorCode::FLOW_CONTROL_ERROR)));
    assert!(t.d.requests.is_empty());
}

#[test]
fn a_response_stalled_on_a_closed_window_is_reset_after_window_stall_timeout() {
    let mut t = T::open();
    let mut s = Vec::new();
    frame::write_settings(&mut s, &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 0)]);
    t.recv(&s);
    let get = t.get(1);
    t.recv(&get);
    t.conn.each_stream(clock(t.now), &mut t.out, |_, w| {
        let mut parts = http::Response::new(()).into_parts().0;
        assert!(w.respond(&mut parts, None));
        assert!(!w.send_data(&mut &b"held"[..], true));
    });
    t.take();
    let limit = t.cfg.http2.window_stall_timeout.unwrap();
    let a = t.end_round();
    assert_eq!(a.deadline, Some(t.now + limit));
    t.now += limit - Duration::from_millis(1);
    t.end_round();
    assert_eq!(t.conn.streams(), 1, "not yet");
    t.now += Duration::from_millis(1);
    t.end_round();
    assert_eq!(
        t.take(),
        vec![Got::Rst {
            stream: 1,
            code: ErrorCode::CANCEL
        }]
    );
    assert_eq!(t.conn.streams(), 0);
}

#[test]
fn a_stalled_request_body_fails_after_body_read_timeout() {
    let mut t = T::open();
    let fields = post(100);
    let h = t.headers(1, &as_refs(&fields), false);
    t.recv(&h);
    let limit = t.cfg.body_read_timeout.unwrap();
    t.now += limit;
    t.end_round();
    assert_eq!(
        t.take(),
        vec![Got::Rst {
            stream: 1,
            code: ErrorCode::CANCEL
        }]
    );
    assert_eq!(
        t.d.sink(1).lock().unwrap().failed,
        Some(BodyFailure::TimedOut)
    );
}

#[test]
fn a_body_the_service_has_not_read_is_not_the_clients_stall() {
    let mut cfg = ServerConfig::default();
    cfg.http2.initial_stream_window = 10;
    let mut t = T::open_with(cfg);
    let fields = post(100);
    let h = t.headers(1, &as_refs(&fields), false);
    t.recv(&h);
    let mut data = Vec::new();
    frame::write_data(&mut data, 1, &[1; 10], false);
    t.recv(&data);
    // The window is full and nobody read it: however long that lasts, no timeout.
    t.now += t.cfg.body_read_timeout.unwrap() * 3;
    t.end_round();
    assert_eq!(t.take(), vec![]);
    assert_eq!(t.d.sink(1).lock().unwrap().failed, None);
}

#[test]
fn nothing_is_written_after_a_floods_goaway() {
    // The frame that crosses the bound gets no answer of its own after the GOAWAY.
    for last in 0..3 {
        let mut cfg = ServerConfig::default();
        cfg.http2.max_idle_frames = 1;
        let mut t = T::open_with(cfg);
        let mut input = Vec::new();
        match last {
            0 => frame::write_settings(&mut input, &[]),
            1 => frame::write_ping(&mut input, false, [0; 8]),
            _ => {
                // The request earns its allowance back: two empty DATA cross it.
                input.extend(t.headers(1, &as_refs(&post(10)), false));
                frame::write_data(&mut input, 1, b"", false);
                frame::write_data(&mut input, 1, b"", false);
            }
        }
        t.recv(&input);
        let got = t.take();
        assert!(
            matches!(
                got.last(),
                Some(Got::GoAway {
                    code: ErrorCode::ENHANCE_YOUR_CALM,
                    ..
                })
            ),
            "case {last}: {got:?}"
        );
    }
}

#[test]
fn connection_specific_response_fields_are_dropped() {
    let mut t = T::open();
    let get = t.get(1);
    t.recv(&get);
    t.conn.each_stream(clock(t.now), &mut t.out, |_, w| {
        let mut parts = http::Response::new(()).into_parts().0;
        parts.headers.insert("connection", "close".parse().unwrap());
        parts
            .headers
            .insert("transfer-encoding", "chunked".parse().unwrap());
        parts.headers.insert("x-kept", "1".parse().unwrap());
        w.respond(&mut parts, Some(0));
    });
    let got = t.take();
    let Got::Headers { fields, .. } = &got[0] else {
        panic!("{got:?}")
    };
    let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"x-kept"), "{names:?}");
    assert!(
        !names.contains(&"connection") && !names.contains(&"transfer-encoding"),
        "{names:?}"
    );
}
