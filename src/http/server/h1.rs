//! The HTTP/1.1 driver: a connection's HTTP/1 state (`H1State`, the connection's context
//! until it leaves HTTP/1), the service side of the machine's `Dispatch`, and the writing
//! of ready responses (heads, files by `sendfile`, streaming bodies) in request order.

use super::exchange::{call_service, poll_call, ConnTls, Stage};
use super::h2::{with_h2, H2State, H2cUpgrade};
use super::round::{arm_timer, round_clock, with_round_output};
use super::Server;
use crate::engine::conn::Conn;
use crate::engine::time::Sleep;
use crate::http::body::{BodySender, Incoming};
use crate::http::config::ServerConfig;
use crate::http::file::{FileBody, SharedFile};
use crate::http::pump::{pump, Pumped, Room, Sink};
use crate::http::service::BoxError;
use crate::http::service::MakeService;
use crate::proto::h1::framing::BodyFraming;
use crate::proto::h1::parse::RequestHead;
use crate::proto::h1::server::{
    After, Clock, Dispatch, Dispatched, Front, Limits, NewBody, ServerConn, Started, Upgrade,
};
use crate::proto::header_maps;
use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use std::any::Any;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::Instant;
use tower_service::Service;

/// Responses with a Content-Length up to this are written without checking how much output
/// the connection has queued.
const SMALL_BODY: u64 = 16 * 1024;

/// Rounds of parsing kept bytes within one callback (each frees what held them back:
/// responses written, a parked request called); more go on in the next round.
const MAX_REPARSE: usize = 16;

type Machine<S, B> = ServerConn<BodySender, Stage<<S as Service<Request<Incoming>>>::Future, B>>;

pub(super) struct H1State<S: Service<Request<Incoming>>, B> {
    svc: S,
    waker: Waker,
    pub(super) h1: Machine<S, B>,
    timer: Option<Sleep>,
    tls: ConnTls,
    /// A connection's first bytes while they could still begin the HTTP/2 preface or an
    /// HTTP/1 request (at most 3): held back from the HTTP/1 machine until they tell.
    sniffed: Vec<u8>,
    /// The upgrade request answered here (the last one read): who takes the connection
    /// if its answer is a `101`.
    #[cfg(feature = "tunnel")]
    switch: Option<crate::http::switch::OnSwitch>,
}

impl<S: Service<Request<Incoming>>, B: 'static> H1State<S, B>
where
    S::Future: 'static,
{
    pub(super) fn new(conn: &Conn, svc: S, tls: ConnTls) -> H1State<S, B> {
        H1State {
            svc,
            waker: conn.waker(),
            h1: ServerConn::new(Instant::now()),
            timer: None,
            tls,
            sniffed: Vec::new(),
            #[cfg(feature = "tunnel")]
            switch: None,
        }
    }
}

/// What an HTTP/1 round did.
enum Round {
    /// Ran; the connection leaves HTTP/1 if an upgrade is next.
    Done(Option<Upgrade>),
    /// The connection speaks HTTP/2: its first bytes (if held back over several reads;
    /// empty: this round's data).
    ToHttp2(Vec<u8>),
}

/// What a connection's first bytes say it speaks.
#[derive(Debug, PartialEq, Eq)]
enum Sniffed {
    Http1,
    Http2,
    /// Fewer than the 4 bytes that tell ("P", "PR" may begin a POST or a PROPFIND): wait
    /// for more.
    Undecided,
}

/// Bytes of the preface after which a client can only be speaking HTTP/2 (`PRI ` begins no
/// HTTP/1 method a server answers); the machine checks the rest of the preface.
const PREFACE_TELLS: usize = 4;

fn sniff(first: &[u8], cfg: &ServerConfig) -> Sniffed {
    let preface = crate::proto::h2::frame::PREFACE;
    if cfg.http2.only {
        return Sniffed::Http2;
    }
    let n = first.len().min(PREFACE_TELLS);
    if !cfg.http2.h2c || first[..n] != preface[..n] {
        Sniffed::Http1
    } else if n == PREFACE_TELLS {
        Sniffed::Http2
    } else {
        Sniffed::Undecided
    }
}

/// Runs `f` on the connection's HTTP state (none once it is closed).
pub(super) fn with_state<S, B, R>(conn: &Conn, f: impl FnOnce(&mut H1State<S, B>) -> R) -> Option<R>
where
    S: Service<Request<Incoming>> + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    conn.with_context::<H1State<S, B>, _>(|st| st.map(f))
}

