//! Tunnels through proxies spoken to over TLS or HTTP/2: the [`Secure`] the builder lends
//! its connector (the proxy module sits below the client's TLS and HTTP/2, so it cannot
//! reach them itself).
//!
//! An `https://` proxy gets TLS with the client's driver (`tls.rs`), then a `CONNECT`:
//! on an HTTP/2 connection when ALPN picks `h2` (or by prior knowledge: h2c for an
//! `http://` proxy), else HTTP/1.1's machine (`proxy/http_connect.rs`) on the TLS stream,
//! which is then the tunnel. A proxy's HTTP/2 connection is shared by its tunnels as an
//! origin's is by requests: an [`IdlePool`] keeps it, and while one is being made to a
//! proxy known to speak HTTP/2 the other tunnels wait for it.
//!
//! Over HTTP/2 a tunnel is a `CONNECT` stream (RFC 9113 §8.5: `:method` and `:authority`
//! only, which `proto::h2::client` encodes for a CONNECT without `:protocol`): its request
//! body is the tunnel's output (`http::pipe`'s bounded queue, which the connection's task
//! sends as the stream's window allows), its response body the input (the proxy's window
//! reopens as the caller reads), the two joined by [`StreamPipe`]. A `2xx` opens it; any
//! other status is the proxy's refusal, classed as an HTTP/1.1 `CONNECT`'s is.

use super::body::ReqBody;
use super::connect::{Connection, Key};
use super::error::{Error, ErrorKind, Failure};
use super::h2::H2Conn;
use super::pool::{H2Claim, IdlePool};
use super::proxy::{Endpoint, Proxy, ProxyTunnel, Secure};
use crate::dial::HyperIo;
use crate::engine::net::TcpStream;
use crate::http::pipe::{StreamIo, StreamPipe, UpgradeBody};
use crate::proto::h1::client::ResponseLimits;
use crate::proto::h2::client::ClientConfig as H2Config;
use http::header::{HeaderValue, HOST, PROXY_AUTHORIZATION};
use http::uri::Scheme;
use http::{Method, Request};
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// The client's way to proxies spoken to over TLS or HTTP/2, and their shared HTTP/2
/// connections.
pub(crate) struct Proxied {
    h2: H2Config,
    /// How long a proxy's HTTP/2 connection without tunnels is kept.
    idle_timeout: Option<Duration>,
    /// The client's TLS settings, for a proxy without its own.
    #[cfg(feature = "tls")]
    tls: Option<Arc<crate::tls::rustls::ClientConfig>>,
    /// Only its HTTP/2 half is used (no HTTP/1.1 connection to a proxy is kept: each is
    /// one tunnel).
    pool: Arc<IdlePool<TcpStream>>,
}

/// A new connection to the proxy: HTTP/2 (to share), or a tunnel already (HTTP/1.1).
enum Link {
    H2(H2Conn),
    Tunnel(ProxyTunnel),
}

impl Proxied {
    pub(crate) fn new(
        h2: H2Config,
        idle_timeout: Option<Duration>,
        #[cfg(feature = "tls")] tls: Option<Arc<crate::tls::rustls::ClientConfig>>,
    ) -> Proxied {
        Proxied {
            h2,
            idle_timeout,
            #[cfg(feature = "tls")]
            tls,
            pool: Arc::new(IdlePool::new(0, idle_timeout)),
        }
    }

    async fn open(
        &self,
        proxy: &Proxy,
        authority: &str,
        limits: ResponseLimits,
    ) -> Result<ProxyTunnel, Error> {
        let endpoint = proxy.endpoint()?;
        let scheme = if endpoint.is_tls() {
            Scheme::HTTPS
        } else {
            Scheme::HTTP
        };
        let key = Key::new(scheme, endpoint.authority()?);
        // A shared connection may turn out closing (GOAWAY) before it takes the stream:
        // then once more, on a new one.
        let mut reused = true;
        loop {
            let h2 = match self.pool.h2_get(&key) {
                Some(h2) => h2,
                None => {
                    reused = false;
                    match self
                        .shared(proxy, endpoint, &key, authority, limits)
                        .await?
                    {
                        Link::H2(h2) => h2,
                        Link::Tunnel(tunnel) => return Ok(tunnel),
                    }
                }
            };
            match connect_stream(&h2, &key, endpoint, authority, proxy.buffer()).await {
                Ok(tunnel) => return Ok(tunnel),
                Err(Failure::NotSent(_)) if reused => reused = false,
                Err(Failure::NotSent(e) | Failure::Sent(e)) => return Err(e),
            }
        }
    }

