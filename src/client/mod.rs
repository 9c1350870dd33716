//! `fibr::client::Client`: a hyper-style HTTP/1.1 and HTTP/2 client on fibr's loops
//! (feature `client`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), fibr::client::Error> {
//! use http_body_util::BodyExt;
//! let client = fibr::client::Client::new();
//! let res = client.get("http://127.0.0.1:3000/").await?;
//! let body = res.into_body().collect().await?.to_bytes();
//! # let _ = body; Ok(()) }
//! ```
//!
//! - Connections are pooled per (scheme, authority; a default port is left out) with
//!   keep-alive reuse, an idle timeout and a bound on idle connections per host.
//! - HTTP/1.1 is spoken natively, on the codec fibr's server uses (response parsing on
//!   `httparse`, chunked coding both ways). The task awaiting a request drives its
//!   connection, and the response body reads the rest: no task per connection and no hop
//!   between the caller and a connection task (hyper-util spawns one per connection and
//!   talks to it over channels). A small body that arrived with the head returns the
//!   connection to the pool at once; otherwise it returns once the body has been read to
//!   its end (dropping the body early closes it). `benches/client.rs` measures it against
//!   hyper-util's client (the README's client table has the figures).
//! - Upgrades (101 Switching Protocols) are not supported: such a connection is not
//!   reused, and the upgraded stream is not handed out.
//! - Names are resolved on a short-lived OS thread (`fibr::net::lookup_host`), never on
//!   an event loop or a worker.
//! - [`Connector`]s make connections: [`HttpConnector`] (`http` over TCP and `http+unix`,
//!   see [`unix_uri`]), [`UnixConnector`], or your own. A connection that reports ALPN
//!   `h2` ([`Connected::negotiated_h2`]) speaks HTTP/2.
//! - Proxies ([`Builder::proxy`], [`Proxy`]): `http://` (a `CONNECT` tunnel for
//!   `https://` targets, absolute-form forwarding for `http://` ones), `https://` (TLS to
//!   the proxy, a `CONNECT` for every target over HTTP/2 when ALPN picks `h2`, else
//!   HTTP/1.1; h2c with [`Proxy::http2_prior_knowledge`]), `socks5://`,
//!   `socks5h://`, `socks4://`, `socks4a://`, with credentials from the URL; `NO_PROXY`
//!   lists; the environment's `HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY`/`NO_PROXY` only with
//!   [`Builder::proxy_from_env`]. Raw streams through SOCKS: `fibr::net::socks`.
//! - HTTP/2 (`client::h2` driving the sans-IO `http::h2::client`): over TLS when ALPN
//!   picks `h2` (offered with `http/1.1` unless [`Builder::http1_only`]), and h2c with
//!   [`Builder::http2_prior_knowledge`]. One connection per (scheme, authority) carries
//!   every request, multiplexed, with one task per connection that reads for all its
//!   streams; requests beyond the server's SETTINGS_MAX_CONCURRENT_STREAMS wait for a
//!   stream. Streams the server refuses (REFUSED_STREAM, or above a GOAWAY's last stream)
//!   are sent again on a new connection when their body is whole; a GOAWAY lets the
//!   streams below it finish. Trailers go both ways (tonic's gRPC over the
//!   `tower::Service`).
//! - HTTP/3 (feature `http3`, clients from [`Builder::build_https`]): by prior knowledge
//!   ([`Builder::http3_prior_knowledge`]) or by following `Alt-Svc`
//!   ([`Builder::http3_alt_svc`]), one QUIC connection per origin (`client::http3`).
//! - A request that never reached the server (the pooled connection turned out closed
//!   before it was written), and an idempotent request (GET, PUT, ...) whose reused
//!   connection closed before answering, are retried once on a fresh connection, if
//!   their body is still at hand: none, or a full one (`String`, `Full`, ...); a streamed
//!   body is consumed as it is sent.
//! - A streamed request body is sent while the response is awaited and read; if the
//!   response head comes first, a task finishes sending it, so its producer never waits
//!   on the caller. A response that closes the connection stops the upload.
//! - It is a `tower::Service<http::Request<B>>`, so tower layers stack on it.
//! - It works from fibr handlers, from `fibr::run`, and from any other executor (tokio
//!   included): its I/O and timers run on fibr's loops wherever it is polled.

mod body;
mod builder;
mod conn;
mod connect;
mod duplex;
mod error;
mod h2;
#[cfg(feature = "http3")]
mod http3;
mod pool;
mod proxied;
mod proxy;
mod resolve;
#[cfg(feature = "tls")]
mod tls;
mod upload;

