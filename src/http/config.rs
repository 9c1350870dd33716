//! HTTP server settings: limits, timeouts, keep-alive.

#[cfg(feature = "http3")]
pub use super::http3::{Http3Config, RetryPolicy};
pub use crate::proto::h2::config::Http2Config;
use std::time::Duration;

/// Limits and timeouts of fibr's HTTP server. Every limit is answered with the status the
/// RFC names (400, 408, 413, 414, 431) and, where the protocol says so, a closed connection.
///
/// Start from `ServerConfig::default()` and change what you need with the `with_*`
/// setters (or by assigning fields): `ServerConfig::default().with_max_body_size(1 << 20)`.
/// It is `#[non_exhaustive]`, so settings added later do not break your code.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Largest request head (request line and headers) in bytes; over it: 431.
    pub max_head_bytes: usize,
    /// Most header fields in a request; over it: 431.
    pub max_headers: usize,
    /// Longest request-target in bytes; over it: 414.
    pub max_uri_len: usize,
    /// Largest request body accepted, if limited; a larger Content-Length gets 413 without
    /// calling the service, a larger chunked body fails the body stream and closes.
    pub max_body_size: Option<u64>,
    /// Time allowed for a request head to arrive once its first byte has (slowloris); then
    /// 408 and close.
    pub header_read_timeout: Option<Duration>,
    /// Time allowed between request body bytes (a stalled or trickled body, "R.U.D.Y."):
    /// the service's body read fails, and the connection closes after its answer.
    pub body_read_timeout: Option<Duration>,
    /// A keep-alive connection with no request in progress is closed after this long.
    pub idle_timeout: Option<Duration>,
    /// Requests served on one connection before it is closed (`connection: close` on the last).
    pub max_requests_per_connection: Option<usize>,
    /// Request body bytes buffered for a service that is not reading; past it, the
    /// connection stops reading until the service catches up.
    pub body_buffer: usize,
    /// Unread request body bytes the server drains (to keep the connection) after the
    /// response; a longer remainder closes the connection instead.
    pub max_drain_bytes: u64,
    /// Responses waiting their turn on one pipelined connection; past it, reading pauses.
    pub max_pipelined: usize,
    /// Bytes of response queued in the socket's output before a streaming body is polled
    /// again (large responses are never buffered whole).
    pub response_buffer: usize,
    /// With TLS (`serve(..).with_tls(..)`): how long a handshake may take before the
    /// connection is closed.
    pub tls_handshake_timeout: Option<Duration>,
    /// Graceful shutdown: how long a new connection with nothing sent yet may still take
    /// to finish its TLS handshake (from its start) and to begin its first request (from
    /// its opening), which is then answered as its last. One that had longer closes when
    /// the drain begins, as hyper closes it; the grace spares a client whose connection
    /// was accepted just before the signal (a restart under load fails nothing). Zero:
    /// closed at once, as hyper does.
    pub drain_first_request_grace: Duration,
    /// HTTP/2: h2c on or off, HTTP/2 only, SETTINGS and the protections' bounds. The
    /// preface and first SETTINGS must come within `header_read_timeout`; an HTTP/2
    /// connection with no stream open closes after `idle_timeout`.
    pub http2: Http2Config,
    /// HTTP/3 (`serve(..).with_tls(..).with_http3()`): QUIC's idle timeout and limits.
    #[cfg(feature = "http3")]
    pub http3: Http3Config,
    /// The `Alt-Svc` value HTTP/1.1 and HTTP/2 responses carry (set by `with_http3`).
    pub(crate) alt_svc: Option<http::HeaderValue>,
}

impl ServerConfig {
    /// The part of this configuration the HTTP/1 server machine reads.
    pub(crate) fn h1_limits(&self) -> crate::proto::h1::server::Limits {
        crate::proto::h1::server::Limits {
            head: crate::proto::h1::parse::Limits {
                max_head_bytes: self.max_head_bytes,
                max_headers: self.max_headers,
                max_uri_len: self.max_uri_len,
            },
            max_body_size: self.max_body_size,
            max_requests_per_connection: self.max_requests_per_connection,
            max_drain_bytes: self.max_drain_bytes,
            max_pipelined: self.max_pipelined,
            header_read_timeout: self.header_read_timeout,
            body_read_timeout: self.body_read_timeout,
            idle_timeout: self.idle_timeout,
            drain_first_request_grace: self.drain_first_request_grace,
        }
    }

    /// The HTTP/2 machine's limits: its settings and the timeouts it decides.
    pub(crate) fn h2_limits(&self) -> crate::proto::h2::config::ServerLimits {
        crate::proto::h2::config::ServerLimits {
            http2: self.http2.clone(),
            header_read_timeout: self.header_read_timeout,
            body_read_timeout: self.body_read_timeout,
            idle_timeout: self.idle_timeout,
        }
    }
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            max_head_bytes: 64 * 1024,
            max_headers: 100,
            max_uri_len: 8 * 1024,
            max_body_size: None,
            header_read_timeout: Some(Duration::from_secs(30)),
            body_read_timeout: Some(Duration::from_secs(30)),
            idle_timeout: Some(Duration::from_secs(60)),
            max_requests_per_connection: None,
            body_buffer: 64 * 1024,
            max_drain_bytes: 64 * 1024,
            max_pipelined: 64,
            response_buffer: 64 * 1024,
            tls_handshake_timeout: Some(Duration::from_secs(10)),
            drain_first_request_grace: Duration::from_millis(500),
            http2: Http2Config::default(),
            #[cfg(feature = "http3")]
            http3: Http3Config::default(),
            alt_svc: None,
        }
    }
}

config_setters!(ServerConfig {
    set with_max_head_bytes => max_head_bytes: usize,
    set with_max_headers => max_headers: usize,
    set with_max_uri_len => max_uri_len: usize,
    opt with_max_body_size => max_body_size: u64,
    opt with_header_read_timeout => header_read_timeout: Duration,
    opt with_body_read_timeout => body_read_timeout: Duration,
    opt with_idle_timeout => idle_timeout: Duration,
    opt with_max_requests_per_connection => max_requests_per_connection: usize,
    set with_body_buffer => body_buffer: usize,
    set with_max_drain_bytes => max_drain_bytes: u64,
    set with_max_pipelined => max_pipelined: usize,
    set with_response_buffer => response_buffer: usize,
    opt with_tls_handshake_timeout => tls_handshake_timeout: Duration,
    set with_drain_first_request_grace => drain_first_request_grace: Duration,
    set with_http2 => http2: Http2Config,
});

#[cfg(feature = "http3")]
config_setters!(ServerConfig {
    set with_http3_config => http3: Http3Config,
});

impl ServerConfig {
    /// Adds `Alt-Svc` to a response head when another protocol is served (HTTP/3), unless
    /// the application set its own.
    pub(crate) fn advertise(&self, headers: &mut http::HeaderMap) {
        if let Some(v) = &self.alt_svc {
            headers
                .entry(http::header::ALT_SVC)
                .or_insert_with(|| v.clone());
        }
    }
}
