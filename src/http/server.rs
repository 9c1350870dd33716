//! The HTTP/1.1 dispatcher: a fibr [`Handler`] that serves a tower service.
//!
//! Each round parses every complete request in the bytes read, calls the service, polls
//! the response futures right away (most finish in that first poll), and encodes every
//! response that is ready, in request order, into the round's single write. Futures that
//! are still pending hold the connection's waker; their wake-up runs another round.
//! Bytes that must outlive the round (a partial head, body bytes the service has not
//! taken) are kept in a small per-connection buffer; an idle connection keeps none.

use super::body::{BodyError, BodySender, Incoming};
use super::config::Config;
use super::file::FileBody;
use super::h1::chunked::{ChunkedDecoder, Decoded};
use super::h1::date::{http_date, DATE_LEN};
use super::h1::encode::{self, ResponseFraming};
use super::h1::parse::{self, BodyFraming, Limits, RequestHead};
use super::service::{BoxError, ConnInfo, MakeService};
use crate::time::Sleep;
use crate::{Conn, Handler};
use bytes::{Buf, Bytes};
use http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode, Version};
use http_body::Body;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;
use tower_service::Service;

/// Responses with a Content-Length up to this are written without checking how much output
/// the connection has queued.
const SMALL_BODY: u64 = 16 * 1024;

/// Most trailer bytes accepted at the end of a chunked request body.
const MAX_TRAILER_BYTES: usize = 16 * 1024;

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

/// Runs one round of a connection's HTTP work with an empty output buffer, which the round
/// sends before it ends (`ConnState::drive`). The buffer is taken out of the thread-local
/// (not borrowed), so even a nested round could never see another connection's bytes.
fn with_round_output<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
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
    config: Config,
    limits: Limits,
    /// Live connections, for graceful shutdown.
    conns: Mutex<Vec<Conn>>,
    live: AtomicUsize,
    draining: AtomicBool,
    drained: crate::sync_notify::Notify,
}

impl<M> Server<M> {
    /// A server for `app` with the default [`Config`].
    pub fn new<Marker>(app: M) -> Server<M, Marker>
    where
        M: MakeService<Marker>,
    {
        Server::with_config(app, Config::default())
    }
}

