//! HTTP/3 (feature `http3`): QUIC's machine is `quinn-proto`, HTTP/3's framing and QPACK
//! are the `h3` crate; this module is the driver between them and fibr.
//!
//! - `driver`: the future per QUIC connection that runs its machine (datagrams, timers,
//!   wakeups), on either side.
//! - `endpoint`: the server's side, the shared `quinn_proto::Endpoint` as the UDP
//!   binding's datagram handler.
//! - `client`: the client's side, a connection with its own endpoint and socket (for
//!   fibr's client, feature `client`).
//! - `wakers`: whom each of the machine's events wakes.
//! - `quic`: `h3::quic`'s traits over the machine's streams.
//! - `server`: a task per connection (h3's accept loop, beside the driver) and per
//!   request, calling the same tower service as HTTP/1 and HTTP/2.

#[cfg(feature = "client")]
pub(crate) mod client;
mod driver;
mod endpoint;
mod quic;
mod server;
mod wakers;

pub(crate) use driver::alongside;
#[cfg(feature = "client")]
pub(crate) use driver::QuicConn;
pub(crate) use endpoint::QuicEndpoint;
#[cfg(feature = "client")]
pub(crate) use quic::{RecvStream, SendStream};
pub(crate) use server::{serve_connection, Limits};

use std::io;
use std::sync::Arc;
use std::time::Duration;

/// HTTP/3 settings (in [`ServerConfig::http3`](super::ServerConfig::http3)).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Http3Config {
    /// A connection with no packet for this long is closed (QUIC's max_idle_timeout).
    pub idle_timeout: Duration,
    /// Requests (bidirectional streams) a client may have open at once on a connection.
    pub max_concurrent_streams: u32,
    /// QUIC connections served at once; new ones past it are refused (CONNECTION_REFUSED).
    pub max_connections: usize,
    /// When a new client must first prove it receives what is sent to its address (a
    /// Retry round trip), before the server keeps any state for it. Default: under load.
    pub retry: RetryPolicy,
    /// Answer packets of connections this server does not know (it restarted, or another
    /// server took the address) with a stateless reset, so the client gives up at once
    /// instead of after its idle timeout. Default: on.
    pub stateless_reset: bool,
    /// The secret connection IDs and stateless-reset tokens are derived from. `None` (the
    /// default): a random one per server, so only its own connections can be reset. Give
    /// every server behind one address (and each restart) the same 32 bytes, and a
    /// restarted server resets the connections its predecessor left behind.
    pub stateless_reset_key: Option<[u8; 32]>,
    /// A client whose address changes (a NAT rebinding, a new network) keeps its
    /// connection: the new path is validated, then used. Default: on.
    pub migration: bool,
    /// Accept requests in 0-RTT (early) data from a client resuming a session, a round
    /// trip sooner. Early data can be replayed by an attacker, so only turn it on for an
    /// app whose requests are safe to run twice. Default: off.
    pub zero_rtt: bool,
    /// SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 9220): accept extended CONNECT (a `:protocol`
    /// such as `websocket`, given to the service as a `fibr::http::Protocol`). Default:
    /// on with feature `ws`.
    pub extended_connect: bool,
}

/// When [`Http3Config::retry`] asks a new client to validate its address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryPolicy {
    /// Never: every client saves the round trip, and a flood of Initial packets from forged
    /// addresses makes state until `max_connections`.
    Never,
    /// Every new connection.
    Always,
    /// Once this many handshakes are in progress at once: a flood of Initials (the usual
    /// forged-address attack) is answered by stateless Retry packets past it, while
    /// ordinary clients save the round trip.
    UnderLoad {
        /// Handshakes in progress past which new clients are retried.
        handshakes: usize,
    },
}

impl Default for Http3Config {
    fn default() -> Http3Config {
        Http3Config {
            idle_timeout: Duration::from_secs(30),
            max_concurrent_streams: 100,
            max_connections: 10_000,
            retry: RetryPolicy::UnderLoad { handshakes: 128 },
            stateless_reset: true,
            stateless_reset_key: None,
            migration: true,
            zero_rtt: false,
            extended_connect: cfg!(feature = "ws"),
        }
    }
}

config_setters!(Http3Config {
    set with_idle_timeout => idle_timeout: Duration,
    set with_max_concurrent_streams => max_concurrent_streams: u32,
    set with_max_connections => max_connections: usize,
    set with_retry => retry: RetryPolicy,
    set with_stateless_reset => stateless_reset: bool,
    opt with_stateless_reset_key => stateless_reset_key: [u8; 32],
    set with_migration => migration: bool,
    set with_zero_rtt => zero_rtt: bool,
    set with_extended_connect => extended_connect: bool,
});

/// The QUIC server configuration from the HTTPS one: the same certificate and provider,
/// ALPN `h3`, TLS 1.3 only (QUIC requires it), early data as `cfg` says.
fn quic_server_config(
    tls: Arc<rustls::ServerConfig>,
    cfg: &Http3Config,
) -> io::Result<quinn_proto::ServerConfig> {
    let mut tls = (*tls).clone();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    // QUIC allows no other limit: early data is bounded by the transport's flow control.
    tls.max_early_data_size = if cfg.zero_rtt { u32::MAX } else { 0 };
    let crypto = quinn_proto::crypto::rustls::QuicServerConfig::try_from(tls)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let idle = quinn_proto::IdleTimeout::try_from(cfg.idle_timeout)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut transport = quinn_proto::TransportConfig::default();
    transport
        .max_idle_timeout(Some(idle))
        .max_concurrent_bidi_streams(cfg.max_concurrent_streams.into())
        // h3 needs three (control, QPACK encoder and decoder); room for a few more.
        .max_concurrent_uni_streams(8u32.into());
    let mut server = quinn_proto::ServerConfig::with_crypto(Arc::new(crypto));
    server
        .transport_config(Arc::new(transport))
        .migration(cfg.migration);
    Ok(server)
}

/// The endpoint's configuration: its stateless-reset key and connection-ID generator,
/// both from [`Http3Config::stateless_reset_key`] when it is set (so they are the same in
/// every server given that key), else random.
fn quic_endpoint_config(cfg: &Http3Config) -> quinn_proto::EndpointConfig {
    let Some(secret) = cfg.stateless_reset_key else {
        return quinn_proto::EndpointConfig::default();
    };
    let derive = |label: &[u8]| {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &secret);
        ring::hmac::sign(&key, label)
    };
    let reset = derive(b"fibr quic stateless reset key");
    let cid = derive(b"fibr quic connection id key");
    let cid_key = u64::from_le_bytes(cid.as_ref()[..8].try_into().expect("8 bytes"));
    let mut config = quinn_proto::EndpointConfig::new(Arc::new(ring::hmac::Key::new(
        ring::hmac::HMAC_SHA256,
        reset.as_ref(),
    )));
    config.cid_generator(move || {
        Box::new(quinn_proto::HashedConnectionIdGenerator::from_key(cid_key))
    });
    config
}
