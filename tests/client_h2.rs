//! fibr's client speaking HTTP/2 over real sockets on 127.0.0.1: h2c by prior knowledge
//! against fibr's own server and hyper's, h2 over TLS by ALPN against fibr's server,
//! multiplexing on one connection, flow control (4 MiB each way), trailers, a GOAWAY
//! mid-flight and reset streams.

#![cfg(all(feature = "client", feature = "tls"))]

mod common;

use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use common::{bounded, start, step};
use fibr::client::Client;
use fibr::http::ServerConfig;
use http::{HeaderMap, Request, Response, Version};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);
const BIG: usize = 4 << 20;

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 % 251) as u8).collect()
}

fn app() -> Router {
    Router::new()
        .route(
            "/version",
            get(|req: axum::extract::Request| async move { format!("{:?}", req.version()) }),
        )
        .route("/big", get(|| async { pattern(BIG) }))
        .route("/echo", post(|body: axum::body::Bytes| async move { body }))
        // axum's 2 MiB default would refuse the 4 MiB upload.
        .layer(axum::extract::DefaultBodyLimit::disable())
}

fn h2c() -> Client {
    Client::builder().http2_prior_knowledge().build()
}

#[test]
fn h2c_by_prior_knowledge_against_fibrs_server() {
    bounded(LIMIT, || {
        let addr = start(app(), ServerConfig::default());
        fibr::run(async move {
            let client = h2c();
            for _ in 0..3 {
                let res = step("GET", client.get(format!("http://{addr}/version")))
                    .await
                    .unwrap();
                assert_eq!(res.status(), 200);
                assert_eq!(res.version(), Version::HTTP_2);
                let body = res.into_body().collect().await.unwrap().to_bytes();
                assert_eq!(body, "HTTP/2.0");
            }
        });
    });
}

#[test]
fn four_mib_up_and_down_against_fibrs_server() {
    bounded(LIMIT, || {
        let addr = start(app(), ServerConfig::default());
        fibr::run(async move {
            let client = h2c();
            let res = step("GET /big", client.get(format!("http://{addr}/big")))
                .await
                .unwrap();
            use http_body::Body as _;
            assert_eq!(res.body().size_hint().exact(), Some(BIG as u64));
            let body = step("the 4 MiB body", res.into_body().collect())
                .await
                .unwrap()
                .to_bytes();
            assert!(
                body == pattern(BIG),
                "download differs ({} bytes)",
                body.len()
            );

            // A full body, and a streamed one in 64 KiB pieces (pulled as windows open).
            let data = Bytes::from(pattern(BIG));
            let req = Request::post(format!("http://{addr}/echo"))
                .body(Full::new(data.clone()))
                .unwrap();
            let res = step("POST full", client.request(req)).await.unwrap();
            let echoed = res.into_body().collect().await.unwrap().to_bytes();
            let at = echoed.iter().zip(data.iter()).position(|(a, b)| a != b);
            assert!(
                echoed == data,
                "full upload differs: {} bytes, first difference at {at:?}",
                echoed.len()
            );

            let chunks: Vec<Result<Frame<Bytes>, Infallible>> = data
                .chunks(64 * 1024)
                .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
                .collect();
            let body = StreamBody::new(futures_util::stream::iter(chunks));
            let req = Request::post(format!("http://{addr}/echo"))
                .body(body)
                .unwrap();
            let res = step("POST streamed", client.request(req)).await.unwrap();
            let echoed = res.into_body().collect().await.unwrap().to_bytes();
            assert!(echoed == data, "streamed upload differs");
        });
    });
}

