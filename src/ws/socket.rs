//! The driver: a WebSocket on a fibr connection, and the [`WebSocket`] handle the
//! application holds.
//!
//! The connection's rounds feed the machine; the messages it delivers wait in a bounded
//! inbox (past its bound reads are held: a slow reader pauses the peer). The
//! application's task (the `on_upgrade` callback) is owned by the connection and polled
//! in its rounds, so a message read, handled and answered costs one round and one write.
//! A handle moved to another task works too: it is woken like any future. Sends encode
//! into the connection's output, and wait while more than the write bound is queued.

use super::message::Message;
use super::transport::Transport;
use super::{Config, Error};
use crate::engine::conn::{Conn, Handler};
use crate::http::pipe::StreamIo;
use crate::http::switch::Switched;
use crate::proto::ws::keepalive::{Action, KeepAlive};
use crate::proto::ws::{self as proto, Machine, Role, State};
use bytes::Bytes;
use http::HeaderValue;
use http_body::Body;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// The application's task for one connection.
pub(crate) type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What the connection and its handles share.
pub(crate) struct Shared {
    io: Transport,
    read_limit: usize,
    write_limit: usize,
    inner: Mutex<Inner>,
}

struct Inner {
    machine: Machine,
    inbox: VecDeque<proto::Message>,
    /// Payload bytes in `inbox`.
    inbox_bytes: usize,
    reader: Option<Waker>,
    writer: Option<Waker>,
    /// Why no more messages come, once none do.
    end: End,
    /// Reads are held because the inbox is full.
    holding: bool,
    /// Keep-alive pings, when configured (boxed: most sockets have none).
    keepalive: Option<Box<KeepAliveSlot>>,
}

