//! Why an HTTP/1 message was rejected, and the status a server answers it with.

use http::StatusCode;
use std::fmt;

/// Why a request head (or a chunked body, see `chunked.rs`) was rejected. `status()` is
/// the response to send; after any of these the connection must be closed, since the
/// message boundaries can no longer be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParseError {
    // ---- 400 Bad Request: request line ----
    /// More than a few empty lines before the request line.
    TooManyEmptyLines,
    /// The request line is not `method SP request-target SP HTTP-version CRLF`.
    InvalidRequestLine,
    /// The method is not a valid token.
    InvalidMethod,
    /// The request-target is not a valid URI reference.
    InvalidUri,
    /// Asterisk-form with a method other than OPTIONS, authority-form with a method other
    /// than CONNECT, or CONNECT with a target that is not in authority-form.
    InvalidTargetForm,
    /// The version is not `HTTP/DIGIT.DIGIT`.
    InvalidVersion,
    /// A line ended in something other than CRLF (or a bare LF).
    InvalidLineEnding,
    // ---- 400 Bad Request: header fields ----
    /// A header field name contains a byte that is not a token character.
    InvalidHeaderName,
    /// Whitespace between a header field name and the colon (RFC 9112 §5.1).
    WhitespaceBeforeColon,
    /// A header line starts with SP or HTAB (obsolete line folding, RFC 9112 §5.2).
    ObsFold,
    /// A header field value contains a forbidden byte (a control character).
    InvalidHeaderValue,
    /// HTTP/1.1 request without a Host header field.
    MissingHost,
    /// More than one Host header field line.
    MultipleHost,
    /// A Host header field value that is not `uri-host [ ":" port ]`.
    InvalidHost,
    /// A Content-Length value that is not 1*DIGIT or does not fit in a u64.
    InvalidContentLength,
    /// Several Content-Length values that differ.
    ConflictingContentLength,
    /// Both Content-Length and Transfer-Encoding.
    ContentLengthWithTransferEncoding,
    /// Transfer-Encoding in an HTTP/1.0 request.
    TransferEncodingInHttp10,
    /// A Transfer-Encoding with no coding, or with `chunked` more than once.
    InvalidTransferEncoding,
    // ---- 400 Bad Request: chunked body ----
    /// A chunk-size that is empty or has a non-hex digit.
    InvalidChunkSize,
    /// A chunk-size that does not fit in a u64.
    ChunkSizeOverflow,
    /// A chunk extension with a forbidden byte.
    InvalidChunkExtension,
    /// A chunk-size line (size plus extensions) longer than the decoder's bound.
    ChunkLineTooLong,
    /// A chunk-size line not ended by CRLF.
    InvalidChunkLineEnding,
    /// Chunk data not followed by CRLF.
    MissingChunkDataCrlf,
    /// A malformed trailer section.
    InvalidTrailer,
    // ---- 414 URI Too Long ----
    /// The request-target is longer than `Limits::max_uri_len`.
    UriTooLong,
    // ---- 431 Request Header Fields Too Large ----
    /// The head is longer than `Limits::max_head_bytes`.
    HeadTooLarge,
    /// More than `Limits::max_headers` header field lines.
    TooManyHeaders,
    /// The trailer section is longer than the decoder's `max_trailer_bytes`.
    TrailersTooLarge,
    // ---- 501 Not Implemented ----
    /// A transfer-coding other than `chunked`.
    UnsupportedTransferCoding,
    // ---- 505 HTTP Version Not Supported ----
    /// A well-formed HTTP version other than 1.0 and 1.1.
    UnsupportedVersion,
}

impl ParseError {
    /// The status code to answer with (before closing the connection).
    pub(crate) fn status(&self) -> StatusCode {
        use ParseError::*;
        match self {
            UriTooLong => StatusCode::URI_TOO_LONG,
            HeadTooLarge | TooManyHeaders | TrailersTooLarge => {
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
            }
            UnsupportedTransferCoding => StatusCode::NOT_IMPLEMENTED,
            UnsupportedVersion => StatusCode::HTTP_VERSION_NOT_SUPPORTED,
            _ => StatusCode::BAD_REQUEST,
        }
    }

    pub(crate) fn message(&self) -> &'static str {
        use ParseError::*;
        match self {
            TooManyEmptyLines => "too many empty lines before the request line",
            InvalidRequestLine => "malformed request line",
            InvalidMethod => "invalid request method",
            InvalidUri => "invalid request-target",
            InvalidTargetForm => {
                "request-target form does not match the method \
                 (`*` is for OPTIONS only, authority-form for CONNECT only)"
            }
            InvalidVersion => "malformed HTTP version",
            InvalidLineEnding => "invalid line ending (expected CRLF)",
            InvalidHeaderName => "invalid header field name",
            WhitespaceBeforeColon => "whitespace between header field name and colon",
            ObsFold => "header line starts with whitespace (obsolete line folding)",
            InvalidHeaderValue => "invalid byte in header field value",
            MissingHost => "HTTP/1.1 request without Host header",
            MultipleHost => "more than one Host header",
            InvalidHost => "invalid Host header value",
            InvalidContentLength => "invalid Content-Length value",
            ConflictingContentLength => "conflicting Content-Length values",
            ContentLengthWithTransferEncoding => "both Content-Length and Transfer-Encoding",
            TransferEncodingInHttp10 => "Transfer-Encoding in an HTTP/1.0 request",
            InvalidTransferEncoding => {
                "invalid Transfer-Encoding (empty, or chunked applied more than once)"
            }
            InvalidChunkSize => "invalid chunk size",
            ChunkSizeOverflow => "chunk size too large",
            InvalidChunkExtension => "invalid chunk extension",
            ChunkLineTooLong => "chunk size line (with extensions) too long",
            InvalidChunkLineEnding => "chunk size line not terminated by CRLF",
            MissingChunkDataCrlf => "chunk data not followed by CRLF",
            InvalidTrailer => "invalid trailer field",
            UriTooLong => "request-target too long",
            HeadTooLarge => "request head too large",
            TooManyHeaders => "too many header fields",
            TrailersTooLarge => "trailer section too large",
            UnsupportedTransferCoding => "unsupported transfer-coding (only chunked is supported)",
            UnsupportedVersion => "unsupported HTTP version (only HTTP/1.0 and HTTP/1.1)",
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for ParseError {}
