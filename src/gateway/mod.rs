//! `fibr::gateway`: a reverse proxy as a `tower::Service` (feature `client`).
//!
//! ```no_run
//! # #[cfg(feature = "axum")]
//! # async fn demo(listener: fibr::net::TcpListener) -> Result<(), Box<dyn std::error::Error>> {
//! use fibr::gateway::{Config, Gateway, Upstream};
//! let gw = Gateway::new(
//!     [Upstream::parse("http://127.0.0.1:9000")?, Upstream::parse("h2c://127.0.0.1:9001")?],
//!     Config::default(),
//! )?;
//! let app = axum::Router::new()
//!     .route("/health", axum::routing::get(|| async { "ok" }))
//!     .fallback_service(gw);
//! fibr::serve(listener, app).await?;
//! # Ok(()) }
//! ```
//!
//! Each request goes to one upstream ([`Balance`]) through fibr's client pool (HTTP/1.1,
//! or HTTP/2 by prior knowledge for `h2c://`), its body streamed both ways: what is
//! buffered is bounded by the server's and the client's buffers and flow control, never
//! a whole body. Hop-by-hop fields (RFC 9110 §7.6.1, and every field `Connection` names)
//! are removed both ways; `Forwarded`, `X-Forwarded-For`, `X-Forwarded-Proto` and `Via`
//! are added as [`Config`] says. The client's address comes from a
//! [`ConnInfo`](crate::http::ConnInfo) or axum `ConnectInfo<SocketAddr>` request
//! extension (serve the app with `into_make_service_with_connect_info::<SocketAddr>()`).
//!
//! The gateway answers by itself only when it has no upstream answer: 502 (cannot
//! connect, a malformed or cut-off response head) or 504 (connect or first-byte timeout),
//! with a line of text saying which upstream and why. An upstream failure counts against
//! it, and [`Config::max_fails`] in a row eject it for [`Config::eject_for`]. A request
//! goes to another upstream (up to [`Config::retries`]) when nothing of it was sent (a
//! connect failure), or when its method is idempotent, its body was not read yet and the
//! upstream closed before answering. A response body the upstream breaks off, or leaves
//! idle past [`Config::idle_timeout`], fails: the server resets the client's connection
//! (HTTP/1.1) or stream (HTTP/2) rather than end the body as if it were whole.
//!
//! An HTTP/1.1 `Upgrade` request (WebSocket), or a WebSocket over HTTP/2 or HTTP/3
//! (extended CONNECT, RFC 8441 and RFC 9220), is passed on to an upstream, and once it
//! accepted both sides become one byte tunnel (the client's side from hyper's
//! `upgrade::on` on plaintext connections, with feature `tunnel` from fibr's own HTTP/1.1,
//! as over TLS, or the client's stream). Upstream it goes as an HTTP/1.1 upgrade on a
//! connection of its own to `http://` and `h2c://` upstreams, as an extended CONNECT on
//! the pooled HTTP/2 connection to an `https://` upstream that allows it (else as an
//! HTTP/1.1 upgrade over TLS), and as an extended CONNECT over HTTP/3 to `h3://` ones;
//! the client gets the answer its own protocol expects (`101`, or `200`).

mod body;
mod config;
mod extended;
mod headers;
mod idle;
mod open;
mod splice;
mod tunnel;
mod upstreams;

pub use body::GatewayBody;
pub use config::{Balance, Config, InvalidUpstream, Upstream};

use crate::client::{BoxError, Client, Error, ErrorKind, ResponseBody};
use crate::engine::exec::recycled::RecycledFuture;
use crate::engine::time::or_elapsed;
use body::Home;
use bytes::Bytes;
use config::Speaks;
pub(crate) use headers::strip_hop_by_hop;
use headers::{accepts_trailers, add_forwarding, add_via, Origin};
use http::header::{self, HeaderMap, HeaderValue};
use http::uri::PathAndQuery;
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::Empty;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use upstreams::{InFlight, Upstreams};

/// A reverse proxy over a set of upstreams: a `tower::Service` of any request body, so an
/// axum `Router` mounts it unchanged (`fallback_service`, `nest_service`). Cloning is cheap
/// and shares the connection pools and the upstreams' health.
#[derive(Clone)]
pub struct Gateway {
    shared: Arc<Shared>,
}

