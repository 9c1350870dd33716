//! fibr's client over HTTP/3: by prior knowledge against fibr's server and against a
//! quinn + h3-quinn server on tokio (a server fibr did not write), and by following
//! `Alt-Svc`, falling back to TCP when the advertised QUIC port is dead.

mod common;

use bytes::{Buf, Bytes};
use common::h3::*;
use common::pki::Pki;
use fibr::client::{Client, HttpsConnector};
use fibr::net::TcpListener;
use http::{HeaderValue, Method, Request, StatusCode, Version};
use http_body_util::{BodyExt, Full};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn client(pki: &Pki, prior_knowledge: bool) -> Client<HttpsConnector> {
    let mut b = Client::builder();
    b.tls_config(Arc::new(pki.client_config()));
    if prior_knowledge {
        b.http3_prior_knowledge();
    } else {
        b.http3_alt_svc(true);
    }
    b.build_https()
}

/// `GET uri`: the response's version, status and body.
async fn get(client: &Client<HttpsConnector>, uri: &str) -> (Version, StatusCode, Bytes) {
    let res = client.get(uri).await.expect("response");
    let (version, status) = (res.version(), res.status());
    let body = res.into_body().collect().await.expect("body").to_bytes();
    (version, status, body)
}

#[test]
fn prior_knowledge_gets_posts_streams_and_sees_trailers_from_fibr() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let addr = start(&pki);
        let base = format!("https://localhost:{}", addr.port());
        fibr::run(async move {
            let client = client(&pki, true);
            let (version, status, body) = get(&client, &format!("{base}/")).await;
            assert_eq!((version, status), (Version::HTTP_3, StatusCode::OK));
            assert_eq!(body, "hello over h3");

            // A 1 MiB upload echoed back, byte for byte.
            let sent = Bytes::from(pattern(0..1 << 20));
            let req = Request::post(format!("{base}/echo"))
                .body(Full::new(sent.clone()))
                .unwrap();
            let res = client.request(req).await.expect("echo");
            assert_eq!(res.version(), Version::HTTP_3);
            let back = res.into_body().collect().await.unwrap().to_bytes();
            assert!(back == sent, "echo differs ({} bytes back)", back.len());

            // A streamed response larger than QUIC's initial windows.
            let len = 3 << 20;
            let (_, _, body) = get(&client, &format!("{base}/pattern/{len}")).await;
            assert!(body == pattern(0..len), "{} bytes streamed", body.len());

            // Trailers arrive after the data.
            let res = client.get(format!("{base}/trailers")).await.unwrap();
            let collected = res.into_body().collect().await.unwrap();
            let trailers = collected.trailers().cloned().expect("trailers");
            assert_eq!(trailers["x-checksum"], "abc");
            assert_eq!(collected.to_bytes(), "with trailers");

            // Twenty at once share the one QUIC connection.
            let tasks: Vec<_> = (0..20)
                .map(|_| {
                    let (client, uri) = (client.clone(), format!("{base}/"));
                    fibr::spawn(async move { get(&client, &uri).await })
                })
                .collect();
            for t in tasks {
                let (version, _, body) = t.await.unwrap();
                assert_eq!(version, Version::HTTP_3);
                assert_eq!(body, "hello over h3");
            }
            assert_eq!(client.idle_connections(), 0, "no TCP connection was made");
        });
    });
}

/// A quinn + h3-quinn server on tokio: `GET /` answers `hello from quinn`, `POST /echo`
/// its body, with an `x-server` trailer. Runs on its own thread; the UDP address.
fn quinn_server(pki: &Pki) -> SocketAddr {
    let leaf = pki.server(&["localhost"]);
    let mut tls = pki.server_config(&leaf);
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let quic = quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap();
    let config = quinn::ServerConfig::with_crypto(Arc::new(quic));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        tokio_rt().block_on(async move {
            let endpoint = quinn::Endpoint::server(config, "127.0.0.1:0".parse().unwrap()).unwrap();
            tx.send(endpoint.local_addr().unwrap()).unwrap();
            while let Some(incoming) = endpoint.accept().await {
                tokio::spawn(async move {
                    let Ok(conn) = incoming.await else { return };
                    let mut h3 =
                        h3::server::Connection::<_, Bytes>::new(h3_quinn::Connection::new(conn))
                            .await
                            .unwrap();
                    while let Ok(Some(resolver)) = h3.accept().await {
                        tokio::spawn(async move {
                            let (req, mut stream) = resolver.resolve_request().await.unwrap();
                            let mut body = Vec::new();
                            while let Some(mut chunk) = stream.recv_data().await.unwrap() {
                                body.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining()));
                            }
                            let reply = match *req.method() {
                                Method::POST => Bytes::from(body),
                                _ => Bytes::from_static(b"hello from quinn"),
                            };
                            let resp = http::Response::builder()
                                .header("content-length", reply.len())
                                .body(())
                                .unwrap();
                            stream.send_response(resp).await.unwrap();
                            stream.send_data(reply).await.unwrap();
                            let mut trailers = http::HeaderMap::new();
                            trailers.insert("x-server", HeaderValue::from_static("quinn"));
                            stream.send_trailers(trailers).await.unwrap();
                            stream.finish().await.unwrap();
                        });
                    }
                });
            }
        });
    });
    rx.recv().unwrap()
}