/// The service side of the machine's [`Dispatch`], for one callback.
struct Calls<'a, S> {
    svc: &'a mut S,
    waker: &'a Waker,
    conn: &'a Conn,
    cfg: &'a ServerConfig,
    tls: &'a ConnTls,
    #[cfg(feature = "tunnel")]
    switch: &'a mut Option<crate::http::switch::OnSwitch>,
}

impl<S, B> Dispatch for Calls<'_, S>
where
    S: Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Exchange = Stage<S::Future, B>;
    type Body = BodySender;
    fn hands_off(&self, head: &RequestHead) -> bool {
        if self.tls.is_tls() {
            return false;
        }
        match super::h2::h2c_upgrade(head) {
            Some(_) => self.cfg.http2.h2c,
            None => cfg!(feature = "hyper"),
        }
    }

    fn dispatch(
        &mut self,
        head: RequestHead,
        body: Option<NewBody<'_>>,
    ) -> Dispatched<Self::Exchange, BodySender> {
        #[cfg(feature = "tunnel")]
        let upgrade = head.upgrade;
        let (incoming, sender) = match body {
            None => (Incoming::empty(), None),
            Some(NewBody {
                whole: Some(data), ..
            }) => (Incoming::whole(Bytes::copy_from_slice(data)), None),
            Some(b) => {
                let (incoming, sender) = Incoming::channel(
                    self.waker.clone(),
                    b.length,
                    b.expect_continue,
                    self.cfg.body_buffer,
                );
                (incoming, Some(sender))
            }
        };
        let mut req = Request::new(incoming);
        *req.method_mut() = head.method;
        *req.uri_mut() = head.uri;
        *req.version_mut() = head.version;
        *req.headers_mut() = head.headers;
        self.tls.extend(&mut req);
        #[cfg(feature = "tunnel")]
        if upgrade {
            let switch = crate::http::switch::OnSwitch::default();
            req.extensions_mut().insert(switch.clone());
            *self.switch = Some(switch);
        }
        // A request with a body is polled once the round has decoded what came with its
        // head (`H1State::drive` polls every call): its first poll then finds the body
        // there, rather than waiting and being woken for another round.
        let poll_now = sender.is_none();
        let (exchange, called) = match call_service(self.svc, self.waker, req, poll_now) {
            Ok(stage) => (stage, true),
            Err(req) => (Stage::Waiting(req), false),
        };
        Dispatched {
            exchange,
            body: sender,
            called,
        }
    }

    fn write_front(&mut self, h1: &mut ServerConn<BodySender, Self::Exchange>, out: &mut Vec<u8>) {
        let mut cx = Context::from_waker(self.waker);
        write_ready(h1, self.conn, &mut cx, out, self.cfg);
    }
}

