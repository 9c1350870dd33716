//! gRPC on fibr's HTTP/2 server: tonic 0.14's services, unchanged (`tonic::service::Routes`
//! of tonic-health's generated `Health` and a hand-written `Echo`, see `grpc/echo.rs`),
//! served by `fibr::serve`, called by tonic's own client (`Channel`, h2c and over TLS) and
//! by Python's grpcio (`grpc/client.py`; `scripts/peers` installs it).

#[path = "../../examples/grpc/codec.rs"]
mod codec;
#[path = "grpc/echo.rs"]
mod echo;

use bytes::Bytes;
use echo::{BytesCodec, Echo, LiveCount, MAX_MESSAGE};
use fibr::tls::rustls;
use futures_util::StreamExt;
use http::uri::PathAndQuery;
use std::future::Future;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::codec::CompressionEncoding;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Status};
use tonic_health::pb::health_check_response::ServingStatus as PbStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::server::HealthReporter;

/// Every test's bound: a hang fails instead of blocking the suite.
const LIMIT: Duration = Duration::from_secs(60);

/// A running server.
struct Server {
    addr: SocketAddr,
    health: HealthReporter,
    live: LiveCount,
}

/// The app: tonic-health beside Echo, as `Routes` (an axum Router underneath).
fn routes() -> (tonic::service::Routes, HealthReporter, LiveCount) {
    let (health, health_svc) = tonic_health::server::health_reporter();
    let echo = Echo::default();
    let live = echo.live.clone();
    let routes = tonic::service::Routes::new(health_svc).add_service(echo);
    (routes, health, live)
}

/// Serves the app with `fibr::serve` (over TLS with `tls`), on a runtime of its own.
fn start(tls: Option<Arc<rustls::ServerConfig>>) -> Server {
    let (routes, health, live) = routes();
    let addr = std::thread::spawn(move || {
        fibr::run(async move {
            let l = fibr::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let serve = fibr::serve(l, routes);
            match tls {
                Some(tls) => fibr::spawn(async move { serve.with_tls(tls).await }),
                None => fibr::spawn(async move { serve.await }),
            };
            addr
        })
    })
    .join()
    .unwrap();
    Server { addr, health, live }
}

/// The same app on tonic's own server (hyper + h2 on tokio): the reference for behavior
/// fibr does not have yet.
async fn start_tonic() -> Server {
    let (routes, health, live) = routes();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_routes(routes)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(l)),
    );
    Server { addr, health, live }
}

/// Runs `f` on a tokio runtime of the test's own (the client's), within [`LIMIT`].
fn client<F: Future<Output = ()>>(f: F) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        tokio::time::timeout(LIMIT, f)
            .await
            .expect("the test took longer than its limit")
    });
}

async fn channel(addr: SocketAddr) -> Channel {
    Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .expect("connect over h2c")
}

/// tonic's generic client for Echo's methods.
fn echo_client(ch: &Channel) -> tonic::client::Grpc<Channel> {
    tonic::client::Grpc::new(ch.clone())
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE)
}

fn path(method: &str) -> PathAndQuery {
    PathAndQuery::try_from(format!("/{}/{method}", echo::SERVICE)).unwrap()
}

async fn unary(ch: &Channel, req: Request<Bytes>) -> Result<tonic::Response<Bytes>, Status> {
    let mut c = echo_client(ch);
    c.ready().await.expect("channel ready");
    c.unary(req, path("Unary"), BytesCodec).await
}

fn with_meta<T>(msg: T, pairs: &[(&'static str, &str)]) -> Request<T> {
    let mut req = Request::new(msg);
    for (k, v) in pairs {
        req.metadata_mut().insert(*k, v.parse().unwrap());
    }
    req
}

fn meta<'a>(md: &'a tonic::metadata::MetadataMap, key: &str) -> Option<&'a str> {
    md.get(key).map(|v| v.to_str().unwrap())
}

