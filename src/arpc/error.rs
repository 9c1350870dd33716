//! What a call, a notify or a connect can fail with.

use crate::proto::arpc::MethodError;
use std::fmt;
use std::io;

/// Why an arpc operation failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The peer answered with an error: its text, as it sent it (`method not found` for a
    /// method it has no handler for).
    Remote(String),
    /// No answer within the call's timeout. Nothing is sent: a late answer is dropped.
    Timeout,
    /// The connection is closed (a server's peer that left, or a stopped client).
    Closed,
    /// The client lost its connection and is dialing again; calls fail until it is back.
    Reconnecting,
    /// A method name that is empty or longer than 127 bytes (or a body over 4 GiB).
    BadMethod(String),
    /// More calls in flight than [`Config::max_pending_calls`](super::Config).
    TooManyCalls,
    /// The codec could not encode or decode a body.
    Codec(String),
    /// Connecting failed.
    Io(io::Error),
}

impl Error {
    /// The text of a remote error (`Error::Remote`), else None.
    pub fn remote_text(&self) -> Option<&str> {
        match self {
            Error::Remote(t) => Some(t),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // As Go's arpc shows it: the peer's text alone.
            Error::Remote(t) => f.write_str(t),
            Error::Timeout => f.write_str("arpc: timeout"),
            Error::Closed => f.write_str("arpc: connection closed"),
            Error::Reconnecting => f.write_str("arpc: client reconnecting"),
            Error::BadMethod(why) => write!(f, "arpc: {why}"),
            Error::TooManyCalls => f.write_str("arpc: too many calls in flight"),
            Error::Codec(why) => write!(f, "arpc: codec: {why}"),
            Error::Io(e) => write!(f, "arpc: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<MethodError> for Error {
    fn from(e: MethodError) -> Error {
        Error::BadMethod(e.to_string())
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Io(e)
    }
}
