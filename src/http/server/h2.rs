//! The HTTP/2 server driver: joins the sans-IO machine (`h2::server::ServerConn`) to a
//! fibr connection and a tower service.
//!
//! `Server` (in `mod.rs`) owns the connection's callbacks; a connection that opened with
//! the HTTP/2 preface (h2c) or chose `h2` by ALPN keeps an [`H2State`] as its context
//! instead of HTTP/1's, and each callback comes here. A round feeds the machine the bytes
//! read (it dispatches every request in them: the service is called and its future polled
//! once, right there), then polls every stream's future and body and writes what is
//! ready through the stream's writer, within both flow-control windows, into the round's
//! one output. A stream whose window is closed keeps its unsent bytes until a
//! WINDOW_UPDATE arrives (which runs a round); one whose output is over
//! `response_buffer` waits for `on_drained`.

use super::exchange::{call_service, poll_call, ConnTls, Stage};
use super::round::{arm_timer, round_clock, with_round_output};
use crate::engine::conn::Conn;
use crate::engine::time::Sleep;
use crate::http::body::{BodySender, Incoming};
use crate::http::config::ServerConfig;
use crate::http::pump::{pump, Pumped, Room, Sink};
use crate::http::service::BoxError;
use crate::proto::h1::framing::BodyFraming;
use crate::proto::h1::parse::{parse_request_head, Limits, RequestHead as H1RequestHead};
use crate::proto::h2::config::ServerLimits;
use crate::proto::h2::frame::ErrorCode;
use crate::proto::h2::server::{Dispatch, NewBody, RequestHead, ServerConn, StreamWriter};
use http::{HeaderValue, Request, Response, Version};
use http_body::Body;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::{Duration, Instant};
use tower_service::Service;

/// One stream's progress on the driver's side.
pub(super) struct Exchange<F, B: Body> {
    stage: Stage<F, B>,
    /// Body bytes the windows did not let out yet.
    unsent: Option<(B::Data, bool)>,
    /// A gRPC call's `grpc-timeout`: past it, the call is dropped and answered with
    /// DEADLINE_EXCEEDED (tonic's own transport does this; its `Routes` does not).
    deadline: Option<Instant>,
}

type Machine<S, B> = ServerConn<BodySender, Exchange<<S as Service<Request<Incoming>>>::Future, B>>;

/// An HTTP/2 connection's state, kept as the connection's context.
pub(super) struct H2State<S: Service<Request<Incoming>>, B: Body> {
    svc: S,
    waker: Waker,
    h2: Machine<S, B>,
    timer: Option<Sleep>,
    tls: ConnTls,
}

/// The service side of the machine's [`Dispatch`], for one callback.
struct Calls<'a, S> {
    svc: &'a mut S,
    waker: &'a Waker,
    cfg: &'a ServerConfig,
    tls: &'a ConnTls,
}

impl<S, B> Dispatch for Calls<'_, S>
where
    S: Service<Request<Incoming>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    B: Body,
{
    type Exchange = Exchange<S::Future, B>;
    type Body = BodySender;

    fn dispatch(
        &mut self,
        _stream: u32,
        head: RequestHead,
        body: Option<NewBody>,
    ) -> (Self::Exchange, Option<BodySender>) {
        let (incoming, sender) = match body {
            None => (Incoming::empty(), None),
            Some(b) => {
                let window = self.cfg.http2.initial_stream_window as usize;
                let (incoming, sender) =
                    Incoming::stream_channel(self.waker.clone(), b.length, window);
                (incoming, Some(sender))
            }
        };
        let deadline = grpc_timeout(&head.headers).map(|t| round_clock().now + t);
        let mut req = Request::new(incoming);
        // A CONNECT's stream is a tunnel (RFC 9113 §8.5; extended, RFC 8441): its input
        // goes to whoever takes it (`fibr::http::tunnel`, `fibr::ws`).
        #[cfg(feature = "tunnel")]
        if head.method == http::Method::CONNECT {
            let input = std::mem::replace(req.body_mut(), Incoming::empty());
            req.extensions_mut()
                .insert(crate::http::switch::Tunnel::new(input));
        }
        if let Some(protocol) = head.protocol {
            req.extensions_mut().insert(protocol);
        }
        *req.method_mut() = head.method;
        *req.uri_mut() = head.uri;
        *req.version_mut() = Version::HTTP_2;
        *req.headers_mut() = head.headers;
        self.tls.extend(&mut req);
        let stage = call_service(self.svc, self.waker, req, true).unwrap_or_else(Stage::Waiting);
        let exchange = Exchange {
            stage,
            unsent: None,
            deadline,
        };
        (exchange, sender)
    }
}

