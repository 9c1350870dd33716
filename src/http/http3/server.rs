//! Serving one QUIC connection: h3's accept loop on the connection's task, and a task per
//! request that calls the service, feeds the request body into an [`Incoming`] channel
//! and writes the response (head, data, trailers) through h3.

use super::driver::QuicConn;
use super::quic::{RecvStream, SendStream};
use crate::http::pump::{next, Next};
use crate::http::service::BoxError;
use crate::http::Incoming;
use crate::proto::shared::{BodyFailure, BodySink};
use bytes::{Buf, Bytes};
use h3::error::Code;
use h3::server::{RequestResolver, RequestStream};
use http::{header, HeaderMap, Request, Response, StatusCode};
use http_body::Body;
use std::future::{poll_fn, Future};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Wake, Waker};
use tower_service::Service;

/// Limits a request task needs.
#[derive(Clone, Copy)]
pub(crate) struct Limits {
    /// Request body bytes buffered before reading from the stream stops.
    pub body_buffer: usize,
    pub max_body_size: Option<u64>,
    /// A request head's largest size (h3 answers 431 past it, and tells the client).
    pub max_field_section_size: u64,
}

/// Runs h3 on `quic`: accepts requests until the client goes away, each on its own task;
/// with `extended_connect`, RFC 9220's `:protocol` too.
/// The service is shared by the connection's requests (called under a lock, its futures
/// run on the request tasks). When `drain` completes (graceful shutdown) it sends GOAWAY,
/// refuses later requests, and returns (closing the connection) once those it took are
/// done.
pub(crate) async fn serve_connection<S, B>(
    quic: QuicConn,
    svc: S,
    limits: Limits,
    extended_connect: bool,
    drain: impl Future<Output = ()>,
) where
    S: Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let handle = quic.clone();
    let mut builder = h3::server::builder();
    builder.max_field_section_size(limits.max_field_section_size);
    if extended_connect {
        builder.enable_extended_connect(true);
        quic.carry_protocols(limits.max_field_section_size as usize);
    }
    // The handshake's future (~3.6 KB) is boxed, and its result matched without a binding:
    // kept inline, either would stay in this future, which an idle connection holds for
    // its life (`the_connection_future_holds_little_beyond_h3s_own_state`).
    let mut conn = match Box::pin(builder.build::<QuicConn, Bytes>(quic)).await {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(error = %e, "HTTP/3 connection failed to start");
            return;
        }
    };
    let svc = Arc::new(Mutex::new(svc));
    let in_flight = Arc::new(InFlight::default());
    let mut drain = std::pin::pin!(drain);
    let mut draining = false;
    loop {
        // The step (368 B: it may hold a request's resolver) lives in this block only, so
        // the future keeps no room for it at its awaits (the accept it waits in for the
        // connection's life, and the GOAWAY's).
        let goaway = {
            let step = {
                let mut accept = std::pin::pin!(conn.accept());
                poll_fn(|cx| {
                    if let Poll::Ready(r) = accept.as_mut().poll(cx) {
                        return Poll::Ready(Step::Accepted(r));
                    }
                    if !draining {
                        return drain.as_mut().poll(cx).map(|()| Step::Drain);
                    }
                    in_flight.waiter.set(cx.waker());
                    match in_flight.count.load(Ordering::Acquire) {
                        0 => Poll::Ready(Step::Done),
                        _ => Poll::Pending,
                    }
                })
                .await
            };
            match step {
                Step::Accepted(Ok(Some(resolver))) => {
                    let guard = InFlight::enter(&in_flight);
                    let svc = svc.clone();
                    let quic = extended_connect.then(|| handle.clone());
                    crate::engine::runtime::spawn(async move {
                        request(resolver, svc, limits, quic).await;
                        drop(guard);
                    });
                    false
                }
                Step::Accepted(Ok(None)) | Step::Done => break,
                Step::Accepted(Err(e)) => {
                    tracing::debug!(error = %e, "HTTP/3 connection ended");
                    break;
                }
                Step::Drain => {
                    draining = true;
                    true
                }
            }
        };
        // GOAWAY names the first request not served: one past the last accepted (h3
        // counts `max_requests` from the last accepted stream).
        if goaway {
            if let Err(e) = conn.shutdown(1).await {
                tracing::debug!(error = %e, "HTTP/3 GOAWAY not sent");
                break;
            }
        }
    }
    // Dropping h3's connection closes the QUIC one (H3_NO_ERROR); the caller may stop the
    // server next, so wait (briefly) until the close has left.
    drop(conn);
    let sent = crate::engine::time::timeout(CLOSE_GRACE, handle.close_sent()).await;
    if sent.is_err() {
        tracing::debug!("HTTP/3 CONNECTION_CLOSE not sent within {CLOSE_GRACE:?}");
    }
}

