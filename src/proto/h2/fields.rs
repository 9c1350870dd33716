//! The field rules both roles apply to a decoded header block (RFC 9113 §8.2, §8.3):
//! pseudo-headers first and never in trailers, lowercase names, no connection-specific
//! fields, no padding whitespace, TE only "trailers", one Content-Length. Each role adds
//! its own pseudo-headers (`server/request.rs`, `client/response.rs`).

use http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_LENGTH, TE};

/// Why a header block is malformed (§8.1.1): the stream is reset with PROTOCOL_ERROR.
pub(crate) type Malformed = &'static str;

/// Fields that only mean something to one HTTP/1.1 connection (§8.2.2): refused when
/// received, dropped when sent.
pub(crate) const CONNECTION_SPECIFIC: [&str; 5] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// One header block's regular fields, checked as they come.
#[derive(Default)]
pub(crate) struct Fields {
    pub headers: HeaderMap,
    /// The declared Content-Length (not in trailers): the body must match it.
    pub content_length: Option<u64>,
    /// A regular field came: pseudo-headers may not follow.
    regular: bool,
    /// A trailer block: no pseudo-headers at all.
    trailers: bool,
    error: Option<Malformed>,
}

impl Fields {
    /// The fields of a trailer block.
    pub(crate) fn trailers() -> Fields {
        Fields {
            trailers: true,
            ..Fields::default()
        }
    }

    /// Takes one decoded field; a pseudo-header goes to `pseudo` (the role's own). The
    /// first error sticks and later fields are ignored.
    pub(crate) fn take(
        &mut self,
        name: &[u8],
        value: &[u8],
        pseudo: impl FnOnce(&[u8], &[u8]) -> Result<(), Malformed>,
    ) {
        if self.error.is_some() {
            return;
        }
        let taken = match name.strip_prefix(b":") {
            Some(_) if self.regular || self.trailers => {
                Err("a pseudo-header after a regular field, or in trailers")
            }
            Some(p) => pseudo(p, value),
            None => self.regular(name, value),
        };
        if let Err(e) = taken {
            self.error = Some(e);
        }
    }

    fn regular(&mut self, name: &[u8], value: &[u8]) -> Result<(), Malformed> {
        self.regular = true;
        if name.is_empty() || name.iter().any(u8::is_ascii_uppercase) {
            return Err("a field name that is empty or not lowercase");
        }
        let name = HeaderName::from_bytes(name).map_err(|_| "an invalid field name")?;
        if CONNECTION_SPECIFIC.contains(&name.as_str()) {
            return Err("a connection-specific field");
        }
        let space = |b: &u8| matches!(b, b' ' | b'\t');
        if value.first().is_some_and(space) || value.last().is_some_and(space) {
            return Err("a field value with leading or trailing whitespace");
        }
        let value = HeaderValue::from_bytes(value).map_err(|_| "an invalid field value")?;
        if name == TE && value != "trailers" {
            return Err("TE other than \"trailers\"");
        }
        if name == CONTENT_LENGTH && !self.trailers {
            let n = parse_length(value.as_bytes()).ok_or("an invalid content-length")?;
            if self.content_length.is_some_and(|m| m != n) {
                return Err("conflicting content-length values");
            }
            self.content_length = Some(n);
        }
        self.headers.append(name, value);
        Ok(())
    }

    /// The first rule broken, if any.
    pub(crate) fn error(&self) -> Option<Malformed> {
        self.error
    }

    /// The fields of a well-formed trailer block.
    pub(crate) fn finish_trailers(self) -> Result<HeaderMap, Malformed> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.headers),
        }
    }
}

fn parse_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}