impl<S, B> H2State<S, B>
where
    S: Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    /// Takes over a connection whose first bytes are `data` (the preface, for h2c) or
    /// that chose `h2` by ALPN (`data` empty), and runs its first round.
    pub(super) fn start(
        conn: &Conn,
        svc: S,
        tls: ConnTls,
        cfg: &ServerConfig,
        limits: &ServerLimits,
        data: &[u8],
    ) {
        with_round_output(|out| {
            let state: H2State<S, B> = H2State {
                svc,
                waker: conn.waker(),
                h2: ServerConn::new(Instant::now(), limits, out),
                timer: None,
                tls,
            };
            conn.set_context(state);
            with_h2::<S, B, _>(conn, |st| {
                st.receive(data, cfg, limits, out);
                st.drive(conn, cfg, limits, out);
            });
        });
    }

    /// Takes over a connection whose HTTP/1.1 request asked for h2c (`Upgrade: h2c`):
    /// `101 Switching Protocols`, our SETTINGS, the request answered as stream 1, then
    /// the bytes after it (the client's preface).
    pub(super) fn start_upgraded(
        conn: &Conn,
        svc: S,
        tls: ConnTls,
        cfg: &ServerConfig,
        limits: &ServerLimits,
        up: H2cUpgrade,
    ) {
        with_round_output(|out| {
            out.extend_from_slice(
                b"HTTP/1.1 101 Switching Protocols\r\nconnection: Upgrade\r\nupgrade: h2c\r\n\r\n",
            );
            let state: H2State<S, B> = H2State {
                svc,
                waker: conn.waker(),
                h2: ServerConn::new(Instant::now(), limits, out),
                timer: None,
                tls,
            };
            conn.set_context(state);
            with_h2::<S, B, _>(conn, |st| {
                let mut calls = Calls {
                    svc: &mut st.svc,
                    waker: &st.waker,
                    cfg,
                    tls: &st.tls,
                };
                st.h2.accept_upgrade(&up.settings, up.head, &mut calls, out);
                st.receive(&up.rest, cfg, limits, out);
                st.drive(conn, cfg, limits, out);
            });
        });
    }

    /// One round: the bytes read (none for a wake-up), then everything that is ready.
    pub(super) fn round(
        &mut self,
        conn: &Conn,
        data: &[u8],
        cfg: &ServerConfig,
        limits: &ServerLimits,
        draining: bool,
    ) {
        with_round_output(|out| {
            if draining {
                self.h2.drain(out);
            }
            self.receive(data, cfg, limits, out);
            self.drive(conn, cfg, limits, out);
        });
    }

    /// The client finished sending.
    pub(super) fn peer_closed(&mut self, conn: &Conn, cfg: &ServerConfig, limits: &ServerLimits) {
        self.h2.peer_closed();
        with_round_output(|out| self.drive(conn, cfg, limits, out));
    }

    fn receive(
        &mut self,
        data: &[u8],
        cfg: &ServerConfig,
        limits: &ServerLimits,
        out: &mut Vec<u8>,
    ) {
        if data.is_empty() {
            return;
        }
        let mut calls = Calls {
            svc: &mut self.svc,
            waker: &self.waker,
            cfg,
            tls: &self.tls,
        };
        self.h2
            .receive(round_clock(), data, limits, &mut calls, out);
    }

    /// Polls every stream, writes what is ready, sends the round's output and applies the
    /// machine's actions.
    fn drive(&mut self, conn: &Conn, cfg: &ServerConfig, limits: &ServerLimits, out: &mut Vec<u8>) {
        let clock = round_clock();
        let mut cx = Context::from_waker(&self.waker);
        let svc = &mut self.svc;
        let waker = &self.waker;
        let mut next_deadline: Option<Instant> = None;
        self.h2.each_stream(clock, out, |x, w| {
            if let Stage::Waiting(_) = x.stage {
                let Stage::Waiting(req) = std::mem::replace(&mut x.stage, Stage::Moving) else {
                    unreachable!("matched above")
                };
                x.stage = call_service(svc, waker, *req, true).unwrap_or_else(Stage::Waiting);
            }
            progress(x, w, conn, &mut cx, cfg);
            if let Some(at) = x.deadline.filter(|_| w.awaits_head()) {
                if clock.now >= at {
                    x.stage = Stage::Moving;
                    respond_deadline_exceeded(w);
                } else {
                    next_deadline = Some(next_deadline.map_or(at, |d| d.min(at)));
                }
            }
        });
        let mut actions = self.h2.end_round(clock, limits, out);
        if let Some(at) = next_deadline {
            actions.deadline = Some(actions.deadline.map_or(at, |d| d.min(at)));
        }
        if !out.is_empty() {
            let _ = conn.send(out);
            out.clear();
        }
        if actions.close {
            conn.close();
            return;
        }
        arm_timer(&mut self.timer, actions.deadline, &self.waker);
    }
}

