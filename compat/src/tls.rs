//! HTTPS for the differential suite: with `FIBR_COMPAT_TLS=1` both servers serve TLS
//! (fibr with `serve(..).with_tls(..)`; axum on hyper-util over tokio-rustls, the way
//! axum-server does it) with a certificate for 127.0.0.1 that a CA made here signed, and
//! the three clients (raw sockets, curl, hyper-util's `Client`) speak TLS to them.

use fibr::tls::rustls;
use hyper_util::client::legacy::connect::{Connected, Connection};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, StreamOwned};
use std::future::Future;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The certificates and configs of a TLS run.
pub struct Tls {
    pub server: Arc<ServerConfig>,
    pub client: Arc<ClientConfig>,
    /// The CA's certificate, for curl's `--cacert`.
    pub ca_pem: PathBuf,
}

/// The TLS settings when `FIBR_COMPAT_TLS` is set (and not `0`), made once.
pub fn tls() -> Option<&'static Tls> {
    static TLS: OnceLock<Option<Tls>> = OnceLock::new();
    TLS.get_or_init(|| {
        let on = std::env::var("FIBR_COMPAT_TLS").is_ok_and(|v| !v.is_empty() && v != "0");
        on.then(Tls::new)
    })
    .as_ref()
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Tls {
    fn new() -> Tls {
        // Distinct names: OpenSSL takes a leaf named like its issuer for self-signed.
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.distinguished_name
            .push(DnType::CommonName, "fibr compat CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let mut leaf =
            CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
        leaf.distinguished_name
            .push(DnType::CommonName, "127.0.0.1");
        let leaf = leaf.signed_by(&key, &ca).unwrap();
        let ca_pem =
            std::env::temp_dir().join(format!("fibr-compat-ca-{}.pem", std::process::id()));
        std::fs::write(&ca_pem, ca.pem()).unwrap();
        let mut server = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone(), ca.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .unwrap();
        // HTTP/1.1 on both servers (hyper-util's auto builder would take h2 too).
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        let mut roots = RootCertStore::empty();
        roots.add(ca.der().clone()).unwrap();
        let mut client = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = vec![b"http/1.1".to_vec()];
        Tls {
            server: Arc::new(server),
            client: Arc::new(client),
            ca_pem,
        }
    }
}

/// Serves `app` (a Router, given the peer's address) over TLS on a tokio listener, as
/// `axum::serve` would in plain: hyper-util's auto builder with upgrades.
pub(crate) fn serve_axum_tls<F>(listener: tokio::net::TcpListener, tls: &Tls, app: F)
where
    F: Fn(SocketAddr) -> axum::Router + Send + 'static,
{
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::service::TowerToHyperService;
    use tower::ServiceExt;
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.server.clone());
    tokio::spawn(async move {
        loop {
            let Ok((tcp, peer)) = listener.accept().await else {
                return;
            };
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            let router = app(peer);
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = router.map_request(|req: http::Request<hyper::body::Incoming>| {
                    req.map(axum::body::Body::new)
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection_with_upgrades(
                        TokioIo::new(tls),
                        TowerToHyperService::new(svc),
                    )
                    .await;
            });
        }
    });
}

/// A client socket: plain TCP, or TLS over it when the run is a TLS run.
pub enum ClientStream {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl ClientStream {
    /// Connects to `addr` with `timeout` on connect, reads and writes.
    pub fn connect(addr: SocketAddr, timeout: Duration) -> ClientStream {
        let s = TcpStream::connect_timeout(&addr, timeout).expect("connect");
        s.set_read_timeout(Some(timeout)).unwrap();
        s.set_write_timeout(Some(timeout)).unwrap();
        s.set_nodelay(true).unwrap();
        match tls() {
            None => ClientStream::Plain(s),
            Some(tls) => {
                let name = ServerName::IpAddress(addr.ip().into());
                let conn = ClientConnection::new(tls.client.clone(), name).unwrap();
                ClientStream::Tls(Box::new(StreamOwned::new(conn, s)))
            }
        }
    }

    fn tcp(&self) -> &TcpStream {
        match self {
            ClientStream::Plain(s) => s,
            ClientStream::Tls(s) => &s.sock,
        }
    }

    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.tcp().set_read_timeout(t)
    }

    /// Ends our side: TLS `close_notify` first on a TLS run.
    pub fn shutdown_write(&mut self) -> io::Result<()> {
        if let ClientStream::Tls(s) = self {
            s.conn.send_close_notify();
            s.flush()?;
        }
        self.tcp().shutdown(Shutdown::Write)
    }
}

impl Read for ClientStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            ClientStream::Plain(s) => s.read(buf),
            ClientStream::Tls(s) => match s.read(buf) {
                // A peer that closes without close_notify ends the stream all the same
                // (HTTP delimits its messages itself).
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
                r => r,
            },
        }
    }
}

impl Write for ClientStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            ClientStream::Plain(s) => s.write(buf),
            ClientStream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            ClientStream::Plain(s) => s.flush(),
            ClientStream::Tls(s) => s.flush(),
        }
    }
}

/// hyper-util's connector for the differential suite: TCP, with TLS on a TLS run.
#[derive(Clone, Default)]
pub struct Connector;

/// What [`Connector`] connects.
pub enum ConnectorIo {
    Plain(tokio::net::TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>),
}

impl tower::Service<http::Uri> for Connector {
    type Response = hyper_util::rt::TokioIo<ConnectorIo>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        Box::pin(async move {
            let host = uri.host().unwrap_or("127.0.0.1").to_string();
            let port = uri.port_u16().unwrap_or(80);
            let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
            tcp.set_nodelay(true)?;
            let io = match tls() {
                None => ConnectorIo::Plain(tcp),
                Some(tls) => {
                    let name = ServerName::try_from(host).map_err(io::Error::other)?;
                    let connector = tokio_rustls::TlsConnector::from(tls.client.clone());
                    ConnectorIo::Tls(Box::new(connector.connect(name, tcp).await?))
                }
            };
            Ok(hyper_util::rt::TokioIo::new(io))
        })
    }
}

impl Connection for ConnectorIo {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl AsyncRead for ConnectorIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ConnectorIo::Plain(s) => Pin::new(s).poll_read(cx, buf),
            ConnectorIo::Tls(s) => Pin::new(&mut **s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ConnectorIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ConnectorIo::Plain(s) => Pin::new(s).poll_write(cx, buf),
            ConnectorIo::Tls(s) => Pin::new(&mut **s).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ConnectorIo::Plain(s) => Pin::new(s).poll_flush(cx),
            ConnectorIo::Tls(s) => Pin::new(&mut **s).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ConnectorIo::Plain(s) => Pin::new(s).poll_shutdown(cx),
            ConnectorIo::Tls(s) => Pin::new(&mut **s).poll_shutdown(cx),
        }
    }
}