impl<M, Marker> Server<M, Marker> {
    /// A server for `app` with `config`.
    pub fn with_config(app: M, config: Config) -> Server<M, Marker> {
        let limits = Limits {
            max_head_bytes: config.max_head_bytes,
            max_headers: config.max_headers,
            max_uri_len: config.max_uri_len,
        };
        Server {
            shared: Arc::new(Shared {
                make: app,
                config,
                limits,
                conns: Mutex::new(Vec::new()),
                live: AtomicUsize::new(0),
                draining: AtomicBool::new(false),
                drained: crate::sync_notify::Notify::new(),
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
        if self.live.fetch_sub(1, Ordering::AcqRel) == 1 && self.draining.load(Ordering::Acquire) {
            self.drained.notify();
        }
    }

    /// Graceful shutdown: idle connections close now, busy ones after their response.
    pub(crate) fn start_draining(&self) {
        self.draining.store(true, Ordering::Release);
        // A snapshot: the list itself stays, so a connection closing meanwhile is still
        // forgotten (taking the list out and putting it back would resurrect it, and with
        // it a cycle that keeps the whole runtime alive).
        let conns = self.conns.lock().unwrap().clone();
        for c in conns.iter() {
            c.waker().wake();
        }
        if self.live.load(Ordering::Acquire) == 0 {
            self.drained.notify();
        }
    }

    pub(crate) fn drained(&self) -> &crate::sync_notify::Notify {
        &self.drained
    }
}

/// One request's progress, from the service call to the last byte of its response.
struct Exchange<F, B> {
    stage: Stage<F, B>,
    head_only: bool,
    version: Version,
    keep_alive: bool,
}

enum Stage<F, B> {
    Calling(Pin<Box<F>>),
    Ready(Response<B>),
    Streaming {
        body: Pin<Box<B>>,
        framing: ResponseFraming,
        /// Bytes still owed under `Length` framing.
        left: u64,
    },
    /// A canned response (errors the server answers itself).
    Canned(Vec<u8>),
}

/// Polls a service call once: the stage it is in afterwards. A failure or a panic becomes
/// a 500 (a failed call also ends the connection: `keep_alive` is cleared).
fn poll_call<F, B, E>(
    mut fut: Pin<Box<F>>,
    cx: &mut Context<'_>,
    version: Version,
    keep_alive: &mut bool,
) -> Stage<F, B>
where
    F: Future<Output = Result<Response<B>, E>>,
    E: Into<BoxError>,
{
    match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
        Ok(Poll::Pending) => Stage::Calling(fut),
        Ok(Poll::Ready(Ok(resp))) => Stage::Ready(resp),
        Ok(Poll::Ready(Err(e))) => {
            tracing::error!(error = %e.into(), "the service returned an error");
            *keep_alive = false;
            Stage::Canned(error_response(StatusCode::INTERNAL_SERVER_ERROR, version))
        }
        Err(_) => {
            tracing::error!("a request handler panicked");
            Stage::Canned(error_response_with(
                StatusCode::INTERNAL_SERVER_ERROR,
                version,
                *keep_alive,
            ))
        }
    }
}

/// Which timeout a connection's timer stands for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Deadline {
    Head,
    Body,
    Idle,
}

/// A request parked until the service is ready.
struct Waiting {
    req: Request<Incoming>,
    head_only: bool,
    version: Version,
    keep_alive: bool,
}

/// The request body being read off the wire.
struct BodyIn {
    sender: BodySender,
    framing: BodyFraming,
    decoder: Option<ChunkedDecoder>,
    remaining: u64,
    received: u64,
}

struct ConnState<S: Service<Request<Incoming>>, B> {
    svc: S,
    waker: Waker,
    /// Unparsed bytes kept across rounds (empty, without capacity, when idle).
    buf: Vec<u8>,
    /// Boxed, like `waiting`: rarely present, and an idle connection should stay small.
    body: Option<Box<BodyIn>>,
    queue: VecDeque<Exchange<S::Future, B>>,
    /// A request waiting for the service to be ready.
    waiting: Option<Box<Waiting>>,
    served: usize,
    /// No more requests are read; close once the queue is written.
    closing: bool,
    /// The peer finished sending.
    eof: bool,
    /// Reads are held because too many responses wait.
    held_for_pipeline: bool,
    /// Reads are held because an upgrade request waits for the responses before it.
    held_for_upgrade: bool,
    head_started: Option<Instant>,
    idle_since: Instant,
    /// Bytes from an upgrade request on, for hyper to take over.
    #[cfg(feature = "hyper")]
    handoff: Option<Vec<u8>>,
    /// When request body bytes last arrived (for `body_read_timeout`).
    body_progress: Instant,
    timer: Option<Sleep>,
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
        if shared.draining.load(Ordering::Acquire) {
            conn.close();
            return;
        }
        let info = ConnInfo {
            peer: conn.peer_addr(),
            local: conn.local_addr(),
        };
        let svc = match shared.make.make_service(&info) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "could not make a service for a connection");
                conn.close();
                return;
            }
        };
        shared.live.fetch_add(1, Ordering::AcqRel);
        shared.conns.lock().unwrap().push(conn.clone());
        let state: ConnState<S, B> = ConnState {
            svc,
            waker: conn.waker(),
            buf: Vec::new(),
            body: None,
            queue: VecDeque::new(),
            waiting: None,
            served: 0,
            closing: false,
            eof: false,
            held_for_pipeline: false,
            held_for_upgrade: false,
            head_started: None,
            idle_since: Instant::now(),
            body_progress: Instant::now(),
            timer: None,
            #[cfg(feature = "hyper")]
            handoff: None,
        };
        conn.set_context(Mutex::new(state));
        with_state::<S, B, _>(conn, |st| st.arm_timer(conn, &shared.config));
    }

    fn on_data(&self, conn: &Conn, data: &[u8]) {
        self.round(conn, Some(data));
    }

    fn on_wake(&self, conn: &Conn) {
        self.round(conn, None);
    }

    fn on_drained(&self, conn: &Conn) {
        with_state::<S, B, _>(conn, |st| {
            with_round_output(|out| st.drive(conn, &self.shared, out))
        });
    }

    fn on_eof(&self, conn: &Conn) {
        with_state::<S, B, _>(conn, |st| {
            st.eof = true;
            st.closing = true;
            if let Some(body) = st.body.take() {
                body.sender.fail(BodyError::incomplete());
            }
            with_round_output(|out| st.drive(conn, &self.shared, out));
        });
    }

    fn on_close(&self, conn: &Conn, _err: Option<io::Error>) {
        if conn.take_context::<Mutex<ConnState<S, B>>>().is_some() {
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
    /// One round: takes `data` (none: a wake-up, which goes on with the bytes kept, if
    /// reads are not held), calls and polls, sends what is ready. A request asking for
    /// an upgrade hands the connection to hyper instead.
    fn round(&self, conn: &Conn, data: Option<&[u8]>) {
        let upgrade = with_state::<S, B, _>(conn, |st| {
            if data.is_none() && self.shared.draining.load(Ordering::Acquire) {
                st.closing = true;
            }
            with_round_output(|out| {
                match data {
                    Some(data) => st.input(conn, data, &self.shared, out),
                    None if !st.buf.is_empty() && !conn.reads_held() => {
                        let buf = std::mem::take(&mut st.buf);
                        st.input(conn, &buf, &self.shared, out);
                    }
                    None => {}
                }
                if st.wants_handoff() {
                    // Responses to the requests before the upgrade go first.
                    if !out.is_empty() {
                        let _ = conn.send(out);
                    }
                    return true;
                }
                st.drive(conn, &self.shared, out);
                false
            })
        });
        #[cfg(feature = "hyper")]
        if upgrade == Some(true) {
            if let Some(st) = conn.take_context::<Mutex<ConnState<S, B>>>() {
                let st = st.into_inner().unwrap_or_else(|e| e.into_inner());
                self.shared.forget(conn);
                super::upgrade::hand_off(conn, st.handoff.unwrap_or_default(), st.svc);
            }
        }
        #[cfg(not(feature = "hyper"))]
        let _ = upgrade;
    }
}

/// Runs `f` on the connection's HTTP state (none once it is closed).
fn with_state<S, B, R>(conn: &Conn, f: impl FnOnce(&mut ConnState<S, B>) -> R) -> Option<R>
where
    S: Service<Request<Incoming>> + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    conn.with_context::<Mutex<ConnState<S, B>>, _>(|st| {
        st.map(|st| f(st.get_mut().unwrap_or_else(|e| e.into_inner())))
    })
}

