//! The client through proxies: which requests go through which [`Proxy`], and the dial.
//!
//! - `http://` proxies: `https://` targets (and any other stream TLS runs over) go through
//!   a `CONNECT` tunnel; `http://` requests are forwarded in absolute form
//!   (`GET http://host/path`), as curl and reqwest do, unless [`Proxy::http_tunnel`]
//!   asks for a tunnel for them too. Credentials in the URL (or [`Proxy::basic_auth`])
//!   go as `Proxy-Authorization: Basic`.
//! - `https://` proxies (feature `tls`): TLS to the proxy (its certificate checked against
//!   [`Proxy::tls_config`]'s roots, else the client's), then a `CONNECT` for every target,
//!   over HTTP/2 when the proxy's ALPN picks `h2` (RFC 9113 §8.5: one stream per tunnel,
//!   many tunnels on one connection, each paced by its stream's flow control), else over
//!   HTTP/1.1. [`Proxy::http2_prior_knowledge`] makes an `http://` proxy an HTTP/2 one
//!   too (h2c), and an `https://` one offer `h2` alone.
//! - `socks5://` (names resolved here), `socks5h://` (the proxy resolves them), with
//!   RFC 1929 username/password; `socks4://` (resolved here, IPv4 only) and `socks4a://`
//!   (the proxy resolves), the user name going as the SOCKS4 user id.
//!
//! The handshakes are sans-IO machines: SOCKS in `proto::socks::client`, `CONNECT` in
//! `http_connect.rs` (and HTTP/2's in `proto::h2::client`, run by the client's HTTP/2
//! connections); `crate::dial`'s handshake driver runs the first two. TLS and HTTP/2 are
//! the client's, above this module: the client's builder lends them (`secure.rs`'s
//! `Secure`, `client/proxied.rs`). The proxy's answer is a typed error with a kind of its
//! own: [`ErrorKind::ProxyAuth`] for credentials wanted or refused,
//! [`ErrorKind::ConnectRefused`] for a target the SOCKS proxy found refusing,
//! [`ErrorKind::Proxy`] for every other refusal or garbage (an HTTP/2 proxy's non-2xx
//! answer, or its reset of the stream), and [`ErrorKind::ConnectTimeout`] past
//! [`Proxy::handshake_timeout`].

mod env;
mod http_connect;
mod no_proxy;
mod secure;

use super::error::{Error, ErrorKind};
use super::resolve::resolve;
use crate::dial::{drive, Failed, HandshakeIo};
use crate::engine::net::TcpStream;
use crate::proto::h1::client::ResponseLimits;
use crate::proto::socks::client::{Socks4, Socks5};
use crate::proto::socks::{SocksError, Target};
use crate::proto::tunnel::ClientHandshake;
use base64::Engine as _;
use http::{HeaderValue, Uri};
use http_connect::{ConnectError, HttpConnect};
use no_proxy::NoProxy;
pub use secure::ProxyTunnel;
pub(crate) use secure::{Opened, Secure};
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// A proxy and the requests it takes: see [`Builder::proxy`](super::Builder::proxy).
///
/// ```
/// # fn demo() -> Result<(), fibr::client::Error> {
/// use fibr::client::{Client, Proxy};
/// let client = Client::builder()
///     .proxy(Proxy::all("socks5h://127.0.0.1:1080")?.no_proxy("localhost,10.0.0.0/8"))
///     .build();
/// # let _ = client; Ok(()) }
/// ```
#[derive(Clone)]
pub struct Proxy {
    /// An unusable proxy from the environment fails the requests it would take, rather
    /// than letting them go direct.
    endpoint: Result<Arc<Endpoint>, Arc<str>>,
    schemes: Schemes,
    no_proxy: Option<NoProxy>,
    http_tunnel: bool,
    handshake_timeout: Duration,
    /// HTTP/2 from the first byte (h2c; over TLS, `h2` the only protocol offered).
    http2_prior_knowledge: bool,
    /// Bytes a tunnel over HTTP/2 queues before its writes wait for the stream's window.
    tunnel_buffer: usize,
    /// The roots the proxy's certificate is checked against (else the client's).
    #[cfg(feature = "tls")]
    tls: Option<Arc<crate::tls::rustls::ClientConfig>>,
}

