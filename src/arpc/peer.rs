//! One connection's two-way state and its handle, [`Peer`]: the calls this side has in
//! flight (the machine's [`Calls`]) and the one timer their deadlines share, the values an
//! application keeps per connection, and sending (requests, notifies, answers, encoded
//! messages) on the connection. Both roles use it: the server's side of a client, and a
//! client's connection.

use super::codec::Codec;
use super::error::Error;
use super::stream::{Stream, Streams};
use super::Config;
use crate::engine::conn::Conn;
use crate::engine::time::{sleep_until, Sleep};
use crate::proto::arpc::{Calls, Cmd, Head, FLAG_ASYNC, FLAG_ERROR};
use bytes::Bytes;
use futures_channel::oneshot;
use std::fmt;
use std::future::Future;
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Context as TaskContext;
use std::time::{Duration, Instant};

/// The answer to a call.
pub type Reply = Result<Bytes, Error>;

/// What waits for a call's answer.
enum Waiter {
    /// A `call` future.
    Sync(oneshot::Sender<Reply>),
    /// A `call_async` callback.
    Async(Box<dyn FnOnce(Reply) + Send>),
}

impl Waiter {
    fn finish(self, reply: Reply) {
        match self {
            // The caller may have stopped waiting (its future dropped).
            Waiter::Sync(tx) => drop(tx.send(reply)),
            Waiter::Async(f) => f(reply),
        }
    }
}

/// The calls in flight, and whether the connection is gone (then nothing more starts).
struct CallState {
    calls: Calls<Waiter>,
    gone: bool,
}

pub(crate) struct Session {
    conn: Conn,
    state: Mutex<CallState>,
    /// Armed at the earliest deadline in `state`; it wakes the connection (`on_wake`).
    timer: Mutex<Option<Sleep>>,
    values: Mutex<http::Extensions>,
    /// What pending and later calls fail with once the connection is gone.
    lost: fn() -> Error,
    /// Handlers that did not finish in the round that read them: how many run, and
    /// whether that held the connection's reads (past `max_handlers`).
    handlers: Mutex<(usize, bool)>,
    max_handlers: usize,
    pub(crate) streams: Arc<Streams>,
    stream_queue: usize,
}

/// A connection to the other side, either role: call it, notify it, keep values on it.
/// Cheap to clone.
#[derive(Clone)]
pub struct Peer {
    pub(crate) session: Arc<Session>,
}

impl fmt::Debug for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Peer")
            .field("peer_addr", &self.session.conn.peer_addr())
            .finish()
    }
}

impl Session {
    /// A connection's session; `lost` is the error calls fail with once it closes.
    pub(crate) fn new(conn: Conn, config: &Config, lost: fn() -> Error) -> Arc<Session> {
        Arc::new(Session {
            conn,
            state: Mutex::new(CallState {
                calls: Calls::new(config.max_pending_calls),
                gone: false,
            }),
            timer: Mutex::new(None),
            values: Mutex::new(http::Extensions::new()),
            lost,
            handlers: Mutex::new((0, false)),
            max_handlers: config.max_running_handlers,
            streams: Arc::default(),
            stream_queue: config.stream_queue,
        })
    }

    /// A handler goes on as a task: at `max_handlers` of them the connection stops
    /// reading, so a peer cannot start tasks without bound.
    pub(crate) fn handler_started(&self) {
        let mut h = self.handlers.lock().unwrap();
        h.0 += 1;
        if h.0 >= self.max_handlers && !h.1 {
            h.1 = true;
            self.conn.hold_reads();
        }
    }

    /// A handler's task finished: reads go on again below the bound.
    pub(crate) fn handler_done(&self) {
        let mut h = self.handlers.lock().unwrap();
        h.0 -= 1;
        if h.0 < self.max_handlers && h.1 {
            h.1 = false;
            self.conn.resume_reads();
        }
    }

    /// Sends one frame: its head, then `body`, in one write.
    fn send(&self, cmd: u8, flag: u8, seq: u64, method: &[u8], body: &[u8]) -> Result<(), Error> {
        let head = Head::new(cmd, flag, seq, method, body.len())?;
        self.conn
            .send_vectored(&[IoSlice::new(head.as_bytes()), IoSlice::new(body)])
            .map_err(|_| (self.lost)())
    }