/// The keep-alive machine and the task that runs its deadlines.
struct KeepAliveSlot {
    machine: KeepAlive,
    /// The keep-alive task while it sleeps, woken when the socket ends so that it does not
    /// keep the socket's state alive until its deadline.
    waker: Option<Waker>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum End {
    Open,
    /// The close handshake finished, or the connection ended after it.
    Closed,
    /// A failure to report once, then `Closed` (boxed: every socket's state has an `End`,
    /// few fail).
    Failed(Box<Failure>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Failure {
    error: Error,
    /// The close frame owed for a protocol error, sent after the application's turn so
    /// that its answers to the messages before the error go first (Autobahn's strict
    /// order).
    close: Option<Box<[u8]>>,
}

impl End {
    fn failed(error: Error) -> End {
        End::Failed(Box::new(Failure { error, close: None }))
    }

    /// The failure to report to a sender: once the close it owes, if any, is out.
    fn send_error(&self) -> Option<Error> {
        match self {
            End::Failed(f) if f.close.is_none() => Some(f.error.clone()),
            _ => None,
        }
    }

    fn owes_close(&self) -> bool {
        matches!(self, End::Failed(f) if f.close.is_some())
    }
}

thread_local! {
    /// Where frames are encoded before they join the connection's output.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

fn with_scratch<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    SCRATCH.with(|s| {
        let mut out = s.take();
        out.clear();
        let r = f(&mut out);
        if out.capacity() <= 256 * 1024 {
            out.clear();
            s.replace(out);
        }
        r
    })
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Feeds bytes read from the peer; returns the reader to wake, unless it is `own`
    /// (the connection's task, which polls next anyway).
    fn receive(&self, data: &[u8], own: &Waker) -> Option<Waker> {
        let mut inner = self.lock();
        if inner.end != End::Open {
            return None;
        }
        let inner = &mut *inner;
        if let Some(k) = inner.keepalive.as_mut() {
            k.machine.heard();
        }
        let before = inner.inbox.len();
        let result = with_scratch(|out| {
            let inbox = &mut inner.inbox;
            let bytes = &mut inner.inbox_bytes;
            let r = inner.machine.receive(data, out, &mut |m| {
                *bytes += payload_len(&m);
                inbox.push_back(m);
            });
            match r {
                Err(e) => Err((e, out.as_slice().into())),
                Ok(()) => {
                    if !out.is_empty() {
                        let _ = self.io.send(out);
                    }
                    Ok(())
                }
            }
        });
        match result {
            Err((e, close)) => {
                tracing::debug!(error = %e, "WebSocket protocol error");
                inner.end = End::Failed(Box::new(Failure {
                    error: Error::protocol(e),
                    close: Some(close),
                }));
            }
            Ok(()) => self.close_if_done(inner),
        }
        if inner.inbox_bytes > self.read_limit && !inner.holding {
            inner.holding = true;
            self.io.hold_reads();
        }
        let woke = inner.inbox.len() != before || inner.end != End::Open;
        let reader = if woke { inner.reader.take() } else { None };
        reader.filter(|w| !w.will_wake(own))
    }

    /// After the close handshake the connection ends: the server closes it first (RFC
    /// 6455 §7.1.1); the client, once the server has (or at once, having nothing to wait
    /// for).
    fn close_if_done(&self, inner: &mut Inner) {
        if inner.machine.state() == State::Closed {
            inner.end = End::Closed;
            if inner.machine.role() == Role::Server {
                self.io.close();
            } else {
                self.io.shutdown_write();
            }
        }
    }

    /// The connection ended (EOF or closed): no more messages.
    fn ended(&self, err: Option<std::io::Error>) -> Vec<Waker> {
        let mut inner = self.lock();
        if inner.end == End::Open {
            inner.end = if inner.machine.state() == State::Closed {
                End::Closed
            } else {
                End::failed(match err {
                    Some(e) => Error::io(e),
                    None => Error::abnormal_close(),
                })
            };
        }
        let keepalive = inner.keepalive.as_mut().and_then(|k| k.waker.take());
        [inner.reader.take(), inner.writer.take(), keepalive]
            .into_iter()
            .flatten()
            .collect()
    }

    /// The keep-alive task's wait: ready with `true` once the socket has ended.
    fn keepalive_ended(&self, cx: &mut Context<'_>) -> Poll<bool> {
        let mut inner = self.lock();
        if inner.end != End::Open {
            return Poll::Ready(true);
        }
        if let Some(k) = inner.keepalive.as_mut() {
            k.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    /// A keep-alive deadline passed: pings a silent peer, or fails the connection of one
    /// that did not answer. Returns how long until the next deadline (none: the socket
    /// has ended).
    fn keepalive_deadline(&self) -> Option<std::time::Duration> {
        let mut inner = self.lock();
        if inner.end != End::Open {
            return None;
        }
        let (action, wait) = inner.keepalive.as_mut()?.machine.on_deadline();
        match action {
            Action::Wait => {}
            Action::Ping => with_scratch(|out| {
                let ping = proto::Message::Ping(Bytes::new());
                if inner.machine.send(&ping, out).is_ok() {
                    let _ = self.io.send(out);
                }
            }),
            Action::Fail => {
                tracing::debug!("WebSocket peer did not answer a keep-alive ping");
                inner.end = End::failed(Error::keepalive_timeout());
                let wakers = [inner.reader.take(), inner.writer.take()];
                drop(inner);
                self.io.close();
                wakers.into_iter().flatten().for_each(Waker::wake);
                return None;
            }
        }
        Some(wait)
    }

    /// After a protocol error, once the application has taken every message before it
    /// (and answered them, if it does): the close frame, then the end of the connection.
    fn finish_failing(&self) {
        let mut inner = self.lock();
        if inner.inbox.is_empty() {
            self.send_failing(&mut inner);
        }
    }

    fn send_failing(&self, inner: &mut Inner) {
        if let End::Failed(f) = &mut inner.end {
            self.send_close(f.close.take());
        }
    }

    /// Sends a protocol error's close, then ends the connection.
    fn send_close(&self, close: Option<Box<[u8]>>) {
        if let Some(close) = close {
            let _ = self.io.send(&close);
            self.io.close();
        }
    }

    fn wake_writer(&self) -> Option<Waker> {
        self.lock().writer.take()
    }

    fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Option<Result<Message, Error>>> {
        let mut inner = self.lock();
        if let Some(m) = inner.inbox.pop_front() {
            inner.inbox_bytes -= payload_len(&m);
            if inner.inbox.is_empty() {
                // An idle socket keeps no queue.
                inner.inbox = VecDeque::new();
            }
            if inner.holding && inner.inbox_bytes <= self.read_limit / 2 {
                inner.holding = false;
                self.io.resume_reads();
            }
            return Poll::Ready(Some(Ok(m.into())));
        }
        match std::mem::replace(&mut inner.end, End::Closed) {
            End::Open => {
                inner.end = End::Open;
                inner.reader = Some(cx.waker().clone());
                Poll::Pending
            }
            End::Closed => Poll::Ready(None),
            End::Failed(f) => {
                let Failure { error, close } = *f;
                self.send_close(close);
                Poll::Ready(Some(Err(error)))
            }
        }
    }

    fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        let mut inner = self.lock();
        if let Some(e) = inner.end.send_error() {
            return Poll::Ready(Err(e));
        }
        if !self.io.is_open() {
            return Poll::Ready(Err(Error::closed()));
        }
        if self.io.queued_bytes() <= self.write_limit {
            return Poll::Ready(Ok(()));
        }
        inner.writer = Some(cx.waker().clone());
        drop(inner);
        self.io.wake_when_drained(cx.waker());
        Poll::Pending
    }

    fn send(&self, msg: Message) -> Result<(), Error> {
        let mut inner = self.lock();
        if let Some(e) = inner.end.send_error() {
            return Err(e);
        }
        let msg = proto::Message::from(msg);
        with_scratch(|out| {
            inner.machine.send(&msg, out).map_err(Error::protocol)?;
            self.io.send(out).map_err(Error::io)
        })?;
        if !inner.end.owes_close() {
            self.close_if_done(&mut inner);
        }
        Ok(())
    }

    /// The handle was dropped: a socket still open is closed (normal closure; after a
    /// protocol error, with the close it owes).
    fn abandon(&self) {
        let mut inner = self.lock();
        if inner.end.owes_close() {
            self.send_failing(&mut inner);
        } else if inner.machine.state() == State::Open {
            let close = proto::Message::Close(Some(proto::CloseFrame {
                code: super::close_code::NORMAL,
                reason: Bytes::new(),
            }));
            with_scratch(|out| {
                if inner.machine.send(&close, out).is_ok() {
                    let _ = self.io.send(out);
                }
            });
        }
        inner.end = End::Closed;
        self.io.close();
    }
}

fn payload_len(m: &proto::Message) -> usize {
    match m {
        proto::Message::Text(b)
        | proto::Message::Binary(b)
        | proto::Message::Ping(b)
        | proto::Message::Pong(b) => b.len(),
        proto::Message::Close(_) => 0,
    }
}

/// A WebSocket connection: a [`Stream`](futures_core::Stream) of messages and a
/// [`Sink`](futures_sink::Sink) for them, with `recv` and `send` as axum's has.
pub struct WebSocket {
    shared: Arc<Shared>,
    /// Boxed: most sockets have none, and every future holding the socket carries it.
    protocol: Option<Box<HeaderValue>>,
}

impl WebSocket {
    /// The next message; `None` once the connection is closed.
    pub async fn recv(&mut self) -> Option<Result<Message, Error>> {
        std::future::poll_fn(|cx| self.shared.poll_recv(cx)).await
    }

    /// Sends a message (waits while the connection's output is over its bound).
    pub async fn send(&mut self, msg: Message) -> Result<(), Error> {
        std::future::poll_fn(|cx| self.shared.poll_ready(cx)).await?;
        self.shared.send(msg)
    }

    /// The subprotocol the handshake agreed on.
    pub fn protocol(&self) -> Option<&HeaderValue> {
        self.protocol.as_deref()
    }

    /// Starts the close handshake with a close frame (the peer's answer then ends
    /// [`recv`](Self::recv)).
    pub async fn close(&mut self, frame: Option<super::CloseFrame>) -> Result<(), Error> {
        self.send(Message::Close(frame)).await
    }
}

impl Drop for WebSocket {
    fn drop(&mut self) {
        self.shared.abandon();
    }
}

impl futures_core::Stream for WebSocket {
    type Item = Result<Message, Error>;
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.shared.poll_recv(cx)
    }
}

impl futures_sink::Sink<Message> for WebSocket {
    type Error = Error;
    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.shared.poll_ready(cx)
    }
    fn start_send(self: Pin<&mut Self>, msg: Message) -> Result<(), Error> {
        self.shared.send(msg)
    }
    /// Sent messages are in the connection's output at once: nothing to flush here.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }
    fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        match self.shared.send(Message::Close(None)) {
            Ok(()) => Poll::Ready(Ok(())),
            Err(e) if e.is_closed() => Poll::Ready(Ok(())),
            Err(e) => Poll::Ready(Err(e)),
        }
    }
}

/// The connection's side: the shared state and the application's task.
struct Driven {
    shared: Arc<Shared>,
    task: Option<Task>,
    waker: Waker,
}

/// The connection's handler once it speaks WebSocket (its state is the context).
pub(crate) struct WsHandler;

impl Driven {
    /// Bytes from the peer, then the application's turn.
    fn receive(&mut self, data: &[u8]) {
        if !data.is_empty() {
            if let Some(w) = self.shared.receive(data, &self.waker) {
                w.wake();
            }
        }
        self.poll_task();
        self.shared.finish_failing();
    }

