//! SOCKS BIND (SOCKS5 and SOCKS4): the proxy listens on a fresh port of the address the
//! client reached, tells the client where (the first reply), and takes one connection
//! from the host the client named (an FTP server's data connection, say), which it
//! announces (the second reply) and relays like a dialed target.
//!
//! The named host must pass the rules as a target would, and only a connection from one of
//! its addresses is taken: another one fails the request (as SOCKS4 specifies), so the
//! port is no open door. The listener is registered on a loop like any other and
//! deregistered as soon as the request ends, whatever ends it (the peer, a refusal,
//! [`ProxyConfig::bind_timeout`](super::ProxyConfig::bind_timeout), the client leaving).

use super::{Failure, Pending};
use crate::engine::conn::{Conn, Handler, Kind, Listener, StopAccepting};
use crate::engine::runtime::Command;
use crate::engine::sys::socket;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::Arc;

/// Connections a BIND's socket queues before it takes one (one is all it wants).
const BACKLOG: i32 = 4;

impl Pending {
    /// Checks the named host's addresses against the rules, opens the listening socket
    /// and answers the client with its address.
    pub(super) fn listen(self: &Arc<Self>, name: Option<&str>, addrs: Vec<SocketAddr>) {
        let rules = &self.config.rules;
        let mut st = self.lock();
        if st.done {
            return;
        }
        let expected: Vec<IpAddr> = addrs
            .into_iter()
            .filter(|a| rules.check_target(name, a.ip(), a.port()))
            .map(|a| a.ip())
            .collect();
        if expected.is_empty() {
            return st.fail(Failure::NotAllowed);
        }
        let Some(client) = st.client.clone() else {
            return;
        };
        let Some(local) = client.local_addr() else {
            return st.fail(Failure::General);
        };
        let opened =
            socket::tcp_listener(SocketAddr::new(local.ip(), 0), false, BACKLOG).and_then(|fd| {
                let bound = socket::local_addr(fd.as_raw_fd())
                    .ok_or_else(|| std::io::Error::other("no local address"))?;
                Ok((fd, bound))
            });
        let (fd, bound) = match opened {
            Ok(opened) => opened,
            Err(e) => {
                tracing::debug!(error = %e, "SOCKS BIND: no listening socket");
                return st.fail(Failure::General);
            }
        };
        let raw = fd.as_raw_fd();
        let listener = Arc::new(Listener {
            fd,
            kind: Kind::Tcp,
            handler: Arc::new(Accept {
                pending: self.clone(),
                expected,
            }),
            admit: None,
        });
        let lp = client.inner.rt.pick_loop().clone();
        lp.send(Command::Register(raw, listener.clone()));
        st.listening = Some(StopAccepting {
            lp,
            source: Some(listener),
            raw,
        });
        let mut out = Vec::new();
        st.machine.connected(bound, &mut out);
        let _ = client.send(&out);
    }
}

/// The handler of a connection to a BIND's socket: the first one from an expected host
/// becomes the tunnel's target.
struct Accept {
    pending: Arc<Pending>,
    expected: Vec<IpAddr>,
}

impl Handler for Accept {
    fn on_open(&self, peer: &Conn) {
        let Some(from) = peer.peer_addr() else {
            return peer.close();
        };
        if !self.expected.contains(&from.ip()) {
            tracing::debug!(%from, "SOCKS BIND: a connection from another host");
            peer.close();
            let mut st = self.pending.lock();
            if !st.done {
                st.fail(Failure::NotAllowed);
            }
            return;
        }
        self.pending.tunnel(peer, from);
    }

    fn on_data(&self, _peer: &Conn, _data: &[u8]) {}
}
