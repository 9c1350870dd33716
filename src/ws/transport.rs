//! What a WebSocket runs over: a connection of its own (HTTP/1.1's upgrade, the client),
//! or one HTTP/2 stream (extended CONNECT, RFC 8441) whose DATA carry the frames: the
//! byte pipe of `http::pipe`, whose input (the request body) a task of the socket's own
//! reads, pausing while reads are held.

use crate::engine::conn::Conn;
use crate::http::pipe::StreamIo;
use std::io;
use std::sync::Arc;
use std::task::{Context, Waker};

/// The operations the socket's driver needs of what carries it.
pub(crate) enum Transport {
    Conn(Conn),
    Stream(Arc<StreamIo>),
}

impl Transport {
    pub(crate) fn send(&self, data: &[u8]) -> io::Result<()> {
        match self {
            Transport::Conn(c) => c.send(data),
            Transport::Stream(s) => s.send(data),
        }
    }

    pub(crate) fn close(&self) {
        match self {
            Transport::Conn(c) => c.close(),
            Transport::Stream(s) => s.close(),
        }
    }

    /// The client's half-close; a stream (always a server's) just ends its output.
    pub(crate) fn shutdown_write(&self) {
        match self {
            Transport::Conn(c) => c.shutdown_write(),
            Transport::Stream(s) => s.close(),
        }
    }

    pub(crate) fn hold_reads(&self) {
        match self {
            Transport::Conn(c) => c.hold_reads(),
            Transport::Stream(s) => s.hold_reads(),
        }
    }

    pub(crate) fn resume_reads(&self) {
        match self {
            Transport::Conn(c) => c.resume_reads(),
            Transport::Stream(s) => s.resume_reads(),
        }
    }

    pub(crate) fn queued_bytes(&self) -> usize {
        match self {
            Transport::Conn(c) => c.queued_bytes(),
            Transport::Stream(s) => s.queued(),
        }
    }

    /// Wakes a sender once the output is under the write bound again: a connection calls
    /// its handler's `on_drained`; a stream wakes `waker` itself.
    pub(crate) fn wake_when_drained(&self, waker: &Waker) {
        match self {
            Transport::Conn(c) => c.wake_when_drained(),
            Transport::Stream(s) => {
                if s.poll_room(&mut Context::from_waker(waker)).is_ready() {
                    waker.wake_by_ref();
                }
            }
        }
    }

    pub(crate) fn is_open(&self) -> bool {
        match self {
            Transport::Conn(c) => c.is_open(),
            Transport::Stream(s) => !s.is_closed(),
        }
    }
}