/// Moves one stream's exchange on as far as it goes now: the call, the head, the body.
fn progress<F, B, E>(
    x: &mut Exchange<F, B>,
    w: &mut StreamWriter<'_, BodySender>,
    conn: &Conn,
    cx: &mut Context<'_>,
    cfg: &ServerConfig,
) where
    F: std::future::Future<Output = Result<Response<B>, E>>,
    E: Into<BoxError>,
    B: Body,
    B::Error: Into<BoxError>,
{
    loop {
        match std::mem::replace(&mut x.stage, Stage::Moving) {
            Stage::Calling(fut) => {
                x.stage = poll_call(fut, cx);
                if let Stage::Calling(_) = x.stage {
                    return;
                }
            }
            Stage::Ready(resp) => {
                let (mut parts, body) = resp.into_parts();
                cfg.advertise(&mut parts.headers);
                let exact = body.size_hint().exact();
                if w.respond(&mut parts, exact) {
                    x.stage = Stage::Streaming(Box::pin(body));
                }
                // Otherwise the body is dropped: the stream is done.
            }
            Stage::Failed { status, close: _ } => {
                let mut parts = Response::new(()).into_parts().0;
                parts.status = status;
                w.respond(&mut parts, Some(0));
                return;
            }
            Stage::Streaming(body) => {
                if let Some(body) = stream_body(x, body, w, conn, cx, cfg) {
                    x.stage = Stage::Streaming(body);
                }
                return;
            }
            waiting => {
                x.stage = waiting;
                return;
            }
        }
    }
}

/// Writes what a response body has ready, within the windows and the output bound;
/// gives the body back while it has more to send.
fn stream_body<F, B>(
    x: &mut Exchange<F, B>,
    mut body: Pin<Box<B>>,
    w: &mut StreamWriter<'_, BodySender>,
    conn: &Conn,
    cx: &mut Context<'_>,
    cfg: &ServerConfig,
) -> Option<Pin<Box<B>>>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    let mut sink = H2Body {
        w,
        unsent: &mut x.unsent,
        conn,
        limit: cfg.response_buffer,
    };
    match pump(body.as_mut(), cx, &mut sink) {
        Pumped::Waiting => Some(body),
        Pumped::Done => None,
    }
}

/// A response body's way into DATA frames: within both windows (a WINDOW_UPDATE runs
/// the next round) and the connection's output bound (`on_drained` does).
struct H2Body<'a, 'w, D> {
    w: &'a mut StreamWriter<'w, BodySender>,
    /// What the windows did not let out yet, and whether it ends the body.
    unsent: &'a mut Option<(D, bool)>,
    conn: &'a Conn,
    limit: usize,
}

impl<D: bytes::Buf> Sink<D> for H2Body<'_, '_, D> {
    fn ready(&mut self) -> Room {
        if let Some((mut data, last)) = self.unsent.take() {
            if !self.w.send_data(&mut data, last) {
                *self.unsent = Some((data, last));
                return Room::Wait;
            }
            if last {
                return Room::Finished;
            }
        }
        if self.w.window() == 0 {
            self.w.wait_for_window();
            return Room::Wait;
        }
        if self.conn.queued_bytes() >= self.limit {
            self.conn.wake_when_drained();
            return Room::Wait;
        }
        Room::Go
    }

    fn data(&mut self, mut data: D, last: bool) -> bool {
        // The last piece carries END_STREAM itself (no empty DATA after it).
        if self.w.send_data(&mut data, last) {
            return true;
        }
        *self.unsent = Some((data, last));
        false
    }

    fn trailers(&mut self, trailers: http::HeaderMap) {
        self.w.finish(Some(&trailers));
    }

    fn end(&mut self) {
        self.w.finish(None);
    }

