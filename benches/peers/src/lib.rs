//! What the peers of `cargo bench --bench compare` share: the command line, the worker
//! count and the routes' answers.
//!
//! Every peer takes `PORT` (0: a free one) as its one argument, reads `BENCH_WORKERS`
//! (default 1) for its worker threads, serves `GET /` → `hello`, `POST /echo` → the body and
//! `GET /json` → a small JSON object (the routes of `examples/bench_server.rs`), and once
//! listening prints `<name> listening on <addr>` on stderr. The HTTP/3 peer (`h3_quinn`)
//! serves `GET /bytes/{n}` → `n` bytes too (the download scenario's route).
//!
//! A peer that serves HTTPS (actix) does so when `BENCH_TLS_CERT` and `BENCH_TLS_KEY` name
//! PEM files ([`tls_config`]).

use std::io;
use std::net::SocketAddr;

/// The body of `GET /`.
pub const HELLO: &str = "hello";

/// The body of `GET /json`, as axum's `Json` writes it.
pub fn json_body() -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({ "message": "hello", "from": "bench" }))
        .expect("a JSON literal serializes")
}

/// `GET /bytes/{n}` streams its body in chunks of this size, slices of one static buffer
/// (as `examples/bench_server.rs` does): a download costs no allocation per chunk.
pub const BYTES_CHUNK: usize = 64 * 1024;
static ZEROS: [u8; BYTES_CHUNK] = [0; BYTES_CHUNK];

/// The body of `GET /bytes/{n}`: `n` bytes as chunks of at most [`BYTES_CHUNK`].
pub fn bytes_chunks(n: usize) -> impl Iterator<Item = bytes::Bytes> {
    (0..n)
        .step_by(BYTES_CHUNK)
        .map(move |at| bytes::Bytes::from_static(&ZEROS[..BYTES_CHUNK.min(n - at)]))
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// The listening address (127.0.0.1 and the port argument) and `BENCH_WORKERS`.
pub fn args(name: &str) -> io::Result<(SocketAddr, usize)> {
    let usage = || {
        invalid(format!(
            "usage: {name} PORT  (BENCH_WORKERS=N for N workers)"
        ))
    };
    let mut args = std::env::args().skip(1);
    let port: u16 = match args.next() {
        Some(p) => p
            .parse()
            .map_err(|e| invalid(format!("bad port {p:?}: {e}")))?,
        None => return Err(usage()),
    };
    if args.next().is_some() {
        return Err(usage());
    }
    let workers = match std::env::var("BENCH_WORKERS") {
        Ok(w) => w
            .parse()
            .ok()
            .filter(|&n: &usize| n > 0)
            .ok_or_else(|| invalid(format!("bad BENCH_WORKERS {w:?}")))?,
        Err(_) => 1,
    };
    Ok((SocketAddr::from(([127, 0, 0, 1], port)), workers))
}

/// The bench servers' shared TLS config (`benches/support/tls_config.rs`).
#[path = "../../support/tls_config.rs"]
pub mod tls_config;
