//! The client machine against the server machine, in memory: no sockets, the bytes each
//! writes handed to the other in a deterministic loop, whole or cut into pieces (one byte
//! at a time, or at every split point), so that the shared core is tested from both ends.
//! [`Net`] is also the client's tests' harness.

use super::client::{ClientConfig, ClientConn, Event, RequestHead, Why};
use super::config::ServerLimits;
use super::frame::ErrorCode;
use super::server::{self, NewBody, ServerConn, StreamSink};
use crate::proto::date::DATE_LEN;
use crate::proto::shared::{BodyFailure, BodySink, Clock};
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use std::sync::{Arc, Mutex};
use std::time::Instant;

fn date() -> [u8; DATE_LEN] {
    *b"Sun, 06 Nov 1994 08:49:37 GMT"
}

/// How each side's output reaches the other.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Delivery {
    Whole,
    /// One byte a call.
    Bytewise,
    /// Each write in two pieces, cut after this many bytes.
    Split(usize),
}

impl Delivery {
    fn deliver(self, bytes: &[u8], mut f: impl FnMut(&[u8])) {
        match self {
            Delivery::Whole => f(bytes),
            Delivery::Bytewise => bytes.chunks(1).for_each(f),
            Delivery::Split(at) => {
                let (a, b) = bytes.split_at(at.min(bytes.len()));
                for piece in [a, b].into_iter().filter(|p| !p.is_empty()) {
                    f(piece);
                }
            }
        }
    }
}

/// What a request body's sink saw, and what its reader took (set by the test, or all of
/// it at once with `reads_all`).
#[derive(Default)]
pub(crate) struct SinkLog {
    pub data: Vec<u8>,
    pub finished: Option<Option<HeaderMap>>,
    pub failed: bool,
    pub consumed: usize,
    reads_all: bool,
}

pub(crate) struct Sink(Arc<Mutex<SinkLog>>);

impl BodySink for Sink {
    fn push(&mut self, data: &[u8]) {
        let mut log = self.0.lock().unwrap();
        log.data.extend_from_slice(data);
        if log.reads_all {
            log.consumed += data.len();
        }
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
        self.0.lock().unwrap().finished = Some(trailers);
    }
    fn fail(self, _: BodyFailure) {
        self.0.lock().unwrap().failed = true;
    }
}

impl StreamSink for Sink {
    fn take_consumed(&mut self) -> usize {
        std::mem::take(&mut self.0.lock().unwrap().consumed)
    }
}

/// The server's dispatcher: records the requests and their body sinks.
#[derive(Default)]
pub(crate) struct Recorder {
    pub requests: Vec<(u32, server::RequestHead)>,
    sinks: Vec<(u32, Arc<Mutex<SinkLog>>)>,
    reads_all: bool,
}

impl server::Dispatch for Recorder {
    type Exchange = u32;
    type Body = Sink;
    fn dispatch(
        &mut self,
        stream: u32,
        head: server::RequestHead,
        body: Option<NewBody>,
    ) -> (u32, Option<Sink>) {
        self.requests.push((stream, head));
        let sink = body.map(|_| {
            let log = Arc::new(Mutex::new(SinkLog {
                reads_all: self.reads_all,
                ..SinkLog::default()
            }));
            self.sinks.push((stream, log.clone()));
            Sink(log)
        });
        (stream, sink)
    }
}

impl Recorder {
    pub(crate) fn sink(&self, stream: u32) -> Arc<Mutex<SinkLog>> {
        self.sinks.iter().find(|s| s.0 == stream).unwrap().1.clone()
    }
}

/// The two machines and the bytes between them.
pub(crate) struct Net {
    pub client: ClientConn,
    pub server: ServerConn<Sink, u32>,
    limits: ServerLimits,
    pub d: Recorder,
    how: Delivery,
    pub to_server: Vec<u8>,
    pub to_client: Vec<u8>,
    pub events: Vec<Event>,
    pub now: Instant,
    /// The server's end_round said to close.
    closed: bool,
    /// The longest write either side made.
    longest: usize,
    /// Readers on both sides take every body byte at once (else the test says).
    reads_all: bool,
}

impl Net {
    /// Whole writes; the test reads the bodies (`SinkLog::consumed`, `release`).
    pub(crate) fn new(ccfg: ClientConfig, limits: ServerLimits) -> Net {
        Net::with(Delivery::Whole, ccfg, limits, false)
    }

    /// Writes delivered `how`; every body is read at once.
    fn reading(how: Delivery, limits: ServerLimits) -> Net {
        Net::with(how, ClientConfig::default(), limits, true)
    }

    fn with(how: Delivery, ccfg: ClientConfig, limits: ServerLimits, reads_all: bool) -> Net {
        let now = Instant::now();
        let mut to_server = Vec::new();
        let mut to_client = Vec::new();
        let client = ClientConn::new(&ccfg, now, &mut to_server);
        let server = ServerConn::new(now, &limits, &mut to_client);
        let mut net = Net {
            client,
            server,
            limits,
            d: Recorder {
                reads_all,
                ..Recorder::default()
            },
            how,
            to_server,
            to_client,
            events: Vec::new(),
            now,
            closed: false,
            longest: 0,
            reads_all,
        };
        net.pump();
        net
    }

