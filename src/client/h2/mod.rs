//! HTTP/2 connections of the client: one task per connection (on fibr's executor) owns
//! the stream and the sans-IO machine (`http::h2::client::ClientConn`); requests reach it
//! through a queue in shared state, and each request has a [`StreamRef`] through which
//! its response head, body and trailers come back. Many requests share one connection:
//! the pool keeps one [`H2Conn`] per key.
//!
//! Unlike HTTP/1's exchange (driven by the caller's task), a connection task is needed
//! here: streams are multiplexed, so someone must read for all of them at once.

mod upload;

use super::body::{ReqBody, ResponseBody, StreamBody};
use super::connect::{Connection, Key};
use super::error::{Error, ErrorKind, Failure, NoExtendedConnect};
use crate::proto::h2::client::{ClientConfig, ClientConn, Event, RequestHead, ResponseHead, Why};
use crate::proto::h2::frame::ErrorCode;
use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_LENGTH, HOST};
use http::{HeaderMap, Method, Request, Response, Version};
use http_body::{Body, Frame};
use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{ready, Context, Poll, Waker};
use std::time::{Duration, Instant};
use upload::upload;

/// Plaintext read at a time.
const READ_CHUNK: usize = 32 * 1024;
/// Output waiting for the socket before request bodies stop being pulled.
const MAX_PENDING_OUT: usize = 256 * 1024;
/// The reader wakes the connection task once it has taken this much (or all there was),
/// so window credit flows back without a wake-up per frame.
const RELEASE_BATCH: usize = 16 * 1024;

/// A shared HTTP/2 connection (a handle to its task). Cloning is cheap; the connection
/// closes once every handle is dropped and its streams have ended.
pub(crate) struct H2Conn {
    shared: Arc<Shared>,
}

