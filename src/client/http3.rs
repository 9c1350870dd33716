//! HTTP/3 in fibr's client (features `client` and `http3`): `https://` requests over QUIC
//! by prior knowledge ([`Builder::http3_prior_knowledge`](super::Builder::http3_prior_knowledge)),
//! or once a server advertised it in `Alt-Svc` ([`Builder::http3_alt_svc`](super::Builder::http3_alt_svc)).
//!
//! One QUIC connection per origin carries every request (h3's `SendRequest`, with h3's
//! connection driven on a task of its own); the QUIC side is `http::http3::client`. A
//! route learned from `Alt-Svc` that fails to connect is forgotten and the request goes
//! over TCP, as browsers do.

use super::body::{ReqBody, ResponseBody, StreamBody};
use super::connect::Key;
use super::error::{BoxError, Error, ErrorKind, Failure};
use crate::http::http3::{client as quic_client, QuicConn, RecvStream};
use crate::http::pump::{next, Next};
use bytes::{Buf, Bytes};
use http::header::{HeaderMap, ALT_SVC, CONTENT_LENGTH, HOST};
use http::{Method, Request, Response, Uri, Version};
use http_body::{Body, Frame};
use std::collections::HashMap;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

type SendRequest = ::h3::client::SendRequest<QuicConn, Bytes>;
type RecvHalf = ::h3::client::RequestStream<RecvStream, Bytes>;

/// When requests go over HTTP/3 (both off by default).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Options {
    pub prior_knowledge: bool,
    pub alt_svc: bool,
}

/// Where a route learned from `Alt-Svc` leads, and until when.
struct AltSvc {
    host: Option<String>,
    port: u16,
    expires: Instant,
}

/// The client's HTTP/3 state: its TLS config, connections and learned routes.
pub(crate) struct Http3 {
    options: Options,
    tls: Arc<rustls::ClientConfig>,
    idle_timeout: Duration,
    conns: Mutex<HashMap<Key, H3Conn>>,
    routes: Mutex<HashMap<Key, AltSvc>>,
}

/// How long QUIC keeps a silent connection (the server's own limit may be shorter).
const QUIC_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

impl Http3 {
    /// `None` when neither way to HTTP/3 is on.
    pub(crate) fn new(options: Options, tls: Arc<rustls::ClientConfig>) -> Option<Http3> {
        (options.prior_knowledge || options.alt_svc).then(|| Http3 {
            options,
            tls,
            idle_timeout: QUIC_IDLE_TIMEOUT,
            conns: Mutex::new(HashMap::new()),
            routes: Mutex::new(HashMap::new()),
        })
    }

    /// The UDP host and port `key`'s requests go to over HTTP/3, if they do.
    fn route(&self, key: &Key) -> Option<(String, u16)> {
        if key.scheme != http::uri::Scheme::HTTPS {
            return None;
        }
        let host = key.authority.host().to_owned();
        if self.options.prior_knowledge {
            return Some((host, key.authority.port_u16().unwrap_or(443)));
        }
        let mut routes = self.routes.lock().unwrap();
        let alt = routes.get(key)?;
        if alt.expires <= Instant::now() {
            routes.remove(key);
            return None;
        }
        Some((alt.host.clone().unwrap_or(host), alt.port))
    }

    /// Sends `req` (origin form, Host set) over HTTP/3 if `key` goes there: `None` when
    /// it does not, or when a route learned from `Alt-Svc` failed to connect (it is
    /// forgotten; the caller goes over TCP with `req` untouched).
    pub(crate) async fn send(
        &self,
        key: &Key,
        req: &mut Request<ReqBody>,
        max_body: Option<u64>,
        connect_timeout: Option<Duration>,
    ) -> Option<Result<Response<ResponseBody>, Error>> {
        let (host, port) = self.route(key)?;
        let mut fresh = false;
        loop {
            let conn = match self.conn(key, &host, port, connect_timeout, fresh).await {
                Ok(c) => c,
                Err(_) if !self.options.prior_knowledge => {
                    self.routes.lock().unwrap().remove(key);
                    return None;
                }
                Err(e) => return Some(Err(e)),
            };
            // A request the server never took (a GOAWAY, a closing connection) goes again
            // on a fresh connection, once, if its body is still whole.
            let again = !fresh && req.body().try_clone().is_some();
            let r = match conn.send(super::take_or_copy(req), key, max_body).await {
                Ok(res) => return Some(Ok(res)),
                Err(Failure::NotSent(e)) if again => e,
                Err(Failure::NotSent(e) | Failure::Sent(e)) => return Some(Err(e)),
            };
            tracing::debug!(error = %r, "HTTP/3 request not taken; again on a new connection");
            self.conns.lock().unwrap().remove(key);
            fresh = true;
        }
    }