    fn failed(&mut self, err: BoxError) {
        // An aborted tunnel is CONNECT_ERROR (RFC 9113 §8.5), not a server fault.
        #[cfg(feature = "tunnel")]
        if crate::http::pipe::TunnelAborted::caused(&*err) {
            return self.w.reset(ErrorCode::CONNECT_ERROR);
        }
        tracing::warn!(error = %err, stream = self.w.id(), "a response body failed; resetting the stream");
        self.w.reset(ErrorCode::INTERNAL_ERROR);
    }
}

/// An HTTP/1.1 request asking to switch to h2c (RFC 7540 §3.2), ready to be served as
/// stream 1.
pub(super) struct H2cUpgrade {
    head: RequestHead,
    /// The client's SETTINGS payload, from `HTTP2-Settings`.
    settings: Vec<u8>,
    /// What came after the request (the preface, maybe more).
    rest: Vec<u8>,
}

impl H2cUpgrade {
    /// The upgrade in `prefix` (the request and everything after it), if it is an h2c
    /// upgrade this server takes.
    pub(super) fn parse(prefix: &[u8], cfg: &ServerConfig) -> Option<H2cUpgrade> {
        if !cfg.http2.h2c {
            return None;
        }
        let limits = Limits {
            max_head_bytes: cfg.max_head_bytes,
            max_headers: cfg.max_headers,
            max_uri_len: cfg.max_uri_len,
        };
        let (h1, used) = parse_request_head(prefix, &limits).ok()??;
        let settings = h2c_upgrade(&h1)?;
        let mut headers = h1.headers;
        for name in [
            "connection",
            "upgrade",
            "http2-settings",
            "keep-alive",
            "te",
        ] {
            headers.remove(name);
        }
        let head = RequestHead {
            method: h1.method,
            uri: h1.uri,
            headers,
            content_length: None,
            protocol: None,
        };
        Some(H2cUpgrade {
            head,
            settings,
            rest: prefix[used..].to_vec(),
        })
    }
}

/// The decoded `HTTP2-Settings` of a request that asks for h2c: `Upgrade: h2c`, the
/// `HTTP2-Settings` connection option and field, and no body (a body would have to be
/// read before switching; such a request is answered over HTTP/1.1).
pub(super) fn h2c_upgrade(head: &H1RequestHead) -> Option<Vec<u8>> {
    let has_token = |name: http::header::HeaderName, token: &str| {
        head.headers.get_all(name).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    let no_body = matches!(head.framing, BodyFraming::Empty | BodyFraming::Length(0));
    if !no_body
        || !has_token(http::header::UPGRADE, "h2c")
        || !has_token(http::header::CONNECTION, "http2-settings")
    {
        return None;
    }
    let mut values = head.headers.get_all("http2-settings").iter();
    let (Some(v), None) = (values.next(), values.next()) else {
        return None;
    };
    base64url_decode(v.as_bytes())
}

/// Base64url without padding (RFC 4648 §5), as `HTTP2-Settings` is written.
fn base64url_decode(s: &[u8]) -> Option<Vec<u8>> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'-' => Some(62),
        b'_' => Some(63),
        _ => None,
    };
    let s = s.strip_suffix(b"==").or(s.strip_suffix(b"=")).unwrap_or(s);
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for &c in s {
        acc = ((acc << 6) | u32::from(value(c)?)) & 0xffff;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// A gRPC request's `grpc-timeout` (at most 8 digits and a unit, H M S m u n).
fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    let v = headers.get("grpc-timeout")?.as_bytes();
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b"H" => Duration::from_secs(n * 3600),
        b"M" => Duration::from_secs(n * 60),
        b"S" => Duration::from_secs(n),
        b"m" => Duration::from_millis(n),
        b"u" => Duration::from_micros(n),
        b"n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The trailers-only gRPC answer to a call past its `grpc-timeout` (status 4).
fn respond_deadline_exceeded(w: &mut StreamWriter<'_, BodySender>) {
    let mut parts = Response::new(()).into_parts().0;
    let h = &mut parts.headers;
    h.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    h.insert("grpc-status", HeaderValue::from_static("4"));
    h.insert(
        "grpc-message",
        HeaderValue::from_static("Timeout%20expired"),
    );
    w.respond(&mut parts, Some(0));
}

/// Runs `f` on the connection's HTTP/2 state (none if it has none).
pub(super) fn with_h2<S, B, R>(conn: &Conn, f: impl FnOnce(&mut H2State<S, B>) -> R) -> Option<R>
where
    S: Service<Request<Incoming>> + Send + 'static,
    S::Future: Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
{
    conn.with_context::<H2State<S, B>, _>(|st| st.map(f))
}