impl<S, B> H1State<S, B>
where
    S: Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Error: Into<BoxError>,
{
    /// The machine and, beside it, the service side of one callback (disjoint borrows).
    fn split<'a>(
        &'a mut self,
        conn: &'a Conn,
        cfg: &'a ServerConfig,
    ) -> (&'a mut Machine<S, B>, Calls<'a, S>) {
        let calls = Calls {
            svc: &mut self.svc,
            waker: &self.waker,
            conn,
            cfg,
            tls: &self.tls,
            #[cfg(feature = "tunnel")]
            switch: &mut self.switch,
        };
        (&mut self.h1, calls)
    }

    /// Feeds the round's bytes (or, with none, the bytes kept) to the machine.
    pub(super) fn receive(
        &mut self,
        conn: &Conn,
        data: &[u8],
        cfg: &ServerConfig,
        limits: &Limits,
        out: &mut Vec<u8>,
    ) {
        let (h1, mut calls) = self.split(conn, cfg);
        h1.receive(round_clock(), data, limits, &mut calls, out);
    }

    /// Calls a parked request once the service is ready, polls every call in flight,
    /// writes what is ready, sends the round's output and applies the machine's actions.
    /// Returns the bytes of an upgrade request to hand over, once it is next.
    pub(super) fn drive(
        &mut self,
        conn: &Conn,
        cfg: &ServerConfig,
        limits: &Limits,
        out: &mut Vec<u8>,
    ) -> Option<Upgrade> {
        let waker = self.waker.clone();
        let mut cx = Context::from_waker(&waker);
        for _ in 0..MAX_REPARSE {
            if self.h1.is_parked() {
                self.call_parked(conn, cfg);
            }
            // Let every pending call make progress, even those whose turn has not come.
            for stage in self.h1.exchanges_mut() {
                if let Stage::Calling(_) = stage {
                    let Stage::Calling(fut) = std::mem::replace(stage, Stage::Moving) else {
                        unreachable!("matched above")
                    };
                    *stage = poll_call(fut, &mut cx);
                }
            }
            write_ready(&mut self.h1, conn, &mut cx, out, cfg);
            let actions = self
                .h1
                .end_round(round_clock(), limits, conn.reads_paused(), out);
            if actions.parse_kept {
                // What held the kept bytes back is gone (responses written, the service
                // ready, room in a body's buffer): parse them now.
                self.receive(conn, &[], cfg, limits, out);
                continue;
            }
            if let Some(prefix) = self.h1.take_upgrade() {
                // The responses before the upgrade go first.
                if !out.is_empty() {
                    let _ = conn.send(out);
                }
                return Some(prefix);
            }
            if !out.is_empty() {
                let _ = conn.send(out);
                out.clear();
            }
            if actions.read == conn.reads_held() {
                if actions.read {
                    conn.resume_reads();
                } else {
                    conn.hold_reads();
                }
            }
            if actions.close {
                conn.close();
                return None;
            }
            self.arm_timer(actions.deadline);
            return None;
        }
        // Bounded: the rest goes on in the next round.
        if !out.is_empty() {
            let _ = conn.send(out);
            out.clear();
        }
        self.waker.wake_by_ref();
        None
    }

    /// Calls the parked request if the service is ready now.
    fn call_parked(&mut self, conn: &Conn, cfg: &ServerConfig) {
        let Some(stage) = self.h1.last_mut() else {
            return;
        };
        let Stage::Waiting(req) = std::mem::replace(stage, Stage::Moving) else {
            return;
        };
        let (h1, calls) = self.split(conn, cfg);
        let called = call_service(calls.svc, calls.waker, *req, true);
        let now_called = called.is_ok();
        if let Some(stage) = h1.last_mut() {
            *stage = match called {
                Ok(stage) => stage,
                Err(req) => Stage::Waiting(req),
            };
        }
        if now_called {
            h1.unpark();
        }
    }

    fn arm_timer(&mut self, deadline: Option<Instant>) {
        arm_timer(&mut self.timer, deadline, &self.waker);
    }
}

/// Writes the responses that are ready at the front of the queue into `out`, in order:
/// heads and bodies through the machine, a file by `sendfile`, a streaming body until it
/// waits (or the socket's output is over `response_buffer`: `on_drained` comes back here).
fn write_ready<F: 'static, B>(
    h1: &mut ServerConn<BodySender, Stage<F, B>>,
    conn: &Conn,
    cx: &mut Context<'_>,
    out: &mut Vec<u8>,
    cfg: &ServerConfig,
) where
    B: Body + Send + 'static,
    B::Error: Into<BoxError>,
{
    let clock = round_clock();
    loop {
        let Some(front) = h1.front(out) else {
            return;
        };
        let after = match front {
            Front::Canned => h1.write_canned(clock, out),
            Front::Pending(stage) => match std::mem::replace(stage, Stage::Moving) {
                Stage::Failed { status, close } => h1.respond_error(clock, status, close, out),
                Stage::Ready(resp) => match start_response(h1, clock, resp, conn, out, cfg) {
                    Some(after) => after,
                    None => continue,
                },
                waiting => {
                    *stage = waiting;
                    return;
                }
            },
            Front::Writing(stage) => {
                let Stage::Streaming(body) = std::mem::replace(stage, Stage::Moving) else {
                    h1.abort_response();
                    return;
                };
                match stream_body(h1, clock, body, conn, cx, out, cfg) {
                    Some(after) => after,
                    None => return,
                }
            }
        };
        if after == After::Close {
            return;
        }
    }
}