/// How long a proxy's handshake may take by default, once connected to it.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// What a tunnel over an HTTP/2 proxy queues by default before its writes wait.
const TUNNEL_BUFFER: usize = 64 * 1024;

/// Which targets a proxy takes, by their scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Schemes {
    Http,
    Https,
    All,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Http,
    /// HTTP over TLS to the proxy.
    Https,
    Socks4,
    Socks4a,
    Socks5,
    Socks5h,
}

impl Kind {
    fn is_http(self) -> bool {
        matches!(self, Kind::Http | Kind::Https)
    }

    fn scheme(self) -> &'static str {
        match self {
            Kind::Http => "http",
            Kind::Https => "https",
            Kind::Socks4 => "socks4",
            Kind::Socks4a => "socks4a",
            Kind::Socks5 => "socks5",
            Kind::Socks5h => "socks5h",
        }
    }
}

/// Where a proxy is and how to speak to it.
pub(crate) struct Endpoint {
    kind: Kind,
    /// As in a URI: an IPv6 address in brackets.
    host: String,
    port: u16,
    /// User name and password, percent-decoded.
    credentials: Option<(String, String)>,
    /// `Basic ...` of the credentials, for HTTP proxies.
    authorization: Option<HeaderValue>,
}

impl Endpoint {
    fn parse(url: &str) -> Result<Endpoint, String> {
        let url = url.trim();
        let uri: Uri = if url.contains("://") {
            url.parse()
        } else {
            // curl's rule: a proxy without a scheme is an HTTP proxy.
            format!("http://{url}").parse()
        }
        .map_err(|e| format!("proxy URL {url:?}: {e}"))?;
        let kind = match uri.scheme_str().map(str::to_ascii_lowercase).as_deref() {
            Some("http") => Kind::Http,
            Some("socks4") => Kind::Socks4,
            Some("socks4a") => Kind::Socks4a,
            Some("socks5") => Kind::Socks5,
            Some("socks5h") => Kind::Socks5h,
            #[cfg(feature = "tls")]
            Some("https") => Kind::Https,
            #[cfg(not(feature = "tls"))]
            Some("https") => {
                return Err(format!(
                    "proxy URL {url:?}: TLS to the proxy (https://) needs fibr's `tls` feature"
                ))
            }
            other => {
                return Err(format!(
                    "proxy URL {url:?}: scheme {other:?} is none of http, https, socks4, \
                     socks4a, socks5, socks5h"
                ))
            }
        };
        let authority = uri
            .authority()
            .filter(|a| !a.host().is_empty())
            .ok_or_else(|| format!("proxy URL {url:?} names no host"))?;
        let (userinfo, host_port) = match authority.as_str().rsplit_once('@') {
            Some((userinfo, host_port)) => (Some(userinfo), host_port),
            None => (None, authority.as_str()),
        };
        let port = match authority.port_u16() {
            Some(p) => p,
            // `http` drops a port that is not a u16.
            None if host_port.len() > authority.host().len() => {
                return Err(format!("proxy URL {url:?}: bad port"))
            }
            None if kind == Kind::Http => 80,
            None if kind == Kind::Https => 443,
            None => 1080,
        };
        let credentials = match userinfo {
            None => None,
            Some(userinfo) => {
                let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
                let decode = |s| {
                    percent_decode(s)
                        .ok_or_else(|| format!("proxy URL {url:?}: bad percent-encoding in {s:?}"))
                };
                Some((decode(user)?, decode(password)?))
            }
        };
        Ok(Endpoint::new(
            kind,
            authority.host().to_string(),
            port,
            credentials,
        ))
    }

    fn new(kind: Kind, host: String, port: u16, credentials: Option<(String, String)>) -> Endpoint {
        let authorization = credentials
            .as_ref()
            .filter(|_| kind.is_http())
            .and_then(|(user, password)| {
                let token =
                    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
                HeaderValue::from_str(&format!("Basic {token}")).ok()
            })
            .map(|mut v| {
                v.set_sensitive(true);
                v
            });
        Endpoint {
            kind,
            host,
            port,
            credentials,
            authorization,
        }
    }

