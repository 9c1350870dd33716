//! SOCKS5, SOCKS4/4a, HTTP CONNECT and http:// forwarding on one port: `cargo run
//! --release --features proxy --example proxy` listens on 127.0.0.1:`PORT` (env, default
//! 1080).
//!
//! Safe by default: only clients on this host may use it, and targets on loopback,
//! private and other special ranges are refused. `PROXY_ALLOW_ALL=1` makes it an open
//! relay (for local testing: it then reaches this host's and the LAN's services too).
//! `PROXY_USER` and `PROXY_PASSWORD` together require those credentials. `WORKERS` (env)
//! sets the worker threads (default: one per core); `cargo bench --bench proxy` runs it
//! with one.

use fibr::proxy::{ProxyConfig, Rules, Server};
use fibr::{Binding, Config, Engine};
use std::io;

fn main() -> io::Result<()> {
    let port: u16 = match std::env::var("PORT") {
        Ok(p) => p.parse().map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("bad PORT {p:?}: {e}"))
        })?,
        Err(_) => 1080,
    };
    let open = std::env::var("PROXY_ALLOW_ALL").is_ok_and(|v| v == "1");
    let mut rules = if open {
        Rules::allow_all()
    } else {
        let local = |net: &str| net.parse().expect("a network");
        Rules::new()
            .allow_clients(local("127.0.0.0/8"))
            .allow_clients(local("::1"))
    };
    if let (Ok(user), Ok(password)) = (std::env::var("PROXY_USER"), std::env::var("PROXY_PASSWORD"))
    {
        rules = rules.require_auth(move |u, p| u == user && p == password);
    }
    let workers: usize = match std::env::var("WORKERS") {
        Ok(w) => w.parse().map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad WORKERS {w:?}: {e}"),
            )
        })?,
        Err(_) => 0,
    };
    let proxy = Server::new(ProxyConfig::new(rules));
    let engine = Engine::new(
        Config::default().with_workers(workers),
        [Binding::tcp(("127.0.0.1", port), proxy)],
    )?;
    eprintln!(
        "SOCKS5/4/4a and HTTP (CONNECT, forwarding) proxy{} listening on {}",
        if open {
            " (open relay: PROXY_ALLOW_ALL=1)"
        } else {
            ""
        },
        engine.binding_addrs(0)[0],
    );
    engine.run()
}
