//! The HTTP/1.1 server: a fibr [`Handler`] that drives the sans-IO connection machine
//! (`h1::server::ServerConn`) with a tower service.
//!
//! The machine decides everything HTTP/1 decides; this driver does the rest: it feeds the
//! machine the round's bytes and time, calls the service and polls its futures and
//! response bodies, and applies what the machine returns (reads held or resumed, the
//! connection closed, a timer armed). Each round parses every complete request in the
//! bytes read, polls the response futures right away (most finish in that first poll),
//! and sends every response that is ready, in request order, in the round's single write.
//! Futures that are still pending hold the connection's waker; their wake-up runs another
//! round.

use super::body::{BodySender, Incoming};
use super::config::ServerConfig;
use super::file::FileBody;
use super::server_h2::{with_h2, H2State, H2cUpgrade};
use super::service::{BoxError, ConnInfo, MakeService, UnixPeer};
use crate::engine::conn::live::{Admission, LiveCount};
use crate::engine::conn::{Conn, Handler};
use crate::engine::time::Sleep;
use crate::proto::date::{http_date, DATE_LEN};
use crate::proto::h1::parse::RequestHead;
use crate::proto::h1::server::{
    After, BodyFraming, Clock, Dispatch, Dispatched, Front, NewBody, ServerConn, Started, Upgrade,
};
use http::{Request, Response, StatusCode};
use http_body::Body;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;
use tower_service::Service;

/// Responses with a Content-Length up to this are written without checking how much output
/// the connection has queued.
const SMALL_BODY: u64 = 16 * 1024;

/// Rounds of parsing kept bytes within one callback (each frees what held them back:
/// responses written, a parked request called); more go on in the next round.
const MAX_REPARSE: usize = 16;

thread_local! {
    /// Per-thread buffer a round's responses are encoded into before the one send.
    static ROUND_OUTPUT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// The round's clock and Date header, each read at most once per round (a round
    /// lasts microseconds; pipelined responses share them).
    static ROUND_CLOCK: Cell<Option<Instant>> = const { Cell::new(None) };
    static ROUND_DATE: Cell<Option<[u8; DATE_LEN]>> = const { Cell::new(None) };
}

/// Now, as of this round (see `ROUND_CLOCK`).
fn round_now() -> Instant {
    ROUND_CLOCK.with(|c| match c.get() {
        Some(t) => t,
        None => {
            let t = Instant::now();
            c.set(Some(t));
            t
        }
    })
}

/// The Date header value, as of this round.
fn round_date() -> [u8; DATE_LEN] {
    ROUND_DATE.with(|c| match c.get() {
        Some(d) => d,
        None => {
            let d = http_date();
            c.set(Some(d));
            d
        }
    })
}

/// The machine's view of the round's time.
pub(super) fn round_clock() -> Clock {
    Clock {
        now: round_now(),
        date: round_date,
    }
}

/// Runs one round of a connection's HTTP work with an empty output buffer, which the round
/// sends before it ends (`ConnState::drive`). The buffer is taken out of the thread-local
/// (not borrowed), so even a nested round could never see another connection's bytes.
pub(super) fn with_round_output<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    let mut out = ROUND_OUTPUT.with(|o| o.take());
    out.clear();
    ROUND_CLOCK.with(|c| c.set(None));
    ROUND_DATE.with(|c| c.set(None));
    let r = f(&mut out);
    if out.capacity() <= 256 * 1024 {
        out.clear();
        ROUND_OUTPUT.with(|o| o.replace(out));
    }
    r
}

/// Serves a tower service (or a make-service) over HTTP/1.1 as a fibr connection handler.
pub struct Server<M, Marker = super::service::ServiceMarker> {
    shared: Arc<Shared<M>>,
    _marker: PhantomData<fn() -> Marker>,
}

pub(crate) struct Shared<M> {
    make: M,
    config: ServerConfig,
    /// Live connections, for graceful shutdown.
    conns: Mutex<Vec<Conn>>,
    /// What a drain waits for: `conns`, HTTP/3's connections, and (under `fibr::serve`)
    /// connections accepted and not yet opened.
    live: Arc<LiveCount>,
    /// Set when draining starts: HTTP/3 connections send GOAWAY.
    #[cfg(feature = "http3")]
    drain_started: crate::engine::sync_notify::Notify,
}