    /// A TCP connection to the proxy itself.
    pub(crate) async fn connect(&self) -> Result<TcpStream, Error> {
        let addrs = resolve(&self.host, self.port).await?;
        let mut last = None;
        for a in addrs {
            match TcpStream::connect(a).await {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        let e = last.expect("resolve answers at least one address");
        Err(Error::new(
            Error::connect_io_kind(&e),
            format!("connecting to the proxy {self}: {e}"),
        ))
    }

    /// A tunnel through the proxy to `host:port` (`host` as in a URI).
    async fn tunnel(
        &self,
        host: &str,
        port: u16,
        limits: ResponseLimits,
        within: Duration,
    ) -> Result<TcpStream, Error> {
        let auth = self
            .credentials
            .as_ref()
            .map(|(u, p)| (u.as_str(), p.as_str()));
        match self.kind {
            Kind::Http | Kind::Https => {
                let authority = format!("{host}:{port}");
                let m = HttpConnect::new(&authority, self.authorization.as_ref(), limits);
                self.handshake(m, within, connect_kind).await
            }
            Kind::Socks5 | Kind::Socks5h => {
                let target = self.target(host, port).await?;
                let m = Socks5::new(&target, auth).map_err(socks_error)?;
                self.handshake(m, within, socks_kind).await
            }
            Kind::Socks4 | Kind::Socks4a => {
                let target = self.target(host, port).await?;
                let user_id = auth.map_or("", |(u, _)| u);
                let m = Socks4::new(&target, user_id).map_err(socks_error)?;
                self.handshake(m, within, socks_kind).await
            }
        }
    }

    /// The target as SOCKS sends it: the name itself for the proxy to resolve
    /// (socks5h, socks4a), or an address resolved here (socks4: an IPv4 one).
    async fn target(&self, host: &str, port: u16) -> Result<Target, Error> {
        let named = Target::from((host, port));
        if matches!(named, Target::Addr(_)) || matches!(self.kind, Kind::Socks5h | Kind::Socks4a) {
            return Ok(named);
        }
        let addrs = resolve(host, port).await?;
        let pick = if self.kind == Kind::Socks4 {
            addrs.iter().find(|a| a.is_ipv4())
        } else {
            addrs.first()
        };
        pick.map(|&a: &SocketAddr| Target::Addr(a)).ok_or_else(|| {
            Error::new(
                ErrorKind::Dns,
                format!("{host:?} has no IPv4 address for SOCKS4 (socks4a:// lets the proxy resolve it)"),
            )
        })
    }

    /// Connects to the proxy and runs `machine` for at most `within`; its errors are
    /// classed by `kind_of`.
    async fn handshake<H>(
        &self,
        machine: H,
        within: Duration,
        kind_of: fn(&H::Error) -> ErrorKind,
    ) -> Result<TcpStream, Error>
    where
        H: ClientHandshake,
        H::Error: std::error::Error + Send + Sync + 'static,
    {
        let stream = self.connect().await?;
        let Ok(done) =
            crate::engine::time::timeout(within, self.run(&stream, machine, kind_of)).await
        else {
            return Err(Error::new(
                ErrorKind::ConnectTimeout,
                format!("the proxy {self} did not finish its handshake within {within:?}"),
            ));
        };
        done.map(|()| stream)
    }

    /// Runs `machine` on `stream` (connected to the proxy); its errors are classed by
    /// `kind_of`.
    async fn run<S, H>(
        &self,
        stream: S,
        machine: H,
        kind_of: fn(&H::Error) -> ErrorKind,
    ) -> Result<(), Error>
    where
        S: HandshakeIo,
        H: ClientHandshake,
        H::Error: std::error::Error + Send + Sync + 'static,
    {
        match drive(stream, machine).await {
            Ok(()) => Ok(()),
            Err(Failed::Proxy(e)) => Err(Error::new(kind_of(&e), e)),
            Err(Failed::Io(e)) => Err(Error::new(
                ErrorKind::Proxy,
                format!("the proxy {self} during its handshake: {e}"),
            )),
        }
    }

    /// An HTTP/1.1 `CONNECT` to `authority` on `stream`, a connection to this proxy (TLS,
    /// for an `https://` proxy whose ALPN did not pick `h2`).
    pub(crate) async fn connect_over<S: HandshakeIo>(
        &self,
        stream: S,
        authority: &str,
        limits: ResponseLimits,
    ) -> Result<(), Error> {
        let m = HttpConnect::new(authority, self.authorization.as_ref(), limits);
        self.run(stream, m, connect_kind).await
    }

    /// The proxy's host, as in a URI (an IPv6 address in brackets).
    pub(crate) fn host(&self) -> &str {
        &self.host
    }

    /// The `Proxy-Authorization` an HTTP proxy's requests carry.
    pub(crate) fn authorization(&self) -> Option<&HeaderValue> {
        self.authorization.as_ref()
    }

    /// Whether the proxy is spoken to over TLS.
    pub(crate) fn is_tls(&self) -> bool {
        self.kind == Kind::Https
    }

    /// The proxy's `host:port` (what its shared HTTP/2 connection is known by).
    pub(crate) fn authority(&self) -> Result<http::uri::Authority, Error> {
        format!("{}:{}", self.host, self.port)
            .parse()
            .map_err(|e| Error::new(ErrorKind::InvalidUri, e))
    }
}

impl Endpoint {
    /// The error for this HTTP proxy's non-2xx answer to a `CONNECT` (over HTTP/2: its
    /// status the same as over HTTP/1.1).
    pub(crate) fn refusal(&self, status: http::StatusCode) -> Error {
        let e = ConnectError::Status {
            status,
            sent_credentials: self.authorization.is_some(),
        };
        Error::new(connect_kind(&e), e)
    }
}

/// An HTTP `CONNECT`'s refusal: credentials wanted or refused, or anything else.
fn connect_kind(e: &ConnectError) -> ErrorKind {
    if e.is_auth() {
        ErrorKind::ProxyAuth
    } else {
        ErrorKind::Proxy
    }
}

/// A SOCKS refusal's kind: the target refused as a direct connect would be, credentials
/// apart, and what could not be asked as a bad URI.
fn socks_kind(e: &SocksError) -> ErrorKind {
    match e {
        SocksError::Reply(0x05) => ErrorKind::ConnectRefused,
        SocksError::NoAcceptableMethod { .. } | SocksError::AuthFailed(_) => ErrorKind::ProxyAuth,
        SocksError::InvalidField(_) | SocksError::Ipv6OverSocks4 => ErrorKind::InvalidUri,
        _ => ErrorKind::Proxy,
    }
}

fn socks_error(e: SocksError) -> Error {
    Error::new(socks_kind(&e), e)
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}:{}", self.kind.scheme(), self.host, self.port)
    }
}

