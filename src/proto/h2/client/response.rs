//! A response's header block, field by field, into an `http` response head (RFC 9113
//! §8.3.2): only `:status`; the rules every block follows are `h2::fields`.

use crate::proto::h2::fields::{Fields, Malformed};
use http::header::HeaderMap;
use http::StatusCode;

/// A response head decoded from one HEADERS block.
#[derive(Debug)]
pub(crate) struct ResponseHead {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// The Content-Length the server declared: the DATA must match it (§8.1.1).
    pub content_length: Option<u64>,
}

/// Collects one header block's fields (the HPACK decoder's callback) and checks them.
#[derive(Default)]
pub(crate) struct HeadBuilder {
    fields: Fields,
    status: Option<StatusCode>,
}

impl HeadBuilder {
    /// A builder for a trailer block (no pseudo-headers at all).
    pub(crate) fn trailers() -> HeadBuilder {
        HeadBuilder {
            fields: Fields::trailers(),
            status: None,
        }
    }

    /// Takes one decoded field (the first error sticks; later fields are ignored).
    pub(crate) fn field(&mut self, name: &[u8], value: &[u8]) {
        let status = &mut self.status;
        self.fields.take(name, value, |pseudo, value| {
            if pseudo != b"status" {
                return Err("a pseudo-header other than :status in a response");
            }
            if status.is_some() {
                return Err(":status twice");
            }
            let code = (value.len() == 3)
                .then(|| StatusCode::from_bytes(value).ok())
                .flatten()
                .ok_or("a :status that is not three digits")?;
            *status = Some(code);
            Ok(())
        });
    }

    /// The response head, once the block is complete.
    pub(crate) fn finish(self) -> Result<ResponseHead, Malformed> {
        if let Some(e) = self.fields.error() {
            return Err(e);
        }
        let status = self.status.ok_or("a response without :status")?;
        Ok(ResponseHead {
            status,
            headers: self.fields.headers,
            content_length: self.fields.content_length,
        })
    }

    /// The trailers, once the block is complete.
    pub(crate) fn finish_trailers(self) -> Result<HeaderMap, Malformed> {
        self.fields.finish_trailers()
    }
}