impl<M> Server<M> {
    /// A server for `app` with the default [`ServerConfig`].
    pub fn new<Marker>(app: M) -> Server<M, Marker>
    where
        M: MakeService<Marker>,
    {
        Server::with_config(app, ServerConfig::default())
    }
}

impl<M, Marker> Server<M, Marker> {
    /// A server for `app` with `config`.
    pub fn with_config(app: M, config: ServerConfig) -> Server<M, Marker> {
        Server {
            shared: Arc::new(Shared {
                make: app,
                config,
                conns: Mutex::new(Vec::new()),
                live: Arc::new(LiveCount::new()),
                #[cfg(feature = "http3")]
                drain_started: crate::engine::sync_notify::Notify::new(),
            }),
            _marker: PhantomData,
        }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared<M>> {
        &self.shared
    }
}

impl<M> Shared<M> {
    /// A connection left this server (closed, or handed to hyper for an upgrade).
    fn forget(&self, conn: &Conn) {
        self.conns.lock().unwrap().retain(|c| !c.same(conn));
        self.live.left();
    }

    /// Graceful shutdown: idle connections close now, busy ones after their response.
    pub(crate) fn start_draining(&self) {
        // Set first, so that the connections woken below see it.
        self.live
            .start_draining(self.config.drain_first_request_grace);
        #[cfg(feature = "http3")]
        self.drain_started.notify();
        // A snapshot: the list itself stays, so a connection closing meanwhile is still
        // forgotten (taking the list out and putting it back would resurrect it, and with
        // it a cycle that keeps the whole runtime alive).
        let conns = self.conns.lock().unwrap().clone();
        for c in conns.iter() {
            c.waker().wake();
        }
    }

    /// The count `fibr::serve`'s listener admits its connections into.
    pub(crate) fn live(&self) -> &Arc<LiveCount> {
        &self.live
    }
}

/// One request's progress on the driver's side, from the service call to the last byte of
/// its response (the machine keeps its order, framing and keep-alive).
pub(super) enum Stage<F, B> {
    /// The service was not ready: the request waits (boxed: rare, and large).
    Waiting(Box<Request<Incoming>>),
    Calling(Pin<Box<F>>),
    Ready(Response<B>),
    /// The service failed: answer with this status (`close`: and end the connection).
    Failed {
        status: StatusCode,
        close: bool,
    },
    Streaming(Pin<Box<B>>),
    /// Between two of the above while the driver moves it along.
    Moving,
}

/// Polls a service call once: the stage it is in afterwards. A failure or a panic becomes
/// a 500 (a failed call also ends the connection).
pub(super) fn poll_call<F, B, E>(mut fut: Pin<Box<F>>, cx: &mut Context<'_>) -> Stage<F, B>
where
    F: Future<Output = Result<Response<B>, E>>,
    E: Into<BoxError>,
{
    match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
        Ok(Poll::Pending) => Stage::Calling(fut),
        Ok(Poll::Ready(Ok(resp))) => Stage::Ready(resp),
        Ok(Poll::Ready(Err(e))) => {
            tracing::error!(error = %e.into(), "the service returned an error");
            Stage::Failed {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                close: true,
            }
        }
        Err(payload) => {
            // The connection's state is intact: it stays open.
            super::panic::log_panic("a request handler", &*payload);
            Stage::Failed {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                close: false,
            }
        }
    }
}

type Machine<S, B> = ServerConn<BodySender, Stage<<S as Service<Request<Incoming>>>::Future, B>>;

struct ConnState<S: Service<Request<Incoming>>, B> {
    svc: S,
    waker: Waker,
    h1: Machine<S, B>,
    timer: Option<Sleep>,
    tls: ConnTls,
    /// A connection's first bytes while they could still begin the HTTP/2 preface or an
    /// HTTP/1 request (at most 3): held back from the HTTP/1 machine until they tell.
    sniffed: Vec<u8>,
    /// The upgrade request answered here (the last one read): who takes the connection
    /// if its answer is a `101`.
    #[cfg(feature = "ws")]
    switch: Option<super::switch::OnSwitch>,
}

/// What the connection's TLS negotiated (feature `tls`): every request gets it as an
/// extension, and an upgrade cannot be handed to hyper (the TLS session stays here).
#[derive(Default)]
pub(super) struct ConnTls {
    #[cfg(feature = "tls")]
    info: Option<crate::tls::TlsInfo>,
}

impl ConnTls {
    pub(super) fn of(_conn: &Conn) -> ConnTls {
        ConnTls {
            #[cfg(feature = "tls")]
            info: _conn.tls_info(),
        }
    }

