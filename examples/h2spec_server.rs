//! The server `scripts/h2spec` runs the HTTP/2 conformance tester against: three listeners
//! on 127.0.0.1 serving one app, each printed as `NAME PORT` on stdout once bound.
//!
//! - `h2c`: HTTP/1.1 and HTTP/2 by prior knowledge on one port (the default config);
//! - `h2c-only`: HTTP/2 only (`Http2Config::only`), so a bad preface gets a GOAWAY;
//! - `tls`: HTTPS with ALPN `h2`, a self-signed certificate made at startup (h2spec `-k`).
//!
//! `cargo run --example h2spec_server --features axum,tls`. Every path and method gets the same
//! answer, and only after the whole request body has arrived: a 128 KiB body, twice the
//! initial stream window. So a stream h2spec opens stays open while it sends the frames a
//! case is about (DATA, WINDOW_UPDATE, trailers), instead of racing a response that is
//! already complete (see h2spec's README in `../shared/conformance/h2spec/`).

use axum::body::Bytes;
use fibr::http::{Http2Config, ServerConfig};
use fibr::tls::rustls;
use http_body_util::BodyExt;
use std::future::IntoFuture;
use std::io::Write;
use std::sync::Arc;

/// Larger than the initial stream window (65,535), so the response waits for the client.
const RESPONSE_LEN: usize = 128 * 1024;

async fn answer(req: axum::extract::Request) -> Bytes {
    // Read (and drop) the whole body first: the response ends only after the request has.
    let _ = req.into_body().collect().await;
    Bytes::from(vec![b'x'; RESPONSE_LEN])
}

fn app() -> axum::Router {
    axum::Router::new().fallback(answer)
}

fn tls_config() -> std::io::Result<Arc<rustls::ServerConfig>> {
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let bad = |e: &dyn std::fmt::Display| std::io::Error::other(e.to_string());
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).map_err(|e| bad(&e))?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()));
    let config = rustls::ServerConfig::builder_with_provider(fibr::tls::crypto_provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(&e))?
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .map_err(|e| bad(&e))?;
    Ok(Arc::new(config))
}

fn main() -> std::io::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let tls = tls_config()?;
    fibr::run(async move {
        let bind = || fibr::net::TcpListener::bind("127.0.0.1:0");
        let (mixed, only, secure) = (bind().await?, bind().await?, bind().await?);
        let mut stdout = std::io::stdout().lock();
        for (name, l) in [("h2c", &mixed), ("h2c-only", &only), ("tls", &secure)] {
            writeln!(stdout, "{name} {}", l.local_addr()?.port())?;
        }
        stdout.flush()?;
        drop(stdout);
        let only_config =
            ServerConfig::default().with_http2(Http2Config::default().with_only(true));
        let (a, b, c) = futures_util::join!(
            fibr::serve(mixed, app()).into_future(),
            fibr::serve(only, app())
                .with_config(only_config)
                .into_future(),
            fibr::serve(secure, app()).with_tls(tls).into_future(),
        );
        a.and(b).and(c)
    })
}