    /// The open connection for `key`, or a new one (always new with `fresh`).
    async fn conn(
        &self,
        key: &Key,
        host: &str,
        port: u16,
        connect_timeout: Option<Duration>,
        fresh: bool,
    ) -> Result<H3Conn, Error> {
        if !fresh {
            if let Some(c) = self.conns.lock().unwrap().get(key) {
                if c.quic.is_open() {
                    return Ok(c.clone());
                }
            }
        }
        let connecting = H3Conn::connect(host, port, self.tls.clone(), self.idle_timeout);
        let conn = match connect_timeout {
            None => connecting.await?,
            Some(t) => crate::engine::time::timeout(t, connecting)
                .await
                .map_err(|_| {
                    Error::new(
                        ErrorKind::ConnectTimeout,
                        format!("connecting to {host}:{port} over QUIC took longer than {t:?}"),
                    )
                })??,
        };
        self.conns.lock().unwrap().insert(key.clone(), conn.clone());
        Ok(conn)
    }

    /// Notes what a response over TCP says of HTTP/3 (`Alt-Svc`: `h3` with an optional
    /// host, its port and `ma`; `clear` forgets).
    pub(crate) fn learn(&self, key: &Key, headers: &HeaderMap) {
        if !self.options.alt_svc || key.scheme != http::uri::Scheme::HTTPS {
            return;
        }
        for value in headers.get_all(ALT_SVC) {
            let Ok(value) = value.to_str() else { continue };
            match parse_alt_svc(value) {
                Some(AltSvcValue::Clear) => {
                    self.routes.lock().unwrap().remove(key);
                }
                Some(AltSvcValue::H3 {
                    host,
                    port,
                    max_age,
                }) => {
                    let alt = AltSvc {
                        host,
                        port,
                        expires: Instant::now() + max_age,
                    };
                    self.routes.lock().unwrap().insert(key.clone(), alt);
                }
                None => {}
            }
        }
    }
}

/// What one `Alt-Svc` field value says of HTTP/3.
#[derive(Debug, PartialEq)]
enum AltSvcValue {
    Clear,
    H3 {
        host: Option<String>,
        port: u16,
        max_age: Duration,
    },
}

/// The first `h3` alternative in an `Alt-Svc` value (RFC 7838: `h3=":443"; ma=3600`,
/// alternatives separated by commas), or `clear`. `ma` defaults to 24 hours.
fn parse_alt_svc(value: &str) -> Option<AltSvcValue> {
    if value.trim() == "clear" {
        return Some(AltSvcValue::Clear);
    }
    value.split(',').find_map(|alt| {
        let mut params = alt.split(';');
        let (protocol, authority) = params.next()?.trim().split_once('=')?;
        if protocol != "h3" {
            return None;
        }
        let (host, port) = authority.trim().trim_matches('"').rsplit_once(':')?;
        let port = port.parse().ok()?;
        let host = (!host.is_empty()).then(|| host.to_owned());
        let max_age = params
            .filter_map(|p| p.trim().strip_prefix("ma="))
            .find_map(|s| s.parse().ok())
            .map_or(Duration::from_secs(86_400), Duration::from_secs);
        Some(AltSvcValue::H3 {
            host,
            port,
            max_age,
        })
    })
}

/// An HTTP/3 connection: h3's request sender over a QUIC connection.
#[derive(Clone)]
struct H3Conn {
    send: SendRequest,
    quic: QuicConn,
}

