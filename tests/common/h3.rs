//! HTTP/3 test helpers (feature `http3` with `axum`): fibr serving an axum app over HTTPS
//! and HTTP/3 on one port, and a quinn + h3-quinn client on tokio to talk to it.

use super::pki::Pki;
use axum::body::{Body, Bytes};
use axum::extract::Path;
use axum::routing::{get, post};
use axum::Router;
use bytes::Buf;
use fibr::http::{Http3Config, ServerConfig};
use fibr::net::TcpListener;
use fibr::tls::rustls;
use http::{HeaderMap, HeaderValue, Request, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use std::convert::Infallible;
use std::io::{Read, Write};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const LIMIT: Duration = Duration::from_secs(30);
/// The streaming route's chunks: 64 × 16 KiB, more than QUIC's initial windows.
pub const CHUNKS: usize = 64;
pub const CHUNK: usize = 16 * 1024;

/// The `/pattern/{len}` route streams [`pattern`]`(0..len)` in chunks of this size.
pub const PATTERN_CHUNK: usize = 64 * 1024;

/// Bytes that differ from their neighbours and repeat only every 251 × 256 bytes, so a
/// lost, doubled or misplaced chunk shows.
pub fn pattern(range: std::ops::Range<usize>) -> Vec<u8> {
    range.map(|i| (i % 251) as u8 ^ (i / 251) as u8).collect()
}

pub fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "hello over h3" }))
        .route("/echo", post(|body: Bytes| async move { body }))
        .route(
            "/pattern/{len}",
            get(|Path(len): Path<usize>| async move {
                let chunks = (0..len).step_by(PATTERN_CHUNK).map(move |at| {
                    let end = len.min(at + PATTERN_CHUNK);
                    Ok::<_, Infallible>(Bytes::from(pattern(at..end)))
                });
                Body::from_stream(futures_util::stream::iter(chunks))
            }),
        )
        .route(
            "/slow",
            get(|| async {
                fibr::time::sleep(Duration::from_millis(400)).await;
                "slow done"
            }),
        )
        .route(
            "/stream",
            get(|| async {
                let chunks =
                    (0..CHUNKS).map(|i| Ok::<_, Infallible>(Bytes::from(vec![i as u8; CHUNK])));
                Body::from_stream(futures_util::stream::iter(chunks))
            }),
        )
        .route(
            "/trailers",
            get(|| async {
                let mut trailers = HeaderMap::new();
                trailers.insert("x-checksum", HeaderValue::from_static("abc"));
                let frames = vec![
                    Ok::<_, Infallible>(Frame::data(Bytes::from_static(b"with trailers"))),
                    Ok(Frame::trailers(trailers)),
                ];
                Body::new(StreamBody::new(futures_util::stream::iter(frames)))
            }),
        )
        .route(
            "/request-trailers",
            post(|body: Body| async move {
                let collected = body.collect().await.unwrap();
                let trailer = collected
                    .trailers()
                    .and_then(|t| t.get("x-sent"))
                    .map(|v| v.to_str().unwrap().to_string())
                    .unwrap_or_default();
                format!("{} bytes, x-sent={trailer}", collected.to_bytes().len())
            }),
        )
}

/// Serves `app()` over HTTPS and HTTP/3 on one port; returns the address (TCP and UDP).
pub fn start(pki: &Pki) -> SocketAddr {
    start_with(pki, ServerConfig::default())
}

pub fn start_with(pki: &Pki, cfg: ServerConfig) -> SocketAddr {
    let (addr, serve) = h3_serve(pki);
    let serve = serve.with_config(cfg);
    drop(fibr::spawn(async move {
        if let Err(e) = serve.await {
            eprintln!("serve failed: {e}");
        }
    }));
    addr
}

/// `app()` over TLS and HTTP/3, not yet running, on a new port of 127.0.0.1 that is free on
/// both TCP and UDP (the TCP listener's port may be taken on UDP, by another test's
/// sockets: then it binds another).
pub fn h3_serve(pki: &Pki) -> (SocketAddr, fibr::http::Serve<Router>) {
    h3_serve_app(pki, app())
}

