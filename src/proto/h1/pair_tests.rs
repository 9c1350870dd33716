//! The HTTP/1 client machine against the server machine in memory, as quinn-proto tests
//! its connections: the client's requests reach the server (answering with its echo
//! service) whole, one byte at a time and split at every point, and the answers reach the
//! client the same ways. Both sides must agree on every message boundary, body and
//! keep-alive decision, whatever the delivery.

use super::body::{BodyChunk, BodyDecoder, BodyEncoder};
use super::client::ResponseLimits;
use super::client_conn::ClientConn;
use super::framing::BodyFraming;
use super::server::{serve_pieces, Limits};
use crate::http::ServerConfig;
use http::header::{HeaderValue, CONNECTION, HOST};
use http::{HeaderMap, Method, StatusCode, Version};

struct Req {
    method: Method,
    target: &'static str,
    body: Option<Vec<u8>>,
    chunked: bool,
    close: bool,
}

impl Req {
    fn new(method: Method, target: &'static str) -> Req {
        Req {
            method,
            target,
            body: None,
            chunked: false,
            close: false,
        }
    }

    fn body(mut self, body: &[u8], chunked: bool) -> Req {
        self.body = Some(body.to_vec());
        self.chunked = chunked;
        self
    }

    fn close(mut self) -> Req {
        self.close = true;
        self
    }

    fn framing(&self) -> BodyFraming {
        match (&self.body, self.chunked) {
            (None, _) => BodyFraming::Empty,
            (Some(b), false) => BodyFraming::Length(b.len() as u64),
            (Some(_), true) => BodyFraming::Chunked,
        }
    }

    fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(HOST, HeaderValue::from_static("example.test"));
        if self.close {
            headers.insert(CONNECTION, HeaderValue::from_static("close"));
        }
        headers
    }
}

/// The client machine's bytes for `reqs`, sent back to back (pipelined).
fn client_writes(reqs: &[Req]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in reqs {
        let mut c = ClientConn::new(ResponseLimits::default(), false);
        let framing = r.framing();
        c.start(
            &r.method,
            r.target,
            Version::HTTP_11,
            &r.headers(),
            framing,
            &mut out,
        );
        if let Some(body) = &r.body {
            let mut enc = BodyEncoder::new(framing);
            for piece in body.chunks(7) {
                if enc.begin_data(piece.len(), &mut out).unwrap() {
                    out.extend_from_slice(piece);
                    enc.end_data(&mut out);
                }
            }
            enc.finish(None, &mut out).unwrap();
        }
    }
    out
}

/// One response as the client machine read it.
#[derive(Debug, PartialEq, Eq)]
struct Got {
    status: StatusCode,
    body: Vec<u8>,
    /// The client would put the connection back in its pool.
    reuse: bool,
}

/// What a body decode step gave, owned (so the read buffer can move on).
enum Step {
    Data(Vec<u8>),
    End,
    More,
}

