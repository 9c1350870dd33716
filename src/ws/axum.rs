//! `fibr::ws::WebSocketUpgrade`: axum's extractor of the same name, on fibr's WebSocket.

use super::handshake::WebSocketUpgradeRejection;
use super::upgrade::Upgrade;
use super::{DeflateConfig, Error, KeepAliveConfig, WebSocket};
use axum::extract::FromRequestParts;
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::HeaderValue;
use std::future::Future;

/// Extracts a WebSocket upgrade request; answer it with [`WebSocketUpgrade::on_upgrade`].
/// The methods are axum's (`axum::extract::ws::WebSocketUpgrade`), plus
/// [`deflate`](WebSocketUpgrade::deflate) and [`keepalive`](WebSocketUpgrade::keepalive).
pub struct WebSocketUpgrade {
    upgrade: Upgrade,
}

impl WebSocketUpgrade {
    /// Messages received and not yet taken, in bytes, past which reads pause.
    pub fn read_buffer_size(mut self, size: usize) -> Self {
        self.upgrade.config_mut().read_buffer_limit = size;
        self
    }

    /// Bytes queued for the peer past which `send` waits (axum's `write_buffer_size`
    /// and `max_write_buffer_size` both set this one bound).
    pub fn write_buffer_size(mut self, size: usize) -> Self {
        self.upgrade.config_mut().write_buffer_limit = size;
        self
    }

    /// See [`write_buffer_size`](Self::write_buffer_size).
    pub fn max_write_buffer_size(self, max: usize) -> Self {
        self.write_buffer_size(max)
    }

    /// The largest message accepted (default 64 MiB).
    pub fn max_message_size(mut self, max: usize) -> Self {
        self.upgrade.config_mut().max_message_size = max;
        self
    }

    /// The largest frame accepted (default 16 MiB).
    pub fn max_frame_size(mut self, max: usize) -> Self {
        self.upgrade.config_mut().max_frame_size = max;
        self
    }

    /// Negotiates permessage-deflate when the client offers it.
    pub fn deflate(mut self, config: DeflateConfig) -> Self {
        self.upgrade.config_mut().deflate = Some(config);
        self
    }

    /// Pings the client when it has been silent for `config.interval`, and closes the
    /// connection if it does not answer within `config.timeout`.
    pub fn keepalive(mut self, config: KeepAliveConfig) -> Self {
        self.upgrade.config_mut().keepalive = Some(config);
        self
    }

    /// The subprotocols the server speaks (the first the client offers is chosen).
    pub fn protocols<I>(mut self, protocols: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<std::borrow::Cow<'static, str>>,
    {
        self.upgrade = self.upgrade.protocols(protocols);
        self
    }

    /// The subprotocol chosen, if any.
    pub fn selected_protocol(&self) -> Option<&HeaderValue> {
        self.upgrade.selected_protocol()
    }

    /// Called if the connection fails before it becomes a WebSocket.
    pub fn on_failed_upgrade(mut self, f: impl FnOnce(Error) + Send + 'static) -> Self {
        self.upgrade = self.upgrade.on_failed_upgrade(f);
        self
    }

    /// The `101` response (`200` over HTTP/2); once it is written, `callback` runs with
    /// the socket (see [`Upgrade::on_upgrade`]).
    pub fn on_upgrade<F, Fut>(self, callback: F) -> Response
    where
        F: FnOnce(WebSocket) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.upgrade.on_upgrade(callback).map(axum::body::Body::new)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for WebSocketUpgrade {
    type Rejection = WebSocketUpgradeRejection;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let upgrade = Upgrade::from_request(
            &parts.method,
            parts.version,
            &parts.headers,
            &mut parts.extensions,
        )?;
        Ok(WebSocketUpgrade { upgrade })
    }
}

impl IntoResponse for WebSocketUpgradeRejection {
    fn into_response(self) -> Response {
        WebSocketUpgradeRejection::into_response::<axum::body::Body>(self)
    }
}