impl<S, B> ConnState<S, B>
where
    S: Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Error: Into<BoxError>,
{
    /// True once a request asked for an upgrade that hyper is to take over.
    fn wants_handoff(&self) -> bool {
        #[cfg(feature = "hyper")]
        return self.handoff.is_some();
        #[cfg(not(feature = "hyper"))]
        false
    }

    /// Takes bytes from the socket: keeps what cannot be used now. Responses ready at once
    /// are encoded into `out`.
    fn input<M>(&mut self, conn: &Conn, data: &[u8], shared: &Shared<M>, out: &mut Vec<u8>) {
        if self.buf.is_empty() {
            let used = self.process(conn, data, shared, out);
            if used < data.len() {
                self.buf.extend_from_slice(&data[used..]);
            }
        } else {
            let mut buf = std::mem::take(&mut self.buf);
            buf.extend_from_slice(data);
            let used = self.process(conn, &buf, shared, out);
            buf.drain(..used);
            self.buf = buf;
        }
        if self.buf.is_empty() && self.buf.capacity() > 0 {
            self.buf = Vec::new();
        }
    }

    /// Parses requests and feeds bodies from `input`; returns the bytes consumed.
    fn process<M>(
        &mut self,
        conn: &Conn,
        input: &[u8],
        shared: &Shared<M>,
        out: &mut Vec<u8>,
    ) -> usize {
        let cfg = &shared.config;
        let mut pos = 0;
        loop {
            if self.body.is_some() {
                pos += self.feed_body(conn, &input[pos..], cfg);
                if self.body.is_some() {
                    return pos;
                }
            }
            if pos == input.len() || self.closing {
                if self.closing {
                    // Nothing after a request we will not answer normally is read.
                    return input.len();
                }
                return pos;
            }
            if self.waiting.is_some() {
                return pos;
            }
            if self.queue.len() >= cfg.max_pipelined {
                self.held_for_pipeline = true;
                conn.hold_reads();
                return pos;
            }
            match parse::parse_request_head(&input[pos..], &shared.limits) {
                Ok(None) => {
                    if self.head_started.is_none() {
                        self.head_started = Some(round_now());
                    }
                    return pos;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "bad request head");
                    self.answer_error(e.status(), Version::HTTP_11);
                    return input.len();
                }
                Ok(Some((head, used))) => {
                    self.head_started = None;
                    #[cfg(feature = "hyper")]
                    if head.upgrade {
                        if !(self.queue.is_empty() && self.body.is_none() && self.waiting.is_none())
                        {
                            // Pipelined behind requests still being answered: it waits
                            // (unparsed) for them, with reads held.
                            self.held_for_upgrade = true;
                            conn.hold_reads();
                            return pos;
                        }
                        // hyper takes the connection from this request on (so that
                        // `hyper::upgrade::on`, and axum's WebSocketUpgrade, work).
                        self.handoff = Some(input[pos..].to_vec());
                        return input.len();
                    }
                    pos += used;
                    self.start_request(conn, head, cfg, out);
                }
            }
        }
    }

    fn start_request(&mut self, conn: &Conn, head: RequestHead, cfg: &Config, out: &mut Vec<u8>) {
        let RequestHead {
            method,
            uri,
            version,
            headers,
            framing,
            mut keep_alive,
            expect_continue,
            upgrade,
        } = head;
        if upgrade {
            // An upgrade not handed to hyper (feature `hyper` off, or pipelined behind other
            // requests) is answered as a plain request, and the connection is not reused:
            // its client may already speak the new protocol.
            keep_alive = false;
        }
        self.served += 1;
        if cfg
            .max_requests_per_connection
            .is_some_and(|max| self.served >= max)
        {
            keep_alive = false;
        }
        if let (Some(max), BodyFraming::Length(n)) = (cfg.max_body_size, &framing) {
            if *n > max {
                self.answer_error(StatusCode::PAYLOAD_TOO_LARGE, version);
                return;
            }
        }
        let body = match framing {
            BodyFraming::Empty => Incoming::empty(),
            BodyFraming::Length(0) => Incoming::empty(),
            BodyFraming::Length(n) => {
                let (body, sender) =
                    Incoming::channel(conn.clone(), Some(n), expect_continue, cfg.body_buffer);
                self.body = Some(Box::new(BodyIn {
                    sender,
                    framing: BodyFraming::Length(n),
                    decoder: None,
                    remaining: n,
                    received: 0,
                }));
                body
            }
            BodyFraming::Chunked => {
                let (body, sender) =
                    Incoming::channel(conn.clone(), None, expect_continue, cfg.body_buffer);
                self.body = Some(Box::new(BodyIn {
                    sender,
                    framing: BodyFraming::Chunked,
                    decoder: Some(ChunkedDecoder::new(MAX_TRAILER_BYTES)),
                    remaining: 0,
                    received: 0,
                }));
                body
            }
        };
        let head_only = method == Method::HEAD;
        let mut req = Request::new(body);
        *req.method_mut() = method;
        *req.uri_mut() = uri;
        *req.version_mut() = version;
        *req.headers_mut() = headers;
        if !keep_alive {
            self.closing = true;
        }
        self.call(req, head_only, version, keep_alive);
        if self.queue.len() == 1 && self.body.is_none() {
            // Most handlers answer in their first poll: a response at the front of the
            // queue is encoded now, so the request's and response's memory is freed
            // before the next pipelined request is parsed (not all held at once). Not
            // while the request's body is still to come: a bad body changes the answer.
            let waker = self.waker.clone();
            if self.write_ready(conn, &mut Context::from_waker(&waker), out, cfg) {
                self.closing = true;
            }
        }
    }

    /// Calls the service if it is ready, else parks the request until it is.
    fn call(
        &mut self,
        req: Request<Incoming>,
        head_only: bool,
        version: Version,
        mut keep_alive: bool,
    ) {
        let mut cx = Context::from_waker(&self.waker);
        let ready = catch_unwind(AssertUnwindSafe(|| self.svc.poll_ready(&mut cx)));
        let stage = match ready {
            Ok(Poll::Pending) => {
                self.waiting = Some(Box::new(Waiting {
                    req,
                    head_only,
                    version,
                    keep_alive,
                }));
                return;
            }
            Ok(Poll::Ready(Ok(()))) => {
                match catch_unwind(AssertUnwindSafe(|| self.svc.call(req))) {
                    Ok(fut) => poll_call(Box::pin(fut), &mut cx, version, &mut keep_alive),
                    Err(_) => {
                        tracing::error!("the service panicked while being called");
                        Stage::Canned(error_response_with(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            version,
                            keep_alive,
                        ))
                    }
                }
            }
            Ok(Poll::Ready(Err(e))) => {
                tracing::error!(error = %e.into(), "the service failed");
                self.closing = true;
                Stage::Canned(error_response(StatusCode::INTERNAL_SERVER_ERROR, version))
            }
            Err(_) => {
                tracing::error!("the service panicked in poll_ready");
                self.closing = true;
                Stage::Canned(error_response(StatusCode::INTERNAL_SERVER_ERROR, version))
            }
        };
        // A failed poll_ready set `closing`: that exchange ends the connection.
        let keep_alive = keep_alive && !self.closing;
        self.queue.push_back(Exchange {
            stage,
            head_only,
            version,
            keep_alive,
        });
    }

    /// Queues a response the server makes itself, then stops reading requests.
    fn answer_error(&mut self, status: StatusCode, version: Version) {
        self.closing = true;
        if let Some(body) = self.body.take() {
            body.sender.fail(BodyError::malformed(status.to_string()));
        }
        self.queue.push_back(Exchange {
            stage: Stage::Canned(error_response(status, version)),
            head_only: false,
            version,
            keep_alive: false,
        });
    }

    /// Feeds request body bytes to the service; returns the bytes consumed.
    fn feed_body(&mut self, conn: &Conn, input: &[u8], cfg: &Config) -> usize {
        if !input.is_empty() {
            self.body_progress = round_now();
        }
        let Some(body) = self.body.as_mut() else {
            return 0;
        };
        let mut pos = 0;
        loop {
            if conn.reads_held() && !body.sender.reader_gone() {
                // The service is behind: keep the rest for later.
                return pos;
            }
            match body.framing {
                BodyFraming::Length(_) => {
                    let n = (body.remaining as usize).min(input.len() - pos);
                    if n > 0 {
                        body.sender
                            .push(Bytes::copy_from_slice(&input[pos..pos + n]));
                        body.remaining -= n as u64;
                        pos += n;
                    }
                    if body.remaining == 0 {
                        let body = self.body.take().unwrap();
                        body.sender.finish(None);
                    }
                    return pos;
                }
                BodyFraming::Chunked => {
                    let decoder = body.decoder.as_mut().unwrap();
                    match decoder.decode(&input[pos..]) {
                        Ok((used, Decoded::Data(d))) => {
                            pos += used;
                            body.received += d.len() as u64;
                            if cfg.max_body_size.is_some_and(|max| body.received > max) {
                                let limit = cfg.max_body_size.unwrap_or(0);
                                let body = self.body.take().unwrap();
                                body.sender.fail(BodyError::too_large(limit));
                                self.closing = true;
                                return input.len();
                            }
                            body.sender.push(Bytes::copy_from_slice(d));
                        }
                        Ok((used, Decoded::Done(trailers))) => {
                            pos += used;
                            let body = self.body.take().unwrap();
                            body.sender.finish(trailers);
                            return pos;
                        }
                        Ok((used, Decoded::NeedMore)) => return pos + used,
                        Err(e) => {
                            tracing::debug!(error = %e, "bad chunked request body");
                            let body = self.body.take().unwrap();
                            body.sender.fail(BodyError::malformed(e.to_string()));
                            self.closing = true;
                            // The body is the last queued request's: answer that request
                            // with the error if none of its response went out yet, else
                            // close after it. Never a second response for one request.
                            match self.queue.back_mut() {
                                Some(ex)
                                    if matches!(ex.stage, Stage::Calling(_) | Stage::Ready(_)) =>
                                {
                                    ex.stage =
                                        Stage::Canned(error_response(e.status(), ex.version));
                                    ex.keep_alive = false;
                                }
                                Some(ex) => ex.keep_alive = false,
                                None => {}
                            }
                            return input.len();
                        }
                    }
                }
                BodyFraming::Empty => {
                    self.body.take();
                    return pos;
                }
            }
        }
    }

    /// Polls what can make progress and sends every response that is ready, in order,
    /// together with what the round already encoded into `out`.
    fn drive<M>(&mut self, conn: &Conn, shared: &Shared<M>, out: &mut Vec<u8>) {
        let cfg = &shared.config;
        if let Some(waiting) = self.waiting.take() {
            let Waiting {
                req,
                head_only,
                version,
                keep_alive,
            } = *waiting;
            self.call(req, head_only, version, keep_alive);
        }
        let waker = self.waker.clone();
        let mut cx = Context::from_waker(&waker);
        // Let every pending call make progress, even those whose turn has not come.
        for ex in self.queue.iter_mut() {
            if let Stage::Calling(_) = &ex.stage {
                let Stage::Calling(fut) =
                    std::mem::replace(&mut ex.stage, Stage::Canned(Vec::new()))
                else {
                    unreachable!()
                };
                ex.stage = poll_call(fut, &mut cx, ex.version, &mut ex.keep_alive);
            }
        }
        if self.write_ready(conn, &mut cx, out, cfg) {
            self.closing = true;
        }
        if !out.is_empty() {
            let _ = conn.send(out);
            out.clear();
        }
        if self.queue.is_empty() && self.queue.capacity() > 0 {
            // An idle keep-alive connection keeps no exchange buffer.
            self.queue = VecDeque::new();
        }
        if self.queue.is_empty() && self.too_much_to_drain(cfg) {
            // Answered without reading a long body: closing beats reading it all.
            self.body = None;
            self.closing = true;
        }
        if self.held_for_upgrade
            && self.queue.is_empty()
            && self.body.is_none()
            && self.waiting.is_none()
        {
            // The requests before the upgrade are answered: on with it (`on_wake`).
            self.held_for_upgrade = false;
            conn.resume_reads();
            self.waker.wake_by_ref();
        }
        if self.held_for_pipeline && !self.held_for_upgrade && self.queue.len() < cfg.max_pipelined
        {
            self.held_for_pipeline = false;
            conn.resume_reads();
            if !self.buf.is_empty() {
                self.waker.wake_by_ref();
            }
        }
        if self.queue.is_empty() && self.waiting.is_none() {
            // A body the client was never told to send (no 100 Continue) will not come.
            let never_sent = self
                .body
                .as_ref()
                .is_some_and(|b| b.sender.awaiting_continue());
            if self.closing && (self.body.is_none() || self.eof || never_sent) {
                conn.close();
                return;
            }
            if shared.draining.load(Ordering::Acquire) && self.body.is_none() && self.buf.is_empty()
            {
                conn.close();
                return;
            }
        }
        self.arm_timer(conn, cfg);
    }

    /// True when the request body still arriving has no reader and more of it is left
    /// (or, if chunked, already discarded) than `max_drain_bytes`.
    fn too_much_to_drain(&self, cfg: &Config) -> bool {
        let Some(body) = &self.body else { return false };
        if !body.sender.reader_gone() {
            return false;
        }
        match body.framing {
            BodyFraming::Length(_) => body.remaining > cfg.max_drain_bytes,
            _ => body.received > cfg.max_drain_bytes,
        }
    }

    /// Encodes ready responses from the front of the queue into `out`. Returns true if the
    /// connection must close after them.
    fn write_ready(
        &mut self,
        conn: &Conn,
        cx: &mut Context<'_>,
        out: &mut Vec<u8>,
        cfg: &Config,
    ) -> bool {
        loop {
            // Nothing will be read after the last queued exchange when closing.
            let last_before_close = self.closing && self.queue.len() == 1;
            let body_unsent = self
                .body
                .as_ref()
                .is_some_and(|b| b.sender.awaiting_continue());
            let Some(ex) = self.queue.front_mut() else {
                break;
            };
            match std::mem::replace(&mut ex.stage, Stage::Canned(Vec::new())) {
                Stage::Calling(fut) => {
                    ex.stage = Stage::Calling(fut);
                    return false;
                }
                Stage::Canned(bytes) => {
                    out.extend_from_slice(&bytes);
                    let keep = ex.keep_alive;
                    self.queue.pop_front();
                    self.idle_since = round_now();
                    if !keep {
                        return true;
                    }
                }
                Stage::Ready(resp) => {
                    let (mut parts, body) = resp.into_parts();
                    if body_unsent {
                        // Answered without reading a body the client has not sent: the
                        // connection cannot be reused safely.
                        ex.keep_alive = false;
                    }
                    // A body of unknown size whose app set a Content-Length (tower-http's
                    // ServeDir does) is sent with that length, held to it.
                    let exact = body
                        .size_hint()
                        .exact()
                        .or_else(|| declared_length(&parts.headers));
                    if ex.head_only
                        && !parts.status.is_informational()
                        && parts.status != StatusCode::NO_CONTENT
                        && parts.status != StatusCode::NOT_MODIFIED
                        && !parts.headers.contains_key(header::CONTENT_LENGTH)
                        && !parts.headers.contains_key(header::TRANSFER_ENCODING)
                    {
                        // HEAD: the Content-Length a GET would get (as hyper does).
                        if let Some(n) = exact.filter(|n| *n > 0) {
                            parts
                                .headers
                                .insert(header::CONTENT_LENGTH, HeaderValue::from(n));
                        }
                    }
                    let framing =
                        encode::framing_for(ex.head_only, parts.status, exact, ex.version);
                    let framing = match framing {
                        ResponseFraming::CloseDelimited => {
                            ex.keep_alive = false;
                            ResponseFraming::CloseDelimited
                        }
                        f => f,
                    };
                    // An app that says `connection: close` gets it.
                    let keep_alive = ex.keep_alive
                        && !last_before_close
                        && !encode::response_wants_close(&parts.headers);
                    ex.keep_alive = keep_alive;
                    let date = round_date();
                    encode::encode_head(
                        ex.version,
                        parts.status,
                        &parts.headers,
                        &framing,
                        keep_alive,
                        &date,
                        out,
                    );
                    if matches!(framing, ResponseFraming::Empty) {
                        self.queue.pop_front();
                        self.idle_since = round_now();
                        if !keep_alive {
                            return true;
                        }
                        continue;
                    }
                    let mut body = body;
                    if let (ResponseFraming::Length(_), Some(file)) = (
                        &framing,
                        (&mut body as &mut dyn Any).downcast_mut::<FileBody>(),
                    ) {
                        // A file: the head goes first, then the kernel copies the file.
                        let _ = conn.send(out);
                        out.clear();
                        let (f, offset, len) = file.take_range();
                        if let Err(e) = conn.send_file(f, offset, len) {
                            tracing::debug!(error = %e, "send_file failed");
                            return true;
                        }
                        self.queue.pop_front();
                        self.idle_since = round_now();
                        if !keep_alive {
                            return true;
                        }
                        continue;
                    }
                    let left = match framing {
                        ResponseFraming::Length(n) => n,
                        _ => u64::MAX,
                    };
                    ex.stage = Stage::Streaming {
                        body: Box::pin(body),
                        framing,
                        left,
                    };
                }
                Stage::Streaming {
                    mut body,
                    framing,
                    mut left,
                } => {
                    // A body of small known length is bounded anyway: skip the output check
                    // (it takes the connection's lock) and write it whole.
                    let small = matches!(framing, ResponseFraming::Length(_)) && left <= SMALL_BODY;
                    let finished = loop {
                        if !small && out.len() + conn.queued_bytes() >= cfg.response_buffer {
                            // Let the socket drain first; on_drained comes back here.
                            if out.len() >= cfg.response_buffer {
                                let _ = conn.send(out);
                                out.clear();
                            }
                            if conn.queued_bytes() >= cfg.response_buffer {
                                conn.wake_when_drained();
                                break Ok(false);
                            }
                        }
                        match catch_unwind(AssertUnwindSafe(|| body.as_mut().poll_frame(cx))) {
                            Ok(Poll::Pending) => break Ok(false),
                            Ok(Poll::Ready(None)) => {
                                if matches!(framing, ResponseFraming::Length(_)) && left != 0 {
                                    break Err(format!(
                                        "the body ended {left} bytes short of its content-length"
                                    ));
                                }
                                if matches!(framing, ResponseFraming::Chunked) {
                                    encode::encode_last_chunk(None, out);
                                }
                                break Ok(true);
                            }
                            Ok(Poll::Ready(Some(Ok(frame)))) => match frame.into_data() {
                                Ok(mut data) => {
                                    if let ResponseFraming::Length(_) = framing {
                                        let n = data.remaining() as u64;
                                        if n > left {
                                            break Err(
                                                "the body is longer than its content-length"
                                                    .to_string(),
                                            );
                                        }
                                        left -= n;
                                    }
                                    write_data(&mut data, &framing, out)
                                }
                                Err(frame) => {
                                    if let Ok(trailers) = frame.into_trailers() {
                                        if matches!(framing, ResponseFraming::Chunked) {
                                            encode::encode_last_chunk(Some(&trailers), out);
                                            break Ok(true);
                                        }
                                    }
                                }
                            },
                            Ok(Poll::Ready(Some(Err(e)))) => break Err(e.into().to_string()),
                            Err(_) => break Err("the response body panicked".to_string()),
                        }
                    };
                    match finished {
                        Ok(false) => {
                            ex.stage = Stage::Streaming {
                                body,
                                framing,
                                left,
                            };
                            return false;
                        }
                        Ok(true) => {
                            let keep = ex.keep_alive;
                            self.queue.pop_front();
                            self.idle_since = round_now();
                            if !keep {
                                return true;
                            }
                        }
                        Err(e) => {
                            // Half a response went out: only closing tells the client.
                            tracing::warn!(error = %e, "a response body failed mid-stream; closing");
                            self.queue.clear();
                            return true;
                        }
                    }
                }
            }
        }
        false
    }

    /// Keeps one timer armed for the header-read or idle deadline that applies now.
    fn arm_timer(&mut self, conn: &Conn, cfg: &Config) {
        let busy = !self.queue.is_empty() || self.body.is_some() || self.waiting.is_some();
        if busy || conn.reads_paused() {
            // A partial head behind requests still in progress waits on us (reads may be
            // paused by backpressure), not on the client: its clock starts when we read again.
            self.head_started = None;
        }
        let body_stalls = self
            .body
            .as_ref()
            .is_some_and(|b| !b.sender.awaiting_continue() && !conn.reads_paused());
        let deadline = if let Some(started) = self.head_started {
            cfg.header_read_timeout
                .map(|t| (started + t, Deadline::Head))
        } else if body_stalls {
            cfg.body_read_timeout
                .map(|t| (self.body_progress + t, Deadline::Body))
        } else if !busy {
            cfg.idle_timeout
                .map(|t| (self.idle_since + t, Deadline::Idle))
        } else {
            None
        };
        let Some((at, kind)) = deadline else {
            self.timer = None;
            return;
        };
        if round_now() >= at {
            self.timer = None;
            if kind == Deadline::Body {
                // The service sees the failure and answers; then the connection closes.
                tracing::debug!("request body stalled");
                if let Some(body) = self.body.take() {
                    body.sender.fail(BodyError::timed_out());
                }
                self.closing = true;
                self.waker.wake_by_ref();
                return;
            }
            if kind == Deadline::Head {
                tracing::debug!("request head not received in time");
                self.head_started = None;
                self.buf = Vec::new();
                let _ = conn.send(&error_response(
                    StatusCode::REQUEST_TIMEOUT,
                    Version::HTTP_11,
                ));
            }
            self.closing = true;
            conn.close();
            return;
        }
        // A timer that fires early is fine (it re-arms); one that fires late is not.
        let rearm = self.timer.as_ref().is_none_or(|t| t.deadline() > at);
        if rearm {
            self.timer = Some(crate::time::sleep_until(at));
        }
        if let Some(t) = self.timer.as_mut() {
            let mut cx = Context::from_waker(&self.waker);
            if Pin::new(t).poll(&mut cx).is_ready() {
                self.timer = None;
                self.waker.wake_by_ref();
            }
        }
    }
}

