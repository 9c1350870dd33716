//! The client's side: a QUIC connection with an endpoint and a UDP socket of its own, read
//! by the connection's driver (`driver.rs`) itself. One socket per connection keeps a
//! client's connections independent (one ends, its socket closes) and needs no routing
//! between them; fibr's client holds one connection per origin. The socket is connected
//! to the server, so a port nobody listens on fails the connection at once (the ICMP
//! error reads as ECONNREFUSED) rather than at the handshake's timeout.

use super::driver::{ConnState, Driver, QuicConn, Side};
use crate::engine::net::UdpSocket;
use bytes::{Bytes, BytesMut};
use quinn_proto::{
    ConnectionError, ConnectionEvent, ConnectionHandle, DatagramEvent, EndpointEvent, Transmit,
    TransportErrorCode,
};
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Datagrams read per turn of the driver before it lets others run.
const READS_PER_TURN: usize = 64;
/// The largest datagram read (QUIC's are at most the path MTU; GRO is off here).
const MAX_DATAGRAM: usize = 65_536;

struct ClientSide {
    endpoint: Mutex<quinn_proto::Endpoint>,
    socket: UdpSocket,
    rbuf: Mutex<Vec<u8>>,
}

impl ClientSide {
    fn send(&self, buf: &[u8], t: &Transmit) {
        // A full socket buffer drops the datagram, as the network may; QUIC resends.
        if let Err(e) = self.socket.try_send_to(&buf[..t.size], t.destination) {
            tracing::debug!(error = %e, "QUIC datagram not sent");
        }
    }
}

impl Side for ClientSide {
    fn endpoint_event(&self, ch: ConnectionHandle, ev: EndpointEvent) -> Option<ConnectionEvent> {
        self.endpoint.lock().unwrap().handle_event(ch, ev)
    }

    fn transmit(&self, _: &ConnState, buf: &[u8], t: &Transmit) {
        self.send(buf, t)
    }

    fn max_datagrams(&self, _: &ConnState) -> usize {
        // `fibr::net::UdpSocket` sends one datagram at a time.
        1
    }

    fn receive(&self, st: &mut ConnState, cx: &mut Context<'_>) -> bool {
        let mut rbuf = self.rbuf.lock().unwrap();
        let mut out = Vec::new();
        for n in 0..READS_PER_TURN {
            let (len, from) = match self.socket.poll_recv_from(cx, &mut rbuf) {
                Poll::Pending => return n > 0,
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    if st.error.is_none() {
                        let refused = TransportErrorCode::CONNECTION_REFUSED.into();
                        st.error = Some(Box::new(ConnectionError::TransportError(refused)));
                        st.conn.close(Instant::now(), 0u32.into(), Bytes::new());
                    }
                    return true;
                }
                Poll::Ready(Err(e)) => {
                    tracing::debug!(error = %e, "QUIC client socket read failed");
                    return n > 0;
                }
                Poll::Ready(Ok(got)) => got,
            };
            let event = self.endpoint.lock().unwrap().handle(
                Instant::now(),
                from,
                None,
                None,
                BytesMut::from(&rbuf[..len]),
                &mut out,
            );
            match event {
                Some(DatagramEvent::ConnectionEvent(_, ev)) => st.conn.handle_event(ev),
                Some(DatagramEvent::Response(t)) => self.send(&out, &t),
                // A client endpoint accepts nothing; anything else is not for it.
                Some(DatagramEvent::NewConnection(_)) | None => {}
            }
            out.clear();
        }
        // More may be waiting: come back after others had a turn.
        cx.waker().wake_by_ref();
        true
    }

    fn handshake_over(&self) {}

    fn drained(&self, _: ConnectionHandle) {}
}

/// Opens a QUIC connection to `addr` for `server_name` with ALPN `h3`, and waits for its
/// handshake.
pub(crate) async fn connect(
    addr: SocketAddr,
    server_name: &str,
    tls: Arc<rustls::ClientConfig>,
    idle_timeout: Duration,
) -> io::Result<QuicConn> {
    let invalid =
        |e: &dyn std::fmt::Display| io::Error::new(io::ErrorKind::InvalidInput, e.to_string());
    let mut tls = Arc::unwrap_or_clone(tls);
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let crypto =
        quinn_proto::crypto::rustls::QuicClientConfig::try_from(tls).map_err(|e| invalid(&e))?;
    let mut transport = quinn_proto::TransportConfig::default();
    let idle = quinn_proto::IdleTimeout::try_from(idle_timeout).map_err(|e| invalid(&e))?;
    transport.max_idle_timeout(Some(idle));
    let mut config = quinn_proto::ClientConfig::new(Arc::new(crypto));
    config.transport_config(Arc::new(transport));

    let bind: SocketAddr = if addr.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = UdpSocket::bind(bind).await?;
    socket.connect(addr).await?;
    let mut endpoint = quinn_proto::Endpoint::new(Default::default(), None, true, None);
    let (ch, conn) = endpoint
        .connect(Instant::now(), config, addr, server_name)
        .map_err(|e| invalid(&e))?;
    let quic = QuicConn::new(ConnState::new(conn, None));
    let side = Arc::new(ClientSide {
        endpoint: Mutex::new(endpoint),
        socket,
        rbuf: Mutex::new(vec![0; MAX_DATAGRAM]),
    });
    crate::engine::runtime::spawn(Driver::new(side, ch, quic.0.clone()));
    quic.handshake_done().await.map_err(|e| {
        let kind = match &e {
            ConnectionError::TimedOut => io::ErrorKind::TimedOut,
            ConnectionError::TransportError(t)
                if t.code == TransportErrorCode::CONNECTION_REFUSED =>
            {
                io::ErrorKind::ConnectionRefused
            }
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, e)
    })?;
    Ok(quic)
}
