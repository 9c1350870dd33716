//! TLS 1.2 and 1.3 on rustls (feature `tls`), in the connection's round.
//!
//! ```no_run
//! use fibr::tls::rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
//! use fibr::tls::rustls::ServerConfig;
//! use std::sync::Arc;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let certs = CertificateDer::pem_file_iter("cert.pem")?.collect::<Result<Vec<_>, _>>()?;
//! let key = PrivateKeyDer::from_pem_file("key.pem")?;
//! let mut tls = ServerConfig::builder_with_provider(fibr::tls::crypto_provider())
//!     .with_safe_default_protocol_versions()?
//!     .with_no_client_auth()
//!     .with_single_cert(certs, key)?;
//! // Offer HTTP/2 too (left empty, the server offers `http/1.1` only).
//! tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
//!
//! let app = axum::Router::new().route("/", axum::routing::get(|| async { "hello" }));
//! let listener = fibr::net::TcpListener::bind("0.0.0.0:8443").await?;
//! fibr::serve(listener, app).with_tls(Arc::new(tls)).await?;
//! # Ok(()) }
//! ```
//!
//! [`TlsServer`] puts TLS in front of any [`Handler`]: records are decrypted in the round's
//! borrowed buffer (rustls's unbuffered API: an idle connection keeps only its session
//! state), and everything a round sends is sealed at its end into as few records as fit,
//! leaving in the round's one write. The handler's `on_open` runs once the handshake is
//! done; [`Conn::tls_info`] then tells what was negotiated. HTTP servers get it through
//! `fibr::serve(listener, app).with_tls(config)`, and requests carry a [`TlsInfo`]
//! extension.
//!
//! rustls is re-exported ([`rustls`]) so that a config is built with the same version.

mod layer;
#[cfg(test)]
mod tests;
mod ticket;

pub use rustls;

use crate::engine::conn::{Conn, Handler, Info, Shared};
use crate::proto::tls::Session;
use rustls::pki_types::CertificateDer;
use rustls::server::UnbufferedServerConnection;
use rustls::{CipherSuite, CommonState, HandshakeKind, ProtocolVersion, ServerConfig};
use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};
#[cfg(target_os = "linux")]
pub(crate) use ticket::set_process_ticketer;
pub use ticket::SharedTicketer;

/// The crypto provider fibr uses for the configs it builds itself (its clients' default
/// config): rustls's process default when one is installed, else ring. Feature
/// `tls-aws-lc` only makes rustls's aws-lc-rs provider available; to use it, install it:
/// `rustls::crypto::aws_lc_rs::default_provider().install_default()`. Build server configs
/// with `ServerConfig::builder_with_provider(fibr::tls::crypto_provider())` to use the
/// same (with both providers built, rustls's `builder()` panics unless one is installed).
pub fn crypto_provider() -> Arc<rustls::crypto::CryptoProvider> {
    match rustls::crypto::CryptoProvider::get_default() {
        Some(installed) => installed.clone(),
        None => Arc::new(rustls::crypto::ring::default_provider()),
    }
}

/// Session tickets on ring, whatever the provider: a ticket is opened only by the servers
/// that sealed it, so no peer sees which library did, and `tls` always builds ring.
fn ticketer() -> Result<Arc<dyn rustls::server::ProducesTickets>, rustls::Error> {
    rustls::crypto::ring::Ticketer::new()
}

/// How long a handshake may take by default before the connection is closed.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a TLS connection negotiated: an extension on every HTTPS request (axum:
/// `Extension<TlsInfo>`), and [`Conn::tls_info`] for raw handlers. Cheap to clone.
#[derive(Clone, Debug)]
pub struct TlsInfo(Arc<Negotiated>);

