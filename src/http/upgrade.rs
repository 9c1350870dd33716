//! Protocol upgrades through hyper.
//!
//! axum's `WebSocketUpgrade` (and anything built on `hyper::upgrade::on`) needs hyper's
//! `OnUpgrade` in the request, which only hyper can create. So a connection whose request
//! asks for an upgrade leaves fibr's dispatcher: its socket becomes a `fibr::net` stream,
//! the bytes already read are replayed first, and hyper's own HTTP/1 connection serves the
//! same service on it, with upgrades. `on_upgrade` spawns with `tokio::spawn`, so it
//! needs fibr's `tokio` feature; with it, the handed-over socket goes to tokio's reactor
//! too (see `spawn_hyper`). Without it, it stays on fibr's loops.

use super::body::Incoming;
use super::service::BoxError;
use crate::engine::conn::Conn;
use crate::engine::conn::DetachedSocket;
#[cfg(not(feature = "tokio"))]
use crate::engine::net::{TcpStream, UnixStream};
use bytes::Buf;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::Body;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use std::future::Future;
use std::io::{self, IoSlice};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use tower_service::Service;

/// Takes `conn`'s socket, once the responses before the upgrade request are out, and
/// serves it with hyper from `prefix` (the bytes from the upgrade request on) with `svc`.
pub(crate) fn hand_off<S, B>(conn: &Conn, prefix: Vec<u8>, svc: S)
where
    S: Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let svc = HyperService {
        inner: Arc::new(Mutex::new(svc)),
        #[cfg(feature = "tunnel")]
        rt: conn.inner.rt.clone(),
    };
    let prefix = Bytes::from(prefix);
    conn.detach(Box::new(move |socket| match socket.and_then(adopt) {
        Ok((io, spawn)) => spawn(Box::pin(serve(Rewind::new(prefix, io), svc))),
        Err(e) => tracing::warn!(error = %e, "could not hand an upgrade request to hyper"),
    }));
}

/// A stream hyper can serve.
trait HyperIo: hyper::rt::Read + hyper::rt::Write + Unpin + Send {
    /// The socket back, for a protocol fibr runs itself after hyper's `101`.
    #[cfg(feature = "tunnel")]
    fn into_socket(self: Box<Self>) -> Option<DetachedSocket>;
}

/// The socket types hyper is given, and how each gives its socket back.
macro_rules! hyper_io {
    ($ty:ty, $variant:ident, |$s:ident| $fd:expr) => {
        impl HyperIo for $ty {
            #[cfg(feature = "tunnel")]
            fn into_socket(self: Box<Self>) -> Option<DetachedSocket> {
                let $s = *self;
                $fd.ok().map(DetachedSocket::$variant)
            }
        }
    };
}
#[cfg(not(feature = "tokio"))]
hyper_io!(TcpStream, Tcp, |s| s.into_fd());
#[cfg(not(feature = "tokio"))]
hyper_io!(UnixStream, Unix, |s| s.into_fd());
#[cfg(feature = "tokio")]
hyper_io!(
    crate::engine::net::TokioIo<tokio::net::TcpStream>,
    Tcp,
    |s| s.into_inner().into_std().map(std::os::fd::OwnedFd::from)
);
#[cfg(feature = "tokio")]
hyper_io!(
    crate::engine::net::TokioIo<tokio::net::UnixStream>,
    Unix,
    |s| s.into_inner().into_std().map(std::os::fd::OwnedFd::from)
);

type Io = Box<dyn HyperIo>;
type Spawn = fn(Pin<Box<dyn Future<Output = ()> + Send>>);

/// The detached socket as a stream on fibr's loops, and fibr's spawn.
#[cfg(not(feature = "tokio"))]
fn adopt(socket: DetachedSocket) -> io::Result<(Io, Spawn)> {
    let io: Io = match socket {
        DetachedSocket::Tcp(fd) => Box::new(TcpStream::from_owned_fd(fd)?),
        DetachedSocket::Unix(fd) => Box::new(UnixStream::from_owned_fd(fd)?),
    };
    Ok((io, |fut| drop(crate::engine::runtime::spawn(fut))))
}

