//! Absolute-form forwarding (RFC 9112 §3.2.2): a plain `http://` request to the proxy.
//!
//! Once the first request of a connection turns out not to be a `CONNECT`, the connection
//! is handed to fibr's HTTP server with [`Forward`] as its service, so keep-alive, bodies
//! and limits are the server's. Each request is checked against the rules (its own
//! `Proxy-Authorization`), loses its hop-by-hop fields, gains `Via`, and goes on through
//! fibr's client, whose pool keeps the targets' connections; the client dials through
//! [`TargetConnector`], which applies the target rules to the resolved addresses.

use super::http_connect::basic;
use super::{Failure, ProxyConfig};
use crate::client::{Client, Connector, Error, ErrorKind, ResponseBody};
use crate::engine::conn::Handler;
use crate::engine::net::TcpStream;
use crate::gateway::strip_hop_by_hop;
use crate::http::tunnel::{self, UpgradeBody};
use crate::http::{ConnInfo, Http2Config, Incoming, MakeMarker, Server, ServerConfig};
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::{Either, Full};
use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The body of a forwarded response: the target's, a CONNECT's tunnel, or the proxy's
/// own short answer.
pub type ForwardBody = Either<Either<ResponseBody, UpgradeBody>, Full<Bytes>>;

/// The `Via` entry this proxy adds (RFC 9110 §7.6.3).
const VIA: &str = "1.1 fibr";

/// Dials a target for the client: resolves it off the loops and connects to the first
/// address the rules allow.
#[derive(Clone)]
pub(crate) struct TargetConnector {
    config: Arc<ProxyConfig>,
}

/// The rules refuse every address of a target (answered 403).
#[derive(Debug)]
struct NotAllowed;

impl std::fmt::Display for NotAllowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the proxy's rules do not allow this target")
    }
}

impl std::error::Error for NotAllowed {}

impl Connector for TargetConnector {
    type Io = TcpStream;

    async fn connect(&self, dst: &Uri) -> Result<TcpStream, Error> {
        let host = dst
            .host()
            .ok_or_else(|| Error::new(ErrorKind::InvalidUri, "the URI has no host"))?;
        let port = dst.port_u16().unwrap_or(80);
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        let name = literal.parse::<IpAddr>().is_err().then_some(host);
        let addrs = crate::engine::net::resolve((literal, port))
            .await
            .map_err(|e| Error::new(ErrorKind::Dns, format!("resolving {host:?}: {e}")))?;
        let rules = &self.config.rules;
        let mut last = None;
        for addr in addrs
            .into_iter()
            .filter(|a| rules.check_target(name, a.ip(), a.port()))
        {
            match TcpStream::connect(addr).await {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last.map_or_else(
            || Error::new(ErrorKind::Connect, NotAllowed),
            Error::from_connect_io,
        ))
    }
}

/// The HTTP server a connection is handed to once its first request asks for
/// forwarding: the proxy's head limit and handshake timeout, no h2c (an `Upgrade` is
/// hop-by-hop, for the target to see or not).
pub(crate) fn server(config: Arc<ProxyConfig>) -> Arc<dyn Handler> {
    let http = ServerConfig::default()
        .with_max_head_bytes(config.max_request_head)
        .with_header_read_timeout(config.handshake_timeout)
        .with_http2(Http2Config::default().with_h2c(false));
    Arc::new(Server::<_, MakeMarker>::with_config(
        MakeForward::new(config),
        http,
    ))
}

/// The proxy's HTTP side as a make-service for `fibr::serve` (over TLS, HTTP/2 and
/// HTTP/3 too): each connection gets a [`Forward`], which tunnels `CONNECT` (any HTTP
/// version: `fibr::http::tunnel`) and forwards `http://` requests, under the rules.
#[derive(Clone)]
pub struct MakeForward {
    config: Arc<ProxyConfig>,
    client: Client<TargetConnector>,
}

impl MakeForward {
    /// The make-service for `config`'s rules and limits.
    pub fn new(config: Arc<ProxyConfig>) -> MakeForward {
        let client = Client::builder()
            .connect_timeout(config.connect_timeout)
            .request_timeout(config.response_timeout)
            .http1_only(true)
            .build_with_connector(TargetConnector {
                config: config.clone(),
            });
        MakeForward { config, client }
    }
}

impl tower_service::Service<ConnInfo> for MakeForward {
    type Response = Forward;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Forward, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, info: ConnInfo) -> Self::Future {
        std::future::ready(Ok(Forward {
            config: self.config.clone(),
            client: self.client.clone(),
            client_ip: info.peer.map(|a| a.ip()),
        }))
    }
}

