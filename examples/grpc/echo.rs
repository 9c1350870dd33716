//! The example's `fibr.example.Echo` service, written by hand the way tonic-build would
//! generate it (no protoc needed): messages are raw bytes ([`BytesCodec`]). Its own file so
//! that `cargo bench --bench compare`'s gRPC scenario serves this very service on fibr
//! (`examples/bench_server.rs`) and on tonic's own server (`benches/peers`' `tonic_grpc`).
//!
//! The including crate provides `super::codec` (`examples/grpc/codec.rs`) and
//! `super::sleep(Duration)`, its runtime's timer (`ServerStream`'s pacing).

use super::codec::BytesCodec;
use bytes::Bytes;
use std::convert::Infallible;
use std::task::{Context, Poll};
use std::time::Duration;
use tonic::body::Body;
use tonic::codec::CompressionEncoding;
use tonic::codegen::{BoxFuture, BoxStream, StdError};
use tonic::server::NamedService;
use tonic::{Request, Response, Status};

/// The path of the unary method.
pub const UNARY: &str = "/fibr.example.Echo/Unary";

/// The Echo service: what generated code would be, routing by path to `tonic::server::Grpc`.
/// `Unary` answers the request's bytes (and the `x-echo` request metadata, in the response
/// metadata); `ServerStream` takes a count N and sends `msg 0` .. `msg N-1`, 100 ms apart;
/// both answer gzip to clients that accept it.
#[derive(Clone, Default)]
pub struct Echo;

impl NamedService for Echo {
    const NAME: &'static str = "fibr.example.Echo";
}

impl<B> tower::Service<http::Request<B>> for Echo
where
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<http::Response<Body>, Infallible>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(BytesCodec)
                .accept_compressed(CompressionEncoding::Gzip)
                .send_compressed(CompressionEncoding::Gzip);
            Ok(match req.uri().path() {
                UNARY => grpc.unary(tower::service_fn(unary), req).await,
                "/fibr.example.Echo/ServerStream" => {
                    grpc.server_streaming(tower::service_fn(server_stream), req)
                        .await
                }
                _ => Status::unimplemented("no such method").into_http(),
            })
        })
    }
}

async fn unary(req: Request<Bytes>) -> Result<Response<Bytes>, Status> {
    let echo = req.metadata().get("x-echo").cloned();
    let mut resp = Response::new(req.into_inner());
    if let Some(v) = echo {
        resp.metadata_mut().insert("x-echo", v);
    }
    Ok(resp)
}

async fn server_stream(req: Request<Bytes>) -> Result<Response<BoxStream<Bytes>>, Status> {
    let n: u32 = std::str::from_utf8(req.get_ref())
        .ok()
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| Status::invalid_argument("send a count"))?;
    let messages = futures_util::stream::unfold(0, move |i| async move {
        if i == n {
            return None;
        }
        if i > 0 {
            super::sleep(Duration::from_millis(100)).await;
        }
        Some((Ok(Bytes::from(format!("msg {i}"))), i + 1))
    });
    Ok(Response::new(Box::pin(messages) as BoxStream<Bytes>))
}