    pub(crate) fn clock(&self) -> Clock {
        Clock {
            now: self.now,
            date,
        }
    }

    /// Moves bytes both ways until neither side writes more.
    pub(crate) fn pump(&mut self) {
        for _ in 0..1000 {
            let clock = self.clock();
            let bytes = std::mem::take(&mut self.to_server);
            self.longest = self.longest.max(bytes.len());
            let (server, d, out) = (&mut self.server, &mut self.d, &mut self.to_client);
            let limits = &self.limits;
            self.how
                .deliver(&bytes, |b| server.receive(clock, b, limits, d, out));
            self.closed |= self.server.end_round(clock, &self.limits, out).close;
            let bytes = std::mem::take(&mut self.to_client);
            self.longest = self.longest.max(bytes.len());
            let before = self.events.len();
            let (client, out, ev) = (&mut self.client, &mut self.to_server, &mut self.events);
            self.how
                .deliver(&bytes, |b| client.receive(clock.now, b, out, ev));
            for e in self.events[before..].iter().filter(|_| self.reads_all) {
                if let Event::Data { stream, data } = e {
                    self.client.release(*stream, data.len());
                }
            }
            self.client.flush_credit(&mut self.to_server);
            if self.to_server.is_empty() && self.to_client.is_empty() {
                return;
            }
        }
        panic!("the two machines never went quiet");
    }

    pub(crate) fn get(&mut self, path: &str) -> u32 {
        self.open(&Method::GET, path, &HeaderMap::new(), true)
    }

    pub(crate) fn open(&mut self, method: &Method, path: &str, h: &HeaderMap, end: bool) -> u32 {
        let head = RequestHead {
            method,
            scheme: "http",
            authority: "example.com",
            path,
            protocol: None,
            headers: h,
        };
        let id = self.client.open(&head, end, &mut self.to_server);
        id.expect("a stream may open")
    }

    /// Sends `body` on `stream` as its windows open, then trailers if any.
    fn upload(&mut self, stream: u32, body: &[u8], trailers: Option<&HeaderMap>) {
        let mut rest = body;
        let end = trailers.is_none();
        while !self
            .client
            .send_data(stream, &mut rest, end, &mut self.to_server)
        {
            self.pump();
        }
        if let Some(t) = trailers {
            self.client.send_trailers(stream, t, &mut self.to_server);
        }
        self.pump();
    }

    /// Answers `stream` with `body` (all the server's windows allow) and, if any,
    /// trailers.
    pub(crate) fn respond(&mut self, stream: u32, body: &[u8], trailers: Option<&HeaderMap>) {
        let clock = self.clock();
        let mut body = body;
        self.server
            .each_stream(clock, &mut self.to_client, |id, w| {
                if *id != stream {
                    return;
                }
                let mut parts = http::Response::new(()).into_parts().0;
                let exact = trailers.is_none().then_some(body.len() as u64);
                if w.awaits_head() && !w.respond(&mut parts, exact) {
                    return;
                }
                if w.send_data(&mut body, trailers.is_none()) {
                    w.finish(trailers);
                }
            });
        self.pump();
    }

    /// The response on `stream` as the client's events tell it.
    fn response(&self, stream: u32) -> (Option<StatusCode>, Vec<u8>, Option<Option<HeaderMap>>) {
        let (mut status, mut body, mut end) = (None, Vec::new(), None);
        for e in &self.events {
            match e {
                Event::Head { stream: s, head } if *s == stream => status = Some(head.status),
                Event::Data { stream: s, data } if *s == stream => body.extend_from_slice(data),
                Event::End {
                    stream: s,
                    trailers,
                } if *s == stream => end = Some(trailers.clone()),
                _ => {}
            }
        }
        (status, body, end)
    }

    pub(crate) fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }
}

fn trailers() -> HeaderMap {
    let mut t = HeaderMap::new();
    t.insert("x-checksum", HeaderValue::from_static("abc"));
    t
}

fn get(how: Delivery) -> usize {
    let mut n = Net::reading(how, ServerLimits::default());
    let id = n.get("/x");
    n.pump();
    assert_eq!(n.d.requests.len(), 1, "{how:?}");
    assert_eq!(n.d.requests[0].0, id, "{how:?}");
    assert_eq!(n.d.requests[0].1.method, Method::GET, "{how:?}");
    n.respond(id, b"hello", None);
    let (status, body, end) = n.response(id);
    assert_eq!(status, Some(StatusCode::OK), "{how:?}");
    assert_eq!(body, b"hello", "{how:?}");
    assert_eq!(end, Some(None), "{how:?}");
    assert_eq!((n.client.streams(), n.server.streams()), (0, 0), "{how:?}");
    n.longest
}