    /// Polls the application's task (in the connection's round, so what it sends joins
    /// the round's write).
    fn poll_task(&mut self) {
        if let Some(task) = self.task.as_mut() {
            let mut cx = Context::from_waker(&self.waker);
            let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                task.as_mut().poll(&mut cx).is_ready()
            }))
            .unwrap_or_else(|_| {
                tracing::error!("the WebSocket task panicked");
                true
            });
            if done {
                self.task = None;
            }
        }
    }
}

fn with_driven(conn: &Conn, f: impl FnOnce(&mut Driven)) {
    conn.with_context::<Driven, _>(|d| {
        if let Some(d) = d {
            f(d)
        }
    })
}

/// An adopted connection's handler until it opens (it is not registered yet): it holds the
/// bytes after the handshake, feeds them in `on_open`, and gives way to the shared
/// [`WsHandler`], so that sockets keep no room for them.
struct Adopted {
    first: Mutex<Option<Box<[u8]>>>,
}

impl Handler for Adopted {
    fn on_open(&self, conn: &Conn) {
        conn.set_shared_handler(ws_handler());
        let first = self.first.lock().ok().and_then(|mut f| f.take());
        with_driven(conn, |d| d.receive(&first.unwrap_or_default()));
    }

    // Only `on_open` comes first; the rest are WsHandler's, should one come anyway.
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        WsHandler.on_data(conn, data)
    }

    fn on_eof(&self, conn: &Conn) {
        WsHandler.on_eof(conn)
    }

    fn on_wake(&self, conn: &Conn) {
        WsHandler.on_wake(conn)
    }

    fn on_close(&self, conn: &Conn, err: Option<std::io::Error>) {
        WsHandler.on_close(conn, err)
    }
}