/// Waits until `cond` holds (or fails after `within`).
async fn eventually(within: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[test]
fn health_check_and_watch_with_tonics_client() {
    let srv = start(None);
    client(async {
        let ch = channel(srv.addr).await;
        let mut health = HealthClient::new(ch);
        let check = |service: &str| HealthCheckRequest {
            service: service.to_string(),
        };
        let r = health.check(check("")).await.expect("Check of the server");
        assert_eq!(r.get_ref().status(), PbStatus::Serving);

        let err = health.check(check("no.such.Service")).await.unwrap_err();
        assert_eq!(err.code(), Code::NotFound, "{err:?}");
        // tonic-health answers a Watch of an unknown service with NOT_FOUND too (the
        // health protocol suggests a SERVICE_UNKNOWN message on an open stream instead).
        let err = health.watch(check("no.such.Service")).await.unwrap_err();
        assert_eq!(err.code(), Code::NotFound, "{err:?}");

        srv.health.set_serving::<Echo>().await;
        let r = health.check(check(echo::SERVICE)).await.unwrap();
        assert_eq!(r.get_ref().status(), PbStatus::Serving);

        // Watch: the current status at once, then every change, on one open stream.
        let mut watch = health
            .watch(check(echo::SERVICE))
            .await
            .expect("Watch")
            .into_inner();
        let first = watch.message().await.unwrap().expect("the current status");
        assert_eq!(first.status(), PbStatus::Serving);
        srv.health.set_not_serving::<Echo>().await;
        let next = watch.message().await.unwrap().expect("an update");
        assert_eq!(next.status(), PbStatus::NotServing);
        srv.health.set_serving::<Echo>().await;
        let next = watch.message().await.unwrap().expect("another update");
        assert_eq!(next.status(), PbStatus::Serving);
    });
}

#[test]
fn unary_with_request_and_response_metadata() {
    let srv = start(None);
    client(async {
        let ch = channel(srv.addr).await;
        let r = unary(
            &ch,
            with_meta(Bytes::from("hello"), &[("x-echo-meta", "from the client")]),
        )
        .await
        .expect("unary");
        assert_eq!(r.get_ref(), &Bytes::from("hello"));
        let md = r.metadata();
        assert_eq!(meta(md, "x-echo-meta"), Some("from the client"), "{md:?}");
        assert_eq!(meta(md, "content-type"), Some("application/grpc"));
        assert_eq!(meta(md, "x-req-encoding"), Some("identity"));
        // An empty message and one past a frame (16 KiB) both ways.
        let r = unary(&ch, Request::new(Bytes::new())).await.unwrap();
        assert!(r.get_ref().is_empty());
        let big = Bytes::from(vec![7u8; 100_000]);
        let r = unary(&ch, Request::new(big.clone())).await.unwrap();
        assert_eq!(r.into_inner(), big);
    });
}

#[test]
fn status_codes_from_the_handler_trailers_only() {
    let srv = start(None);
    client(async {
        let ch = channel(srv.addr).await;
        for code in [
            Code::InvalidArgument,
            Code::NotFound,
            Code::PermissionDenied,
            Code::ResourceExhausted,
            Code::Internal,
            Code::Unavailable,
            Code::Unauthenticated,
        ] {
            let n = (code as i32).to_string();
            let err = unary(&ch, with_meta(Bytes::from("x"), &[("x-fail-code", &n)]))
                .await
                .unwrap_err();
            assert_eq!(err.code(), code, "{err:?}");
            assert_eq!(err.message(), "failed on request");
            assert_eq!(
                meta(err.metadata(), "x-detail"),
                Some("it failed"),
                "{err:?}"
            );
        }
        // A method the service does not have, and a service the server does not have.
        let mut c = echo_client(&ch);
        c.ready().await.unwrap();
        let err = c
            .unary(
                Request::new(Bytes::new()),
                PathAndQuery::from_static("/fibr.test.Echo/Nope"),
                BytesCodec,
            )
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Unimplemented, "{err:?}");
        c.ready().await.unwrap();
        let err = c
            .unary(
                Request::new(Bytes::new()),
                PathAndQuery::from_static("/no.Such/Service"),
                BytesCodec,
            )
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Unimplemented, "{err:?}");
        // The connection is still good after all of that.
        let r = unary(&ch, Request::new(Bytes::from("after")))
            .await
            .unwrap();
        assert_eq!(r.into_inner(), Bytes::from("after"));
    });
}