/// [`h3_serve`] with another app.
pub fn h3_serve_app(pki: &Pki, app: Router) -> (SocketAddr, fibr::http::Serve<Router>) {
    let leaf = pki.server(&["localhost"]);
    let tls = Arc::new(pki.server_config(&leaf));
    for _ in 0..100 {
        let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).expect("bind");
        let addr = listener.local_addr().unwrap();
        let serve = fibr::serve(listener, app.clone())
            .with_tls(tls.clone())
            .with_http3();
        if serve.http3_local_addr().is_ok_and(|udp| udp == addr) {
            return (addr, serve);
        }
    }
    panic!("no port free on both TCP and UDP");
}

pub fn h3_config(http3: Http3Config) -> ServerConfig {
    ServerConfig::default().with_http3_config(http3)
}

/// One HTTP/1.1 request over TLS: the response's head and body as text.
pub fn https_get(pki: &Pki, addr: SocketAddr) -> String {
    let config = Arc::new(pki.client_config());
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(config, name).unwrap();
    let sock = super::connect_within(addr, LIMIT);
    sock.set_read_timeout(Some(LIMIT)).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, sock);
    tls.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    let _ = tls.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

pub type SendRequest = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// A quinn client endpoint for `pki`'s server certificates, ALPN `h3`.
pub fn quinn_endpoint(pki: &Pki) -> quinn::Endpoint {
    let mut crypto = pki.client_config();
    crypto.alpn_protocols = vec![b"h3".to_vec()];
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(crypto).unwrap();
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    endpoint
}

pub async fn quic_connect(endpoint: &quinn::Endpoint, addr: SocketAddr) -> quinn::Connection {
    endpoint
        .connect(addr, "localhost")
        .unwrap()
        .await
        .expect("QUIC handshake")
}

/// A quinn endpoint and an h3 connection to `addr`; the h3 driver runs on a tokio task.
pub async fn h3_connect(pki: &Pki, addr: SocketAddr) -> (quinn::Endpoint, SendRequest) {
    let endpoint = quinn_endpoint(pki);
    let conn = quic_connect(&endpoint, addr).await;
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn))
        .await
        .expect("h3 connection");
    tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    (endpoint, send)
}

/// A response's status, body and trailers.
pub struct Got {
    pub status: StatusCode,
    pub body: Vec<u8>,
    pub trailers: Option<HeaderMap>,
}

pub async fn exchange(
    send: &mut SendRequest,
    req: Request<()>,
    body: &[u8],
    trailers: Option<HeaderMap>,
) -> Got {
    let mut stream = send.send_request(req).await.expect("send request");
    if !body.is_empty() {
        stream
            .send_data(Bytes::copy_from_slice(body))
            .await
            .expect("send body");
    }
    if let Some(t) = trailers {
        stream.send_trailers(t).await.expect("send trailers");
    }
    stream.finish().await.expect("finish request");
    let resp = stream.recv_response().await.expect("response head");
    let mut got = Vec::new();
    while let Some(mut chunk) = stream.recv_data().await.expect("response body") {
        while chunk.has_remaining() {
            let c = chunk.chunk();
            got.extend_from_slice(c);
            let n = c.len();
            chunk.advance(n);
        }
    }
    let trailers = stream.recv_trailers().await.expect("trailers");
    Got {
        status: resp.status(),
        body: got,
        trailers,
    }
}

pub fn get_req(uri: &str) -> Request<()> {
    Request::get(format!("https://localhost{uri}"))
        .body(())
        .unwrap()
}

pub fn post_to(uri: &str) -> Request<()> {
    Request::post(format!("https://localhost{uri}"))
        .body(())
        .unwrap()
}

pub fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// What a [`Relay`] does to the datagrams it forwards, in each direction on its own count
/// (deterministic, so a failure repeats): every `drop_every`-th is dropped, and every
/// `hold_every`-th is held back and sent after the next one (0: never).
#[derive(Clone, Copy, Default)]
pub struct Faults {
    pub drop_every: usize,
    pub hold_every: usize,
}

/// How long a held datagram waits for a next one to pass it (then it goes anyway).
const HOLD_AT_MOST: Duration = Duration::from_millis(2);

/// What a [`Relay`] did, per direction (`[to the server, to the client]`).
#[derive(Default)]
pub struct RelayStats {
    pub forwarded: [AtomicUsize; 2],
    pub dropped: [AtomicUsize; 2],
    pub reordered: [AtomicUsize; 2],
    /// Retry packets the server sent (QUIC v1 long header, type 3).
    pub retries: AtomicUsize,
}

impl RelayStats {
    pub fn get(n: &[AtomicUsize; 2]) -> [usize; 2] {
        [n[0].load(Ordering::Relaxed), n[1].load(Ordering::Relaxed)]
    }
}

