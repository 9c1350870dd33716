//! What `fibr::serve` accepts: a tower service, or a "make service" that builds one per
//! connection (axum's `into_make_service` and `into_make_service_with_connect_info`).
//!
//! The two cases are told apart by a marker type parameter, so one `serve` function takes
//! either without the caller naming anything: a type that is a service of requests picks
//! [`ServiceMarker`], a type that is a service of [`ConnInfo`] answering with a service of
//! requests picks [`MakeMarker`].

use super::body::Incoming;
use http::{Request, Response};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use tower_service::Service;

/// A boxed error, as tower and hyper use.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What a make-service learns about a new connection: with axum, what
/// `into_make_service_with_connect_info::<T>()` builds `T` from (`impl
/// Connected<fibr::http::ConnInfo> for T`; `SocketAddr` has one).
#[derive(Clone, Debug)]
pub struct ConnInfo {
    /// The client's address (None for Unix sockets).
    pub peer: Option<SocketAddr>,
    /// The local address the connection arrived on (None for Unix sockets).
    pub local: Option<SocketAddr>,
    /// A Unix-socket client's address and credentials (None over TCP and UDP).
    pub unix: Option<UnixPeer>,
}

/// A client on a Unix socket, as tokio's `UnixStream::peer_addr` and `peer_cred` tell it.
#[derive(Clone, Debug)]
pub struct UnixPeer {
    /// The address the client's socket is bound to (usually unnamed).
    pub addr: Option<Arc<std::os::unix::net::SocketAddr>>,
    /// The client's process, user and group (None where the OS has no call for them).
    pub cred: Option<PeerCred>,
}

pub use crate::engine::sys::unix_peer::PeerCred;

impl UnixPeer {
    /// The peer of the Unix stream socket `fd`.
    pub(crate) fn of(fd: std::os::fd::RawFd) -> UnixPeer {
        UnixPeer {
            addr: crate::engine::sys::unix_peer::peer_addr(fd).map(Arc::new),
            cred: crate::engine::sys::unix_peer::peer_cred(fd),
        }
    }
}

#[cfg(feature = "axum")]
impl axum::extract::connect_info::Connected<ConnInfo> for SocketAddr {
    fn connect_info(info: ConnInfo) -> SocketAddr {
        info.peer
            .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)))
    }
}

/// Marks an app that is itself a service of requests.
pub enum ServiceMarker {}
/// Marks an app that makes a service per connection.
pub enum MakeMarker {}

/// An app `fibr::serve` can run: gives each connection its service.
pub trait MakeService<Marker>: Send + Sync + 'static {
    /// The per-connection service.
    type Service: Service<Request<Incoming>, Response = Response<Self::Body>> + Send + 'static;
    /// The response body type.
    type Body;
    /// Builds the service for one connection.
    fn make_service(&self, info: &ConnInfo) -> Result<Self::Service, BoxError>;
}

impl<S, B> MakeService<ServiceMarker> for S
where
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + Sync + 'static,
{
    type Service = S;
    type Body = B;
    fn make_service(&self, _info: &ConnInfo) -> Result<S, BoxError> {
        Ok(self.clone())
    }
}

impl<M, S, B> MakeService<MakeMarker> for M
where
    M: Service<ConnInfo, Response = S> + Clone + Send + Sync + 'static,
    M::Error: Into<BoxError>,
    S: Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
{
    type Service = S;
    type Body = B;
    fn make_service(&self, info: &ConnInfo) -> Result<S, BoxError> {
        let mut make = self.clone();
        let mut cx = Context::from_waker(Waker::noop());
        match make.poll_ready(&mut cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => return Err(e.into()),
            Poll::Pending => return Err("the make-service was not ready".into()),
        }
        // axum's make-services answer at once; one that does not is not supported here.
        let fut = pin!(make.call(info.clone()));
        match fut.poll(&mut cx) {
            Poll::Ready(r) => r.map_err(Into::into),
            Poll::Pending => Err("the make-service did not produce a service at once".into()),
        }
    }
}