/// How long a connection's end waits for its CONNECTION_CLOSE to be sent.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

enum Step<R> {
    Accepted(Result<Option<R>, h3::error::ConnectionError>),
    Drain,
    Done,
}

/// The requests a connection has running, so a graceful shutdown waits for them.
#[derive(Default)]
struct InFlight {
    count: AtomicUsize,
    waiter: WakeSlot,
}

/// One running request; dropping it wakes the connection when it was the last.
struct Entered(Arc<InFlight>);

impl InFlight {
    fn enter(me: &Arc<InFlight>) -> Entered {
        me.count.fetch_add(1, Ordering::AcqRel);
        Entered(me.clone())
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.waiter.wake_waiter();
        }
    }
}

async fn request<S, B>(
    resolver: RequestResolver<QuicConn, Bytes>,
    svc: Arc<Mutex<S>>,
    limits: Limits,
    quic: Option<QuicConn>,
) where
    S: Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let (mut req, stream) = match resolver.resolve_request().await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(error = %e, "HTTP/3 request not read");
            return;
        }
    };
    let (mut send, mut recv) = stream.split();
    if let Some(quic) = quic {
        if !claim_protocol(&quic, &mut req, &mut send, &mut recv) {
            return;
        }
    }
    let length = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let room = Arc::new(WakeSlot::default());
    let (body, sender) =
        Incoming::channel(Waker::from(room.clone()), length, false, limits.body_buffer);
    #[cfg(feature = "tunnel")]
    let tunnel = req.method() == http::Method::CONNECT;
    #[cfg(not(feature = "tunnel"))]
    let tunnel = false;
    let req = req.map(|()| body);
    #[cfg(feature = "tunnel")]
    let req = if tunnel {
        sender.wake_when_reader_gone();
        into_tunnel(req)
    } else {
        req
    };
    // A tunnel's bytes are no request body: no bound on their total.
    let max_body_size = limits.max_body_size.filter(|_| !tunnel);
    // Built in the call and awaited there, not bound first: a binding would keep its own
    // room in this future beside the copy being awaited.
    let served = with_pump(
        async {
            // Errors become BoxErrors at once: the service's own need not be Send.
            let ready = poll_fn(|cx| svc.lock().unwrap().poll_ready(cx).map_err(Into::into)).await;
            let resp: Result<_, BoxError> = match ready {
                Ok(()) => {
                    let fut = svc.lock().unwrap().call(req);
                    fut.await.map_err(Into::into)
                }
                Err(e) => Err(e),
            };
            match resp {
                Ok(resp) => respond(&mut send, resp).await,
                Err(e) => {
                    tracing::error!(error = %e, "the service failed");
                    let mut resp = Response::new(());
                    *resp.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                    match send.send_response(resp).await {
                        Ok(()) => send.finish().await,
                        Err(e) => Err(e),
                    }
                }
            }
        },
        pump(recv, sender, room, max_body_size),
        tunnel,
    )
    .await;
    if let Err(e) = served {
        tracing::debug!(error = %e, "HTTP/3 response not sent");
    }
}

/// Gives `req` the `:protocol` its stream's first frame had (taken out for h3, see
/// `proto::h3`); `false` (the stream reset) if it is malformed: RFC 9220 (RFC 8441 §4)
/// allows it on CONNECT only.
fn claim_protocol<T>(
    quic: &QuicConn,
    req: &mut Request<T>,
    send: &mut RequestStream<SendStream<Bytes>, Bytes>,
    recv: &mut RequestStream<RecvStream, Bytes>,
) -> bool {
    let Some(p) = quic.take_protocol(send.send_id().into_inner()) else {
        return true;
    };
    match crate::http::Protocol::from_token(&p) {
        Some(p) if req.method() == http::Method::CONNECT => {
            req.extensions_mut().insert(p);
            true
        }
        _ => {
            send.stop_stream(Code::H3_MESSAGE_ERROR);
            recv.stop_sending(Code::H3_MESSAGE_ERROR);
            false
        }
    }
}

