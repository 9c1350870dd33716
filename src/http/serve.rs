//! `fibr::serve`: axum's `serve`, on fibr.

use super::config::ServerConfig;
#[cfg(feature = "http3")]
use super::server::Http3Server;
use super::server::Server;
use super::service::{MakeService, ServiceMarker};
use crate::engine::conn::{Handler, Kind, Listener, StopAccepting};
use crate::engine::runtime::{Command, Runtime};
use std::future::{Future, IntoFuture};
use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, OwnedFd};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A listener `fibr::serve` can take over: fibr's own `net::TcpListener` and
/// `net::UnixListener`, std's `TcpListener` and `UnixListener`, and (feature `tokio`)
/// tokio's, so the listener an app made for `axum::serve` serves unchanged.
pub trait ServeListener {
    #[doc(hidden)]
    fn into_parts(self) -> io::Result<ListenerParts>;
}

/// A listener's descriptor, kind and runtime, as `serve` takes them over.
#[doc(hidden)]
pub struct ListenerParts {
    fd: OwnedFd,
    kind: Kind,
    rt: Arc<Runtime>,
}

impl ListenerParts {
    /// A bound, listening, non-blocking std socket, for the current runtime.
    fn adopt(fd: OwnedFd, kind: Kind) -> io::Result<ListenerParts> {
        Ok(ListenerParts {
            fd,
            kind,
            rt: Runtime::current(),
        })
    }
}

impl ServeListener for crate::engine::net::TcpListener {
    fn into_parts(self) -> io::Result<ListenerParts> {
        let (fd, rt) = self.into_fd()?;
        Ok(ListenerParts {
            fd,
            kind: Kind::Tcp,
            rt,
        })
    }
}

impl ServeListener for crate::engine::net::UnixListener {
    fn into_parts(self) -> io::Result<ListenerParts> {
        let (fd, rt) = self.into_fd()?;
        Ok(ListenerParts {
            fd,
            kind: Kind::Unix,
            rt,
        })
    }
}

impl ServeListener for std::net::TcpListener {
    fn into_parts(self) -> io::Result<ListenerParts> {
        self.set_nonblocking(true)?;
        ListenerParts::adopt(self.into(), Kind::Tcp)
    }
}

impl ServeListener for std::os::unix::net::UnixListener {
    fn into_parts(self) -> io::Result<ListenerParts> {
        self.set_nonblocking(true)?;
        ListenerParts::adopt(self.into(), Kind::Unix)
    }
}

/// tokio's listener leaves tokio's reactor (`into_std`) for fibr's loops.
#[cfg(feature = "tokio")]
impl ServeListener for tokio::net::TcpListener {
    fn into_parts(self) -> io::Result<ListenerParts> {
        self.into_std()?.into_parts()
    }
}

#[cfg(feature = "tokio")]
impl ServeListener for tokio::net::UnixListener {
    fn into_parts(self) -> io::Result<ListenerParts> {
        self.into_std()?.into_parts()
    }
}

/// Serves `app` on `listener` over HTTP/1.1 until the future is dropped (or, with
/// [`Serve::with_graceful_shutdown`], until the signal completes and every connection has
/// finished). `app` is what `axum::serve` takes: a `Router`, `into_make_service()`,
/// `into_make_service_with_connect_info::<SocketAddr>()` (with feature `axum`), or any
/// `tower::Service<http::Request<fibr::http::Incoming>>`.
pub fn serve<L, M, Marker>(listener: L, app: M) -> Serve<M, Marker>
where
    L: ServeListener,
    M: MakeService<Marker>,
    Server<M, Marker>: Handler,
{
    Serve {
        listener: listener.into_parts(),
        app,
        config: ServerConfig::default(),
        engine: None,
        #[cfg(feature = "tls")]
        tls: None,
        #[cfg(feature = "http3")]
        http3: None,
        _marker: PhantomData,
    }
}

