//! The server's upgrade, for any tower service: check the request, answer `101`, and get
//! the socket once the answer is written.
//!
//! ```no_run
//! use http::{Request, Response};
//! # async fn handle(mut req: Request<fibr::body::Incoming>) -> Response<String> {
//! match fibr::ws::upgrade(&mut req) {
//!     Ok(up) => up.on_upgrade(|mut socket| async move {
//!         while let Some(Ok(msg)) = socket.recv().await {
//!             let _ = socket.send(msg).await;
//!         }
//!     }),
//!     Err(rejection) => rejection.into_response(),
//! }
//! # }
//! ```

use super::handshake::{self, WebSocketUpgradeRejection};
use super::oneshot::{self, Receiver};
use super::proto::deflate::{negotiate_server, PerMessageDeflate};
use super::proto::{Machine, Role};
use super::socket::{self, WebSocket};
use super::{Config, Error};
use crate::http::switch::{OnSwitch, Switched};
use http::{HeaderMap, HeaderValue, Request, Response};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A request that can become a WebSocket: answer it with [`Upgrade::on_upgrade`] (or
/// [`Upgrade::into_response`]).
pub struct Upgrade {
    key: HeaderValue,
    /// What the client offered, for the choices made when answering.
    protocols: Vec<String>,
    extensions: Vec<String>,
    protocol: Option<HeaderValue>,
    switch: OnSwitch,
    config: Config,
    on_failed: Option<Box<dyn FnOnce(Error) + Send>>,
}

/// Checks that `req` asks for a WebSocket (RFC 6455 §4.2.1) and came through a fibr
/// server that can switch its connection.
pub fn upgrade<B>(req: &mut Request<B>) -> Result<Upgrade, WebSocketUpgradeRejection> {
    let switch = req.extensions_mut().remove::<OnSwitch>();
    Upgrade::from_request(req.method(), req.version(), req.headers(), switch)
}

impl Upgrade {
    /// `switch`: the request's [`OnSwitch`], taken out of its extensions.
    pub(crate) fn from_request(
        method: &http::Method,
        version: http::Version,
        headers: &HeaderMap,
        switch: Option<OnSwitch>,
    ) -> Result<Upgrade, WebSocketUpgradeRejection> {
        let key = handshake::check_request(method, version, headers)?;
        let switch = switch.ok_or(WebSocketUpgradeRejection::ConnectionNotUpgradable)?;
        Ok(Upgrade {
            key,
            protocols: handshake::offered_protocols(headers)
                .map(str::to_owned)
                .collect(),
            extensions: handshake::extension_lines(headers)
                .map(str::to_owned)
                .collect(),
            protocol: None,
            switch,
            config: Config::default(),
            on_failed: None,
        })
    }

    /// The connection's limits and options.
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

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

    /// The `101` to return; once it is written, `callback` runs with the socket, polled by
    /// the connection itself.
    pub fn on_upgrade<F, Fut, B>(self, callback: F) -> Response<B>
    where
        F: FnOnce(WebSocket) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
        B: Default,
    {
        self.on_upgrade_with(callback, B::default())
    }

    pub(crate) fn on_upgrade_with<F, Fut, B>(mut self, callback: F, body: B) -> Response<B>
    where
        F: FnOnce(WebSocket) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let deflate = self
            .config
            .deflate
            .as_ref()
            .and_then(|cfg| negotiate_server(self.extensions.iter().map(String::as_str), cfg));
        let response_ext = deflate.as_ref().map(|(_, header)| header.clone());
        let res =
            handshake::switching_response(&self.key, self.protocol.as_ref(), response_ext, body);
        let claim = Claim {
            config: self.config.clone(),
            protocol: self.protocol.clone(),
            deflate: deflate.map(|(params, _)| params),
            on_failed: self.on_failed.take(),
        };
        self.switch
            .claim(Box::new(move |sw: Switched| claim.start(sw, callback)));
        res
    }

    /// The `101` to return, and the socket it leads to (resolving once the `101` is
    /// written): for services that run the socket on a task of their own.
    pub fn into_response<B: Default>(self) -> (Response<B>, Upgrading) {
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
    deflate: Option<super::proto::deflate::DeflateParams>,
    on_failed: Option<Box<dyn FnOnce(Error) + Send>>,
}

impl Claim {
    fn start<F, Fut>(mut self, sw: Switched, callback: F)
    where
        F: FnOnce(WebSocket) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.on_failed = None;
        let level = self.config.deflate.as_ref().map_or(0, |d| d.level);
        let deflate = self
            .deflate
            .as_ref()
            .map(|p| PerMessageDeflate::new(Role::Server, p, level));
        let machine = Machine::new(Role::Server, self.config.limits(), deflate, 0);
        socket::start(
            sw,
            Role::Server,
            &self.config,
            machine,
            self.protocol.take(),
            callback,
        );
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
