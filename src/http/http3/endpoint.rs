//! The driver: one `quinn_proto::Endpoint` fed by fibr's UDP binding, and a task per QUIC
//! connection that turns its `quinn_proto::Connection` (the machine) into datagrams,
//! timers and wakeups.
//!
//! Datagrams arrive on the per-peer UDP connections of `conn/udp.rs` (`on_data`, one call
//! per datagram); the endpoint routes each to its QUIC connection, or accepts a new one.
//! A connection's task drains the machine after every input: endpoint events (new
//! connection ids, the end of the connection), application events (to [`Wakers`]),
//! transmits (sent through the peer's UDP connection, so they leave in that connection's
//! sendmmsg batch), and sleeps until `poll_timeout`. The UDP table is keyed by the peer's
//! address, so a client that migrates arrives on a new UDP connection: the QUIC
//! connection keeps its recent ones ([`Paths`]) and sends each transmit through the one
//! it is addressed to (the new path, or the old one's PATH_CHALLENGE).
//!
//! Locks: a connection's state, then the endpoint; never the other way round.

use super::wakers::Wakers;
use super::{Http3Config, RetryPolicy};
use crate::conn::{Conn, Handler};
use crate::http::ConnInfo;
use bytes::BytesMut;
use quinn_proto::{ConnectionError, ConnectionHandle, DatagramEvent, Event, Transmit};
use std::collections::HashMap;
use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Poll, Waker};
use std::time::Instant;

/// What runs a new QUIC connection (the HTTP/3 server's accept loop); false when the
/// server takes no more (draining), and the connection is closed at once.
pub(crate) type OnConnection = Box<dyn Fn(QuicConn, ConnInfo) -> bool + Send + Sync>;

/// The UDP binding's handler: the shared QUIC endpoint.
pub(crate) struct QuicEndpoint {
    endpoint: Mutex<quinn_proto::Endpoint>,
    conns: Mutex<HashMap<ConnectionHandle, Arc<ConnShared>>>,
    max_connections: usize,
    retry: RetryPolicy,
    stateless_reset: bool,
    /// Connections accepted whose handshake has not finished (what `RetryPolicy::UnderLoad`
    /// counts).
    handshaking: AtomicUsize,
    on_connection: OnConnection,
    me: Weak<QuicEndpoint>,
}

/// One QUIC connection, shared by its driver task, the h3 connection and its streams.
pub(crate) struct ConnShared {
    pub(super) state: Mutex<ConnState>,
}

pub(crate) struct ConnState {
    pub conn: quinn_proto::Connection,
    pub wakers: Wakers,
    /// Why the connection ended, once it has.
    pub error: Option<ConnectionError>,
    /// The peer's UDP connections: the path in use and the one it migrated from.
    paths: Paths,
    /// Counted in the endpoint's `handshaking` until `Event::Connected` (or the end).
    handshaking: bool,
    driver: Option<Waker>,
    /// The connection is closed and its CONNECTION_CLOSE has been handed to the socket.
    close_sent: bool,
    /// Waits for `close_sent` (the h3 connection's end, before the server may stop).
    closer: Option<Waker>,
}

impl ConnState {
    /// Has the driver run: something was written, read or closed that may need sending.
    pub fn kick(&self) {
        if let Some(w) = &self.driver {
            w.wake_by_ref();
        }
    }
}

/// A handle on a QUIC connection (the `h3::quic` traits are implemented on it).
#[derive(Clone)]
pub(crate) struct QuicConn(pub(super) Arc<ConnShared>);

