//! What the server examples read from the environment: ports, and a TLS certificate.

use std::io;

/// The port in the environment variable `var`, or `default` when it is not set.
pub fn port(var: &str, default: u16) -> io::Result<u16> {
    match std::env::var(var) {
        Ok(p) => p.parse().map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("bad {var} {p:?}: {e}"))
        }),
        Err(_) => Ok(default),
    }
}

#[cfg(feature = "tls")]
pub type TlsConfig = std::sync::Arc<fibr::tls::rustls::ServerConfig>;
#[cfg(not(feature = "tls"))]
pub type TlsConfig = std::convert::Infallible;

/// A TLS config (no ALPN protocols named) from the PEM files named by `TLS_CERT` (a
/// certificate chain) and `TLS_KEY` (its private key), if both are set.
pub fn tls_from_env() -> io::Result<Option<TlsConfig>> {
    let (Some(cert), Some(key)) = (std::env::var_os("TLS_CERT"), std::env::var_os("TLS_KEY"))
    else {
        return Ok(None);
    };
    #[cfg(feature = "tls")]
    {
        use fibr::tls::rustls;
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let bad = |what: &str, e: &dyn std::fmt::Display| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("{what}: {e}"))
        };
        let chain = CertificateDer::pem_file_iter(&cert)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| bad("TLS_CERT", &e))?;
        let key = PrivateKeyDer::from_pem_file(&key).map_err(|e| bad("TLS_KEY", &e))?;
        let config = rustls::ServerConfig::builder_with_provider(fibr::tls::crypto_provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| bad("TLS versions", &e))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| bad("TLS_CERT/TLS_KEY", &e))?;
        Ok(Some(std::sync::Arc::new(config)))
    }
    #[cfg(not(feature = "tls"))]
    {
        let _ = (cert, key);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "TLS_CERT and TLS_KEY need the `tls` feature (cargo run --features tls ...)",
        ))
    }
}