/// What `TlsInfo` shares: one allocation per connection (an idle connection keeps it,
/// and every request's extension points at it). The usual ALPN protocols are not copied,
/// and no client certificate allocates nothing.
#[derive(Debug)]
pub(crate) struct Negotiated {
    alpn: Option<Cow<'static, [u8]>>,
    peer_certificates: Box<[CertificateDer<'static>]>,
    version: Option<ProtocolVersion>,
    cipher_suite: Option<CipherSuite>,
    resumed: bool,
}

/// ALPN protocols named without a copy.
const KNOWN_ALPN: [&[u8]; 2] = [b"http/1.1", b"h2"];

impl Negotiated {
    fn of(state: &CommonState) -> Negotiated {
        Negotiated {
            alpn: state.alpn_protocol().map(|p| {
                KNOWN_ALPN
                    .iter()
                    .find(|k| **k == p)
                    .map_or_else(|| Cow::Owned(p.to_vec()), |k| Cow::Borrowed(*k))
            }),
            peer_certificates: state.peer_certificates().map(Box::from).unwrap_or_default(),
            version: state.protocol_version(),
            cipher_suite: state.negotiated_cipher_suite().map(|s| s.suite()),
            resumed: state.handshake_kind() == Some(HandshakeKind::Resumed),
        }
    }
}

impl Shared for TlsInfo {
    type Inner = Negotiated;
    fn from_shared(inner: Arc<Negotiated>) -> TlsInfo {
        TlsInfo(inner)
    }
}

impl TlsInfo {
    /// What a session negotiated.
    pub(crate) fn new(state: &CommonState) -> TlsInfo {
        TlsInfo(Arc::new(Negotiated::of(state)))
    }

    /// What the connection's session negotiated, as a layer hands it to the connection.
    pub(crate) fn of(state: &CommonState) -> Info {
        Info::new(TlsInfo::new(state).0)
    }

    /// The protocol chosen by ALPN (`b"http/1.1"`, `b"h2"`), if any.
    pub fn alpn_protocol(&self) -> Option<&[u8]> {
        self.0.alpn.as_deref()
    }

    /// TLS 1.2 or 1.3.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.0.version
    }

    /// The cipher suite in use.
    pub fn cipher_suite(&self) -> Option<CipherSuite> {
        self.0.cipher_suite
    }

    /// The certificate chain the peer presented (a client certificate on a server), leaf
    /// first; empty if it sent none.
    pub fn peer_certificates(&self) -> &[CertificateDer<'static>] {
        &self.0.peer_certificates
    }

    /// True if the session was resumed (a ticket or a cached session) rather than made anew.
    pub fn is_resumed(&self) -> bool {
        self.0.resumed
    }
}

impl Conn {
    /// What the connection's TLS handshake negotiated (None without TLS, or before the
    /// handshake is done).
    pub fn tls_info(&self) -> Option<TlsInfo> {
        self.inner.layer_info::<TlsInfo>()
    }
}

/// A TLS server in front of a [`Handler`]: bind it like any handler
/// (`Binding::tcp(addr, fibr::tls::TlsServer::new(config, handler))`).
pub struct TlsServer {
    config: Arc<ServerConfig>,
    inner: Arc<dyn Handler>,
    handshake_timeout: Option<Duration>,
    answer_plain_http: bool,
}

impl TlsServer {
    /// Serves `handler` over TLS with `config` (used as it is: ALPN, resumption and client
    /// certificates are the config's; early data, 0-RTT, is turned off).
    pub fn new(config: Arc<ServerConfig>, handler: impl Handler) -> TlsServer {
        TlsServer::with_arc(config, Arc::new(handler))
    }

    pub(crate) fn with_arc(config: Arc<ServerConfig>, inner: Arc<dyn Handler>) -> TlsServer {
        // 0-RTT data can be replayed by an attacker; fibr does not take it.
        let config = if config.max_early_data_size > 0 {
            let mut c = Arc::unwrap_or_clone(config);
            c.max_early_data_size = 0;
            Arc::new(c)
        } else {
            config
        };
        TlsServer {
            config,
            inner,
            handshake_timeout: Some(DEFAULT_HANDSHAKE_TIMEOUT),
            answer_plain_http: false,
        }
    }

    /// Closes a connection whose handshake has not finished in `timeout` (None: never).
    /// Default: [`DEFAULT_HANDSHAKE_TIMEOUT`].
    #[must_use]
    pub fn with_handshake_timeout(mut self, timeout: impl Into<Option<Duration>>) -> TlsServer {
        self.handshake_timeout = timeout.into();
        self
    }

    /// Answers a request sent in plain HTTP with `400 Bad Request` before closing, as
    /// nginx does, instead of a TLS alert the client cannot read (on for HTTP servers).
    #[must_use]
    pub fn with_plain_http_answer(mut self, yes: bool) -> TlsServer {
        self.answer_plain_http = yes;
        self
    }
}

