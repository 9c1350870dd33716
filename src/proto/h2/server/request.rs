//! A request's header block, field by field, into an `http` request head (RFC 9113 §8.3.1):
//! the request pseudo-headers and the target they make; the rules every block follows are
//! `h2::fields`.

use crate::proto::h2::fields::{Fields, Malformed};
use crate::proto::h2::protocol::Protocol;
use bytes::Bytes;
use http::header::HeaderMap;
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
    /// An extended CONNECT's `:protocol` (RFC 8441): the stream carries that protocol.
    pub protocol: Option<Protocol>,
}

/// Collects one header block's fields (the HPACK decoder's callback) and checks them.
#[derive(Default)]
pub(crate) struct HeadBuilder {
    fields: Fields,
    pseudo: Pseudo,
}

/// A request's pseudo-headers (§8.3.1), each at most once.
#[derive(Default)]
struct Pseudo {
    method: Option<Method>,
    scheme: Option<Scheme>,
    authority: Option<Authority>,
    path: Option<PathAndQuery>,
    protocol: Option<Protocol>,
    /// Whether `:protocol` is taken: only once we advertised SETTINGS_ENABLE_CONNECT_PROTOCOL
    /// (otherwise it is an unknown pseudo-header, RFC 8441 §3).
    extended_connect: bool,
}

impl HeadBuilder {
    /// A builder for a request's header block; `extended_connect`: whether `:protocol`
    /// is accepted.
    pub(crate) fn request(extended_connect: bool) -> HeadBuilder {
        HeadBuilder {
            pseudo: Pseudo {
                extended_connect,
                ..Pseudo::default()
            },
            ..HeadBuilder::default()
        }
    }

    /// A builder for a trailer block.
    pub(crate) fn trailers() -> HeadBuilder {
        HeadBuilder {
            fields: Fields::trailers(),
            ..HeadBuilder::default()
        }
    }

    /// Takes one decoded field (the first error sticks; later fields are ignored).
    pub(crate) fn field(&mut self, name: &[u8], value: &[u8]) {
        let pseudo = &mut self.pseudo;
        self.fields.take(name, value, |p, v| pseudo.take(p, v));
    }

    /// The request head, if the block was well-formed.
    pub(crate) fn finish(self) -> Result<RequestHead, Malformed> {
        if let Some(e) = self.fields.error() {
            return Err(e);
        }
        let method = self.pseudo.method.ok_or("no :method")?;
        let mut parts = http::uri::Parts::default();
        let protocol = self.pseudo.protocol;
        if protocol.is_some() && method != Method::CONNECT {
            return Err(":protocol on a method other than CONNECT");
        }
        if method == Method::CONNECT && protocol.is_none() {
            // §8.5: only :authority.
            if self.pseudo.scheme.is_some() || self.pseudo.path.is_some() {
                return Err("CONNECT with :scheme or :path");
            }
            parts.authority = Some(self.pseudo.authority.ok_or("CONNECT without :authority")?);
        } else {
            // Extended CONNECT (RFC 8441 §4) names its target as any request does.
            let scheme = self.pseudo.scheme.ok_or("no :scheme")?;
            let path = self.pseudo.path.ok_or("no :path")?;
            if path.as_str() == "*" && method != Method::OPTIONS {
                return Err(":path \"*\" on a method other than OPTIONS");
            }
            // §8.3.1: without :authority, a Host field names the target.
            let authority = self.pseudo.authority.or_else(|| {
                let host = self.fields.headers.get(http::header::HOST)?;
                Authority::try_from(host.as_bytes()).ok()
            });
            if let Some(a) = authority {
                parts.scheme = Some(scheme);
                parts.authority = Some(a);
            } else if protocol.is_some() {
                return Err("extended CONNECT without :authority");
            }
            parts.path_and_query = Some(path);
        }
        let uri = Uri::from_parts(parts).map_err(|_| "an invalid request target")?;
        Ok(RequestHead {
            method,
            uri,
            headers: self.fields.headers,
            content_length: self.fields.content_length,
            protocol,
        })
    }

    /// The trailer fields, if the block was well-formed.
    pub(crate) fn finish_trailers(self) -> Result<HeaderMap, Malformed> {
        self.fields.finish_trailers()
    }
}

impl Pseudo {
    fn take(&mut self, name: &[u8], value: &[u8]) -> Result<(), Malformed> {
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
            b"protocol" if self.extended_connect && self.protocol.is_none() => {
                let p = Protocol::from_token(value).ok_or("an invalid :protocol")?;
                self.protocol = Some(p);
            }
            b"method" | b"scheme" | b"authority" | b"path" => return Err(TWICE),
            b"protocol" if self.extended_connect => return Err(TWICE),
            _ => return Err("an unknown or response pseudo-header"),
        }
        Ok(())
    }
}