impl Proxy {
    fn new(url: &str, schemes: Schemes) -> Result<Proxy, Error> {
        let endpoint = Endpoint::parse(url).map_err(|e| Error::new(ErrorKind::InvalidUri, e))?;
        Ok(Proxy::with_endpoint(Ok(Arc::new(endpoint)), schemes))
    }

    fn with_endpoint(endpoint: Result<Arc<Endpoint>, Arc<str>>, schemes: Schemes) -> Proxy {
        Proxy {
            endpoint,
            schemes,
            no_proxy: None,
            http_tunnel: false,
            handshake_timeout: HANDSHAKE_TIMEOUT,
            http2_prior_knowledge: false,
            tunnel_buffer: TUNNEL_BUFFER,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// A proxy for `http://` targets. `url` is `scheme://[user:password@]host[:port]`
    /// with scheme `http` (port 80 by default), `https` (feature `tls`; port 443),
    /// `socks4`, `socks4a`, `socks5` or `socks5h` (port 1080 by default); without a
    /// scheme it is `http`.
    pub fn http(url: &str) -> Result<Proxy, Error> {
        Proxy::new(url, Schemes::Http)
    }

    /// A proxy for `https://` targets (see [`Proxy::http`] for `url`).
    pub fn https(url: &str) -> Result<Proxy, Error> {
        Proxy::new(url, Schemes::Https)
    }

    /// A proxy for every target (see [`Proxy::http`] for `url`).
    pub fn all(url: &str) -> Result<Proxy, Error> {
        Proxy::new(url, Schemes::All)
    }

    /// The proxies the environment names, as curl reads it: `http_proxy` (or
    /// `HTTP_PROXY`, unless `REQUEST_METHOD` says this is a CGI script, where a request's
    /// `Proxy:` header would set it) for `http://` targets, `https_proxy`/`HTTPS_PROXY`
    /// for `https://` ones, `all_proxy`/`ALL_PROXY` for whichever of the two is unset,
    /// each with `no_proxy`/`NO_PROXY` (see [`Proxy::no_proxy`]); the lowercase name
    /// first. A value that is not a proxy URL makes the requests it would take fail (with
    /// [`ErrorKind::InvalidUri`]), never go direct.
    pub fn from_env() -> Vec<Proxy> {
        env::proxies(|name| std::env::var(name).ok())
    }

    /// Hosts reached directly, in `NO_PROXY`'s format: a comma list of `*`, IP addresses,
    /// CIDR ranges (`10.0.0.0/8`) and domain names, each matching itself and its
    /// subdomains (`example.com` or `.example.com`: `example.com`, `a.example.com`).
    #[must_use]
    pub fn no_proxy(mut self, list: &str) -> Proxy {
        self.no_proxy = Some(NoProxy::parse(list));
        self
    }

    /// The user name and password for the proxy, in place of the URL's (HTTP: Basic
    /// `Proxy-Authorization`; SOCKS5: RFC 1929; SOCKS4: the user name is the user id).
    #[must_use]
    pub fn basic_auth(mut self, user: &str, password: &str) -> Proxy {
        if let Ok(ep) = &self.endpoint {
            let credentials = Some((user.to_string(), password.to_string()));
            self.endpoint = Ok(Arc::new(Endpoint::new(
                ep.kind,
                ep.host.clone(),
                ep.port,
                credentials,
            )));
        }
        self
    }

    /// `http://` targets through an HTTP proxy get a `CONNECT` tunnel too, instead of
    /// being forwarded in absolute form (default false; curl's `--proxytunnel`).
    #[must_use]
    pub fn http_tunnel(mut self, on: bool) -> Proxy {
        self.http_tunnel = on;
        self
    }

    /// How long the proxy may take to answer its handshake (SOCKS replies, the `CONNECT`
    /// response), from the moment the connection to it is made (default 30 s); past it
    /// the request fails with [`ErrorKind::ConnectTimeout`], so a proxy that accepts and
    /// never answers does not hang it. For an `https://` or HTTP/2 proxy it covers the
    /// whole way to an open tunnel: connecting, TLS, and the `CONNECT` (or its stream on
    /// a shared connection). The client's connect timeout, when set, covers the whole of
    /// it too.
    #[must_use]
    pub fn handshake_timeout(mut self, within: Duration) -> Proxy {
        self.handshake_timeout = within;
        self
    }

    /// Speaks HTTP/2 to this HTTP proxy from its first byte: an `http://` proxy by h2c
    /// (RFC 9113 §3.3), an `https://` one offering only `h2` in its ALPN (unless
    /// [`Proxy::tls_config`] names protocols). Every target, `http://` ones too, then goes
    /// through a `CONNECT` stream (RFC 9113 §8.5), and the tunnels to one proxy share one
    /// connection. Default false: `http://` proxies speak HTTP/1.1, and `https://` ones
    /// HTTP/2 or HTTP/1.1 as their ALPN picks. No effect on SOCKS proxies.
    #[must_use]
    pub fn http2_prior_knowledge(mut self) -> Proxy {
        self.http2_prior_knowledge = true;
        self
    }

    /// The bytes a tunnel over an HTTP/2 proxy queues before its writes wait for the
    /// stream's flow-control window to take them (default 64 KiB, at least 1).
    #[must_use]
    pub fn tunnel_buffer(mut self, bytes: usize) -> Proxy {
        self.tunnel_buffer = bytes.max(1);
        self
    }

    /// The TLS settings of an `https://` proxy's connection (feature `tls`): the roots its
    /// certificate is checked against (a private CA), a client certificate. ALPN `h2` and
    /// `http/1.1` (`h2` alone with [`Proxy::http2_prior_knowledge`]) are filled in when it
    /// names no protocol. Default: the client's [`tls_config`](super::Builder::tls_config),
    /// else the webpki roots.
    #[cfg(feature = "tls")]
    #[must_use]
    pub fn tls_config(mut self, config: Arc<crate::tls::rustls::ClientConfig>) -> Proxy {
        self.tls = Some(config);
        self
    }

    /// A proxy from the environment that cannot be used: it fails what it would take.
    fn unusable(schemes: Schemes, why: String) -> Proxy {
        Proxy::with_endpoint(Err(why.into()), schemes)
    }

    /// Whether tunnels through this proxy go over TLS or HTTP/2 (the client's [`Secure`]
    /// opens them).
    fn is_secure(&self) -> bool {
        self.endpoint.as_ref().is_ok_and(|e| {
            e.kind == Kind::Https || (e.kind == Kind::Http && self.http2_prior_knowledge)
        })
    }

    /// See [`Proxy::http2_prior_knowledge`].
    pub(crate) fn speaks_http2_only(&self) -> bool {
        self.http2_prior_knowledge
    }

    /// See [`Proxy::tunnel_buffer`].
    pub(crate) fn buffer(&self) -> usize {
        self.tunnel_buffer
    }

    /// See [`Proxy::tls_config`].
    #[cfg(feature = "tls")]
    pub(crate) fn tls(&self) -> Option<&Arc<crate::tls::rustls::ClientConfig>> {
        self.tls.as_ref()
    }

    pub(crate) fn endpoint(&self) -> Result<&Endpoint, Error> {
        self.endpoint
            .as_deref()
            .map_err(|why| Error::new(ErrorKind::InvalidUri, why.to_string()))
    }

    /// Whether this proxy takes requests to `dst`.
    fn takes(&self, dst: &Uri) -> bool {
        let https = dst
            .scheme_str()
            .is_some_and(|s| s.eq_ignore_ascii_case("https"));
        let http = dst
            .scheme_str()
            .is_some_and(|s| s.eq_ignore_ascii_case("http"));
        let scheme = match self.schemes {
            Schemes::All => http || https,
            Schemes::Http => http,
            Schemes::Https => https,
        };
        scheme
            && !self
                .no_proxy
                .as_ref()
                .is_some_and(|no| no.matches(dst.host().unwrap_or("")))
    }

    /// A tunnel through this proxy to `host:port`; one over TLS or HTTP/2 is opened by
    /// `secure` (the client's, when a builder made the connector).
    pub(crate) async fn open_tunnel(
        &self,
        host: &str,
        port: u16,
        limits: ResponseLimits,
        secure: Option<&dyn Secure>,
    ) -> Result<Opened, Error> {
        let endpoint = self.endpoint()?;
        let within = self.handshake_timeout;
        if !self.is_secure() {
            return endpoint
                .tunnel(host, port, limits, within)
                .await
                .map(Opened::Tcp);
        }
        let Some(secure) = secure else {
            return Err(Error::new(
                ErrorKind::Other,
                format!(
                    "the proxy {endpoint} is spoken to over TLS or HTTP/2, which only a \
                     connector made by fibr::client::Builder does"
                ),
            ));
        };
        let authority = format!("{host}:{port}");
        match crate::engine::time::timeout(within, secure.tunnel(self, &authority, limits)).await {
            Ok(opened) => opened.map(Opened::Proxied),
            Err(_) => Err(Error::new(
                ErrorKind::ConnectTimeout,
                format!("the proxy {endpoint} did not open a tunnel within {within:?}"),
            )),
        }
    }

    /// A connection to this (HTTP) proxy, for requests in absolute form.
    pub(crate) async fn open_forwarding(&self) -> Result<TcpStream, Error> {
        self.endpoint()?.connect().await
    }

    /// The `Proxy-Authorization` forwarded requests carry.
    pub(crate) fn authorization(&self) -> Option<HeaderValue> {
        self.endpoint.as_ref().ok()?.authorization.clone()
    }

    /// Whether `http://` requests through this proxy are forwarded in absolute form (an
    /// HTTP proxy without [`Proxy::http_tunnel`]), rather than tunneled.
    fn forwards(&self) -> bool {
        !self.http_tunnel
            && !self.is_secure()
            && self.endpoint.as_ref().is_ok_and(|e| e.kind == Kind::Http)
    }
}

impl fmt::Debug for Proxy {
    /// The proxy's URL without its password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Proxy");
        match &self.endpoint {
            Ok(ep) => d
                .field("url", &ep.to_string())
                .field("user", &ep.credentials.as_ref().map(|(u, _)| u)),
            Err(why) => d.field("unusable", why),
        };
        d.field("schemes", &self.schemes)
            .field("no_proxy", &self.no_proxy.is_some())
            .field("http_tunnel", &self.http_tunnel)
            .field("handshake_timeout", &self.handshake_timeout)
            .field("http2_prior_knowledge", &self.http2_prior_knowledge)
            .finish_non_exhaustive()
    }
}

/// How a connection to a URI is made, given the proxies.
pub(crate) enum Route<'a> {
    Direct,
    /// A tunnel (SOCKS, or HTTP `CONNECT`, over HTTP/1.1 or HTTP/2) through the proxy.
    Tunnel(&'a Proxy),
    /// A connection to the HTTP proxy itself, which takes requests in absolute form.
    Forward(&'a Proxy),
}

/// The first of `proxies` that takes `dst`; `tunnel`: the stream must be raw (TLS goes
/// over it), never a forwarding proxy's.
pub(crate) fn route<'a>(proxies: &'a [Proxy], dst: &Uri, tunnel: bool) -> Route<'a> {
    match proxies.iter().find(|p| p.takes(dst)) {
        None => Route::Direct,
        Some(p) if !tunnel && p.forwards() => Route::Forward(p),
        Some(p) => Route::Tunnel(p),
    }
}