#[test]
fn prior_knowledge_against_a_quinn_server() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let addr = quinn_server(&pki);
        let base = format!("https://localhost:{}", addr.port());
        fibr::run(async move {
            let client = client(&pki, true);
            for _ in 0..3 {
                let (version, status, body) = get(&client, &format!("{base}/")).await;
                assert_eq!((version, status), (Version::HTTP_3, StatusCode::OK));
                assert_eq!(body, "hello from quinn");
            }
            let sent = Bytes::from(pattern(0..300_000));
            let req = Request::post(format!("{base}/echo"))
                .body(Full::new(sent.clone()))
                .unwrap();
            let res = client.request(req).await.expect("echo");
            let collected = res.into_body().collect().await.unwrap();
            assert_eq!(collected.trailers().unwrap()["x-server"], "quinn");
            assert!(collected.to_bytes() == sent, "echo differs");
        });
    });
}

#[test]
fn alt_svc_moves_later_requests_to_http3() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let addr = start(&pki);
        let base = format!("https://localhost:{}", addr.port());
        fibr::run(async move {
            let client = client(&pki, false);
            let (first, _, body) = get(&client, &format!("{base}/")).await;
            assert_ne!(first, Version::HTTP_3, "the first request goes over TCP");
            assert_eq!(body, "hello over h3");
            let (second, _, body) = get(&client, &format!("{base}/")).await;
            assert_eq!(second, Version::HTTP_3, "Alt-Svc followed");
            assert_eq!(body, "hello over h3");
        });
    });
}

#[test]
fn a_dead_alt_svc_port_falls_back_to_tcp_at_once() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        // HTTPS that advertises h3 on its own port, where no UDP socket listens.
        let leaf = pki.server(&["localhost"]);
        let tls = Arc::new(pki.server_config(&leaf));
        let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).unwrap();
        let port = listener.local_addr().unwrap().port();
        let alt_svc = HeaderValue::try_from(format!("h3=\":{port}\"; ma=60")).unwrap();
        let app = axum::Router::new().route(
            "/",
            axum::routing::get(move || {
                let alt_svc = alt_svc.clone();
                async move { ([(http::header::ALT_SVC, alt_svc)], "tcp only") }
            }),
        );
        drop(fibr::spawn(async move {
            let _ = fibr::serve(listener, app).with_tls(tls).await;
        }));
        let base = format!("https://localhost:{port}");
        fibr::run(async move {
            let client = client(&pki, false);
            let (first, _, _) = get(&client, &format!("{base}/")).await;
            assert_ne!(first, Version::HTTP_3);
            let started = Instant::now();
            let (second, status, body) = get(&client, &format!("{base}/")).await;
            assert_ne!(second, Version::HTTP_3, "fell back to TCP");
            assert_eq!((status, &body[..]), (StatusCode::OK, &b"tcp only"[..]));
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "the refused QUIC port cost {:?}",
                started.elapsed()
            );
        });
    });
}

#[test]
fn prior_knowledge_to_a_dead_port_is_connect_refused() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let dead = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = dead.local_addr().unwrap().port();
        drop(dead);
        fibr::run(async move {
            let client = client(&pki, true);
            let e = client
                .get(format!("https://localhost:{port}/"))
                .await
                .expect_err("nothing listens");
            assert_eq!(e.kind(), fibr::client::ErrorKind::ConnectRefused, "{e}");
        });
    });
}