/// Writes a response's head, and its body if it is a file: the response is then done
/// (`Some`); `None`: its body streams (`Front::Writing` next).
fn start_response<F: 'static, B>(
    h1: &mut ServerConn<BodySender, Stage<F, B>>,
    clock: Clock,
    resp: Response<B>,
    conn: &Conn,
    out: &mut Vec<u8>,
    cfg: &ServerConfig,
) -> Option<After>
where
    B: Body + Send + 'static,
{
    let (mut parts, mut body) = resp.into_parts();
    cfg.advertise(&mut parts.headers);
    let exact = body.size_hint().exact();
    let started = h1.begin_response(clock, &mut parts, exact, out);
    // The head is written: its map serves the next head parsed on this thread.
    header_maps::give(std::mem::take(&mut parts.headers));
    let framing = match started {
        Started::Done(after) => return Some(after),
        Started::Body(framing) => framing,
    };
    // A file: the body itself, or one a service shared behind a box (`fibr::fs`).
    let sized = matches!(framing, BodyFraming::Length(_));
    let is_file = (&mut body as &mut dyn Any).is::<FileBody>();
    let mut shared = match parts.extensions.get::<SharedFile>() {
        Some(f) if sized && !is_file => f.claim(exact),
        _ => None,
    };
    let file = match &mut shared {
        Some(file) => Some(file),
        None if sized => (&mut body as &mut dyn Any).downcast_mut::<FileBody>(),
        None => None,
    };
    if let Some(file) = file {
        // A file: the head goes first, then the kernel copies the file.
        let _ = conn.send(out);
        out.clear();
        let (f, offset, len) = file.take_range();
        let sent = conn
            .send_file(f, offset, len)
            .map_err(|e| e.to_string())
            .and_then(|()| h1.sent_elsewhere(len).map_err(|e| e.to_string()))
            .and_then(|()| h1.finish_body(clock, None, out).map_err(|e| e.to_string()));
        return Some(sent.unwrap_or_else(|e| {
            tracing::debug!(error = %e, "send_file failed");
            h1.abort_response();
            After::Close
        }));
    }
    if let Some(Front::Writing(stage)) = h1.front(out) {
        *stage = Stage::Streaming(Box::pin(body));
    }
    None
}

/// Writes what a streaming response body has ready: `Some` once it has ended (or failed,
/// which closes the connection), `None` while it waits.
fn stream_body<F: 'static, B>(
    h1: &mut ServerConn<BodySender, Stage<F, B>>,
    clock: Clock,
    mut body: Pin<Box<B>>,
    conn: &Conn,
    cx: &mut Context<'_>,
    out: &mut Vec<u8>,
    cfg: &ServerConfig,
) -> Option<After>
where
    B: Body + Send + 'static,
    B::Error: Into<BoxError>,
{
    // A body of small known length is bounded anyway: skip the output check (it takes the
    // connection's lock) and write it whole.
    let small = h1.body_remaining().is_some_and(|n| n <= SMALL_BODY);
    let mut sink = H1Body {
        h1,
        clock,
        conn,
        out,
        limit: (!small).then_some(cfg.response_buffer),
        ended: None,
    };
    let pumped = pump(body.as_mut(), cx, &mut sink);
    let (h1, out) = (sink.h1, sink.out);
    match sink.ended {
        None if pumped == Pumped::Waiting => {
            if let Some(Front::Writing(stage)) = h1.front(out) {
                *stage = Stage::Streaming(body);
            }
            None
        }
        None => Some(After::Close),
        Some(Ok(after)) => Some(after),
        Some(Err(e)) => {
            // Half a response went out: only closing tells the client.
            tracing::warn!(error = %e, "a response body failed mid-stream; closing");
            h1.abort_response();
            Some(After::Close)
        }
    }
}

/// A response body's way into HTTP/1 framing (the machine's `BodyEncoder`), bounded by
/// the connection's queued output.
struct H1Body<'a, X> {
    h1: &'a mut ServerConn<BodySender, X>,
    clock: Clock,
    conn: &'a Conn,
    out: &'a mut Vec<u8>,
    /// `response_buffer`, unless the body is small enough to write whole.
    limit: Option<usize>,
    /// How the response ended, once it has.
    ended: Option<Result<After, String>>,
}

impl<X: 'static> H1Body<'_, X> {
    fn finish(&mut self, trailers: Option<&http::HeaderMap>) {
        let end = self.h1.finish_body(self.clock, trailers, self.out);
        self.ended = Some(end.map_err(|e| e.to_string()));
    }
}

impl<X: 'static, D: bytes::Buf> Sink<D> for H1Body<'_, X> {
    fn ready(&mut self) -> Room {
        let Some(limit) = self.limit else {
            return Room::Go;
        };
        if self.out.len() + self.conn.queued_bytes() < limit {
            return Room::Go;
        }
        // Let the socket drain first; on_drained comes back here.
        if self.out.len() >= limit {
            let _ = self.conn.send(self.out);
            self.out.clear();
        }
        if self.conn.queued_bytes() >= limit {
            self.conn.wake_when_drained();
            return Room::Wait;
        }
        Room::Go
    }

    fn data(&mut self, mut data: D, last: bool) -> bool {
        if let Err(e) = self.h1.write_data(&mut data, self.out) {
            self.ended = Some(Err(e.to_string()));
            return false;
        }
        if last {
            self.finish(None);
        }
        true
    }

