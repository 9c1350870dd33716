//! The machine on a connection, either role: each round's bytes go through the
//! [`Decoder`]; requests and notifies go to their handlers, whose futures are polled once in
//! the round that read them (so an answer ready at once leaves in the round's one write)
//! and spawned if they wait; responses go to the calls waiting for them; the calls' timer
//! wakes the connection.

use super::peer::{Peer, Session};
use super::router::{Context, HandlerFuture, Router, METHOD_NOT_FOUND};
use super::Config;
use crate::engine::conn::{Conn, Handler};
use crate::proto::arpc::{Decoder, Frame, Kind, Limits};
use bytes::Bytes;
use std::io;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, Waker};

/// What a role does when a connection opens and closes.
pub(crate) trait Hooks: Send + Sync + 'static {
    /// The connection is open and `peer` is its handle.
    fn opened(&self, peer: &Peer);
    /// The connection closed (`peer` is None if it never opened: a failed dial).
    fn closed(&self, peer: Option<&Peer>, err: Option<io::Error>);
}

/// A connection's state in its context slot.
struct Link {
    decoder: Decoder,
    session: Arc<Session>,
}

/// The connection handler of both roles.
pub(crate) struct Driver<H> {
    router: Arc<Router>,
    config: Config,
    /// The error calls fail with once the connection is lost.
    lost: fn() -> super::Error,
    pub(crate) hooks: H,
}

impl<H: Hooks> Driver<H> {
    pub(crate) fn new(
        router: Arc<Router>,
        config: Config,
        lost: fn() -> super::Error,
        hooks: H,
    ) -> Driver<H> {
        Driver {
            router,
            config,
            lost,
            hooks,
        }
    }

    /// One frame that passed the machine's checks.
    fn frame(&self, session: &Arc<Session>, f: Frame<'_>) {
        match f.kind {
            Kind::Request | Kind::Notify => self.call(session, f),
            Kind::Response => {
                if !session.complete(f.seq, f.is_async(), f.is_error(), f.payload) {
                    tracing::debug!(
                        seq = f.seq,
                        "arpc: a response to no call in flight, dropped"
                    );
                }
            }
            Kind::Stream { local, eof } => self.stream(session, f, local, eof),
        }
    }

    /// A request or notify: its handler runs, or `method not found` answers a request.
    fn call(&self, session: &Arc<Session>, f: Frame<'_>) {
        let is_notify = f.kind == Kind::Notify;
        let mut frame = Vec::with_capacity(f.method.len() + f.payload.len());
        frame.extend_from_slice(f.method);
        frame.extend_from_slice(f.payload);
        let peer = Peer {
            session: session.clone(),
        };
        let ctx = Context::new(
            peer,
            f.seq,
            Bytes::from(frame),
            f.method.len(),
            f.is_async(),
            is_notify,
        );
        match self.router.dispatch(ctx) {
            Some(fut) => run(session, fut),
            // An empty router answers nothing, as arpc's before its first handler.
            None if is_notify || self.router.is_empty() => {
                tracing::debug!(method = %String::from_utf8_lossy(f.method), "arpc: no handler");
            }
            None => session.answer(
                f.seq,
                f.method,
                f.is_async(),
                true,
                METHOD_NOT_FOUND.as_bytes(),
            ),
        }
    }

    /// A stream frame: to its stream, or (the peer opening one) to a new stream's
    /// handler; else dropped, as arpc drops it.
    fn stream(&self, session: &Arc<Session>, f: Frame<'_>, local: bool, eof: bool) {
        let (conn, queue) = (session.conn(), self.config.stream_queue);
        // The local bit is the opener's: set, the peer opened it.
        let key = (!local, f.seq);
        if session.streams.deliver(conn, key, f.payload, eof, queue) {
            return;
        }
        let route = local.then(|| self.router.stream_route(f.method)).flatten();
        let Some(route) = route else {
            tracing::debug!(seq = f.seq, "arpc: a frame of no stream, dropped");
            return;
        };
        let stream = session.accept_stream(f.seq, f.method);
        session.streams.deliver(conn, key, f.payload, eof, queue);
        run(session, route(stream));
    }
}

/// Runs a handler's future: polled once now, so one that finishes at once costs no task;
/// the rest go on as tasks, counted against the connection's bound.
fn run(session: &Arc<Session>, mut fut: HandlerFuture) {
    let mut cx = TaskContext::from_waker(Waker::noop());
    if fut.as_mut().poll(&mut cx) == Poll::Pending {
        session.handler_started();
        let session = session.clone();
        drop(crate::engine::runtime::spawn(async move {
            fut.await;
            session.handler_done();
        }));
    }
}

impl<H: Hooks> Handler for Driver<H> {
    fn on_open(&self, conn: &Conn) {
        let session = Session::new(conn.clone(), &self.config, self.lost);
        let peer = Peer {
            session: session.clone(),
        };
        conn.set_context(Link {
            decoder: Decoder::new(Limits {
                max_body_len: self.config.max_body_len,
            }),
            session,
        });
        self.hooks.opened(&peer);
    }

    fn on_data(&self, conn: &Conn, data: &[u8]) {
        let failed = conn.with_context::<Link, _>(|link| {
            let Link { decoder, session } = link?;
            let (mut pongs, dropped) = (Vec::new(), decoder.dropped());
            let r = decoder.receive(data, &mut pongs, &mut |f| self.frame(session, f));
            if decoder.dropped() > dropped {
                tracing::debug!(peer = ?conn.peer_addr(), "arpc: frames with a bad method length dropped");
            }
            if !pongs.is_empty() {
                let _ = conn.send(&pongs);
            }
            r.err()
        });
        if let Some(e) = failed {
            tracing::debug!(peer = ?conn.peer_addr(), error = %e, "arpc: closing the connection");
            conn.close();
        }
    }

    fn on_wake(&self, conn: &Conn) {
        if let Some(session) = conn.with_context::<Link, _>(|l| l.map(|l| l.session.clone())) {
            session.expire();
        }
    }

    fn on_close(&self, conn: &Conn, err: Option<io::Error>) {
        let peer = conn
            .take_context::<Link>()
            .map(|l| Peer { session: l.session });
        // The role first (a client is marked as redialing), so a caller whose call fails
        // below finds the connection gone too, not the old one still in place.
        self.hooks.closed(peer.as_ref(), err);
        if let Some(p) = &peer {
            p.session.close();
        }
    }
}