/// The future-to-be of [`serve`]; `.await` it.
#[must_use = "a Serve does nothing until awaited"]
pub struct Serve<M, Marker = ServiceMarker> {
    listener: io::Result<ListenerParts>,
    app: M,
    config: ServerConfig,
    /// The settings of a runtime of this server's own, if not the listener's.
    engine: Option<crate::engine::runtime::Config>,
    #[cfg(feature = "tls")]
    tls: Option<Arc<rustls::ServerConfig>>,
    /// With HTTP/3: how to make its endpoint (named here, where the server's bounds hold),
    /// and its UDP socket.
    #[cfg(feature = "http3")]
    http3: Option<(MakeEndpoint<M, Marker>, io::Result<OwnedFd>)>,
    _marker: PhantomData<fn() -> Marker>,
}

impl<M, Marker> Serve<M, Marker>
where
    M: MakeService<Marker>,
    Marker: 'static,
    Server<M, Marker>: Handler,
{
    /// Uses these limits and timeouts instead of the defaults.
    pub fn with_config(mut self, config: ServerConfig) -> Self {
        self.config = config;
        self
    }

    /// Serves on a runtime of its own with these engine settings (worker threads, event
    /// loops, buffer sizes, write and linger timeouts: [`crate::engine::runtime::Config`]), started when the
    /// future first runs and stopped when it ends, instead of the runtime the listener
    /// came from (by default the process-wide one, with a worker per core):
    ///
    /// ```no_run
    /// # async fn app(listener: std::net::TcpListener, app: axum::Router) -> std::io::Result<()> {
    /// fibr::serve(listener, app)
    ///     .with_engine_config(fibr::Config::default().with_workers(4))
    ///     .await
    /// # }
    /// ```
    pub fn with_engine_config(mut self, config: crate::engine::runtime::Config) -> Self {
        self.engine = Some(config);
        self
    }

    /// Serves HTTPS with `tls` (feature `tls`). When its `alpn_protocols` is empty, fibr
    /// fills in what it serves (`http/1.1`); session tickets are turned on when it has no
    /// ticketer. A request sent in plain HTTP gets a 400; the handshake's timeout is
    /// [`ServerConfig::tls_handshake_timeout`].
    #[cfg(feature = "tls")]
    pub fn with_tls(mut self, tls: Arc<rustls::ServerConfig>) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Also serves HTTP/3 (feature `http3`) on UDP at the TCP listener's address and port,
    /// with the certificate of [`with_tls`](Self::with_tls) (required; QUIC is TLS 1.3
    /// only), and advertises it with `Alt-Svc: h3=":PORT"` on HTTP/1.1 and HTTP/2
    /// responses. QUIC's settings are [`ServerConfig::http3`]. The UDP socket is bound
    /// here, so a client that starts as soon as the listener exists finds it (its
    /// datagrams wait in the socket until the serve future runs).
    #[cfg(feature = "http3")]
    pub fn with_http3(mut self) -> Self
    where
        Server<M, Marker>: Http3Server,
    {
        let socket = match &self.listener {
            Ok(l) => http3_socket(l.kind, l.fd.as_raw_fd()),
            // `run` reports the listener's own error first.
            Err(_) => Err(io::ErrorKind::NotConnected.into()),
        };
        self.http3 = Some((<Server<M, Marker> as Http3Server>::http3_endpoint, socket));
        self
    }

    /// The UDP address HTTP/3 is served on; `Err` when [`with_http3`](Self::with_http3)
    /// was not called or could not bind it. A TCP listener on port 0 gets a port that may
    /// already be taken on UDP: bind another listener and try again.
    #[cfg(feature = "http3")]
    pub fn http3_local_addr(&self) -> io::Result<std::net::SocketAddr> {
        match &self.http3 {
            Some((_, socket)) => http3_addr(socket),
            None => Err(invalid("with_http3 was not called")),
        }
    }

    /// Stops accepting when `signal` completes, then waits for open connections to finish
    /// their requests before the serve future resolves. Connections with no request in
    /// flight close at once (HTTP/2 after a GOAWAY), except one accepted within
    /// [`ServerConfig::drain_first_request_grace`] that has sent nothing yet: it may still
    /// finish its TLS handshake and send its first request until then.
    pub fn with_graceful_shutdown<F>(self, signal: F) -> WithGracefulShutdown<M, Marker, F>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        WithGracefulShutdown {
            serve: self,
            signal,
        }
    }

    async fn run(self, signal: Option<Pin<Box<dyn Future<Output = ()> + Send>>>) -> io::Result<()> {
        let ListenerParts { fd, kind, rt } = self.listener?;
        let own = match self.engine {
            Some(config) => Some(OwnRuntime(Runtime::start(config)?)),
            None => None,
        };
        let rt = own.as_ref().map_or(rt, |own| own.0.clone());
        rt.ensure_running()?;
        let raw = fd.as_raw_fd();
        #[cfg_attr(not(feature = "http3"), allow(unused_mut))]
        let mut config = self.config;
        #[cfg(feature = "http3")]
        let http3 = match self.http3 {
            Some((make, socket)) => {
                http3_alt_svc(&self.tls, &socket, &mut config)?;
                Some((make, socket?))
            }
            None => None,
        };
        #[cfg(feature = "http3")]
        let http3_tls = self.tls.clone();
        #[cfg(feature = "tls")]
        let handshake_timeout = config.tls_handshake_timeout;
        #[cfg(feature = "tls")]
        let http2_only = config.http2.only;
        let server = Server::<M, Marker>::with_config(self.app, config);
        let shared = server.shared().clone();
        let lp = rt.pick_loop().clone();
        // Served until this future is dropped, as the listener is.
        #[cfg(feature = "http3")]
        let _udp = match (http3, http3_tls) {
            (Some((make, fd)), Some(tls)) => {
                let endpoint = make(&server, tls)?;
                let src = crate::engine::conn::udp::UdpSocketSource::new(fd, endpoint, &rt.config);
                let raw = src.raw_fd();
                lp.send(Command::Register(raw, src.clone()));
                Some(StopAccepting {
                    lp: lp.clone(),
                    source: Some(src),
                    raw,
                })
            }
            _ => None,
        };
        let handler: Arc<dyn Handler> = Arc::new(server);
        #[cfg(feature = "tls")]
        let handler: Arc<dyn Handler> = match self.tls {
            Some(tls) => Arc::new(
                crate::tls::TlsServer::with_arc(crate::tls::for_http(tls, http2_only), handler)
                    .with_handshake_timeout(handshake_timeout)
                    .with_plain_http_answer(true),
            ),
            None => handler,
        };
        let listener = Arc::new(Listener {
            fd,
            kind,
            handler,
            admit: Some(shared.live().clone()),
        });
        lp.send(Command::Register(raw, listener.clone()));
        // Stops accepting if this future is dropped (or when the signal fires).
        let _stop = StopAccepting {
            lp: lp.clone(),
            source: Some(listener),
            raw,
        };
        match signal {
            Some(signal) => signal.await,
            None => std::future::pending::<()>().await,
        }
        // The loop takes the removal on its next turn and may accept until then: draining
        // starts once it has dropped the listener (bounded: one second), when every
        // connection it accepted is in the live count (admitted at its accept, before its
        // `on_open` and any TLS handshake), so none is cut off when the future resolves.
        let listener = _stop.source.as_ref().map(Arc::downgrade);
        drop(_stop);
        let until = Instant::now() + Duration::from_secs(1);
        while listener.as_ref().is_some_and(|l| l.strong_count() > 0) && Instant::now() < until {
            crate::engine::time::sleep(Duration::from_millis(1)).await;
        }
        shared.start_draining();
        shared.live().drained().wait().await;
        Ok(())
    }
}

