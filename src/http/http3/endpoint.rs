//! The server's side: one `quinn_proto::Endpoint` fed by fibr's UDP binding.
//!
//! The endpoint is the binding's [`DatagramHandler`]: the loop that reads the socket hands
//! it each datagram (no connection per peer address), and it routes each to its QUIC
//! connection, whose task (`driver.rs`) runs the machine, or accepts a new one (or asks it
//! to Retry first). A connection sends through the socket its packets last came on,
//! straight from its task, to the address each transmit names: a client that migrates
//! (a new address, a PATH_CHALLENGE to the old one) needs nothing more.
//!
//! Locks: a connection's state, then the endpoint; never the other way round.

use super::driver::{ConnShared, ConnState, Driver, QuicConn, Side};
use super::{Http3Config, RetryPolicy};
use crate::engine::conn::{Conn, DatagramHandler, Handler, UdpSender};
use crate::http::ConnInfo;
use bytes::{Bytes, BytesMut};
use quinn_proto::{ConnectionEvent, ConnectionHandle, DatagramEvent, EndpointEvent, Transmit};
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::Context;
use std::time::Instant;

/// What runs a new QUIC connection: the HTTP/3 server's accept loop, on a task that also
/// polls the connection's driver ([`alongside`](super::driver::alongside)). `Err` gives
/// the driver back when the server takes no more (draining): the connection is closed at
/// once, and its driver gets a task of its own.
pub(crate) type OnConnection =
    Box<dyn Fn(QuicConn, ConnInfo, ServerDriver) -> Result<(), ServerDriver> + Send + Sync>;

