//! Static files: `fibr::fs::ServeDir` mounted at `/` of an axum Router, served by fibr.
//!
//! `cargo run --release --example files` serves `DIR` (default `.`) on 127.0.0.1:8081
//! (`PORT` overrides). Small files come from memory (and follow the disk), large ones go
//! out with sendfile(2); `x.br` / `x.gz` beside `x` are sent to clients that take them.
//! With `--features tls` and `TLS_CERT` / `TLS_KEY` set to PEM files it serves HTTPS on the
//! same port.

mod common;

use axum::Router;
use fibr::fs::ServeDir;

fn main() -> std::io::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let port = common::port("PORT", 8081)?;
    let dir = std::env::var("DIR").unwrap_or_else(|_| ".".into());
    let tls = common::tls_from_env()?;
    let app = Router::new().fallback_service(ServeDir::new(&dir));
    fibr::run(async move {
        let listener = fibr::net::TcpListener::bind(("127.0.0.1", port)).await?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        eprintln!("serving {dir} on {scheme}://{}", listener.local_addr()?);
        let serve = fibr::serve(listener, app);
        #[cfg(feature = "tls")]
        let serve = match tls {
            Some(tls) => serve.with_tls(tls),
            None => serve,
        };
        serve.await
    })
}