/// The detached socket as a stream on tokio's reactor (the runtime fibr's workers enter),
/// and tokio's spawn. The upgraded stream's user (axum's `on_upgrade`) runs on tokio, as
/// `tokio::spawn` puts it there: with the socket on tokio too, each message stays on one
/// thread, as under `axum::serve`; on fibr's loops, every message crossed from a fibr
/// thread to tokio's (1.7x axum's CPU per WebSocket message, `cargo bench --bench compare`).
#[cfg(feature = "tokio")]
fn adopt(socket: DetachedSocket) -> io::Result<(Io, Spawn)> {
    use crate::engine::net::TokioIo;
    let tokio = tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
    let _entered = tokio.enter();
    let io: Io = match socket {
        DetachedSocket::Tcp(fd) => Box::new(TokioIo::new(tokio::net::TcpStream::from_std(
            std::net::TcpStream::from(fd),
        )?)),
        DetachedSocket::Unix(fd) => Box::new(TokioIo::new(tokio::net::UnixStream::from_std(
            std::os::unix::net::UnixStream::from(fd),
        )?)),
    };
    Ok((io, |fut| drop(tokio::spawn(fut))))
}

async fn serve<S, B>(io: Rewind<Io>, svc: HyperService<S>)
where
    S: Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(crate::rt::Timer)
        .serve_connection(io, svc)
        .with_upgrades();
    if let Err(e) = conn.await {
        tracing::debug!(error = %e, "upgraded connection ended with an error");
    }
}

/// A tower service as hyper's `Service` (which takes `&self`).
struct HyperService<S> {
    inner: Arc<Mutex<S>>,
    /// Where a WebSocket that fibr runs goes after hyper's `101`.
    #[cfg(feature = "tunnel")]
    rt: Arc<crate::engine::runtime::Runtime>,
}

type Answer = Response<UnsyncBoxBody<Bytes, BoxError>>;
type BoxFuture = Pin<Box<dyn Future<Output = Result<Answer, BoxError>> + Send>>;

impl<S, B> hyper::service::Service<Request<hyper::body::Incoming>> for HyperService<S>
where
    S: Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    type Response = Answer;
    type Error = BoxError;
    type Future = BoxFuture;

    fn call(&self, req: Request<hyper::body::Incoming>) -> Self::Future {
        #[allow(unused_mut)]
        let mut req = req.map(Incoming::from_hyper);
        #[cfg(feature = "tunnel")]
        let switch = switch_back::offer(&mut req, &self.rt);
        let mut svc = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let called = catch_unwind(AssertUnwindSafe(|| {
            let mut cx = Context::from_waker(Waker::noop());
            match svc.poll_ready(&mut cx) {
                Poll::Ready(Ok(())) => Ok(svc.call(req)),
                Poll::Ready(Err(e)) => Err(e.into()),
                Poll::Pending => Err(BoxError::from(
                    "the service was not ready for an upgrade request",
                )),
            }
        }));
        drop(svc);
        Box::pin(async move {
            let fut = match called {
                Ok(Ok(fut)) => fut,
                Ok(Err(e)) => return Err(e),
                Err(_) => return Ok(panic_response()),
            };
            match futures_catch(fut).await {
                Ok(Ok(resp)) => Ok({
                    #[cfg(feature = "tunnel")]
                    if let Some(switch) = switch {
                        switch.answered(resp.status());
                    }
                    resp
                }
                .map(|body| {
                    body.map_frame(|f| f.map_data(|mut d| d.copy_to_bytes(d.remaining())))
                        .map_err(Into::into)
                        .boxed_unsync()
                })),
                Ok(Err(e)) => Err(e.into()),
                Err(()) => Ok(panic_response()),
            }
        })
    }
}