/// A request body four times the stream's window: it goes only as WINDOW_UPDATEs open
/// the window again.
fn post_beyond_the_window(how: Delivery) -> usize {
    let mut limits = ServerLimits::default();
    limits.http2.initial_stream_window = 4096;
    let mut n = Net::reading(how, limits);
    let body: Vec<u8> = (0..16_384u32).map(|i| i as u8).collect();
    let id = n.open(&Method::POST, "/x", &HeaderMap::new(), false);
    n.upload(id, &body, None);
    let sink = n.d.sink(id);
    let log = sink.lock().unwrap();
    assert_eq!(log.data, body, "{how:?}");
    assert_eq!(log.finished, Some(None), "{how:?}");
    drop(log);
    n.respond(id, b"", None);
    assert_eq!(n.response(id).0, Some(StatusCode::OK), "{how:?}");
    n.longest
}

/// Trailers both ways: after a request body and after a response body.
fn trailers_both_ways(how: Delivery) -> usize {
    let mut n = Net::reading(how, ServerLimits::default());
    let id = n.open(&Method::POST, "/x", &HeaderMap::new(), false);
    n.upload(id, b"request", Some(&trailers()));
    let sink = n.d.sink(id);
    assert_eq!(sink.lock().unwrap().data, b"request", "{how:?}");
    assert_eq!(sink.lock().unwrap().finished, Some(Some(trailers())));
    n.respond(id, b"response", Some(&trailers()));
    let (status, body, end) = n.response(id);
    assert_eq!(status, Some(StatusCode::OK), "{how:?}");
    assert_eq!(body, b"response", "{how:?}");
    assert_eq!(end, Some(Some(trailers())), "{how:?}");
    n.longest
}

/// A stream reset from either end: the other forgets it, the connection goes on.
fn resets(how: Delivery) -> usize {
    let mut n = Net::reading(how, ServerLimits::default());
    let id = n.open(&Method::POST, "/x", &HeaderMap::new(), false);
    n.pump();
    n.client.reset(id, ErrorCode::CANCEL, &mut n.to_server);
    n.pump();
    assert!(n.d.sink(id).lock().unwrap().failed, "{how:?}");
    assert_eq!((n.client.streams(), n.server.streams()), (0, 0), "{how:?}");

    let id = n.get("/x");
    n.pump();
    let clock = n.clock();
    n.server.each_stream(clock, &mut n.to_client, |_, w| {
        w.reset(ErrorCode::INTERNAL_ERROR)
    });
    n.pump();
    let reset = n.events.iter().any(|e| {
        matches!(e, Event::Reset { stream, why: Why::Reset(ErrorCode::INTERNAL_ERROR) }
            if *stream == id)
    });
    assert!(reset, "{how:?}: {:?}", n.events);
    assert_eq!((n.client.streams(), n.server.streams()), (0, 0), "{how:?}");
    assert!(!n.client.is_failed() && !n.server.is_failed(), "{how:?}");
    n.longest
}

/// The server's graceful GOAWAY: the client opens nothing more, the stream in flight
/// finishes, then the server closes.
fn goaway(how: Delivery) -> usize {
    let mut n = Net::reading(how, ServerLimits::default());
    let id = n.get("/x");
    n.pump();
    n.server.drain(&mut n.to_client);
    n.pump();
    let away = n.events.iter().any(|e| {
        matches!(e, Event::GoAway { last_stream, code: ErrorCode::NO_ERROR } if *last_stream == id)
    });
    assert!(away, "{how:?}: {:?}", n.events);
    assert!(!n.client.is_usable(), "{how:?}");
    assert!(!n.closed, "{how:?}: stream {id} is still answering");
    n.respond(id, b"last", None);
    assert_eq!(n.response(id).1, b"last", "{how:?}");
    assert!(n.closed, "{how:?}");
    n.longest
}

/// A scenario: it returns the longest write it saw.
type Scenario = fn(Delivery) -> usize;

const SCENARIOS: [(&str, Scenario); 5] = [
    ("get", get),
    ("post beyond the window", post_beyond_the_window),
    ("trailers both ways", trailers_both_ways),
    ("resets", resets),
    ("goaway", goaway),
];

#[test]
fn every_scenario_with_whole_writes() {
    for (_, run) in SCENARIOS {
        run(Delivery::Whole);
    }
}

#[test]
fn every_scenario_one_byte_at_a_time() {
    for (_, run) in SCENARIOS {
        run(Delivery::Bytewise);
    }
}

/// Every write cut in two at every point (up to the longest write of the scenario).
#[test]
fn every_scenario_cut_at_every_point() {
    for (name, run) in SCENARIOS {
        let longest = run(Delivery::Whole);
        assert!(longest > 40, "{name}: {longest}");
        for at in 1..longest {
            run(Delivery::Split(at));
        }
    }
}
