//! An axum app on N worker processes sharing one port: `cargo run --release --features
//! axum --example prefork` serves http://127.0.0.1:`PORT` (env, default 3000) from
//! `WORKERS` (env, default the number of CPUs) children.
//!
//! `kill -HUP <supervisor>` replaces every child without failing a request (the new ones
//! listen before the old ones drain); `kill -TERM` (or Ctrl-C) stops them gracefully; a
//! child that dies is restarted.

use axum::routing::get;
use fibr::prefork::Prefork;
use std::net::SocketAddr;

fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn main() -> std::io::Result<()> {
    let port: u16 = env("PORT").unwrap_or(3000);
    let workers = env("WORKERS")
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    eprintln!(
        "supervisor {} serving http://127.0.0.1:{port} with {workers} workers",
        std::process::id()
    );
    Prefork::new(workers)
        .listen(SocketAddr::from(([127, 0, 0, 1], port)))
        .run(|mut child| {
            let listener = child.take_listener(0)?;
            fibr::run(async move {
                let worker = child.index();
                let app = axum::Router::new().route(
                    "/",
                    get(move || async move {
                        format!("Hello from worker {worker} (pid {})\n", std::process::id())
                    }),
                );
                let listener = fibr::net::TcpListener::from_std(listener)?;
                child.ready();
                fibr::serve(listener, app)
                    .with_graceful_shutdown(child.shutdown_signal())
                    .await
            })
        })
}