/// The service of one client connection: checks each request, tunnels a `CONNECT`,
/// cleans and forwards the others.
pub struct Forward {
    config: Arc<ProxyConfig>,
    client: Client<TargetConnector>,
    client_ip: Option<IpAddr>,
}

impl tower_service::Service<Request<Incoming>> for Forward {
    type Response = Response<ForwardBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<ForwardBody>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Incoming>) -> Self::Future {
        if req.method() == http::Method::CONNECT {
            return Box::pin(self.tunnel(req));
        }
        let prepared = self.prepare(req);
        let client = self.client.clone();
        Box::pin(async move {
            let req = match prepared {
                Ok(req) => req,
                Err(refusal) => return Ok(refusal.answer()),
            };
            let target = req.uri().clone();
            Ok(match client.request(req).await {
                Ok(resp) => {
                    let (mut head, body) = resp.into_parts();
                    strip_hop_by_hop(&mut head.headers);
                    add_via(&mut head.headers);
                    Response::from_parts(head, Either::Left(Either::Left(body)))
                }
                Err(e) => {
                    tracing::debug!(%target, error = %e, "forwarded request failed");
                    answer_error(&e)
                }
            })
        })
    }
}

impl Forward {
    /// The client rules, with the request's `Proxy-Authorization`.
    fn authorize(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let rules = &self.config.rules;
        let authed = headers
            .get(header::PROXY_AUTHORIZATION)
            .and_then(|v| basic(v.as_bytes()))
            .is_some_and(|creds| rules.verify(&creds));
        rules
            .check_client(self.client_ip, authed)
            .map_err(Refusal::Rules)
    }

    /// A `CONNECT`: the target dialed under the rules (within the connect timeout), then
    /// the tunnel joined to it; a refusal or a failed dial is answered instead.
    fn tunnel(
        &self,
        mut req: Request<Incoming>,
    ) -> impl Future<Output = Result<Response<ForwardBody>, Infallible>> + Send + 'static {
        let checked = self.authorize(req.headers()).and_then(|()| {
            let connect = tunnel::accept(&mut req).map_err(|_| {
                Refusal::Status(StatusCode::BAD_REQUEST, "this CONNECT cannot be tunneled")
            })?;
            let target = match connect.authority() {
                Some(a) if a.port_u16().is_some() => Uri::from(a.clone()),
                _ => {
                    return Err(Refusal::Status(
                        StatusCode::BAD_REQUEST,
                        "CONNECT names host:port",
                    ))
                }
            };
            Ok((connect, target))
        });
        let dialer = TargetConnector {
            config: self.config.clone(),
        };
        let (timeout, relay) = (self.config.connect_timeout, self.config.relay.clone());
        async move {
            let (connect, target) = match checked {
                Ok(c) => c,
                Err(refusal) => return Ok(refusal.answer()),
            };
            let dialed = crate::engine::time::timeout(timeout, dialer.connect(&target)).await;
            let tcp = match dialed {
                Ok(Ok(tcp)) => tcp,
                Ok(Err(e)) => {
                    tracing::debug!(%target, error = %e, "CONNECT's target not reached");
                    return Ok(answer_error(&e));
                }
                Err(_) => {
                    return Ok(status(
                        StatusCode::GATEWAY_TIMEOUT,
                        "the target did not answer in time",
                    ))
                }
            };
            let res = connect
                .buffer(relay.buffer)
                .on_open(move |t| async move { super::pipe::pipe(t, tcp, &relay).await });
            Ok(res.map(|b| Either::Left(Either::Right(b))))
        }
    }

    /// The request to send on, or why the proxy refuses it.
    fn prepare(&self, mut req: Request<Incoming>) -> Result<Request<Incoming>, Refusal> {
        self.authorize(req.headers())?;
        let uri = req.uri();
        if uri.scheme() != Some(&http::uri::Scheme::HTTP) {
            return Err(match uri.scheme() {
                None => Refusal::Status(
                    StatusCode::BAD_REQUEST,
                    "a proxy request names its target in full (http://host/path)",
                ),
                Some(_) => Refusal::Status(
                    StatusCode::NOT_IMPLEMENTED,
                    "only http:// is forwarded; use CONNECT for https://",
                ),
            });
        }
        let Some(authority) = uri.authority().cloned() else {
            return Err(Refusal::Status(
                StatusCode::BAD_REQUEST,
                "the target has no host",
            ));
        };
        let headers = req.headers_mut();
        strip_hop_by_hop(headers);
        // RFC 9112 §3.2.2: the target's authority replaces a Host field the client sent.
        match HeaderValue::from_str(authority.as_str()) {
            Ok(host) => headers.insert(header::HOST, host),
            Err(_) => {
                return Err(Refusal::Status(
                    StatusCode::BAD_REQUEST,
                    "invalid target authority",
                ))
            }
        };
        add_via(headers);
        Ok(req)
    }
}

