//! WebSocket over HTTP/2 or HTTP/3 (RFC 8441's and RFC 9220's extended CONNECT,
//! `:protocol: websocket`): the stream's request goes to an upstream in HTTP/1.1's shape
//! (`open.rs` sends it as an `Upgrade`, or again as an extended CONNECT to an HTTP/2 or
//! HTTP/3 upstream), and once the upstream accepted it the client gets `200` and its
//! stream is joined to the upstream's end (`splice.rs`): the stream's DATA in (the
//! request body) and out (the response body, an `UpgradeBody` the server sends as the
//! stream's window allows).

use super::idle::Idle;
use super::open::{open, Accepted};
use super::splice::splice;
use super::{GatewayBody, Shared};
use crate::client::BoxError;
use crate::http::pipe::{StreamIo, StreamPipe, UpgradeBody};
use base64::Engine as _;
use bytes::{Buf, Bytes};
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::BodyExt;
use std::hash::{BuildHasher, Hasher};

/// Whether `req` is an extended CONNECT for a WebSocket.
pub(super) fn is_websocket<B>(req: &Request<B>) -> bool {
    req.method() == Method::CONNECT
        && req
            .extensions()
            .get::<crate::http::Protocol>()
            .is_some_and(|p| p.as_str().eq_ignore_ascii_case("websocket"))
}

/// Opens the WebSocket upstream and joins it to the client's stream.
pub(super) async fn forward<B>(shared: &Shared, req: Request<B>) -> Response<GatewayBody>
where
    B: Body + Send + 'static,
    B::Error: Into<BoxError>,
{
    // With feature `tunnel` the server moved the stream's input into a `Tunnel`.
    #[cfg(feature = "tunnel")]
    let (input, req) = {
        let mut req = req;
        let tunnel = req.extensions_mut().remove::<crate::http::switch::Tunnel>();
        (tunnel.and_then(|t| t.take()), req)
    };
    let (mut parts, body) = req.into_parts();
    #[cfg(feature = "tunnel")]
    let input = match input {
        Some(input) => boxed(input),
        None => boxed(body),
    };
    #[cfg(not(feature = "tunnel"))]
    let input = boxed(body);
    parts.method = Method::GET;
    let mut head = shared.head_of(parts);
    let headers = &mut head.headers;
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(header::SEC_WEBSOCKET_KEY, nonce());
    headers
        .entry(header::SEC_WEBSOCKET_VERSION)
        .or_insert(HeaderValue::from_static("13"));
    let Accepted {
        up,
        mut res,
        io,
        first,
        ..
    } = match open(shared, &mut head).await {
        Ok(accepted) => accepted,
        Err(answer) => return answer,
    };
    *res.status_mut() = StatusCode::OK;
    for name in [
        header::CONNECTION,
        header::UPGRADE,
        header::SEC_WEBSOCKET_ACCEPT,
    ] {
        res.headers_mut().remove(name);
    }
    let buffer = shared.config.tunnel_buffer.max(1024);
    let idle = shared.config.tunnel_idle_timeout.map(Idle::new);
    let output = StreamIo::new(buffer);
    let client = StreamPipe::new(input, output.clone());
    drop(crate::engine::runtime::spawn(async move {
        let _in_flight = up;
        splice(Box::new(client), io, first, buffer, idle).await;
    }));
    let body = UpgradeBody::stream(output, None).map_err(BoxError::from);
    *res.body_mut() = GatewayBody::boxed(body);
    res
}

/// The client's stream input, whatever body carries it, as DATA of `Bytes`.
fn boxed<B>(body: B) -> http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>
where
    B: Body + Send + 'static,
    B::Error: Into<BoxError>,
{
    body.map_frame(|f| f.map_data(|mut d| d.copy_to_bytes(d.remaining())))
        .map_err(Into::into)
        .boxed_unsync()
}

/// A `Sec-WebSocket-Key`: 16 bytes no one can guess in advance, in base64 (RFC 6455
/// §4.1; it only has to keep caches from replaying an old handshake).
fn nonce() -> HeaderValue {
    let state = std::collections::hash_map::RandomState::new();
    let mut bytes = [0u8; 16];
    for (i, half) in bytes.chunks_mut(8).enumerate() {
        let mut h = state.build_hasher();
        h.write_usize(i);
        h.write_u128(
            std::time::UNIX_EPOCH
                .elapsed()
                .unwrap_or_default()
                .as_nanos(),
        );
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    let key = base64::engine::general_purpose::STANDARD.encode(bytes);
    HeaderValue::from_str(&key).expect("base64 is a valid field value")
}
