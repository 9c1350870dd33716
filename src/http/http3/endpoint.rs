//! The driver: one `quinn_proto::Endpoint` fed by fibr's UDP binding, and a task per QUIC
//! connection that turns its `quinn_proto::Connection` (the machine) into datagrams,
//! timers and wakeups.
//!
//! Datagrams arrive on the per-peer UDP connections of `conn/udp.rs` (`on_data`, one call
//! per datagram); the endpoint routes each to its QUIC connection, or accepts a new one.
//! A connection's task drains the machine after every input: endpoint events (new
//! connection ids, the end of the connection), application events (to [`Wakers`]),
//! transmits (sent through the peer's UDP connection, so they leave in that connection's
//! sendmmsg batch), and sleeps until `poll_timeout`. Migration is off: the UDP table is
//! keyed by the peer's address, so one QUIC connection stays on one UDP peer.
//!
//! Locks: a connection's state, then the endpoint; never the other way round.

use super::wakers::Wakers;
use super::Http3Config;
use crate::conn::{Conn, Handler};
use crate::http::ConnInfo;
use bytes::BytesMut;
use quinn_proto::{
    ConnectionError, ConnectionHandle, DatagramEvent, EndpointConfig, Event, Transmit,
};
use std::collections::HashMap;
use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
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
    /// The peer's UDP connection (replaced when the UDP table made a new one for it).
    udp: Conn,
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
            Arc::new(EndpointConfig::default()),
            Some(Arc::new(server)),
            true,
            None,
        );
        Ok(Arc::new_cyclic(|me| QuicEndpoint {
            endpoint: Mutex::new(endpoint),
            conns: Mutex::new(HashMap::new()),
            max_connections: cfg.max_connections,
            on_connection,
            me: me.clone(),
        }))
    }

    fn accept(&self, udp: &Conn, incoming: quinn_proto::Incoming, now: Instant) {
        let mut buf = Vec::new();
        let full = self.conns.lock().unwrap().len() >= self.max_connections;
        let mut ep = self.endpoint.lock().unwrap();
        if full {
            let t = ep.refuse(incoming, &mut buf);
            drop(ep);
            send(udp, &buf, &t);
            return;
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
                udp: udp.clone(),
                driver: None,
                close_sent: false,
                closer: None,
            }),
        });
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
            Some(DatagramEvent::Response(t)) => send(udp, &buf, &t),
            Some(DatagramEvent::NewConnection(incoming)) => self.accept(udp, incoming, now),
            Some(DatagramEvent::ConnectionEvent(ch, ev)) => {
                let Some(c) = self.conns.lock().unwrap().get(&ch).cloned() else {
                    return;
                };
                let mut st = c.state.lock().unwrap();
                if !st.udp.same(udp) {
                    st.udp = udp.clone();
                }
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
                if let Event::ConnectionLost { reason } = &ev {
                    st.error = Some(reason.clone());
                }
                st.wakers.on_event(&ev);
            }
            let udp = st.udp.clone();
            while let Some(t) = st.conn.poll_transmit(now, 1, &mut buf) {
                busy = true;
                send(&udp, &buf, &t);
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
