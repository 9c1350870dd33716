//! The server side of an HTTP/1.1 connection as a sans-IO machine.
//!
//! [`ServerConn`] holds everything HTTP/1 decides about one connection: which bytes are a
//! request head, which a body, which requests are in flight and in what order their
//! responses go out, what each response's framing and keep-alive are, when `100 Continue`
//! may be sent, when the connection must close, and which deadline applies. It owns no
//! socket, thread, clock or task: the driver (`http::server`) gives it the bytes read and
//! the time ([`Clock`]), gives it the service's responses in request order, and applies
//! what it returns ([`Actions`]: read or hold, close, the next deadline; the bytes to write
//! go into the caller's output buffer).
//!
//! The service side is behind two small traits, so the machine runs the same in the
//! server and in the deterministic tests (`tests.rs`): [`Dispatch`] turns a parsed head
//! into the driver's per-request state (calling the service), and [`BodySink`] takes the
//! request body's bytes.

use super::body::{BodyChunk, BodyDecoder, BodyEncoder};
use super::framing::BodyFraming;
use super::parse::{parse_request_head, RequestHead};
pub(crate) use crate::proto::shared::{BodyFailure, BodySink, Clock};
use http::{HeaderMap, Method, StatusCode, Version};
use std::collections::VecDeque;
use std::time::Instant;

// The echo service: the fuzz harness's, and the client-server pair tests'.
#[cfg(any(feature = "fuzzing", all(test, feature = "client")))]
mod echo;
mod limits;
mod respond;
mod round;
mod spare_queue;
#[cfg(test)]
mod tests;

#[cfg(any(feature = "fuzzing", all(test, feature = "client")))]
pub(crate) use echo::serve_pieces;
pub(crate) use limits::Limits;

/// Pipelined requests go through each stage (parse, call, write) in groups of up to this
/// many: each stage's code then runs several times while it is in the instruction cache,
/// instead of all of it once per request, which together is larger than a core's L1i
/// (callgrind's cache simulation, pipelined x16: 698 -> 312 I1 misses per request). Four
/// keeps each allocation size's live count within glibc's per-thread cache (7).
const GROUP: usize = 4;

/// The interim response a client that sent `Expect: 100-continue` waits for.
const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// A request's body, as the driver is to make it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NewBody<'a> {
    /// The exact length, when Content-Length framed it.
    pub length: Option<u64>,
    /// The client waits for `100 Continue` before it sends the body: the sink's `wanted`
    /// is to wake the driver when it turns true.
    pub expect_continue: bool,
    /// The whole body, when it came with its head (Content-Length framed): the driver
    /// makes the body from it and returns no sink.
    pub whole: Option<&'a [u8]>,
}

/// What the driver made of a request.
pub(crate) struct Dispatched<X, B> {
    pub exchange: X,
    /// The body's sink: required when the request has a body.
    pub body: Option<B>,
    /// False when the service was not ready: no request after this one is parsed (and
    /// reads are held) until the driver calls [`ServerConn::unpark`].
    pub called: bool,
}

/// The driver's side of dispatching requests.
pub(crate) trait Dispatch {
    /// The driver's per-request state (the service's future, then its response).
    type Exchange;
    type Body: BodySink;
    /// Whether this upgrade request is handed to another owner
    /// ([`ServerConn::take_upgrade`]) rather than answered as a plain request.
    fn hands_off(&self, head: &RequestHead) -> bool;

    /// A request head arrived: call the service (or park the request if it is not ready).
    fn dispatch(
        &mut self,
        head: RequestHead,
        body: Option<NewBody<'_>>,
    ) -> Dispatched<Self::Exchange, Self::Body>;

    /// Called after each [`GROUP`] of requests with no body left to read: most handlers
    /// answer in their first poll, and writing now frees the requests and their responses
    /// before the next group is parsed (so a deep pipeline is not all held at once).
    fn write_front(&mut self, conn: &mut ServerConn<Self::Body, Self::Exchange>, out: &mut Vec<u8>);
}

/// The connection leaves HTTP/1 ([`ServerConn::take_upgrade`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Upgrade {
    /// Hand it over from this upgrade request on (its bytes and what follows).
    HandOff(Vec<u8>),
    /// A `101` was written here: the bytes that followed the request.
    Switched(Vec<u8>),
}