    /// Answers the request `seq`: the same method and async bit, the error bit if `error`.
    pub(crate) fn answer(&self, seq: u64, method: &[u8], is_async: bool, error: bool, body: &[u8]) {
        let flag = if is_async { FLAG_ASYNC } else { 0 } | if error { FLAG_ERROR } else { 0 };
        // A connection that closed meanwhile has nobody left to tell.
        let _ = self.send(Cmd::Response as u8, flag, seq, method, body);
    }

    /// Starts a call and sends it; the answer goes to `waiter`.
    fn start(
        &self,
        method: &str,
        body: &[u8],
        is_async: bool,
        timeout: Duration,
        waiter: Waiter,
    ) -> Result<u64, Error> {
        crate::proto::arpc::check_method(method.as_bytes())?;
        let deadline = Instant::now() + timeout;
        let seq = {
            let mut st = self.state.lock().unwrap();
            if st.gone {
                return Err((self.lost)());
            }
            st.calls
                .start(is_async, Some(deadline), waiter)
                .map_err(|_| Error::TooManyCalls)?
        };
        let flag = if is_async { FLAG_ASYNC } else { 0 };
        if let Err(e) = self.send(Cmd::Request as u8, flag, seq, method.as_bytes(), body) {
            self.state.lock().unwrap().calls.remove(seq);
            return Err(e);
        }
        self.arm(deadline);
        Ok(seq)
    }

    /// Makes the timer fire by `deadline`.
    fn arm(&self, deadline: Instant) {
        let mut timer = self.timer.lock().unwrap();
        if timer.as_ref().is_some_and(|t| t.deadline() <= deadline) {
            return;
        }
        let mut sleep = sleep_until(deadline);
        let waker = self.conn.waker();
        if Pin::new(&mut sleep)
            .poll(&mut TaskContext::from_waker(&waker))
            .is_ready()
        {
            waker.wake();
        }
        *timer = Some(sleep);
    }

    /// A response came: the call it answers (if one waits) gets it.
    pub(crate) fn complete(&self, seq: u64, is_async: bool, error: bool, payload: &[u8]) -> bool {
        let Some(waiter) = self.state.lock().unwrap().calls.complete(seq, is_async) else {
            return false;
        };
        waiter.finish(if error {
            Err(Error::Remote(String::from_utf8_lossy(payload).into_owned()))
        } else {
            Ok(Bytes::copy_from_slice(payload))
        });
        true
    }

    /// The timer fired (or the connection woke for another reason): calls past their
    /// deadline fail with `Timeout`, and the timer is set for the next.
    pub(crate) fn expire(&self) {
        let (due, next) = {
            let mut st = self.state.lock().unwrap();
            let due = st.calls.expire(Instant::now());
            (due, st.calls.next_deadline())
        };
        for w in due {
            w.finish(Err(Error::Timeout));
        }
        // Set afresh: a timer that woke early has fired all the same.
        *self.timer.lock().unwrap() = None;
        if let Some(d) = next {
            self.arm(d);
        }
    }

    /// The connection.
    pub(crate) fn conn(&self) -> &Conn {
        &self.conn
    }

    /// A stream the peer opened (`id`, of `method`), registered.
    pub(crate) fn accept_stream(&self, id: u64, method: &[u8]) -> Stream {
        let method = Bytes::copy_from_slice(method);
        Stream::new(
            self.conn.clone(),
            self.streams.clone(),
            false,
            id,
            method,
            self.stream_queue,
        )
    }

    /// The connection closed: every call in flight fails, and so does every later one.
    pub(crate) fn close(&self) {
        let waiters = {
            let mut st = self.state.lock().unwrap();
            st.gone = true;
            st.calls.drain()
        };
        *self.timer.lock().unwrap() = None;
        self.streams.close_all();
        for w in waiters {
            w.finish(Err((self.lost)()));
        }
    }
}

