//! A plain tokio TCP echo server, for comparison with `examples/echo.rs` (used by
//! `benches/idle_rss.rs`): `cargo run --release --example tokio_echo [PORT]` (default 9001;
//! 0 picks a free port). One task per connection, each with its own 4 KiB buffer, as
//! typical tokio code does. The actual address is printed on stderr.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn serve(mut sock: TcpStream) -> std::io::Result<()> {
    let mut buf = vec![0u8; 4096];
    loop {
        let n = sock.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        sock.write_all(&buf[..n]).await?;
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let port: u16 = match std::env::args().nth(1) {
        Some(p) => p.parse().map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("bad port {p:?}: {e}"),
            )
        })?,
        None => 9001,
    };
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    eprintln!("tokio echo server listening on {}", listener.local_addr()?);
    loop {
        let (sock, _) = match listener.accept().await {
            Ok(a) => a,
            Err(e) => {
                // EMFILE and the like: back off rather than spin or exit.
                eprintln!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = sock.set_nodelay(true);
        tokio::spawn(async move {
            let _ = serve(sock).await;
        });
    }
}