/// What the driver is to do after a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Actions {
    /// Read the socket (false: hold reads).
    pub read: bool,
    /// Close once the output is written.
    pub close: bool,
    /// Call [`ServerConn::end_round`] again at this time (a timeout).
    pub deadline: Option<Instant>,
    /// Bytes are kept that can be parsed now: run [`ServerConn::receive`] with no new
    /// input.
    pub parse_kept: bool,
}

/// What comes after a response has been written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum After {
    /// The next response may follow.
    Next,
    /// The connection closes after this response; nothing else is written.
    Close,
}

/// What [`ServerConn::begin_response`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Started {
    /// The response had no body and is complete.
    Done(After),
    /// The head is written; the body follows with this framing (`write_data`,
    /// `finish_body`).
    Body(BodyFraming),
}

/// The response at the front of the queue, as the driver sees it.
pub(crate) enum Front<'a, X> {
    /// Nothing of its response is written yet.
    Pending(&'a mut X),
    /// Its head is written; its body is being written.
    Writing(&'a mut X),
    /// An error the machine answers itself (`write_canned`).
    Canned,
}

/// What is being read.
enum Reading<B> {
    /// Between requests, or within a head (`started`: when its first byte came, for the
    /// header-read timeout).
    Head { started: Option<Instant> },
    /// The body of the last request in the queue.
    Body(Box<BodyIn<B>>),
    /// An upgrade request waits, unparsed in `kept`, for the responses before it.
    UpgradeWaits,
    /// An upgrade request answered here waits for its answer; what came after it is kept
    /// unread: a `101` gives it to the new protocol ([`Upgrade::Switched`]), any other
    /// answer ends the connection.
    Switching,
    /// The upgrade request (handed off) or what followed its `101` (switched) is in
    /// `kept`, for the new owner.
    Upgraded { switched: bool },
    /// Nothing more is read (a last request, the peer's end, an error, shutdown): what
    /// arrives is discarded, and the connection closes once the queue is written.
    Stopped,
}

struct BodyIn<B> {
    sink: B,
    decoder: BodyDecoder,
    received: u64,
    /// When body bytes last arrived.
    progress: Instant,
    cont: Continue,
    /// The request said it is the last one: stop reading after its body.
    last: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Continue {
    NotExpected,
    /// The client waits for `100 Continue` before it sends the body.
    Owed,
    Sent,
}

/// One request in flight.
struct Slot<X> {
    version: Version,
    head_only: bool,
    /// A CONNECT: a `2xx` answer has no framing (the tunnel follows it).
    connect: bool,
    keep_alive: bool,
    state: SlotState<X>,
}

enum SlotState<X> {
    Pending(X),
    Writing(X, BodyEncoder),
    Canned(StatusCode),
}

/// One HTTP/1.1 server connection's protocol state. `B` is the request body sink, `X` the
/// driver's per-request state.
pub(crate) struct ServerConn<B, X> {
    /// Unparsed bytes kept across rounds (empty, without capacity, when idle).
    kept: Vec<u8>,
    reading: Reading<B>,
    /// Requests in flight, in order; their responses go out in this order.
    queue: VecDeque<Slot<X>>,
    /// The last request in the queue waits for the service to be ready.
    parked: bool,
    /// Parsing stopped on something other than the end of the input (a parked request,
    /// the pipeline depth, a full body buffer, an upgrade waiting): the kept bytes are to
    /// be parsed again once that is gone, not before (they would only be incomplete again).
    held_back: bool,
    served: usize,
    /// Graceful shutdown while a first request (or one begun) was still to come: it is
    /// read and answered as the connection's last.
    last_request: bool,
    /// Graceful shutdown found a new connection with nothing sent: its first request
    /// must begin within `drain_first_request_grace` of its opening.
    first_request_grace: bool,
    /// When the queue last became empty (for the idle timeout).
    idle_since: Instant,
}

impl<B: BodySink, X: 'static> ServerConn<B, X> {
    pub(crate) fn new(now: Instant) -> ServerConn<B, X> {
        ServerConn {
            kept: Vec::new(),
            reading: Reading::Head { started: None },
            queue: VecDeque::new(),
            parked: false,
            held_back: false,
            served: 0,
            last_request: false,
            first_request_grace: false,
            idle_since: now,
        }
    }

    /// Takes bytes read from the socket (empty: go on with the bytes kept), parses every
    /// request it can, feeds bodies and dispatches requests; responses the driver writes
    /// meanwhile (`Dispatch::write_front`) and errors the machine answers go into `out`.
    pub(crate) fn receive<D>(
        &mut self,
        clock: Clock,
        data: &[u8],
        limits: &Limits,
        d: &mut D,
        out: &mut Vec<u8>,
    ) where
        D: Dispatch<Body = B, Exchange = X>,
    {
        if self.kept.is_empty() {
            let used = self.process(clock, data, limits, d, out);
            if used < data.len() {
                self.kept.extend_from_slice(&data[used..]);
            }
        } else {
            let mut buf = std::mem::take(&mut self.kept);
            buf.extend_from_slice(data);
            let used = self.process(clock, &buf, limits, d, out);
            buf.drain(..used);
            self.kept = buf;
        }
        if self.kept.is_empty() && self.kept.capacity() > 0 {
            self.kept = Vec::new();
        }
    }

    /// Parses requests and feeds bodies from `input`; returns the bytes used.
    fn process<D>(
        &mut self,
        clock: Clock,
        input: &[u8],
        limits: &Limits,
        d: &mut D,
        out: &mut Vec<u8>,
    ) -> usize
    where
        D: Dispatch<Body = B, Exchange = X>,
    {
        let mut pos = 0;
        self.held_back = false;
        'requests: loop {
            match &mut self.reading {
                // Nothing after a request we will not answer normally is read.
                Reading::Stopped => return input.len(),
                Reading::Upgraded { .. } => return pos,
                Reading::Switching => {
                    self.held_back = true;
                    return pos;
                }
                Reading::Body(_) => {
                    pos += self.feed_body(clock.now, &input[pos..], limits);
                    if matches!(self.reading, Reading::Body(_)) {
                        return pos;
                    }
                    continue;
                }
                Reading::UpgradeWaits if !self.queue.is_empty() => {
                    self.held_back = true;
                    return pos;
                }
                Reading::UpgradeWaits => self.reading = Reading::Head { started: None },
                Reading::Head { .. } => {}
            }
            if pos == input.len() {
                return pos;
            }
            if self.parked || self.queue.len() >= limits.max_pipelined {
                self.held_back = true;
                return pos;
            }
            // Plain requests are parsed a group at a time, then dispatched (see `GROUP`).
            let room = GROUP.min(limits.max_pipelined - self.queue.len());
            let mut group: [Option<(RequestHead, usize)>; GROUP] = Default::default();
            let mut grouped = 0;
            let mut ahead = pos;
            let next = loop {
                if grouped == room || ahead == input.len() {
                    break None;
                }
                match parse_request_head(&input[ahead..], &limits.head) {
                    Ok(Some((head, used))) if head.is_plain() => {
                        ahead += used;
                        group[grouped] = Some((head, used));
                        grouped += 1;
                    }
                    other => break Some(other),
                }
            };
            for (head, used) in group.into_iter().flatten() {
                pos += used;
                self.reading = Reading::Head { started: None };
                self.start_request(clock, head, &[], limits, d, out);
                if self.parked || !matches!(self.reading, Reading::Head { .. }) {
                    // The heads after it are parsed again once the service is ready, or
                    // never (nothing after a last request is read).
                    continue 'requests;
                }
            }
            let Some(next) = next else {
                continue;
            };
            match next {
                Ok(None) => {
                    if let Reading::Head { started } = &mut self.reading {
                        started.get_or_insert(clock.now);
                    }
                    return pos;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "bad request head");
                    self.answer_error(e.status(), Version::HTTP_11);
                    return input.len();
                }
                Ok(Some((head, used))) => {
                    self.reading = Reading::Head { started: None };
                    if head.upgrade && d.hands_off(&head) {
                        // The new owner takes the connection from this request on, once
                        // the responses before it are written.
                        self.held_back = !self.queue.is_empty();
                        self.reading = if self.held_back {
                            Reading::UpgradeWaits
                        } else {
                            Reading::Upgraded { switched: false }
                        };
                        return pos;
                    }
                    pos += used;
                    pos += self.start_request(clock, head, &input[pos..], limits, d, out);
                }
            }
        }
    }

    /// Dispatches a request whose head was parsed; `after` is the input after the head.
    /// Returns the bytes of `after` taken as the request's body (a whole body that came
    /// with its head goes to the driver at once, with no sink to feed).
    fn start_request<D>(
        &mut self,
        clock: Clock,
        head: RequestHead,
        after: &[u8],
        limits: &Limits,
        d: &mut D,
        out: &mut Vec<u8>,
    ) -> usize
    where
        D: Dispatch<Body = B, Exchange = X>,
    {
        // An upgrade answered as a plain request ends the connection: its client may
        // already speak the new protocol.
        let upgrade = head.upgrade;
        let mut keep_alive = head.keep_alive && !upgrade && !self.last_request;
        self.served += 1;
        if limits
            .max_requests_per_connection
            .is_some_and(|max| self.served >= max)
        {
            keep_alive = false;
        }
        let version = head.version;
        let framing = head.framing;
        if let (Some(max), BodyFraming::Length(n)) = (limits.max_body_size, framing) {
            if n > max {
                self.answer_error(StatusCode::PAYLOAD_TOO_LARGE, version);
                return 0;
            }
        }
        let expect_continue = head.expect_continue;
        let body = match framing {
            BodyFraming::Empty | BodyFraming::Length(0) | BodyFraming::UntilClose => None,
            BodyFraming::Length(n) => Some(NewBody {
                length: Some(n),
                expect_continue,
                // An upgrade's body is read as before (its answer may switch protocols).
                whole: usize::try_from(n)
                    .ok()
                    .and_then(|n| after.get(..n))
                    .filter(|_| !upgrade),
            }),
            BodyFraming::Chunked => Some(NewBody {
                length: None,
                expect_continue,
                whole: None,
            }),
        };
        let taken = body.and_then(|b| b.whole).map_or(0, <[u8]>::len);
        let head_only = head.method == Method::HEAD;
        let connect = head.method == Method::CONNECT;
        let cont = if expect_continue {
            Continue::Owed
        } else {
            Continue::NotExpected
        };
        let Dispatched {
            exchange,
            body: sink,
            called,
        } = d.dispatch(head, body);
        match sink {
            Some(sink) if body.is_some() && taken == 0 => {
                self.reading = Reading::Body(Box::new(BodyIn {
                    sink,
                    decoder: BodyDecoder::new(framing),
                    received: 0,
                    progress: clock.now,
                    cont,
                    last: !keep_alive,
                }));
            }
            // Without a body, the service may take the connection with a `101`.
            _ if upgrade => self.reading = Reading::Switching,
            _ if !keep_alive => self.reading = Reading::Stopped,
            _ => {}
        }
        self.parked = !called;
        self.enqueue(Slot {
            version,
            head_only,
            connect,
            keep_alive,
            state: SlotState::Pending(exchange),
        });
        if called && self.queue.len() % GROUP == 0 && !matches!(self.reading, Reading::Body(_)) {
            // Not while the request's body is still to come: a bad body changes the answer.
            d.write_front(self, out);
        }
        taken
    }

    /// Queues `slot` last, in the thread's spare queue if this connection holds none.
    fn enqueue(&mut self, slot: Slot<X>) {
        if self.queue.capacity() == 0 {
            self.queue = spare_queue::take();
        }
        self.queue.push_back(slot);
    }

    /// Queues a response the machine makes itself, and stops reading requests.
    fn answer_error(&mut self, status: StatusCode, version: Version) {
        self.reading = Reading::Stopped;
        self.enqueue(Slot {
            version,
            head_only: false,
            connect: false,
            keep_alive: false,
            state: SlotState::Canned(status),
        });
    }

    /// Feeds request body bytes to the sink; returns the bytes used.
    fn feed_body(&mut self, now: Instant, input: &[u8], limits: &Limits) -> usize {
        let Reading::Body(body) = &mut self.reading else {
            return 0;
        };
        if !input.is_empty() {
            body.progress = now;
            if body.cont == Continue::Owed {
                // The client sends without waiting to be asked (RFC 9110 §10.1.1 lets the
                // server then omit the 100).
                body.cont = Continue::NotExpected;
            }
        }
        let mut pos = 0;
        loop {
            if !body.sink.has_room() {
                // The service is behind: keep the rest for later.
                self.held_back = true;
                return pos;
            }
            match body.decoder.decode(&input[pos..]) {
                Ok((used, BodyChunk::Data(data))) => {
                    pos += used;
                    body.received += data.len() as u64;
                    if let Some(max) = limits.max_body_size.filter(|max| body.received > *max) {
                        self.end_body(Err(BodyFailure::TooLarge(max)));
                        return input.len();
                    }
                    body.sink.push(data);
                }
                Ok((used, BodyChunk::End(trailers))) => {
                    self.end_body(Ok(trailers));
                    return pos + used;
                }
                Ok((used, BodyChunk::NeedMore)) => return pos + used,
                Err(e) => {
                    tracing::debug!(error = %e, "bad chunked request body");
                    self.end_body(Err(BodyFailure::Malformed(e.message())));
                    // The body is the last request's: answer it with the error if none of
                    // its response went out yet, else close after it. Never a second
                    // response for one request.
                    if let Some(slot) = self.queue.back_mut() {
                        slot.keep_alive = false;
                        if let SlotState::Pending(_) = slot.state {
                            slot.state = SlotState::Canned(e.status());
                            self.parked = false;
                        }
                    }
                    return input.len();
                }
            }
        }
    }

    /// Ends the body being read: a complete one goes on to the next request (or stops
    /// reading after a last one), a failed one stops reading.
    fn end_body(&mut self, result: Result<Option<HeaderMap>, BodyFailure>) {
        let next = match (&self.reading, &result) {
            (Reading::Body(b), Ok(_)) if !b.last => Reading::Head { started: None },
            _ => Reading::Stopped,
        };
        if let Reading::Body(b) = std::mem::replace(&mut self.reading, next) {
            match result {
                Ok(trailers) => b.sink.finish(trailers),
                Err(why) => b.sink.fail(why),
            }
        }
    }

    /// The service became ready and took the parked request: parsing goes on.
    pub(crate) fn unpark(&mut self) {
        self.parked = false;
    }

    /// The peer finished sending (EOF): a body in progress fails, nothing more is read,
    /// and the connection closes once the queue is written.
    pub(crate) fn peer_closed(&mut self) {
        if matches!(self.reading, Reading::Body(_)) {
            self.end_body(Err(BodyFailure::Incomplete));
        }
        self.reading = Reading::Stopped;
    }

    /// Graceful shutdown: no new request is read; those in flight are answered (the last
    /// with `connection: close`). A request begun (within a head, or `input_waiting`: the
    /// driver holds or the socket has bytes not yet given here) is still read and answered
    /// as the last: its client has sent it, and closing would fail it (the header-read
    /// timeout bounds the wait). A connection between keep-alive requests closes at once,
    /// as hyper's does; a new one with nothing sent waits for its first request only
    /// until `drain_first_request_grace` after it opened (see `deadline`).
    pub(crate) fn drain(&mut self, input_waiting: bool) {
        match &mut self.reading {
            Reading::Body(b) => b.last = true,
            Reading::Head { started } if input_waiting || started.is_some() => {
                self.last_request = true;
            }
            Reading::Head { .. } if self.served == 0 => {
                self.last_request = true;
                self.first_request_grace = true;
            }
            Reading::Head { .. } | Reading::UpgradeWaits => self.reading = Reading::Stopped,
            Reading::Switching | Reading::Upgraded { .. } | Reading::Stopped => {}
        }
    }

    /// Once the connection belongs to another protocol: an upgrade request to hand over
    /// (once it is next), or the bytes after a `101` written here (the machine is done
    /// with the connection).
    pub(crate) fn take_upgrade(&mut self) -> Option<Upgrade> {
        let Reading::Upgraded { switched } = self.reading else {
            return None;
        };
        self.reading = Reading::Stopped;
        let kept = std::mem::take(&mut self.kept);
        Some(if switched {
            Upgrade::Switched(kept)
        } else {
            Upgrade::HandOff(kept)
        })
    }

    /// Whether no more requests will be read after those in the queue.
    fn reads_no_more(&self) -> bool {
        match &self.reading {
            Reading::Stopped | Reading::Switching => true,
            Reading::Body(b) => b.last,
            _ => false,
        }
    }

    /// The driver's state of every request in flight (to poll their futures).
    pub(crate) fn exchanges_mut(&mut self) -> impl Iterator<Item = &mut X> {
        self.queue.iter_mut().filter_map(|s| match &mut s.state {
            SlotState::Pending(x) | SlotState::Writing(x, _) => Some(x),
            SlotState::Canned(_) => None,
        })
    }

    /// The driver's state of the last request (the one a parked request is).
    pub(crate) fn last_mut(&mut self) -> Option<&mut X> {
        match &mut self.queue.back_mut()?.state {
            SlotState::Pending(x) | SlotState::Writing(x, _) => Some(x),
            SlotState::Canned(_) => None,
        }
    }

    pub(crate) fn is_parked(&self) -> bool {
        self.parked
    }

    /// Nothing has been received yet (so the connection may still turn out to speak
    /// another protocol, e.g. the HTTP/2 preface).
    pub(crate) fn is_fresh(&self) -> bool {
        self.served == 0 && self.queue.is_empty() && self.kept.is_empty()
    }
}
