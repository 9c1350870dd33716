//! The body pump: a body's frames, sorted once for every place that moves a body somewhere
//! (a server's response into HTTP/1 framing, HTTP/2 DATA or an HTTP/3 stream; a client's
//! request the same ways). `poll_next` says what came (data, trailers, the end, a failure:
//! a body that panics is a failure, not a crash), and `pump` moves frames into a `Sink`
//! until the body waits, the sink is full, or the body is done.

use crate::http::service::BoxError;
use http::HeaderMap;
use http_body::Body;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

/// What a body gave next.
pub(crate) enum Next<D> {
    /// Data; `last`: the body says nothing follows, so its end can go with this frame.
    Data(D, bool),
    /// Trailers, which end the body.
    Trailers(HeaderMap),
    /// The end, without trailers.
    End,
    /// The body failed (or panicked): what was sent of it is all there will be.
    Failed(BoxError),
}

/// Polls `body` for its next frame (frames of a kind HTTP does not know are skipped).
pub(crate) fn poll_next<B>(mut body: Pin<&mut B>, cx: &mut Context<'_>) -> Poll<Next<B::Data>>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    loop {
        let polled = catch_unwind(AssertUnwindSafe(|| body.as_mut().poll_frame(cx)));
        let frame = match polled {
            Err(_) => return Poll::Ready(Next::Failed("the body panicked".into())),
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(None)) => return Poll::Ready(Next::End),
            Ok(Poll::Ready(Some(Err(e)))) => return Poll::Ready(Next::Failed(e.into())),
            Ok(Poll::Ready(Some(Ok(frame)))) => frame,
        };
        match frame.into_data() {
            Ok(data) => return Poll::Ready(Next::Data(data, body.is_end_stream())),
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    return Poll::Ready(Next::Trailers(trailers));
                }
            }
        }
    }
}

/// `poll_next` as a future, for the drivers that send with `.await` (HTTP/3's streams).
#[cfg(feature = "http3")]
pub(crate) async fn next<B>(mut body: Pin<&mut B>) -> Next<B::Data>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    std::future::poll_fn(|cx| poll_next(body.as_mut(), cx)).await
}

/// Where `pump` puts a body's frames.
pub(crate) trait Sink<D> {
    /// Whether the sink takes a frame now; it first writes out what it kept. On `Wait` it
    /// has arranged to be driven again (a flow-control window, the socket's output
    /// draining).
    fn ready(&mut self) -> Room {
        Room::Go
    }
    /// Takes a data frame (`last`: the body ends with it). False: only part of it could go
    /// now and the sink kept the rest (and `last`), so the pump stops until it is driven
    /// again, when `ready` writes it out.
    fn data(&mut self, data: D, last: bool) -> bool;
    /// The body ended with trailers.
    fn trailers(&mut self, trailers: HeaderMap);
    /// The body ended without trailers.
    fn end(&mut self);
    /// The body failed: the sink tells its peer as its protocol can.
    fn failed(&mut self, err: BoxError);
}

/// What a sink says before a frame.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Room {
    /// Poll the body for the next frame.
    Go,
    /// Not now (what it kept did not all go out, or its output is full).
    Wait,
    /// What it kept was the body's last frame, and it has gone out: the body is done.
    Finished,
}

/// How far `pump` got.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Pumped {
    /// The body, or the sink, waits; pump again when woken (or driven).
    Waiting,
    /// The body ended (or failed) and the sink was told.
    Done,
}

/// Moves `body`'s frames into `sink` while both can.
pub(crate) fn pump<B, K>(mut body: Pin<&mut B>, cx: &mut Context<'_>, sink: &mut K) -> Pumped
where
    B: Body,
    B::Error: Into<BoxError>,
    K: Sink<B::Data>,
{
    loop {
        match sink.ready() {
            Room::Go => {}
            Room::Wait => return Pumped::Waiting,
            Room::Finished => return Pumped::Done,
        }
        let Poll::Ready(next) = poll_next(body.as_mut(), cx) else {
            return Pumped::Waiting;
        };
        match next {
            Next::Data(data, last) => {
                if !sink.data(data, last) {
                    return Pumped::Waiting;
                }
                if last {
                    return Pumped::Done;
                }
            }
            Next::Trailers(trailers) => {
                sink.trailers(trailers);
                return Pumped::Done;
            }
            Next::End => {
                sink.end();
                return Pumped::Done;
            }
            Next::Failed(err) => {
                sink.failed(err);
                return Pumped::Done;
            }
        }
    }
}