fn add_via(headers: &mut HeaderMap) {
    headers.append(header::VIA, HeaderValue::from_static(VIA));
}

/// The proxy's own answer: a status and a line saying why.
fn status(code: StatusCode, why: &str) -> Response<ForwardBody> {
    let mut resp = Response::new(Either::Right(Full::new(Bytes::from(format!("{why}\n")))));
    *resp.status_mut() = code;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// Why the proxy answers a request itself instead of forwarding it.
enum Refusal {
    /// The rules (client, credentials, target) say no.
    Rules(Failure),
    /// The request cannot be forwarded: a status and a line saying why.
    Status(StatusCode, &'static str),
}

impl Refusal {
    fn answer(self) -> Response<ForwardBody> {
        match self {
            Refusal::Rules(why) => refusal(why),
            Refusal::Status(code, why) => status(code, why),
        }
    }
}

fn refusal(why: Failure) -> Response<ForwardBody> {
    match why {
        Failure::AuthRequired => {
            let mut resp = status(
                StatusCode::PROXY_AUTHENTICATION_REQUIRED,
                "proxy authentication required",
            );
            resp.headers_mut().insert(
                header::PROXY_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"proxy\""),
            );
            resp
        }
        _ => status(StatusCode::FORBIDDEN, "not allowed by the proxy's rules"),
    }
}

/// A failure to reach the target or to get its response, as a gateway status.
fn answer_error(e: &Error) -> Response<ForwardBody> {
    let refused_by_rules = std::error::Error::source(e).is_some_and(|s| s.is::<NotAllowed>());
    if refused_by_rules {
        return refusal(Failure::NotAllowed);
    }
    let code = if e.is_timeout() {
        StatusCode::GATEWAY_TIMEOUT
    } else {
        StatusCode::BAD_GATEWAY
    };
    status(code, &e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_answer_gateway_statuses() {
        let refused = Error::from_connect_io(std::io::ErrorKind::ConnectionRefused.into());
        assert_eq!(answer_error(&refused).status(), StatusCode::BAD_GATEWAY);
        let slow = Error::new(ErrorKind::Timeout, "slow");
        assert_eq!(answer_error(&slow).status(), StatusCode::GATEWAY_TIMEOUT);
        let ruled_out = Error::new(ErrorKind::Connect, NotAllowed);
        assert_eq!(answer_error(&ruled_out).status(), StatusCode::FORBIDDEN);
        let auth = refusal(Failure::AuthRequired);
        assert_eq!(auth.status(), StatusCode::PROXY_AUTHENTICATION_REQUIRED);
        assert!(auth.headers().contains_key(header::PROXY_AUTHENTICATE));
    }
}