impl H3Conn {
    async fn connect(
        host: &str,
        port: u16,
        tls: Arc<rustls::ClientConfig>,
        idle_timeout: Duration,
    ) -> Result<H3Conn, Error> {
        let addrs = crate::engine::net::lookup_host((host, port))
            .await
            .map_err(|e| Error::new(ErrorKind::Dns, e))?;
        let addr: SocketAddr = addrs
            .into_iter()
            .next()
            .ok_or_else(|| Error::new(ErrorKind::Dns, format!("{host} has no address")))?;
        let name = host.trim_start_matches('[').trim_end_matches(']');
        let quic = quic_client::connect(addr, name, tls, idle_timeout)
            .await
            .map_err(|e| {
                let kind = match e.kind() {
                    std::io::ErrorKind::TimedOut => ErrorKind::ConnectTimeout,
                    std::io::ErrorKind::ConnectionRefused => ErrorKind::ConnectRefused,
                    _ => ErrorKind::Connect,
                };
                Error::new(kind, e)
            })?;
        let (mut driver, send) = ::h3::client::new(quic.clone())
            .await
            .map_err(|e| Error::new(ErrorKind::Connect, e))?;
        // h3's connection task: control streams and GOAWAY; it ends with the connection.
        drop(crate::engine::runtime::spawn(async move {
            let e = poll_fn(|cx| driver.poll_close(cx)).await;
            tracing::debug!(error = %e, "HTTP/3 connection ended");
        }));
        Ok(H3Conn { send, quic })
    }

    /// Sends `req` (origin form, Host set) on a new stream; answers once the response
    /// head has arrived, its body streaming after.
    async fn send(
        &self,
        req: Request<ReqBody>,
        key: &Key,
        max_body: Option<u64>,
    ) -> Result<Response<ResponseBody>, Failure> {
        let (mut parts, body) = req.into_parts();
        let head_only = parts.method == Method::HEAD;
        // HTTP/3 names the authority in the URI (`:authority`), never in a Host field.
        let authority = match parts.headers.remove(HOST) {
            Some(h) => h.to_str().unwrap_or(key.authority.as_str()).to_owned(),
            None => key.authority.as_str().to_owned(),
        };
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        parts.uri = Uri::builder()
            .scheme("https")
            .authority(authority)
            .path_and_query(path)
            .build()
            .map_err(|e| Failure::NotSent(Error::new(ErrorKind::InvalidUri, e)))?;
        parts.version = Version::HTTP_3;
        if let Some(p) = parts.extensions.get::<crate::http::Protocol>() {
            // An extended CONNECT (RFC 9220): h3 cannot send `:protocol` itself.
            if parts.method == Method::CONNECT {
                let value = http::HeaderValue::from_str(p.as_str())
                    .map_err(|e| Failure::NotSent(Error::new(ErrorKind::InvalidUri, e)))?;
                let marker = http::HeaderName::from_static(crate::proto::h3::PROTOCOL_MARKER);
                parts.headers.insert(marker, value);
                // A client accepts no request streams: no bound to give.
                self.quic.carry_protocols(0);
            }
        }
        let mut sender = self.send.clone();
        let stream = sender
            .send_request(Request::from_parts(parts, ()))
            .await
            .map_err(|e| Failure::NotSent(Error::new(ErrorKind::ClosedBeforeResponse, e)))?;
        let (mut tx, mut rx) = stream.split();
        if body.is_end_stream() {
            let _ = tx.finish().await;
        } else {
            // Sent while the response is awaited and read.
            drop(crate::engine::runtime::spawn(async move {
                if let Err(e) = upload(&mut tx, body).await {
                    tracing::debug!(error = %e, "HTTP/3 request body not sent");
                    tx.stop_stream(::h3::error::Code::H3_REQUEST_CANCELLED);
                }
            }));
        }
        let head = rx
            .recv_response()
            .await
            .map_err(|e| Failure::Sent(Error::new(ErrorKind::ClosedBeforeResponse, e)))?;
        let length = head
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if let (Some(limit), Some(n)) = (max_body, length) {
            if n > limit {
                return Err(Failure::Sent(Error::new(
                    ErrorKind::BodyTooLarge,
                    format!("content-length {n} over the limit of {limit}"),
                )));
            }
        }
        let bodiless = head_only || matches!(head.status().as_u16(), 204 | 304);
        let (parts, ()) = head.into_parts();
        let mut res = Response::from_parts(parts, ResponseBody::empty());
        if !bodiless {
            *res.body_mut() =
                ResponseBody::multiplexed(Box::new(H3Body::new(rx, length)), max_body);
        }
        Ok(res)
    }
}