impl Handler for WsHandler {
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        with_driven(conn, |d| d.receive(data));
    }

    fn on_eof(&self, conn: &Conn) {
        self.on_close(conn, None);
        conn.close();
    }

    fn on_drained(&self, conn: &Conn) {
        with_driven(conn, |d| {
            if let Some(w) = d.shared.wake_writer() {
                if w.will_wake(&d.waker) {
                    d.poll_task();
                } else {
                    w.wake();
                }
            }
        });
    }

    fn on_wake(&self, conn: &Conn) {
        with_driven(conn, Driven::poll_task);
    }

    fn on_close(&self, conn: &Conn, err: Option<std::io::Error>) {
        with_driven(conn, |d| {
            for w in d.shared.ended(err) {
                if !w.will_wake(&d.waker) {
                    w.wake();
                }
            }
            d.poll_task();
        });
    }
}

/// Puts a WebSocket on the switched connection (in its round, or before it is
/// registered); `task` gets the socket.
pub(crate) fn start<F, Fut>(
    sw: Switched,
    config: &Config,
    machine: Machine,
    protocol: Option<HeaderValue>,
    task: F,
) where
    F: FnOnce(WebSocket) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let Switched {
        conn,
        read,
        in_round,
    } = sw;
    let conn = &conn;
    let shared = new_shared(Transport::Conn(conn.clone()), config, machine);
    let socket = WebSocket {
        shared: shared.clone(),
        protocol: protocol.map(Box::new),
    };
    conn.set_context(Driven {
        shared,
        task: Some(Box::pin(task(socket))),
        waker: conn.waker(),
    });
    if in_round {
        conn.set_shared_handler(ws_handler());
        WsHandler.on_data(conn, &read);
    } else {
        conn.set_handler(Adopted {
            first: Mutex::new(Some(read.into_boxed_slice())),
        });
    }
}