#[test]
fn server_streaming_with_metadata_and_trailers() {
    let srv = start(None);
    client(async {
        let ch = channel(srv.addr).await;
        let mut c = echo_client(&ch);
        c.ready().await.unwrap();
        // OK, with the trailers tonic always sends (grpc-status 0 only).
        let req = with_meta(Bytes::from("5"), &[("x-echo-meta", "stream")]);
        let resp = c
            .server_streaming(req, path("ServerStream"), BytesCodec)
            .await
            .unwrap();
        assert_eq!(meta(resp.metadata(), "x-echo-meta"), Some("stream"));
        let mut stream = resp.into_inner();
        let mut got = vec![];
        while let Some(m) = stream.message().await.unwrap() {
            got.push(m);
        }
        let want: Vec<Bytes> = (0..5).map(|i| Bytes::from(format!("msg {i}"))).collect();
        assert_eq!(got, want);
        let trailers = stream.trailers().await.unwrap();
        assert!(trailers.is_some(), "the trailers");

        // OK with metadata in the trailers, after the messages.
        c.ready().await.unwrap();
        let req = with_meta(Bytes::from("3"), &[("x-fail-code", "0")]);
        let mut stream = c
            .server_streaming(req, path("ServerStream"), BytesCodec)
            .await
            .unwrap()
            .into_inner();
        let mut n = 0;
        while let Some(_m) = stream.message().await.expect("an OK end") {
            n += 1;
        }
        assert_eq!(n, 3);
        let trailers = stream.trailers().await.unwrap().expect("trailers");
        assert_eq!(
            meta(&trailers, "x-detail"),
            Some("it failed"),
            "{trailers:?}"
        );

        // Messages, then an error status (with metadata) in the trailers.
        c.ready().await.unwrap();
        let req = with_meta(Bytes::from("2"), &[("x-fail-code", "10")]);
        let mut stream = c
            .server_streaming(req, path("ServerStream"), BytesCodec)
            .await
            .unwrap()
            .into_inner();
        assert_eq!(stream.message().await.unwrap(), Some(Bytes::from("msg 0")));
        assert_eq!(stream.message().await.unwrap(), Some(Bytes::from("msg 1")));
        let err = stream.message().await.unwrap_err();
        assert_eq!(err.code(), Code::Aborted, "{err:?}");
        assert_eq!(
            meta(err.metadata(), "x-detail"),
            Some("it failed"),
            "{err:?}"
        );

        // Many messages spaced in time: each is sent as it is produced.
        c.ready().await.unwrap();
        let req = with_meta(Bytes::from("1000"), &[]);
        let stream = c
            .server_streaming(req, path("ServerStream"), BytesCodec)
            .await
            .unwrap();
        let n = stream.into_inner().map(|m| m.unwrap()).count().await;
        assert_eq!(n, 1000);
    });
}

#[test]
fn client_streaming() {
    let srv = start(None);
    client(async {
        let ch = channel(srv.addr).await;
        let mut c = echo_client(&ch);
        c.ready().await.unwrap();
        let parts: Vec<Bytes> = (0..100).map(|i| Bytes::from(format!("{i},"))).collect();
        let want: Vec<u8> = parts.iter().flat_map(|p| p.to_vec()).collect();
        // Spaced in time, so the messages cross the connection in many rounds.
        let input = futures_util::stream::iter(parts).then(|p| async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            p
        });
        let r = c
            .client_streaming(Request::new(input), path("ClientStream"), BytesCodec)
            .await
            .unwrap();
        assert_eq!(r.into_inner(), Bytes::from(want));
        // No message at all.
        c.ready().await.unwrap();
        let r = c
            .client_streaming(
                Request::new(futures_util::stream::empty::<Bytes>()),
                path("ClientStream"),
                BytesCodec,
            )
            .await
            .unwrap();
        assert!(r.get_ref().is_empty());
    });
}