/// A runtime started for one server ([`Serve::with_engine_config`]), stopped with it.
struct OwnRuntime(Arc<Runtime>);

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        self.0.stop(Duration::from_millis(500));
    }
}

/// Makes HTTP/3's endpoint from the server ([`Http3Server::http3_endpoint`]).
#[cfg(feature = "http3")]
type MakeEndpoint<M, Marker> =
    fn(&Server<M, Marker>, Arc<rustls::ServerConfig>) -> io::Result<Arc<dyn Handler>>;

#[cfg(feature = "http3")]
fn invalid(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, why.to_string())
}

/// HTTP/3's UDP socket, bound at the TCP listener's address and port.
#[cfg(feature = "http3")]
fn http3_socket(kind: Kind, listener: std::os::fd::RawFd) -> io::Result<OwnedFd> {
    let addr = match kind {
        Kind::Tcp => crate::engine::sys::socket::local_addr(listener),
        _ => None,
    }
    .ok_or_else(|| invalid("with_http3 needs a TCP listener"))?;
    crate::engine::sys::socket::udp_socket(addr)
}

/// Where HTTP/3's socket is bound, or (a copy of) why it is not.
#[cfg(feature = "http3")]
fn http3_addr(socket: &io::Result<OwnedFd>) -> io::Result<std::net::SocketAddr> {
    let socket = socket
        .as_ref()
        .map_err(|e| io::Error::new(e.kind(), e.to_string()))?;
    crate::engine::sys::socket::local_addr(socket.as_raw_fd())
        .ok_or_else(|| invalid("HTTP/3's socket has no address"))
}