impl Peer {
    /// Calls `method` with `body` and waits at most `timeout` for the answer: its body,
    /// or the peer's error text as [`Error::Remote`].
    pub async fn call(&self, method: &str, body: impl AsRef<[u8]>, timeout: Duration) -> Reply {
        let (tx, rx) = oneshot::channel();
        let seq = self
            .session
            .start(method, body.as_ref(), false, timeout, Waiter::Sync(tx))?;
        // Dropping the future forgets the call, so its answer is dropped too.
        let _forget = Forget {
            session: &self.session,
            seq,
        };
        rx.await.unwrap_or_else(|_| Err((self.session.lost)()))
    }

    /// [`call`](Self::call) with the request encoded and the answer decoded by `codec`.
    pub async fn call_with<C, Req, Resp>(
        &self,
        codec: &C,
        method: &str,
        req: &Req,
        timeout: Duration,
    ) -> Result<Resp, Error>
    where
        C: Codec<Req> + Codec<Resp>,
    {
        let body = codec.encode(req)?;
        let reply = self.call(method, body, timeout).await?;
        Codec::<Resp>::decode(codec, &reply)
    }

    /// Calls `method` without waiting: `done` gets the answer (or `Timeout` after
    /// `timeout`, or the connection's loss) once, on a worker. The request carries the
    /// async bit, as Go's `CallAsync` sends it.
    pub fn call_async(
        &self,
        method: &str,
        body: impl AsRef<[u8]>,
        timeout: Duration,
        done: impl FnOnce(Reply) + Send + 'static,
    ) -> Result<(), Error> {
        self.session
            .start(
                method,
                body.as_ref(),
                true,
                timeout,
                Waiter::Async(Box::new(done)),
            )
            .map(drop)
    }

    /// Sends a one-way message to `method` (it is never answered).
    pub fn notify(&self, method: &str, body: impl AsRef<[u8]>) -> Result<(), Error> {
        let s = &self.session;
        let seq = {
            let mut st = s.state.lock().unwrap();
            if st.gone {
                return Err((s.lost)());
            }
            st.calls.next_seq()
        };
        s.send(
            Cmd::Notify as u8,
            FLAG_ASYNC,
            seq,
            method.as_bytes(),
            body.as_ref(),
        )
    }

    /// Opens a stream to the other side's stream handler for `method`. Nothing is sent
    /// until the first body (or the end).
    pub fn open_stream(&self, method: &str) -> Result<Stream, Error> {
        crate::proto::arpc::check_method(method.as_bytes())?;
        let s = &self.session;
        let id = {
            let mut st = s.state.lock().unwrap();
            if st.gone {
                return Err((s.lost)());
            }
            st.calls.next_seq()
        };
        let method = Bytes::copy_from_slice(method.as_bytes());
        Ok(Stream::new(
            s.conn.clone(),
            s.streams.clone(),
            true,
            id,
            method,
            s.stream_queue,
        ))
    }

    /// Sends a message encoded once for many peers ([`Message`](super::Message)).
    pub(crate) fn send_encoded(&self, frame: &[u8]) -> Result<(), Error> {
        self.session
            .conn
            .send(frame)
            .map_err(|_| (self.session.lost)())
    }

    /// Keeps `value` on this connection (one per type), replacing the last.
    pub fn insert<T: Clone + Send + Sync + 'static>(&self, value: T) {
        self.session.values.lock().unwrap().insert(value);
    }

    /// The value of type `T` kept on this connection.
    pub fn get<T: Clone + Send + Sync + 'static>(&self) -> Option<T> {
        self.session.values.lock().unwrap().get::<T>().cloned()
    }

    /// The other side's address.
    pub fn peer_addr(&self) -> Option<std::net::SocketAddr> {
        self.session.conn.peer_addr()
    }

    /// Closes the connection once what is queued is written.
    pub fn close(&self) {
        self.session.conn.close();
    }

    /// True until the connection closes.
    pub fn is_open(&self) -> bool {
        !self.session.state.lock().unwrap().gone
    }

    /// Calls in flight on this connection.
    pub fn pending_calls(&self) -> usize {
        self.session.state.lock().unwrap().calls.len()
    }
}

/// Forgets a call whose caller stopped waiting.
struct Forget<'a> {
    session: &'a Session,
    seq: u64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.session.state.lock().unwrap().calls.remove(self.seq);
    }
}