/// Polls `fut`, turning a panic into `Err(())`.
async fn futures_catch<F: Future>(fut: F) -> Result<F::Output, ()> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(
        move |cx| match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(Err(())),
        },
    )
    .await
}

fn panic_response() -> Answer {
    tracing::error!(
        "a handler panicked on an upgrade request (axum's WebSocketUpgrade needs fibr's `tokio` feature)"
    );
    let body = Full::new(Bytes::from_static(b"Internal Server Error"));
    let mut resp = Response::new(body.map_err(|never| match never {}).boxed_unsync());
    *resp.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    resp
}

/// An I/O stream that first replays bytes already read from it.
pub(crate) struct Rewind<T> {
    prefix: Bytes,
    inner: T,
}

impl<T> Rewind<T> {
    fn new(prefix: Bytes, inner: T) -> Rewind<T> {
        Rewind { prefix, inner }
    }
}

impl<T: hyper::rt::Read + Unpin> hyper::rt::Read for Rewind<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            let _ = self.prefix.split_to(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: hyper::rt::Write + Unpin> hyper::rt::Write for Rewind<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A request hyper answers may still become one of fibr's own WebSockets (`fibr::ws`):
/// it gets an `OnSwitch` too, and if the service claims it and answers `101`, the socket
/// comes back from hyper once the `101` is written and goes on fibr's loops as a
/// connection again.
#[cfg(feature = "tunnel")]
mod switch_back {
    use super::{Io, Rewind};
    use crate::engine::runtime::Runtime;
    use crate::http::switch::{OnSwitch, Switched};
    use http::{Request, StatusCode};
    use std::sync::Arc;

    pub(super) struct Offer {
        switch: OnSwitch,
        on_upgrade: hyper::upgrade::OnUpgrade,
        rt: Arc<Runtime>,
        /// A CONNECT, whose `2xx` switches as a `101` does.
        connect: bool,
    }

    /// Offers `req` a switch, if hyper can upgrade it.
    pub(super) fn offer<B>(req: &mut Request<B>, rt: &Arc<Runtime>) -> Option<Offer> {
        let on_upgrade = req.extensions().get::<hyper::upgrade::OnUpgrade>()?.clone();
        let switch = OnSwitch::default();
        req.extensions_mut().insert(switch.clone());
        Some(Offer {
            switch,
            on_upgrade,
            rt: rt.clone(),
            connect: req.method() == http::Method::CONNECT,
        })
    }

    impl Offer {
        /// The service answered: a claimed `101` (or a CONNECT's `2xx`) takes the socket
        /// back from hyper.
        pub(super) fn answered(self, status: StatusCode) {
            let switches =
                status == StatusCode::SWITCHING_PROTOCOLS || (self.connect && status.is_success());
            if !switches {
                return;
            }
            let Some(take) = self.switch.take() else {
                return;
            };
            let Offer { on_upgrade, rt, .. } = self;
            let pool = rt.pool.clone();
            drop(crate::engine::exec::spawn_on(&pool, async move {
                let upgraded = match on_upgrade.await {
                    Ok(u) => u,
                    Err(e) => return tracing::debug!(error = %e, "the upgrade failed"),
                };
                let Ok(parts) = upgraded.downcast::<Rewind<Io>>() else {
                    return tracing::warn!("hyper's upgraded stream is not the one fibr gave it");
                };
                let Rewind { prefix, inner } = parts.io;
                let mut read = prefix.to_vec();
                read.extend_from_slice(&parts.read_buf);
                let Some(socket) = inner.into_socket() else {
                    return tracing::warn!("could not take the socket back from hyper");
                };
                let adopted = crate::engine::conn::adopt(&rt, socket, move |conn| {
                    take(Switched {
                        conn: conn.clone(),
                        read,
                        in_round: false,
                    })
                });
                if let Err(e) = adopted {
                    tracing::warn!(error = %e, "could not put the WebSocket on fibr's loops");
                }
            }));
        }
    }
}
