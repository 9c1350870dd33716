//! The conformance cases, by RFC section (h2spec's list for a server), and the app they
//! run against.

pub mod client;
mod generic;
mod hpack;
mod s3_5;
mod s6a;
mod s6b;
mod s8;
pub mod wire;

use axum::body::Bytes;
use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::Router;
use std::net::SocketAddr;

/// What `GET /` answers (any request without a body).
pub const HELLO: &[u8] = b"hello, conformance suite";

/// One requirement: `id` like h2spec's (`6.5.3/2`), what is sent and what must happen.
pub struct Case {
    pub id: &'static str,
    pub desc: &'static str,
    pub run: fn(SocketAddr) -> client::R,
}

pub fn case(id: &'static str, desc: &'static str, run: fn(SocketAddr) -> client::R) -> Case {
    Case { id, desc, run }
}

/// Every request is answered after its body is read: a body is echoed, an empty one gets
/// [`HELLO`]. So a request whose END_STREAM has not come keeps its stream open. CONNECT
/// is answered at once (its body would be the tunnel); `/hold` never is; `/early` is
/// answered at once without its body (which the server then stops with RST_STREAM).
pub fn app() -> Router {
    Router::new().fallback(|req: Request| async move {
        if req.method() == Method::CONNECT {
            return (StatusCode::OK, Bytes::new());
        }
        if req.uri().path() == "/early" {
            return (StatusCode::OK, Bytes::from_static(HELLO));
        }
        if req.uri().path() == "/hold" {
            // Never reads its body nor answers: what the client sends stays in the
            // server's windows.
            std::future::pending::<()>().await;
        }
        match axum::body::to_bytes(req.into_body(), usize::MAX).await {
            Ok(b) if b.is_empty() => (StatusCode::OK, Bytes::from_static(HELLO)),
            Ok(b) => (StatusCode::OK, b),
            Err(_) => (StatusCode::BAD_REQUEST, Bytes::new()),
        }
    })
}

pub fn all_cases() -> Vec<Case> {
    let mut v = Vec::new();
    v.extend(s3_5::cases());
    v.extend(s6a::cases());
    v.extend(s6b::cases());
    v.extend(s8::cases());
    v.extend(hpack::cases());
    v.extend(generic::cases());
    v
}
