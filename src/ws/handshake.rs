//! The opening handshake (RFC 6455 §4): what a server checks in the request and answers,
//! and what a client sends and checks in the answer.

use base64::Engine as _;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Version};
use sha1::{Digest, Sha1};
use std::fmt;

/// RFC 6455 §1.3: appended to the key before hashing.
const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key`.
pub(crate) fn accept_key(key: &[u8]) -> HeaderValue {
    let mut sha = Sha1::new();
    sha.update(key);
    sha.update(GUID);
    let encoded = base64::engine::general_purpose::STANDARD.encode(sha.finalize());
    HeaderValue::try_from(encoded).expect("base64 is a valid header value")
}

/// A fresh `Sec-WebSocket-Key`: 16 random bytes, base64.
pub(crate) fn new_key() -> String {
    let mut raw = [0u8; 16];
    super::random_bytes(&mut raw);
    base64::engine::general_purpose::STANDARD.encode(raw)
}

/// Why a request cannot be upgraded; answered with the status axum's
/// `WebSocketUpgradeRejection` gives the same case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WebSocketUpgradeRejection {
    /// Not a `GET` (405).
    MethodNotGet,
    /// `Connection` lacks `upgrade` (400).
    InvalidConnectionHeader,
    /// `Upgrade` is not `websocket` (400).
    InvalidUpgradeHeader,
    /// `Sec-WebSocket-Version` is not 13 (400).
    InvalidWebSocketVersionHeader,
    /// No `Sec-WebSocket-Key` (400).
    WebSocketKeyHeaderMissing,
    /// The request did not come through a fibr server that can switch it (426).
    ConnectionNotUpgradable,
    /// An HTTP/2 extended CONNECT whose `:protocol` is not `websocket` (400).
    InvalidProtocolPseudoheader,
}

impl WebSocketUpgradeRejection {
    /// The status the rejection is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::MethodNotGet => StatusCode::METHOD_NOT_ALLOWED,
            Self::ConnectionNotUpgradable => StatusCode::UPGRADE_REQUIRED,
            _ => StatusCode::BAD_REQUEST,
        }
    }

    /// The response to send.
    pub fn into_response<B: From<&'static str>>(self) -> http::Response<B> {
        let mut res = http::Response::new(B::from(self.text()));
        *res.status_mut() = self.status();
        if self == Self::InvalidWebSocketVersionHeader {
            // RFC 6455 §4.4: say which version is spoken.
            res.headers_mut().insert(
                header::SEC_WEBSOCKET_VERSION,
                HeaderValue::from_static("13"),
            );
        }
        res
    }

    fn text(&self) -> &'static str {
        match self {
            Self::MethodNotGet => "Request method must be `GET`",
            Self::InvalidConnectionHeader => "Connection header did not include 'upgrade'",
            Self::InvalidUpgradeHeader => "`Upgrade` header did not include 'websocket'",
            Self::InvalidWebSocketVersionHeader => {
                "`Sec-WebSocket-Version` header did not include '13'"
            }
            Self::WebSocketKeyHeaderMissing => "`Sec-WebSocket-Key` header missing",
            Self::ConnectionNotUpgradable => {
                "WebSocket request couldn't be upgraded since no upgrade state was present"
            }
            Self::InvalidProtocolPseudoheader => {
                "`:protocol` pseudo-header did not include 'websocket'"
            }
        }
    }
}

impl fmt::Display for WebSocketUpgradeRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

impl std::error::Error for WebSocketUpgradeRejection {}

/// RFC 6455 §4.2.1's checks of an upgrade request; the key, if it passes.
pub(crate) fn check_request(
    method: &Method,
    version: Version,
    headers: &HeaderMap,
) -> Result<HeaderValue, WebSocketUpgradeRejection> {
    use WebSocketUpgradeRejection as R;
    if method != Method::GET {
        return Err(R::MethodNotGet);
    }
    if version < Version::HTTP_11 {
        return Err(R::InvalidConnectionHeader);
    }
    if !has_token(headers, &header::CONNECTION, "upgrade") {
        return Err(R::InvalidConnectionHeader);
    }
    if !has_token(headers, &header::UPGRADE, "websocket") {
        return Err(R::InvalidUpgradeHeader);
    }
    check_version(headers)?;
    headers
        .get(header::SEC_WEBSOCKET_KEY)
        .cloned()
        .ok_or(R::WebSocketKeyHeaderMissing)
}

/// RFC 8441 §5's checks of an HTTP/2 extended CONNECT (method and version checked by
/// the caller): `:protocol` `websocket` and version 13; there is no key.
pub(crate) fn check_extended_connect(
    headers: &HeaderMap,
    protocol: Option<&crate::http::Protocol>,
) -> Result<(), WebSocketUpgradeRejection> {
    if !protocol.is_some_and(|p| p.as_str().eq_ignore_ascii_case("websocket")) {
        return Err(WebSocketUpgradeRejection::InvalidProtocolPseudoheader);
    }
    check_version(headers)
}

fn check_version(headers: &HeaderMap) -> Result<(), WebSocketUpgradeRejection> {
    if headers
        .get(header::SEC_WEBSOCKET_VERSION)
        .is_none_or(|v| v.as_bytes() != b"13")
    {
        return Err(WebSocketUpgradeRejection::InvalidWebSocketVersionHeader);
    }
    Ok(())
}

/// Whether a comma-separated header holds `token` (case-insensitive), in any of its lines.
pub(crate) fn has_token(headers: &HeaderMap, name: &HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// The subprotocols a request offers, in its order.
pub(crate) fn offered_protocols(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|p| !p.is_empty())
}

/// The values of every `Sec-WebSocket-Extensions` line.
pub(crate) fn extension_lines(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::SEC_WEBSOCKET_EXTENSIONS)
        .iter()
        .filter_map(|v| v.to_str().ok())
}

/// The answer a server gives: with the request's key (HTTP/1.1) a `101`; without
/// (HTTP/2's extended CONNECT, RFC 8441 §5) a `200`, the stream being the tunnel.
pub(crate) fn accepting_response<B>(
    key: Option<&HeaderValue>,
    protocol: Option<&HeaderValue>,
    extensions: Option<String>,
    body: B,
) -> http::Response<B> {
    let mut res = http::Response::new(body);
    let h = res.headers_mut();
    if let Some(key) = key {
        h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        h.insert(header::SEC_WEBSOCKET_ACCEPT, accept_key(key.as_bytes()));
        *res.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    }
    let h = res.headers_mut();
    if let Some(p) = protocol {
        h.insert(header::SEC_WEBSOCKET_PROTOCOL, p.clone());
    }
    if let Some(v) = extensions.and_then(|e| HeaderValue::try_from(e).ok()) {
        h.insert(header::SEC_WEBSOCKET_EXTENSIONS, v);
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upgrade_headers() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, Upgrade"),
        );
        h.insert(header::UPGRADE, HeaderValue::from_static("WebSocket"));
        h.insert(
            header::SEC_WEBSOCKET_VERSION,
            HeaderValue::from_static("13"),
        );
        h.insert(
            header::SEC_WEBSOCKET_KEY,
            HeaderValue::from_static("dGhlIHNhbXBsZSBub25jZQ=="),
        );
        h
    }

    #[test]
    fn the_rfc_sample_key_gets_its_accept_value() {
        assert_eq!(
            accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn a_request_is_checked_as_axum_checks_it() {
        use WebSocketUpgradeRejection as R;
        let ok = upgrade_headers();
        assert!(check_request(&Method::GET, Version::HTTP_11, &ok).is_ok());
        assert_eq!(
            check_request(&Method::POST, Version::HTTP_11, &ok),
            Err(R::MethodNotGet)
        );
        let cases: [(HeaderName, Option<&'static str>, R); 4] = [
            (
                header::CONNECTION,
                Some("keep-alive"),
                R::InvalidConnectionHeader,
            ),
            (header::UPGRADE, Some("h2c"), R::InvalidUpgradeHeader),
            (
                header::SEC_WEBSOCKET_VERSION,
                Some("8"),
                R::InvalidWebSocketVersionHeader,
            ),
            (
                header::SEC_WEBSOCKET_KEY,
                None,
                R::WebSocketKeyHeaderMissing,
            ),
        ];
        for (name, value, want) in cases {
            let mut h = upgrade_headers();
            match value {
                Some(v) => h.insert(name, HeaderValue::from_static(v)),
                None => h.remove(name),
            };
            assert_eq!(check_request(&Method::GET, Version::HTTP_11, &h), Err(want));
            let res: http::Response<String> = want.into_response();
            assert_eq!(res.status(), want.status());
        }
    }

    #[test]
    fn an_extended_connect_is_checked_and_answered_200() {
        use WebSocketUpgradeRejection as R;
        let ws = crate::http::Protocol::from_token(b"websocket");
        let other = crate::http::Protocol::from_token(b"webtransport");
        let mut h = HeaderMap::new();
        h.insert(
            header::SEC_WEBSOCKET_VERSION,
            HeaderValue::from_static("13"),
        );
        assert_eq!(check_extended_connect(&h, ws.as_ref()), Ok(()));
        assert_eq!(
            check_extended_connect(&h, other.as_ref()),
            Err(R::InvalidProtocolPseudoheader)
        );
        assert_eq!(
            check_extended_connect(&h, None),
            Err(R::InvalidProtocolPseudoheader)
        );
        h.insert(header::SEC_WEBSOCKET_VERSION, HeaderValue::from_static("8"));
        assert_eq!(
            check_extended_connect(&h, ws.as_ref()),
            Err(R::InvalidWebSocketVersionHeader)
        );
        let chat = HeaderValue::from_static("chat");
        let res = accepting_response(None, Some(&chat), None, ());
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.headers().len(), 1, "{:?}", res.headers());
        assert_eq!(res.headers()[header::SEC_WEBSOCKET_PROTOCOL], "chat");
    }

    #[test]
    fn protocols_are_read_from_every_line_in_order() {
        let mut h = HeaderMap::new();
        h.append(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static("a, b"),
        );
        h.append(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static("c"),
        );
        assert_eq!(offered_protocols(&h).collect::<Vec<_>>(), ["a", "b", "c"]);
    }
}