#[test]
fn h2_over_tls_by_alpn_against_fibrs_server() {
    use common::pki::Pki;
    bounded(LIMIT, || {
        let pki = Pki::new();
        let leaf = pki.server(&["localhost"]);
        let tls = pki.server_config(&leaf);
        let listener = fibr::run(fibr::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        drop(fibr::spawn(async move {
            let _ = fibr::serve(listener, app()).with_tls(Arc::new(tls)).await;
        }));
        fibr::run(async move {
            let url = format!("https://localhost:{}/version", addr.port());
            let client = Client::builder()
                .tls_config(Arc::new(pki.client_config()))
                .build_https();
            for _ in 0..2 {
                let res = step("GET over h2", client.get(&url)).await.unwrap();
                assert_eq!(res.version(), Version::HTTP_2);
                let body = res.into_body().collect().await.unwrap().to_bytes();
                assert_eq!(body, "HTTP/2.0");
            }
            let client = Client::builder()
                .http1_only(true)
                .tls_config(Arc::new(pki.client_config()))
                .build_https();
            let res = step("GET over http/1.1", client.get(&url)).await.unwrap();
            assert_eq!(res.version(), Version::HTTP_11);
            let body = res.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(body, "HTTP/1.1");
        });
    });
}

// --- Against hyper's HTTP/2 server -----------------------------------------------------

type HyperBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// hyper's h2 server on a tokio runtime; `accepted` counts TCP connections. `goaway`
/// holds a sender the service can fire to shut the connection down gracefully.
struct Hyper {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    closed: Arc<AtomicUsize>,
    _rt: tokio::runtime::Runtime,
}

type Shutdowns = Arc<Mutex<Vec<tokio::sync::oneshot::Sender<()>>>>;

fn hyper_server(max_streams: u32) -> Hyper {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let closed = Arc::new(AtomicUsize::new(0));
    let closes = closed.clone();
    rt.spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            count.fetch_add(1, Ordering::SeqCst);
            let (tx, rx) = tokio::sync::oneshot::channel();
            let shutdowns: Shutdowns = Arc::new(Mutex::new(vec![tx]));
            let closes = closes.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    let shutdowns = shutdowns.clone();
                    async move { hyper_service(req, shutdowns).await }
                });
                let conn =
                    hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                        .max_concurrent_streams(max_streams)
                        .serve_connection(hyper_util::rt::TokioIo::new(tcp), svc);
                let mut conn = std::pin::pin!(conn);
                tokio::select! {
                    _ = conn.as_mut() => {}
                    _ = rx => {
                        conn.as_mut().graceful_shutdown();
                        let _ = conn.await;
                    }
                }
                closes.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    Hyper {
        addr,
        accepted,
        closed,
        _rt: rt,
    }
}