fn write_data<D: Buf>(data: &mut D, framing: &ResponseFraming, out: &mut Vec<u8>) {
    let len = data.remaining();
    if len == 0 {
        return;
    }
    if matches!(framing, ResponseFraming::Chunked) && data.chunk().len() == len {
        encode::encode_chunk(data.chunk(), out);
        data.advance(len);
        return;
    }
    match framing {
        ResponseFraming::Chunked => encode::encode_chunk_header(len, out),
        ResponseFraming::Empty => {
            data.advance(len);
            return;
        }
        _ => {}
    }
    while data.has_remaining() {
        let c = data.chunk();
        out.extend_from_slice(c);
        let n = c.len();
        data.advance(n);
    }
    if matches!(framing, ResponseFraming::Chunked) {
        out.extend_from_slice(b"\r\n");
    }
}

/// The app's own Content-Length, if it set exactly one valid value and no
/// Transfer-Encoding.
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    if headers.contains_key(header::TRANSFER_ENCODING) {
        return None;
    }
    let mut values = headers.get_all(header::CONTENT_LENGTH).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return None;
    }
    first.to_str().ok()?.trim().parse().ok()
}

/// A complete response for errors the server answers itself.
///
/// A handler's panic gets a keep-alive 500 (the connection's state is intact); every other
/// error the server answers itself ends the connection, and says so.
fn error_response(status: StatusCode, version: Version) -> Vec<u8> {
    error_response_with(status, version, false)
}

fn error_response_with(status: StatusCode, version: Version, keep_alive: bool) -> Vec<u8> {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    let body = status.canonical_reason().unwrap_or("error").as_bytes();
    let mut out = Vec::with_capacity(128 + body.len());
    let date = http_date();
    encode::encode_head(
        version,
        status,
        &headers,
        &ResponseFraming::Length(body.len() as u64),
        keep_alive,
        &date,
        &mut out,
    );
    out.extend_from_slice(body);
    out
}