struct Shared {
    config: Config,
    upstreams: Arc<Upstreams>,
    http1: Client,
    h2c: Client,
    #[cfg(feature = "tls")]
    https: Client<crate::client::HttpsConnector>,
    #[cfg(feature = "http3")]
    h3: Client<crate::client::HttpsConnector>,
    /// TLS for an upgrade over a connection of its own (`https://`): ALPN `http/1.1`.
    #[cfg(feature = "tls")]
    upgrade_tls: Arc<crate::tls::rustls::ClientConfig>,
}

impl Gateway {
    /// A gateway to `upstreams` (at least one).
    pub fn new(
        upstreams: impl IntoIterator<Item = Upstream>,
        config: Config,
    ) -> Result<Gateway, InvalidUpstream> {
        let upstreams: Vec<Upstream> = upstreams.into_iter().collect();
        if upstreams.is_empty() {
            return Err(InvalidUpstream::none());
        }
        let mut builder = Client::builder();
        builder
            .connect_timeout(config.connect_timeout)
            .pool_max_idle_per_host(config.pool_max_idle)
            .pool_idle_timeout(config.pool_idle_timeout)
            .http1_max_head_size(config.max_response_head)
            .http2_max_header_list_size(config.max_response_head.try_into().unwrap_or(u32::MAX));
        #[cfg(feature = "tls")]
        if let Some(tls) = &config.tls {
            builder.tls_config(tls.clone());
        }
        #[cfg(feature = "tls")]
        let upgrade_tls = {
            let base = config
                .tls
                .clone()
                .unwrap_or_else(crate::tls::default_client_config);
            let mut tls = Arc::unwrap_or_clone(base);
            tls.alpn_protocols = vec![b"http/1.1".to_vec()];
            Arc::new(tls)
        };
        let http1 = builder.clone().http1_only(true).build();
        #[cfg(feature = "tls")]
        let https = builder.build_https();
        #[cfg(feature = "http3")]
        let h3 = builder.clone().http3_prior_knowledge().build_https();
        let h2c = builder.http2_prior_knowledge().build();
        let set = Upstreams::new(
            upstreams,
            config.balance,
            config.max_fails,
            config.eject_for,
        );
        Ok(Gateway {
            shared: Arc::new(Shared {
                config,
                upstreams: Arc::new(set),
                http1,
                h2c,
                #[cfg(feature = "tls")]
                https,
                #[cfg(feature = "http3")]
                h3,
                #[cfg(feature = "tls")]
                upgrade_tls,
            }),
        })
    }
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("config", &self.shared.config)
            .finish()
    }
}

impl<B> tower_service::Service<Request<B>> for Gateway
where
    B: Body + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<GatewayBody>;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let shared = self.shared.clone();
        // The request's head is made here, before the future: what an async fn takes stays
        // in its future to the end, so every layer of one would carry it again. Upgrades
        // have futures of their own (connecting, TLS, the handshake): large, and rare.
        if shared.config.upgrades && tunnel::is_upgrade(&req) {
            return ResponseFuture::new(async move { Ok(tunnel::forward(&shared, req).await) });
        }
        if shared.config.upgrades && extended::is_websocket(&req) {
            return ResponseFuture::new(async move { Ok(extended::forward(&shared, req).await) });
        }
        let (parts, body) = req.into_parts();
        let head = shared.head_of(parts);
        // An empty body (a GET's) is not kept: it goes as `Empty`, which the client can
        // send again itself (a stale pooled connection) and which never needs lending.
        let body = (!body.is_end_stream()).then(|| Box::pin(body));
        ResponseFuture::new(shared.exchange(head, body))
    }
}

/// The future of a [`Gateway`]'s answer: the upstream's response, or the gateway's own
/// (502, 504, ...). Its memory is kept on the thread that drops it for the next request's
/// (it is ~2 KiB, over what the allocator's per-thread caches hold).
pub struct ResponseFuture(RecycledFuture<Result<Response<GatewayBody>, Infallible>>);

impl ResponseFuture {
    fn new<F>(future: F) -> ResponseFuture
    where
        F: Future<Output = Result<Response<GatewayBody>, Infallible>> + Send + 'static,
    {
        ResponseFuture(RecycledFuture::new(future))
    }
}

