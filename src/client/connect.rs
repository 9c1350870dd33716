//! Connectors: how the client gets a byte stream to a URI's server. [`HttpConnector`]
//! speaks `http` (TCP) and `http+unix` (a Unix socket named in the URI, see
//! [`unix_uri`]), directly or through proxies; [`UnixConnector`] sends every request to
//! one Unix socket. TLS is a further connector.

use super::error::{Error, ErrorKind};
use super::proxy::{route, Opened, Proxy, ProxyTunnel, Route, Secure};
use super::resolve::resolve;
use crate::engine::net::{TcpStream, UnixStream};
use crate::proto::h1::client::ResponseLimits;
use http::{HeaderValue, Uri};
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The scheme of URIs naming a Unix socket: `http+unix://<hex of the path>/path?query`.
pub const UNIX_SCHEME: &str = "http+unix";

/// What a connector learned while connecting.
#[derive(Clone, Copy, Debug, Default)]
pub struct Connected {
    h2: bool,
}

impl Connected {
    /// A plain connection (HTTP/1.1).
    pub fn new() -> Connected {
        Connected::default()
    }

    /// Marks the connection as having negotiated HTTP/2 (ALPN `h2`).
    pub fn negotiated_h2(mut self) -> Connected {
        self.h2 = true;
        self
    }

    /// True if ALPN picked HTTP/2.
    pub fn is_negotiated_h2(&self) -> bool {
        self.h2
    }
}

/// A connected stream the client can speak HTTP over.
pub trait Connection: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static {
    /// What was negotiated (ALPN); plain HTTP/1.1 by default.
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl Connection for TcpStream {}
impl Connection for UnixStream {}

/// Makes connections for the client. `connect` gets the request's absolute URI (scheme
/// and authority; the path is `/`) and answers a stream, or an [`Error`] of a connect
/// kind (`Error::from_connect_io`, or `Error::new(ErrorKind::Dns, ..)` and so on).
pub trait Connector: Send + Sync + 'static {
    /// The stream type.
    type Io: Connection;
    /// Connects to the server `dst` names.
    fn connect(&self, dst: &Uri) -> impl Future<Output = Result<Self::Io, Error>> + Send;

    /// A raw byte stream to `dst`'s host and port for another protocol to run over (TLS:
    /// [`HttpsConnector`](super::HttpsConnector) asks this for `https` URIs): through an
    /// HTTP proxy, a `CONNECT` tunnel, never a connection that forwards requests. By
    /// default, [`connect`](Connector::connect) to `http://` the same host and port
    /// (443 by default for `https`).
    fn connect_tunnel(&self, dst: &Uri) -> impl Future<Output = Result<Self::Io, Error>> + Send {
        async move {
            let port = dst.port_u16().unwrap_or(default_port(dst));
            let host = dst
                .host()
                .ok_or_else(|| Error::new(ErrorKind::InvalidUri, "the URI has no host"))?;
            let plain: Uri = format!("http://{host}:{port}/")
                .parse()
                .map_err(|e| Error::new(ErrorKind::InvalidUri, e))?;
            self.connect(&plain).await
        }
    }

    /// `Some` when the streams `connect(dst)` makes lead to an HTTP proxy that forwards
    /// requests: the client then writes them in absolute form (`GET http://host/path`)
    /// with the [`Forwarding`]'s `Proxy-Authorization`, and speaks HTTP/1.1 to it.
    /// Default `None`; a connector wrapping another one passes this on.
    fn forwarding(&self, dst: &Uri) -> Option<Forwarding> {
        let _ = dst;
        None
    }
}

/// How requests go to a forwarding HTTP proxy (see [`Connector::forwarding`]).
#[derive(Clone, Debug, Default)]
pub struct Forwarding {
    authorization: Option<HeaderValue>,
}

impl Forwarding {
    /// Requests carry `authorization` as their `Proxy-Authorization` (unless they have
    /// one).
    pub fn new(authorization: Option<HeaderValue>) -> Forwarding {
        Forwarding { authorization }
    }

    /// The `Proxy-Authorization` requests carry.
    pub fn authorization(&self) -> Option<&HeaderValue> {
        self.authorization.as_ref()
    }
}

/// `http` over TCP (names resolved off the event loops) and `http+unix`, directly or
/// through [`Proxy`]s ([`with_proxies`](HttpConnector::with_proxies)).
#[derive(Clone, Default)]
pub struct HttpConnector {
    proxies: Arc<[Proxy]>,
    /// Bounds on an HTTP proxy's answer to `CONNECT`.
    connect_limits: ResponseLimits,
    /// Tunnels through proxies spoken to over TLS or HTTP/2 (the client's builder lends
    /// them: they take the client's TLS and HTTP/2, which sit above this module).
    secure: Option<Arc<dyn Secure>>,
}

