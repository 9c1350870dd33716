//! The client: `fibr::ws::connect("ws://…")` (and `wss://` with feature `tls`). The
//! connection is a fibr connection like a server's, so the socket is the same
//! [`WebSocket`], driven by the same rounds (its masks from the kernel's random source).
//!
//! ```no_run
//! # async fn f() -> Result<(), fibr::ws::Error> {
//! use fibr::ws::Message;
//! let (mut socket, _response) = fibr::ws::connect("ws://127.0.0.1:9001/chat").await?;
//! socket.send(Message::text("hi")).await?;
//! let reply = socket.recv().await;
//! # Ok(()) }
//! ```

use super::handshake::{accept_key, extension_lines, has_token, new_key};
use super::oneshot::{self, Sender};
use super::socket::{self, WebSocket};
use super::{mask_seed, Config, Error};
use crate::engine::conn::{Conn, Handler};
use crate::http::switch::Switched;
use crate::proto::ws::deflate::{client_accept, client_offer, DeflateParams, PerMessageDeflate};
use crate::proto::ws::{Machine, Role};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Response, StatusCode, Uri};
use std::sync::{Arc, Mutex};

/// The longest handshake response accepted.
const MAX_RESPONSE_HEAD: usize = 16 * 1024;

/// Connects to a `ws://` (or `wss://`) URL with the default [`Connector`].
pub async fn connect(url: &str) -> Result<(WebSocket, Response<()>), Error> {
    Connector::new().connect(url).await
}

/// How a client connects: limits, subprotocols, extra request headers, TLS.
#[derive(Clone, Default)]
pub struct Connector {
    config: Config,
    protocols: Vec<String>,
    headers: HeaderMap,
    #[cfg(feature = "tls")]
    tls: Option<Arc<crate::tls::rustls::ClientConfig>>,
}

impl Connector {
    /// Default limits, no subprotocols, no extra headers, no deflate.
    pub fn new() -> Connector {
        Connector::default()
    }

    /// Limits and options; with `deflate` set, permessage-deflate is offered.
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// Subprotocols to offer, in order of preference.
    pub fn protocols<I, P>(mut self, protocols: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: Into<String>,
    {
        self.protocols = protocols.into_iter().map(Into::into).collect();
        self
    }

    /// An extra request header (an `Authorization`, an `Origin`, a cookie).
    pub fn header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.append(name, value);
        self
    }

    /// The TLS config for `wss://` (default: the webpki roots).
    #[cfg(feature = "tls")]
    pub fn tls_config(mut self, config: Arc<crate::tls::rustls::ClientConfig>) -> Self {
        self.tls = Some(config);
        self
    }

    /// Opens the connection and runs the handshake; the socket and the server's `101`.
    pub async fn connect(&self, url: &str) -> Result<(WebSocket, Response<()>), Error> {
        let uri: Uri = url
            .parse()
            .map_err(|e| Error::handshake(format!("bad URL {url:?}: {e}")))?;
        let secure = match uri.scheme_str() {
            Some("ws") => false,
            Some("wss") => true,
            _ => return Err(Error::handshake("the URL's scheme must be ws or wss")),
        };
        let host = uri
            .host()
            .ok_or_else(|| Error::handshake("the URL has no host"))?
            .to_owned();
        let port = uri.port_u16().unwrap_or(if secure { 443 } else { 80 });
        let addr = crate::engine::net::lookup_host((host.as_str(), port))
            .await
            .map_err(Error::io)?
            .next()
            .ok_or_else(|| Error::handshake(format!("{host} has no address")))?;
        let key = new_key();
        let authority = match uri.port_u16() {
            Some(p) => format!("{host}:{p}"),
            None => host.clone(),
        };
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let request = self.request(&authority, path, &key)?;
        let (tx, rx) = oneshot::channel();
        let handshake: Arc<dyn Handler> = Arc::new(Handshake {
            state: Mutex::new(Some(Pending {
                request,
                accept: accept_key(key.as_bytes()),
                head: Vec::new(),
                config: self.config.clone(),
                protocols: self.protocols.clone(),
                tx,
            })),
        });
        let rt = crate::engine::runtime::Runtime::current();
        let handler = if secure {
            self.tls_layer(&host, handshake)?
        } else {
            handshake
        };
        crate::engine::conn::Conn::dial_on(&rt, addr, handler).map_err(Error::io)?;
        rx.await
    }

