//! WebSocket over HTTP/2 or HTTP/3 (RFC 8441's and RFC 9220's extended CONNECT,
//! `:protocol: websocket`) to an upstream that speaks HTTP/1.1: the stream becomes an
//! HTTP/1.1 `Upgrade` request, and on the upstream's `101` the client gets `200`, its
//! stream's DATA going to the upstream's socket and the socket's bytes coming back as the
//! response body.

use super::tunnel::{open, Opened};
use super::upstreams::InFlight;
use super::{GatewayBody, Shared};
use crate::client::BoxError;
use crate::engine::net::TcpStream;
use base64::Engine as _;
use bytes::{Buf, Bytes};
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use std::hash::{BuildHasher, Hasher};
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

/// Whether `req` is an extended CONNECT for a WebSocket.
pub(super) fn is_websocket<B>(req: &Request<B>) -> bool {
    req.method() == Method::CONNECT
        && req
            .extensions()
            .get::<crate::http::Protocol>()
            .is_some_and(|p| p.as_str().eq_ignore_ascii_case("websocket"))
}

/// Opens the WebSocket upstream over HTTP/1.1 and joins it to the client's stream.
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
    parts.method = Method::GET;
    let mut head = shared.head_of(parts);
    let headers = &mut head.headers;
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(header::SEC_WEBSOCKET_KEY, nonce());
    headers
        .entry(header::SEC_WEBSOCKET_VERSION)
        .or_insert(HeaderValue::from_static("13"));
    let Opened {
        up,
        stream,
        mut res,
        rest,
    } = match open(shared, &mut head).await {
        Ok(o) => o,
        Err(refused) => return refused,
    };
    if res.status() != StatusCode::SWITCHING_PROTOCOLS {
        return res;
    }
    *res.status_mut() = StatusCode::OK;
    for name in [
        header::CONNECTION,
        header::UPGRADE,
        header::SEC_WEBSOCKET_ACCEPT,
    ] {
        res.headers_mut().remove(name);
    }
    let stream = Arc::new(stream);
    let to_upstream = stream.clone();
    #[cfg(feature = "tunnel")]
    let pumping = match input {
        Some(input) => crate::engine::runtime::spawn(pump(input, to_upstream)),
        None => crate::engine::runtime::spawn(pump(body, to_upstream)),
    };
    #[cfg(not(feature = "tunnel"))]
    let pumping = crate::engine::runtime::spawn(pump(body, to_upstream));
    drop(pumping);
    *res.body_mut() = GatewayBody::boxed(Output::new(stream, rest, shared, up));
    res
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

/// The client's stream into the upstream's socket; its end shuts the socket's writing.
async fn pump<B>(body: B, stream: Arc<TcpStream>)
where
    B: Body,
    B::Error: Into<BoxError>,
{
    let mut body = pin!(body);
    loop {
        // As `Bytes` before any await: the body's own data type need not be `Send`.
        let data = match body.frame().await {
            None => break,
            Some(Err(_)) => return,
            Some(Ok(frame)) => match frame.into_data() {
                Ok(mut d) => d.copy_to_bytes(d.remaining()),
                Err(_) => continue,
            },
        };
        if stream.write_all(&data).await.is_err() {
            return;
        }
    }
    let _ = stream.shutdown().await;
}

/// The upstream's socket as the client's response body (what came with the `101` first).
struct Output {
    stream: Arc<TcpStream>,
    first: Option<Bytes>,
    buf: Box<[u8]>,
    /// The upstream counts the tunnel in flight until it ends.
    _in_flight: InFlight,
}

impl Output {
    fn new(stream: Arc<TcpStream>, first: Vec<u8>, shared: &Shared, up: InFlight) -> Output {
        Output {
            stream,
            first: (!first.is_empty()).then(|| Bytes::from(first)),
            buf: vec![0; shared.config.tunnel_buffer.max(1024)].into_boxed_slice(),
            _in_flight: up,
        }
    }
}

impl Body for Output {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Some(first) = this.first.take() {
            return Poll::Ready(Some(Ok(Frame::data(first))));
        }
        Poll::Ready(match ready!(this.stream.poll_read(cx, &mut this.buf)) {
            Ok(0) => None,
            Ok(n) => Some(Ok(Frame::data(Bytes::copy_from_slice(&this.buf[..n])))),
            Err(e) => Some(Err(e.into())),
        })
    }
}
