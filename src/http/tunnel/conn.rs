//! An HTTP/1.1 connection after its CONNECT's `2xx`, as a byte pipe: its handler queues
//! what each round reads (holding reads past the bound, so TCP's window stops the peer)
//! and wakes the reader; writes go to the connection and wait while its output is over
//! the bound.

use crate::engine::conn::{Conn, Handler};
use bytes::Bytes;
use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// The connection and what its handler shares with the tunnel.
pub(super) struct ConnPipe {
    conn: Conn,
    limit: usize,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared(Mutex<State>);

#[derive(Default)]
struct State {
    inbox: VecDeque<Bytes>,
    inbox_bytes: usize,
    /// The peer half-closed (or the connection is gone: `closed` too).
    eof: bool,
    closed: bool,
    reader: Option<Waker>,
    writer: Option<Waker>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wake(&self, f: impl FnOnce(&mut State) -> Option<Waker>) {
        let w = f(&mut self.lock());
        if let Some(w) = w {
            w.wake();
        }
    }
}

struct PipeHandler {
    shared: Arc<Shared>,
    limit: usize,
}

impl Handler for PipeHandler {
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        let mut st = self.shared.lock();
        st.inbox_bytes += data.len();
        st.inbox.push_back(Bytes::copy_from_slice(data));
        if st.inbox_bytes > self.limit {
            conn.hold_reads();
        }
        let reader = st.reader.take();
        drop(st);
        if let Some(w) = reader {
            w.wake();
        }
    }

    fn on_eof(&self, _conn: &Conn) {
        self.shared.wake(|st| {
            st.eof = true;
            st.reader.take()
        });
    }

    fn on_drained(&self, _conn: &Conn) {
        self.shared.wake(|st| st.writer.take());
    }

    fn on_close(&self, _conn: &Conn, _err: Option<io::Error>) {
        let writer = {
            let mut st = self.shared.lock();
            st.closed = true;
            st.eof = true;
            st.writer.take()
        };
        self.shared.wake(|st| st.reader.take());
        if let Some(w) = writer {
            w.wake();
        }
    }
}

impl ConnPipe {
    /// Takes `conn` over; `read` is what came after the CONNECT, the tunnel's first bytes.
    pub(super) fn start(conn: Conn, read: Vec<u8>, limit: usize) -> ConnPipe {
        let shared = Arc::new(Shared::default());
        if !read.is_empty() {
            let mut st = shared.lock();
            st.inbox_bytes = read.len();
            st.inbox.push_back(Bytes::from(read));
        }
        conn.set_handler(PipeHandler {
            shared: shared.clone(),
            limit,
        });
        ConnPipe {
            conn,
            limit,
            shared,
        }
    }

    /// The next bytes read, `None` at the peer's end.
    pub(super) fn poll_read(&self, cx: &mut Context<'_>) -> Poll<io::Result<Option<Bytes>>> {
        let mut st = self.shared.lock();
        if let Some(data) = st.inbox.pop_front() {
            let was_over = st.inbox_bytes > self.limit;
            st.inbox_bytes -= data.len();
            let resume = was_over && st.inbox_bytes <= self.limit;
            drop(st);
            if resume {
                self.conn.resume_reads();
            }
            return Poll::Ready(Ok(Some(data)));
        }
        if st.eof {
            return Poll::Ready(Ok(None));
        }
        st.reader = Some(cx.waker().clone());
        Poll::Pending
    }

    pub(super) fn poll_write(&self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<()>> {
        if self.conn.queued_bytes() > self.limit {
            let mut st = self.shared.lock();
            if st.closed {
                return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
            }
            st.writer = Some(cx.waker().clone());
            drop(st);
            self.conn.wake_when_drained();
            // It may have drained meanwhile: look again, with the waker in place.
            if self.conn.queued_bytes() > self.limit {
                return Poll::Pending;
            }
        }
        Poll::Ready(self.conn.send(data))
    }

    pub(super) fn shutdown(&self) {
        self.conn.shutdown_write();
    }

    pub(super) fn abort(&self) {
        self.conn.close();
    }
}

impl Drop for ConnPipe {
    fn drop(&mut self) {
        self.conn.close();
    }
}
