//! The server's upgrade, for any tower service: check the request, answer `101` (HTTP/1.1)
//! or `200` (the extended CONNECT of HTTP/2, RFC 8441, or HTTP/3, RFC 9220), and get the
//! socket once the answer is written.
//!
//! ```no_run
//! use http::{Request, Response};
//! use fibr::ws::UpgradeBody;
//! # async fn handle(mut req: Request<fibr::body::Incoming>) -> Response<UpgradeBody> {
//! match fibr::ws::upgrade(&mut req) {
//!     Ok(up) => up.on_upgrade(|mut socket| async move {
//!         while let Some(Ok(msg)) = socket.recv().await {
//!             let _ = socket.send(msg).await;
//!         }
//!     }),
//!     Err(rejection) => rejection.into_response().map(|_: String| UpgradeBody::default()),
//! }
//! # }
//! ```

use super::handshake::{self, WebSocketUpgradeRejection};
use super::oneshot::{self, Receiver};
use super::socket::{self, WebSocket};
use super::{Config, Error};
use crate::http::pipe::{StreamIo, UpgradeBody};
use crate::http::switch::{OnSwitch, Switched, Tunnel};
use crate::http::{Incoming, Protocol};
use crate::proto::ws::deflate::{negotiate_server, PerMessageDeflate};
use crate::proto::ws::{Machine, Role};
use http::{Extensions, HeaderMap, HeaderValue, Method, Request, Response, Version};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// A request that can become a WebSocket: answer it with [`Upgrade::on_upgrade`] (or
/// [`Upgrade::into_response`]).
pub struct Upgrade {
    via: Via,
    /// What the client offered, for the choices made when answering.
    protocols: Vec<String>,
    extensions: Vec<String>,
    protocol: Option<HeaderValue>,
    config: Config,
    on_failed: Option<Box<dyn FnOnce(Error) + Send>>,
}

/// What the socket will run over.
enum Via {
    /// HTTP/1.1: the connection, switched once the `101` is written.
    Switch { key: HeaderValue, switch: OnSwitch },
    /// HTTP/2: the stream, its request body the input.
    Stream(Incoming),
}

/// Checks that `req` asks for a WebSocket (RFC 6455 §4.2.1, or over HTTP/2 RFC 8441 §5's
/// extended CONNECT) and came through a fibr server that can switch its connection (or
/// hand over its stream).
pub fn upgrade<B>(req: &mut Request<B>) -> Result<Upgrade, WebSocketUpgradeRejection> {
    // Out and back, to lend the head and the extensions at once (an empty map is free).
    let mut extensions = std::mem::take(req.extensions_mut());
    let up = Upgrade::from_request(req.method(), req.version(), req.headers(), &mut extensions);
    *req.extensions_mut() = extensions;
    up
}

impl Upgrade {
    /// Takes the request's [`OnSwitch`] or [`Tunnel`] out of its extensions.
    pub(crate) fn from_request(
        method: &Method,
        version: Version,
        headers: &HeaderMap,
        extensions: &mut Extensions,
    ) -> Result<Upgrade, WebSocketUpgradeRejection> {
        use WebSocketUpgradeRejection as R;
        let extended = matches!(version, Version::HTTP_2 | Version::HTTP_3);
        let via = if method == Method::CONNECT && extended {
            handshake::check_extended_connect(headers, extensions.get::<Protocol>())?;
            let tunnel = extensions.remove::<Tunnel>();
            Via::Stream(
                tunnel
                    .and_then(|t| t.take())
                    .ok_or(R::ConnectionNotUpgradable)?,
            )
        } else {
            let key = handshake::check_request(method, version, headers)?;
            let switch = extensions
                .remove::<OnSwitch>()
                .ok_or(R::ConnectionNotUpgradable)?;
            Via::Switch { key, switch }
        };
        Ok(Upgrade {
            via,
            protocols: handshake::offered_protocols(headers)
                .map(str::to_owned)
                .collect(),
            extensions: handshake::extension_lines(headers)
                .map(str::to_owned)
                .collect(),
            protocol: None,
            config: Config::default(),
            on_failed: None,
        })
    }

    /// The connection's limits and options.
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// For the axum extractor's setters.
    #[cfg(feature = "axum")]
    pub(crate) fn config_mut(&mut self) -> &mut Config {
        &mut self.config
    }