/// `%XX` escapes decoded; `None` for a bad escape or a result that is not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(url: &str) -> Endpoint {
        Endpoint::parse(url).unwrap()
    }

    #[test]
    fn proxy_urls() {
        let e = ep("socks5h://us%40r:p%3Ass@proxy.example:1081");
        assert_eq!(e.kind, Kind::Socks5h);
        assert_eq!((e.host.as_str(), e.port), ("proxy.example", 1081));
        assert_eq!(e.credentials, Some(("us@r".into(), "p:ss".into())));
        assert!(e.authorization.is_none(), "Basic is for HTTP proxies");
        let e = ep("http://a:b@[::1]:3128/");
        assert_eq!((e.host.as_str(), e.port), ("[::1]", 3128));
        assert_eq!(e.authorization.unwrap(), "Basic YTpi");
        assert_eq!(ep("127.0.0.1:3128").kind, Kind::Http);
        assert_eq!(ep("http://h").port, 80);
        assert_eq!(ep("SOCKS4A://h").port, 1080);
        assert_eq!(
            ep("socks4://u@h").credentials,
            Some(("u".into(), String::new()))
        );
        #[cfg(feature = "tls")]
        assert_eq!(
            (ep("HTTPS://h").kind, ep("https://h").port),
            (Kind::Https, 443)
        );
        #[cfg(not(feature = "tls"))]
        assert!(Endpoint::parse("https://h").is_err());
        for bad in ["ftp://h", "http://h:99999", "socks5://", "http://%zz@h"] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_password_stays_out_of_debug() {
        let p = Proxy::all("http://me:secret@h:1").unwrap();
        let shown = format!("{p:?}");
        assert!(shown.contains("me") && !shown.contains("secret"), "{shown}");
        let p = p.basic_auth("you", "other");
        assert_eq!(p.authorization().unwrap(), "Basic eW91Om90aGVy");
        assert!(!format!("{p:?}").contains("other"));
    }

    #[test]
    fn routes_by_scheme_no_proxy_and_kind() {
        let uri = |s: &str| s.parse::<Uri>().unwrap();
        let proxies = [
            Proxy::https("socks5h://s:1").unwrap(),
            Proxy::http("http://h:1").unwrap().no_proxy("direct.test"),
        ];
        assert!(
            matches!(route(&proxies, &uri("https://a.test/"), true), Route::Tunnel(p) if p.endpoint().unwrap().kind == Kind::Socks5h)
        );
        assert!(matches!(
            route(&proxies, &uri("http://a.test/"), false),
            Route::Forward(_)
        ));
        assert!(matches!(
            route(&proxies, &uri("http://a.test/"), true),
            Route::Tunnel(_)
        ));
        assert!(matches!(
            route(&proxies, &uri("http://x.direct.test/"), false),
            Route::Direct
        ));
        assert!(matches!(
            route(&proxies, &uri("http+unix://2f/"), false),
            Route::Direct
        ));
        let tunneled = [Proxy::all("http://h:1").unwrap().http_tunnel(true)];
        assert!(matches!(
            route(&tunneled, &uri("http://a.test/"), false),
            Route::Tunnel(_)
        ));
    }
}