pin_project_lite::pin_project! {
    /// Runs `serve` to its end with `pump` polled beside it on the same task, first, so
    /// the service finds what the stream already holds. A task of the pump's own cost a
    /// spawn even for a GET, and, run after the response had left, a datagram of its own
    /// for the stream credit that reading the request's end frees. A pump still running
    /// when the response is done is dropped, which stops the stream's unread rest.
    /// A struct, not an async fn: one that pinned its arguments held both futures twice,
    /// and every request's task was copied into place at that size.
    /// A tunnel's input outlives its response (our side half-closed, the peer's still
    /// sending): with `outlives`, the pump runs to its own end (the peer's FIN, or the
    /// tunnel dropping its input).
    struct WithPump<F: Future, P> {
        #[pin]
        serve: F,
        #[pin]
        pump: Option<P>,
        outlives: bool,
        served: Option<F::Output>,
    }
}

fn with_pump<F: Future, P: Future<Output = ()>>(
    serve: F,
    pump: P,
    outlives: bool,
) -> WithPump<F, P> {
    WithPump {
        serve,
        pump: Some(pump),
        outlives,
        served: None,
    }
}

impl<F: Future, P: Future<Output = ()>> Future for WithPump<F, P> {
    type Output = F::Output;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<F::Output> {
        let mut me = self.project();
        if let Some(pump) = me.pump.as_mut().as_pin_mut() {
            if pump.poll(cx).is_ready() {
                me.pump.set(None);
            }
        }
        if me.served.is_none() {
            match me.serve.poll(cx) {
                Poll::Ready(out) if *me.outlives && me.pump.is_some() => *me.served = Some(out),
                other => return other,
            }
        }
        match me.pump.is_some() {
            true => Poll::Pending,
            false => Poll::Ready(me.served.take().expect("served before")),
        }
    }
}

/// Fields that mean something only to HTTP/1.1 (RFC 9114 §4.2 forbids them).
const CONNECTION_SPECIFIC: [header::HeaderName; 4] = [
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::HeaderName::from_static("keep-alive"),
];

fn strip_connection_specific(headers: &mut HeaderMap) {
    for name in &CONNECTION_SPECIFIC {
        headers.remove(name);
    }
}

async fn respond<B>(
    send: &mut RequestStream<SendStream<Bytes>, Bytes>,
    resp: Response<B>,
) -> Result<(), h3::error::StreamError>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    let (mut parts, body) = resp.into_parts();
    strip_connection_specific(&mut parts.headers);
    send.send_response(Response::from_parts(parts, ())).await?;
    let mut body = std::pin::pin!(body);
    loop {
        match next(body.as_mut()).await {
            Next::Data(mut data, _) => {
                let bytes = data.copy_to_bytes(data.remaining());
                if !bytes.is_empty() {
                    send.send_data(bytes).await?;
                }
            }
            Next::Trailers(trailers) => {
                send.send_trailers(trailers).await?;
                break;
            }
            Next::End => break,
            Next::Failed(e) => {
                tracing::debug!(error = %e, "response body failed");
                send.stop_stream(failure_code(&e));
                return Ok(());
            }
        }
    }
    send.finish().await
}

/// The code a failed response body resets its stream with: an aborted tunnel is
/// H3_CONNECT_ERROR (RFC 9114 §4.4), anything else the server's fault.
fn failure_code(e: &BoxError) -> Code {
    #[cfg(feature = "tunnel")]
    if crate::http::pipe::TunnelAborted::caused(&**e) {
        return Code::H3_CONNECT_ERROR;
    }
    let _ = e;
    Code::H3_INTERNAL_ERROR
}

/// A CONNECT's stream is a tunnel (RFC 9114 §4.4; extended, RFC 9220): its input goes to
/// whoever takes it (`fibr::http::tunnel`, `fibr::ws`), and h3's `:protocol` becomes
/// fibr's.
#[cfg(feature = "tunnel")]
fn into_tunnel(mut req: Request<Incoming>) -> Request<Incoming> {
    let input = std::mem::replace(req.body_mut(), Incoming::empty());
    let ext = req.extensions_mut();
    ext.insert(crate::http::switch::Tunnel::new(input));
    if let Some(p) = ext.remove::<h3::ext::Protocol>() {
        if let Some(p) = crate::http::Protocol::new(p.as_str()) {
            ext.insert(p);
        }
    }
    req
}