#[test]
fn bidirectional_ping_pong() {
    let srv = start(None);
    client(async {
        let ch = channel(srv.addr).await;
        let mut c = echo_client(&ch);
        c.ready().await.unwrap();
        // Each answer is read before the next message is sent: full duplex, not a
        // request body buffered whole first.
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(1);
        let input = tokio_stream::wrappers::ReceiverStream::new(rx);
        let mut out = c
            .streaming(Request::new(input), path("Bidi"), BytesCodec)
            .await
            .unwrap()
            .into_inner();
        for i in 0..50 {
            tx.send(Bytes::from(format!("ping {i}"))).await.unwrap();
            let m = out.message().await.unwrap().expect("an answer");
            assert_eq!(m, Bytes::from(format!("echo: ping {i}")));
        }
        drop(tx);
        assert_eq!(out.message().await.unwrap(), None, "the end after ours");
        eventually(Duration::from_secs(5), "the handler ends", || {
            srv.live.get() == 0
        })
        .await;
    });
}

#[test]
fn gzip_both_ways() {
    let srv = start(None);
    client(async {
        let ch = channel(srv.addr).await;
        let mut c = echo_client(&ch)
            .send_compressed(CompressionEncoding::Gzip)
            .accept_compressed(CompressionEncoding::Gzip);
        c.ready().await.unwrap();
        let text = Bytes::from("compressible ".repeat(10_000));
        let r = c
            .unary(Request::new(text.clone()), path("Unary"), BytesCodec)
            .await
            .unwrap();
        assert_eq!(
            meta(r.metadata(), "x-req-encoding"),
            Some("gzip"),
            "the request was gzipped"
        );
        assert_eq!(
            meta(r.metadata(), "grpc-encoding"),
            Some("gzip"),
            "the response is gzipped"
        );
        assert_eq!(r.into_inner(), text);
        // Streaming both ways, compressed.
        c.ready().await.unwrap();
        let t = text.clone();
        let input = futures_util::stream::iter((0..20).map(move |_| t.clone()));
        let out = c
            .streaming(Request::new(input), path("Bidi"), BytesCodec)
            .await
            .unwrap();
        assert_eq!(meta(out.metadata(), "grpc-encoding"), Some("gzip"));
        let got: Vec<Bytes> = out.into_inner().map(|m| m.unwrap()).collect().await;
        assert_eq!(got.len(), 20);
        assert!(got.iter().all(|m| m.len() == text.len() + 6));
    });
}

#[test]
fn two_hundred_concurrent_unary_calls_on_one_channel() {
    let srv = start(None);
    client(async {
        let ch = channel(srv.addr).await;
        let calls = (0..200).map(|i| {
            let ch = ch.clone();
            async move {
                // Some wait a little, so responses finish out of order.
                let sleep = (i % 7 * 5).to_string();
                let msg = Bytes::from(format!("call {i}"));
                let r = unary(&ch, with_meta(msg.clone(), &[("x-sleep-ms", &sleep)]))
                    .await
                    .unwrap_or_else(|e| panic!("call {i}: {e:?}"));
                assert_eq!(r.into_inner(), msg);
            }
        });
        futures_util::future::join_all(calls).await;
        // And 100 streams open at once, interleaved.
        let streams = (0..100).map(|_| {
            let ch = ch.clone();
            async move {
                let mut c = echo_client(&ch);
                c.ready().await.unwrap();
                let req = with_meta(Bytes::from("20"), &[("x-sleep-ms", "2")]);
                let s = c
                    .server_streaming(req, path("ServerStream"), BytesCodec)
                    .await
                    .unwrap();
                s.into_inner().map(|m| m.unwrap()).count().await
            }
        });
        let counts = futures_util::future::join_all(streams).await;
        assert!(counts.iter().all(|&n| n == 20), "{counts:?}");
        eventually(Duration::from_secs(5), "every handler ends", || {
            srv.live.get() == 0
        })
        .await;
    });
}

