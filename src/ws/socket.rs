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
use super::proto::{self, Machine, Role, State};
use super::transport::{StreamIo, Transport};
use super::{Config, Error};
use crate::http::switch::Switched;
use crate::http::Incoming;
use crate::{Conn, Handler};
use bytes::Bytes;
use http::HeaderValue;
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
    role: Role,
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
    /// The close frame owed for a protocol error, sent after the application's turn so
    /// that its answers to the messages before the error go first (Autobahn's strict
    /// order).
    failing: Option<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum End {
    Open,
    /// The close handshake finished, or the connection ended after it.
    Closed,
    /// A failure to report once, then `Closed`.
    Failed(Error),
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
        let before = inner.inbox.len();
        let result = with_scratch(|out| {
            let inbox = &mut inner.inbox;
            let bytes = &mut inner.inbox_bytes;
            let r = inner.machine.receive(data, out, &mut |m| {
                *bytes += payload_len(&m);
                inbox.push_back(m);
            });
            if r.is_err() {
                inner.failing = Some(out.clone());
            } else if !out.is_empty() {
                let _ = self.io.send(out);
            }
            r
        });
        match result {
            Err(e) => {
                tracing::debug!(error = %e, "WebSocket protocol error");
                inner.end = End::Failed(Error::protocol(e));
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
            if self.role == Role::Server {
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
                End::Failed(match err {
                    Some(e) => Error::io(e),
                    None => Error::abnormal_close(),
                })
            };
        }
        [inner.reader.take(), inner.writer.take()]
            .into_iter()
            .flatten()
            .collect()
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
        if let Some(close) = inner.failing.take() {
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
            End::Failed(e) => {
                self.send_failing(&mut inner);
                Poll::Ready(Some(Err(e)))
            }
        }
    }

    fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        let mut inner = self.lock();
        if let (End::Failed(e), None) = (&inner.end, &inner.failing) {
            return Poll::Ready(Err(e.clone()));
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
        if let (End::Failed(e), None) = (&inner.end, &inner.failing) {
            return Err(e.clone());
        }
        let msg = proto::Message::from(msg);
        with_scratch(|out| {
            inner.machine.send(&msg, out).map_err(Error::protocol)?;
            self.io.send(out).map_err(Error::io)
        })?;
        if inner.failing.is_none() {
            self.close_if_done(&mut inner);
        }
        Ok(())
    }

    /// The handle was dropped: a socket still open is closed (normal closure; after a
    /// protocol error, with the close it owes).
    fn abandon(&self) {
        let mut inner = self.lock();
        if inner.failing.is_some() {
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
    protocol: Option<HeaderValue>,
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
        self.protocol.as_ref()
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
    /// The bytes after the handshake, for `on_open` (a connection not yet registered).
    first: Vec<u8>,
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

impl Handler for WsHandler {
    fn on_open(&self, conn: &Conn) {
        // An adopted connection: its first bytes were set aside before it was registered.
        with_driven(conn, |d| {
            let first = std::mem::take(&mut d.first);
            d.receive(&first);
        });
    }

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
    role: Role,
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
    let shared = new_shared(Transport::Conn(conn.clone()), role, config, machine);
    let socket = WebSocket {
        shared: shared.clone(),
        protocol,
    };
    conn.set_context(Driven {
        shared,
        task: Some(Box::pin(task(socket))),
        waker: conn.waker(),
        first: if in_round { Vec::new() } else { read.clone() },
    });
    conn.set_handler(WsHandler);
    if in_round {
        WsHandler.on_data(conn, &read);
    }
}

fn new_shared(io: Transport, role: Role, config: &Config, machine: Machine) -> Arc<Shared> {
    Arc::new(Shared {
        io,
        role,
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
            failing: None,
        }),
    })
}

/// Puts a server's WebSocket on an HTTP/2 stream: `output` carries what it sends (the
/// response body reads it), `input` (the request body) is read on a task of its own, and
/// `task` gets the socket on another: one connection carries many streams, so its rounds
/// cannot poll them.
pub(crate) fn start_stream<F, Fut>(
    output: Arc<StreamIo>,
    input: Incoming,
    config: &Config,
    machine: Machine,
    protocol: Option<HeaderValue>,
    task: F,
) where
    F: FnOnce(WebSocket) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let shared = new_shared(
        Transport::Stream(output.clone()),
        Role::Server,
        config,
        machine,
    );
    crate::spawn(read_stream(shared.clone(), output, input));
    let socket = WebSocket { shared, protocol };
    crate::spawn(task(socket));
}

/// Feeds the request body's DATA to the machine, pausing while reads are held; its end
/// ends the socket, and the socket's end (its output closed) ends the reading.
async fn read_stream(shared: Arc<Shared>, output: Arc<StreamIo>, mut input: Incoming) {
    use http_body::Body as _;
    let err = loop {
        let next = std::future::poll_fn(|cx| match output.poll_input(cx) {
            Poll::Ready(true) => Pin::new(&mut input).poll_frame(cx).map(Some),
            Poll::Ready(false) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        });
        match next.await.flatten() {
            None => break None,
            Some(Err(e)) => break Some(std::io::Error::other(e)),
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