impl std::fmt::Debug for HttpConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConnector")
            .field("proxies", &self.proxies)
            .finish_non_exhaustive()
    }
}

impl HttpConnector {
    /// Connects directly, with no proxies.
    pub fn new() -> HttpConnector {
        HttpConnector::default()
    }

    /// Connects through the first of `proxies` that takes a URI (by its scheme and
    /// the proxy's no-proxy list), and directly when none does. `http+unix` is never
    /// proxied.
    #[must_use]
    pub fn with_proxies(mut self, proxies: impl IntoIterator<Item = Proxy>) -> HttpConnector {
        self.proxies = proxies.into_iter().collect();
        self
    }

    /// Bounds an HTTP proxy's `CONNECT` answer as the client's response heads are.
    pub(crate) fn with_connect_limits(mut self, limits: ResponseLimits) -> HttpConnector {
        self.connect_limits = limits;
        self
    }

    /// Opens tunnels through `https://` and HTTP/2 proxies with `secure`.
    pub(crate) fn with_secure(mut self, secure: Arc<dyn Secure>) -> HttpConnector {
        self.secure = Some(secure);
        self
    }

    /// A stream to `dst`'s host and port (`default_port` when it names none), along
    /// `route`.
    async fn open(&self, dst: &Uri, default_port: u16, route: Route<'_>) -> Result<Stream, Error> {
        let host = dst
            .host()
            .ok_or_else(|| Error::new(ErrorKind::InvalidUri, "the URI has no host"))?;
        let port = dst.port_u16().unwrap_or(default_port);
        let tcp = match route {
            Route::Direct => dial(host, port).await?,
            Route::Tunnel(proxy) => {
                let limits = self.connect_limits;
                match proxy
                    .open_tunnel(host, port, limits, self.secure.as_deref())
                    .await?
                {
                    Opened::Tcp(tcp) => tcp,
                    Opened::Proxied(tunnel) => return Ok(Stream::Proxied(tunnel)),
                }
            }
            Route::Forward(proxy) => proxy.open_forwarding().await?,
        };
        Ok(Stream::Tcp(tcp))
    }
}

impl Connector for HttpConnector {
    type Io = Stream;

    async fn connect(&self, dst: &Uri) -> Result<Stream, Error> {
        let scheme = dst.scheme_str().unwrap_or("");
        if scheme.eq_ignore_ascii_case(UNIX_SCHEME) {
            let path = unix_path(dst)?;
            return UnixStream::connect(&path)
                .await
                .map(Stream::Unix)
                .map_err(Error::from_connect_io);
        }
        if !scheme.eq_ignore_ascii_case("http") {
            return Err(Error::new(
                ErrorKind::InvalidUri,
                format!(
                    "scheme {scheme:?} needs another connector (HttpConnector speaks http and \
                     http+unix; for https: Client::builder().build_https(), feature `tls`)"
                ),
            ));
        }
        self.open(dst, 80, route(&self.proxies, dst, false)).await
    }

    async fn connect_tunnel(&self, dst: &Uri) -> Result<Stream, Error> {
        self.open(dst, default_port(dst), route(&self.proxies, dst, true))
            .await
    }

    fn forwarding(&self, dst: &Uri) -> Option<Forwarding> {
        match route(&self.proxies, dst, false) {
            Route::Forward(proxy) => Some(Forwarding::new(proxy.authorization())),
            Route::Direct | Route::Tunnel(_) => None,
        }
    }
}

/// The port of `dst`'s scheme: 443 for `https`, else 80.
fn default_port(dst: &Uri) -> u16 {
    if dst.scheme() == Some(&http::uri::Scheme::HTTPS) {
        443
    } else {
        80
    }
}

/// A direct TCP connection to `host:port`, trying each address in turn.
async fn dial(host: &str, port: u16) -> Result<TcpStream, Error> {
    let mut last = None;
    for a in resolve(host, port).await? {
        match TcpStream::connect(a).await {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(Error::from_connect_io(last.unwrap_or_else(|| {
        io::Error::new(io::ErrorKind::NotFound, "no address")
    })))
}

/// Every request goes to the Unix socket at one path, whatever its URI names.
#[derive(Clone, Debug)]
pub struct UnixConnector {
    path: Arc<Path>,
}

impl UnixConnector {
    /// Connects every request to the Unix socket at `path`.
    pub fn new(path: impl Into<PathBuf>) -> UnixConnector {
        UnixConnector {
            path: Arc::from(path.into()),
        }
    }
}

impl Connector for UnixConnector {
    type Io = UnixStream;

    async fn connect(&self, _dst: &Uri) -> Result<UnixStream, Error> {
        UnixStream::connect(&*self.path)
            .await
            .map_err(Error::from_connect_io)
    }
}

/// The URI of `path_and_query` on the Unix socket at `socket`, for [`HttpConnector`]:
/// `http+unix://<hex of the socket path>/path_and_query`.
pub fn unix_uri(socket: impl AsRef<Path>, path_and_query: &str) -> Result<Uri, Error> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = socket.as_ref().as_os_str().as_bytes();
    let mut hex = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        hex.push_str(&format!("{b:02x}"));
    }
    let pq = if path_and_query.starts_with('/') {
        path_and_query.to_string()
    } else {
        format!("/{path_and_query}")
    };
    format!("{UNIX_SCHEME}://{hex}{pq}")
        .parse()
        .map_err(|e| Error::new(ErrorKind::InvalidUri, e))
}

