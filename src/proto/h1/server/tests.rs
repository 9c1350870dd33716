//! The server connection machine, driven deterministically: bytes in, a fake clock, a
//! recording service and body sink; no sockets, threads or real time.

use super::*;
use crate::http::ServerConfig;
use crate::proto::date::DATE_LEN;
use crate::proto::h1::body::EncodeError;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

const DATE: &[u8; DATE_LEN] = b"Sun, 06 Nov 1994 08:49:37 GMT";

fn fixed_date() -> [u8; DATE_LEN] {
    *DATE
}

/// A 200 response as the machine writes it.
fn ok(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\ndate: {}\r\ncontent-length: {}\r\n\r\n{body}",
        std::str::from_utf8(DATE).unwrap(),
        body.len()
    )
}

/// A 200 response that closes the connection.
fn ok_close(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\ndate: {}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        std::str::from_utf8(DATE).unwrap(),
        body.len()
    )
}

#[derive(Default)]
struct SinkState {
    data: Vec<u8>,
    end: Option<Result<Option<HeaderMap>, BodyFailure>>,
    full: bool,
    gone: bool,
    wanted: bool,
}

struct Sink(Rc<RefCell<SinkState>>);

impl BodySink for Sink {
    fn push(&mut self, data: &[u8]) {
        let mut st = self.0.borrow_mut();
        if !st.gone {
            st.data.extend_from_slice(data);
        }
    }
    fn has_room(&self) -> bool {
        let st = self.0.borrow();
        st.gone || !st.full
    }
    fn reader_gone(&self) -> bool {
        self.0.borrow().gone
    }
    fn wanted(&self) -> bool {
        self.0.borrow().wanted
    }
    fn finish(self, trailers: Option<HeaderMap>) {
        self.0.borrow_mut().end = Some(Ok(trailers));
    }
    fn fail(self, why: BodyFailure) {
        self.0.borrow_mut().end = Some(Err(why));
    }
}

/// The driver's per-request state in these tests: which request it is.
#[derive(Debug, PartialEq, Eq)]
struct Ex(usize);

/// A service that records what it is asked, and is ready when told.
struct Svc<const UPGRADES: bool> {
    ready: bool,
    requests: Vec<String>,
    bodies: Vec<Rc<RefCell<SinkState>>>,
    /// How many requests had been dispatched at each `write_front`.
    fronts: Vec<usize>,
    /// Bodies that came whole with their heads.
    wholes: usize,
}

impl<const UPGRADES: bool> Dispatch for Svc<UPGRADES> {
    type Exchange = Ex;
    type Body = Sink;
    fn hands_off(&self, _head: &RequestHead) -> bool {
        UPGRADES
    }

    fn dispatch(&mut self, head: RequestHead, body: Option<NewBody<'_>>) -> Dispatched<Ex, Sink> {
        self.requests.push(format!("{} {}", head.method, head.uri));
        let sink = body.and_then(|b| {
            let st = Rc::new(RefCell::new(SinkState::default()));
            self.bodies.push(st.clone());
            if let Some(whole) = b.whole {
                // Came with its head: no sink to feed.
                let mut st = st.borrow_mut();
                st.data = whole.to_vec();
                st.end = Some(Ok(None));
                self.wholes += 1;
                return None;
            }
            Some(Sink(st))
        });
        Dispatched {
            exchange: Ex(self.requests.len() - 1),
            body: sink,
            called: self.ready,
        }
    }

    fn write_front(&mut self, _conn: &mut ServerConn<Sink, Ex>, _out: &mut Vec<u8>) {
        // The handlers here answer when the test says, not in their first poll.
        self.fronts.push(self.requests.len());
    }
}

struct Harness<const UPGRADES: bool = false> {
    conn: ServerConn<Sink, Ex>,
    svc: Svc<UPGRADES>,
    cfg: ServerConfig,
    limits: Limits,
    now: Instant,
    out: Vec<u8>,
}

impl<const UPGRADES: bool> Harness<UPGRADES> {
    fn new(cfg: ServerConfig) -> Self {
        let now = Instant::now();
        Harness {
            conn: ServerConn::new(now),
            svc: Svc {
                ready: true,
                requests: Vec::new(),
                bodies: Vec::new(),
                fronts: Vec::new(),
                wholes: 0,
            },
            limits: cfg.h1_limits(),
            cfg,
            now,
            out: Vec::new(),
        }
    }

