//! fibr's client: GETs a URL over HTTP/1.1, HTTP/2 and, when the server advertises it,
//! HTTP/3, and prints each response's version, status and body length:
//!
//! ```sh
//! cargo run --release --example client --features client,http3 -- http://127.0.0.1:3000/
//! CA_FILE=ca.pem cargo run --release --example client --features client,http3 -- https://localhost:3000/
//! ```
//!
//! - HTTP/1.1: a client with `http1_only`.
//! - HTTP/2: h2c by prior knowledge for `http://`, chosen by ALPN for `https://`.
//! - HTTP/3 (`https://` only): a client that follows `Alt-Svc`. Its first request goes
//!   over TCP; if the response advertises `h3`, the second goes over QUIC (or back over
//!   TCP, if QUIC cannot connect).
//!
//! `https://` servers are checked against the webpki roots, or against the CA
//! certificates in the PEM file named by `CA_FILE` (env). `examples/hello` with
//! `--features http3`, `TLS_CERT` and `TLS_KEY` serves all three.

use fibr::client::{Client, HttpsConnector};
use fibr::tls::rustls;
use http::header::ALT_SVC;
use http::uri::Scheme;
use http::Uri;
use http_body_util::BodyExt;
use std::sync::Arc;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

// pub: tests/examples.rs runs it.
pub fn main() -> Result<(), BoxError> {
    let url: Uri = std::env::args()
        .nth(1)
        .ok_or("usage: client URL")?
        .parse()?;
    let tls = tls_config()?;
    let builder = || {
        let mut b = Client::builder();
        if let Some(tls) = &tls {
            b.tls_config(tls.clone());
        }
        b
    };
    fibr::run(async {
        get("HTTP/1.1", &builder().http1_only(true).build_https(), &url).await?;
        get(
            "HTTP/2",
            &builder().http2_prior_knowledge().build_https(),
            &url,
        )
        .await?;
        if url.scheme() != Some(&Scheme::HTTPS) {
            return Ok(());
        }
        let client = builder().http3_alt_svc(true).build_https();
        let first = client.get(url.clone()).await?;
        let alt_svc = first.headers().get(ALT_SVC).cloned();
        first.into_body().collect().await?;
        match alt_svc {
            Some(alt_svc) => {
                let what = format!("HTTP/3 (Alt-Svc: {})", alt_svc.to_str()?);
                get(&what, &client, &url).await
            }
            None => {
                println!("HTTP/3: the server sent no Alt-Svc");
                Ok(())
            }
        }
    })
}

/// One GET with `client`, printed as `what: version status, length`.
async fn get(what: &str, client: &Client<HttpsConnector>, url: &Uri) -> Result<(), BoxError> {
    let res = client.get(url.clone()).await?;
    let (version, status) = (res.version(), res.status());
    let body = res.into_body().collect().await?.to_bytes();
    println!("{what}: {version:?} {status}, {} bytes", body.len());
    Ok(())
}

/// A TLS config that trusts the certificates in `CA_FILE`, if it is set.
fn tls_config() -> Result<Option<Arc<rustls::ClientConfig>>, BoxError> {
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    let Some(path) = std::env::var_os("CA_FILE") else {
        return Ok(None);
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(&path)? {
        roots.add(cert?)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(fibr::tls::crypto_provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Some(Arc::new(config)))
}