#[test]
fn more_calls_at_once_than_max_concurrent_streams() {
    let srv = start(None);
    client(async {
        let ch = channel(srv.addr).await;
        // fibr advertises SETTINGS_MAX_CONCURRENT_STREAMS 250: the client queues the rest
        // and opens them as streams close, so the server's count must come back down.
        let calls = (0..600).map(|i| {
            let ch = ch.clone();
            async move {
                let msg = Bytes::from(format!("call {i}"));
                let r = unary(&ch, with_meta(msg.clone(), &[("x-sleep-ms", "20")]))
                    .await
                    .unwrap_or_else(|e| panic!("call {i}: {e:?}"));
                assert_eq!(r.into_inner(), msg);
            }
        });
        futures_util::future::join_all(calls).await;
        eventually(Duration::from_secs(5), "every handler ends", || {
            srv.live.get() == 0
        })
        .await;
    });
}

#[test]
fn large_metadata_in_continuation_frames_both_ways() {
    let srv = start(None);
    client(async {
        // hyper's client refuses response headers over 16 KiB by default (a stream error
        // PROTOCOL_ERROR of its own): raise its SETTINGS_MAX_HEADER_LIST_SIZE.
        let ch = Endpoint::from_shared(format!("http://{}", srv.addr))
            .unwrap()
            .http2_max_header_list_size(256 << 10)
            .connect()
            .await
            .unwrap();
        // 40 KiB of metadata: past one 16 KiB frame (HEADERS + CONTINUATION) in the
        // request and in the response, within fibr's 64 KiB header list limit.
        let value: String = (0..40 << 10)
            .map(|i: u32| (b'!' + (i.wrapping_mul(2654435761) >> 7) as u8 % 90) as char)
            .collect();
        let r = unary(&ch, with_meta(Bytes::from("m"), &[("x-echo-meta", &value)]))
            .await
            .expect("a call with 40 KiB of metadata");
        assert_eq!(meta(r.metadata(), "x-echo-meta"), Some(value.as_str()));
        // Over the limit on the wire (about 70 KiB of HPACK): fibr closes the connection
        // with GOAWAY(ENHANCE_YOUR_CALM) (its CONTINUATION-flood bound), which tonic
        // reports as RESOURCE_EXHAUSTED. The server serves new connections as before.
        let huge = value.repeat(2);
        let err = unary(&ch, with_meta(Bytes::from("m"), &[("x-echo-meta", &huge)]))
            .await
            .expect_err("80 KiB of metadata is over fibr's limit");
        assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
        let ch = channel(srv.addr).await;
        let r = unary(&ch, Request::new(Bytes::from("after")))
            .await
            .unwrap();
        assert_eq!(r.into_inner(), Bytes::from("after"));
    });
}

#[test]
fn four_mib_messages_both_ways_through_flow_control() {
    let srv = start(None);
    client(async {
        let ch = channel(srv.addr).await;
        let big: Bytes = (0..4 << 20)
            .map(|i: u32| (i % 251) as u8)
            .collect::<Vec<u8>>()
            .into();
        let r = unary(&ch, Request::new(big.clone()))
            .await
            .expect("a 4 MiB echo");
        assert!(r.into_inner() == big, "the 4 MiB echo differs");
        // Several at once on the one connection (its window is shared).
        let calls = (0..4).map(|_| {
            let (ch, big) = (ch.clone(), big.clone());
            async move {
                let r = unary(&ch, Request::new(big.clone())).await.unwrap();
                assert!(r.into_inner() == big);
            }
        });
        futures_util::future::join_all(calls).await;
    });
}