pub use body::ResponseBody;
pub use builder::Builder;
pub use connect::{
    unix_uri, Connected, Connection, Connector, Forwarding, HttpConnector, Stream, UnixConnector,
    UNIX_SCHEME,
};
use error::Failure;
pub use error::{BoxError, Error, ErrorKind};
pub use proxy::{Proxy, ProxyTunnel};
/// TLS over a stream the caller made (the gateway's upgrades over TLS).
#[cfg(feature = "tls")]
pub(crate) use tls::handshake as tls_handshake;
#[cfg(feature = "tls")]
pub use tls::{HttpsConnector, MaybeHttps, TlsStream};

use crate::engine::time::or_elapsed;
use crate::proto::h1::framing::BodyFraming;
use crate::proto::h2::client::ClientConfig as H2Config;
use body::{ReqBody, Wire};
use conn::{Answer, H1Options, Http1Conn, ProxyForm};
use connect::Key;
use h2::H2Conn;
use http::header::{HeaderValue, HOST};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Method, Request, Response, Uri, Version};
use http_body::Body;
use pool::{IdlePool, Pooled};
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// An HTTP/1.1 and HTTP/2 client with a connection pool. Cloning is cheap and shares the
/// pool.
pub struct Client<C: Connector = HttpConnector> {
    inner: Arc<Inner<C>>,
}

impl<C: Connector> Clone for Client<C> {
    fn clone(&self) -> Self {
        Client {
            inner: self.inner.clone(),
        }
    }
}

struct Inner<C: Connector> {
    connector: C,
    pool: Arc<IdlePool<C::Io>>,
    connect_timeout: Option<Duration>,
    request_timeout: Option<Duration>,
    max_body: Option<u64>,
    retry: bool,
    h1: H1Options,
    h2: H2Config,
    h2_prior_knowledge: bool,
    /// How long an HTTP/2 connection without streams is kept.
    idle_timeout: Option<Duration>,
    /// HTTP/3, when the builder turned it on (`build_https` only).
    #[cfg(feature = "http3")]
    h3: Option<http3::Http3>,
}

impl Client {
    /// A client with default settings and the [`HttpConnector`].
    pub fn new() -> Client {
        Builder::default().build()
    }

    /// Settings for a client.
    pub fn builder() -> Builder {
        Builder::default()
    }
}

impl Default for Client {
    fn default() -> Client {
        Client::new()
    }
}

impl<C: Connector> std::fmt::Debug for Client<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("idle_connections", &self.inner.pool.idle_count())
            .finish()
    }
}

impl<C: Connector> Client<C> {
    /// `GET uri`.
    pub async fn get<U>(&self, uri: U) -> Result<Response<ResponseBody>, Error>
    where
        U: TryInto<Uri>,
        U::Error: Into<BoxError>,
    {
        let uri = uri
            .try_into()
            .map_err(|e| Error::new(ErrorKind::InvalidUri, e))?;
        let mut req = Request::new(ReqBody::Empty);
        *req.uri_mut() = uri;
        self.send(req).await
    }

    /// Sends `req` (its URI absolute) and answers the response once its head has arrived;
    /// the body streams. The request timeout, if set, counts from this call.
    pub fn request<B>(
        &self,
        req: Request<B>,
    ) -> impl Future<Output = Result<Response<ResponseBody>, Error>> + Send + '_
    where
        B: Body + Send + 'static,
        B::Error: Into<BoxError>,
    {
        self.send(req.map(ReqBody::new))
    }

    /// Connections in the pool now (all hosts): idle HTTP/1 ones and shared HTTP/2 ones.
    pub fn idle_connections(&self) -> usize {
        self.inner.pool.idle_count()
    }

