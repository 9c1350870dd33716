//! The HTTP/2 server machine, driven without sockets: a client made of the frame codec and
//! an HPACK encoder, a recording dispatcher, a fake clock.

use super::*;
use crate::http::ServerConfig;
use crate::proto::date::DATE_LEN;
use crate::proto::h2::frame::{Frame, Head, HEAD_LEN, MAX_WINDOW, PREFACE};
use crate::proto::h2::hpack::{Decoder, Encoder};
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
        let conn = ServerConn::new(now, &cfg.h2_limits(), &mut out);
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
            &self.cfg.h2_limits(),
            &mut self.d,
            &mut self.out,
        );
    }

    fn end_round(&mut self) -> Actions {
        self.conn
            .end_round(clock(self.now), &self.cfg.h2_limits(), &mut self.out)
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

mod exchange;
mod limits;
mod resets;