/// A server connection's driver.
pub(crate) type ServerDriver = Driver<QuicEndpoint>;

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
    /// Counts a new connection's handshake, unless the policy asks a client whose address
    /// is not validated to Retry instead (then false, and nothing is counted). Checked and
    /// counted in one step: datagrams from different peers are taken on different workers
    /// at once.
    fn claim_handshake(&self, validated: bool) -> bool {
        let limit = match self.retry {
            _ if validated => usize::MAX,
            RetryPolicy::Never => usize::MAX,
            RetryPolicy::Always => 0,
            RetryPolicy::UnderLoad { handshakes } => handshakes,
        };
        self.handshaking
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < limit).then_some(n + 1)
            })
            .is_ok()
    }

    fn accept(
        &self,
        udp: &UdpSender,
        from: SocketAddr,
        mut incoming: quinn_proto::Incoming,
        now: Instant,
    ) {
        let mut buf = Vec::new();
        let full = self.conns.lock().unwrap().len() >= self.max_connections;
        let mut ep = self.endpoint.lock().unwrap();
        if full {
            let t = ep.refuse(incoming, &mut buf);
            drop(ep);
            send(udp, &buf, &t);
            return;
        }
        if !self.claim_handshake(incoming.remote_address_validated()) {
            // Stateless: the client comes back with the token, or (forged) never does.
            match ep.retry(incoming, &mut buf) {
                Ok(t) => {
                    drop(ep);
                    send(udp, &buf, &t);
                    return;
                }
                Err(e) => {
                    incoming = e.into_incoming();
                    self.handshaking.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        let accepted = ep.accept(incoming, now, &mut buf, None);
        drop(ep);
        let (ch, conn) = match accepted {
            Ok(c) => c,
            Err(e) => {
                self.handshake_over();
                tracing::debug!(error = %e.cause, "QUIC connection not accepted");
                if let Some(t) = e.response {
                    send(udp, &buf, &t);
                }
                return;
            }
        };
        let quic = QuicConn::new(ConnState::new(conn, Some(udp.clone())));
        self.conns.lock().unwrap().insert(ch, quic.0.clone());
        let Some(me) = self.me.upgrade() else { return };
        let driver = Driver::new(me, ch, quic.0.clone());
        let info = ConnInfo {
            peer: Some(from),
            local: udp.local_addr(),
            unix: None,
        };
        if let Err(driver) = (self.on_connection)(quic.clone(), info, driver) {
            // H3_NO_ERROR: the server is shutting down.
            quic.close(0x100, b"shutting down");
            crate::engine::runtime::spawn(driver);
        }
    }
}

impl Handler for QuicEndpoint {
    fn on_data(&self, conn: &Conn, _: &[u8]) {
        // Only a UDP binding feeds an endpoint, through `datagrams`: a stream binding's
        // connection has nothing it can serve.
        conn.close();
    }

    fn datagrams(&self) -> Option<&dyn DatagramHandler> {
        Some(self)
    }
}

impl DatagramHandler for QuicEndpoint {
    fn on_datagram(&self, udp: &UdpSender, from: SocketAddr, datagram: &[u8]) {
        let now = Instant::now();
        let mut buf = Vec::new();
        let event = self.endpoint.lock().unwrap().handle(
            now,
            from,
            None,
            None,
            BytesMut::from(datagram),
            &mut buf,
        );
        match event {
            None => {}
            // The answer to a short-header packet is a stateless reset (version
            // negotiation and the rest answer long headers).
            Some(DatagramEvent::Response(_))
                if !self.stateless_reset && is_short_header(datagram) => {}
            Some(DatagramEvent::Response(t)) => send(udp, &buf, &t),
            Some(DatagramEvent::NewConnection(incoming)) => self.accept(udp, from, incoming, now),
            Some(DatagramEvent::ConnectionEvent(ch, ev)) => {
                let Some(c) = self.conns.lock().unwrap().get(&ch).cloned() else {
                    return;
                };
                let mut st = c.state.lock().unwrap();
                if !st.udp.as_ref().is_some_and(|u| u.same_socket(udp)) {
                    // The client moved to an address another binding's socket serves.
                    st.udp = Some(udp.clone());
                }
                st.deliver(ev);
            }
        }
    }

    fn on_socket_closed(&self, udp: &UdpSender) {
        // The binding stopped: its connections end now (H3_NO_ERROR, nothing went wrong)
        // and tell their peers so, through the socket, which closes once they are drained.
        let conns: Vec<_> = self.conns.lock().unwrap().values().cloned().collect();
        for c in conns {
            let mut st = c.state.lock().unwrap();
            if st.udp.as_ref().is_some_and(|u| u.same_socket(udp)) && !st.conn.is_closed() {
                st.conn.close(
                    Instant::now(),
                    0x100u32.into(),
                    Bytes::from_static(b"stopped"),
                );
                st.kick();
            }
        }
    }
}

impl Side for QuicEndpoint {
    fn endpoint_event(&self, ch: ConnectionHandle, ev: EndpointEvent) -> Option<ConnectionEvent> {
        self.endpoint.lock().unwrap().handle_event(ch, ev)
    }

    fn transmit(&self, st: &ConnState, buf: &[u8], t: &Transmit) {
        match &st.udp {
            Some(udp) => send(udp, buf, t),
            None => tracing::debug!(to = %t.destination, "QUIC datagram after the socket closed"),
        }
    }

    fn max_datagrams(&self, st: &ConnState) -> usize {
        st.udp
            .as_ref()
            .map_or(1, |udp| udp.max_segments().min(MAX_SEGMENTS))
    }

    fn receive(&self, st: &mut ConnState, _: &mut Context<'_>) -> bool {
        // What `on_datagram` routed to this connection since its last turn.
        st.take_delivered()
    }

    fn handshake_over(&self) {
        self.handshaking.fetch_sub(1, Ordering::Relaxed);
    }

    fn drained(&self, ch: ConnectionHandle) {
        self.conns.lock().unwrap().remove(&ch);
    }
}

/// Datagrams a transmit carries at most: as quinn's own driver, past which a burst gains
/// little and a loss costs more at once.
const MAX_SEGMENTS: usize = 10;

fn send(udp: &UdpSender, buf: &[u8], t: &Transmit) {
    let data = &buf[..t.size];
    // Several datagrams of `segment_size` leave in one GSO send where the socket can.
    let sent = match t.segment_size {
        Some(segment) if segment < t.size => udp.send_segments_to(t.destination, data, segment),
        _ => udp.send_to(t.destination, data),
    };
    if let Err(e) = sent {
        tracing::debug!(error = %e, "QUIC datagram not sent");
    }
}

/// A QUIC short-header packet (RFC 9000 §17.3: the header form bit is 0).
fn is_short_header(datagram: &[u8]) -> bool {
    datagram.first().is_some_and(|b| b & 0x80 == 0)
}