    /// Opens the socket on a stream of one of `client`'s HTTP/2 or HTTP/3 connections, by
    /// the extended CONNECT of RFC 8441 or RFC 9220 (so many sockets share one
    /// connection); the socket and the server's `200`. The client must speak HTTP/2 or
    /// HTTP/3 to the URL's server: HTTP/2 by prior knowledge for `ws://`, by ALPN for
    /// `wss://`; HTTP/3 for `wss://` by `http3_prior_knowledge` or a learned Alt-Svc (its
    /// own TLS config applies, not [`tls_config`](Self::tls_config)); the server must
    /// allow extended CONNECT.
    #[cfg(feature = "client")]
    pub async fn connect_over_http2<C: crate::client::Connector>(
        &self,
        client: &crate::client::Client<C>,
        url: &str,
    ) -> Result<(WebSocket, Response<()>), Error> {
        use crate::http::pipe::{StreamIo, UpgradeBody};
        let uri: Uri = url
            .parse()
            .map_err(|e| Error::handshake(format!("bad URL {url:?}: {e}")))?;
        let scheme = match uri.scheme_str() {
            Some("ws") => "http",
            Some("wss") => "https",
            _ => return Err(Error::handshake("the URL's scheme must be ws or wss")),
        };
        let mut target = uri.into_parts();
        target.scheme = Some(scheme.parse().expect("http and https are schemes"));
        let target = Uri::from_parts(target)
            .map_err(|e| Error::handshake(format!("bad URL {url:?}: {e}")))?;
        let output = StreamIo::new(self.config.write_buffer_limit);
        let mut req = http::Request::new(UpgradeBody::stream(output.clone(), None));
        *req.method_mut() = http::Method::CONNECT;
        *req.uri_mut() = target;
        *req.headers_mut() = self.offer()?;
        let protocol = crate::http::Protocol::new("websocket").expect("a token");
        req.extensions_mut().insert(protocol);
        let res = client
            .request(req)
            .await
            .map_err(|e| Error::handshake(format!("the extended CONNECT failed: {e}")))?;
        if res.status() != StatusCode::OK {
            return Err(Error::handshake(format!(
                "the server answered {}",
                res.status()
            )));
        }
        let (parts, body) = res.into_parts();
        let (protocol, deflate) = agreed(&parts.headers, &self.protocols, &self.config)?;
        let level = self.config.deflate.as_ref().map_or(0, |d| d.level);
        let deflate = deflate.map(|p| PerMessageDeflate::new(Role::Client, &p, level));
        let machine = Machine::new(Role::Client, self.config.limits(), deflate, mask_seed());
        let socket = socket::stream_socket(output, body, &self.config, machine, protocol);
        Ok((socket, Response::from_parts(parts, ())))
    }

    #[cfg(feature = "tls")]
    fn tls_layer(&self, host: &str, inner: Arc<dyn Handler>) -> Result<Arc<dyn Handler>, Error> {
        use crate::tls::rustls::pki_types::ServerName;
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| Error::handshake(format!("{host} is not a TLS server name: {e}")))?;
        Ok(Arc::new(crate::tls::TlsClient {
            config: self
                .tls
                .clone()
                .unwrap_or_else(crate::tls::default_client_config),
            name,
            timeout: Some(std::time::Duration::from_secs(10)),
            inner,
        }))
    }

    #[cfg(not(feature = "tls"))]
    fn tls_layer(&self, _host: &str, _inner: Arc<dyn Handler>) -> Result<Arc<dyn Handler>, Error> {
        Err(Error::handshake("wss:// needs fibr's `tls` feature"))
    }

    /// The upgrade request (RFC 6455 §4.1).
    fn request(&self, authority: &str, path: &str, key: &str) -> Result<Vec<u8>, Error> {
        let mut req = format!(
            "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: Upgrade\r\n\
             Upgrade: websocket\r\nSec-WebSocket-Key: {key}\r\n"
        )
        .into_bytes();
        for (name, value) in &self.offer()? {
            req.extend_from_slice(name.as_str().as_bytes());
            req.extend_from_slice(b": ");
            req.extend_from_slice(value.as_bytes());
            req.extend_from_slice(b"\r\n");
        }
        req.extend_from_slice(b"\r\n");
        Ok(req)
    }

    /// The request's fields both HTTP versions send: the version, the subprotocols and
    /// extensions offered, and the extra headers.
    pub(super) fn offer(&self) -> Result<HeaderMap, Error> {
        let mut h = HeaderMap::new();
        h.insert(
            header::SEC_WEBSOCKET_VERSION,
            HeaderValue::from_static("13"),
        );
        let bad = |what| move |_| Error::handshake(format!("the {what} are not a valid header"));
        if !self.protocols.is_empty() {
            let v = HeaderValue::try_from(self.protocols.join(", "));
            h.insert(
                header::SEC_WEBSOCKET_PROTOCOL,
                v.map_err(bad("subprotocols"))?,
            );
        }
        if let Some(d) = &self.config.deflate {
            let v = HeaderValue::try_from(client_offer(d));
            h.insert(
                header::SEC_WEBSOCKET_EXTENSIONS,
                v.map_err(bad("extensions"))?,
            );
        }
        for (name, value) in &self.headers {
            h.append(name, value.clone());
        }
        Ok(h)
    }
}

/// The connection until the server's `101` is read.
struct Handshake {
    state: Mutex<Option<Pending>>,
}