/// Moves the request body from the stream into the service's `Incoming`, waiting while
/// its buffer is full (so a slow reader holds the client back by QUIC's flow control).
async fn pump(
    mut recv: RequestStream<RecvStream, Bytes>,
    mut sender: crate::http::body::BodySender,
    room: Arc<WakeSlot>,
    max: Option<u64>,
) {
    let mut total = 0u64;
    loop {
        // Reads wait for room in the buffer. A reader that goes ends the pump, also while
        // the stream is quiet (a tunnel dropped while its peer sends nothing: its drop
        // wakes `room`).
        let next = poll_fn(|cx| {
            room.set(cx.waker());
            if sender.reader_gone() {
                return Poll::Ready(None);
            }
            if !sender.has_room() {
                return Poll::Pending;
            }
            recv.poll_recv_data(cx).map(Some)
        })
        .await;
        let Some(next) = next else {
            recv.stop_sending(Code::H3_NO_ERROR);
            return;
        };
        match next {
            Ok(Some(mut data)) => {
                total += data.remaining() as u64;
                if let Some(max) = max.filter(|&m| total > m) {
                    recv.stop_sending(Code::H3_REQUEST_REJECTED);
                    sender.fail(BodyFailure::TooLarge(max));
                    return;
                }
                while data.has_remaining() {
                    let n = data.chunk().len();
                    sender.push(data.chunk());
                    data.advance(n);
                }
            }
            Ok(None) => break,
            Err(e) => {
                tracing::debug!(error = %e, "HTTP/3 request body failed");
                sender.fail(BodyFailure::Incomplete);
                return;
            }
        }
    }
    match recv.recv_trailers().await {
        Ok(trailers) => sender.finish(trailers),
        Err(_) => sender.fail(BodyFailure::Incomplete),
    }
}

/// The body channel's waker: wakes whichever poll of the pump last waited for room.
#[derive(Default)]
struct WakeSlot(Mutex<Option<Waker>>);

impl WakeSlot {
    fn set(&self, w: &Waker) {
        let mut slot = self.0.lock().unwrap();
        if !slot.as_ref().is_some_and(|old| old.will_wake(w)) {
            *slot = Some(w.clone());
        }
    }

    fn wake_waiter(&self) {
        if let Some(w) = self.0.lock().unwrap().take() {
            w.wake();
        }
    }
}

impl Wake for WakeSlot {
    fn wake(self: Arc<Self>) {
        self.wake_waiter()
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.wake_waiter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        body_buffer: 1,
        max_body_size: None,
        max_field_section_size: 1,
    };

    /// A service whose futures are as small as can be: the sizes measured are fibr's.
    fn empty_service() -> impl Service<
        Request<Incoming>,
        Response = Response<http_body_util::Empty<Bytes>>,
        Error = std::convert::Infallible,
        Future = impl Future + Send,
    > + Send
           + Copy {
        tower::service_fn(|_: Request<Incoming>| async {
            Ok::<_, std::convert::Infallible>(Response::new(http_body_util::Empty::<Bytes>::new()))
        })
    }

    /// The size of what `f` returns.
    fn returned_size<A, R>(_f: &impl Fn(A) -> R) -> usize {
        std::mem::size_of::<R>()
    }

    /// A request's task is copied into its allocation at spawn, and a byte copied per
    /// byte of future is CPU per request (2.6% of the server's at 10 streams per
    /// connection). The body pump's runner was an async fn that pinned its arguments,
    /// holding the service's future and the pump twice: 4,856 B, 2,944 B without.
    #[test]
    fn a_request_task_holds_its_service_and_pump_once() {
        let (svc, limits) = (empty_service(), LIMITS);
        let svc = Arc::new(Mutex::new(svc));
        let size = returned_size(&|r: RequestResolver<QuicConn, Bytes>| {
            request(r, svc.clone(), limits, None)
        });
        assert!(size <= 3_200, "a request's future is {size} B");
    }

    /// An idle HTTP/3 connection is parked in `serve_connection`: its future is most of
    /// what fibr adds to quinn-proto's and h3's state per connection (issue 15's idle
    /// memory). It held h3's handshake future besides h3's connection (7.2 KB, not 3),
    /// and room for an accepted request's resolver (368 B).
    #[test]
    fn the_connection_future_holds_little_beyond_h3s_own_state() {
        type Conn = h3::server::Connection<QuicConn, Bytes>;
        let (svc, limits) = (empty_service(), LIMITS);
        let serve = returned_size(&|quic: QuicConn| {
            serve_connection(quic, svc, limits, true, std::future::pending())
        });
        let accept = returned_size(&|conn: &'static mut Conn| conn.accept());
        let h3s_own = std::mem::size_of::<Conn>() + accept;
        assert!(
            serve <= h3s_own + 512,
            "the connection's future is {serve} B; h3's connection and accept are {h3s_own} B"
        );
    }
}
