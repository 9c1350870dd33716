//! A hand-written gRPC service (what tonic-build would generate, without protoc): the
//! four kinds of call over raw bytes (`BytesCodec`), so any client can call it without
//! a schema (Python's grpcio with no serializers).
//!
//! | method                          | what it does                                           |
//! |---------------------------------|--------------------------------------------------------|
//! | `/fibr.test.Echo/Unary`         | the request's bytes back (see the request metadata)    |
//! | `/fibr.test.Echo/ServerStream`  | request `N` (decimal) or `forever`: `msg 0`, `msg 1`.. |
//! | `/fibr.test.Echo/ClientStream`  | every request message, concatenated                    |
//! | `/fibr.test.Echo/Bidi`          | `echo: ` + each message, as each arrives               |
//!
//! Request metadata the handlers read:
//! - `x-echo-meta`: sent back in the response metadata (the response's HEADERS).
//! - `x-sleep-ms`: Unary sleeps this long first; ServerStream waits this long between
//!   messages.
//! - `x-size`: ServerStream's messages are padded with `.` to this many bytes.
//! - `x-fail-code`: Unary fails with this `grpc-status` (a trailers-only response, with
//!   `x-detail: it failed` in it); ServerStream sends its messages and then ends with this
//!   status and `x-detail` in the trailers (`0` included: an OK with trailer metadata).
//!
//! Response metadata of Unary: `x-echo-meta`, `x-req-encoding` (the request's
//! `grpc-encoding`, or `identity`), `x-req-timeout` (its `grpc-timeout`, if any).
//!
//! Every call's handler holds a [`Live`] guard while it runs (Unary: its future;
//! streaming calls: their response stream), so a test sees when fibr dropped them.

pub use super::codec::BytesCodec;
use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tonic::body::Body;
use tonic::codec::CompressionEncoding;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::server::NamedService;
use tonic::{Code, Request, Response, Status, Streaming};

/// The service's name.
pub const SERVICE: &str = "fibr.test.Echo";
/// The message size limit both ways (tonic's default is 4 MiB, less than the large test).
pub const MAX_MESSAGE: usize = 16 << 20;

/// Counts the handlers (futures and response streams) alive.
#[derive(Clone, Debug, Default)]
pub struct LiveCount(Arc<AtomicUsize>);

impl LiveCount {
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
    fn guard(&self) -> Live {
        self.0.fetch_add(1, Ordering::SeqCst);
        Live(self.0.clone())
    }
}

/// One live handler.
pub struct Live(Arc<AtomicUsize>);

impl Drop for Live {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The service: `tonic::server::Grpc` per call, as generated code does.
#[derive(Clone, Debug, Default)]
pub struct Echo {
    pub live: LiveCount,
}

impl NamedService for Echo {
    const NAME: &'static str = SERVICE;
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type MessageStream = Pin<Box<dyn Stream<Item = Result<Bytes, Status>> + Send>>;

impl<B> tower::Service<http::Request<B>> for Echo
where
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let live = self.live.clone();
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(BytesCodec)
                .accept_compressed(CompressionEncoding::Gzip)
                .send_compressed(CompressionEncoding::Gzip)
                .max_decoding_message_size(MAX_MESSAGE)
                .max_encoding_message_size(MAX_MESSAGE);
            let resp = match req.uri().path() {
                "/fibr.test.Echo/Unary" => {
                    let svc = tower::service_fn(move |r| unary(r, live.guard()));
                    grpc.unary(svc, req).await
                }
                "/fibr.test.Echo/ServerStream" => {
                    let svc = tower::service_fn(move |r| server_stream(r, live.guard()));
                    grpc.server_streaming(svc, req).await
                }
                "/fibr.test.Echo/ClientStream" => {
                    let svc = tower::service_fn(move |r| client_stream(r, live.guard()));
                    grpc.client_streaming(svc, req).await
                }
                "/fibr.test.Echo/Bidi" => {
                    let svc = tower::service_fn(move |r| bidi(r, live.guard()));
                    grpc.streaming(svc, req).await
                }
                _ => Status::unimplemented("no such method").into_http(),
            };
            Ok(resp)
        })
    }
}

fn meta_str<'a>(md: &'a MetadataMap, key: &str) -> Option<&'a str> {
    md.get(key).and_then(|v| v.to_str().ok())
}

fn meta_num(md: &MetadataMap, key: &str) -> Option<u64> {
    meta_str(md, key).and_then(|v| v.parse().ok())
}

fn failure(code: u64) -> Status {
    let mut md = MetadataMap::new();
    md.insert("x-detail", MetadataValue::from_static("it failed"));
    Status::with_metadata(Code::from(code as i32), "failed on request", md)
}

async fn unary(req: Request<Bytes>, live: Live) -> Result<Response<Bytes>, Status> {
    let _live = live;
    let md = req.metadata().clone();
    if let Some(ms) = meta_num(&md, "x-sleep-ms") {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    if let Some(code) = meta_num(&md, "x-fail-code") {
        return Err(failure(code));
    }
    let mut resp = Response::new(req.into_inner());
    let out = resp.metadata_mut();
    if let Some(v) = md.get("x-echo-meta") {
        out.insert("x-echo-meta", v.clone());
    }
    let encoding = meta_str(&md, "grpc-encoding").unwrap_or("identity");
    out.insert("x-req-encoding", encoding.parse().unwrap());
    if let Some(v) = md.get("grpc-timeout") {
        out.insert("x-req-timeout", v.clone());
    }
    Ok(resp)
}

async fn server_stream(req: Request<Bytes>, live: Live) -> Result<Response<MessageStream>, Status> {
    let md = req.metadata().clone();
    let body = req.into_inner();
    let count = match &body[..] {
        b"forever" => u64::MAX,
        n => std::str::from_utf8(n)
            .ok()
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| Status::invalid_argument("send a count or `forever`"))?,
    };
    let interval = meta_num(&md, "x-sleep-ms").map(Duration::from_millis);
    let fail = meta_num(&md, "x-fail-code");
    let size = meta_num(&md, "x-size").unwrap_or(0) as usize;
    let messages = futures_util::stream::unfold((0u64, live), move |(i, live)| async move {
        if i == count {
            return None;
        }
        if let Some(d) = interval {
            tokio::time::sleep(d).await;
        }
        let mut m = format!("msg {i}").into_bytes();
        if m.len() < size {
            m.resize(size, b'.');
        }
        Some((Ok(Bytes::from(m)), (i + 1, live)))
    });
    let end = futures_util::stream::iter(fail.map(|code| Err(failure(code))));
    let mut resp = Response::new(Box::pin(messages.chain(end)) as MessageStream);
    if let Some(v) = md.get("x-echo-meta") {
        resp.metadata_mut().insert("x-echo-meta", v.clone());
    }
    Ok(resp)
}

async fn client_stream(
    req: Request<Streaming<Bytes>>,
    live: Live,
) -> Result<Response<Bytes>, Status> {
    let _live = live;
    let mut input = req.into_inner();
    let mut all = BytesMut::new();
    while let Some(m) = input.message().await? {
        all.extend_from_slice(&m);
    }
    Ok(Response::new(all.freeze()))
}

async fn bidi(
    req: Request<Streaming<Bytes>>,
    live: Live,
) -> Result<Response<MessageStream>, Status> {
    let input = req.into_inner();
    let out = input.map(move |m| {
        let _alive = &live;
        m.map(|m| {
            let mut b = BytesMut::from(&b"echo: "[..]);
            b.extend_from_slice(&m);
            b.freeze()
        })
    });
    Ok(Response::new(Box::pin(out) as MessageStream))
}