    fn is_tls(&self) -> bool {
        #[cfg(feature = "tls")]
        return self.info.is_some();
        #[cfg(not(feature = "tls"))]
        false
    }

    /// Whether ALPN chose HTTP/2.
    pub(super) fn alpn_is_h2(&self) -> bool {
        #[cfg(feature = "tls")]
        return self
            .info
            .as_ref()
            .is_some_and(|i| i.alpn_protocol() == Some(b"h2"));
        #[cfg(not(feature = "tls"))]
        false
    }

    pub(super) fn extend(&self, _req: &mut Request<Incoming>) {
        #[cfg(feature = "tls")]
        if let Some(info) = &self.info {
            _req.extensions_mut().insert(info.clone());
        }
    }
}

impl<M, Marker, S, B> Handler for Server<M, Marker>
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
    fn on_open(&self, conn: &Conn) {
        let shared = &self.shared;
        // Accepted before the drain began (`fibr::serve` counts it from its accept on,
        // through a TLS handshake): held until the count is ours below, or given up on a
        // return before.
        let admission = conn.take_context::<Admission>();
        // Over HTTP/1 the first request of a connection opened while draining is still
        // answered, so its client does not fail; HTTP/2 has no such grace here.
        let draining = shared.live.draining();
        let peer = conn.peer_addr();
        let info = ConnInfo {
            peer,
            local: conn.local_addr(),
            // Only a Unix socket has no address (UDP peers are not served here).
            unix: peer.is_none().then(|| UnixPeer::of(conn.as_raw_fd())),
        };
        let svc = match shared.make.make_service(&info) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "could not make a service for a connection");
                conn.close();
                return;
            }
        };
        let tls = ConnTls::of(conn);
        if draining && tls.alpn_is_h2() {
            return conn.close();
        }
        match admission {
            Some(admission) => admission.claim(&shared.live),
            None => shared.live.entered(),
        }
        shared.conns.lock().unwrap().push(conn.clone());
        if tls.alpn_is_h2() {
            H2State::<S, B>::start(conn, svc, tls, &shared.config, &[]);
            return;
        }
        let state: ConnState<S, B> = ConnState {
            svc,
            waker: conn.waker(),
            h1: ServerConn::new(Instant::now()),
            timer: None,
            tls,
            sniffed: Vec::new(),
            #[cfg(feature = "ws")]
            switch: None,
        };
        conn.set_context(state);
        with_state::<S, B, _>(conn, |st| {
            if draining {
                st.h1.drain(conn.input_waiting());
            }
            with_round_output(|out| st.drive(conn, &shared.config, out))
        });
    }

    fn on_data(&self, conn: &Conn, data: &[u8]) {
        self.round(conn, data);
    }

    fn on_wake(&self, conn: &Conn) {
        self.round(conn, &[]);
    }

    fn on_drained(&self, conn: &Conn) {
        let cfg = &self.shared.config;
        let h1 =
            with_state::<S, B, _>(conn, |st| with_round_output(|out| st.drive(conn, cfg, out)));
        if h1.is_none() {
            with_h2::<S, B, _>(conn, |st| st.round(conn, &[], cfg, false));
        }
    }

    fn on_eof(&self, conn: &Conn) {
        let cfg = &self.shared.config;
        let h1 = with_state::<S, B, _>(conn, |st| {
            st.h1.peer_closed();
            with_round_output(|out| st.drive(conn, cfg, out));
        });
        if h1.is_none() {
            with_h2::<S, B, _>(conn, |st| st.peer_closed(conn, cfg));
        }
    }

    fn on_close(&self, conn: &Conn, _err: Option<io::Error>) {
        if conn.take_context::<ConnState<S, B>>().is_some()
            || conn.take_context::<H2State<S, B>>().is_some()
        {
            self.shared.forget(conn);
        }
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
    fn round(&self, conn: &Conn, data: &[u8]) {
        let cfg = &self.shared.config;
        let draining = data.is_empty() && self.shared.live.draining();
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
                st.receive(conn, input, cfg, out);
                st.drive(conn, cfg, out)
            }))
        });
        let upgrade = match upgrade {
            None => {
                with_h2::<S, B, _>(conn, |st| st.round(conn, data, cfg, draining));
                return;
            }
            Some(Round::ToHttp2(seen)) => {
                // h2c with prior knowledge: the connection opened with the preface.
                if let Some(st) = conn.take_context::<ConnState<S, B>>() {
                    let first = if seen.is_empty() { data } else { &seen[..] };
                    H2State::<S, B>::start(conn, st.svc, st.tls, cfg, first);
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
            if let Some(st) = conn.take_context::<ConnState<S, B>>() {
                H2State::<S, B>::start_upgraded(conn, st.svc, st.tls, cfg, h2c);
            }
            // Without hyper nothing follows (no hand-off), and the return is the last word.
            #[cfg_attr(not(feature = "hyper"), allow(clippy::needless_return))]
            return;
        }
        #[cfg(feature = "hyper")]
        if let Some(st) = conn.take_context::<ConnState<S, B>>() {
            self.shared.forget(conn);
            super::upgrade::hand_off(conn, prefix, st.svc);
        }
    }

    /// A `101` was written: the service that claimed the upgrade takes the connection
    /// (none did: it closes, since what follows is not HTTP/1).
    fn switch(&self, conn: &Conn, read: Vec<u8>) {
        let Some(st) = conn.take_context::<ConnState<S, B>>() else {
            return;
        };
        self.shared.forget(conn);
        #[cfg(feature = "ws")]
        if let Some(take) = st.switch.as_ref().and_then(|s| s.take()) {
            drop(st);
            let conn = conn.clone();
            return take(super::switch::Switched {
                conn,
                read,
                in_round: true,
            });
        }
        let _ = (st, read);
        conn.close();
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
fn with_state<S, B, R>(conn: &Conn, f: impl FnOnce(&mut ConnState<S, B>) -> R) -> Option<R>
where
    S: Service<Request<Incoming>> + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    conn.with_context::<ConnState<S, B>, _>(|st| st.map(f))
}

/// The service side of the machine's [`Dispatch`], for one callback.
struct Calls<'a, S> {
    svc: &'a mut S,
    waker: &'a Waker,
    conn: &'a Conn,
    cfg: &'a ServerConfig,
    tls: &'a ConnTls,
    #[cfg(feature = "ws")]
    switch: &'a mut Option<super::switch::OnSwitch>,
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
        match super::server_h2::h2c_upgrade(head) {
            Some(_) => self.cfg.http2.h2c,
            None => cfg!(feature = "hyper"),
        }
    }

    fn dispatch(
        &mut self,
        head: RequestHead,
        body: Option<NewBody>,
    ) -> Dispatched<Self::Exchange, BodySender> {
        #[cfg(feature = "ws")]
        let upgrade = head.upgrade;
        let (incoming, sender) = match body {
            None => (Incoming::empty(), None),
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
        #[cfg(feature = "ws")]
        if upgrade {
            let switch = super::switch::OnSwitch::default();
            req.extensions_mut().insert(switch.clone());
            *self.switch = Some(switch);
        }
        let (exchange, called) = match call_service(self.svc, self.waker, req) {
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

/// Calls the service if it is ready (and polls the call once); gives the request back if
/// it is not. A failure or panic becomes a 500 (one in `poll_ready` also ends the
/// connection).
pub(super) fn call_service<S, B>(
    svc: &mut S,
    waker: &Waker,
    req: Request<Incoming>,
) -> Result<Stage<S::Future, B>, Box<Request<Incoming>>>
where
    S: Service<Request<Incoming>, Response = Response<B>>,
    S::Error: Into<BoxError>,
{
    let mut cx = Context::from_waker(waker);
    match catch_unwind(AssertUnwindSafe(|| svc.poll_ready(&mut cx))) {
        Ok(Poll::Pending) => Err(Box::new(req)),
        Ok(Poll::Ready(Ok(()))) => Ok(match catch_unwind(AssertUnwindSafe(|| svc.call(req))) {
            Ok(fut) => poll_call(Box::pin(fut), &mut cx),
            Err(payload) => {
                super::panic::log_panic("the service, while being called,", &*payload);
                Stage::Failed {
                    status: StatusCode::INTERNAL_SERVER_ERROR,
                    close: false,
                }
            }
        }),
        Ok(Poll::Ready(Err(e))) => {
            tracing::error!(error = %e.into(), "the service failed");
            Ok(Stage::Failed {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                close: true,
            })
        }
        Err(payload) => {
            super::panic::log_panic("the service's poll_ready", &*payload);
            Ok(Stage::Failed {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                close: true,
            })
        }
    }
}

impl<S, B> ConnState<S, B>
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
            #[cfg(feature = "ws")]
            switch: &mut self.switch,
        };
        (&mut self.h1, calls)
    }

    /// Feeds the round's bytes (or, with none, the bytes kept) to the machine.
    fn receive(&mut self, conn: &Conn, data: &[u8], cfg: &ServerConfig, out: &mut Vec<u8>) {
        let (h1, mut calls) = self.split(conn, cfg);
        h1.receive(round_clock(), data, cfg, &mut calls, out);
    }

    /// Calls a parked request once the service is ready, polls every call in flight,
    /// writes what is ready, sends the round's output and applies the machine's actions.
    /// Returns the bytes of an upgrade request to hand over, once it is next.
    fn drive(&mut self, conn: &Conn, cfg: &ServerConfig, out: &mut Vec<u8>) -> Option<Upgrade> {
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
                .end_round(round_clock(), cfg, conn.reads_paused(), out);
            if actions.parse_kept {
                // What held the kept bytes back is gone (responses written, the service
                // ready, room in a body's buffer): parse them now.
                self.receive(conn, &[], cfg, out);
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
        let called = call_service(calls.svc, calls.waker, *req);
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

/// Keeps one timer armed for a machine's deadline (none: no timer); it wakes `waker`.
pub(super) fn arm_timer(timer: &mut Option<Sleep>, deadline: Option<Instant>, waker: &Waker) {
    let Some(at) = deadline else {
        *timer = None;
        return;
    };
    // A timer that fires early is fine (the machine re-arms it); one that fires late is
    // not.
    if timer.as_ref().is_none_or(|t| t.deadline() > at) {
        *timer = Some(crate::engine::time::sleep_until(at));
    }
    if let Some(t) = timer.as_mut() {
        let mut cx = Context::from_waker(waker);
        if Pin::new(t).poll(&mut cx).is_ready() {
            *timer = None;
            waker.wake_by_ref();
        }
    }
}

/// Writes the responses that are ready at the front of the queue into `out`, in order:
/// heads and bodies through the machine, a file by `sendfile`, a streaming body until it
/// waits (or the socket's output is over `response_buffer`: `on_drained` comes back here).
fn write_ready<F, B>(
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
fn start_response<F, B>(
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
    let framing = match h1.begin_response(clock, &mut parts, exact, out) {
        Started::Done(after) => return Some(after),
        Started::Body(framing) => framing,
    };
    if let (BodyFraming::Length(_), Some(file)) = (
        framing,
        (&mut body as &mut dyn Any).downcast_mut::<FileBody>(),
    ) {
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
fn stream_body<F, B>(
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
    let ended = loop {
        if !small && out.len() + conn.queued_bytes() >= cfg.response_buffer {
            // Let the socket drain first; on_drained comes back here.
            if out.len() >= cfg.response_buffer {
                let _ = conn.send(out);
                out.clear();
            }
            if conn.queued_bytes() >= cfg.response_buffer {
                conn.wake_when_drained();
                break None;
            }
        }
        match catch_unwind(AssertUnwindSafe(|| body.as_mut().poll_frame(cx))) {
            Ok(Poll::Pending) => break None,
            Ok(Poll::Ready(None)) => {
                break Some(h1.finish_body(clock, None, out).map_err(|e| e.to_string()))
            }
            Ok(Poll::Ready(Some(Ok(frame)))) => match frame.into_data() {
                Ok(mut data) => {
                    if let Err(e) = h1.write_data(&mut data, out) {
                        break Some(Err(e.to_string()));
                    }
                }
                Err(frame) => {
                    if let Ok(trailers) = frame.into_trailers() {
                        let end = h1.finish_body(clock, Some(&trailers), out);
                        break Some(end.map_err(|e| e.to_string()));
                    }
                }
            },
            Ok(Poll::Ready(Some(Err(e)))) => break Some(Err(e.into().to_string())),
            Err(_) => break Some(Err("the response body panicked".to_string())),
        }
    };
    match ended {
        None => {
            if let Some(Front::Writing(stage)) = h1.front(out) {
                *stage = Stage::Streaming(body);
            }
            None
        }
        Some(Ok(after)) => Some(after),
        Some(Err(e)) => {
            // Half a response went out: only closing tells the client.
            tracing::warn!(error = %e, "a response body failed mid-stream; closing");
            h1.abort_response();
            Some(After::Close)
        }
    }
}

#[cfg(feature = "http3")]
impl<M, Marker> Server<M, Marker>
where
    Server<M, Marker>: Http3Server,
{
    /// This server's app over HTTP/3 with `tls`'s certificate, as the handler of an
    /// [`Engine`](crate::Engine) UDP binding (what `serve(..).with_http3()` binds), beside
    /// the TCP binding of the server itself (under [`TlsServer`](crate::tls::TlsServer)):
    ///
    /// ```no_run
    /// # fn demo(tls: std::sync::Arc<fibr::tls::rustls::ServerConfig>) -> std::io::Result<()> {
    /// # let app = tower::service_fn(|_req: http::Request<fibr::body::Incoming>| async {
    /// #     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("hi")))
    /// # });
    /// use fibr::{Binding, Config, Engine};
    /// let server = fibr::http::Server::new(app);
    /// let h3 = server.http3(tls.clone())?;
    /// let https = fibr::tls::TlsServer::new(tls, server);
    /// let engine = Engine::new(
    ///     Config::default(),
    ///     [Binding::tcp("0.0.0.0:443", https), Binding::udp("0.0.0.0:443", h3)],
    /// )?;
    /// engine.run()
    /// # }
    /// ```
    ///
    /// QUIC's settings are [`ServerConfig::http3`](super::ServerConfig::http3). The
    /// handler takes the binding's datagrams itself ([`Handler::datagrams`]): the binding
    /// keeps no connection per peer address.
    pub fn http3(&self, tls: Arc<rustls::ServerConfig>) -> io::Result<Arc<dyn Handler>> {
        self.http3_endpoint(tls)
    }
}

/// What `serve(..).with_http3()` asks of a server: a QUIC endpoint that gives each HTTP/3
/// connection a service from the same app (so it exists wherever `Handler` does).
#[cfg(feature = "http3")]
#[doc(hidden)]
pub trait Http3Server {
    /// The UDP binding's handler for HTTP/3 with `tls`'s certificate.
    fn http3_endpoint(&self, tls: Arc<rustls::ServerConfig>) -> io::Result<Arc<dyn Handler>>;
}

#[cfg(feature = "http3")]
impl<M, Marker, S, B> Http3Server for Server<M, Marker>
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
    fn http3_endpoint(&self, tls: Arc<rustls::ServerConfig>) -> io::Result<Arc<dyn Handler>> {
        let cfg = &self.shared.config;
        let limits = super::http3::Limits {
            body_buffer: cfg.body_buffer,
            max_body_size: cfg.max_body_size,
            max_field_section_size: cfg.max_head_bytes as u64,
        };
        let shared = self.shared.clone();
        let app = Box::new(move |quic, info: ConnInfo, driver| {
            if shared.live.draining() {
                return Err(driver);
            }
            let svc = match shared.make.make_service(&info) {
                Ok(svc) => svc,
                Err(e) => {
                    tracing::debug!(error = %e, "no service for an HTTP/3 connection");
                    return Err(driver);
                }
            };
            shared.live.entered();
            let shared = shared.clone();
            crate::engine::runtime::spawn(super::http3::alongside(driver, async move {
                let drain = shared.drain_started.wait();
                super::http3::serve_connection(quic, svc, limits, drain).await;
                shared.live.left();
            }));
            Ok(())
        });
        let endpoint: Arc<dyn Handler> = super::http3::QuicEndpoint::new(tls, &cfg.http3, app)?;
        Ok(endpoint)
    }
}
