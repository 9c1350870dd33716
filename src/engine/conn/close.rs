//! How a connection ends: closed now, after lingering to flush its output, on a write
//! timeout, or handed over to another owner (a detached socket).

use super::{
    linger, AfterOutput, Conn, ConnInner, Io, Kind, F_CLOSING, F_CONNECTING, F_DETACHED, F_EOF,
};
#[cfg(feature = "hyper")]
use super::{DetachedSocket, Handoff};
use crate::engine::runtime::Command;
#[cfg(feature = "hyper")]
use crate::engine::sys::socket;
use crate::engine::sys::Interest;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Waker;

impl ConnInner {
    /// Starts a lingering close (see `linger`) if input is left unread, unless the peer
    /// already finished sending or the connection is not a stream. True if it is lingering.
    /// The output is out: the socket goes to `handoff` (see `Conn::detach`).
    #[cfg(feature = "hyper")]
    pub(super) fn hand_over(self: &Arc<Self>, conn: &Conn, handoff: Box<Handoff>) {
        let socket = socket::dup(self.fd).and_then(|fd| match self.kind {
            Kind::Tcp => Ok(DetachedSocket::Tcp(fd)),
            Kind::Unix => Ok(DetachedSocket::Unix(fd)),
            Kind::Udp => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a UDP peer has no stream",
            )),
        });
        self.close_now(conn, None);
        // The new owner may be tokio's reactor (an upgrade under feature `tokio`).
        #[cfg(feature = "tokio")]
        let _entered = self.rt.tokio.enter();
        handoff(socket);
    }

    /// Closes at a timeout the way a graceful close does, so that a reset does not destroy
    /// what the kernel already holds for the peer (a response it has not read yet): what
    /// is still queued here is dropped (the peer is not taking it, or the handshake it
    /// belongs to is over), and with input left unread the connection lingers (see
    /// `linger`) before it closes. `on_close` gets `err` either way.
    pub(super) fn close_timed_out(self: &Arc<Self>, conn: &Conn, err: io::Error) {
        self.set(F_CLOSING);
        let mut io = self.io.lock().unwrap();
        let before = io.queued();
        io.out.clear();
        io.stall = None;
        io.layer = None;
        self.account(before, 0);
        let mut err = Some(err);
        let lingering = self.start_linger(&mut io, &mut err);
        drop(io);
        if lingering {
            self.lp
                .rearm(self.fd, self.token.load(Ordering::Acquire), Interest::READ);
            return;
        }
        self.close_now(conn, err);
    }

    /// `why`: what `on_close` is told when the lingering ends (taken if it starts).
    pub(super) fn start_linger(self: &Arc<Self>, io: &mut Io, why: &mut Option<io::Error>) -> bool {
        let Some(timeout) = self.rt.config.linger_timeout else {
            return false;
        };
        if self.kind == Kind::Udp || self.flag(F_EOF | F_CONNECTING | F_DETACHED) || io.fd.is_none()
        {
            return false;
        }
        if !linger::unread_input(self.fd) {
            return false;
        }
        let waker = Waker::from(self.clone());
        match linger::Linger::start(self.fd, timeout, &waker) {
            Ok(l) => {
                io.after_output = Some(Box::new(AfterOutput::Linger(l, why.take())));
                true
            }
            Err(_) => false,
        }
    }

    /// A round of a lingering connection: None if it is not lingering, else whether it
    /// is time to close, with what `on_close` is told.
    pub(super) fn linger_round(&self) -> Option<Option<Option<io::Error>>> {
        let mut io = self.io.lock().unwrap();
        let Some(AfterOutput::Linger(l, why)) = io.after_output.as_deref_mut() else {
            return None;
        };
        let close = match l.round(self.fd, self.rt.config.linger_max_bytes) {
            linger::Outcome::Close => Some(why.take()),
            linger::Outcome::Wait => None,
        };
        io.in_round = false;
        drop(io);
        if close.is_none() {
            self.lp
                .rearm(self.fd, self.token.load(Ordering::Acquire), Interest::READ);
        }
        Some(close)
    }

    /// Closes at once: the handler's `on_close`, then the loop drops the descriptor.
    pub(super) fn close_now(&self, conn: &Conn, err: Option<io::Error>) {
        let fd = {
            let mut io = self.io.lock().unwrap();
            if !io.open {
                return;
            }
            io.open = false;
            io.in_round = false;
            // Cancels the timers, whose wakers hold this connection.
            io.after_output = None;
            io.stall = None;
            let before = io.queued();
            io.out.clear();
            io.layer = None;
            // The link holds the peer, whose link holds this connection.
            #[cfg(target_os = "linux")]
            {
                io.splice = None;
            }
            self.account(before, 0);
            io.fd.take()
        };
        self.set(F_CLOSING);
        let handler = self.handler.lock().unwrap().clone();
        if catch_unwind(AssertUnwindSafe(|| handler.on_close(conn, err))).is_err() {
            tracing::error!("a connection handler panicked in on_close");
        }
        if let Some(fd) = fd {
            self.lp
                .send(Command::Close(self.token.load(Ordering::Acquire), fd));
        }
        if let Some(link) = &self.udp {
            link.forget();
        }
        // The user data may run user code when dropped (a response body): a panic there
        // must not take the worker with it.
        let context = self.context().take();
        if catch_unwind(AssertUnwindSafe(|| drop(context))).is_err() {
            tracing::error!("dropping a connection's context panicked");
        }
        self.rt.conn_closed();
    }
}
