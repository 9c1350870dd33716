//! Shared by the tokio runtime tests: an app whose handlers need a tokio context, served by
//! fibr from inside the test's tokio runtime, asked over raw sockets on a blocking thread.

use axum::routing::get;
use axum::Router;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

fn app(echo: SocketAddr, file: std::path::PathBuf) -> Router {
    Router::new()
        .route(
            "/sleep",
            get(|| async {
                let t = Instant::now();
                tokio::time::sleep(Duration::from_millis(50)).await;
                format!("slept {}", t.elapsed().as_millis() >= 50)
            }),
        )
        .route(
            "/spawn",
            get(|| async {
                let h = tokio::spawn(async {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    21 * 2
                });
                format!("spawned {}", h.await.unwrap())
            }),
        )
        .route(
            "/fs",
            get(move || {
                let file = file.clone();
                async move { tokio::fs::read_to_string(file).await.unwrap() }
            }),
        )
        .route(
            "/net",
            get(move || async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut s = tokio::net::TcpStream::connect(echo).await.unwrap();
                s.write_all(b"ping").await.unwrap();
                let mut buf = [0u8; 4];
                s.read_exact(&mut buf).await.unwrap();
                String::from_utf8(buf.to_vec()).unwrap()
            }),
        )
}

/// GETs `path` with a raw socket and returns the body (Content-Length framing).
fn get_body(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200 OK"), "{path}: {out}");
    out.split("\r\n\r\n").nth(1).unwrap_or_default().to_string()
}

pub async fn serve_and_check() {
    // A tokio echo server for the /net route.
    let echo_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let echo = echo_listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = echo_listener.accept().await.unwrap();
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    let file = std::env::temp_dir().join(format!("fibr-tokio-fs-{}", std::process::id()));
    std::fs::write(&file, "from tokio::fs").unwrap();

    let listener = fibr::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        fibr::serve(listener, app(echo, file.clone()))
            .with_graceful_shutdown(async move {
                let _ = stop_rx.await;
            })
            .await
    });

    let bodies = tokio::task::spawn_blocking(move || {
        ["/sleep", "/spawn", "/fs", "/net"].map(|p| get_body(addr, p))
    })
    .await
    .unwrap();
    assert_eq!(
        bodies,
        ["slept true", "spawned 42", "from tokio::fs", "ping"]
    );

    stop_tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("graceful shutdown finishes")
        .unwrap()
        .unwrap();
}
