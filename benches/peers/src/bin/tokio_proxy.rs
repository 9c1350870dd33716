//! A SOCKS5 and HTTP CONNECT proxy on tokio, written the way Rust users write one: a task
//! per client that reads the handshake, dials the target, answers, then
//! `tokio::io::copy_bidirectional`. The peer of `cargo bench --bench proxy` (issue 16):
//! the same work as fibr's `examples/proxy.rs` with `PROXY_ALLOW_ALL=1` (no rules, no
//! authentication), so the bench compares the relays.
//!
//! `BENCH_WORKERS=1 tokio_proxy 0`: a multi-thread runtime with that many workers; a
//! client whose first byte is 5 speaks SOCKS5 (no authentication, CONNECT, IPv4, IPv6 or a
//! name), any other speaks HTTP (`CONNECT host:port HTTP/1.1`).

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Longest CONNECT request head read.
const MAX_HEAD: usize = 8 * 1024;

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

/// SOCKS5 after its first byte: the methods, then one CONNECT request.
async fn socks5(client: &mut TcpStream) -> io::Result<TcpStream> {
    let n = client.read_u8().await? as usize;
    let mut methods = vec![0; n];
    client.read_exact(&mut methods).await?;
    if !methods.contains(&0) {
        client.write_all(&[5, 0xff]).await?;
        return Err(bad("no acceptable method"));
    }
    client.write_all(&[5, 0]).await?;
    let mut head = [0; 4];
    client.read_exact(&mut head).await?;
    if head[0] != 5 || head[1] != 1 {
        client.write_all(&[5, 7, 0, 1, 0, 0, 0, 0, 0, 0]).await?;
        return Err(bad("not a SOCKS5 CONNECT"));
    }
    let target = match head[3] {
        1 => {
            let mut ip = [0; 4];
            client.read_exact(&mut ip).await?;
            let port = client.read_u16().await?;
            format!("{}:{port}", Ipv4Addr::from(ip))
        }
        4 => {
            let mut ip = [0; 16];
            client.read_exact(&mut ip).await?;
            let port = client.read_u16().await?;
            format!("[{}]:{port}", Ipv6Addr::from(ip))
        }
        3 => {
            let len = client.read_u8().await? as usize;
            let mut name = vec![0; len];
            client.read_exact(&mut name).await?;
            let port = client.read_u16().await?;
            format!("{}:{port}", String::from_utf8_lossy(&name))
        }
        _ => {
            client.write_all(&[5, 8, 0, 1, 0, 0, 0, 0, 0, 0]).await?;
            return Err(bad("address type"));
        }
    };
    match TcpStream::connect(target).await {
        Ok(upstream) => {
            upstream.set_nodelay(true)?;
            client.write_all(&[5, 0, 0, 1, 0, 0, 0, 0, 0, 0]).await?;
            Ok(upstream)
        }
        Err(e) => {
            client.write_all(&[5, 5, 0, 1, 0, 0, 0, 0, 0, 0]).await?;
            Err(e)
        }
    }
}

/// HTTP: a `CONNECT host:port` head, read to its blank line.
async fn http_connect(client: &mut TcpStream, first: u8) -> io::Result<TcpStream> {
    let mut head = vec![first];
    let mut buf = [0; 1024];
    let end = loop {
        if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if head.len() > MAX_HEAD {
            return Err(bad("head too long"));
        }
        let n = client.read(&mut buf).await?;
        if n == 0 {
            return Err(bad("EOF in the head"));
        }
        head.extend_from_slice(&buf[..n]);
    };
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let line = std::str::from_utf8(line).map_err(|_| bad("head not UTF-8"))?;
    let mut parts = line.split(' ');
    let (Some("CONNECT"), Some(target)) = (parts.next(), parts.next()) else {
        client
            .write_all(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
            .await?;
        return Err(bad("not CONNECT"));
    };
    match TcpStream::connect(target).await {
        Ok(mut upstream) => {
            upstream.set_nodelay(true)?;
            // What a client sent past its head is the tunnel's first bytes.
            upstream.write_all(&head[end..]).await?;
            client.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await?;
            Ok(upstream)
        }
        Err(e) => {
            client
                .write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
                .await?;
            Err(e)
        }
    }
}

async fn serve(mut client: TcpStream) -> io::Result<()> {
    client.set_nodelay(true)?;
    let first = client.read_u8().await?;
    let mut upstream = if first == 5 {
        socks5(&mut client).await?
    } else {
        http_connect(&mut client, first).await?
    };
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

fn main() -> io::Result<()> {
    let (addr, workers): (SocketAddr, usize) = fibr_bench_peers::args("tokio_proxy")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("bench-proxy")
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = TcpListener::bind(addr).await?;
        eprintln!(
            "tokio proxy ({workers} workers) listening on {}",
            listener.local_addr()?
        );
        loop {
            let (client, _) = listener.accept().await?;
            tokio::spawn(async move {
                let _ = serve(client).await;
            });
        }
    })
}