/// Checks TLS is on (QUIC needs its certificate; checked first, so that is the error a
/// server without it reports), then that the UDP socket was bound, and puts HTTP/3's
/// `Alt-Svc` into `config`.
#[cfg(feature = "http3")]
fn http3_alt_svc(
    tls: &Option<Arc<rustls::ServerConfig>>,
    socket: &io::Result<OwnedFd>,
    config: &mut ServerConfig,
) -> io::Result<()> {
    if tls.is_none() {
        return Err(invalid("with_http3 needs with_tls (QUIC is TLS 1.3)"));
    }
    let port = http3_addr(socket)?.port();
    let alt_svc = format!("h3=\":{port}\"; ma=86400");
    config.alt_svc =
        Some(http::HeaderValue::try_from(alt_svc).map_err(|e| invalid(&e.to_string()))?);
    Ok(())
}

impl<M, Marker> IntoFuture for Serve<M, Marker>
where
    M: MakeService<Marker>,
    Marker: 'static,
    Server<M, Marker>: Handler,
{
    type Output = io::Result<()>;
    type IntoFuture = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run(None))
    }
}

/// [`serve`] with a graceful-shutdown signal; `.await` it.
#[must_use = "a Serve does nothing until awaited"]
pub struct WithGracefulShutdown<M, Marker, F> {
    serve: Serve<M, Marker>,
    signal: F,
}

impl<M, Marker, F> WithGracefulShutdown<M, Marker, F>
where
    M: MakeService<Marker>,
    Marker: 'static,
    Server<M, Marker>: Handler,
{
    /// [`Serve::with_tls`], after the shutdown signal was given.
    #[cfg(feature = "tls")]
    pub fn with_tls(mut self, tls: Arc<rustls::ServerConfig>) -> Self {
        self.serve = self.serve.with_tls(tls);
        self
    }

    /// [`Serve::with_http3`], after the shutdown signal was given.
    #[cfg(feature = "http3")]
    pub fn with_http3(mut self) -> Self
    where
        Server<M, Marker>: Http3Server,
    {
        self.serve = self.serve.with_http3();
        self
    }

    /// [`Serve::with_engine_config`], after the shutdown signal was given.
    pub fn with_engine_config(mut self, config: crate::engine::runtime::Config) -> Self {
        self.serve = self.serve.with_engine_config(config);
        self
    }

    /// [`Serve::with_config`], after the shutdown signal was given.
    pub fn with_config(mut self, config: ServerConfig) -> Self {
        self.serve = self.serve.with_config(config);
        self
    }
}

impl<M, Marker, F> IntoFuture for WithGracefulShutdown<M, Marker, F>
where
    M: MakeService<Marker>,
    Marker: 'static,
    Server<M, Marker>: Handler,
    F: Future<Output = ()> + Send + 'static,
{
    type Output = io::Result<()>;
    type IntoFuture = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.serve.run(Some(Box::pin(self.signal))))
    }
}
