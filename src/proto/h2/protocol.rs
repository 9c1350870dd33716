//! The `:protocol` of an extended CONNECT (RFC 8441), as a request extension.

use std::fmt;

/// The protocol an HTTP/2 extended CONNECT asks the stream to carry (its `:protocol`
/// pseudo-header, e.g. `websocket`): in the request's extensions, as hyper's
/// `hyper::ext::Protocol` is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Protocol(Box<str>);

impl Protocol {
    /// The protocol's name if it is a token (RFC 9110 §5.6.2), as upgrade tokens are.
    pub(crate) fn from_token(value: &[u8]) -> Option<Protocol> {
        let tchar = |b: &u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b);
        if value.is_empty() || !value.iter().all(tchar) {
            return None;
        }
        let s = std::str::from_utf8(value).ok()?;
        Some(Protocol(s.into()))
    }

    /// A protocol to ask for in a client's extended CONNECT (put it in the request's
    /// extensions); `None` unless `name` is a token.
    pub fn new(name: &str) -> Option<Protocol> {
        Protocol::from_token(name.as_bytes())
    }

    /// The protocol's name, as the client sent it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
