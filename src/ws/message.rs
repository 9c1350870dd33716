//! The messages a [`WebSocket`](super::WebSocket) carries, shaped like axum's
//! (`axum::extract::ws::Message`), so a handler moves over by its `use` line.

use crate::proto::ws as proto;
use bytes::Bytes;
use std::fmt;
use std::ops::Deref;

/// A close code (RFC 6455 §7.4).
pub type CloseCode = u16;

/// The close codes RFC 6455 §7.4.1 names.
///
/// ```
/// use fibr::ws::{close_code, CloseFrame, WebSocket};
///
/// /// What a server going down for a restart tells its clients.
/// async fn restarting(mut socket: WebSocket) -> Result<(), fibr::ws::Error> {
///     let frame = CloseFrame { code: close_code::AWAY, reason: "restarting".into() };
///     socket.close(Some(frame)).await
/// }
/// ```
pub mod close_code {
    use super::CloseCode;
    /// The purpose the connection was made for is fulfilled.
    pub const NORMAL: CloseCode = 1000;
    /// The endpoint goes away (a server shutting down, a page navigated from).
    pub const AWAY: CloseCode = 1001;
    /// A protocol error.
    pub const PROTOCOL: CloseCode = 1002;
    /// A kind of data the endpoint does not accept.
    pub const UNSUPPORTED: CloseCode = 1003;
    /// No status code was present (never sent in a frame).
    pub const STATUS: CloseCode = 1005;
    /// The connection closed without a close frame (never sent in a frame).
    pub const ABNORMAL: CloseCode = 1006;
    /// Data inconsistent with the message type (text that is not UTF-8).
    pub const INVALID: CloseCode = 1007;
    /// A message that violates the endpoint's policy.
    pub const POLICY: CloseCode = 1008;
    /// A message too big to process.
    pub const SIZE: CloseCode = 1009;
    /// The client expected an extension the server did not negotiate.
    pub const EXTENSION: CloseCode = 1010;
    /// The server met an unexpected condition.
    pub const ERROR: CloseCode = 1011;
    /// The server is restarting.
    pub const RESTART: CloseCode = 1012;
    /// The server is overloaded: try again later.
    pub const AGAIN: CloseCode = 1013;
}

/// UTF-8 text in shared bytes: a text message's payload without a copy.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Utf8Bytes(Bytes);

impl Utf8Bytes {
    /// A static string, without a copy.
    pub const fn from_static(s: &'static str) -> Self {
        Utf8Bytes(Bytes::from_static(s.as_bytes()))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        // SAFETY: every constructor takes a `str` or bytes checked to be UTF-8 (the
        // machine validates every text payload and close reason it delivers).
        unsafe { std::str::from_utf8_unchecked(&self.0) }
    }

    /// The bytes of the text.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Bytes that are known to be UTF-8 (the machine's text and close reasons).
    pub(crate) fn from_checked(b: Bytes) -> Self {
        debug_assert!(std::str::from_utf8(&b).is_ok());
        Utf8Bytes(b)
    }
}

impl Deref for Utf8Bytes {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for Utf8Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Utf8Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl From<String> for Utf8Bytes {
    fn from(s: String) -> Self {
        Utf8Bytes(Bytes::from(s))
    }
}

impl From<&str> for Utf8Bytes {
    fn from(s: &str) -> Self {
        Utf8Bytes(Bytes::copy_from_slice(s.as_bytes()))
    }
}

impl From<&String> for Utf8Bytes {
    fn from(s: &String) -> Self {
        s.as_str().into()
    }
}

impl From<Utf8Bytes> for Bytes {
    fn from(s: Utf8Bytes) -> Bytes {
        s.0
    }
}

impl TryFrom<Bytes> for Utf8Bytes {
    type Error = std::str::Utf8Error;
    fn try_from(b: Bytes) -> Result<Self, Self::Error> {
        std::str::from_utf8(&b)?;
        Ok(Utf8Bytes(b))
    }
}

impl PartialEq<str> for Utf8Bytes {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Utf8Bytes {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// The code and reason of a close frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloseFrame {
    /// Why the connection closes ([`close_code`] has the registered ones).
    pub code: CloseCode,
    /// Text for humans: at most 123 bytes, so that the frame stays within a control
    /// frame's 125 (sending a longer one fails).
    pub reason: Utf8Bytes,
}

/// A WebSocket message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Text (always valid UTF-8).
    Text(Utf8Bytes),
    /// Binary data.
    Binary(Bytes),
    /// A ping: fibr answers it with a pong by itself; it is delivered too.
    Ping(Bytes),
    /// A pong: the answer to a ping, or an unsolicited heartbeat.
    Pong(Bytes),
    /// The peer's close (or, sent, ours): no data message follows it.
    Close(Option<CloseFrame>),
}

impl Message {
    /// A text message.
    pub fn text(s: impl Into<Utf8Bytes>) -> Message {
        Message::Text(s.into())
    }