    fn trailers(&mut self, trailers: http::HeaderMap) {
        self.finish(Some(&trailers));
    }

    fn end(&mut self) {
        self.finish(None);
    }

    fn failed(&mut self, err: BoxError) {
        self.ended = Some(Err(err.to_string()));
    }
}

impl<M, Marker, S, B> Server<M, Marker>
where
    M: MakeService<Marker, Service = S, Body = B>,
    Marker: 'static,
    S: Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    /// One round: takes `data` (empty for a wake-up, which goes on with the bytes kept),
    /// calls and polls, sends what is ready. A request asking for an upgrade hands the
    /// connection to hyper instead.
    pub(super) fn round(&self, conn: &Conn, data: &[u8]) {
        let cfg = &self.shared().config;
        let limits = &self.shared().h1_limits;
        let draining = data.is_empty() && self.shared().live.draining();
        let upgrade = with_state::<S, B, _>(conn, |st| {
            if draining {
                st.h1.drain(!st.sniffed.is_empty() || conn.input_waiting());
            }
            // Taken only by a round that reads: a wake-up must not lose them.
            let mut seen: Vec<u8>;
            let input = if !data.is_empty() && st.h1.is_fresh() {
                seen = std::mem::take(&mut st.sniffed);
                if !seen.is_empty() {
                    seen.extend_from_slice(data);
                }
                let first = if seen.is_empty() { data } else { &seen[..] };
                match sniff(first, cfg) {
                    Sniffed::Http2 => return Round::ToHttp2(seen),
                    Sniffed::Undecided => {
                        st.sniffed = if seen.is_empty() { data.to_vec() } else { seen };
                        return Round::Done(None);
                    }
                    Sniffed::Http1 => first,
                }
            } else {
                data
            };
            Round::Done(with_round_output(|out| {
                st.receive(conn, input, cfg, limits, out);
                st.drive(conn, cfg, limits, out)
            }))
        });
        let upgrade = match upgrade {
            None => {
                let h2_limits = &self.shared().h2_limits;
                with_h2::<S, B, _>(conn, |st| st.round(conn, data, cfg, h2_limits, draining));
                return;
            }
            Some(Round::ToHttp2(seen)) => {
                // h2c with prior knowledge: the connection opened with the preface.
                if let Some(st) = conn.take_context::<H1State<S, B>>() {
                    let first = if seen.is_empty() { data } else { &seen[..] };
                    H2State::<S, B>::start(
                        conn,
                        st.svc,
                        st.tls,
                        cfg,
                        &self.shared().h2_limits,
                        first,
                    );
                }
                return;
            }
            Some(Round::Done(upgrade)) => upgrade,
        };
        let prefix = match upgrade {
            None => return,
            Some(Upgrade::Switched(read)) => return self.switch(conn, read),
            Some(Upgrade::HandOff(prefix)) => prefix,
        };
        if let Some(h2c) = H2cUpgrade::parse(&prefix, cfg) {
            if let Some(st) = conn.take_context::<H1State<S, B>>() {
                H2State::<S, B>::start_upgraded(
                    conn,
                    st.svc,
                    st.tls,
                    cfg,
                    &self.shared().h2_limits,
                    h2c,
                );
            }
            // Without hyper nothing follows (no hand-off), and the return is the last word.
            #[cfg_attr(not(feature = "hyper"), allow(clippy::needless_return))]
            return;
        }
        #[cfg(feature = "hyper")]
        if let Some(st) = conn.take_context::<H1State<S, B>>() {
            self.shared().forget(conn);
            crate::http::upgrade::hand_off(conn, prefix, st.svc);
        }
    }

    /// A `101` was written: the service that claimed the upgrade takes the connection
    /// (none did: it closes, since what follows is not HTTP/1).
    fn switch(&self, conn: &Conn, read: Vec<u8>) {
        let Some(st) = conn.take_context::<H1State<S, B>>() else {
            return;
        };
        self.shared().forget(conn);
        #[cfg(feature = "tunnel")]
        if let Some(take) = st.switch.as_ref().and_then(|s| s.take()) {
            drop(st);
            // Reads held while the service took its time to answer are the new
            // protocol's now, and it holds them itself when it must.
            conn.resume_reads();
            let conn = conn.clone();
            return take(crate::http::switch::Switched {
                conn,
                read,
                in_round: true,
            });
        }
        let _ = (st, read);
        conn.close();
    }
}