impl Future for ResponseFuture {
    type Output = Result<Response<GatewayBody>, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl std::fmt::Debug for ResponseFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

/// What goes upstream of a request, whichever upstream takes it.
struct Head {
    method: Method,
    path_and_query: PathAndQuery,
    headers: HeaderMap,
}

/// Why an upstream did not answer: the client's error (connect, a malformed response, a
/// closed connection, no response head within the first-byte timeout, ...).
struct Failure(Error);

impl Shared {
    /// The request's head as it goes upstream: hop-by-hop fields out, forwarding fields
    /// in, `Host` kept or left to the upstream's authority.
    fn head_of(&self, parts: http::request::Parts) -> Head {
        let origin = origin_of(&parts);
        let mut headers = parts.headers;
        let trailers = accepts_trailers(&headers);
        strip_hop_by_hop(&mut headers);
        if trailers {
            // This hop takes trailers too (gRPC's servers want to hear it): they are
            // passed on.
            headers.insert(header::TE, HeaderValue::from_static("trailers"));
        }
        // The server answered `100 Continue` (or not) when the body was asked for; the
        // client would wait for the upstream's.
        headers.remove(header::EXPECT);
        if !self.config.preserve_host {
            headers.remove(header::HOST);
        } else if let (false, Some(host)) = (headers.contains_key(header::HOST), &origin.host) {
            // HTTP/2 and HTTP/3 carry it as `:authority`.
            headers.insert(header::HOST, host.clone());
        }
        add_forwarding(&mut headers, &self.config, &origin);
        Head {
            method: parts.method,
            path_and_query: parts
                .uri
                .path_and_query()
                .cloned()
                .unwrap_or_else(|| PathAndQuery::from_static("/")),
            headers,
        }
    }

    /// Sends the request to an upstream, and to another while a failure allows it.
    async fn exchange<B>(
        self: Arc<Self>,
        mut head: Head,
        mut body: Option<Pin<Box<B>>>,
    ) -> Result<Response<GatewayBody>, Infallible>
    where
        B: Body + Send + 'static,
        B::Error: Into<BoxError>,
    {
        // The upstreams tried before this attempt (no allocation until a retry).
        let mut tried = Vec::new();
        loop {
            let Some(up) = self.upstreams.pick(&tried) else {
                unreachable!("a request stops before it has tried every upstream");
            };
            let attempts = tried.len() + 1;
            let may_follow = attempts <= self.config.retries && attempts < self.upstreams.len();
            // The fields go upstream as they are on the last attempt there can be.
            let headers = if may_follow {
                head.headers.clone()
            } else {
                std::mem::take(&mut head.headers)
            };
            let (result, home) = match body.take() {
                // No body (see `Gateway::call`).
                None => match self.request_to(&up, &head, headers, Empty::<Bytes>::new()) {
                    Ok(req) => (self.send(&up, req).await, None),
                    Err(f) => (Err(f), None),
                },
                Some(b) => {
                    // Boxed: inline, this second exchange would double the room of every
                    // request's future (the two are not laid over each other).
                    let (lent, home) = Home::lend(b);
                    let result = match self.request_to(&up, &head, headers, lent) {
                        Ok(req) => Box::pin(self.send(&up, req)).await,
                        Err(f) => Err(f),
                    };
                    (result, Some(home))
                }
            };
            let failure = match result {
                Ok(res) => {
                    up.succeeded();
                    return Ok(self.respond(res, up));
                }
                Err(f) => f,
            };
            if failure.is_upstreams() {
                up.failed();
            }
            let at_hand = match home {
                None => true,
                Some(home) => {
                    body = home.take_back();
                    body.is_some()
                }
            };
            let again = may_follow && at_hand && failure.may_retry(&head.method);
            tracing::debug!(upstream = %up.upstream(), error = %failure, again, "upstream failed");
            if !again {
                return Ok(failure.answer(up.upstream()));
            }
            tried.push(up.index());
        }
    }

    /// What goes to `up` on one attempt: `head` with `headers` and `body`, to the
    /// upstream's URI. Made before the attempt's future (see `Gateway::call`).
    fn request_to<T>(
        &self,
        up: &InFlight,
        head: &Head,
        headers: HeaderMap,
        body: T,
    ) -> Result<Request<T>, Failure> {
        let mut req = Request::new(body);
        *req.method_mut() = head.method.clone();
        *req.headers_mut() = headers;
        self.set_uri(up, &head.path_and_query, &mut req)?;
        Ok(req)
    }

