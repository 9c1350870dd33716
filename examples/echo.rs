//! A raw TCP echo server on fibr: `cargo run --release --example echo [PORT]` (default 9000).

use fibr::{Binding, Config, Conn, Engine, Handler};

struct Echo;

impl Handler for Echo {
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        let _ = conn.send(data);
    }
}

fn main() -> std::io::Result<()> {
    let port: u16 = match std::env::args().nth(1) {
        Some(p) => p.parse().map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("bad port {p:?}: {e}"),
            )
        })?,
        None => 9000,
    };
    let engine = Engine::new(Config::default(), [Binding::tcp(("127.0.0.1", port), Echo)])?;
    eprintln!("echo server listening on {}", engine.binding_addrs(0)[0]);
    engine.run()
}