fn unix_path(dst: &Uri) -> Result<PathBuf, Error> {
    use std::os::unix::ffi::OsStringExt;
    let bad = || {
        Error::new(
            ErrorKind::InvalidUri,
            "http+unix host is not a hex-encoded path",
        )
    };
    let hex = dst.host().ok_or_else(bad)?.as_bytes();
    if hex.is_empty() || hex.len() % 2 != 0 {
        return Err(bad());
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(hex.len() / 2);
    for pair in hex.chunks(2) {
        out.push(digit(pair[0]).ok_or_else(bad)? << 4 | digit(pair[1]).ok_or_else(bad)?);
    }
    Ok(PathBuf::from(std::ffi::OsString::from_vec(out)))
}

/// Which connections may serve a request. Made by [`Key::new`], which lowercases the
/// authority, so keys compare and hash as bytes (the pool looks one up twice a request;
/// `Authority`'s own comparison folds case byte by byte).
#[derive(Clone, Debug)]
pub(crate) struct Key {
    pub scheme: http::uri::Scheme,
    pub authority: http::uri::Authority,
}

impl Key {
    pub fn new(scheme: http::uri::Scheme, authority: http::uri::Authority) -> Key {
        let authority = if authority.as_str().bytes().any(|b| b.is_ascii_uppercase()) {
            http::uri::Authority::try_from(authority.as_str().to_ascii_lowercase())
                .unwrap_or(authority)
        } else {
            authority
        };
        Key { scheme, authority }
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.authority.as_str() == other.authority.as_str() && self.scheme == other.scheme
    }
}

impl Eq for Key {}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.scheme.hash(state);
        self.authority.as_str().hash(state);
    }
}

/// The stream of [`HttpConnector`]: TCP or Unix, or a tunnel through a proxy spoken to
/// over TLS or HTTP/2.
pub enum Stream {
    /// `http://` (directly, or through a SOCKS or plain HTTP/1.1 proxy).
    Tcp(TcpStream),
    /// `http+unix://`.
    Unix(UnixStream),
    /// Through an `https://` or HTTP/2 proxy (see [`Proxy`]).
    Proxied(ProxyTunnel),
}

impl Connection for Stream {}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stream::Tcp(s) => f
                .debug_tuple("Stream::Tcp")
                .field(&s.peer_addr().ok())
                .finish(),
            Stream::Unix(_) => f.write_str("Stream::Unix"),
            Stream::Proxied(_) => f.write_str("Stream::Proxied"),
        }
    }
}

/// hyper's `Read` and `Write` for an enum of streams: every call goes to the variant's
/// stream. `[generics] Type { Variant, .. }`.
macro_rules! stream_enum_io {
    ([$($gen:tt)*] $ty:ty { $($variant:path),+ $(,)? }) => {
        impl<$($gen)*> hyper::rt::Read for $ty {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: hyper::rt::ReadBufCursor<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                match self.get_mut() {
                    $($variant(s) => hyper::rt::Read::poll_read(std::pin::Pin::new(s), cx, buf),)+
                }
            }
        }

        impl<$($gen)*> hyper::rt::Write for $ty {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                match self.get_mut() {
                    $($variant(s) => hyper::rt::Write::poll_write(std::pin::Pin::new(s), cx, buf),)+
                }
            }

            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                match self.get_mut() {
                    $($variant(s) => {
                        hyper::rt::Write::poll_write_vectored(std::pin::Pin::new(s), cx, bufs)
                    })+
                }
            }

            fn is_write_vectored(&self) -> bool {
                match self {
                    $($variant(s) => hyper::rt::Write::is_write_vectored(s),)+
                }
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                match self.get_mut() {
                    $($variant(s) => hyper::rt::Write::poll_flush(std::pin::Pin::new(s), cx),)+
                }
            }

            fn poll_shutdown(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                match self.get_mut() {
                    $($variant(s) => hyper::rt::Write::poll_shutdown(std::pin::Pin::new(s), cx),)+
                }
            }
        }
    };
}
#[cfg_attr(not(feature = "tls"), allow(unused_imports))]
pub(super) use stream_enum_io;

stream_enum_io!([] Stream { Stream::Tcp, Stream::Unix, Stream::Proxied });