async fn hyper_service(
    req: Request<Incoming>,
    shutdowns: Shutdowns,
) -> Result<Response<HyperBody>, std::io::Error> {
    let path = req.uri().path().to_owned();
    match path.as_str() {
        "/reset" => Err(std::io::Error::other("the service fails: a reset stream")),
        "/slow-goaway" => {
            // GOAWAY while this request is in flight; it still gets its answer.
            if let Some(tx) = shutdowns.lock().unwrap().pop() {
                let _ = tx.send(());
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok(Response::new(Full::new(Bytes::from("finished")).boxed()))
        }
        "/trailers" => {
            let collected = req.into_body().collect().await.unwrap();
            let got = collected.trailers().cloned().unwrap_or_default();
            let body = collected.to_bytes();
            let mut t = HeaderMap::new();
            t.insert("grpc-status", "0".parse().unwrap());
            if let Some(v) = got.get("x-request-trailer") {
                t.insert("x-echoed-trailer", v.clone());
            }
            let frames: Vec<Result<Frame<Bytes>, Infallible>> =
                vec![Ok(Frame::data(body)), Ok(Frame::trailers(t))];
            Ok(Response::new(
                StreamBody::new(futures_util::stream::iter(frames)).boxed(),
            ))
        }
        _ => {
            // A little wait so that the requests overlap on the connection.
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(Response::new(Full::new(Bytes::from(path)).boxed()))
        }
    }
}

#[test]
fn a_hundred_concurrent_requests_share_one_connection_beyond_the_stream_limit() {
    bounded(LIMIT, || {
        // hyper allows 10 streams at once: the other 90 wait for streams to end.
        let server = hyper_server(10);
        let addr = server.addr;
        fibr::run(async move {
            let client = h2c();
            let requests = (0..100).map(|i| {
                let client = client.clone();
                async move {
                    let res = client.get(format!("http://{addr}/r{i}")).await.unwrap();
                    assert_eq!(res.version(), Version::HTTP_2);
                    let body = res.into_body().collect().await.unwrap().to_bytes();
                    assert_eq!(body, format!("/r{i}"));
                }
            });
            step("100 requests", futures_util::future::join_all(requests)).await;
        });
        assert_eq!(
            server.accepted.load(Ordering::SeqCst),
            1,
            "one TCP connection"
        );
    });
}

#[test]
fn trailers_both_ways_against_hyper() {
    bounded(LIMIT, || {
        let server = hyper_server(100);
        let addr = server.addr;
        fibr::run(async move {
            let client = h2c();
            let mut t = HeaderMap::new();
            t.insert("x-request-trailer", "sent".parse().unwrap());
            let frames: Vec<Result<Frame<Bytes>, Infallible>> = vec![
                Ok(Frame::data(Bytes::from("payload"))),
                Ok(Frame::trailers(t)),
            ];
            let req = Request::post(format!("http://{addr}/trailers"))
                .header("te", "trailers")
                .body(StreamBody::new(futures_util::stream::iter(frames)))
                .unwrap();
            // Through tower's Service, as tonic calls it (`te: trailers`, a streamed body).
            let res = step(
                "POST with trailers",
                tower::ServiceExt::oneshot(client.clone(), req),
            )
            .await
            .unwrap();
            let collected = step("the body", res.into_body().collect()).await.unwrap();
            let trailers = collected.trailers().cloned().expect("response trailers");
            assert_eq!(trailers["grpc-status"], "0");
            assert_eq!(trailers["x-echoed-trailer"], "sent");
            assert_eq!(collected.to_bytes(), "payload");
        });
    });
}

#[test]
fn a_goaway_mid_flight_lets_the_request_finish_and_new_ones_take_a_new_connection() {
    bounded(LIMIT, || {
        let server = hyper_server(100);
        let addr = server.addr;
        fibr::run(async move {
            let client = h2c();
            let res = step("warm up", client.get(format!("http://{addr}/a")))
                .await
                .unwrap();
            assert_eq!(res.status(), 200);
            let slow = {
                let client = client.clone();
                fibr::spawn(async move {
                    let res = client.get(format!("http://{addr}/slow-goaway")).await?;
                    res.into_body().collect().await.map(|c| c.to_bytes())
                })
            };
            // Give the GOAWAY time to arrive, then send more.
            fibr::time::sleep(Duration::from_millis(150)).await;
            for i in 0..3 {
                let res = step("after GOAWAY", client.get(format!("http://{addr}/b{i}")))
                    .await
                    .unwrap();
                let body = res.into_body().collect().await.unwrap().to_bytes();
                assert_eq!(body, format!("/b{i}"));
            }
            let body = step("the in-flight request", slow).await.unwrap().unwrap();
            assert_eq!(body, "finished");
        });
        assert_eq!(server.accepted.load(Ordering::SeqCst), 2);
    });
}

#[test]
fn a_reset_stream_fails_its_request_only() {
    bounded(LIMIT, || {
        let server = hyper_server(100);
        let addr = server.addr;
        fibr::run(async move {
            let client = h2c();
            let e = step("GET /reset", client.get(format!("http://{addr}/reset")))
                .await
                .expect_err("the server resets the stream");
            assert!(e.to_string().contains("reset"), "{e}");
            // A body dropped before its end resets our side; the connection goes on.
            let res = step("GET", client.get(format!("http://{addr}/ok")))
                .await
                .unwrap();
            drop(res);
            let res = step("GET after", client.get(format!("http://{addr}/ok2")))
                .await
                .unwrap();
            let body = res.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(body, "/ok2");
        });
        assert_eq!(server.accepted.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn a_dropped_download_gives_its_window_back() {
    bounded(LIMIT, || {
        let addr = start(app(), ServerConfig::default());
        fibr::run(async move {
            // A 1 MiB connection window: three 4 MiB bodies dropped unread after their
            // first frame would stall the connection unless their bytes are credited.
            let client = Client::builder()
                .http2_prior_knowledge()
                .http2_initial_connection_window_size(1 << 20)
                .http2_initial_stream_window_size(512 << 10)
                .build();
            for _ in 0..3 {
                let res = step("GET /big", client.get(format!("http://{addr}/big")))
                    .await
                    .unwrap();
                let mut body = res.into_body();
                let first = step("a frame", body.frame()).await.unwrap().unwrap();
                assert!(first.is_data());
                fibr::time::sleep(Duration::from_millis(20)).await;
                drop(body);
            }
            let res = step("GET /version", client.get(format!("http://{addr}/version")))
                .await
                .unwrap();
            let body = step("its body", res.into_body().collect())
                .await
                .unwrap()
                .to_bytes();
            assert_eq!(body, "HTTP/2.0");
        });
    });
}

#[test]
fn an_idle_h2_connection_is_closed_after_the_pool_idle_timeout() {
    bounded(LIMIT, || {
        let server = hyper_server(100);
        let addr = server.addr;
        fibr::run(async move {
            let client = Client::builder()
                .http2_prior_knowledge()
                .pool_idle_timeout(Duration::from_millis(200))
                .build();
            let res = step("GET", client.get(format!("http://{addr}/x")))
                .await
                .unwrap();
            res.into_body().collect().await.unwrap();
            assert_eq!(client.idle_connections(), 1);
            fibr::time::sleep(Duration::from_millis(600)).await;
            assert_eq!(client.idle_connections(), 0);
            // The next request takes a new connection.
            let res = step("GET", client.get(format!("http://{addr}/y")))
                .await
                .unwrap();
            res.into_body().collect().await.unwrap();
        });
        assert_eq!(server.accepted.load(Ordering::SeqCst), 2);
        assert!(common::wait_until(Duration::from_secs(5), || server
            .closed
            .load(Ordering::SeqCst)
            >= 1));
    });
}

/// A hand-made h2c server: each connection gets an empty SETTINGS, then `answer(n,
/// kind, flags, stream id bytes)` is called for every frame the client sends (after the
/// preface) and its bytes are written back; `n` counts the accepted connections from 1.
/// Returns the address and that count.
fn raw_server(
    answer: impl Fn(usize, u8, u8, &[u8]) -> Vec<u8> + Send + Sync + 'static,
) -> (SocketAddr, Arc<AtomicUsize>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let answer = Arc::new(answer);
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { return };
            let n = count.fetch_add(1, Ordering::SeqCst) + 1;
            let answer = answer.clone();
            std::thread::spawn(move || {
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                // An empty SETTINGS.
                let _ = s.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
                let mut buf = Vec::new();
                let mut pos = 24; // the preface
                let mut chunk = [0u8; 16 * 1024];
                loop {
                    match s.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(k) => buf.extend_from_slice(&chunk[..k]),
                    }
                    while buf.len() >= pos + 9 {
                        let len = u32::from_be_bytes([0, buf[pos], buf[pos + 1], buf[pos + 2]]);
                        let end = pos + 9 + len as usize;
                        if buf.len() < end {
                            break;
                        }
                        let out = answer(n, buf[pos + 3], buf[pos + 4], &buf[pos + 5..pos + 9]);
                        let _ = s.write_all(&out);
                        pos = end;
                    }
                }
            });
        }
    });
    (addr, accepted)
}

/// A hand-made h2c server: its odd-numbered connections answer the first HEADERS with
/// GOAWAY(last stream 0), so the request was never processed; the others answer every
/// HEADERS with a bodiless 200. Counts accepted connections.
fn refusing_server() -> (SocketAddr, Arc<AtomicUsize>) {
    raw_server(|n, kind, _, stream| {
        let mut out = Vec::new();
        if kind == 1 {
            if n % 2 == 1 {
                out.extend_from_slice(&[0, 0, 8, 7, 0, 0, 0, 0, 0]);
                out.extend_from_slice(&[0; 8]);
            } else {
                // HEADERS, END_STREAM | END_HEADERS, `:status: 200` indexed.
                out.extend_from_slice(&[0, 0, 1, 1, 5]);
                out.extend_from_slice(stream);
                out.push(0x88);
            }
        }
        out
    })
}

#[test]
fn a_request_above_a_goaways_last_stream_goes_again_on_a_new_connection() {
    bounded(LIMIT, || {
        let (addr, accepted) = refusing_server();
        fibr::run(async move {
            let client = h2c();
            let res = step(
                "GET, refused then sent again",
                client.get(format!("http://{addr}/")),
            )
            .await
            .expect("sent again on the second connection");
            assert_eq!(res.status(), 200);
            assert_eq!(accepted.load(Ordering::SeqCst), 2);

            // A streamed body is taken as it is sent: a refused one cannot go again.
            let client = h2c();
            let chunks: Vec<Result<Frame<Bytes>, Infallible>> =
                vec![Ok(Frame::data(Bytes::from("streamed")))];
            let req = Request::post(format!("http://{addr}/"))
                .body(StreamBody::new(futures_util::stream::iter(chunks)))
                .unwrap();
            let e = step("POST, refused", client.request(req))
                .await
                .expect_err("refused, and not sent again");
            assert!(e.is_closed(), "{e}");
            assert_eq!(accepted.load(Ordering::SeqCst), 3);
        });
    });
}

/// An HttpsConnector that counts its connections.
struct Counting {
    inner: fibr::client::HttpsConnector,
    made: Arc<AtomicUsize>,
}

impl fibr::client::Connector for Counting {
    type Io = <fibr::client::HttpsConnector as fibr::client::Connector>::Io;
    fn connect(
        &self,
        dst: &http::Uri,
    ) -> impl std::future::Future<Output = Result<Self::Io, fibr::client::Error>> + Send {
        self.made.fetch_add(1, Ordering::SeqCst);
        self.inner.connect(dst)
    }
}

#[test]
fn after_a_goaway_a_key_known_for_h2_makes_one_connection_for_a_burst() {
    use common::pki::Pki;
    bounded(LIMIT, || {
        let pki = Pki::new();
        let leaf = pki.server(&["localhost"]);
        let tls = pki.server_config(&leaf);
        let listener = fibr::run(fibr::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        // The server closes idle connections (GOAWAY) after 200 ms.
        let mut cfg = ServerConfig::default();
        cfg.idle_timeout = Some(Duration::from_millis(200));
        drop(fibr::spawn(async move {
            let _ = fibr::serve(listener, app())
                .with_tls(Arc::new(tls))
                .with_config(cfg)
                .await;
        }));
        let made = Arc::new(AtomicUsize::new(0));
        let connector = Counting {
            inner: fibr::client::HttpsConnector::with_config(Arc::new(pki.client_config())),
            made: made.clone(),
        };
        fibr::run(async move {
            let client = Client::builder().build_with_connector(connector);
            let url = format!("https://localhost:{}/version", addr.port());
            let res = step("first", client.get(&url)).await.unwrap();
            assert_eq!(res.version(), Version::HTTP_2);
            drop(res);
            fibr::time::sleep(Duration::from_millis(500)).await;
            let burst = (0..20).map(|_| {
                let client = client.clone();
                let url = url.clone();
                async move {
                    let res = client.get(&url).await.unwrap();
                    assert_eq!(res.version(), Version::HTTP_2);
                    res.into_body().collect().await.unwrap();
                }
            });
            step("the burst", futures_util::future::join_all(burst)).await;
        });
        assert_eq!(
            made.load(Ordering::SeqCst),
            2,
            "one connection, then one for the burst"
        );
    });
}

/// A tonic client (tonic-health's generated `HealthClient`) runs over fibr's client, a
/// plain tower Service, against tonic's `Routes` served by fibr: a unary call and a server
/// stream that follows a status change.
#[test]
fn a_tonic_client_runs_over_fibrs_client() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::HealthCheckRequest;
    bounded(LIMIT, || {
        let (reporter, health) = tonic_health::server::health_reporter();
        let addr = start(tonic::service::Routes::new(health), ServerConfig::default());
        fibr::run(async move {
            reporter
                .set_service_status("svc", tonic_health::ServingStatus::Serving)
                .await;
            let origin: http::Uri = format!("http://{addr}").parse().unwrap();
            let mut client = HealthClient::with_origin(h2c(), origin);
            let ask = |service: &str| {
                tonic::Request::new(HealthCheckRequest {
                    service: service.into(),
                })
            };
            let res = step("Check", client.check(ask("svc"))).await.unwrap();
            assert_eq!(res.into_inner().status, ServingStatus::Serving as i32);
            let err = step("Check unknown", client.check(ask("nope")))
                .await
                .unwrap_err();
            assert_eq!(err.code(), tonic::Code::NotFound);
            let mut watch = step("Watch", client.watch(ask("svc")))
                .await
                .unwrap()
                .into_inner();
            let first = step("first update", watch.message())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(first.status, ServingStatus::Serving as i32);
            reporter
                .set_service_status("svc", tonic_health::ServingStatus::NotServing)
                .await;
            let next = step("next update", watch.message()).await.unwrap().unwrap();
            assert_eq!(next.status, ServingStatus::NotServing as i32);
        });
    });
}

/// A hand-made h2c server that ACKs the client's SETTINGS and then goes silent: it answers
/// no request and no PING (a peer gone dead without closing). Counts the PINGs it got.
fn silent_server() -> (SocketAddr, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let pings = Arc::new(AtomicUsize::new(0));
    let seen = pings.clone();
    let (addr, accepted) = raw_server(move |_, kind, flags, _| match (kind, flags & 1) {
        (4, 0) => vec![0, 0, 0, 4, 1, 0, 0, 0, 0],
        (6, 0) => {
            seen.fetch_add(1, Ordering::SeqCst);
            Vec::new()
        }
        _ => Vec::new(),
    });
    (addr, accepted, pings)
}

#[test]
fn an_unanswered_keep_alive_ping_fails_the_requests_and_the_connection_is_not_reused() {
    bounded(LIMIT, || {
        let (addr, accepted, pings) = silent_server();
        fibr::run(async move {
            let client = Client::builder()
                .http2_prior_knowledge()
                .http2_keep_alive_interval(Duration::from_millis(100))
                .http2_keep_alive_timeout(Duration::from_millis(300))
                .build();
            for attempt in 1..=2 {
                let started = std::time::Instant::now();
                // Without the keep-alive timeout the request would wait for ever.
                let r = fibr::time::timeout(
                    Duration::from_secs(10),
                    client.get(format!("http://{addr}/")),
                )
                .await
                .expect("the keep-alive timeout failed the request");
                let e = r.expect_err("a silent server answers nothing");
                assert_eq!(e.kind(), fibr::client::ErrorKind::Timeout, "{e}");
                assert!(e.to_string().contains("PING"), "{e}");
                // 100 ms without frames, then 300 ms without the ACK.
                let took = started.elapsed();
                assert!(took >= Duration::from_millis(400), "{took:?}");
                // A dead connection is not handed out again: each attempt connects anew.
                assert_eq!(accepted.load(Ordering::SeqCst), attempt);
            }
        });
        assert!(pings.load(Ordering::SeqCst) >= 2);
    });
}

#[test]
fn keep_alive_pings_answered_by_fibrs_server_keep_a_slow_request_alive() {
    bounded(LIMIT, || {
        let slow = Router::new().route(
            "/slow",
            get(|| async {
                fibr::time::sleep(Duration::from_millis(800)).await;
                "done"
            }),
        );
        let addr = start(slow, ServerConfig::default());
        fibr::run(async move {
            let client = Client::builder()
                .http2_prior_knowledge()
                .http2_keep_alive_interval(Duration::from_millis(50))
                .http2_keep_alive_timeout(Duration::from_millis(200))
                .build();
            // Several PINGs go out and come back while the handler sleeps.
            let res = step("GET", client.get(format!("http://{addr}/slow")))
                .await
                .unwrap();
            let body = res.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(body, "done");
        });
    });
}

#[test]
fn a_server_that_never_acknowledges_settings_is_given_up_on() {
    bounded(LIMIT, || {
        // Its SETTINGS, and then nothing: ours are never acknowledged.
        let (addr, _) = raw_server(|_, _, _, _| Vec::new());
        fibr::run(async move {
            let client = Client::builder()
                .http2_prior_knowledge()
                .http2_settings_timeout(Duration::from_millis(200))
                .build();
            let r = fibr::time::timeout(
                Duration::from_secs(10),
                client.get(format!("http://{addr}/")),
            )
            .await
            .expect("the SETTINGS timeout failed the request");
            let e = r.expect_err("the server answers nothing");
            assert_eq!(e.kind(), fibr::client::ErrorKind::Timeout, "{e}");
            assert!(e.to_string().contains("SETTINGS"), "{e}");
        });
    });
}