    /// Points `req` at `up`'s `path_and_query`.
    fn set_uri<T>(
        &self,
        up: &InFlight,
        path_and_query: &PathAndQuery,
        req: &mut Request<T>,
    ) -> Result<(), Failure> {
        *req.uri_mut() = up
            .upstream()
            .uri(path_and_query)
            .map_err(|e| Failure(Error::new(ErrorKind::InvalidUri, e)))?;
        Ok(())
    }

    /// `req` (its URI set) through the client for `up`'s protocol, under the first-byte
    /// timeout.
    async fn send<T>(
        &self,
        up: &InFlight,
        req: Request<T>,
    ) -> Result<Response<ResponseBody>, Failure>
    where
        T: Body + Send + 'static,
        T::Error: Into<BoxError>,
    {
        let limit = self.config.first_byte_timeout;
        let result = match up.upstream().speaks() {
            Speaks::Http1 => or_elapsed(limit, self.http1.request(req), no_first_byte).await,
            Speaks::H2c => or_elapsed(limit, self.h2c.request(req), no_first_byte).await,
            #[cfg(feature = "tls")]
            Speaks::Https => or_elapsed(limit, self.https.request(req), no_first_byte).await,
            #[cfg(feature = "http3")]
            Speaks::H3 => or_elapsed(limit, self.h3.request(req), no_first_byte).await,
        };
        result.map_err(Failure)
    }

    /// The upstream's response as the client gets it.
    fn respond(&self, res: Response<ResponseBody>, up: InFlight) -> Response<GatewayBody> {
        let (mut parts, body) = res.into_parts();
        self.clean(&mut parts);
        let body = GatewayBody::upstream(body, self.config.idle_timeout, up);
        Response::from_parts(parts, body)
    }

    /// An upstream's response head as the client gets it: hop-by-hop fields out, `Via`
    /// in.
    fn clean(&self, parts: &mut http::response::Parts) {
        strip_hop_by_hop(&mut parts.headers);
        if self.config.via {
            add_via(&mut parts.headers, parts.version);
        }
    }
}

impl Failure {
    /// Whether the upstream is to blame (not the client's own request body).
    fn is_upstreams(&self) -> bool {
        !matches!(self, Failure(e) if e.kind() == ErrorKind::RequestBody)
    }

    /// Whether another upstream may get the request: nothing was sent (a connect failure),
    /// or an idempotent request's upstream closed before answering.
    fn may_retry(&self, method: &Method) -> bool {
        match self {
            Failure(e) if e.is_connect() => true,
            Failure(e) => e.kind() == ErrorKind::ClosedBeforeResponse && is_idempotent(method),
        }
    }

    /// The gateway's answer: 504 for a timeout, 400 for the client's own body, else 502.
    fn answer(&self, upstream: &Upstream) -> Response<GatewayBody> {
        let status = match self {
            Failure(e) if e.is_timeout() => StatusCode::GATEWAY_TIMEOUT,
            Failure(e) if e.kind() == ErrorKind::RequestBody => StatusCode::BAD_REQUEST,
            Failure(_) => StatusCode::BAD_GATEWAY,
        };
        text_response(
            status,
            &format!("fibr gateway: upstream {upstream}: {self}"),
        )
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The gateway's own answer: a status and a line saying why.
fn text_response(status: StatusCode, why: &str) -> Response<GatewayBody> {
    let mut res = Response::new(GatewayBody::text(format!("{why}\n")));
    *res.status_mut() = status;
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    res
}

/// The first-byte timeout's error: a timeout, so the client gets 504.
fn no_first_byte(t: Duration) -> Error {
    Error::new(ErrorKind::Timeout, format!("no response head within {t:?}"))
}

fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

/// Where the request came from: the client's address (from the server's `ConnInfo`, or
/// axum's `ConnectInfo`), its scheme and the host it asked for.
fn origin_of(parts: &http::request::Parts) -> Origin {
    let ext = &parts.extensions;
    let client = ext
        .get::<crate::http::ConnInfo>()
        .and_then(|i| i.peer)
        .map(|a| a.ip());
    #[cfg(feature = "axum")]
    let client = client.or_else(|| {
        ext.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|c| c.0.ip())
    });
    let https = parts.uri.scheme() == Some(&http::uri::Scheme::HTTPS);
    #[cfg(feature = "tls")]
    let https = https || ext.get::<crate::tls::TlsInfo>().is_some();
    let host = parts.headers.get(header::HOST).cloned().or_else(|| {
        parts
            .uri
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
    });
    Origin {
        client,
        proto: if https { "https" } else { "http" },
        host,
        version: parts.version,
    }
}
