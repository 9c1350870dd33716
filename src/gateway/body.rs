//! The gateway's bodies: [`GatewayBody`] (an upstream's response, under the idle timeout,
//! or the gateway's own short answer) and [`Lent`] (a request body that comes back if the
//! upstream failed before reading it, so the request can go to another).

use super::idle::Idle;
use super::upstreams::InFlight;
use crate::client::{BoxError, ResponseBody};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

/// The body of a gateway's response: the upstream's, streamed as it is read (a slow
/// client slows the upstream read: nothing is buffered beyond what each side's flow
/// control holds), or the gateway's own text.
pub struct GatewayBody(Kind);

enum Kind {
    Upstream(Box<Streamed>),
    Text(Option<Bytes>),
    /// Anything else (a tunnel's output).
    Boxed(UnsyncBoxBody<Bytes, BoxError>),
}

struct Streamed {
    body: ResponseBody,
    idle: Option<Idle>,
    /// Counts the request as in flight on its upstream until the body ends or drops.
    _in_flight: InFlight,
}

impl GatewayBody {
    pub(super) fn upstream(
        body: ResponseBody,
        idle: Option<Duration>,
        in_flight: InFlight,
    ) -> GatewayBody {
        GatewayBody(Kind::Upstream(Box::new(Streamed {
            body,
            idle: idle.map(Idle::new),
            _in_flight: in_flight,
        })))
    }

    pub(super) fn boxed<B>(body: B) -> GatewayBody
    where
        B: Body<Data = Bytes, Error = BoxError> + Send + 'static,
    {
        GatewayBody(Kind::Boxed(UnsyncBoxBody::new(body)))
    }

    pub(super) fn text(text: impl Into<Bytes>) -> GatewayBody {
        let b = text.into();
        GatewayBody(Kind::Text((!b.is_empty()).then_some(b)))
    }
}

impl Body for GatewayBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let s = match &mut self.get_mut().0 {
            Kind::Text(t) => return Poll::Ready(t.take().map(|b| Ok(Frame::data(b)))),
            Kind::Boxed(b) => return Pin::new(b).poll_frame(cx),
            Kind::Upstream(s) => s,
        };
        match Pin::new(&mut s.body).poll_frame(cx) {
            Poll::Ready(frame) => {
                if let Some(idle) = &mut s.idle {
                    idle.touch();
                }
                Poll::Ready(frame.map(|r| r.map_err(BoxError::from)))
            }
            Poll::Pending => match &mut s.idle {
                Some(idle) => match idle.expired(cx) {
                    true => Poll::Ready(Some(Err(idle.error().into()))),
                    false => Poll::Pending,
                },
                None => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.0 {
            Kind::Text(t) => t.is_none(),
            Kind::Boxed(b) => b.is_end_stream(),
            Kind::Upstream(s) => s.body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            Kind::Text(t) => SizeHint::with_exact(t.as_ref().map_or(0, |b| b.len() as u64)),
            Kind::Boxed(b) => b.size_hint(),
            Kind::Upstream(s) => s.body.size_hint(),
        }
    }
}

impl std::fmt::Debug for GatewayBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GatewayBody")
    }
}

/// A request body lent to the client: if it is dropped before its first poll (the
/// upstream failed before asking for it), it goes back to its [`Home`].
pub(super) struct Lent<B> {
    body: Option<Pin<Box<B>>>,
    home: Home<B>,
    polled: bool,
}

/// Where a [`Lent`] body comes back to.
pub(super) struct Home<B>(Arc<Mutex<Option<Pin<Box<B>>>>>);

impl<B> Home<B> {
    /// Lends `body` out.
    pub(super) fn lend(body: Pin<Box<B>>) -> (Lent<B>, Home<B>) {
        let home = Home(Arc::new(Mutex::new(None)));
        let lent = Lent {
            body: Some(body),
            home: Home(home.0.clone()),
            polled: false,
        };
        (lent, home)
    }

    /// The body, if it came back unread.
    pub(super) fn take_back(&self) -> Option<Pin<Box<B>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl<B> Drop for Lent<B> {
    fn drop(&mut self) {
        if !self.polled {
            if let Some(b) = self.body.take() {
                *self.home.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(b);
            }
        }
    }
}

impl<B: Body> Body for Lent<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.get_mut();
        this.polled = true;
        match &mut this.body {
            Some(b) => b.as_mut().poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(|b| b.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        self.body
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), |b| b.size_hint())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Full};

    #[test]
    fn an_unread_body_comes_back_and_a_read_one_does_not() {
        let (lent, home) = Home::lend(Box::pin(Full::new(Bytes::from_static(b"abc"))));
        assert_eq!(lent.size_hint().exact(), Some(3));
        drop(lent);
        let back = home.take_back().expect("came back");
        let (mut lent, home) = Home::lend(back);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let frame = Pin::new(&mut lent).poll_frame(&mut cx);
        assert!(matches!(frame, Poll::Ready(Some(Ok(_)))));
        drop(lent);
        assert!(home.take_back().is_none());
    }

    #[test]
    fn the_gateway_text_is_one_frame() {
        let body = GatewayBody::text("no upstream\n");
        assert_eq!(body.size_hint().exact(), Some(12));
        let got = crate::engine::runtime::run(body.collect())
            .unwrap()
            .to_bytes();
        assert_eq!(got, "no upstream\n");
    }
}