#[test]
fn slow_reader_of_a_large_server_stream() {
    let srv = start(None);
    client(async {
        let ch = channel(srv.addr).await;
        let mut c = echo_client(&ch);
        c.ready().await.unwrap();
        // 64 MiB in 256 KiB messages, far past every window: the server must wait for
        // WINDOW_UPDATEs while this client reads slowly at first.
        let req = with_meta(Bytes::from("256"), &[("x-size", "262144")]);
        let mut stream = c
            .server_streaming(req, path("ServerStream"), BytesCodec)
            .await
            .unwrap()
            .into_inner();
        let mut n = 0;
        while let Some(m) = stream.message().await.unwrap() {
            assert_eq!(m.len(), 262144);
            assert!(
                m.starts_with(format!("msg {n}.").as_bytes()),
                "message {n} out of order"
            );
            if n < 8 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            n += 1;
        }
        assert_eq!(n, 256);
        // Meanwhile-style: small calls on the same connection are not stuck behind it.
        let r = unary(&ch, Request::new(Bytes::from("after")))
            .await
            .unwrap();
        assert_eq!(r.into_inner(), Bytes::from("after"));
    });
}

#[test]
fn bidi_large_messages_sent_and_read_at_once() {
    let srv = start(None);
    client(async {
        let ch = channel(srv.addr).await;
        let mut c = echo_client(&ch);
        c.ready().await.unwrap();
        // 32 MiB each way, the sender and the reader running at the same time: request
        // and response windows both fill and reopen.
        let msg: Bytes = (0..1 << 20)
            .map(|i: u32| (i % 253) as u8)
            .collect::<Vec<u8>>()
            .into();
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(4);
        let sender = tokio::spawn({
            let msg = msg.clone();
            async move {
                for _ in 0..32 {
                    tx.send(msg.clone()).await.unwrap();
                }
            }
        });
        let mut out = c
            .streaming(
                Request::new(tokio_stream::wrappers::ReceiverStream::new(rx)),
                path("Bidi"),
                BytesCodec,
            )
            .await
            .unwrap()
            .into_inner();
        let mut n = 0;
        while let Some(m) = out.message().await.unwrap() {
            assert_eq!(m.len(), msg.len() + 6);
            assert!(m[6..] == msg[..], "message {n} differs");
            n += 1;
        }
        assert_eq!(n, 32);
        sender.await.unwrap();
    });
}

#[test]
fn cancelled_calls_end_their_handlers() {
    let srv = start(None);
    client(async {
        let ch = channel(srv.addr).await;
        let mut c = echo_client(&ch);
        c.ready().await.unwrap();
        let req = with_meta(Bytes::from("forever"), &[("x-sleep-ms", "5")]);
        let mut stream = c
            .server_streaming(req, path("ServerStream"), BytesCodec)
            .await
            .unwrap()
            .into_inner();
        for _ in 0..3 {
            stream.message().await.unwrap().expect("a message");
        }
        assert_eq!(srv.live.get(), 1);
        drop(stream); // RST_STREAM(CANCEL)
        eventually(
            Duration::from_secs(5),
            "the stream's handler is dropped",
            || srv.live.get() == 0,
        )
        .await;

        // A unary call dropped while its handler sleeps.
        let call = tokio::spawn({
            let ch = ch.clone();
            async move { unary(&ch, with_meta(Bytes::new(), &[("x-sleep-ms", "30000")])).await }
        });
        eventually(Duration::from_secs(5), "the handler starts", || {
            srv.live.get() == 1
        })
        .await;
        call.abort();
        eventually(
            Duration::from_secs(5),
            "the unary handler is dropped",
            || srv.live.get() == 0,
        )
        .await;

        // A bidi call dropped half way.
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(1);
        c.ready().await.unwrap();
        let mut out = c
            .streaming(
                Request::new(tokio_stream::wrappers::ReceiverStream::new(rx)),
                path("Bidi"),
                BytesCodec,
            )
            .await
            .unwrap()
            .into_inner();
        tx.send(Bytes::from("one")).await.unwrap();
        out.message().await.unwrap().unwrap();
        drop(out);
        drop(tx);
        eventually(
            Duration::from_secs(5),
            "the bidi handler is dropped",
            || srv.live.get() == 0,
        )
        .await;

        // The connection still serves.
        let r = unary(&ch, Request::new(Bytes::from("still")))
            .await
            .unwrap();
        assert_eq!(r.into_inner(), Bytes::from("still"));
    });
}

