//! A response that arrived before its request was all sent (a server streaming its answer
//! while it reads, or answering early and still reading): the request body must keep
//! going whether or not anyone polls the response, since its producer may be waiting for
//! room. So a task finishes the upload while the response body reads, the two sharing the
//! connection behind a lock; whichever ends last hands the connection back (or closes
//! it). A response that ends a connection not fit for reuse (the server closes it, say
//! after a 413) closes it at once, upload or not (RFC 9112 §9.6). Rare, so the usual
//! exchange stays lock- and task-free.

use super::body::Wire;
use super::connect::Connection;
use super::error::Error;
use super::pool::Pooled;
use bytes::BytesMut;
use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

struct Shared<Io> {
    /// Taken by whichever side ends last.
    conn: Option<Box<Pooled<Io>>>,
    /// The response body was read to its end; its leftover bytes, for the pool.
    response_done: Option<BytesMut>,
    /// The response body was dropped unread: stop sending.
    abandoned: bool,
    upload_done: bool,
    /// The response body's reader, woken when the upload fails.
    reader: Option<Waker>,
    /// The upload task, woken when the response is abandoned.
    uploader: Option<Waker>,
}

/// The response side of a connection whose upload a task finishes.
struct SharedWire<Io> {
    shared: Arc<Mutex<Shared<Io>>>,
    finished: bool,
}

fn lock<Io>(m: &Mutex<Shared<Io>>) -> MutexGuard<'_, Shared<Io>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Spawns the task that finishes `conn`'s upload; answers the response side.
pub(super) fn finish_upload_in_background<Io: Connection>(conn: Box<Pooled<Io>>) -> Box<dyn Wire> {
    let shared = Arc::new(Mutex::new(Shared {
        conn: Some(conn),
        response_done: None,
        abandoned: false,
        upload_done: false,
        reader: None,
        uploader: None,
    }));
    let task = shared.clone();
    drop(crate::engine::runtime::spawn(async move {
        poll_fn(|cx| {
            let mut s = lock(&task);
            if s.abandoned {
                return Poll::Ready(());
            }
            let conn = s.conn.as_mut().expect("kept until both sides end");
            if conn.conn.poll_upload(cx).is_pending() {
                s.uploader = Some(cx.waker().clone());
                return Poll::Pending;
            }
            s.upload_done = true;
            let reader = s.reader.take();
            let done = s.response_done.take().map(|rbuf| {
                let conn = s.conn.take().expect("kept until both sides end");
                (conn, rbuf)
            });
            drop(s);
            if let Some(w) = reader {
                w.wake();
            }
            if let Some((conn, rbuf)) = done {
                conn.finish(rbuf);
            }
            Poll::Ready(())
        })
        .await
    }));
    Box::new(SharedWire {
        shared,
        finished: false,
    })
}

impl<Io: Connection> Wire for SharedWire<Io> {
    fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<Result<usize, Error>> {
        let mut s = lock(&self.shared);
        let conn = s.conn.as_mut().expect("kept until both sides end");
        let r = conn.poll_read(cx, buf);
        if r.is_pending() {
            s.reader = Some(cx.waker().clone());
        }
        r
    }

    fn finish(mut self: Box<Self>, rbuf: BytesMut) {
        self.finished = true;
        let mut s = lock(&self.shared);
        let reusable = s.conn.as_ref().is_some_and(|c| c.conn.keeps_alive());
        if s.upload_done || !reusable {
            // Nothing more to send, or no point: the connection is done.
            let conn = s.conn.take().expect("kept until both sides end");
            s.abandoned = true;
            let uploader = s.uploader.take();
            drop(s);
            if let Some(w) = uploader {
                w.wake();
            }
            conn.finish(rbuf);
        } else {
            s.response_done = Some(rbuf);
        }
    }
}

impl<Io> Drop for SharedWire<Io> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let mut s = lock(&self.shared);
        s.abandoned = true;
        let uploader = s.uploader.take();
        drop(s);
        if let Some(w) = uploader {
            w.wake();
        }
    }
}
