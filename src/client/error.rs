//! The client's typed error.

use std::error::Error as StdError;
use std::fmt;
use std::io;

/// A boxed error, as tower and hyper use.
pub type BoxError = Box<dyn StdError + Send + Sync>;

/// What went wrong, as far as the client can tell. New kinds may be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The URI is not absolute, or names a scheme the connector does not speak.
    InvalidUri,
    /// The host name did not resolve.
    Dns,
    /// The server refused the connection (nothing listens there).
    ConnectRefused,
    /// Connecting failed for another reason.
    Connect,
    /// Connecting (resolution included) took longer than the connect timeout.
    ConnectTimeout,
    /// The proxy refused the tunnel (an HTTP status, a SOCKS reply), failed during its
    /// handshake, or answered with something that is not its protocol.
    Proxy,
    /// The proxy wants credentials, or refused the ones given (HTTP 407 or 401 to `CONNECT`, a SOCKS5
    /// username/password failure or no acceptable method).
    ProxyAuth,
    /// No response head within the request timeout.
    Timeout,
    /// The connection closed (or was reset) before a complete response head arrived.
    ClosedBeforeResponse,
    /// The connection closed before the response body was complete.
    IncompleteBody,
    /// The server's response was not valid HTTP/1 (garbage, an oversized head).
    Protocol,
    /// The response body is larger than the configured limit.
    BodyTooLarge,
    /// The request body failed while being sent.
    RequestBody,
    /// Anything else.
    Other,
}

impl ErrorKind {
    fn describe(self) -> &'static str {
        match self {
            ErrorKind::InvalidUri => "invalid request URI",
            ErrorKind::Dns => "DNS resolution failed",
            ErrorKind::ConnectRefused => "connection refused",
            ErrorKind::Connect => "connect failed",
            ErrorKind::ConnectTimeout => "connect timed out",
            ErrorKind::Proxy => "the proxy failed the connection",
            ErrorKind::ProxyAuth => "proxy authentication failed",
            ErrorKind::Timeout => "request timed out",
            ErrorKind::ClosedBeforeResponse => "connection closed before the response",
            ErrorKind::IncompleteBody => "connection closed before the response body was complete",
            ErrorKind::Protocol => "invalid HTTP response",
            ErrorKind::BodyTooLarge => "response body larger than the limit",
            ErrorKind::RequestBody => "request body failed",
            ErrorKind::Other => "HTTP client error",
        }
    }
}

/// An error of [`Client`](super::Client): a kind plus, where there is one, its cause.
pub struct Error {
    kind: ErrorKind,
    source: Option<BoxError>,
}

impl Error {
    /// An error of `kind` caused by `source` (for connectors).
    pub fn new(kind: ErrorKind, source: impl Into<BoxError>) -> Error {
        Error {
            kind,
            source: Some(source.into()),
        }
    }

    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// A connect or request timeout.
    pub fn is_timeout(&self) -> bool {
        matches!(self.kind, ErrorKind::Timeout | ErrorKind::ConnectTimeout)
    }

    /// No connection could be made (DNS, refused, connect timeout, a proxy's refusal,
    /// other connect errors).
    pub fn is_connect(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::Dns
                | ErrorKind::ConnectRefused
                | ErrorKind::Connect
                | ErrorKind::ConnectTimeout
                | ErrorKind::Proxy
                | ErrorKind::ProxyAuth
        )
    }

    /// The connection closed before the response (head or body) was complete.
    pub fn is_closed(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::ClosedBeforeResponse | ErrorKind::IncompleteBody
        )
    }

    /// The response body exceeded the configured limit.
    pub fn is_body_too_large(&self) -> bool {
        self.kind == ErrorKind::BodyTooLarge
    }

    /// An I/O error while connecting: refused, or another connect failure.
    pub fn from_connect_io(e: io::Error) -> Error {
        Error::new(Error::connect_io_kind(&e), e)
    }

    /// The kind of an I/O error while connecting.
    pub(crate) fn connect_io_kind(e: &io::Error) -> ErrorKind {
        match e.kind() {
            io::ErrorKind::ConnectionRefused => ErrorKind::ConnectRefused,
            io::ErrorKind::TimedOut => ErrorKind::ConnectTimeout,
            _ => ErrorKind::Connect,
        }
    }

    /// An I/O error while sending a request or reading its response head: the peer went
    /// away (closed before the response), or something else.
    pub(crate) fn from_exchange_io(e: io::Error) -> Error {
        let kind = match e.kind() {
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => ErrorKind::ClosedBeforeResponse,
            _ => ErrorKind::Other,
        };
        Error::new(kind, e)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("fibr::client::Error");
        d.field("kind", &self.kind);
        if let Some(s) = &self.source {
            d.field("source", s);
        }
        d.finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind.describe())?;
        if let Some(s) = &self.source {
            write!(f, ": {s}")?;
        }
        Ok(())
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn StdError + 'static))
    }
}

/// Why an extended CONNECT (a request with a `fibr::http::Protocol`) did not go: the
/// connection it got speaks HTTP/1.1, or the HTTP/2 server does not allow it (RFC 8441's
/// SETTINGS_ENABLE_CONNECT_PROTOCOL). Typed, so that the gateway can tell it from a
/// failure and go over HTTP/1.1's `Upgrade` instead.
#[derive(Debug)]
pub(crate) struct NoExtendedConnect(pub &'static str);

impl fmt::Display for NoExtendedConnect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl StdError for NoExtendedConnect {}

impl Error {
    /// Whether the request was an extended CONNECT the connection could not carry (see
    /// [`NoExtendedConnect`]).
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    pub(crate) fn is_no_extended_connect(&self) -> bool {
        self.source
            .as_deref()
            .is_some_and(|e| e.is::<NoExtendedConnect>())
    }
}

/// How an exchange failed.
pub(crate) enum Failure {
    /// Nothing reached the server: the request may be sent again as it is.
    NotSent(Error),
    /// The request was (perhaps partly) sent.
    Sent(Error),
}