/// The handler of every WebSocket connection: one, shared (its state is the context).
fn ws_handler() -> Arc<dyn Handler> {
    static HANDLER: std::sync::LazyLock<Arc<dyn Handler>> =
        std::sync::LazyLock::new(|| Arc::new(WsHandler));
    HANDLER.clone()
}

fn new_shared(io: Transport, config: &Config, machine: Machine) -> Arc<Shared> {
    let keepalive = config.keepalive.map(|c| {
        Box::new(KeepAliveSlot {
            machine: KeepAlive::new(c),
            waker: None,
        })
    });
    let first_wait = keepalive.as_ref().map(|k| k.machine.first_wait());
    let shared = Arc::new(Shared {
        io,
        read_limit: config.read_buffer_limit,
        write_limit: config.write_buffer_limit,
        inner: Mutex::new(Inner {
            machine,
            inbox: VecDeque::new(),
            inbox_bytes: 0,
            reader: None,
            writer: None,
            end: End::Open,
            holding: false,
            keepalive,
        }),
    });
    if let Some(wait) = first_wait {
        crate::engine::runtime::spawn(run_keepalive(shared.clone(), wait));
    }
    shared
}

/// Sleeps until each keep-alive deadline and applies it, until the socket ends.
async fn run_keepalive(shared: Arc<Shared>, mut wait: std::time::Duration) {
    loop {
        let mut sleep = crate::engine::time::sleep(wait);
        let ended = std::future::poll_fn(|cx| match shared.keepalive_ended(cx) {
            Poll::Ready(ended) => Poll::Ready(ended),
            Poll::Pending => Pin::new(&mut sleep).poll(cx).map(|()| false),
        })
        .await;
        if ended {
            return;
        }
        match shared.keepalive_deadline() {
            Some(next) => wait = next,
            None => return,
        }
    }
}

/// Puts a WebSocket on an HTTP/2 stream: `output` carries what it sends (the server's
/// response body or the client's request body reads it), `input` (the other body) is read
/// on a task of its own. One connection carries many streams, so its rounds cannot poll
/// the application's task: the server spawns it, the client's caller holds the socket.
pub(crate) fn stream_socket<B>(
    output: Arc<StreamIo>,
    input: B,
    config: &Config,
    machine: Machine,
    protocol: Option<HeaderValue>,
) -> WebSocket
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<crate::http::BoxError>,
{
    let shared = new_shared(Transport::Stream(output.clone()), config, machine);
    crate::engine::runtime::spawn(read_stream(shared.clone(), output, input));
    WebSocket {
        shared,
        protocol: protocol.map(Box::new),
    }
}

/// Feeds the input body's DATA to the machine, pausing while reads are held; its end
/// ends the socket, and the socket's end (its output closed) ends the reading.
async fn read_stream<B>(shared: Arc<Shared>, output: Arc<StreamIo>, input: B)
where
    B: Body<Data = Bytes>,
    B::Error: Into<crate::http::BoxError>,
{
    let mut input = std::pin::pin!(input);
    let err = loop {
        let next = std::future::poll_fn(|cx| match output.poll_input(cx) {
            Poll::Ready(true) => input.as_mut().poll_frame(cx).map(Some),
            Poll::Ready(false) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        });
        match next.await.flatten() {
            None => break None,
            Some(Err(e)) => break Some(std::io::Error::other(e.into())),
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    if let Some(w) = shared.receive(&data, Waker::noop()) {
                        w.wake();
                    }
                    shared.finish_failing();
                }
            }
        }
    };
    for w in shared.ended(err) {
        w.wake();
    }
}