    /// `req` under the request timeout. Not an async fn: what one takes stays in its
    /// future to the end, and the request is large.
    fn send(
        &self,
        req: Request<ReqBody>,
    ) -> impl Future<Output = Result<Response<ResponseBody>, Error>> + Send + '_ {
        let no_response = |t| Error::new(ErrorKind::Timeout, format!("no response within {t:?}"));
        or_elapsed(
            self.inner.request_timeout,
            self.send_inner(req),
            no_response,
        )
    }

    async fn send_inner(&self, req: Request<ReqBody>) -> Result<Response<ResponseBody>, Error> {
        let (key, mut req) = prepare(req)?;
        let framing = BodyFraming::choose(
            req.method(),
            req.version(),
            req.headers(),
            req.body().size_hint().exact(),
        )
        .ok_or_else(|| {
            Error::new(
                ErrorKind::RequestBody,
                "an HTTP/1.0 request cannot carry a body of unknown length (HTTP/1.0 has no \
                 chunked coding): set a Content-Length or use HTTP/1.1",
            )
        })?;
        #[cfg(feature = "http3")]
        if let Some(h3) = &self.inner.h3 {
            let (max_body, timeout) = (self.inner.max_body, self.inner.connect_timeout);
            // Boxed: HTTP/3's exchange is large, and a request over TCP should not carry
            // its room in every move of its future.
            if let Some(r) = Box::pin(h3.send(&key, &mut req, max_body, timeout)).await {
                return r;
            }
        }
        let mut fresh_only = false;
        loop {
            let (conn, reused) = self.pick(&key, fresh_only).await?;
            // A request may go again on a fresh connection if its body is still here (none
            // or a full one; a streamed one is taken as it is sent) and the reused
            // connection never took it, or if it is also idempotent and the reused
            // connection closed before any answer (the server may have timed it out).
            let whole = req.body().try_clone().is_some();
            let replayable = whole && is_idempotent(req.method());
            let max_body = self.inner.max_body;
            // HTTP/2 says when a stream was not processed (REFUSED_STREAM, GOAWAY): that one
            // goes again even from a fresh connection.
            let (r, refused) = match conn {
                Picked::H1(conn) if req.extensions().get::<crate::http::Protocol>().is_some() => {
                    // Untouched: back to the pool for requests that can use it.
                    conn.unused();
                    return Err(Error::new(
                        ErrorKind::Other,
                        error::NoExtendedConnect(
                            "an extended CONNECT (a fibr::http::Protocol) needs HTTP/2, and \
                             this server's connection speaks HTTP/1.1",
                        ),
                    ));
                }
                Picked::H1(mut conn) => match conn.conn.exchange(&mut req, framing, max_body).await
                {
                    Ok(answer) => {
                        // Its head is sent: the map is kept for the next head parsed here.
                        crate::proto::header_maps::give(std::mem::take(req.headers_mut()));
                        return Ok(self.learn(&key, respond(conn, answer, max_body)));
                    }
                    Err(f) => (f, false),
                },
                Picked::H2(h2) => match h2.send(take_or_copy(&mut req), &key, max_body).await {
                    Ok(res) => return Ok(self.learn(&key, res)),
                    Err(f) => {
                        let refused = matches!(f, Failure::NotSent(_));
                        (f, refused)
                    }
                },
            };
            let e = match r {
                Failure::NotSent(e) if whole => e,
                Failure::Sent(e) if e.kind() == ErrorKind::ClosedBeforeResponse && replayable => e,
                Failure::NotSent(e) | Failure::Sent(e) => return Err(e),
            };
            if !(reused || refused) || fresh_only || !self.inner.retry {
                return Err(e);
            }
            fresh_only = true;
        }
    }

    /// `res` over TCP, after noting what its `Alt-Svc` says of HTTP/3 (when followed).
    fn learn(&self, _key: &Key, res: Response<ResponseBody>) -> Response<ResponseBody> {
        #[cfg(feature = "http3")]
        if let Some(h3) = &self.inner.h3 {
            h3.learn(_key, res.headers());
        }
        res
    }

    /// A connection for `key`: the shared HTTP/2 one, an idle HTTP/1 one, or a new one
    /// (HTTP/2 by prior knowledge or ALPN, else HTTP/1). Whether it was reused.
    async fn pick(&self, key: &Key, fresh_only: bool) -> Result<(Picked<C::Io>, bool), Error> {
        let pool = &self.inner.pool;
        // An HTTP/2 connection refuses new streams once it is going away, so one that
        // still takes them is as good as fresh.
        if let Some(h2) = pool.h2_get(key) {
            return Ok((Picked::H2(h2), !fresh_only));
        }
        // A forwarding proxy speaks HTTP/1.1, whatever is known of the target, so prior
        // knowledge needs the URI to connect to before an idle connection is looked for;
        // without it the URI is built only to connect (most requests reuse one).
        let early_dst = if self.inner.h2_prior_knowledge && key.scheme != Scheme::HTTPS {
            Some(origin_uri(key)?)
        } else {
            None
        };
        let prior = early_dst
            .as_ref()
            .is_some_and(|dst| self.inner.connector.forwarding(dst).is_none());
        if !prior && !fresh_only {
            if let Some(c) = poll_fn(|cx| Poll::Ready(pool.checkout(key, cx))).await {
                return Ok((Picked::H1(c), true));
            }
        }
        // One connection for everyone waiting, when it will be HTTP/2: by prior knowledge,
        // or because this key negotiated h2 before. (The first ALPN connections to a key
        // are made per request: nobody knows yet whether they can be shared.)
        let guard = if prior || pool.h2_known(key) {
            match poll_fn(|cx| pool.poll_h2_claim(key, cx)).await {
                pool::H2Claim::Ready(h2) => return Ok((Picked::H2(h2), !fresh_only)),
                pool::H2Claim::Connect(guard) => Some(guard),
            }
        } else {
            None
        };
        let dst = match early_dst {
            Some(dst) => dst,
            None => origin_uri(key)?,
        };
        let forwarding = self.inner.connector.forwarding(&dst);
        // Boxed: connecting (a resolver, TLS, proxies) is rare beside reusing a pooled
        // connection, and large; inline, every request's future would carry its room.
        let io = Box::pin(self.connect(&dst)).await?;
        if prior || (forwarding.is_none() && io.connected().is_negotiated_h2()) {
            let h2 = H2Conn::start(io, &self.inner.h2, self.inner.idle_timeout);
            match guard {
                Some(g) => g.fulfill(&h2),
                None => pool.h2_put(key, &h2),
            }
            return Ok((Picked::H2(h2), false));
        }
        let proxy = forwarding.map(|f| ProxyForm {
            origin: format!("{}://{}", key.scheme, without_userinfo(&key.authority)),
            authorization: f.authorization().cloned(),
        });
        let conn = Pooled::new(Http1Conn::new(io, self.inner.h1, proxy), key.clone(), pool);
        Ok((Picked::H1(conn), false))
    }

    /// Connects to `dst` (with the connect timeout).
    async fn connect(&self, dst: &Uri) -> Result<C::Io, Error> {
        let connecting = self.inner.connector.connect(dst);
        match self.inner.connect_timeout {
            None => connecting.await,
            Some(t) => match crate::engine::time::timeout(t, connecting).await {
                Ok(r) => r,
                Err(_) => Err(Error::new(
                    ErrorKind::ConnectTimeout,
                    format!("connecting to {dst} took longer than {t:?}"),
                )),
            },
        }
    }
}

