//! What the HTTP/1 server machine bounds: the part of the server's configuration it reads,
//! built once per server by the driver (`ServerConfig::h1_limits`), so the machine does
//! not depend on the driver's configuration type.

use crate::proto::h1::parse;
use std::time::Duration;

/// The HTTP/1 server machine's limits and timeouts; each field means what the
/// `ServerConfig` field of the same name says.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// Request head bounds: `max_head_bytes`, `max_headers`, `max_uri_len`.
    pub head: parse::Limits,
    pub max_body_size: Option<u64>,
    pub max_requests_per_connection: Option<usize>,
    pub max_drain_bytes: u64,
    pub max_pipelined: usize,
    pub header_read_timeout: Option<Duration>,
    pub body_read_timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    pub drain_first_request_grace: Duration,
}
