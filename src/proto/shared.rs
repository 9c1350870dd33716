//! What the HTTP machines share, whatever the protocol: the round's time they are handed
//! (`Clock`), where a request body's bytes go (`BodySink`) and why a body ended early
//! (`BodyFailure`). HTTP/1's and HTTP/2's server machines, HTTP/3's driver and the
//! service-facing body (`http::Incoming`) meet here instead of in one another.

use crate::proto::date::DATE_LEN;
use http::HeaderMap;
use std::time::Instant;

/// The round's time, and where its Date header comes from: the machine never reads a
/// clock itself.
#[derive(Clone, Copy)]
pub(crate) struct Clock {
    pub now: Instant,
    /// The current IMF-fixdate (the driver caches it per round; tests fix it).
    pub date: fn() -> [u8; DATE_LEN],
}

/// Why a request body ended before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyFailure {
    /// The client closed the connection (or the body was dropped unfinished).
    Incomplete,
    /// Bad framing (chunked encoding, a DATA frame past its Content-Length): why.
    Malformed(&'static str),
    /// More than `max_body_size` bytes.
    TooLarge(u64),
    /// No body bytes within `body_read_timeout`.
    TimedOut,
}

/// Where a request body's bytes go (the service's body stream, in the server).
pub(crate) trait BodySink {
    /// Takes body bytes (discarding them if the reader is gone).
    fn push(&mut self, data: &[u8]);
    /// Whether more may be pushed now (always once the reader is gone: the rest is
    /// discarded); if not, the machine stops reading until it may (the driver is woken
    /// when the reader catches up). One call: it is asked per chunk.
    fn has_room(&self) -> bool;
    /// The reader dropped the body: the rest is read only to be discarded.
    fn reader_gone(&self) -> bool;
    /// The reader asked for the body (so an owed `100 Continue` may go out).
    fn wanted(&self) -> bool;
    fn finish(self, trailers: Option<HeaderMap>);
    fn fail(self, why: BodyFailure);
}
