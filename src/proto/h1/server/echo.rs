//! The server machine driven by a built-in echo service, for the fuzz targets and their
//! stable fallback (`fibr::fuzzing::http::serve_pieces`): every request is answered with
//! its method, target and body, as soon as its body is complete.

use super::{
    After, BodyFailure, BodySink, Clock, Dispatch, Dispatched, Front, Limits, NewBody, ServerConn,
    Started,
};
use crate::proto::date::DATE_LEN;
use crate::proto::h1::parse::RequestHead;
use http::HeaderMap;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

/// A request body as it arrives: its bytes, and how it ended (`Some(true)`: complete).
#[derive(Default)]
struct Arrived {
    data: Vec<u8>,
    ended: Option<bool>,
}

struct Sink(Rc<RefCell<Arrived>>);

impl BodySink for Sink {
    fn push(&mut self, data: &[u8]) {
        self.0.borrow_mut().data.extend_from_slice(data);
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
    fn finish(self, _trailers: Option<HeaderMap>) {
        self.0.borrow_mut().ended = Some(true);
    }
    fn fail(self, _why: BodyFailure) {
        self.0.borrow_mut().ended = Some(false);
    }
}

/// One request: what the answer starts with, and its body.
struct Request {
    line: String,
    body: Option<Rc<RefCell<Arrived>>>,
}

struct Echo;

impl Dispatch for Echo {
    type Exchange = Request;
    type Body = Sink;
    fn hands_off(&self, _head: &RequestHead) -> bool {
        false
    }

    fn dispatch(
        &mut self,
        head: RequestHead,
        body: Option<NewBody<'_>>,
    ) -> Dispatched<Request, Sink> {
        let arrived = body.map(|b| {
            Rc::new(RefCell::new(Arrived {
                data: b.whole.unwrap_or_default().to_vec(),
                ended: b.whole.map(|_| true),
            }))
        });
        let sink = match body {
            Some(NewBody { whole: None, .. }) => arrived.clone().map(Sink),
            _ => None,
        };
        Dispatched {
            exchange: Request {
                line: format!("{} {}\n", head.method, head.uri),
                body: arrived,
            },
            body: sink,
            called: true,
        }
    }

    fn write_front(&mut self, conn: &mut ServerConn<Sink, Request>, out: &mut Vec<u8>) {
        answer_ready(conn, out);
    }
}

fn fixed_date() -> [u8; DATE_LEN] {
    *b"Sun, 06 Nov 1994 08:49:37 GMT"
}

fn clock() -> Clock {
    // One instant for the whole run: no timeout can expire.
    thread_local!(static NOW: Instant = Instant::now());
    Clock {
        now: NOW.with(|n| *n),
        date: fixed_date,
    }
}

/// Answers the front requests whose bodies are complete; false once the connection is to
/// close.
fn answer_ready(conn: &mut ServerConn<Sink, Request>, out: &mut Vec<u8>) -> bool {
    loop {
        let reply = match conn.front(out) {
            None => return true,
            Some(Front::Canned) => {
                if conn.write_canned(clock(), out) == After::Close {
                    return false;
                }
                continue;
            }
            Some(Front::Writing(_)) => return true,
            Some(Front::Pending(req)) => {
                let body = match &req.body {
                    None => Vec::new(),
                    Some(b) if b.borrow().ended == Some(true) => b.borrow().data.clone(),
                    Some(b) if b.borrow().ended == Some(false) => {
                        let close = true;
                        let status = http::StatusCode::BAD_REQUEST;
                        if conn.respond_error(clock(), status, close, out) == After::Close {
                            return false;
                        }
                        continue;
                    }
                    Some(_) => return true,
                };
                let mut reply = req.line.clone().into_bytes();
                reply.extend_from_slice(&body);
                reply
            }
        };
        let (mut parts, ()) = http::Response::new(()).into_parts();
        let after = match conn.begin_response(clock(), &mut parts, Some(reply.len() as u64), out) {
            Started::Done(after) => after,
            Started::Body(_) => {
                let written = conn.write_data(&mut reply.as_slice(), out);
                match written.and_then(|()| conn.finish_body(clock(), None, out)) {
                    Ok(after) => after,
                    Err(_) => After::Close,
                }
            }
        };
        if after == After::Close {
            return false;
        }
    }
}

/// Feeds `pieces` to a server connection as successive reads, answering every request
/// as soon as it can; returns what the server wrote and whether it closed.
pub(crate) fn serve_pieces(pieces: &[&[u8]], limits: &Limits) -> (Vec<u8>, bool) {
    let mut conn: ServerConn<Sink, Request> = ServerConn::new(clock().now);
    let mut out = Vec::new();
    for piece in pieces {
        let mut input: &[u8] = piece;
        loop {
            conn.receive(clock(), input, limits, &mut Echo, &mut out);
            input = &[];
            let open = answer_ready(&mut conn, &mut out);
            let actions = conn.end_round(clock(), limits, false, &mut out);
            if !open || actions.close {
                return (out, true);
            }
            if !actions.parse_kept {
                break;
            }
        }
    }
    (out, false)
}