/// tonic's `Channel` enforces a request's `grpc-timeout` itself (its own `GrpcTimeout`
/// layer answers CANCELLED "Timeout expired" and resets the stream), and so does fibr
/// (DEADLINE_EXCEEDED): whichever is first at the same deadline answers, and the server's
/// handler is dropped either way.
#[test]
fn grpc_timeout_tonic_channel_cancels_the_late_call() {
    let srv = start(None);
    client(async {
        let ch = channel(srv.addr).await;
        let mut req = with_meta(Bytes::from("late"), &[("x-sleep-ms", "3000")]);
        req.set_timeout(Duration::from_millis(200));
        let start = Instant::now();
        let err = unary(&ch, req).await.expect_err("a call past its deadline");
        assert!(
            matches!(err.code(), Code::Cancelled | Code::DeadlineExceeded),
            "{err:?}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "after {:?}",
            start.elapsed()
        );
        eventually(
            Duration::from_secs(5),
            "the late handler is dropped",
            || srv.live.get() == 0,
        )
        .await;
        // The header itself reaches the handler.
        let mut req = Request::new(Bytes::from("in time"));
        req.set_timeout(Duration::from_secs(10));
        let r = unary(&ch, req).await.unwrap();
        assert_eq!(
            meta(r.metadata(), "x-req-timeout"),
            Some("10000000u"),
            "{:?}",
            r.metadata()
        );
    });
}

/// tonic's generic client over hyper's HTTP/2 client, which sends `grpc-timeout` but does
/// not enforce it: what the server does with the header is all there is.
async fn raw_unary(
    addr: SocketAddr,
    req: Request<Bytes>,
) -> Result<tonic::Response<Bytes>, Status> {
    use hyper_util::client::legacy::Client;
    let http = Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<tonic::body::Body>();
    let origin = http::Uri::try_from(format!("http://{addr}")).unwrap();
    let mut c = tonic::client::Grpc::with_origin(http, origin);
    c.ready().await.unwrap();
    c.unary(req, path("Unary"), BytesCodec).await
}

/// A handler slower than the request's `grpc-timeout` (sent by a client that does not
/// enforce it): the answer comes at the deadline, not when the handler finishes, and the
/// handler is dropped. Returns the status.
async fn late_call(srv: &Server) -> Status {
    let mut req = with_meta(Bytes::from("late"), &[("x-sleep-ms", "3000")]);
    req.set_timeout(Duration::from_millis(200));
    let start = Instant::now();
    let err = raw_unary(srv.addr, req)
        .await
        .expect_err("an answer past the deadline");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "answered after {:?}",
        start.elapsed()
    );
    eventually(
        Duration::from_secs(5),
        "the late handler is dropped",
        || srv.live.get() == 0,
    )
    .await;
    err
}

/// The server enforces `grpc-timeout`: DEADLINE_EXCEEDED, as the gRPC spec says (and
/// grpc-go and gRPC's C core answer). tonic's `Routes` does not enforce the header (tonic's
/// transport server does, in its `GrpcTimeout` layer), so with fibr this is the driver's
/// job.
#[test]
fn grpc_timeout_enforced_by_the_server() {
    let srv = start(None);
    client(async {
        let err = late_call(&srv).await;
        assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
        // A call within its deadline is answered as usual.
        let mut req = Request::new(Bytes::from("in time"));
        req.set_timeout(Duration::from_secs(10));
        let r = raw_unary(srv.addr, req).await.unwrap();
        assert_eq!(r.into_inner(), Bytes::from("in time"));
    });
}

/// The same late call on tonic's own server (hyper + h2 on tokio), for reference: it
/// enforces the deadline but answers CANCELLED "Timeout expired" (its `GrpcTimeout`
/// error mapped by `Status::from_error`), not the spec's DEADLINE_EXCEEDED.
#[test]
fn grpc_timeout_reference_on_tonics_server() {
    client(async {
        let srv = start_tonic().await;
        let err = late_call(&srv).await;
        assert_eq!(err.code(), Code::Cancelled, "{err:?}");
        assert_eq!(err.message(), "Timeout expired");
    });
}

