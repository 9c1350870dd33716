//! A request's header block, field by field, into an `http` request head (RFC 9113 §8.2,
//! §8.3): pseudo-header rules, the fields HTTP/2 forbids, and Content-Length.

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_LENGTH, TE};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Method, Uri};

/// A request head decoded from one HEADERS block.
#[derive(Debug)]
pub(crate) struct RequestHead {
    pub method: Method,
    pub uri: Uri,
    pub headers: HeaderMap,
    /// The Content-Length the client declared, if any: the body must match it (§8.1.1).
    pub content_length: Option<u64>,
}

/// Why a header block is malformed (§8.1.1): the stream is reset with PROTOCOL_ERROR.
pub(crate) type Malformed = &'static str;

/// Collects one header block's fields (the HPACK decoder's callback) and checks them.
#[derive(Default)]
pub(crate) struct HeadBuilder {
    method: Option<Method>,
    scheme: Option<Scheme>,
    authority: Option<Authority>,
    path: Option<PathAndQuery>,
    headers: HeaderMap,
    /// A regular field came: pseudo-headers may not follow (§8.3).
    regular: bool,
    /// Building trailers: no pseudo-headers at all.
    trailers: bool,
    content_length: Option<u64>,
    error: Option<Malformed>,
}

impl HeadBuilder {
    /// A builder for a trailer block.
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
            return self.pseudo(pseudo, value);
        }
        self.regular = true;
        if name.is_empty() || name.iter().any(u8::is_ascii_uppercase) {
            return Err("a field name that is empty or not lowercase");
        }
        let name = HeaderName::from_bytes(name).map_err(|_| "an invalid field name")?;
        if is_connection_specific(&name) {
            return Err("a connection-specific field");
        }
        if value.first().is_some_and(is_space) || value.last().is_some_and(is_space) {
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

    fn pseudo(&mut self, name: &[u8], value: &[u8]) -> Result<(), Malformed> {
        const TWICE: Malformed = "a pseudo-header given twice";
        match name {
            b"method" if self.method.is_none() => {
                self.method = Some(Method::from_bytes(value).map_err(|_| "an invalid :method")?);
            }
            b"scheme" if self.scheme.is_none() => {
                self.scheme = Some(Scheme::try_from(value).map_err(|_| "an invalid :scheme")?);
            }
            b"authority" if self.authority.is_none() => {
                let a = Authority::from_maybe_shared(Bytes::copy_from_slice(value))
                    .map_err(|_| "an invalid :authority")?;
                self.authority = Some(a);
            }
            b"path" if self.path.is_none() => {
                if value.is_empty() {
                    return Err("an empty :path");
                }
                let p = PathAndQuery::from_maybe_shared(Bytes::copy_from_slice(value))
                    .map_err(|_| "an invalid :path")?;
                self.path = Some(p);
            }
            b"method" | b"scheme" | b"authority" | b"path" => return Err(TWICE),
            _ => return Err("an unknown or response pseudo-header"),
        }
        Ok(())
    }

    /// The request head, if the block was well-formed.
    pub(crate) fn finish(self) -> Result<RequestHead, Malformed> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let method = self.method.ok_or("no :method")?;
        let mut parts = http::uri::Parts::default();
        if method == Method::CONNECT {
            // §8.5: only :authority; extended CONNECT (:protocol) is not offered.
            if self.scheme.is_some() || self.path.is_some() {
                return Err("CONNECT with :scheme or :path");
            }
            parts.authority = Some(self.authority.ok_or("CONNECT without :authority")?);
        } else {
            let scheme = self.scheme.ok_or("no :scheme")?;
            let path = self.path.ok_or("no :path")?;
            if path.as_str() == "*" && method != Method::OPTIONS {
                return Err(":path \"*\" on a method other than OPTIONS");
            }
            // §8.3.1: without :authority, a Host field names the target.
            let authority = self.authority.or_else(|| {
                let host = self.headers.get(http::header::HOST)?;
                Authority::try_from(host.as_bytes()).ok()
            });
            if let Some(a) = authority {
                parts.scheme = Some(scheme);
                parts.authority = Some(a);
            }
            parts.path_and_query = Some(path);
        }
        let uri = Uri::from_parts(parts).map_err(|_| "an invalid request target")?;
        Ok(RequestHead {
            method,
            uri,
            headers: self.headers,
            content_length: self.content_length,
        })
    }

    /// The trailer fields, if the block was well-formed.
    pub(crate) fn finish_trailers(self) -> Result<HeaderMap, Malformed> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.headers),
        }
    }
}

fn is_space(b: &u8) -> bool {
    matches!(b, b' ' | b'\t')
}

/// Fields that only mean something to one HTTP/1.1 connection (§8.2.2).
fn is_connection_specific(name: &HeaderName) -> bool {
    use http::header::{CONNECTION, TRANSFER_ENCODING, UPGRADE};
    name == CONNECTION
        || name == TRANSFER_ENCODING
        || name == UPGRADE
        || name == "keep-alive"
        || name == "proxy-connection"
}

fn parse_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}
