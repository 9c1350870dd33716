//! A gRPC server on fibr: tonic's services, unchanged, served by `fibr::serve` over h2c
//! (HTTP/2 by prior knowledge; HTTP/1.1 still answers on the same port).
//!
//! `cargo run --release --example grpc` listens on 127.0.0.1:50051 (`PORT` overrides) and
//! serves two services side by side in a `tonic::service::Routes`:
//! - `grpc.health.v1.Health` (tonic-health): `Check` and `Watch`; `fibr.example.Echo` is
//!   reported SERVING, then NOT_SERVING and SERVING again every 5 seconds, so a `Watch`
//!   sees updates.
//! - `fibr.example.Echo` (`grpc/echo.rs`), written by hand the way tonic-build would
//!   generate it (no protoc needed): messages are raw bytes. `Unary` answers the
//!   request's bytes (and the `x-echo` request metadata, in the response metadata);
//!   `ServerStream` takes a count N and sends `msg 0` .. `msg N-1`, 100 ms apart; both
//!   answer gzip to clients that accept it.
//!
//! Call it with Python's grpcio (`pip install grpcio grpcio-health-checking`):
//!
//! ```python
//! import grpc
//! from grpc_health.v1 import health_pb2, health_pb2_grpc
//! ch = grpc.insecure_channel("127.0.0.1:50051")
//! print(health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service="")))
//! echo = ch.unary_unary("/fibr.example.Echo/Unary")        # no serializers: bytes
//! print(echo.with_call(b"hello", metadata=[("x-echo", "hi")]))
//! for m in ch.unary_stream("/fibr.example.Echo/ServerStream")(b"5"):
//!     print(m)
//! for r in health_pb2_grpc.HealthStub(ch).Watch(
//!         health_pb2.HealthCheckRequest(service="fibr.example.Echo")):
//!     print(r)                                               # an update every 5 s
//! ```
//!
//! or with tonic's client: `tonic_health::pb::health_client::HealthClient::connect(
//! "http://127.0.0.1:50051")`, and `tonic::client::Grpc::new(channel).unary(req,
//! PathAndQuery::from_static("/fibr.example.Echo/Unary"), codec)` with a bytes codec like
//! `grpc/codec.rs` (see `compat/tests/grpc.rs` for every kind of call).

#[path = "grpc/codec.rs"]
mod codec;
#[path = "grpc/echo.rs"]
mod echo;

use echo::Echo;
use std::time::Duration;
use tonic::server::NamedService;
use tonic_health::ServingStatus;

/// `ServerStream`'s pacing (`grpc/echo.rs` asks its includer for a timer).
async fn sleep(d: Duration) {
    fibr::time::sleep(d).await
}

fn main() -> std::io::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let port = std::env::var("PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(50051u16);
    let (health, health_svc) = tonic_health::server::health_reporter();
    let routes = tonic::service::Routes::new(health_svc).add_service(Echo);
    fibr::run(async move {
        let listener = fibr::net::TcpListener::bind(("127.0.0.1", port)).await?;
        eprintln!("serving gRPC on http://{}", listener.local_addr()?);
        // Flips Echo's health every 5 s, for `Watch`.
        fibr::spawn(async move {
            let mut serving = true;
            loop {
                let status = if serving {
                    ServingStatus::Serving
                } else {
                    ServingStatus::NotServing
                };
                health.set_service_status(Echo::NAME, status).await;
                fibr::time::sleep(Duration::from_secs(5)).await;
                serving = !serving;
            }
        });
        // With tonic's own server this line would be
        // `Server::builder().add_routes(routes).serve(addr).await`.
        fibr::serve(listener, routes).await
    })
}