/// A CA and a certificate for 127.0.0.1 and localhost; the server's rustls config (no
/// ALPN: fibr fills in h2 and http/1.1) and the CA's PEM for the client.
fn certificates() -> (Arc<rustls::ServerConfig>, String) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name
        .push(DnType::CommonName, "fibr grpc test CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut leaf =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    leaf.distinguished_name
        .push(DnType::CommonName, "localhost");
    let leaf = leaf.signed_by(&key, &ca).unwrap();
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![leaf.der().clone()],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    )
    .unwrap();
    (Arc::new(server), ca.pem())
}

#[test]
fn over_tls_with_alpn_h2() {
    let (server_tls, ca_pem) = certificates();
    let srv = start(Some(server_tls));
    client(async {
        let tls = tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(ca_pem))
            .domain_name("localhost");
        let ch = Endpoint::from_shared(format!("https://localhost:{}", srv.addr.port()))
            .unwrap()
            .tls_config(tls)
            .unwrap()
            .connect()
            .await
            .expect("connect over TLS (tonic requires ALPN h2)");
        let mut health = HealthClient::new(ch.clone());
        let r = health
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .unwrap();
        assert_eq!(r.get_ref().status(), PbStatus::Serving);
        let r = unary(
            &ch,
            with_meta(Bytes::from("secret"), &[("x-echo-meta", "tls")]),
        )
        .await
        .unwrap();
        assert_eq!(meta(r.metadata(), "x-echo-meta"), Some("tls"));
        assert_eq!(r.into_inner(), Bytes::from("secret"));
        let big = Bytes::from(vec![3u8; 1 << 20]);
        let r = unary(&ch, Request::new(big.clone())).await.unwrap();
        assert!(r.into_inner() == big);
        let mut c = echo_client(&ch);
        c.ready().await.unwrap();
        let input = futures_util::stream::iter((0..10).map(|i| Bytes::from(format!("{i}"))));
        let got: Vec<Bytes> = c
            .streaming(Request::new(input), path("Bidi"), BytesCodec)
            .await
            .unwrap()
            .into_inner()
            .map(|m| m.unwrap())
            .collect()
            .await;
        assert_eq!(got.len(), 10);
    });
}

fn grpcio_available() -> bool {
    Command::new("python3")
        .args(["-c", "import grpc, grpc_health.v1.health_pb2_grpc"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Python's grpcio (gRPC's C core: another HTTP/2 stack) against fibr: Health/Check,
/// Health/Watch seeing the status this test flips, and Echo's four kinds of call on raw
/// bytes (metadata, trailers, status, gzip, deadlines).
#[test]
fn python_grpcio_client() {
    assert!(
        grpcio_available(),
        "python3 cannot import grpcio and grpcio-health-checking: run scripts/peers"
    );
    let srv = start(None);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(srv.health.set_serving::<Echo>());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/grpc/client.py");
    let mut py = Command::new("python3")
        .arg(script)
        .arg(srv.addr.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3");
    let deadline = Instant::now() + LIMIT;
    let stdout = BufReader::new(py.stdout.take().unwrap());
    let mut lines = vec![];
    // The script says when its Watch saw SERVING; then the status flips.
    for line in stdout.lines() {
        let line = line.unwrap();
        assert!(
            Instant::now() < deadline,
            "the script took too long: {lines:?}"
        );
        if line == "watch: SERVING" {
            rt.block_on(srv.health.set_not_serving::<Echo>());
        }
        lines.push(line);
    }
    let out = py.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "client.py failed: {err}\nstdout: {lines:?}"
    );
    assert_eq!(
        lines.last().map(String::as_str),
        Some("ok"),
        "{lines:?}\n{err}"
    );
    assert!(lines.iter().any(|l| l == "watch: NOT_SERVING"), "{lines:?}");
}
