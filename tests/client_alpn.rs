//! A connection whose connector negotiated HTTP/2 (ALPN `h2`, as a TLS connector reports
//! it through `Connected::negotiated_h2`) gets the HTTP/2 preface, not HTTP/1.1; the same
//! connector reporting HTTP/1.1 gets HTTP/1.1. The
//! server is a std listener on 127.0.0.1 that logs what each connection sent.
//!
//! Every test body runs under a watchdog and every await is bounded.

#![cfg(feature = "client")]

mod common;

use fibr::client::{Client, Connected, Connection, Connector, Error, ErrorKind};
use std::io::{self, IoSlice, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::thread;
use std::time::Duration;

use common::{run_bounded, step, wait_until};

/// A TCP stream that reports what a TLS connector would have negotiated.
struct Negotiated {
    inner: fibr::net::TcpStream,
    h2: bool,
}

impl Connection for Negotiated {
    fn connected(&self) -> Connected {
        if self.h2 {
            Connected::new().negotiated_h2()
        } else {
            Connected::new()
        }
    }
}

impl hyper::rt::Read for Negotiated {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        hyper::rt::Read::poll_read(Pin::new(&mut self.inner), cx, buf)
    }
}

impl hyper::rt::Write for Negotiated {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        hyper::rt::Write::poll_write(Pin::new(&mut self.inner), cx, buf)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        hyper::rt::Write::poll_write_vectored(Pin::new(&mut self.inner), cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        true
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        hyper::rt::Write::poll_flush(Pin::new(&mut self.inner), cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        hyper::rt::Write::poll_shutdown(Pin::new(&mut self.inner), cx)
    }
}

/// Connects over TCP to the URI's authority and says `h2` was negotiated, or not.
struct AlpnConnector {
    h2: bool,
}

impl Connector for AlpnConnector {
    type Io = Negotiated;
    async fn connect(&self, dst: &http::Uri) -> Result<Negotiated, Error> {
        let inner = fibr::net::TcpStream::connect(dst.authority().unwrap().as_str())
            .await
            .map_err(Error::from_connect_io)?;
        Ok(Negotiated { inner, h2: self.h2 })
    }
}

/// What each accepted connection sent before it closed (None while it is open).
type Log = Arc<Mutex<Vec<Option<Vec<u8>>>>>;

/// Accepts connections on 127.0.0.1 until the test ends; answers a request head with
/// `200 ok` and logs every connection's bytes once its peer closes.
fn logging_server() -> (SocketAddr, Log) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let log: Log = Arc::default();
    let l = log.clone();
    thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { return };
            let l = l.clone();
            let i = {
                let mut log = l.lock().unwrap();
                log.push(None);
                log.len() - 1
            };
            thread::spawn(move || {
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                    if got.ends_with(b"\r\n\r\n") {
                        let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
                    }
                }
                l.lock().unwrap()[i] = Some(got);
            });
        }
    });
    (addr, log)
}

#[test]
fn alpn_h2_gets_the_http2_preface_and_http11_gets_http11() {
    let (addr, log) = logging_server();
    let url = format!("http://{addr}/");
    run_bounded(Duration::from_secs(30), async move {
        // The control: the same connector, HTTP/1.1 negotiated.
        let client = Client::builder().build_with_connector(AlpnConnector { h2: false });
        let resp = step("an HTTP/1.1 request", client.get(&url))
            .await
            .expect("HTTP/1.1 over the custom connector");
        assert_eq!(resp.status(), 200);
        drop(client);

        // The logging server never answers HTTP/2 (it waits for an HTTP/1.1 head): the
        // request times out, and dropping the client closes the connection.
        let client = Client::builder()
            .request_timeout(Duration::from_millis(300))
            .build_with_connector(AlpnConnector { h2: true });
        let e = step("a request over h2", client.get(&url))
            .await
            .expect_err("no HTTP/2 answer");
        assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
        drop(client);
    });
    // Two connections (no retry on a fresh one); the h2 one got the preface.
    assert!(
        wait_until(Duration::from_secs(5), || {
            let log = log.lock().unwrap();
            log.len() >= 2 && log.iter().all(|c| c.is_some())
        }),
        "the client did not close both connections: {:?}",
        log.lock().unwrap()
    );
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 2, "{log:?}");
    let first = log[0].as_ref().unwrap();
    assert!(first.starts_with(b"GET / HTTP/1.1\r\n"), "{first:?}");
    let second = log[1].as_ref().unwrap();
    assert!(
        second.starts_with(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
        "{second:?}"
    );
}
