//! Streams (arpc's `CmdStream`): a sequence of bodies each way under one id, ended by an
//! EOF bit per direction. A [`Stream`] is a `futures` `Stream` of the bodies that come and
//! a `Sink` of bodies to send. arpc has no flow control for them; here a stream whose
//! reader falls `queue` bodies behind holds the connection's reads until it catches up.

use super::error::Error;
use crate::engine::conn::Conn;
use crate::proto::arpc::{Cmd, Head, STREAM_EOF, STREAM_LOCAL};
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// One stream's receiving side and what the two halves are.
#[derive(Default)]
struct State {
    queue: VecDeque<Bytes>,
    /// The peer sent EOF (or the connection is gone).
    recv_closed: bool,
    /// We sent EOF.
    send_closed: bool,
    waker: Option<Waker>,
    /// This stream's full queue held the connection's reads.
    held: bool,
}

/// A stream's key: opened by this side, and its id.
type Key = (bool, u64);

/// A connection's streams.
#[derive(Default)]
pub(crate) struct Streams {
    map: Mutex<HashMap<Key, Arc<Mutex<State>>>>,
}

impl Streams {
    /// A stream frame for `(ours, id)`: its body queued, its EOF noted. False if there is
    /// no such stream.
    pub(crate) fn deliver(
        &self,
        conn: &Conn,
        key: (bool, u64),
        body: &[u8],
        eof: bool,
        queue: usize,
    ) -> bool {
        let Some(state) = self.map.lock().unwrap().get(&key).cloned() else {
            return false;
        };
        let mut st = state.lock().unwrap();
        // Empty bodies carry only the EOF bit (arpc never delivers them as data).
        if !body.is_empty() && !st.recv_closed {
            st.queue.push_back(Bytes::copy_from_slice(body));
            if st.queue.len() >= queue && !st.held {
                st.held = true;
                conn.hold_reads();
            }
        }
        st.recv_closed |= eof;
        if let Some(w) = st.waker.take() {
            w.wake();
        }
        if st.recv_closed && st.send_closed {
            self.map.lock().unwrap().remove(&key);
        }
        true
    }

    /// The connection is gone: every stream's reader sees its end.
    pub(crate) fn close_all(&self) {
        for (_, state) in self.map.lock().unwrap().drain() {
            let mut st = state.lock().unwrap();
            st.recv_closed = true;
            st.send_closed = true;
            if let Some(w) = st.waker.take() {
                w.wake();
            }
        }
    }
}

/// One stream, either side's: receive the bodies the other side sends (`futures`'
/// `Stream`, or [`recv`](Self::recv)) and send bodies to it (`Sink`, or
/// [`send`](Self::send)). Dropping it ends this side's sending (an EOF frame).
pub struct Stream {
    conn: Conn,
    streams: Arc<Streams>,
    state: Arc<Mutex<State>>,
    /// Opened by this side (the local bit on what it sends).
    ours: bool,
    id: u64,
    method: Bytes,
    queue: usize,
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("method", &self.method())
            .field("id", &self.id)
            .field("opened_here", &self.ours)
            .finish()
    }
}

impl Stream {
    /// Registers stream `id` of `method` (opened here if `ours`) on the connection.
    pub(crate) fn new(
        conn: Conn,
        streams: Arc<Streams>,
        ours: bool,
        id: u64,
        method: Bytes,
        queue: usize,
    ) -> Stream {
        let state = Arc::new(Mutex::new(State::default()));
        streams
            .map
            .lock()
            .unwrap()
            .insert((ours, id), state.clone());
        Stream {
            conn,
            streams,
            state,
            ours,
            id,
            method,
            queue,
        }
    }

    /// The stream's method.
    pub fn method(&self) -> &str {
        std::str::from_utf8(&self.method).unwrap_or_default()
    }

    /// The stream's id (the opener's seq).
    pub fn id(&self) -> u64 {
        self.id
    }

    fn write(&self, body: &[u8], eof: bool) -> Result<(), Error> {
        {
            let mut st = self.state.lock().unwrap();
            if st.send_closed {
                return Err(Error::Closed);
            }
            st.send_closed = eof;
        }
        let cmd = Cmd::Stream as u8
            | if self.ours { STREAM_LOCAL } else { 0 }
            | if eof { STREAM_EOF } else { 0 };
        let head = Head::new(cmd, 0, self.id, &self.method, body.len())?;
        let sent = self
            .conn
            .send_vectored(&[IoSlice::new(head.as_bytes()), IoSlice::new(body)])
            .map_err(|_| Error::Closed);
        if eof {
            self.forget_if_done();
        }
        sent
    }

    /// Sends `body` (an empty one is not seen by the other side).
    pub fn send(&self, body: impl AsRef<[u8]>) -> Result<(), Error> {
        self.write(body.as_ref(), false)
    }

    /// Sends `body` and ends this side's sending.
    pub fn send_and_close(&self, body: impl AsRef<[u8]>) -> Result<(), Error> {
        self.write(body.as_ref(), true)
    }

    /// Ends this side's sending (an empty frame with EOF).
    pub fn close_send(&self) -> Result<(), Error> {
        self.write(&[], true)
    }

    /// The next body the other side sent; None once it ended its sending.
    pub async fn recv(&mut self) -> Option<Bytes> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let mut st = self.state.lock().unwrap();
        if let Some(b) = st.queue.pop_front() {
            if st.held && st.queue.len() < self.queue {
                st.held = false;
                self.conn.resume_reads();
            }
            return Poll::Ready(Some(b));
        }
        if st.recv_closed {
            return Poll::Ready(None);
        }
        st.waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Both halves are done: the table lets the stream go.
    fn forget_if_done(&self) {
        let done = {
            let st = self.state.lock().unwrap();
            st.recv_closed && st.send_closed
        };
        if done {
            self.streams
                .map
                .lock()
                .unwrap()
                .remove(&(self.ours, self.id));
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let open = !self.state.lock().unwrap().send_closed;
        if open {
            let _ = self.close_send();
        }
        let mut st = self.state.lock().unwrap();
        st.recv_closed = true;
        if st.held {
            self.conn.resume_reads();
        }
        drop(st);
        self.streams
            .map
            .lock()
            .unwrap()
            .remove(&(self.ours, self.id));
    }
}

impl futures_core::Stream for Stream {
    type Item = Bytes;
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        self.poll_recv(cx)
    }
}

/// Sends go to the connection's queue at once (the connection's watermarks pace them).
impl futures_sink::Sink<Bytes> for Stream {
    type Error = Error;
    fn poll_ready(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }
    fn start_send(self: Pin<&mut Self>, item: Bytes) -> Result<(), Error> {
        self.send(item)
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }
    fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        let closed = self.state.lock().unwrap().send_closed;
        Poll::Ready(if closed { Ok(()) } else { self.close_send() })
    }
}
