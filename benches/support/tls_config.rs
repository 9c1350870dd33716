//! The rustls server config every HTTPS server of the benches uses, built from
//! `BENCH_TLS_CERT` and `BENCH_TLS_KEY`. Included (`#[path]`) by `examples/bench_server.rs`
//! (fibr and axum) and by `benches/peers` (actix-web), so that all serve one config.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::io;

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// The rustls server config from `BENCH_TLS_CERT` (a PEM certificate chain) and
/// `BENCH_TLS_KEY` (its PEM private key), if both are set: the one
/// every bench server serves. The ring provider (never the
/// process default), TLS 1.2 and 1.3, no client authentication, ALPN `http/1.1`, and
/// stateless session tickets (what fibr turns on for a config without a ticketer).
///
/// `BENCH_TLS_ALPN`, a comma-separated list, replaces the ALPN protocols: the HTTP/2 over
/// TLS scenario sets `h2,http/1.1` (the list `fibr::serve(..).with_tls(..)` fills in for a
/// config without one); the HTTP/1 scenarios leave it unset.
pub fn from_env() -> io::Result<Option<rustls::ServerConfig>> {
    let (cert, key) = match (
        std::env::var_os("BENCH_TLS_CERT"),
        std::env::var_os("BENCH_TLS_KEY"),
    ) {
        (Some(cert), Some(key)) => (cert, key),
        (None, None) => return Ok(None),
        _ => {
            return Err(invalid(
                "set both BENCH_TLS_CERT and BENCH_TLS_KEY (or neither)".into(),
            ))
        }
    };
    let chain = CertificateDer::pem_file_iter(&cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| invalid(format!("reading certificates from {cert:?}: {e}")))?;
    let key = PrivateKeyDer::from_pem_file(&key)
        .map_err(|e| invalid(format!("reading a private key from {key:?}: {e}")))?;
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
        .map_err(|e| invalid(format!("TLS config: {e}")))?;
    config.alpn_protocols = match std::env::var("BENCH_TLS_ALPN") {
        Ok(list) => list
            .split(',')
            .map(|p| p.trim().as_bytes().to_vec())
            .filter(|p| !p.is_empty())
            .collect(),
        Err(_) => vec![b"http/1.1".to_vec()],
    };
    config.ticketer =
        rustls::crypto::ring::Ticketer::new().map_err(|e| invalid(format!("ticketer: {e}")))?;
    Ok(Some(config))
}