    /// The proxy's HTTP/2 connection: one made by another tunnel meanwhile, or a new
    /// one (made once for all the tunnels waiting, when the proxy is known to speak
    /// HTTP/2); or, if the proxy speaks HTTP/1.1, this tunnel.
    async fn shared(
        &self,
        proxy: &Proxy,
        endpoint: &Endpoint,
        key: &Key,
        authority: &str,
        limits: ResponseLimits,
    ) -> Result<Link, Error> {
        let guard = if proxy.speaks_http2_only() || self.pool.h2_known(key) {
            match poll_fn(|cx| self.pool.poll_h2_claim(key, cx)).await {
                H2Claim::Ready(h2) => return Ok(Link::H2(h2)),
                H2Claim::Connect(guard) => Some(guard),
            }
        } else {
            None
        };
        let link = self.connect(proxy, endpoint, authority, limits).await?;
        if let Link::H2(h2) = &link {
            match guard {
                Some(g) => g.fulfill(h2),
                None => self.pool.h2_put(key, h2),
            }
        }
        Ok(link)
    }

    /// A new connection to the proxy.
    async fn connect(
        &self,
        proxy: &Proxy,
        endpoint: &Endpoint,
        authority: &str,
        limits: ResponseLimits,
    ) -> Result<Link, Error> {
        let tcp = endpoint.connect().await?;
        // Every byte of a tunnel crosses this connection: no Nagle delay on small writes.
        let _ = tcp.set_nodelay(true);
        if !endpoint.is_tls() {
            // h2c by prior knowledge (an HTTP/1.1 proxy over TCP is not `Secure`'s).
            return Ok(Link::H2(self.start_h2(tcp)));
        }
        self.over_tls(proxy, endpoint, tcp, authority, limits).await
    }

    #[cfg(feature = "tls")]
    async fn over_tls(
        &self,
        proxy: &Proxy,
        endpoint: &Endpoint,
        tcp: TcpStream,
        authority: &str,
        limits: ResponseLimits,
    ) -> Result<Link, Error> {
        let config = proxy
            .tls()
            .or(self.tls.as_ref())
            .cloned()
            .unwrap_or_else(crate::tls::default_client_config);
        let h2_only = proxy.speaks_http2_only();
        let offer: &[&[u8]] = if h2_only {
            &[b"h2"]
        } else {
            &[b"h2", b"http/1.1"]
        };
        let config = super::tls::with_alpn(config, offer);
        let mut tls = super::tls::handshake(tcp, endpoint.host(), config)
            .await
            .map_err(|e| Error::new(e.kind(), format!("TLS with the proxy {endpoint}: {e}")))?;
        if h2_only || tls.connected().is_negotiated_h2() {
            return Ok(Link::H2(self.start_h2(tls)));
        }
        endpoint
            .connect_over(HyperIo(&mut tls), authority, limits)
            .await?;
        Ok(Link::Tunnel(ProxyTunnel::new(tls)))
    }

    #[cfg(not(feature = "tls"))]
    async fn over_tls(
        &self,
        _: &Proxy,
        endpoint: &Endpoint,
        _: TcpStream,
        _: &str,
        _: ResponseLimits,
    ) -> Result<Link, Error> {
        Err(Error::new(
            ErrorKind::InvalidUri,
            format!("the proxy {endpoint} needs TLS: fibr's `tls` feature"),
        ))
    }

    fn start_h2<Io: Connection>(&self, io: Io) -> H2Conn {
        H2Conn::start(io, &self.h2, self.idle_timeout)
    }
}

impl Secure for Proxied {
    fn tunnel<'a>(
        &'a self,
        proxy: &'a Proxy,
        authority: &'a str,
        limits: ResponseLimits,
    ) -> Pin<Box<dyn Future<Output = Result<ProxyTunnel, Error>> + Send + 'a>> {
        Box::pin(self.open(proxy, authority, limits))
    }
}

/// A `CONNECT` to `authority` on a new stream of `h2`; the tunnel once the proxy's `2xx`
/// came.
async fn connect_stream(
    h2: &H2Conn,
    key: &Key,
    endpoint: &Endpoint,
    authority: &str,
    buffer: usize,
) -> Result<ProxyTunnel, Failure> {
    let output = StreamIo::new(buffer);
    let mut req = Request::new(ReqBody::new(UpgradeBody::stream(output.clone(), None)));
    *req.method_mut() = Method::CONNECT;
    let bad = |e| Failure::NotSent(Error::new(ErrorKind::InvalidUri, e));
    // The connection's task sends the Host as `:authority`.
    let host = HeaderValue::from_str(authority).map_err(bad)?;
    req.headers_mut().insert(HOST, host);
    if let Some(auth) = endpoint.authorization() {
        req.headers_mut().insert(PROXY_AUTHORIZATION, auth.clone());
    }
    let res = h2.send(req, key, None).await.map_err(|f| {
        let proxied = |e: Error| {
            Error::new(
                ErrorKind::Proxy,
                format!("the proxy {endpoint} over HTTP/2, CONNECT {authority}: {e}"),
            )
        };
        match f {
            Failure::NotSent(e) => Failure::NotSent(proxied(e)),
            Failure::Sent(e) => Failure::Sent(proxied(e)),
        }
    })?;
    if !res.status().is_success() {
        return Err(Failure::Sent(endpoint.refusal(res.status())));
    }
    Ok(ProxyTunnel::new(StreamPipe::new(res.into_body(), output)))
}