/// Sends `body`'s frames on the request stream, then finishes it.
async fn upload(
    tx: &mut ::h3::client::RequestStream<crate::http::http3::SendStream<Bytes>, Bytes>,
    body: ReqBody,
) -> Result<(), BoxError> {
    let mut body = std::pin::pin!(body);
    loop {
        match next(body.as_mut()).await {
            Next::Data(data, _) if data.is_empty() => {}
            Next::Data(data, _) => tx.send_data(data).await?,
            Next::Trailers(trailers) => {
                tx.send_trailers(trailers).await?;
                return Ok(());
            }
            Next::End => break,
            Next::Failed(e) => return Err(e),
        }
    }
    tx.finish().await?;
    Ok(())
}

/// A response body read from its HTTP/3 stream: data, then trailers if any.
pub(crate) struct H3Body {
    rx: RecvHalf,
    /// What `content-length` said is left.
    remaining: Option<u64>,
    data_done: bool,
    done: bool,
}

impl H3Body {
    fn new(rx: RecvHalf, length: Option<u64>) -> H3Body {
        H3Body {
            rx,
            remaining: length,
            data_done: false,
            done: false,
        }
    }
}

impl StreamBody for H3Body {
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let incomplete = |e: &dyn std::fmt::Display| {
            Error::new(
                ErrorKind::IncompleteBody,
                format!("the HTTP/3 stream failed: {e}"),
            )
        };
        if self.done {
            return Poll::Ready(None);
        }
        if !self.data_done {
            match ready!(self.rx.poll_recv_data(cx)) {
                Ok(Some(mut data)) => {
                    let data = data.copy_to_bytes(data.remaining());
                    if let Some(r) = &mut self.remaining {
                        *r = r.saturating_sub(data.len() as u64);
                    }
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Ok(None) => self.data_done = true,
                Err(e) => {
                    self.done = true;
                    return Poll::Ready(Some(Err(incomplete(&e))));
                }
            }
        }
        self.done = true;
        match ready!(self.rx.poll_recv_trailers(cx)) {
            Ok(Some(trailers)) => Poll::Ready(Some(Ok(Frame::trailers(trailers)))),
            Ok(None) => Poll::Ready(None),
            Err(e) => Poll::Ready(Some(Err(incomplete(&e)))),
        }
    }

    fn remaining(&self) -> Option<u64> {
        self.remaining
    }

    fn is_end(&self) -> bool {
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alt_svc_values() {
        let h3 = |host: Option<&str>, port, secs| AltSvcValue::H3 {
            host: host.map(str::to_owned),
            port,
            max_age: Duration::from_secs(secs),
        };
        assert_eq!(
            parse_alt_svc(r#"h3=":443"; ma=3600"#),
            Some(h3(None, 443, 3600))
        );
        assert_eq!(parse_alt_svc(r#"h3=":8443""#), Some(h3(None, 8443, 86_400)));
        assert_eq!(
            parse_alt_svc(r#"h2="alt.example:443", h3="alt.example:4433"; ma=60; persist=1"#),
            Some(h3(Some("alt.example"), 4433, 60))
        );
        assert_eq!(parse_alt_svc("clear"), Some(AltSvcValue::Clear));
        assert_eq!(parse_alt_svc(r#"h3-29=":443""#), None);
        assert_eq!(parse_alt_svc(r#"h3=":notaport""#), None);
        assert_eq!(parse_alt_svc(""), None);
    }
}