/// The client machine reads the responses to `reqs` from `wire`, delivered `step` bytes
/// at a time, up to the first it would not reuse the connection after.
fn client_reads(reqs: &[Req], wire: &[u8], step: usize) -> Vec<Got> {
    let mut c = ClientConn::new(ResponseLimits::default(), false);
    let mut buf = Vec::new();
    let mut fed = 0;
    let mut feed = |buf: &mut Vec<u8>| {
        let n = step.min(wire.len() - fed);
        buf.extend_from_slice(&wire[fed..fed + n]);
        fed += n;
        n > 0
    };
    let mut got = Vec::new();
    for r in reqs {
        c.start(
            &r.method,
            r.target,
            Version::HTTP_11,
            &r.headers(),
            r.framing(),
            &mut Vec::new(),
        );
        let head = loop {
            let (used, head) = c.read_head(&buf).expect("a well-formed response head");
            buf.drain(..used);
            if let Some(head) = head {
                break head;
            }
            assert!(feed(&mut buf), "the response head never completed");
        };
        let mut decoder = BodyDecoder::new(head.framing);
        let mut body = Vec::new();
        loop {
            let (used, step) = match decoder.decode(&buf).expect("a well-formed body") {
                (n, BodyChunk::Data(d)) => (n, Step::Data(d.to_vec())),
                (n, BodyChunk::End(_)) => (n, Step::End),
                (n, BodyChunk::NeedMore) => (n, Step::More),
            };
            buf.drain(..used);
            match step {
                Step::Data(d) => body.extend_from_slice(&d),
                Step::End => break,
                Step::More if feed(&mut buf) => {}
                Step::More => {
                    decoder.at_eof().expect("the body complete at the end");
                    break;
                }
            }
        }
        let reuse = c.finish(true, 0);
        got.push(Got {
            status: head.status,
            body,
            reuse,
        });
        if !reuse {
            break;
        }
    }
    assert!(
        buf.is_empty() && fed == wire.len(),
        "bytes past the last response"
    );
    got
}

/// Runs `reqs` through the server with every delivery of the requests and of the answers;
/// all must agree. Returns what the client read and whether the server closed.
fn exchange(reqs: &[Req], limits: &Limits) -> (Vec<Got>, bool) {
    let wire = client_writes(reqs);
    let (answer, closed) = serve_pieces(&[&wire], limits);
    let by_byte: Vec<&[u8]> = wire.chunks(1).collect();
    assert_eq!(serve_pieces(&by_byte, limits), (answer.clone(), closed));
    for at in 0..=wire.len() {
        let (a, b) = wire.split_at(at);
        assert_eq!(
            serve_pieces(&[a, b], limits),
            (answer.clone(), closed),
            "split at {at}"
        );
    }
    let got = client_reads(reqs, &answer, answer.len().max(1));
    assert_eq!(client_reads(reqs, &answer, 1), got);
    assert_eq!(client_reads(reqs, &answer, 5), got);
    (got, closed)
}

fn ok(body: &[u8], reuse: bool) -> Got {
    Got {
        status: StatusCode::OK,
        body: body.to_vec(),
        reuse,
    }
}

#[test]
fn keep_alive_requests_with_every_body_framing() {
    let big: Vec<u8> = (0..300u32).map(|i| (i % 251) as u8).collect();
    let reqs = [
        Req::new(Method::GET, "/a"),
        Req::new(Method::POST, "/b").body(b"hello world", false),
        Req::new(Method::PUT, "/c?q=1").body(&big, true),
        Req::new(Method::HEAD, "/d"),
        Req::new(Method::GET, "/e").close(),
    ];
    let (got, closed) = exchange(&reqs, &ServerConfig::default().h1_limits());
    let mut put = b"PUT /c?q=1\n".to_vec();
    put.extend_from_slice(&big);
    assert_eq!(
        got,
        [
            ok(b"GET /a\n", true),
            ok(b"POST /b\nhello world", true),
            ok(&put, true),
            // The head says how long the body would be; none follows, and both agree.
            ok(b"", true),
            ok(b"GET /e\n", false),
        ]
    );
    assert!(closed, "the server closes after `connection: close`");
}

#[test]
fn a_body_over_the_limit_is_refused_and_both_sides_stop() {
    let limits = ServerConfig::default().with_max_body_size(8).h1_limits();
    let reqs = [
        Req::new(Method::GET, "/first"),
        Req::new(Method::POST, "/big").body(b"more than eight bytes", false),
        Req::new(Method::GET, "/never"),
    ];
    let (got, closed) = exchange(&reqs, &limits);
    assert_eq!(
        got.len(),
        2,
        "nothing is answered after the refusal: {got:?}"
    );
    assert_eq!(got[0], ok(b"GET /first\n", true));
    assert_eq!(got[1].status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        !got[1].reuse,
        "the client does not reuse a connection the server closes"
    );
    assert!(closed);
}
