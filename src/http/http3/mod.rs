//! HTTP/3 (feature `http3`): QUIC's machine is `quinn-proto`, HTTP/3's framing and QPACK
//! are the `h3` crate; this module is the driver between them and fibr.
//!
//! - `endpoint`: the shared `quinn_proto::Endpoint` as the UDP binding's handler, and the
//!   task per QUIC connection that runs its machine (datagrams, timers, wakeups).
//! - `wakers`: whom each of the machine's events wakes.
//! - `quic`: `h3::quic`'s traits over the machine's streams.
//! - `server`: a task per connection (h3's accept loop) and per request, calling the
//!   same tower service as HTTP/1 and HTTP/2.

mod endpoint;
mod quic;
mod server;
mod wakers;

pub(crate) use endpoint::QuicEndpoint;
pub(crate) use server::{serve_connection, Limits};

use std::io;
use std::sync::Arc;
use std::time::Duration;

/// HTTP/3 settings (in [`ServerConfig::http3`](super::ServerConfig::http3)).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Http3Config {
    /// A connection with no packet for this long is closed (QUIC's max_idle_timeout).
    /// Keep it below [`Config::udp_peer_idle_timeout`](crate::Config::udp_peer_idle_timeout),
    /// after which the UDP table forgets a silent peer.
    pub idle_timeout: Duration,
    /// Requests (bidirectional streams) a client may have open at once on a connection.
    pub max_concurrent_streams: u32,
    /// QUIC connections served at once; new ones past it are refused (CONNECTION_REFUSED).
    pub max_connections: usize,
}

impl Default for Http3Config {
    fn default() -> Http3Config {
        Http3Config {
            idle_timeout: Duration::from_secs(30),
            max_concurrent_streams: 100,
            max_connections: 10_000,
        }
    }
}

config_setters!(Http3Config {
    set with_idle_timeout => idle_timeout: Duration,
    set with_max_concurrent_streams => max_concurrent_streams: u32,
    set with_max_connections => max_connections: usize,
});

/// The QUIC server configuration from the HTTPS one: the same certificate and provider,
/// ALPN `h3`, TLS 1.3 only (QUIC requires it), migration off (the UDP table is keyed by
/// the peer's address).
fn quic_server_config(
    tls: Arc<rustls::ServerConfig>,
    cfg: &Http3Config,
) -> io::Result<quinn_proto::ServerConfig> {
    let mut tls = (*tls).clone();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls.max_early_data_size = 0;
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
        .migration(false);
    Ok(server)
}
