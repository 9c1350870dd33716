//! The client side: a quinn endpoint per connection (each its own UDP socket, as separate
//! clients would be), h3's client on it, and one request's exchange.

use bytes::{Buf, Bytes};
use h3::client::SendRequest;
use http::{Method, Request, StatusCode};
use quinn::crypto::rustls::QuicClientConfig;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type Sender = SendRequest<h3_quinn::OpenStreams, Bytes>;

/// Accepts any certificate, as h2load and wrk do: the bench measures servers, not the
/// client's certificate checks. Handshake signatures are still verified (the server proves
/// it holds the key), with the ring provider's algorithms.
#[derive(Debug)]
struct AnyCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The QUIC client config every connection uses: TLS 1.3 on ring, ALPN `h3`, no session
/// resumption (every connection a full handshake), an idle timeout longer than the
/// servers' 30 s (theirs then applies), no keep-alives (idle connections stay silent).
pub fn client_config() -> Result<quinn::ClientConfig, BoxError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls.resumption = rustls::client::Resumption::disabled();
    let mut config = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls)?));
    let mut transport = quinn::TransportConfig::default();
    transport.max_idle_timeout(Some(Duration::from_secs(60).try_into()?));
    config.transport_config(Arc::new(transport));
    Ok(config)
}

/// One HTTP/3 connection on an endpoint (a UDP socket) of its own. The endpoint and the
/// task driving h3's connection live as long as this.
pub struct Conn {
    pub send: Sender,
    pub conn: quinn::Connection,
    endpoint: quinn::Endpoint,
    driver: tokio::task::JoinHandle<()>,
}

impl Conn {
    pub async fn open(addr: SocketAddr, config: &quinn::ClientConfig) -> Result<Conn, BoxError> {
        let mut endpoint = quinn::Endpoint::client(SocketAddr::from(([127, 0, 0, 1], 0)))?;
        endpoint.set_default_client_config(config.clone());
        let conn = endpoint.connect(addr, "localhost")?.await?;
        let (mut h3, send) = h3::client::new(h3_quinn::Connection::new(conn.clone())).await?;
        let driver = tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| h3.poll_close(cx)).await;
        });
        Ok(Conn {
            send,
            conn,
            endpoint,
            driver,
        })
    }

    /// Closes the connection (CONNECTION_CLOSE sent, so the server forgets it now rather
    /// than after its idle timeout) and waits a little for it to leave.
    pub async fn close(self) {
        self.conn.close(0u32.into(), b"done");
        let _ = tokio::time::timeout(Duration::from_secs(2), self.endpoint.wait_idle()).await;
        self.driver.abort();
    }
}

/// What one exchange got: the status, the body's length, and the body if kept.
pub struct Got {
    pub status: StatusCode,
    pub len: usize,
    pub body: Vec<u8>,
}

/// Sends `method path` with `body` (none for a GET) and reads the whole response; the body
/// is kept only if `keep` (a load counts bytes, a check compares them).
pub async fn exchange(
    send: &mut Sender,
    method: Method,
    path: &str,
    body: Option<Bytes>,
    keep: bool,
) -> Result<Got, BoxError> {
    let req = Request::builder()
        .method(method)
        .uri(format!("https://localhost{path}"))
        .body(())?;
    let mut stream = send.send_request(req).await?;
    if let Some(body) = body {
        stream.send_data(body).await?;
    }
    stream.finish().await?;
    let resp = stream.recv_response().await?;
    let mut got = Got {
        status: resp.status(),
        len: 0,
        body: Vec::new(),
    };
    while let Some(mut chunk) = stream.recv_data().await? {
        got.len += chunk.remaining();
        if keep {
            while chunk.has_remaining() {
                let part = chunk.chunk();
                got.body.extend_from_slice(part);
                let n = part.len();
                chunk.advance(n);
            }
        }
    }
    Ok(got)
}
