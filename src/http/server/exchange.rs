//! The request exchange on the driver's side, the same for HTTP/1, HTTP/2 and HTTP/3:
//! calling the service (its readiness, the call, its first poll), polling the call, what
//! the connection's TLS adds to each request, and the body pump that turns a body's frames
//! into data, trailers, an end or a failure.

use crate::engine::conn::Conn;
use crate::http::body::Incoming;
use crate::http::service::BoxError;
use http::{Request, Response, StatusCode};
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use tower_service::Service;

/// One request's progress on the driver's side, from the service call to the last byte of
/// its response (the machine keeps its order, framing and keep-alive).
pub(super) enum Stage<F, B> {
    /// The service was not ready: the request waits (boxed: rare, and large).
    Waiting(Box<Request<Incoming>>),
    Calling(Pin<Box<F>>),
    Ready(Response<B>),
    /// The service failed: answer with this status (`close`: and end the connection).
    Failed {
        status: StatusCode,
        close: bool,
    },
    Streaming(Pin<Box<B>>),
    /// Between two of the above while the driver moves it along.
    Moving,
}

/// Polls a service call once: the stage it is in afterwards. A failure or a panic becomes
/// a 500 (a failed call also ends the connection).
pub(super) fn poll_call<F, B, E>(mut fut: Pin<Box<F>>, cx: &mut Context<'_>) -> Stage<F, B>
where
    F: Future<Output = Result<Response<B>, E>>,
    E: Into<BoxError>,
{
    match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
        Ok(Poll::Pending) => Stage::Calling(fut),
        Ok(Poll::Ready(Ok(resp))) => Stage::Ready(resp),
        Ok(Poll::Ready(Err(e))) => {
            tracing::error!(error = %e.into(), "the service returned an error");
            Stage::Failed {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                close: true,
            }
        }
        Err(payload) => {
            // The connection's state is intact: it stays open.
            crate::http::panic::log_panic("a request handler", &*payload);
            Stage::Failed {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                close: false,
            }
        }
    }
}

/// Calls the service if it is ready (and, with `poll_now`, polls the call once); gives the
/// request back if it is not. A failure or panic becomes a 500 (one in `poll_ready` also
/// ends the connection).
pub(super) fn call_service<S, B>(
    svc: &mut S,
    waker: &Waker,
    req: Request<Incoming>,
    poll_now: bool,
) -> Result<Stage<S::Future, B>, Box<Request<Incoming>>>
where
    S: Service<Request<Incoming>, Response = Response<B>>,
    S::Error: Into<BoxError>,
{
    let mut cx = Context::from_waker(waker);
    match catch_unwind(AssertUnwindSafe(|| svc.poll_ready(&mut cx))) {
        Ok(Poll::Pending) => Err(Box::new(req)),
        Ok(Poll::Ready(Ok(()))) => Ok(match catch_unwind(AssertUnwindSafe(|| svc.call(req))) {
            Ok(fut) if poll_now => poll_call(Box::pin(fut), &mut cx),
            Ok(fut) => Stage::Calling(Box::pin(fut)),
            Err(payload) => {
                crate::http::panic::log_panic("the service, while being called,", &*payload);
                Stage::Failed {
                    status: StatusCode::INTERNAL_SERVER_ERROR,
                    close: false,
                }
            }
        }),
        Ok(Poll::Ready(Err(e))) => {
            tracing::error!(error = %e.into(), "the service failed");
            Ok(Stage::Failed {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                close: true,
            })
        }
        Err(payload) => {
            crate::http::panic::log_panic("the service's poll_ready", &*payload);
            Ok(Stage::Failed {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                close: true,
            })
        }
    }
}

/// What the connection's TLS negotiated (feature `tls`): every request gets it as an
/// extension, and an upgrade cannot be handed to hyper (the TLS session stays here).
#[derive(Default)]
pub(super) struct ConnTls {
    #[cfg(feature = "tls")]
    info: Option<crate::tls::TlsInfo>,
}

impl ConnTls {
    pub(super) fn of(_conn: &Conn) -> ConnTls {
        ConnTls {
            #[cfg(feature = "tls")]
            info: _conn.tls_info(),
        }
    }

    pub(super) fn is_tls(&self) -> bool {
        #[cfg(feature = "tls")]
        return self.info.is_some();
        #[cfg(not(feature = "tls"))]
        false
    }

    /// Whether ALPN chose HTTP/2.
    pub(super) fn alpn_is_h2(&self) -> bool {
        #[cfg(feature = "tls")]
        return self
            .info
            .as_ref()
            .is_some_and(|i| i.alpn_protocol() == Some(b"h2"));
        #[cfg(not(feature = "tls"))]
        false
    }

    pub(super) fn extend(&self, _req: &mut Request<Incoming>) {
        #[cfg(feature = "tls")]
        if let Some(info) = &self.info {
            _req.extensions_mut().insert(info.clone());
        }
    }
}
