//! The shape of a proxy handshake, sans-IO, for both roles: where the tunnel leads
//! ([`Target`], public as `fibr::net::socks::Target`), what a client's machine (SOCKS,
//! HTTP `CONNECT` in the client) tells its driver (`crate::dial`), and what a server's
//! machine (SOCKS, HTTP `CONNECT` in `crate::proxy`) asks of its driver.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

#[cfg(feature = "proxy")]
pub(crate) use server::{Auth, Credentials, Failure, ServerHandshake, Step};

/// Where the tunnel should lead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// An address the client resolved.
    Addr(SocketAddr),
    /// A host name for the proxy to resolve (SOCKS5's domain names, SOCKS4a).
    Name(String, u16),
}

impl From<SocketAddr> for Target {
    fn from(a: SocketAddr) -> Target {
        Target::Addr(a)
    }
}

impl From<(IpAddr, u16)> for Target {
    fn from((ip, port): (IpAddr, u16)) -> Target {
        Target::Addr(SocketAddr::new(ip, port))
    }
}

/// A host and port: an IP literal (brackets allowed) becomes an address, anything else a
/// name for the proxy.
impl From<(&str, u16)> for Target {
    fn from((host, port): (&str, u16)) -> Target {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        match bare.parse::<IpAddr>() {
            Ok(ip) => Target::Addr(SocketAddr::new(ip, port)),
            Err(_) => Target::Name(host.to_string(), port),
        }
    }
}

impl From<(String, u16)> for Target {
    fn from((host, port): (String, u16)) -> Target {
        Target::from((host.as_str(), port))
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Addr(a) => write!(f, "{a}"),
            Target::Name(h, p) => write!(f, "{h}:{p}"),
        }
    }
}

/// A client's handshake with a proxy, as a sans-IO machine.
pub(crate) trait ClientHandshake {
    /// Why the proxy's answer ends the handshake.
    type Error;
    /// The client's first message into `out` (the client speaks first).
    fn start(&mut self, out: &mut Vec<u8>);
    /// The most bytes the next read may take: never past the end of the reply being read.
    fn want(&self) -> usize;
    /// Bytes the proxy sent (at most [`want`](ClientHandshake::want); empty: it closed),
    /// the next message to send into `out`. `Ok(true)` once the tunnel is open.
    fn receive(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<bool, Self::Error>;
}

#[cfg(feature = "proxy")]
mod server {
    use super::Target;
    use std::io;
    use std::net::SocketAddr;

    /// A user name and password a client offered.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub(crate) struct Credentials {
        pub user: String,
        pub password: String,
    }

    /// What the client proved about itself with its request.
    #[derive(Debug, PartialEq, Eq)]
    pub(crate) enum Auth {
        None,
        /// Checked during the handshake (SOCKS5's subnegotiation).
        Verified,
        /// Sent with the request, not checked yet (HTTP's `Proxy-Authorization`).
        Offered(Credentials),
    }

    /// Why a tunnel was not made; each protocol has its own way of saying it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum Failure {
        /// The rules refuse this client or target.
        NotAllowed,
        /// Credentials are required and were missing or wrong.
        AuthRequired,
        Refused,
        NetworkUnreachable,
        /// The host is unreachable or its name did not resolve.
        HostUnreachable,
        TimedOut,
        General,
    }

    impl Failure {
        /// The failure a dial's or a resolution's error is.
        pub(crate) fn from_io(e: &io::Error) -> Failure {
            match e.kind() {
                io::ErrorKind::ConnectionRefused => Failure::Refused,
                io::ErrorKind::TimedOut => Failure::TimedOut,
                io::ErrorKind::NetworkUnreachable => Failure::NetworkUnreachable,
                io::ErrorKind::HostUnreachable => Failure::HostUnreachable,
                // A name that did not resolve (getaddrinfo's errors carry no errno).
                _ if e.raw_os_error().is_none() => Failure::HostUnreachable,
                _ => Failure::General,
            }
        }
    }

    /// What a handshake machine wants after taking input.
    #[derive(Debug, PartialEq, Eq)]
    pub(crate) enum Step {
        /// More input is needed.
        More,
        /// Check these credentials and answer with [`ServerHandshake::authenticated`].
        Authenticate(Credentials),
        /// The client asks for a tunnel; answer with `connected` or `failed`.
        Connect(Target, Auth),
        /// A SOCKS BIND: the client wants a connection from the target host; answer with
        /// `connected` (where the proxy listens), then `connected` again (the peer that
        /// connected), or `failed`.
        Bind(Target, Auth),
        /// A SOCKS5 UDP ASSOCIATE (the target is the client's UDP address, or zeros);
        /// answer with `connected` (the relay's address) or `failed`.
        Associate(Target, Auth),
        /// An HTTP request that is not `CONNECT`: hand the connection, with what
        /// `take_rest` gives back, to the forwarding server.
        Forward,
        /// Close once the output (a refusal, if the protocol has one) is written.
        Close,
    }

    /// A proxy protocol's server handshake as a sans-IO machine: it writes its replies
    /// into `out`.
    pub(crate) trait ServerHandshake: Send {
        /// Takes bytes from the client.
        fn receive(&mut self, data: &[u8], out: &mut Vec<u8>) -> Step;
        /// The answer to `Step::Authenticate`. A protocol that never asks (SOCKS4; HTTP,
        /// whose credentials come with the request as `Auth::Offered`) closes.
        fn authenticated(&mut self, _ok: bool, _out: &mut Vec<u8>) -> Step {
            Step::Close
        }
        /// The tunnel is up; `bound` is the proxy's end of it.
        fn connected(&mut self, bound: SocketAddr, out: &mut Vec<u8>);
        /// The tunnel could not be made.
        fn failed(&mut self, why: Failure, out: &mut Vec<u8>);
        /// The handshake took too long (before a `Connect`).
        fn timed_out(&mut self, out: &mut Vec<u8>);
        /// What the client sent after its request, for the target.
        fn take_rest(&mut self) -> Vec<u8>;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_from_host_and_port() {
        assert_eq!(
            Target::from(("127.0.0.1", 80)),
            Target::Addr("127.0.0.1:80".parse().unwrap())
        );
        assert_eq!(
            Target::from(("[::1]", 443)),
            Target::Addr("[::1]:443".parse().unwrap())
        );
        assert_eq!(
            Target::from(("example.com", 80)),
            Target::Name("example.com".into(), 80)
        );
    }
}