/// The URI a connector is asked for: `scheme://authority/`.
fn origin_uri(key: &Key) -> Result<Uri, Error> {
    Uri::builder()
        .scheme(key.scheme.clone())
        .authority(key.authority.clone())
        .path_and_query("/")
        .build()
        .map_err(|e| Error::new(ErrorKind::InvalidUri, e))
}

/// `host[:port]` of an authority (no `user@`).
fn without_userinfo(authority: &Authority) -> &str {
    let a = authority.as_str();
    a.rsplit_once('@').map_or(a, |(_, host)| host)
}

/// The connection a request goes on.
enum Picked<Io> {
    H1(Box<Pooled<Io>>),
    H2(H2Conn),
}

/// The request to hand to an HTTP/2 connection: a copy while its body is whole (so it can
/// be sent again), else the request itself (a streamed body is taken as it is sent).
fn take_or_copy(req: &mut Request<ReqBody>) -> Request<ReqBody> {
    let body = match req.body().try_clone() {
        Some(b) => b,
        None => std::mem::replace(req.body_mut(), ReqBody::Empty),
    };
    let mut copy = Request::new(body);
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    *copy.extensions_mut() = req.extensions().clone();
    copy
}

/// The response to an exchange: its body read from the connection (or whole already,
/// which hands the connection back at once). A response that came before its request was
/// all sent gets a task that finishes the upload (`duplex`).
fn respond<Io: Connection>(
    mut conn: Box<Pooled<Io>>,
    answer: Answer,
    max_body: Option<u64>,
) -> Response<ResponseBody> {
    let Answer { head, whole } = answer;
    let mut res = Response::new(ResponseBody::empty());
    *res.status_mut() = head.status;
    *res.version_mut() = head.version;
    *res.headers_mut() = head.headers;
    let rbuf = conn.conn.take_read_buffer();
    let wire: Box<dyn Wire> = if conn.conn.is_uploading() {
        duplex::finish_upload_in_background(conn)
    } else {
        conn
    };
    *res.body_mut() = match whole {
        Some(bytes) => {
            wire.finish(rbuf);
            ResponseBody::full(bytes)
        }
        None => ResponseBody::streaming(wire, rbuf, head.framing, max_body),
    };
    res
}