impl QuicConn {
    /// Once the connection is closed and its CONNECTION_CLOSE is out (or it ended some
    /// other way): a server that stops before then would take the UDP socket with it,
    /// and the peer, hearing nothing, would wait for its idle timeout.
    pub(crate) async fn close_sent(&self) {
        poll_fn(|cx| {
            let mut st = self.0.state.lock().unwrap();
            if st.close_sent || st.error.is_some() {
                return Poll::Ready(());
            }
            st.closer = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}

impl QuicEndpoint {
    pub fn new(
        tls: Arc<rustls::ServerConfig>,
        cfg: &Http3Config,
        on_connection: OnConnection,
    ) -> io::Result<Arc<QuicEndpoint>> {
        let server = super::quic_server_config(tls, cfg)?;
        let endpoint = quinn_proto::Endpoint::new(
            Arc::new(super::quic_endpoint_config(cfg)),
            Some(Arc::new(server)),
            true,
            None,
        );
        Ok(Arc::new_cyclic(|me| QuicEndpoint {
            endpoint: Mutex::new(endpoint),
            conns: Mutex::new(HashMap::new()),
            max_connections: cfg.max_connections,
            retry: cfg.retry,
            stateless_reset: cfg.stateless_reset,
            handshaking: AtomicUsize::new(0),
            on_connection,
            me: me.clone(),
        }))
    }

    /// Whether a client whose address is not yet validated is asked to do so first.
    fn should_retry(&self) -> bool {
        match self.retry {
            RetryPolicy::Never => false,
            RetryPolicy::Always => true,
            RetryPolicy::UnderLoad { handshakes } => {
                self.handshaking.load(Ordering::Relaxed) >= handshakes
            }
        }
    }

    /// The connection's handshake finished (or it ended first): it no longer counts as load.
    fn handshake_over(&self, st: &mut ConnState) {
        if std::mem::take(&mut st.handshaking) {
            self.handshaking.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn accept(&self, udp: &Conn, mut incoming: quinn_proto::Incoming, now: Instant) {
        let mut buf = Vec::new();
        let full = self.conns.lock().unwrap().len() >= self.max_connections;
        let mut ep = self.endpoint.lock().unwrap();
        if full {
            let t = ep.refuse(incoming, &mut buf);
            drop(ep);
            send(udp, &buf, &t);
            return;
        }
        if !incoming.remote_address_validated() && self.should_retry() {
            // Stateless: the client comes back with the token, or (forged) never does.
            match ep.retry(incoming, &mut buf) {
                Ok(t) => {
                    drop(ep);
                    send(udp, &buf, &t);
                    return;
                }
                Err(e) => incoming = e.into_incoming(),
            }
        }
        let accepted = ep.accept(incoming, now, &mut buf, None);
        drop(ep);
        let (ch, conn) = match accepted {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(error = %e.cause, "QUIC connection not accepted");
                if let Some(t) = e.response {
                    send(udp, &buf, &t);
                }
                return;
            }
        };
        let shared = Arc::new(ConnShared {
            state: Mutex::new(ConnState {
                conn,
                wakers: Wakers::default(),
                error: None,
                paths: Paths::new(udp),
                handshaking: true,
                driver: None,
                close_sent: false,
                closer: None,
            }),
        });
        self.handshaking.fetch_add(1, Ordering::Relaxed);
        self.conns.lock().unwrap().insert(ch, shared.clone());
        let Some(me) = self.me.upgrade() else { return };
        crate::spawn(drive(me, ch, shared.clone()));
        let info = ConnInfo {
            peer: udp.peer_addr(),
            local: udp.local_addr(),
        };
        if !(self.on_connection)(QuicConn(shared.clone()), info) {
            let mut st = shared.state.lock().unwrap();
            // H3_NO_ERROR: the server is shutting down.
            st.conn.close(
                now,
                0x100u32.into(),
                bytes::Bytes::from_static(b"shutting down"),
            );
            st.kick();
        }
    }
}

impl Handler for QuicEndpoint {
    fn on_data(&self, udp: &Conn, data: &[u8]) {
        let Some(peer) = udp.peer_addr() else { return };
        let now = Instant::now();
        let mut buf = Vec::new();
        let event = self.endpoint.lock().unwrap().handle(
            now,
            peer,
            None,
            None,
            BytesMut::from(data),
            &mut buf,
        );
        match event {
            None => {}
            // The answer to a short-header packet is a stateless reset (version
            // negotiation and the rest answer long headers).
            Some(DatagramEvent::Response(_)) if !self.stateless_reset && is_short_header(data) => {}
            Some(DatagramEvent::Response(t)) => send(udp, &buf, &t),
            Some(DatagramEvent::NewConnection(incoming)) => self.accept(udp, incoming, now),
            Some(DatagramEvent::ConnectionEvent(ch, ev)) => {
                let Some(c) = self.conns.lock().unwrap().get(&ch).cloned() else {
                    return;
                };
                let mut st = c.state.lock().unwrap();
                st.paths.saw(udp);
                st.conn.handle_event(ev);
                st.kick();
            }
        }
    }
}

fn send(udp: &Conn, buf: &[u8], t: &Transmit) {
    // One datagram per transmit: the driver asks for no segmentation (GSO is not used yet).
    if let Err(e) = udp.send(&buf[..t.size]) {
        tracing::debug!(error = %e, "QUIC datagram not sent");
    }
}

/// A QUIC short-header packet (RFC 9000 §17.3: the header form bit is 0).
fn is_short_header(datagram: &[u8]) -> bool {
    datagram.first().is_some_and(|b| b & 0x80 == 0)
}

/// The UDP connections a QUIC connection's packets came from, newest first: one, or two
/// while a migration's new path is validated (the old one gets a PATH_CHALLENGE, which
/// tells a forged address from a real move).
pub(crate) struct Paths(Vec<Conn>);

/// Paths remembered: the current one and the one before.
const PATHS_KEPT: usize = 2;

impl Paths {
    fn new(udp: &Conn) -> Paths {
        Paths(vec![udp.clone()])
    }

    /// A packet came from `udp`: it becomes the newest path.
    fn saw(&mut self, udp: &Conn) {
        if self.0.first().is_some_and(|c| c.same(udp)) {
            return;
        }
        self.0.retain(|c| !c.same(udp));
        self.0.insert(0, udp.clone());
        self.0.truncate(PATHS_KEPT);
    }

    /// The UDP connection to `peer`, if a packet came from it lately.
    fn to(&self, peer: SocketAddr) -> Option<&Conn> {
        self.0.iter().find(|c| c.peer_addr() == Some(peer))
    }
}

/// The connection's task: runs the machine whenever it is woken (a datagram, a stream
/// operation, its timer) until the connection is drained.
async fn drive(ep: Arc<QuicEndpoint>, ch: ConnectionHandle, c: Arc<ConnShared>) {
    let mut sleep: Option<crate::time::Sleep> = None;
    let mut buf = Vec::new();
    poll_fn(|cx| {
        let mut st = c.state.lock().unwrap();
        if !st.driver.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            st.driver = Some(cx.waker().clone());
        }
        loop {
            let now = Instant::now();
            if st.conn.poll_timeout().is_some_and(|t| t <= now) {
                st.conn.handle_timeout(now);
            }
            let mut busy = false;
            while let Some(ev) = st.conn.poll_endpoint_events() {
                busy = true;
                let back = ep.endpoint.lock().unwrap().handle_event(ch, ev);
                if let Some(back) = back {
                    st.conn.handle_event(back);
                }
            }
            while let Some(ev) = st.conn.poll() {
                busy = true;
                match &ev {
                    Event::ConnectionLost { reason } => st.error = Some(reason.clone()),
                    Event::Connected => ep.handshake_over(&mut st),
                    _ => {}
                }
                st.wakers.on_event(&ev);
            }
            while let Some(t) = st.conn.poll_transmit(now, 1, &mut buf) {
                busy = true;
                match st.paths.to(t.destination) {
                    Some(udp) => send(udp, &buf, &t),
                    None => {
                        tracing::debug!(to = %t.destination, "QUIC datagram for a forgotten path")
                    }
                }
                buf.clear();
            }
            if st.conn.is_closed() && !st.close_sent {
                st.close_sent = true;
                if let Some(w) = st.closer.take() {
                    w.wake();
                }
            }
            if st.conn.is_drained() {
                if st.error.is_none() {
                    st.error = Some(ConnectionError::LocallyClosed);
                }
                st.wakers.wake_all();
                if let Some(w) = st.closer.take() {
                    w.wake();
                }
                ep.handshake_over(&mut st);
                st.driver = None;
                drop(st);
                ep.conns.lock().unwrap().remove(&ch);
                return Poll::Ready(());
            }
            if !busy {
                break;
            }
        }
        let Some(deadline) = st.conn.poll_timeout() else {
            sleep = None;
            return Poll::Pending;
        };
        let timer = sleep.get_or_insert_with(|| crate::time::sleep_until(deadline));
        if timer.deadline() != deadline {
            timer.reset(deadline);
        }
        if Pin::new(timer).poll(cx).is_ready() {
            // Due already: run again at once.
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    })
    .await
}