struct Pending {
    request: Vec<u8>,
    accept: HeaderValue,
    /// The response so far.
    head: Vec<u8>,
    config: Config,
    protocols: Vec<String>,
    tx: Sender<(WebSocket, Response<()>)>,
}

/// A `101` that passed the checks, and what it agreed.
struct Agreed {
    response: Response<()>,
    protocol: Option<HeaderValue>,
    deflate: Option<DeflateParams>,
    /// Bytes after the head: the server's first frames.
    rest: Vec<u8>,
}

impl Handler for Handshake {
    fn on_open(&self, conn: &Conn) {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = state.as_ref() {
            let _ = conn.send(&p.request);
        }
    }

    fn on_data(&self, conn: &Conn, data: &[u8]) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some(p) = state.as_mut() else {
            return;
        };
        p.head.extend_from_slice(data);
        let agreed = match p.check() {
            Ok(None) => return,
            Ok(Some(agreed)) => agreed,
            Err(e) => {
                if let Some(p) = state.take() {
                    p.tx.send(Err(e));
                }
                conn.close();
                return;
            }
        };
        let Some(p) = state.take() else {
            return;
        };
        drop(state);
        let level = p.config.deflate.as_ref().map_or(0, |d| d.level);
        let deflate = agreed
            .deflate
            .as_ref()
            .map(|params| PerMessageDeflate::new(Role::Client, params, level));
        let machine = Machine::new(Role::Client, p.config.limits(), deflate, mask_seed());
        let (tx, response) = (p.tx, agreed.response);
        let switched = Switched {
            conn: conn.clone(),
            read: agreed.rest,
            in_round: true,
        };
        socket::start(switched, &p.config, machine, agreed.protocol, move |ws| {
            tx.send(Ok((ws, response)));
            std::future::ready(())
        });
    }

    fn on_close(&self, _conn: &Conn, err: Option<std::io::Error>) {
        if let Some(p) = self.state.lock().unwrap_or_else(|e| e.into_inner()).take() {
            p.tx.send(Err(match err {
                Some(e) => Error::io(e),
                None => Error::handshake("the server closed the connection"),
            }));
        }
    }
}

impl Pending {
    /// The response, once its head is complete: checked as RFC 6455 §4.1 says.
    fn check(&self) -> Result<Option<Agreed>, Error> {
        let mut fields = [httparse::EMPTY_HEADER; 64];
        let mut parsed = httparse::Response::new(&mut fields);
        let used = match parsed.parse(&self.head) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if self.head.len() <= MAX_RESPONSE_HEAD => {
                return Ok(None)
            }
            Ok(httparse::Status::Partial) => {
                return Err(Error::handshake("the response head is too long"))
            }
            Err(e) => return Err(Error::handshake(format!("bad response: {e}"))),
        };
        let status = parsed
            .code
            .and_then(|c| StatusCode::from_u16(c).ok())
            .unwrap_or(StatusCode::BAD_GATEWAY);
        let mut response = Response::new(());
        *response.status_mut() = status;
        for f in parsed.headers.iter() {
            let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(f.name.as_bytes()),
                HeaderValue::from_bytes(f.value),
            ) else {
                return Err(Error::handshake("a response header is malformed"));
            };
            response.headers_mut().append(name, value);
        }
        if status != StatusCode::SWITCHING_PROTOCOLS {
            return Err(Error::handshake(format!("the server answered {status}")));
        }
        let h = response.headers();
        if !has_token(h, &header::UPGRADE, "websocket")
            || !has_token(h, &header::CONNECTION, "upgrade")
        {
            return Err(Error::handshake("the 101 does not switch to websocket"));
        }
        if h.get(header::SEC_WEBSOCKET_ACCEPT) != Some(&self.accept) {
            return Err(Error::handshake(
                "Sec-WebSocket-Accept does not match the key",
            ));
        }
        let (protocol, deflate) = agreed(h, &self.protocols, &self.config)?;
        Ok(Some(Agreed {
            protocol,
            deflate,
            rest: self.head[used..].to_vec(),
            response,
        }))
    }
}

/// What the server's answer agreed to, checked against what was offered: the subprotocol
/// and permessage-deflate's parameters.
pub(super) fn agreed(
    h: &HeaderMap,
    offered: &[String],
    config: &Config,
) -> Result<(Option<HeaderValue>, Option<DeflateParams>), Error> {
    let protocol = h.get(header::SEC_WEBSOCKET_PROTOCOL).cloned();
    if let Some(p) = &protocol {
        if !offered.iter().any(|o| o.as_bytes() == p.as_bytes()) {
            return Err(Error::handshake(
                "the server chose a subprotocol not offered",
            ));
        }
    }
    let lines: Vec<&str> = extension_lines(h).collect();
    let deflate = match &config.deflate {
        Some(cfg) => client_accept(lines.iter().copied(), cfg).map_err(Error::handshake)?,
        None if lines.is_empty() => None,
        None => {
            return Err(Error::handshake(
                "the server answered an extension not offered",
            ))
        }
    };
    Ok((protocol, deflate))
}
