//! The HTTPS scenarios' certificate, and the bench's own TLS client: the routes checked
//! over TLS, and the idle TLS connections.
//!
//! Once per run, rcgen makes a CA and a server certificate it signs (ECDSA P-256, for
//! `localhost` and `127.0.0.1`), written as PEM files to a temporary directory that the
//! servers read through `BENCH_TLS_CERT` and `BENCH_TLS_KEY`. The servers send the leaf
//! alone; the load generators do not verify it, this bench's client trusts the CA.
//!
//! The client is rustls's own (`fibr::tls::rustls` is the same crate; it is taken through
//! tokio-rustls, a dev-dependency on the ring provider, so that the bench builds without
//! fibr's `tls` feature), with blocking std sockets. It connects to the IP address, as the
//! load generators do (no SNI), offers ALPN `http/1.1` and never resumes a session.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use tokio_rustls::rustls;

use rustls::client::Resumption;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, ProtocolVersion, RootCertStore, StreamOwned};

use crate::idle::{self, Idle};
use crate::proc::RunningServer;

/// A TLS client stream over a blocking socket.
pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// The run's certificate (PEM files in a directory removed when dropped) and the client
/// config that trusts it.
pub struct Tls {
    dir: PathBuf,
    cert: String,
    key: String,
    client: Arc<ClientConfig>,
}

impl Drop for Tls {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Tls {
    /// Makes the certificates and writes the server's PEM files.
    pub fn new() -> Result<Tls, String> {
        let err = |what: &str, e: &dyn std::fmt::Display| format!("TLS certificate: {what}: {e}");
        let mut ca_params =
            CertificateParams::new(Vec::<String>::new()).map_err(|e| err("CA parameters", &e))?;
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "fibr compare bench CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_key = KeyPair::generate().map_err(|e| err("CA key", &e))?;
        let ca = CertifiedIssuer::self_signed(ca_params, ca_key).map_err(|e| err("CA", &e))?;
        let mut params = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
            .map_err(|e| err("server parameters", &e))?;
        params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().map_err(|e| err("server key", &e))?;
        let cert = params
            .signed_by(&key, &ca)
            .map_err(|e| err("server certificate", &e))?;

        let dir = std::env::temp_dir().join(format!("fibr-compare-{}-tls", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let mut roots = RootCertStore::empty();
        roots
            .add(ca.der().clone())
            .map_err(|e| err("trusting the CA", &e))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| err("client config", &e))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = vec![b"http/1.1".to_vec()];
        // Every connection a full handshake, as the load generators make them.
        client.resumption = Resumption::disabled();
        let path = |name: &str| dir.join(name).display().to_string();
        let tls = Tls {
            cert: path("cert.pem"),
            key: path("key.pem"),
            client: Arc::new(client),
            dir: dir.clone(),
        };
        for (file, text) in [(&tls.cert, cert.pem()), (&tls.key, key.serialize_pem())] {
            std::fs::write(file, text).map_err(|e| format!("writing {file}: {e}"))?;
        }
        Ok(tls)
    }

    /// The environment that makes a bench server serve HTTPS with this certificate.
    pub fn env(&self) -> [(&'static str, &str); 2] {
        [
            ("BENCH_TLS_CERT", self.cert.as_str()),
            ("BENCH_TLS_KEY", self.key.as_str()),
        ]
    }

    fn session(&self) -> Result<ClientConnection, String> {
        let name = ServerName::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST).into());
        ClientConnection::new(self.client.clone(), name).map_err(|e| format!("TLS client: {e}"))
    }

    /// A TLS connection to `addr` with its handshake done, checked to be what the load
    /// generators get: TLS 1.3, ALPN `http/1.1` (or none).
    pub fn connect(&self, addr: SocketAddr) -> Result<TlsStream, String> {
        let mut s = StreamOwned::new(self.session()?, idle::connect(addr)?);
        while s.conn.is_handshaking() {
            s.conn
                .complete_io(&mut s.sock)
                .map_err(|e| format!("TLS handshake: {e}"))?;
        }
        let version = s.conn.protocol_version();
        if version != Some(ProtocolVersion::TLSv1_3) {
            return Err(format!("the handshake negotiated {version:?}, not TLS 1.3"));
        }
        match s.conn.alpn_protocol() {
            None | Some(b"http/1.1") => Ok(s),
            Some(p) => Err(format!(
                "ALPN chose {:?}, not http/1.1",
                String::from_utf8_lossy(p)
            )),
        }
    }

    /// `idle::check_routes` over TLS.
    pub fn check_routes(&self, addr: SocketAddr, real: bool) -> Result<(), String> {
        idle::check_routes_on(|| self.connect(addr), real).map_err(|e| format!("over TLS: {e}"))
    }

    /// The idle scenario over TLS: `idle::idle_run` with connections that have each made a
    /// full handshake and had one GET / answered.
    pub fn idle_run(&self, srv: &RunningServer, n: usize) -> Result<Idle, String> {
        idle::idle_run_with(srv, n, |conns, upto| self.open_idle(srv.addr, conns, upto))
    }

    /// Opens TLS connections until `conns` holds `upto`, a batch at a time: the batch's
    /// connects, each with its ClientHello sent (the GET / waits in rustls until the
    /// handshake is done), then each handshake finished and its response read and checked,
    /// so the server works through the batch's handshakes while this thread finishes them
    /// in turn. Then only the socket is kept: the server holds an established TLS session,
    /// and this process no more than a descriptor per connection, not 10,000 client
    /// sessions with their buffers.
    fn open_idle(
        &self,
        addr: SocketAddr,
        conns: &mut Vec<TcpStream>,
        upto: usize,
    ) -> Result<(), String> {
        while conns.len() < upto {
            let start = conns.len();
            let end = (start + idle::BATCH).min(upto);
            let mut batch: Vec<TlsStream> = Vec::with_capacity(end - start);
            for i in start..end {
                let ctx = |e: String| format!("idle TLS connection {i}: {e}");
                let mut tls = self.session().map_err(ctx)?;
                tls.writer()
                    .write_all(idle::IDLE_REQUEST)
                    .map_err(|e| ctx(format!("buffering the request: {e}")))?;
                let mut s = StreamOwned::new(tls, idle::connect_retrying(addr).map_err(ctx)?);
                while s.conn.wants_write() {
                    s.conn
                        .write_tls(&mut s.sock)
                        .map_err(|e| ctx(format!("ClientHello: {e}")))?;
                }
                batch.push(s);
            }
            for (i, s) in (start..).zip(batch.iter_mut()) {
                idle::read_hello(s).map_err(|e| format!("idle TLS connection {i}: {e}"))?;
            }
            conns.extend(batch.into_iter().map(|s| s.sock));
        }
        Ok(())
    }
}