/// A UDP relay on 127.0.0.1 between one client and `server`: the client sends to
/// [`Relay::addr`], the server sees the relay's other socket. Stops when dropped.
pub struct Relay {
    pub addr: SocketAddr,
    pub stats: Arc<RelayStats>,
    /// The server side's socket (connected to the server).
    back: Arc<UdpSocket>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Relay {
    pub fn start(server: SocketAddr, faults: Faults) -> Relay {
        let front = UdpSocket::bind("127.0.0.1:0").unwrap();
        let back = UdpSocket::bind("127.0.0.1:0").unwrap();
        back.connect(server).unwrap();
        for s in [&front, &back] {
            s.set_read_timeout(Some(HOLD_AT_MOST)).unwrap();
        }
        let addr = front.local_addr().unwrap();
        let stats = Arc::new(RelayStats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let client = Arc::new(Mutex::new(None::<SocketAddr>));
        let (front, back) = (Arc::new(front), Arc::new(back));
        let to_server = {
            let (front, back, client) = (front.clone(), back.clone(), client.clone());
            Direction::new(0, faults, stats.clone(), stop.clone()).spawn(
                move |buf| {
                    let (n, from) = front.recv_from(buf)?;
                    *client.lock().unwrap() = Some(from);
                    Ok(n)
                },
                move |d| drop(back.send(d)),
            )
        };
        let back_socket = back.clone();
        let to_client = Direction::new(1, faults, stats.clone(), stop.clone()).spawn(
            move |buf| back.recv(buf),
            move |d| {
                if let Some(to) = *client.lock().unwrap() {
                    let _ = front.send_to(d, to);
                }
            },
        );
        Relay {
            addr,
            stats,
            back: back_socket,
            stop,
            threads: vec![to_server, to_client],
        }
    }

    /// Sends what the client sends to `server` from now on (and only what `server` sends
    /// back reaches the client): as if the client's server were replaced at its address.
    pub fn redirect(&self, server: SocketAddr) {
        self.back.connect(server).unwrap();
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One direction of a [`Relay`]: its count, its held datagram and its faults.
struct Direction {
    index: usize,
    faults: Faults,
    stats: Arc<RelayStats>,
    stop: Arc<AtomicBool>,
}

impl Direction {
    fn new(index: usize, faults: Faults, stats: Arc<RelayStats>, stop: Arc<AtomicBool>) -> Self {
        Direction {
            index,
            faults,
            stats,
            stop,
        }
    }

    fn spawn(
        self,
        mut recv: impl FnMut(&mut [u8]) -> std::io::Result<usize> + Send + 'static,
        send: impl Fn(&[u8]) + Send + 'static,
    ) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 65_536];
            let mut held: Option<Vec<u8>> = None;
            let mut count = 0usize;
            let every = |n: usize, k: usize| k > 0 && n % k == 0;
            while !self.stop.load(Ordering::Relaxed) {
                let n = match recv(&mut buf) {
                    Ok(n) => n,
                    Err(_) => {
                        // Quiet: what was held goes now, late but not lost.
                        if let Some(h) = held.take() {
                            self.stats.forwarded[self.index].fetch_add(1, Ordering::Relaxed);
                            send(&h);
                        }
                        continue;
                    }
                };
                let d = &buf[..n];
                if self.index == 1 && is_retry(d) {
                    self.stats.retries.fetch_add(1, Ordering::Relaxed);
                }
                count += 1;
                let i = self.index;
                if every(count, self.faults.drop_every) {
                    self.stats.dropped[i].fetch_add(1, Ordering::Relaxed);
                } else if held.is_none() && every(count, self.faults.hold_every) {
                    self.stats.reordered[i].fetch_add(1, Ordering::Relaxed);
                    held = Some(d.to_vec());
                } else {
                    self.stats.forwarded[i].fetch_add(1, Ordering::Relaxed);
                    send(d);
                    if let Some(h) = held.take() {
                        self.stats.forwarded[i].fetch_add(1, Ordering::Relaxed);
                        send(&h);
                    }
                }
            }
        })
    }
}

/// A QUIC v1 Retry packet: long header, fixed bit, type 3.
pub fn is_retry(d: &[u8]) -> bool {
    d.len() > 5 && d[0] & 0xf0 == 0xf0 && d[1..5] == [0, 0, 0, 1]
}