    /// A binary message.
    pub fn binary(b: impl Into<Bytes>) -> Message {
        Message::Binary(b.into())
    }

    /// The payload as bytes (a close frame's reason).
    pub fn into_data(self) -> Bytes {
        match self {
            Message::Text(t) => t.into(),
            Message::Binary(b) | Message::Ping(b) | Message::Pong(b) => b,
            Message::Close(Some(f)) => f.reason.into(),
            Message::Close(None) => Bytes::new(),
        }
    }

    /// The payload as text, if it is UTF-8.
    pub fn into_text(self) -> Result<Utf8Bytes, super::Error> {
        match self {
            Message::Text(t) => Ok(t),
            Message::Close(Some(f)) => Ok(f.reason),
            Message::Close(None) => Ok(Utf8Bytes::default()),
            Message::Binary(b) | Message::Ping(b) | Message::Pong(b) => {
                Utf8Bytes::try_from(b).map_err(|_| super::Error::not_utf8())
            }
        }
    }

    /// The payload as `&str`, if it is UTF-8.
    pub fn to_text(&self) -> Result<&str, super::Error> {
        match self {
            Message::Text(t) => Ok(t.as_str()),
            Message::Close(Some(f)) => Ok(f.reason.as_str()),
            Message::Close(None) => Ok(""),
            Message::Binary(b) | Message::Ping(b) | Message::Pong(b) => {
                std::str::from_utf8(b).map_err(|_| super::Error::not_utf8())
            }
        }
    }
}

impl From<String> for Message {
    fn from(s: String) -> Message {
        Message::text(s)
    }
}

impl From<&str> for Message {
    fn from(s: &str) -> Message {
        Message::text(s)
    }
}

impl From<Vec<u8>> for Message {
    fn from(b: Vec<u8>) -> Message {
        Message::binary(b)
    }
}

impl From<Bytes> for Message {
    fn from(b: Bytes) -> Message {
        Message::binary(b)
    }
}

impl From<proto::Message> for Message {
    fn from(m: proto::Message) -> Message {
        match m {
            proto::Message::Text(b) => Message::Text(Utf8Bytes::from_checked(b)),
            proto::Message::Binary(b) => Message::Binary(b),
            proto::Message::Ping(b) => Message::Ping(b),
            proto::Message::Pong(b) => Message::Pong(b),
            proto::Message::Close(f) => Message::Close(f.map(|f| CloseFrame {
                code: f.code,
                reason: Utf8Bytes::from_checked(f.reason),
            })),
        }
    }
}

impl From<Message> for proto::Message {
    fn from(m: Message) -> proto::Message {
        match m {
            Message::Text(t) => proto::Message::Text(t.into()),
            Message::Binary(b) => proto::Message::Binary(b),
            Message::Ping(b) => proto::Message::Ping(b),
            Message::Pong(b) => proto::Message::Pong(b),
            Message::Close(f) => proto::Message::Close(f.map(|f| proto::CloseFrame {
                code: f.code,
                reason: f.reason.into(),
            })),
        }
    }
}
