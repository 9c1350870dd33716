//! How connections come to be: accepted from a listening socket, dialed, or adopted from
//! another owner (a socket hyper answered).

use super::live::{Admission, LiveCount};
#[cfg(all(feature = "hyper", feature = "tunnel"))]
use super::DetachedSocket;
use super::{Conn, ConnInner, Handler, Kind, EV_OPEN};
use crate::engine::reactor::Source;
use crate::engine::runtime::{Command, Loop, ReadyCtx, Runtime};
use crate::engine::sys::{socket, Event, Interest};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

impl Conn {
    pub(crate) fn dial_on(
        rt: &Arc<Runtime>,
        addr: SocketAddr,
        handler: Arc<dyn Handler>,
    ) -> io::Result<Conn> {
        rt.ensure_running()?;
        let fd = socket::tcp_connect(addr)?;
        let raw = fd.as_raw_fd();
        let lp = rt.pick_loop().clone();
        let local = socket::local_addr(raw);
        let inner = ConnInner::new(
            rt.clone(),
            lp.clone(),
            Some(fd),
            raw,
            Kind::Tcp,
            handler,
            Some(addr),
            local,
            None,
            0,
        );
        lp.send(Command::Register(raw, inner.clone()));
        Ok(Conn { inner })
    }
}

/// A connection made of a socket taken back from another owner (a WebSocket whose `101`
/// hyper wrote): `prepare` puts its handler and context in place before it is registered,
/// and its first callback is `on_open`.
#[cfg(all(feature = "hyper", feature = "tunnel"))]
pub(crate) fn adopt(
    rt: &Arc<Runtime>,
    socket: DetachedSocket,
    prepare: impl FnOnce(&Conn),
) -> io::Result<()> {
    /// The handler until `prepare` sets the real one.
    struct Unset;
    impl Handler for Unset {
        fn on_data(&self, _conn: &Conn, _data: &[u8]) {}
    }
    rt.ensure_running()?;
    let (fd, kind) = match socket {
        DetachedSocket::Tcp(fd) => (fd, Kind::Tcp),
        DetachedSocket::Unix(fd) => (fd, Kind::Unix),
    };
    let raw = fd.as_raw_fd();
    let (peer, local) = match kind {
        Kind::Tcp => (socket::peer_addr(raw), socket::local_addr(raw)),
        _ => (None, None),
    };
    let lp = rt.pick_loop().clone();
    let inner = ConnInner::new(
        rt.clone(),
        lp.clone(),
        Some(fd),
        raw,
        kind,
        Arc::new(Unset),
        peer,
        local,
        None,
        EV_OPEN,
    );
    prepare(&Conn {
        inner: inner.clone(),
    });
    lp.send(Command::Register(raw, inner));
    Ok(())
}

/// Deregisters a source from its loop when dropped (a listener, HTTP/3's UDP socket, a
/// SOCKS BIND's listening socket).
pub(crate) struct StopAccepting {
    pub lp: Arc<Loop>,
    pub source: Option<Arc<dyn Source<Runtime>>>,
    pub raw: std::os::fd::RawFd,
}

impl Drop for StopAccepting {
    fn drop(&mut self) {
        if let Some(l) = self.source.take() {
            self.lp.send(Command::Deregister(l, self.raw));
        }
    }
}

/// Accepts connections on one listening socket (runs on its loop).
pub(crate) struct Listener {
    pub fd: OwnedFd,
    pub kind: Kind,
    pub handler: Arc<dyn Handler>,
    /// The server whose drain counts each connection from its accept (`fibr::serve`'s):
    /// the connection carries an [`Admission`] in its context until its `on_open` claims it.
    pub admit: Option<Arc<LiveCount>>,
}

impl Source<Runtime> for Listener {
    fn ready(&self, _ev: Event, ctx: &mut ReadyCtx<'_>) {
        let rt = ctx.rt.clone();
        let lfd = self.fd.as_raw_fd();
        // Accept a bounded batch per event so one busy listener cannot starve the loop;
        // with edge triggering, a full batch re-queues itself.
        for _ in 0..256 {
            match socket::accept(lfd) {
                Ok((fd, peer)) => {
                    let raw = fd.as_raw_fd();
                    if self.kind == Kind::Tcp && rt.config.tcp_nodelay {
                        let _ = socket::set_nodelay(raw);
                    }
                    let local = if self.kind == Kind::Tcp {
                        socket::local_addr(raw)
                    } else {
                        None
                    };
                    let lp = rt.pick_loop().clone();
                    let same = Arc::ptr_eq(&lp, ctx.lp);
                    let inner = ConnInner::new(
                        rt.clone(),
                        lp.clone(),
                        Some(fd),
                        raw,
                        self.kind,
                        self.handler.clone(),
                        peer,
                        local,
                        None,
                        EV_OPEN,
                    );
                    if let Some(count) = &self.admit {
                        *inner.context() = Some(Box::new(Admission::new(count)));
                    }
                    if same {
                        ctx.register(raw, inner);
                    } else {
                        lp.send(Command::Register(raw, inner));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // Drained: a one-shot poller must be asked for the next connection.
                    ctx.lp.rearm(lfd, ctx.token(), Interest::READ);
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ECONNABORTED) | Some(libc::EPROTO)
                    ) => {}
                Err(e) => {
                    // EMFILE, ENFILE, ENOBUFS, ENOMEM: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed; retrying in 50 ms");
                    ctx.retry_at(std::time::Instant::now() + std::time::Duration::from_millis(50));
                    return;
                }
            }
        }
        ctx.retry_at(std::time::Instant::now());
    }
}
