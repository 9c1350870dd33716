//! How a message body is delimited, for both roles and directions: what the parsers
//! decide, the body decoder and encoder follow, and the client chooses for its uploads.

/// How a message body is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyFraming {
    /// No body: no Content-Length nor Transfer-Encoding on a request, `Content-Length: 0`,
    /// a response to HEAD, a 1xx, 204 or 304.
    Empty,
    /// Exactly this many bytes. The parsers say `Empty` for 0; a response the server
    /// sends with an empty body is `Length(0)` (`content-length: 0`).
    Length(u64),
    /// `Transfer-Encoding` ending in `chunked`.
    Chunked,
    /// Everything until the peer closes (responses only: a request never is).
    UntilClose,
}