impl Clone for H2Conn {
    fn clone(&self) -> Self {
        self.shared.lock().handles += 1;
        H2Conn {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for H2Conn {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.handles -= 1;
        if st.handles == 0 {
            if let Some(w) = st.waker.take() {
                w.wake();
            }
        }
    }
}

struct Shared {
    state: Mutex<ConnState>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, ConnState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wake(&self) {
        if let Some(w) = self.lock().waker.take() {
            w.wake();
        }
    }
}

struct ConnState {
    /// The connection task, while it waits.
    waker: Option<Waker>,
    /// Requests waiting for a stream (beyond the server's concurrency limit, or not yet
    /// seen by the task).
    queue: VecDeque<Queued>,
    /// New requests may come (no GOAWAY, no failure).
    usable: bool,
    handles: usize,
}

struct Queued {
    parts: http::request::Parts,
    body: ReqBody,
    scheme: &'static str,
    authority: String,
    slot: Arc<Slot>,
}

impl Queued {
    /// An extended CONNECT (RFC 8441): the request carries a `:protocol`.
    fn is_extended_connect(&self) -> bool {
        self.parts
            .extensions
            .get::<crate::http::Protocol>()
            .is_some()
    }
}

/// What one request's stream delivers, shared by the connection task and the caller.
#[derive(Default)]
struct Slot {
    m: Mutex<SlotState>,
}

#[derive(Default)]
struct SlotState {
    head: Option<Result<ResponseHead, Failure>>,
    head_seen: bool,
    data: VecDeque<Bytes>,
    trailers: Option<HeaderMap>,
    ended: bool,
    error: Option<Error>,
    /// The response future, then the body.
    waker: Option<Waker>,
    /// Body bytes the reader took, not yet credited by the connection task.
    released: usize,
    /// The caller dropped the response (or its body): the stream is to be reset.
    dropped: bool,
}

impl Slot {
    fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.m.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn update(&self, f: impl FnOnce(&mut SlotState)) {
        let waker = {
            let mut s = self.lock();
            f(&mut s);
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The stream is gone: the head (if still awaited) or the body fails.
    fn fail(&self, e: Failure) {
        self.update(|s| {
            if s.head_seen || s.head.is_some() {
                let (Failure::NotSent(e) | Failure::Sent(e)) = e;
                s.error = Some(e);
                s.data.clear();
            } else {
                s.head = Some(Err(e));
            }
        });
    }
}

/// A request's hold on its stream: the response future's, then the body's. Dropping it
/// resets the stream (if still open) and gives its unread bytes back to the connection.
pub(crate) struct StreamRef {
    slot: Arc<Slot>,
    shared: Arc<Shared>,
    /// Body bytes still to come, when the response declared its length.
    remaining: Option<u64>,
}

impl Drop for StreamRef {
    fn drop(&mut self) {
        self.slot.lock().dropped = true;
        self.shared.wake();
    }
}

impl StreamRef {
    fn poll_head(&self, cx: &mut Context<'_>) -> Poll<Result<ResponseHead, Failure>> {
        let mut s = self.slot.lock();
        match s.head.take() {
            Some(r) => {
                s.head_seen = true;
                Poll::Ready(r)
            }
            None => {
                s.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl StreamBody for StreamRef {
    /// The next body frame (data, then trailers); `None` at the end.
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let mut s = self.slot.lock();
        if let Some(d) = s.data.pop_front() {
            s.released += d.len();
            self.remaining = self.remaining.map(|n| n.saturating_sub(d.len() as u64));
            let wake = s.data.is_empty() || s.released >= RELEASE_BATCH;
            drop(s);
            if wake {
                self.shared.wake();
            }
            return Poll::Ready(Some(Ok(Frame::data(d))));
        }
        if let Some(e) = s.error.take() {
            s.ended = true;
            return Poll::Ready(Some(Err(e)));
        }
        if s.ended {
            return Poll::Ready(s.trailers.take().map(|t| Ok(Frame::trailers(t))));
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// The declared length still to come, if any.
    fn remaining(&self) -> Option<u64> {
        self.remaining
    }

    /// Whether the body has nothing more to give.
    fn is_end(&self) -> bool {
        let s = self.slot.lock();
        s.ended && s.data.is_empty() && s.trailers.is_none() && s.error.is_none()
    }
}

impl H2Conn {
    /// Starts the connection's task over `io` (TLS already done, or h2c by prior
    /// knowledge); it closes after `idle_timeout` without streams.
    pub(crate) fn start<Io: Connection>(
        io: Io,
        cfg: &ClientConfig,
        idle_timeout: Option<Duration>,
    ) -> H2Conn {
        let shared = Arc::new(Shared {
            state: Mutex::new(ConnState {
                waker: None,
                queue: VecDeque::new(),
                usable: true,
                handles: 1,
            }),
        });
        let mut out = Vec::new();
        let machine = ClientConn::new(cfg, Instant::now(), &mut out);
        let mut driver = Driver {
            io,
            shared: shared.clone(),
            machine,
            out,
            written: 0,
            rbuf: vec![0; READ_CHUNK].into_boxed_slice(),
            streams: HashMap::new(),
            events: Vec::new(),
            shutting: false,
            idle_timeout,
            idle: None,
            timer: None,
        };
        drop(crate::engine::runtime::spawn(async move {
            poll_fn(|cx| driver.poll(cx)).await
        }));
        H2Conn { shared }
    }

    /// Whether new requests may go on this connection.
    pub(crate) fn is_usable(&self) -> bool {
        self.shared.lock().usable
    }

    /// Sends `req` (origin form, Host set) on a new stream once one may open; answers
    /// the response once its head has arrived.
    pub(crate) async fn send(
        &self,
        req: Request<ReqBody>,
        key: &Key,
        max_body: Option<u64>,
    ) -> Result<Response<ResponseBody>, Failure> {
        let (parts, body) = req.into_parts();
        let slot = Arc::new(Slot::default());
        let head_only = parts.method == Method::HEAD;
        let mut stream = StreamRef {
            slot: slot.clone(),
            shared: self.shared.clone(),
            remaining: None,
        };
        let authority = match parts.headers.get(HOST).map(HeaderValue::to_str) {
            Some(Ok(h)) => h.to_owned(),
            _ => key.authority.as_str().to_owned(),
        };
        let scheme = if key.scheme == http::uri::Scheme::HTTPS {
            "https"
        } else {
            "http"
        };
        {
            let mut st = self.shared.lock();
            if !st.usable {
                return Err(Failure::NotSent(Error::new(
                    ErrorKind::ClosedBeforeResponse,
                    "the HTTP/2 connection is closing",
                )));
            }
            st.queue.push_back(Queued {
                parts,
                body,
                scheme,
                authority,
                slot,
            });
            if let Some(w) = st.waker.take() {
                w.wake();
            }
        }
        let head = poll_fn(|cx| stream.poll_head(cx)).await?;
        if let (Some(limit), Some(n)) = (max_body, head.content_length) {
            if n > limit {
                return Err(Failure::Sent(Error::new(
                    ErrorKind::BodyTooLarge,
                    format!("content-length {n} over the limit of {limit}"),
                )));
            }
        }
        let bodiless = head_only || matches!(head.status.as_u16(), 204 | 304);
        stream.remaining = if bodiless {
            Some(0)
        } else {
            head.content_length
        };
        let mut res = Response::new(ResponseBody::empty());
        *res.status_mut() = head.status;
        *res.version_mut() = Version::HTTP_2;
        *res.headers_mut() = head.headers;
        *res.body_mut() = ResponseBody::multiplexed(Box::new(stream), max_body);
        Ok(res)
    }
}

/// The connection task's side of one stream.
struct Local {
    slot: Arc<Slot>,
    /// The request body still to send, and a piece of it the windows held back (with
    /// whether it is the last).
    body: Option<ReqBody>,
    chunk: Option<(Bytes, bool)>,
    /// Body bytes handed to the slot and not yet credited.
    unreleased: usize,
    ended: bool,
}

struct Driver<Io> {
    io: Io,
    shared: Arc<Shared>,
    machine: ClientConn,
    out: Vec<u8>,
    /// How much of `out` is written.
    written: usize,
    rbuf: Box<[u8]>,
    streams: HashMap<u32, Local>,
    events: Vec<Event>,
    /// Closing: our GOAWAY is being written, then the stream shut down.
    shutting: bool,
    idle_timeout: Option<Duration>,
    /// Armed while the connection has no streams.
    idle: Option<crate::engine::time::Sleep>,
    /// Armed for the machine's next deadline (keep-alive, SETTINGS ACK).
    timer: Option<crate::engine::time::Sleep>,
}

impl<Io: Connection> Driver<Io> {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            if self.shutting {
                let _ = ready!(self.poll_write(cx));
                let _ = ready!(hyper::rt::Write::poll_shutdown(Pin::new(&mut self.io), cx));
                return Poll::Ready(());
            }
            let mut progress = self.intake(cx);
            if self.shutting {
                continue;
            }
            progress |= self.streams_step(cx);
            if self.idle_expired(cx) {
                self.machine.close(&mut self.out);
                self.lose_everything();
                self.shutting = true;
                continue;
            }
            progress |= self.timers(cx);
            self.machine.flush_credit(&mut self.out);
            if let Poll::Ready(Err(e)) = self.poll_write(cx) {
                tracing::debug!(error = %e, "HTTP/2 connection write failed");
                self.machine.peer_closed(&mut self.events);
                self.handle_events();
            }
            progress |= self.read(cx);
            if self.machine.is_failed() {
                self.lose_everything();
                self.shutting = true;
                continue;
            }
            if !progress {
                return Poll::Pending;
            }
        }
    }

    /// Whether the connection has been without streams for the idle timeout (the timer
    /// runs only meanwhile).
    fn idle_expired(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(t) = self.idle_timeout.filter(|_| self.streams.is_empty()) else {
            self.idle = None;
            return false;
        };
        let sleep = self
            .idle
            .get_or_insert_with(|| crate::engine::time::sleep(t));
        std::future::Future::poll(Pin::new(sleep), cx).is_ready()
    }

    /// Lets the machine act on its deadlines now (a keep-alive PING to send, an
    /// unanswered one that fails the connection) and sleeps until its next one; returns
    /// whether that sleep is over already (a deadline to act on).
    fn timers(&mut self, cx: &mut Context<'_>) -> bool {
        let next = self
            .machine
            .poll_timers(Instant::now(), &mut self.out, &mut self.events);
        self.handle_events();
        let Some(t) = next else {
            self.timer = None;
            return false;
        };
        // Every read moves the keep-alive deadline later: a timer armed for an earlier
        // instant is kept (it wakes the task, which asks the machine again), so a busy
        // connection does not re-arm one per read.
        let sleep = match &mut self.timer {
            Some(s) if t >= s.deadline() && !s.is_elapsed() => s,
            slot => slot.insert(crate::engine::time::sleep_until(t)),
        };
        std::future::Future::poll(Pin::new(sleep), cx).is_ready()
    }

    /// Opens streams for queued requests while the server's limit allows; refuses them
    /// once the connection is unusable. Returns whether anything happened.
    fn intake(&mut self, cx: &mut Context<'_>) -> bool {
        let shared = self.shared.clone();
        let (opened, refused) = {
            let mut st = shared.lock();
            if !st.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                st.waker = Some(cx.waker().clone());
            }
            let mut opened = false;
            while self.machine.can_open() {
                // An extended CONNECT waits for the server's SETTINGS to say it may go.
                let extended = st.queue.front().is_some_and(Queued::is_extended_connect);
                if extended && self.machine.extended_connect().is_none() {
                    break;
                }
                match st.queue.pop_front() {
                    Some(q) => {
                        self.open(q);
                        opened = true;
                    }
                    None => break,
                }
            }
            if !self.machine.is_usable() {
                st.usable = false;
            }
            let refused: Vec<Queued> = if st.usable {
                Vec::new()
            } else {
                st.queue.drain(..).collect()
            };
            if st.handles == 0 && st.queue.is_empty() && !opened && self.streams.is_empty() {
                self.machine.close(&mut self.out);
                self.shutting = true;
            }
            (opened, refused)
        };
        let progress = opened || !refused.is_empty();
        for q in refused {
            q.slot.fail(Failure::NotSent(Error::new(
                ErrorKind::ClosedBeforeResponse,
                "the HTTP/2 connection closed before the request was sent",
            )));
        }
        progress
    }

    fn open(&mut self, q: Queued) {
        let Queued {
            mut parts,
            body,
            scheme,
            authority,
            slot,
        } = q;
        if slot.lock().dropped {
            return; // the caller gave up while it waited for a stream
        }
        let end = body.is_end_stream();
        if let Some(n) = body.size_hint().exact() {
            let bodied = !matches!(
                parts.method,
                Method::GET | Method::HEAD | Method::DELETE | Method::OPTIONS | Method::TRACE
            );
            if !parts.headers.contains_key(CONTENT_LENGTH) && (n > 0 || bodied) {
                parts.headers.insert(CONTENT_LENGTH, HeaderValue::from(n));
            }
        }
        let protocol = parts.extensions.get::<crate::http::Protocol>();
        if protocol.is_some() && self.machine.extended_connect() != Some(true) {
            slot.fail(Failure::NotSent(Error::new(
                ErrorKind::Other,
                NoExtendedConnect(
                    "the server does not allow extended CONNECT (RFC 8441's \
                     SETTINGS_ENABLE_CONNECT_PROTOCOL)",
                ),
            )));
            return;
        }
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let head = RequestHead {
            method: &parts.method,
            scheme,
            authority: &authority,
            path,
            protocol: protocol.map(|p| p.as_str()),
            headers: &parts.headers,
        };
        let Some(id) = self.machine.open(&head, end, &mut self.out) else {
            // `intake` asked `can_open` first; never reached.
            slot.fail(Failure::NotSent(Error::new(
                ErrorKind::Other,
                "no HTTP/2 stream could be opened",
            )));
            return;
        };
        self.streams.insert(
            id,
            Local {
                slot,
                body: (!end).then_some(body),
                chunk: None,
                unreleased: 0,
                ended: false,
            },
        );
    }

    /// Credits what readers took, resets dropped streams, and sends request bodies.
    fn streams_step(&mut self, cx: &mut Context<'_>) -> bool {
        let mut progress = false;
        let mut gone = Vec::new();
        for (&id, l) in self.streams.iter_mut() {
            let (released, dropped) = {
                let mut s = l.slot.lock();
                (std::mem::take(&mut s.released), s.dropped)
            };
            let released = released.min(l.unreleased);
            if released > 0 {
                self.machine.release(id, released);
                l.unreleased -= released;
            }
            if dropped {
                self.machine.reset(id, ErrorCode::CANCEL, &mut self.out);
                self.machine.release(id, l.unreleased);
                gone.push(id);
                progress = true;
                continue;
            }
            if self.out.len() - self.written < MAX_PENDING_OUT {
                progress |= upload(&mut self.machine, id, l, &mut self.out, cx);
            }
            if l.ended && l.body.is_none() && l.chunk.is_none() && l.unreleased == 0 {
                gone.push(id);
            }
        }
        for id in gone {
            self.streams.remove(&id);
            progress = true;
        }
        progress
    }

    /// Writes what is pending; ready once all of it is out.
    fn poll_write(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while self.written < self.out.len() {
            let n = ready!(hyper::rt::Write::poll_write(
                Pin::new(&mut self.io),
                cx,
                &self.out[self.written..]
            ))?;
            if n == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.out.clear();
        self.written = 0;
        ready!(hyper::rt::Write::poll_flush(Pin::new(&mut self.io), cx))?;
        Poll::Ready(Ok(()))
    }

    /// Reads until the stream has nothing more now; returns whether anything came.
    fn read(&mut self, cx: &mut Context<'_>) -> bool {
        let mut progress = false;
        let now = Instant::now();
        while !self.machine.is_failed() {
            let mut rb = hyper::rt::ReadBuf::new(&mut self.rbuf);
            match hyper::rt::Read::poll_read(Pin::new(&mut self.io), cx, rb.unfilled()) {
                Poll::Pending => break,
                Poll::Ready(Ok(())) => {
                    let n = rb.filled().len();
                    if n == 0 {
                        self.machine.peer_closed(&mut self.events);
                    } else {
                        self.machine
                            .receive(now, &self.rbuf[..n], &mut self.out, &mut self.events);
                    }
                }
                Poll::Ready(Err(e)) => {
                    tracing::debug!(error = %e, "HTTP/2 connection read failed");
                    self.machine.peer_closed(&mut self.events);
                }
            }
            self.handle_events();
            progress = true;
        }
        progress
    }

    fn handle_events(&mut self) {
        if self.events.is_empty() {
            return;
        }
        // Before any request learns its stream was refused, so that it is not sent again
        // on this connection.
        if !self.machine.is_usable() {
            self.shared.lock().usable = false;
        }
        for e in std::mem::take(&mut self.events) {
            match e {
                Event::Head { stream, head } => {
                    if let Some(l) = self.streams.get(&stream) {
                        l.slot.update(|s| s.head = Some(Ok(head)));
                    }
                }
                Event::Data { stream, data } => match self.streams.get_mut(&stream) {
                    Some(l) => {
                        l.unreleased += data.len();
                        l.slot.update(|s| s.data.push_back(data));
                    }
                    None => self.machine.release(stream, data.len()),
                },
                Event::End { stream, trailers } => {
                    if let Some(l) = self.streams.get_mut(&stream) {
                        l.ended = true;
                        l.slot.update(|s| {
                            s.ended = true;
                            s.trailers = trailers;
                        });
                    }
                }
                Event::Reset { stream, why } => {
                    let Some(mut l) = self.streams.remove(&stream) else {
                        continue;
                    };
                    self.machine.release(stream, l.unreleased);
                    l.unreleased = 0;
                    if l.ended && why == Why::Reset(ErrorCode::NO_ERROR) {
                        // §8.1: the response is complete; the server wants no more of
                        // the request. The reader keeps what it has.
                        continue;
                    }
                    l.slot.fail(failure(why));
                }
                Event::GoAway { last_stream, code } => {
                    tracing::debug!(last_stream, ?code, "the server sent GOAWAY");
                    self.shared.lock().usable = false;
                }
            }
        }
    }

    /// The connection is over: every request still waiting or in flight fails.
    fn lose_everything(&mut self) {
        self.handle_events();
        let queued: Vec<Queued> = {
            let mut st = self.shared.lock();
            st.usable = false;
            st.queue.drain(..).collect()
        };
        for q in queued {
            q.slot.fail(Failure::NotSent(Error::new(
                ErrorKind::ClosedBeforeResponse,
                "the HTTP/2 connection closed before the request was sent",
            )));
        }
        for (_, l) in self.streams.drain() {
            if !l.ended {
                l.slot
                    .fail(failure(Why::Lost("the HTTP/2 connection closed")));
            }
        }
    }
}

/// The error a stream that ended without its response gets.
fn failure(why: Why) -> Failure {
    match why {
        Why::Refused => Failure::NotSent(Error::new(
            ErrorKind::ClosedBeforeResponse,
            "the server refused the stream (REFUSED_STREAM or GOAWAY): it was not processed",
        )),
        Why::Reset(code) => Failure::Sent(Error::new(
            ErrorKind::Protocol,
            format!("the server reset the stream ({code:?})"),
        )),
        Why::Protocol(why) => Failure::Sent(Error::new(ErrorKind::Protocol, why)),
        Why::Lost(why) => Failure::Sent(Error::new(ErrorKind::ClosedBeforeResponse, why)),
        Why::TimedOut(why) => Failure::Sent(Error::new(ErrorKind::Timeout, why)),
    }
}