impl Handler for TlsServer {
    fn on_open(&self, conn: &Conn) {
        match UnbufferedServerConnection::new(self.config.clone()) {
            Ok(tls) => {
                let session = Session::new(tls, Instant::now(), self.handshake_timeout)
                    .answer_plain_http(self.answer_plain_http);
                conn.inner
                    .start_layer(Box::new(session), self.inner.clone());
            }
            Err(e) => {
                tracing::error!(error = %e, "could not start a TLS session");
                conn.close();
            }
        }
    }

    fn on_data(&self, _conn: &Conn, _data: &[u8]) {
        // Never called: `on_open` hands the connection to the layer and the inner handler.
    }
}

/// The webpki roots on fibr's provider ([`crypto_provider`] when first asked), TLS 1.2 and
/// 1.3, made once: what fibr's clients use unless given a config.
#[cfg(any(feature = "client", feature = "ws"))]
pub(crate) fn default_client_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: std::sync::OnceLock<Arc<rustls::ClientConfig>> = std::sync::OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            let config = rustls::ClientConfig::builder_with_provider(crypto_provider())
                .with_safe_default_protocol_versions()
                .expect("the provider supports TLS 1.2 and 1.3")
                .with_root_certificates(roots)
                .with_no_client_auth();
            Arc::new(config)
        })
        .clone()
}

/// A dialed connection's client side of TLS: once connected it puts a client session on
/// the connection as its layer, and `inner` gets `on_open` when the handshake is done
/// (fibr's WebSocket client over `wss://`).
#[cfg(feature = "ws")]
pub(crate) struct TlsClient {
    pub config: Arc<rustls::ClientConfig>,
    pub name: rustls::pki_types::ServerName<'static>,
    pub timeout: Option<Duration>,
    pub inner: Arc<dyn Handler>,
}

#[cfg(feature = "ws")]
impl Handler for TlsClient {
    fn on_open(&self, conn: &Conn) {
        use rustls::client::UnbufferedClientConnection;
        match UnbufferedClientConnection::new(self.config.clone(), self.name.clone()) {
            Ok(tls) => {
                let mut session = Session::new(tls, Instant::now(), self.timeout);
                // The client speaks first: its ClientHello leaves before the layer is in
                // place (what is sent before it goes out as it is).
                let mut hello = Vec::new();
                let started = session.receive(&mut [], &mut hello, &mut |_| true);
                if let Err(e) = started.and_then(|_| conn.send(&hello)) {
                    tracing::debug!(error = %e, "could not start a TLS client session");
                    return conn.close();
                }
                conn.inner
                    .start_layer(Box::new(session), self.inner.clone());
            }
            Err(e) => {
                tracing::debug!(error = %e, "could not start a TLS client session");
                conn.close();
            }
        }
    }

    fn on_data(&self, _conn: &Conn, _data: &[u8]) {
        // Never called: `on_open` hands the connection to the layer and the inner handler.
    }

    fn on_close(&self, conn: &Conn, err: Option<std::io::Error>) {
        // A connection that failed before the handshake: the inner handler learns of it.
        self.inner.on_close(conn, err);
    }
}

/// `config` as an HTTP server uses it: ALPN filled in with what fibr serves when the
/// config names none (`h2` first, then `http/1.1`; `h2` alone for an HTTP/2-only server),
/// and session tickets on when it has no ticketer (resumption without a server-side cache
/// lookup; the config's session cache still serves TLS 1.2 IDs): the process's
/// [`SharedTicketer`] in a prefork child, so its siblings open its tickets, else rustls's
/// ring ticketer.
pub(crate) fn for_http(config: Arc<ServerConfig>, http2_only: bool) -> Arc<ServerConfig> {
    if !config.alpn_protocols.is_empty() && config.ticketer.enabled() {
        return config;
    }
    let mut config = Arc::unwrap_or_clone(config);
    if config.alpn_protocols.is_empty() {
        config.alpn_protocols = if http2_only {
            vec![b"h2".to_vec()]
        } else {
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        };
    }
    if !config.ticketer.enabled() {
        match ticket::process_ticketer().map_or_else(ticketer, |t| Ok(t as _)) {
            Ok(t) => config.ticketer = t,
            Err(e) => tracing::warn!(error = %e, "TLS session tickets are off: no ticketer"),
        }
    }
    Arc::new(config)
}
