//! HTTP/1.1 `Upgrade` (WebSocket) pass-through: the request goes to an upstream
//! (`open.rs`: an `Upgrade` over a connection of its own, or an extended CONNECT for a
//! WebSocket to an HTTP/2 or HTTP/3 upstream), and once the upstream accepted it, the
//! client's connection and the upstream's end become one byte tunnel (`splice.rs`). The
//! client's connection comes from hyper's `upgrade::on` (plaintext, hyper serving) or,
//! with feature `tunnel`, from the `OnSwitch` fibr's own HTTP/1.1 puts on the request
//! (TLS, or no hyper).

use super::idle::Idle;
use super::open::{open, Accepted};
use super::splice::{splice, End};
use super::{text_response, GatewayBody, Shared};
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode, Version};
use hyper::upgrade::OnUpgrade;

/// Whether `req` asks to switch protocols (`Connection: upgrade` and an `Upgrade`).
pub(super) fn is_upgrade<B>(req: &Request<B>) -> bool {
    req.version() == Version::HTTP_11
        && req.headers().contains_key(header::UPGRADE)
        && req
            .headers()
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
}

/// Passes the upgrade request to an upstream; its acceptance starts the tunnel.
pub(super) async fn forward<B>(shared: &Shared, mut req: Request<B>) -> Response<GatewayBody> {
    let Some(client_side) = ClientSide::of(&mut req) else {
        return text_response(
            StatusCode::NOT_IMPLEMENTED,
            "fibr gateway: this connection cannot switch protocols (fibr's HTTP/1.1 over TLS needs feature `tunnel`)",
        );
    };
    let protocol = req.headers().get(header::UPGRADE).cloned();
    let key = req.headers().get(header::SEC_WEBSOCKET_KEY).cloned();
    let (parts, _) = req.into_parts();
    let mut head = shared.head_of(parts);
    if let Some(p) = &protocol {
        head.headers.insert(header::UPGRADE, p.clone());
    }
    let Accepted {
        up,
        mut res,
        io,
        first,
        extended,
    } = match open(shared, &mut head).await {
        Ok(accepted) => accepted,
        Err(mut answer) => {
            // An HTTP/2 or HTTP/3 upstream's refusal, to an HTTP/1.1 client (hyper
            // refuses to write another version).
            *answer.version_mut() = Version::HTTP_11;
            return answer;
        }
    };
    if extended {
        // An extended CONNECT's `2xx` upstream: the client's handshake wants its `101`.
        let Some(accept) = key.as_ref().and_then(accept_key) else {
            return text_response(
                StatusCode::BAD_REQUEST,
                "fibr gateway: a WebSocket upgrade without a Sec-WebSocket-Key",
            );
        };
        *res.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        let headers = res.headers_mut();
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    *res.version_mut() = Version::HTTP_11;
    let buffer = shared.config.tunnel_buffer.max(1024);
    let idle = shared.config.tunnel_idle_timeout.map(Idle::new);
    let join = move |client: Box<dyn End>| async move {
        let _in_flight = up;
        splice(client, io, first, buffer, idle).await;
    };
    match client_side {
        ClientSide::Hyper(on) => drop(crate::engine::runtime::spawn(async move {
            match on.await {
                Ok(client) => join(Box::new(client)).await,
                Err(e) => tracing::debug!(error = %e, "the client's upgrade failed"),
            }
        })),
        // Runs once the `101` is written (never, and `up` is let go, if it is not).
        #[cfg(feature = "tunnel")]
        ClientSide::Switch(switch) => switch.claim(Box::new(move |sw| {
            let client = crate::http::tunnel::Tunnel::switched(sw, buffer);
            drop(crate::engine::runtime::spawn(join(Box::new(client))));
        })),
    }
    res
}

/// `Sec-WebSocket-Accept` for the client's `key` (RFC 6455 §4.2.2: base64 of the SHA-1
/// of the key and the protocol's GUID), for an answer the upstream gave as an extended
/// CONNECT's `2xx` (RFC 8441 §5 and RFC 9220 use no key). SHA-1 is ring's: an upstream
/// reached that way speaks TLS, so feature `tls` is on.
#[cfg(feature = "tls")]
fn accept_key(key: &HeaderValue) -> Option<HeaderValue> {
    use base64::Engine as _;
    const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    let mut sha = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    sha.update(key.as_bytes());
    sha.update(GUID);
    let encoded = base64::engine::general_purpose::STANDARD.encode(sha.finish());
    HeaderValue::try_from(encoded).ok()
}

/// Without TLS no upstream answers as an extended CONNECT.
#[cfg(not(feature = "tls"))]
fn accept_key(_: &HeaderValue) -> Option<HeaderValue> {
    None
}

/// Where the client's connection comes from once the `101` is written.
enum ClientSide {
    Hyper(OnUpgrade),
    #[cfg(feature = "tunnel")]
    Switch(crate::http::switch::OnSwitch),
}

impl ClientSide {
    fn of<B>(req: &mut Request<B>) -> Option<ClientSide> {
        let ext = req.extensions_mut();
        if let Some(on) = ext.remove::<OnUpgrade>() {
            return Some(ClientSide::Hyper(on));
        }
        #[cfg(feature = "tunnel")]
        if let Some(switch) = ext.remove::<crate::http::switch::OnSwitch>() {
            return Some(ClientSide::Switch(switch));
        }
        None
    }
}

#[cfg(all(test, feature = "tls"))]
mod tests {
    use super::*;

    /// RFC 6455 §1.3's example.
    #[test]
    fn the_accept_key_is_rfc_6455s() {
        let key = HeaderValue::from_static("dGhlIHNhbXBsZSBub25jZQ==");
        assert_eq!(accept_key(&key).unwrap(), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }
}