/// Splits the pool key off `req` and turns its URI into origin form with a Host header.
fn prepare(req: Request<ReqBody>) -> Result<(Key, Request<ReqBody>), Error> {
    let (mut parts, body) = req.into_parts();
    let mut uri = std::mem::take(&mut parts.uri).into_parts();
    let (Some(scheme), Some(authority)) = (uri.scheme.take(), uri.authority.take()) else {
        return Err(Error::new(
            ErrorKind::InvalidUri,
            "the request URI must be absolute (scheme://host/path)",
        ));
    };
    if !parts.headers.contains_key(HOST) {
        let host = if scheme.as_str().eq_ignore_ascii_case(UNIX_SCHEME) {
            HeaderValue::from_static("localhost")
        } else {
            HeaderValue::from_str(without_userinfo(&authority))
                .map_err(|e| Error::new(ErrorKind::InvalidUri, e))?
        };
        parts.headers.insert(HOST, host);
    }
    if uri.path_and_query.is_none() {
        uri.path_and_query = Some(PathAndQuery::from_static("/"));
    }
    parts.uri = Uri::from_parts(uri).map_err(|e| Error::new(ErrorKind::InvalidUri, e))?;
    if parts.version != Version::HTTP_10 {
        parts.version = Version::HTTP_11;
    }
    Ok((
        pool_key(scheme, authority),
        Request::from_parts(parts, body),
    ))
}

/// The pool's key: scheme and authority, without a port that is the scheme's default, so
/// `http://h/` and `http://h:80/` share connections.
fn pool_key(scheme: Scheme, authority: Authority) -> Key {
    let default = match scheme.as_str() {
        s if s.eq_ignore_ascii_case("http") => 80,
        s if s.eq_ignore_ascii_case("https") => 443,
        _ => 0,
    };
    let authority = match authority.port_u16() {
        Some(port) if port == default => {
            let s = authority.as_str();
            let without = &s[..s.len() - authority.port().map_or(0, |p| p.as_str().len() + 1)];
            Authority::try_from(without).unwrap_or(authority)
        }
        _ => authority,
    };
    Key::new(scheme, authority)
}

fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

/// The request futures are `Send` (checked at compile time, never called).
#[allow(dead_code)]
fn assert_send(c: &Client) {
    fn send<T: Send>(_: &T) {}
    send(&c.get("http://x/"));
    send(&c.request(Request::new(String::new())));
}

/// The future of [`Client`]'s `tower::Service::call`.
pub struct ResponseFuture {
    inner: Pin<Box<dyn Future<Output = Result<Response<ResponseBody>, Error>> + Send>>,
}

impl Future for ResponseFuture {
    type Output = Result<Response<ResponseBody>, Error>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl std::fmt::Debug for ResponseFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ResponseFuture")
    }
}

impl<C, B> tower_service::Service<Request<B>> for Client<C>
where
    C: Connector,
    B: Body + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<ResponseBody>;
    type Error = Error;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> ResponseFuture {
        let client = self.clone();
        ResponseFuture {
            inner: Box::pin(async move { client.request(req).await }),
        }
    }
}

/// The response body is `Send + Sync` (so `BoxBody` and the like take it).
#[allow(dead_code)]
fn assert_body_send_sync(b: ResponseBody) -> impl Send + Sync {
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_port_shares_the_pool_key() {
        let key = |s: &str| {
            let uri: Uri = s.parse().unwrap();
            let parts = uri.into_parts();
            pool_key(parts.scheme.unwrap(), parts.authority.unwrap())
        };
        assert_eq!(key("http://h/"), key("http://h:80/"));
        assert_eq!(key("http://H:80/"), key("http://h/"));
        assert_eq!(key("https://h:443/"), key("https://h/"));
        assert_eq!(key("http://[::1]:80/"), key("http://[::1]/"));
        assert_ne!(key("http://h:8080/"), key("http://h/"));
        assert_ne!(key("https://h:80/"), key("http://h:80/"));
        assert_ne!(key("http://u@h:80/"), key("http://h/"));
        // Equal keys find each other in the pool's maps (their hashes agree too).
        let pool: std::collections::HashSet<Key> =
            [key("http://Example.COM:80/"), key("HTTP+UNIX://h/")].into();
        assert!(pool.contains(&key("http://example.com/")));
        assert!(pool.contains(&key("http+unix://H/")));
    }
}
