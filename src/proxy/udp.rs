//! SOCKS5 UDP ASSOCIATE (RFC 1928 §7): a UDP relay that lives as long as the client's
//! TCP connection.
//!
//! The proxy binds a UDP socket on the address the client reached it on and names it in
//! its reply. The client sends each datagram there behind a header (two reserved bytes,
//! a fragment number, the destination as a SOCKS5 address); the relay checks the
//! destination against the rules, resolves names off the loops, and sends the payload
//! on. A datagram from a destination the client has sent to comes back behind a header
//! naming its source. Only the client's IP may use the socket (and its port, once the
//! first datagram has fixed it or the request named it); fragments, datagrams from
//! elsewhere and destinations the rules refuse are dropped, as the RFC lets a relay do.
//! The association ends when its TCP connection closes, or after `udp_idle_timeout`.

use super::ProxyConfig;
use crate::engine::conn::{Conn, Handler};
use crate::engine::net::UdpSocket;
use crate::engine::sync_notify::Notify;
use crate::proto::socks::udp::{parse_datagram, put_header};
use crate::proto::socks::Target;
use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

/// Largest UDP payload (a datagram bigger is cut short by the kernel and dropped here).
const MAX_DATAGRAM: usize = 65_535;

/// The client's TCP connection once the association is up: it carries nothing more,
/// and its close ends the association.
pub(crate) struct Control {
    ended: Arc<Notify>,
}

impl Control {
    pub(crate) fn new() -> (Control, Arc<Notify>) {
        let ended = Arc::new(Notify::new());
        (
            Control {
                ended: ended.clone(),
            },
            ended,
        )
    }
}

impl Handler for Control {
    fn on_data(&self, _conn: &Conn, _data: &[u8]) {}

    fn on_close(&self, _conn: &Conn, _err: Option<io::Error>) {
        self.ended.notify();
    }
}

/// One association's relay, run as a task until `ended` is set or it is idle too long.
pub(crate) struct Relay {
    pub config: Arc<ProxyConfig>,
    pub socket: UdpSocket,
    pub client_ip: IpAddr,
    /// The client's UDP address, once known (from its request, or its first datagram).
    pub client: Option<SocketAddr>,
    pub ended: Arc<Notify>,
}

impl Relay {
    pub(crate) async fn run(mut self) {
        let mut buf = vec![0u8; MAX_DATAGRAM];
        let mut out = Vec::with_capacity(MAX_DATAGRAM + 32);
        // Destinations the client sent to, newest last: only they may answer.
        let mut peers: VecDeque<SocketAddr> = VecDeque::new();
        let idle = self.config.udp_idle_timeout;
        let mut last_heard = Instant::now();
        loop {
            let got = {
                let mut ended = pin!(self.ended.wait());
                let mut timer = pin!(crate::engine::time::sleep_until(last_heard + idle));
                let mut recv = pin!(self.socket.recv_from(&mut buf));
                poll_fn(|cx| {
                    if ended.as_mut().poll(cx).is_ready() || timer.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(None);
                    }
                    recv.as_mut().poll(cx).map(Some)
                })
                .await
            };
            let Some(Ok((n, from))) = got else {
                // Ended, idle, or the socket failed.
                return;
            };
            last_heard = Instant::now();
            if self.is_client(from) {
                self.client = Some(from);
                let Ok(d) = parse_datagram(&buf[..n]) else {
                    continue;
                };
                let payload_at = n - d.payload.len();
                let Some(to) = self.allowed_destination(d.target).await else {
                    continue;
                };
                if !peers.contains(&to) {
                    if peers.len() == self.config.udp_max_peers {
                        peers.pop_front();
                    }
                    peers.push_back(to);
                }
                let _ = self.socket.send_to(&buf[payload_at..n], to).await;
            } else if let (Some(client), true) = (self.client, peers.contains(&from)) {
                out.clear();
                put_header(&mut out, from);
                out.extend_from_slice(&buf[..n]);
                let _ = self.socket.send_to(&out, client).await;
            }
        }
    }

    /// True for a datagram from the client: its IP, and its port once that is known.
    fn is_client(&self, from: SocketAddr) -> bool {
        match self.client {
            Some(client) => client == from,
            None => from.ip() == self.client_ip,
        }
    }

    /// The destination's first address the rules allow (names resolved off the loops).
    async fn allowed_destination(&self, target: Target) -> Option<SocketAddr> {
        let rules = &self.config.rules;
        match target {
            Target::Addr(a) => rules.check_target(None, a.ip(), a.port()).then_some(a),
            Target::Name(name, port) => crate::engine::net::resolve((name.as_str(), port))
                .await
                .ok()?
                .into_iter()
                .find(|a| rules.check_target(Some(&name), a.ip(), a.port())),
        }
    }
}