    fn clock(&self) -> Clock {
        Clock {
            now: self.now,
            date: fixed_date,
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        let clock = self.clock();
        self.conn
            .receive(clock, bytes, &self.limits, &mut self.svc, &mut self.out);
    }

    fn advance(&mut self, by: Duration) {
        self.now += by;
    }

    fn end(&mut self) -> Actions {
        let clock = self.clock();
        self.conn
            .end_round(clock, &self.limits, false, &mut self.out)
    }

    /// Runs rounds with no new input while the machine has kept bytes it can parse.
    fn settle(&mut self) -> Actions {
        loop {
            let a = self.end();
            if !a.parse_kept {
                return a;
            }
            self.feed(b"");
        }
    }

    fn take_out(&mut self) -> String {
        String::from_utf8(std::mem::take(&mut self.out)).unwrap()
    }

    /// The request at the front of the queue (asserting it waits for its response).
    fn front_id(&mut self) -> usize {
        match self.conn.front(&mut self.out) {
            Some(Front::Pending(Ex(id))) => *id,
            Some(Front::Writing(_)) => panic!("the front response is being written"),
            Some(Front::Canned) => panic!("the front response is canned"),
            None => panic!("no request in flight"),
        }
    }

    /// Answers the front request with `status` and `body` (exact length known).
    fn respond(&mut self, status: u16, body: &str) -> After {
        self.respond_parts(status, &[], Some(body.len() as u64), body)
    }

    fn respond_parts(
        &mut self,
        status: u16,
        headers: &[(&'static str, &'static str)],
        exact: Option<u64>,
        body: &str,
    ) -> After {
        self.front_id();
        let clock = self.clock();
        let mut resp = http::Response::builder().status(status);
        for (k, v) in headers {
            resp = resp.header(*k, *v);
        }
        let (mut parts, ()) = resp.body(()).unwrap().into_parts();
        match self
            .conn
            .begin_response(clock, &mut parts, exact, &mut self.out)
        {
            Started::Done(after) => after,
            Started::Body(_) => {
                self.conn
                    .write_data(&mut body.as_bytes(), &mut self.out)
                    .unwrap();
                self.conn.finish_body(clock, None, &mut self.out).unwrap()
            }
        }
    }

    /// Writes the machine's own error response at the front.
    fn write_canned(&mut self) -> After {
        assert!(matches!(
            self.conn.front(&mut self.out),
            Some(Front::Canned)
        ));
        let clock = self.clock();
        self.conn.write_canned(clock, &mut self.out)
    }
}

fn harness() -> Harness {
    Harness::new(ServerConfig::default())
}

const GET_A: &[u8] = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
const GET_B: &[u8] = b"GET /b HTTP/1.1\r\nHost: h\r\n\r\n";
const GET_C: &[u8] = b"GET /c HTTP/1.1\r\nHost: h\r\n\r\n";

#[test]
fn keep_alive_serves_request_after_request() {
    let mut h = harness();
    for (i, req) in [GET_A, GET_B, GET_C].into_iter().enumerate() {
        h.feed(req);
        assert_eq!(h.front_id(), i);
        assert_eq!(h.respond(200, "x"), After::Next);
        let a = h.end();
        assert!(a.read && !a.close);
        assert_eq!(h.take_out(), ok("x"));
    }
    assert_eq!(h.svc.requests, ["GET /a", "GET /b", "GET /c"]);
    // One request per round: the driver writes it after the round, not from inside.
    assert!(h.svc.fronts.is_empty());
}

#[test]
fn pipelined_requests_are_called_and_written_a_group_at_a_time() {
    let mut h = harness();
    let gets: Vec<u8> = (0..10)
        .flat_map(|i| format!("GET /{i} HTTP/1.1\r\nHost: h\r\n\r\n").into_bytes())
        .collect();
    h.feed(&gets);
    let want: Vec<String> = (0..10).map(|i| format!("GET /{i}")).collect();
    assert_eq!(h.svc.requests, want);
    // Asked to write after every GROUP calls; the rest goes after the round.
    assert_eq!(h.svc.fronts, [GROUP, 2 * GROUP]);
    for i in 0..10 {
        assert_eq!(h.front_id(), i);
        h.respond(200, "x");
    }
    assert_eq!(h.take_out(), ok("x").repeat(10));
}

#[test]
fn a_group_ends_at_a_request_with_a_body_and_at_a_bad_head() {
    let mut h = harness();
    let post = b"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi";
    h.feed(&[GET_A, post, GET_B, GET_C, b"BAD\r\n\r\n", GET_A].concat());
    assert_eq!(h.svc.requests, ["GET /a", "POST /p", "GET /b", "GET /c"]);
    assert_eq!(h.svc.bodies[0].borrow().data, b"hi");
    assert!(matches!(h.svc.bodies[0].borrow().end, Some(Ok(None))));
    for body in ["a", "p", "b", "c"] {
        h.respond(200, body);
    }
    assert_eq!(h.write_canned(), After::Close);
    let out = h.take_out();
    let good = [ok("a"), ok("p"), ok("b"), ok("c")].concat();
    assert!(out.starts_with(&good), "{out}");
    assert!(out[good.len()..].starts_with("HTTP/1.1 400 "), "{out}");
    assert!(h.end().close);
}

#[test]
fn a_body_that_came_with_its_head_is_handed_over_whole() {
    let mut h = harness();
    let post = b"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello";
    h.feed(&[post.as_slice(), GET_A].concat());
    assert_eq!(h.svc.requests, ["POST /p", "GET /a"]);
    assert_eq!(h.svc.wholes, 1, "no sink to feed");
    assert_eq!(h.svc.bodies[0].borrow().data, b"hello");
    // Split from its head, the same body goes through a sink.
    let mut h = harness();
    h.feed(&post[..post.len() - 2]);
    h.feed(&[b"lo".as_slice(), GET_A].concat());
    assert_eq!(h.svc.requests, ["POST /p", "GET /a"]);
    assert_eq!(h.svc.wholes, 0);
    assert_eq!(h.svc.bodies[0].borrow().data, b"hello");
    assert!(matches!(h.svc.bodies[0].borrow().end, Some(Ok(None))));
}

#[test]
fn a_request_parked_inside_a_group_leaves_the_rest_unread() {
    let mut h = harness();
    h.svc.ready = false;
    h.feed(&[GET_A, GET_B, GET_C].concat());
    assert_eq!(h.svc.requests, ["GET /a"]);
    assert!(h.conn.is_parked());
    h.svc.ready = true;
    h.conn.unpark();
    assert!(h.end().parse_kept);
    h.settle();
    assert_eq!(h.svc.requests, ["GET /a", "GET /b", "GET /c"]);
}

#[test]
fn a_request_in_pieces_waits_for_its_head() {
    let mut h = harness();
    for b in GET_A.chunks(3) {
        assert!(h.svc.requests.is_empty());
        h.feed(b);
        // A partial head waits for the client: parsing it again now would find it just
        // as incomplete (the driver would spin).
        let a = h.end();
        assert!(a.read && !a.parse_kept);
    }
    assert_eq!(h.svc.requests, ["GET /a"]);
}

#[test]
fn kept_bytes_are_parsed_again_only_once_what_held_them_is_gone() {
    let mut h: Harness = Harness::new(ServerConfig {
        max_pipelined: 1,
        ..ServerConfig::default()
    });
    // Held by the pipeline depth, with a partial head behind: parse again once answered,
    // and then not again while the head stays partial.
    h.feed(&[GET_A, b"GET /b HT"].concat());
    assert!(!h.end().parse_kept);
    h.respond(200, "a");
    assert!(h.end().parse_kept);
    h.feed(b"");
    assert!(!h.end().parse_kept);
    h.feed(b"TP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(h.svc.requests, ["GET /a", "GET /b"]);
}

#[test]
fn pipelined_responses_leave_in_request_order() {
    let mut h = harness();
    h.feed(&[GET_A, GET_B, GET_C].concat());
    assert_eq!(h.svc.requests.len(), 3);
    // Only the front may be written, whichever handler finished first: the machine
    // hands the driver the front only.
    let ids: Vec<usize> = h.conn.exchanges_mut().map(|x| x.0).collect();
    assert_eq!(ids, [0, 1, 2]);
    for (i, body) in ["a", "b", "c"].iter().enumerate() {
        assert_eq!(h.front_id(), i);
        h.respond(200, body);
    }
    assert_eq!(h.take_out(), [ok("a"), ok("b"), ok("c")].concat());
    assert!(h.conn.front(&mut h.out).is_none());
}

#[test]
fn pipelining_depth_holds_reads_and_resumes() {
    let mut h: Harness = Harness::new(ServerConfig {
        max_pipelined: 2,
        ..ServerConfig::default()
    });
    h.feed(&[GET_A, GET_B, GET_C].concat());
    // Two in flight; the third waits unparsed, and reads are held.
    assert_eq!(h.svc.requests.len(), 2);
    let a = h.end();
    assert!(!a.read && !a.parse_kept);
    h.respond(200, "a");
    let a = h.end();
    assert!(a.parse_kept, "room again: the kept request is to be parsed");
    let a = h.settle();
    assert_eq!(h.svc.requests, ["GET /a", "GET /b", "GET /c"]);
    assert!(!a.read, "two in flight again");
    h.respond(200, "b");
    assert!(h.settle().read);
}

#[test]
fn a_service_that_is_not_ready_parks_the_pipeline() {
    // Bug 1 of issue 11: a request waiting for poll_ready stalled the requests pipelined
    // behind it, and the connection read on without bound.
    let mut h = harness();
    h.svc.ready = false;
    h.feed(&[GET_A, GET_B].concat());
    assert_eq!(
        h.svc.requests,
        ["GET /a"],
        "nothing behind a parked request is parsed"
    );
    assert!(h.conn.is_parked());
    let a = h.end();
    assert!(!a.read, "reads are held while parked");
    assert!(!a.parse_kept);
    // The service becomes ready and takes the request: what was kept is parsed at once,
    // without waiting for the client to send more.
    h.svc.ready = true;
    h.conn.unpark();
    assert!(h.end().parse_kept);
    h.settle();
    assert_eq!(h.svc.requests, ["GET /a", "GET /b"]);
    h.respond(200, "a");
    h.respond(200, "b");
    assert_eq!(h.take_out(), [ok("a"), ok("b")].concat());
    assert!(h.end().read);
}

#[test]
fn header_read_timeout_answers_408_and_closes() {
    let mut h = harness();
    h.feed(b"GET /slow HTTP/1.1\r\nHo");
    let t = h.cfg.header_read_timeout.unwrap();
    let a = h.end();
    assert_eq!(a.deadline, Some(h.now + t));
    assert!(!a.close);
    h.advance(t - Duration::from_millis(1));
    assert!(!h.end().close);
    h.advance(Duration::from_millis(1));
    let a = h.end();
    assert!(a.close);
    let out = h.take_out();
    assert!(out.starts_with("HTTP/1.1 408 Request Timeout\r\n"), "{out}");
    assert!(out.contains("connection: close\r\n"));
    assert!(h.svc.requests.is_empty());
}

#[test]
fn idle_timeout_closes_quietly() {
    let mut h = harness();
    h.feed(GET_A);
    h.respond(200, "a");
    h.take_out();
    let idle = h.cfg.idle_timeout.unwrap();
    let a = h.end();
    assert_eq!(a.deadline, Some(h.now + idle));
    h.advance(idle);
    let a = h.end();
    assert!(a.close);
    assert_eq!(h.take_out(), "", "an idle close writes nothing");
}

#[test]
fn no_timeout_runs_while_a_response_is_pending() {
    let mut h = harness();
    h.feed(GET_A);
    // The service is slow: neither the idle nor the head clock runs meanwhile.
    assert_eq!(h.end().deadline, None);
    h.advance(Duration::from_secs(3600));
    assert!(!h.end().close);
    h.respond(200, "late");
    assert_eq!(h.take_out(), ok("late"));
}

#[test]
fn body_read_timeout_fails_the_body_then_closes_after_the_answer() {
    let mut h = harness();
    h.feed(b"POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n12345");
    let t = h.cfg.body_read_timeout.unwrap();
    let a = h.end();
    assert_eq!(a.deadline, Some(h.now + t));
    h.advance(t);
    h.end();
    let body = h.svc.bodies[0].borrow();
    assert_eq!(body.data, b"12345");
    assert!(matches!(body.end, Some(Err(BodyFailure::TimedOut))));
    drop(body);
    // The service answers (it saw the failure); then the connection closes.
    assert_eq!(h.respond(408, ""), After::Close);
    assert!(h.end().close);
}

#[test]
fn body_progress_restarts_the_body_clock() {
    let mut h = harness();
    h.feed(b"POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\n1");
    let t = h.cfg.body_read_timeout.unwrap();
    for b in [b"2", b"3"] {
        h.advance(t - Duration::from_millis(1));
        assert!(!h.end().close);
        h.feed(b);
    }
    h.advance(t - Duration::from_millis(1));
    h.feed(b"4");
    let body = h.svc.bodies[0].borrow();
    assert_eq!(body.data, b"1234");
    assert!(matches!(body.end, Some(Ok(None))));
}

#[test]
fn continue_waits_for_the_responses_before_it() {
    // Bug 2 of issue 11: 100 Continue went out as soon as the handler read the body,
    // ahead of earlier pipelined responses still pending.
    let mut h = harness();
    h.feed(GET_A);
    h.feed(b"POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n");
    assert_eq!(h.svc.requests.len(), 2);
    // The upload's handler asks for its body while /a is still being answered.
    h.svc.bodies[0].borrow_mut().wanted = true;
    assert_eq!(h.front_id(), 0);
    assert_eq!(
        h.take_out(),
        "",
        "no 100 Continue before the response to /a"
    );
    h.respond(200, "a");
    // Now the upload is at the front: its 100 Continue follows /a's response.
    assert_eq!(h.front_id(), 1);
    assert_eq!(
        h.take_out(),
        [ok("a"), "HTTP/1.1 100 Continue\r\n\r\n".to_string()].concat()
    );
    h.feed(b"xyz");
    assert_eq!(h.svc.bodies[0].borrow().data, b"xyz");
    h.respond(200, "up");
    assert_eq!(h.take_out(), ok("up"));
    assert!(!h.end().close);
}

#[test]
fn continue_only_once_the_body_is_wanted() {
    let mut h = harness();
    h.feed(b"POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n");
    h.front_id();
    assert_eq!(h.take_out(), "");
    // No body-read timeout while the client waits for us.
    assert_eq!(h.end().deadline, None);
    h.svc.bodies[0].borrow_mut().wanted = true;
    h.front_id();
    assert_eq!(h.take_out(), "HTTP/1.1 100 Continue\r\n\r\n");
    h.front_id();
    assert_eq!(h.take_out(), "", "sent once");
}

#[test]
fn no_continue_once_the_client_sends_anyway() {
    let mut h = harness();
    h.feed(b"POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\nx");
    h.svc.bodies[0].borrow_mut().wanted = true;
    h.front_id();
    assert_eq!(h.take_out(), "", "the body is already coming");
    h.feed(b"yz");
    assert_eq!(h.svc.bodies[0].borrow().data, b"xyz");
    assert_eq!(h.respond(200, "up"), After::Next);
}

#[test]
fn answered_without_asking_for_the_body_closes() {
    let mut h = harness();
    h.feed(b"POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n");
    // The handler answers without reading: whether the client sends the body anyway
    // cannot be known, so the connection is not reused, and closes at once.
    assert_eq!(h.respond(401, ""), After::Close);
    assert!(h.take_out().contains("connection: close"));
    assert!(h.end().close);
}

#[test]
fn upgrade_waits_for_the_responses_before_it() {
    let mut h: Harness<true> = Harness::new(ServerConfig::default());
    let upgrade: &[u8] =
        b"GET /ws HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n";
    h.feed(&[GET_A, upgrade, b"FRAME"].concat());
    assert_eq!(h.svc.requests, ["GET /a"], "the upgrade is not dispatched");
    assert!(
        h.conn.take_upgrade().is_none(),
        "not while /a is unanswered"
    );
    assert!(!h.end().read);
    h.respond(200, "a");
    h.settle();
    assert_eq!(
        h.conn.take_upgrade(),
        Some(Upgrade::HandOff([upgrade, b"FRAME"].concat())),
        "the new owner gets the upgrade request and what followed"
    );
    assert_eq!(h.take_out(), ok("a"));
}

/// A `2xx` to CONNECT answered here (no hand-off: TLS, or no hyper) has no framing, and
/// switches the connection as a `101` does: what followed the CONNECT is the tunnel's
/// (given to whoever claimed it, `fibr::http::tunnel`), never read as HTTP.
#[test]
fn connect_answered_here_has_no_framing_and_switches_the_connection() {
    let mut h = harness();
    h.feed(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\nGET /in-the-tunnel HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(h.svc.requests, ["CONNECT example.com:443"]);
    // The app's body length is not written (Body::empty() has an exact size of 0).
    assert_eq!(
        h.respond_parts(200, &[("content-length", "0")], Some(0), ""),
        After::Next
    );
    let date = std::str::from_utf8(DATE).unwrap();
    assert_eq!(
        h.take_out(),
        format!("HTTP/1.1 200 OK\r\ndate: {date}\r\n\r\n")
    );
    assert_eq!(
        h.conn.take_upgrade(),
        Some(Upgrade::Switched(
            b"GET /in-the-tunnel HTTP/1.1\r\nHost: h\r\n\r\n".to_vec()
        ))
    );
    assert_eq!(h.svc.requests, ["CONNECT example.com:443"]);
    // A refusal is an ordinary response, framed; the connection ends after it too.
    let mut h = harness();
    h.feed(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
    assert_eq!(h.respond(403, "no"), After::Close);
    assert!(h.take_out().contains("content-length: 2\r\n"));
    assert!(h.end().close);
}

#[test]
fn upgrade_not_handed_off_is_a_last_plain_request() {
    let mut h = harness();
    h.feed(b"GET /ws HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n");
    assert_eq!(h.svc.requests, ["GET /ws"]);
    assert_eq!(h.respond(426, ""), After::Close);
    assert!(h.take_out().contains("connection: close"));
    assert!(h.end().close);
    assert_eq!(h.conn.take_upgrade(), None);
}

#[test]
fn a_101_answered_here_gives_what_followed_to_the_new_protocol() {
    let mut h = harness();
    h.feed(
        b"GET /ws HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\nFRAME",
    );
    assert!(!h.end().read, "nothing more is read before the answer");
    h.feed(b"GET /a HTTP/1.1\r\n\r\n");
    assert_eq!(
        h.svc.requests,
        ["GET /ws"],
        "what follows is not parsed as HTTP/1"
    );
    assert_eq!(h.respond(101, ""), After::Next);
    let out = h.take_out();
    assert!(
        out.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{out}"
    );
    assert!(!out.contains("connection: close"), "{out}");
    assert_eq!(
        h.conn.take_upgrade(),
        Some(Upgrade::Switched(b"FRAMEGET /a HTTP/1.1\r\n\r\n".to_vec()))
    );
}

#[test]
fn head_gets_the_length_a_get_would_and_no_body() {
    let mut h = harness();
    h.feed(b"HEAD /a HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(h.respond(200, "hello"), After::Next);
    let out = h.take_out();
    assert_eq!(
        out,
        format!(
            "HTTP/1.1 200 OK\r\ncontent-length: 5\r\ndate: {}\r\n\r\n",
            std::str::from_utf8(DATE).unwrap()
        )
    );
}

#[test]
fn no_body_statuses_have_no_framing() {
    for status in [204u16, 304] {
        let mut h = harness();
        h.feed(GET_A);
        assert_eq!(
            h.respond_parts(status, &[("content-length", "9")], Some(9), ""),
            After::Next
        );
        let out = h.take_out();
        assert!(
            !out.contains("content-length") && !out.contains("transfer-encoding"),
            "{status}: {out}"
        );
        assert!(out.ends_with("\r\n\r\n"));
    }
}

#[test]
fn unknown_length_is_chunked_or_close_delimited_for_http10() {
    let mut h = harness();
    h.feed(GET_A);
    h.respond_parts(200, &[], None, "abc");
    assert!(h
        .take_out()
        .ends_with("transfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"));
    let mut h = harness();
    h.feed(b"GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(h.respond_parts(200, &[], None, "abc"), After::Close);
    assert!(h.take_out().ends_with("connection: close\r\n\r\nabc"));
    assert!(h.end().close);
}

#[test]
fn a_body_longer_than_its_length_is_refused() {
    let mut h = harness();
    h.feed(GET_A);
    let clock = h.clock();
    let (mut parts, ()) = http::Response::new(()).into_parts();
    assert_eq!(
        h.conn
            .begin_response(clock, &mut parts, Some(2), &mut h.out),
        Started::Body(BodyFraming::Length(2))
    );
    assert_eq!(
        h.conn.write_data(&mut &b"abc"[..], &mut h.out),
        Err(EncodeError::TooLong { declared: 2 })
    );
    h.conn.abort_response();
    assert!(h.end().close);
}

#[test]
fn app_connection_close_and_max_requests_end_the_connection() {
    let mut h = harness();
    h.feed(&[GET_A, GET_B].concat());
    assert_eq!(
        h.respond_parts(200, &[("connection", "close")], Some(1), "a"),
        After::Close
    );
    // Nothing after a closing response is written, even a request already parsed.
    assert!(h.conn.front(&mut h.out).is_none());
    assert!(h.end().close);

    let mut h: Harness = Harness::new(ServerConfig {
        max_requests_per_connection: Some(2),
        ..ServerConfig::default()
    });
    h.feed(GET_A);
    assert_eq!(h.respond(200, "a"), After::Next);
    h.feed(&[GET_B, GET_C].concat());
    assert_eq!(
        h.svc.requests.len(),
        2,
        "nothing is read after the last request"
    );
    assert_eq!(h.respond(200, "b"), After::Close);
    assert_eq!(h.take_out(), [ok("a"), ok_close("b")].concat());
    assert!(h.end().close);
}

#[test]
fn head_limits_answer_431_and_414() {
    let cfg = ServerConfig {
        max_head_bytes: 64,
        max_headers: 2,
        max_uri_len: 10,
        ..ServerConfig::default()
    };
    let cases: [(&[u8], &str); 4] = [
        // At the limits: served.
        (b"GET /123456789 HTTP/1.1\r\nHost: h\r\nA: 1\r\n\r\n", "200"),
        (b"GET /1234567890 HTTP/1.1\r\nHost: h\r\n\r\n", "414"),
        (b"GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n", "431"),
        (
            b"GET / HTTP/1.1\r\nHost: h\r\nA: 123456789012345678901234567890123\r\n\r\n",
            "431",
        ),
    ];
    for (req, want) in cases {
        let mut h: Harness = Harness::new(cfg.clone());
        h.feed(req);
        if want == "200" {
            assert_eq!(h.svc.requests.len(), 1, "{}", String::from_utf8_lossy(req));
            continue;
        }
        assert!(h.svc.requests.is_empty());
        assert_eq!(h.write_canned(), After::Close);
        let out = h.take_out();
        assert!(out.starts_with(&format!("HTTP/1.1 {want} ")), "{out}");
        assert!(out.contains("connection: close"));
        assert!(h.end().close);
    }
}

#[test]
fn a_head_growing_past_its_limit_is_refused_before_it_ends() {
    let mut h: Harness = Harness::new(ServerConfig {
        max_head_bytes: 64,
        ..ServerConfig::default()
    });
    h.feed(b"GET / HTTP/1.1\r\nHost: h\r\n");
    for _ in 0..10 {
        h.feed(b"X-Pad: aaaaaaaa\r\n");
    }
    assert_eq!(h.write_canned(), After::Close);
    assert!(h.take_out().starts_with("HTTP/1.1 431 "));
}

#[test]
fn max_body_size_at_and_over_the_limit() {
    let cfg = ServerConfig {
        max_body_size: Some(4),
        ..ServerConfig::default()
    };
    // Content-Length at the limit: served; over it: 413 without calling the service.
    let mut h: Harness = Harness::new(cfg.clone());
    h.feed(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nabcd");
    assert_eq!(h.svc.bodies[0].borrow().data, b"abcd");
    let mut h: Harness = Harness::new(cfg.clone());
    h.feed(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nabcde");
    assert!(h.svc.requests.is_empty());
    h.write_canned();
    assert!(h.take_out().starts_with("HTTP/1.1 413 "));
    assert!(h.end().close);
    // Chunked: the body fails once it passes the limit, and reading stops.
    let mut h: Harness = Harness::new(cfg.clone());
    h.feed(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n");
    assert!(h.svc.bodies[0].borrow().end.is_none());
    h.feed(b"1\r\ne\r\n0\r\n\r\n");
    assert!(matches!(
        h.svc.bodies[0].borrow().end,
        Some(Err(BodyFailure::TooLarge(4)))
    ));
    assert_eq!(h.respond(413, ""), After::Close);
}

#[test]
fn a_full_body_buffer_holds_reads_until_there_is_room() {
    let mut h = harness();
    h.feed(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\n\r\nabc");
    h.svc.bodies[0].borrow_mut().full = true;
    h.feed(b"def");
    assert_eq!(
        h.svc.bodies[0].borrow().data,
        b"abc",
        "nothing pushed while full"
    );
    let a = h.end();
    assert!(!a.read && !a.parse_kept);
    assert_eq!(a.deadline, None, "a full buffer is not the client's stall");
    h.svc.bodies[0].borrow_mut().full = false;
    assert!(h.end().parse_kept);
    h.settle();
    assert_eq!(h.svc.bodies[0].borrow().data, b"abcdef");
    assert!(h.end().read);
}

#[test]
fn an_unread_body_is_drained_up_to_its_bound() {
    let cfg = ServerConfig {
        max_drain_bytes: 4,
        ..ServerConfig::default()
    };
    // Small enough to drain: the connection is kept.
    let mut h: Harness = Harness::new(cfg.clone());
    h.feed(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\n");
    h.svc.bodies[0].borrow_mut().gone = true;
    h.respond(200, "a");
    assert!(!h.end().close);
    h.feed(&[b"wxyz", GET_B].concat());
    assert_eq!(h.svc.requests, ["POST /", "GET /b"]);
    // Too much left: closing beats reading it all.
    let mut h: Harness = Harness::new(cfg);
    h.feed(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n");
    h.svc.bodies[0].borrow_mut().gone = true;
    h.respond(200, "a");
    assert!(h.end().close);
}

#[test]
fn a_bad_chunked_body_replaces_an_unwritten_answer() {
    let mut h = harness();
    h.feed(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
    assert!(matches!(
        h.svc.bodies[0].borrow().end,
        Some(Err(BodyFailure::Malformed(_)))
    ));
    assert_eq!(h.write_canned(), After::Close);
    assert!(h.take_out().starts_with("HTTP/1.1 400 "));
    assert!(h.end().close);
}

#[test]
fn a_bad_head_after_good_ones_is_answered_in_order() {
    let mut h = harness();
    h.feed(&[GET_A, b"BAD\r\n\r\n"].concat());
    assert_eq!(h.svc.requests, ["GET /a"]);
    h.respond(200, "a");
    assert_eq!(h.write_canned(), After::Close);
    let out = h.take_out();
    assert!(out.starts_with(&ok("a")), "{out}");
    assert!(out[ok("a").len()..].starts_with("HTTP/1.1 400 "));
    assert!(h.end().close);
}

#[test]
fn peer_close_fails_a_body_and_closes_after_the_answers() {
    let mut h = harness();
    h.feed(
        &[
            GET_A,
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nab",
        ]
        .concat(),
    );
    h.conn.peer_closed();
    assert!(matches!(
        h.svc.bodies[0].borrow().end,
        Some(Err(BodyFailure::Incomplete))
    ));
    assert!(!h.end().close, "two answers still to write");
    assert_eq!(h.respond(200, "a"), After::Next);
    // The last answer says it closes.
    assert_eq!(h.respond(200, "b"), After::Close);
    assert_eq!(h.take_out(), [ok("a"), ok_close("b")].concat());
    assert!(h.end().close);
}

#[test]
fn drain_answers_what_is_in_flight_then_closes() {
    let mut h = harness();
    h.feed(GET_A);
    h.conn.drain(false);
    h.feed(GET_B);
    assert_eq!(h.svc.requests, ["GET /a"], "no new request once draining");
    assert_eq!(h.respond(200, "a"), After::Close);
    assert_eq!(h.take_out(), ok_close("a"));
    assert!(h.end().close);
    // A kept-alive connection between requests closes at once.
    let mut h = harness();
    h.feed(GET_A);
    assert_eq!(h.respond(200, "a"), After::Next);
    assert_eq!(h.take_out(), ok("a"));
    h.conn.drain(false);
    assert!(h.end().close);
}

#[test]
fn drain_closes_a_connection_that_sent_nothing_after_the_grace() {
    let grace = ServerConfig::default().drain_first_request_grace;
    // Accepted just before the shutdown, nothing sent: it waits for its first request
    // until the grace from its opening has passed, then closes.
    let mut h = harness();
    h.advance(grace - Duration::from_millis(1));
    h.conn.drain(false);
    let a = h.end();
    assert!(!a.close && a.read, "{a:?}");
    assert_eq!(a.deadline, Some(h.now + Duration::from_millis(1)));
    h.advance(Duration::from_millis(1));
    assert!(h.end().close);
    h.feed(GET_A);
    assert!(h.svc.requests.is_empty(), "{:?}", h.svc.requests);
    // Open longer than that: closed at once (hyper does the same).
    let mut h = harness();
    h.advance(grace);
    h.conn.drain(false);
    assert!(h.end().close);
    // With no grace, even a new one.
    let mut h = Harness::<false>::new(
        ServerConfig::default().with_drain_first_request_grace(Duration::ZERO),
    );
    h.conn.drain(false);
    assert!(h.end().close);
}

#[test]
fn drain_still_answers_a_request_begun_or_waiting() {
    // Open for a while, its request in the socket, not read yet: it is answered, as the
    // connection's last.
    let mut h = harness();
    h.advance(Duration::from_secs(5));
    h.conn.drain(true);
    assert!(!h.end().close, "waits for the request it was sent");
    h.feed(GET_A);
    h.feed(GET_B);
    assert_eq!(h.svc.requests, ["GET /a"]);
    assert_eq!(h.respond(200, "a"), After::Close);
    assert_eq!(h.take_out(), ok_close("a"));
    assert!(h.end().close);
    // Half a head when the shutdown came: the request is finished and answered.
    let mut h = harness();
    h.feed(GET_A);
    assert_eq!(h.respond(200, "a"), After::Next);
    h.take_out();
    h.feed(&GET_B[..10]);
    h.conn.drain(false);
    h.feed(&GET_B[10..]);
    assert_eq!(h.svc.requests, ["GET /a", "GET /b"]);
    assert_eq!(h.respond(200, "b"), After::Close);
    assert_eq!(h.take_out(), ok_close("b"));
}

#[test]
fn service_errors_answer_500_and_a_failure_closes() {
    let mut h = harness();
    h.feed(&[GET_A, GET_B].concat());
    let clock = h.clock();
    // A handler panic: the connection's state is intact, so it stays open.
    h.front_id();
    assert_eq!(
        h.conn
            .respond_error(clock, StatusCode::INTERNAL_SERVER_ERROR, false, &mut h.out),
        After::Next
    );
    // A service error ends the connection.
    h.front_id();
    assert_eq!(
        h.conn
            .respond_error(clock, StatusCode::INTERNAL_SERVER_ERROR, true, &mut h.out),
        After::Close
    );
    let out = h.take_out();
    assert_eq!(out.matches("HTTP/1.1 500 Internal Server Error").count(), 2);
    assert_eq!(out.matches("connection: close").count(), 1);
    assert!(h.end().close);
}

#[test]
fn an_idle_connection_keeps_no_buffer() {
    let mut h = harness();
    h.feed(GET_A);
    h.respond(200, "a");
    assert_eq!(h.conn.kept.capacity(), 0);
    assert!(
        h.conn.queue.capacity() > 0,
        "the queue serves the whole round"
    );
    h.end();
    assert_eq!(
        h.conn.queue.capacity(),
        0,
        "no request queue after the round"
    );
    h.feed(b"GET /b HT");
    assert!(h.conn.kept.capacity() > 0);
    h.feed(b"TP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(h.conn.kept.capacity(), 0);
}
