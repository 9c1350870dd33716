//! WebSocket (RFC 6455, with permessage-deflate, RFC 7692) on fibr's loops.
//!
//! ```no_run
//! # #[cfg(feature = "axum")] {
//! use axum::{routing::get, Router};
//! use fibr::ws::{Message, WebSocket, WebSocketUpgrade};
//!
//! async fn echo(mut socket: WebSocket) {
//!     while let Some(Ok(msg)) = socket.recv().await {
//!         if matches!(msg, Message::Text(_) | Message::Binary(_)) && socket.send(msg).await.is_err() {
//!             break;
//!         }
//!     }
//! }
//! let app: Router = Router::new().route("/ws", get(|ws: WebSocketUpgrade| async move { ws.on_upgrade(echo) }));
//! # }
//! ```
//!
//! A server upgrades a request that fibr's HTTP server answers (HTTP/1.1's `Upgrade`, or
//! HTTP/2's extended CONNECT, RFC 8441; plain or TLS): with axum, through the
//! [`WebSocketUpgrade`] extractor (feature `axum`; the API of axum's own, so a handler
//! moves over by its `use` line); with any tower service, through [`upgrade`]. Either way
//! the connection stays on fibr's loops, and the `on_upgrade` task is polled by the
//! connection itself. axum's own extractor keeps working as before (its requests go to
//! hyper). A client dials with [`connect`] (or a [`Connector`] with options).

#[cfg(feature = "axum")]
mod axum;
mod client;
mod handshake;
mod message;
mod oneshot;
mod socket;
mod transport;
mod upgrade;

#[cfg(feature = "axum")]
pub use self::axum::WebSocketUpgrade;
pub use crate::http::pipe::{TunnelAborted, UpgradeBody};
pub use crate::proto::ws::deflate::DeflateConfig;
pub use crate::proto::ws::keepalive::KeepAliveConfig;
pub use client::{connect, Connector};
pub use handshake::WebSocketUpgradeRejection;
pub use message::{close_code, CloseCode, CloseFrame, Message, Utf8Bytes};
pub use socket::WebSocket;
pub use upgrade::{upgrade, Upgrade, Upgrading};

use crate::proto::ws as proto;
use std::fmt;

/// Limits and options of a WebSocket connection.
#[derive(Clone, Debug)]
pub struct Config {
    /// The largest message accepted (assembled, decompressed); a larger one closes the
    /// connection with 1009. Default 64 MiB, as axum's.
    pub max_message_size: usize,
    /// The largest frame accepted. Default 16 MiB, as axum's.
    pub max_frame_size: usize,
    /// Received messages not yet taken by the application, in payload bytes, past which
    /// reads pause (the peer is held back rather than buffered). Default 1 MiB.
    pub read_buffer_limit: usize,
    /// Bytes queued for the peer past which `send` waits. Default 1 MiB.
    pub write_buffer_limit: usize,
    /// permessage-deflate, negotiated when the peer offers (server) or offered (client).
    /// Default off.
    pub deflate: Option<DeflateConfig>,
    /// Pings a peer that has been silent for an interval, and closes the connection if it
    /// then stays silent past the timeout (a dead peer is noticed without the application
    /// sending anything). Default off, as axum's; one timer per connection when on.
    pub keepalive: Option<KeepAliveConfig>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_message_size: 64 << 20,
            max_frame_size: 16 << 20,
            read_buffer_limit: 1 << 20,
            write_buffer_limit: 1 << 20,
            deflate: None,
            keepalive: None,
        }
    }
}

impl Config {
    fn limits(&self) -> proto::Limits {
        proto::Limits {
            max_frame_size: self.max_frame_size,
            max_message_size: self.max_message_size,
            ..proto::Limits::default()
        }
    }
}

/// A WebSocket error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ErrorKind {
    /// The peer broke the protocol (the connection was closed with the code).
    Protocol(proto::Error),
    Io(std::io::ErrorKind, String),
    /// The connection is closed.
    Closed,
    /// The connection ended without a close handshake.
    AbnormalClose,
    NotUtf8,
    /// The opening handshake failed (client).
    Handshake(String),
    /// The peer did not answer a keep-alive ping in time.
    KeepAliveTimeout,
}

impl Error {
    pub(crate) fn protocol(e: proto::Error) -> Error {
        Error {
            kind: ErrorKind::Protocol(e),
        }
    }
    pub(crate) fn io(e: std::io::Error) -> Error {
        Error {
            kind: ErrorKind::Io(e.kind(), e.to_string()),
        }
    }
    pub(crate) fn closed() -> Error {
        Error {
            kind: ErrorKind::Closed,
        }
    }
    pub(crate) fn abnormal_close() -> Error {
        Error {
            kind: ErrorKind::AbnormalClose,
        }
    }
    pub(crate) fn not_utf8() -> Error {
        Error {
            kind: ErrorKind::NotUtf8,
        }
    }

    pub(crate) fn keepalive_timeout() -> Error {
        Error {
            kind: ErrorKind::KeepAliveTimeout,
        }
    }

    pub(crate) fn handshake(why: impl Into<String>) -> Error {
        Error {
            kind: ErrorKind::Handshake(why.into()),
        }
    }

    /// Whether the connection was already closed.
    pub fn is_closed(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::Closed | ErrorKind::AbnormalClose | ErrorKind::KeepAliveTimeout
        )
    }

    /// The close code the connection was failed with, for a protocol error (1006 for a
    /// connection that ended without a close handshake).
    pub fn close_code(&self) -> Option<CloseCode> {
        match &self.kind {
            ErrorKind::Protocol(e) => Some(e.close_code()),
            ErrorKind::AbnormalClose | ErrorKind::KeepAliveTimeout => Some(close_code::ABNORMAL),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::Protocol(e) => write!(f, "WebSocket protocol error: {e}"),
            ErrorKind::Io(_, e) => write!(f, "WebSocket I/O error: {e}"),
            ErrorKind::Closed => f.write_str("the WebSocket is closed"),
            ErrorKind::AbnormalClose => {
                f.write_str("the WebSocket connection ended without a close handshake")
            }
            ErrorKind::NotUtf8 => f.write_str("the message is not UTF-8"),
            ErrorKind::Handshake(why) => write!(f, "WebSocket handshake failed: {why}"),
            ErrorKind::KeepAliveTimeout => {
                f.write_str("the WebSocket peer did not answer a keep-alive ping in time")
            }
        }
    }
}

impl std::error::Error for Error {}
/// Fills `buf` from the OS's random source (keys, mask seeds): getrandom(2), getentropy(2)
/// or /dev/urandom, whichever the OS has (the `getrandom` crate picks).
pub(crate) fn random_bytes(buf: &mut [u8]) {
    if getrandom::fill(buf).is_err() {
        // No OS source at all (a sandbox that forbids it): still unique per call, if not
        // unpredictable.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as u64;
        let seed =
            std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), t);
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (seed >> ((i % 8) * 8)) as u8;
        }
    }
}

/// A seed for a client's masks.
pub(crate) fn mask_seed() -> u64 {
    let mut b = [0u8; 8];
    random_bytes(&mut b);
    u64::from_ne_bytes(b)
}
