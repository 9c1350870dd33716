//! A response's header block, field by field, into an `http` response head (RFC 9113
//! §8.3.2): only `:status`, no fields HTTP/2 forbids, lowercase names, Content-Length.

use http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_LENGTH};
use http::StatusCode;

/// A response head decoded from one HEADERS block.
#[derive(Debug)]
pub(crate) struct ResponseHead {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// The Content-Length the server declared: the DATA must match it (§8.1.1).
    pub content_length: Option<u64>,
}

/// Why a header block is malformed (§8.1.1): the stream is reset with PROTOCOL_ERROR.
pub(crate) type Malformed = &'static str;

/// Fields HTTP/2 forbids in any message (§8.2.2).
const CONNECTION_SPECIFIC: [&[u8]; 5] = [
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"transfer-encoding",
    b"upgrade",
];

/// Collects one header block's fields (the HPACK decoder's callback) and checks them.
#[derive(Default)]
pub(crate) struct HeadBuilder {
    status: Option<StatusCode>,
    headers: HeaderMap,
    regular: bool,
    trailers: bool,
    content_length: Option<u64>,
    error: Option<Malformed>,
}

impl HeadBuilder {
    /// A builder for a trailer block (no pseudo-headers at all).
    pub(crate) fn trailers() -> HeadBuilder {
        HeadBuilder {
            trailers: true,
            ..HeadBuilder::default()
        }
    }

    /// Takes one decoded field (the first error sticks; later fields are ignored).
    pub(crate) fn field(&mut self, name: &[u8], value: &[u8]) {
        if self.error.is_none() {
            if let Err(e) = self.take(name, value) {
                self.error = Some(e);
            }
        }
    }

    fn take(&mut self, name: &[u8], value: &[u8]) -> Result<(), Malformed> {
        if let Some(pseudo) = name.strip_prefix(b":") {
            if self.regular || self.trailers {
                return Err("a pseudo-header after a regular field, or in trailers");
            }
            if pseudo != b"status" {
                return Err("a pseudo-header other than :status in a response");
            }
            if self.status.is_some() {
                return Err(":status twice");
            }
            let status = (value.len() == 3)
                .then(|| StatusCode::from_bytes(value).ok())
                .flatten()
                .ok_or("a :status that is not three digits")?;
            self.status = Some(status);
            return Ok(());
        }
        self.regular = true;
        if name.iter().any(u8::is_ascii_uppercase) {
            return Err("an uppercase field name");
        }
        if CONNECTION_SPECIFIC.contains(&name) {
            return Err("a connection-specific field");
        }
        let name = HeaderName::from_bytes(name).map_err(|_| "an invalid field name")?;
        let value = HeaderValue::from_bytes(value).map_err(|_| "an invalid field value")?;
        if name == CONTENT_LENGTH && !self.trailers {
            let n = std::str::from_utf8(value.as_bytes())
                .ok()
                .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or("an invalid content-length")?;
            if self.content_length.is_some_and(|m| m != n) {
                return Err("content-length values that differ");
            }
            self.content_length = Some(n);
        }
        self.headers.append(name, value);
        Ok(())
    }

    /// The response head, once the block is complete.
    pub(crate) fn finish(self) -> Result<ResponseHead, Malformed> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let status = self.status.ok_or("a response without :status")?;
        Ok(ResponseHead {
            status,
            headers: self.headers,
            content_length: self.content_length,
        })
    }

    /// The trailers, once the block is complete.
    pub(crate) fn finish_trailers(self) -> Result<HeaderMap, Malformed> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.headers),
        }
    }
}