    /// The subprotocols the server speaks: the first the client offers (in its order)
    /// that is among them is chosen.
    pub fn protocols<I>(mut self, protocols: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<std::borrow::Cow<'static, str>>,
    {
        let ours: Vec<std::borrow::Cow<'static, str>> =
            protocols.into_iter().map(Into::into).collect();
        self.protocol = self
            .protocols
            .iter()
            .find(|p| ours.iter().any(|o| o == p.as_str()))
            .and_then(|p| HeaderValue::from_str(p).ok());
        self
    }

    /// The subprotocol chosen, if any.
    pub fn selected_protocol(&self) -> Option<&HeaderValue> {
        self.protocol.as_ref()
    }

    /// Called if the connection fails before it becomes a WebSocket.
    pub fn on_failed_upgrade(mut self, f: impl FnOnce(Error) + Send + 'static) -> Self {
        self.on_failed = Some(Box::new(f));
        self
    }

    /// The answer to return (`101`, or `200` over HTTP/2); once it is written, `callback`
    /// runs with the socket: polled by the connection itself over HTTP/1.1, on a task of
    /// its own over HTTP/2 (where the connection carries other streams).
    pub fn on_upgrade<F, Fut>(self, callback: F) -> Response<UpgradeBody>
    where
        F: FnOnce(WebSocket) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let Upgrade {
            via,
            protocol,
            config,
            on_failed,
            extensions,
            ..
        } = self;
        let deflate = config
            .deflate
            .as_ref()
            .and_then(|cfg| negotiate_server(extensions.iter().map(String::as_str), cfg));
        let response_ext = deflate.as_ref().map(|(_, header)| header.clone());
        let answer =
            |key, body| handshake::accepting_response(key, protocol.as_ref(), response_ext, body);
        let claim = Claim {
            config: config.clone(),
            protocol: protocol.clone(),
            deflate: deflate.map(|(params, _)| params),
            on_failed,
        };
        match via {
            Via::Switch { key, switch } => {
                switch.claim(Box::new(move |sw: Switched| claim.start(sw, callback)));
                answer(Some(&key), UpgradeBody::default())
            }
            Via::Stream(input) => {
                let output = StreamIo::new(config.write_buffer_limit);
                let out = output.clone();
                let start = move || claim.start_stream(out, input, callback);
                answer(None, UpgradeBody::stream(output, Some(Box::new(start))))
            }
        }
    }

    /// The `101` to return, and the socket it leads to (resolving once the `101` is
    /// written): for services that run the socket on a task of their own.
    pub fn into_response(self) -> (Response<UpgradeBody>, Upgrading) {
        let (tx, rx) = oneshot::channel();
        let res = self.on_upgrade(move |ws| {
            tx.send(Ok(ws));
            std::future::ready(())
        });
        (res, Upgrading(rx))
    }
}

/// What the claim needs to put the socket on the connection.
struct Claim {
    config: Config,
    protocol: Option<HeaderValue>,
    deflate: Option<crate::proto::ws::deflate::DeflateParams>,
    on_failed: Option<Box<dyn FnOnce(Error) + Send>>,
}

impl Claim {
    /// The socket's machine; from here the upgrade has not failed.
    fn machine(&mut self) -> Machine {
        self.on_failed = None;
        let level = self.config.deflate.as_ref().map_or(0, |d| d.level);
        let deflate = self
            .deflate
            .as_ref()
            .map(|p| PerMessageDeflate::new(Role::Server, p, level));
        Machine::new(Role::Server, self.config.limits(), deflate, 0)
    }

    fn start<F, Fut>(mut self, sw: Switched, callback: F)
    where
        F: FnOnce(WebSocket) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let machine = self.machine();
        socket::start(sw, &self.config, machine, self.protocol.take(), callback);
    }

    fn start_stream<F, Fut>(mut self, output: Arc<StreamIo>, input: Incoming, callback: F)
    where
        F: FnOnce(WebSocket) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let machine = self.machine();
        let protocol = self.protocol.take();
        let socket = socket::stream_socket(output, input, &self.config, machine, protocol);
        crate::engine::runtime::spawn(callback(socket));
    }
}

impl Drop for Claim {
    /// The connection ended before the `101` was written (or the answer was not a
    /// `101`).
    fn drop(&mut self) {
        if let Some(f) = self.on_failed.take() {
            f(Error::closed());
        }
    }
}

/// The socket an [`Upgrade::into_response`] leads to: resolves once the `101` is
/// written, or fails if the connection ends first.
pub struct Upgrading(Receiver<WebSocket>);

impl Future for Upgrading {
    type Output = Result<WebSocket, Error>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}
