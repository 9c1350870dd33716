//! HTTP/1.1 `Upgrade` (WebSocket) pass-through: the request goes to an upstream over a
//! connection of its own, and on the upstream's `101` the client's connection and the
//! upstream's become one byte tunnel. The client's connection comes from hyper's
//! `upgrade::on` (plaintext, hyper serving) or, with feature `tunnel`, from the
//! `OnSwitch` fibr's own HTTP/1.1 puts on the request (TLS, or no hyper).

use super::headers::{add_via, strip_hop_by_hop};
use super::idle::Idle;
use super::upstreams::InFlight;
use super::{text_response, GatewayBody, Head, Shared};
use crate::engine::net::TcpStream;
use crate::proto::h1::client::{encode_request_head, parse_response_head, ResponseLimits};
use crate::proto::h1::framing::BodyFraming;
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode, Version};
use hyper::rt::{Read as _, Write as _};
use hyper::upgrade::{OnUpgrade, Upgraded};
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// The largest body of a refused upgrade (a `4xx` with a reason) the gateway relays.
const MAX_REFUSAL_BODY: u64 = 64 * 1024;

/// Whether `req` asks to switch protocols (`Connection: upgrade` and an `Upgrade`).
pub(super) fn is_upgrade<B>(req: &Request<B>) -> bool {
    req.version() == Version::HTTP_11
        && req.headers().contains_key(header::UPGRADE)
        && req
            .headers()
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
}

/// Passes the upgrade request to an upstream; a `101` starts the tunnel.
pub(super) async fn forward<B>(shared: &Shared, mut req: Request<B>) -> Response<GatewayBody> {
    let Some(client_side) = ClientSide::of(&mut req) else {
        return text_response(
            StatusCode::NOT_IMPLEMENTED,
            "fibr gateway: this connection cannot switch protocols (fibr's HTTP/1.1 over TLS needs feature `tunnel`)",
        );
    };
    let protocol = req.headers().get(header::UPGRADE).cloned();
    let (parts, _) = req.into_parts();
    let mut head = shared.head_of(parts);
    if let Some(p) = protocol {
        head.headers.insert(header::UPGRADE, p);
    }
    let opened = match open(shared, &mut head).await {
        Ok(o) => o,
        Err(refused) => return refused,
    };
    let Opened {
        up,
        stream,
        res,
        rest,
    } = opened;
    if res.status() == StatusCode::SWITCHING_PROTOCOLS {
        let buffer = shared.config.tunnel_buffer.max(1024);
        let idle = shared.config.tunnel_idle_timeout.map(Idle::new);
        let join = move |client| async move {
            let _in_flight = up;
            splice(client, stream, rest, buffer, idle).await;
        };
        match client_side {
            ClientSide::Hyper(on) => drop(crate::engine::runtime::spawn(async move {
                match on.await {
                    Ok(client) => join(Side::Hyper(client)).await,
                    Err(e) => tracing::debug!(error = %e, "the client's upgrade failed"),
                }
            })),
            // Runs once the `101` is written (never, and `up` is let go, if it is not).
            #[cfg(feature = "tunnel")]
            ClientSide::Switch(switch) => switch.claim(Box::new(move |sw| {
                let client = Side::Switched(crate::http::tunnel::Tunnel::switched(sw, buffer));
                drop(crate::engine::runtime::spawn(join(client)));
            })),
        }
    }
    res
}

/// Where the client's connection comes from once the `101` is written.
enum ClientSide {
    Hyper(OnUpgrade),
    #[cfg(feature = "tunnel")]
    Switch(crate::http::switch::OnSwitch),
}

impl ClientSide {
    fn of<B>(req: &mut Request<B>) -> Option<ClientSide> {
        let ext = req.extensions_mut();
        if let Some(on) = ext.remove::<OnUpgrade>() {
            return Some(ClientSide::Hyper(on));
        }
        #[cfg(feature = "tunnel")]
        if let Some(switch) = ext.remove::<crate::http::switch::OnSwitch>() {
            return Some(ClientSide::Switch(switch));
        }
        None
    }
}

/// An upgrade request sent upstream, and what came back.
pub(super) struct Opened {
    /// The upstream, counted in flight while the tunnel lasts.
    pub up: InFlight,
    pub stream: TcpStream,
    /// The upstream's answer, cleaned: a `101`, or a refusal with its short body.
    pub res: Response<GatewayBody>,
    /// What the upstream sent past a `101`'s head: the tunnel's first bytes.
    pub rest: Vec<u8>,
}

/// Sends `head` (with `Connection: upgrade` added) over a new connection to an upstream
/// (another one while connecting fails), and reads its answer; or the gateway's own
/// answer when no upstream gave one.
pub(super) async fn open(
    shared: &Shared,
    head: &mut Head,
) -> Result<Opened, Response<GatewayBody>> {
    head.headers
        .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    let refuse = |up: &InFlight, status, why: &dyn std::fmt::Display| {
        text_response(
            status,
            &format!("fibr gateway: upstream {}: {why}", up.upstream()),
        )
    };
    let mut tried = Vec::new();
    let (up, stream) = loop {
        let Some(up) = shared.upstreams.pick(&tried) else {
            unreachable!("a request stops before it has tried every upstream");
        };
        tried.push(up.index());
        if up.upstream().speaks().is_tls() {
            let why = "upgrades pass to http:// and h2c:// upstreams only";
            return Err(refuse(&up, StatusCode::NOT_IMPLEMENTED, &why));
        }
        match connect(shared, up.upstream().authority().as_str()).await {
            Ok(s) => break (up, s),
            Err(e) => {
                up.failed();
                let again =
                    tried.len() <= shared.config.retries && tried.len() < shared.upstreams.len();
                if !again {
                    return Err(refuse(&up, gateway_status(&e), &e));
                }
            }
        }
    };
    let answered = match shared.config.first_byte_timeout {
        None => exchange(shared, &stream, head).await,
        Some(t) => crate::engine::time::timeout(t, exchange(shared, &stream, head))
            .await
            .unwrap_or_else(|_| {
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no response head within {t:?}"),
                ))
            }),
    };
    let (mut res, rest) = match answered {
        Ok(r) => r,
        Err(e) => {
            up.failed();
            return Err(refuse(&up, gateway_status(&e), &e));
        }
    };
    up.succeeded();
    if shared.config.via {
        add_via(res.headers_mut(), Version::HTTP_11);
    }
    Ok(Opened {
        up,
        stream,
        res,
        rest,
    })
}

/// 504 for a timeout, else 502.
fn gateway_status(e: &io::Error) -> StatusCode {
    if e.kind() == io::ErrorKind::TimedOut {
        StatusCode::GATEWAY_TIMEOUT
    } else {
        StatusCode::BAD_GATEWAY
    }
}

async fn connect(shared: &Shared, authority: &str) -> io::Result<TcpStream> {
    let connecting = TcpStream::connect(authority);
    let stream = match shared.config.connect_timeout {
        None => connecting.await?,
        Some(t) => crate::engine::time::timeout(t, connecting)
            .await
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("connect timed out after {t:?}"),
                )
            })??,
    };
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Writes the request head, reads the response head (and a refusal's short body).
/// Returns the response and the bytes read past a `101`'s head (the tunnel's first).
async fn exchange(
    shared: &Shared,
    stream: &TcpStream,
    head: &Head,
) -> io::Result<(Response<GatewayBody>, Vec<u8>)> {
    let mut out = Vec::new();
    encode_request_head(
        &head.method,
        &head.path_and_query,
        Version::HTTP_11,
        &head.headers,
        BodyFraming::Empty,
        false,
        &mut out,
    );
    stream.write_all(&out).await?;
    let limits = ResponseLimits {
        max_head_bytes: shared.config.max_response_head,
        ..ResponseLimits::default()
    };
    let mut buf = Vec::new();
    let (parsed, used) = loop {
        if let Some(p) = parse_response_head(&buf, &head.method, &limits)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?
        {
            // Skip interim responses other than the `101` itself.
            if p.0.status.is_informational() && p.0.status != StatusCode::SWITCHING_PROTOCOLS {
                buf.drain(..p.1);
                continue;
            }
            break p;
        }
        read_more(stream, &mut buf).await?;
    };
    let mut rest = buf.split_off(used);
    let mut res = Response::new(GatewayBody::text(""));
    *res.status_mut() = parsed.status;
    let switching = parsed.status == StatusCode::SWITCHING_PROTOCOLS;
    let upgrade = parsed.headers.get(header::UPGRADE).cloned();
    *res.headers_mut() = parsed.headers;
    strip_hop_by_hop(res.headers_mut());
    if switching {
        let headers = res.headers_mut();
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        if let Some(u) = upgrade {
            headers.insert(header::UPGRADE, u);
        }
        return Ok((res, rest));
    }
    // A refusal: its body, if short and delimited by a length.
    let len = match parsed.framing {
        BodyFraming::Empty => 0,
        BodyFraming::Length(n) if n <= MAX_REFUSAL_BODY => n,
        _ => {
            return Err(io::Error::other(
                "refused the upgrade with a body the gateway does not relay (chunked, unbounded or too long)",
            ))
        }
    };
    while (rest.len() as u64) < len {
        read_more(stream, &mut rest).await?;
    }
    rest.truncate(len as usize);
    *res.body_mut() = GatewayBody::text(rest);
    Ok((res, Vec::new()))
}

/// Appends what the upstream sends next; its end before the head is an error.
async fn read_more(stream: &TcpStream, buf: &mut Vec<u8>) -> io::Result<()> {
    let mut chunk = [0u8; 4096];
    match stream.read(&mut chunk).await? {
        0 => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the upstream closed before its response was complete",
        )),
        n => {
            buf.extend_from_slice(&chunk[..n]);
            Ok(())
        }
    }
}

/// Moves bytes both ways until both sides have ended, one fails, or nothing moves for
/// the idle timeout; `first` goes to the client before anything else. An end of one side
/// is passed on as a shutdown of the other's writing, so each side's close handshake gets
/// through.
async fn splice(
    mut client: Side,
    upstream: TcpStream,
    first: Vec<u8>,
    buffer: usize,
    mut idle: Option<Idle>,
) {
    let mut upstream = Side::Upstream(upstream);
    let mut up = Pipe::new(buffer, &[]);
    let mut down = Pipe::new(buffer, &first);
    let result = poll_fn(|cx| {
        let moved = up.moved + down.moved;
        let a = up.poll(cx, &mut client, &mut upstream);
        let b = down.poll(cx, &mut upstream, &mut client);
        match (a, b) {
            (Poll::Ready(Err(e)), _) | (_, Poll::Ready(Err(e))) => Poll::Ready(Err(e)),
            (Poll::Ready(Ok(())), Poll::Ready(Ok(()))) => Poll::Ready(Ok(())),
            _ => {
                let Some(idle) = &mut idle else {
                    return Poll::Pending;
                };
                if up.moved + down.moved != moved {
                    idle.touch();
                }
                if !idle.expired(cx) {
                    return Poll::Pending;
                }
                let quiet = io::Error::new(io::ErrorKind::TimedOut, idle.error());
                Poll::Ready(Err(quiet))
            }
        }
    })
    .await;
    if let Err(e) = result {
        tracing::debug!(error = %e, "upgraded tunnel ended with an error");
    }
}

/// One end of the tunnel.
enum Side {
    /// The client's connection, from hyper.
    Hyper(Upgraded),
    /// The client's connection, from fibr's own HTTP/1.1.
    #[cfg(feature = "tunnel")]
    Switched(crate::http::tunnel::Tunnel),
    Upstream(TcpStream),
}

impl Side {
    fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        match self {
            Side::Upstream(s) => s.poll_read(cx, buf),
            #[cfg(feature = "tunnel")]
            Side::Switched(t) => t.poll_read(cx, buf),
            Side::Hyper(u) => {
                let mut rb = hyper::rt::ReadBuf::new(buf);
                ready!(Pin::new(u).poll_read(cx, rb.unfilled()))?;
                Poll::Ready(Ok(rb.filled().len()))
            }
        }
    }

    /// Writes and flushes (part of) `buf`.
    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self {
            Side::Upstream(s) => s.poll_write(cx, buf),
            #[cfg(feature = "tunnel")]
            Side::Switched(t) => t.poll_write(cx, buf),
            Side::Hyper(u) => {
                let n = ready!(Pin::new(&mut *u).poll_write(cx, buf))?;
                // hyper's upgraded stream may hold bytes back until flushed.
                let _ = Pin::new(u).poll_flush(cx)?;
                Poll::Ready(Ok(n))
            }
        }
    }

    fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Side::Upstream(s) => s.poll_shutdown(cx),
            #[cfg(feature = "tunnel")]
            Side::Switched(t) => t.poll_shutdown(),
            Side::Hyper(u) => Pin::new(u).poll_shutdown(cx),
        }
    }
}

/// One direction of the tunnel: what was read and not yet written (at most `buffer`
/// bytes, so a slow reader holds the other side's reads).
struct Pipe {
    buf: Box<[u8]>,
    /// Bytes read so far (the idle timer's progress).
    moved: u64,
    start: usize,
    end: usize,
    eof: bool,
    done: bool,
}

impl Pipe {
    fn new(buffer: usize, first: &[u8]) -> Pipe {
        let mut buf = vec![0; buffer.max(first.len())].into_boxed_slice();
        buf[..first.len()].copy_from_slice(first);
        Pipe {
            buf,
            moved: 0,
            start: 0,
            end: first.len(),
            eof: false,
            done: false,
        }
    }

    /// Moves bytes from `from` to `to` until it has to wait; ready once `from` has ended,
    /// everything is written and `to` is shut down.
    fn poll(
        &mut self,
        cx: &mut Context<'_>,
        from: &mut Side,
        to: &mut Side,
    ) -> Poll<io::Result<()>> {
        loop {
            if self.done {
                return Poll::Ready(Ok(()));
            }
            if self.start < self.end {
                let n = ready!(to.poll_write(cx, &self.buf[self.start..self.end]))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                self.start += n;
                if self.start == self.end {
                    (self.start, self.end) = (0, 0);
                }
            } else if self.eof {
                ready!(to.poll_shutdown(cx))?;
                self.done = true;
            } else {
                match ready!(from.poll_read(cx, &mut self.buf))? {
                    0 => self.eof = true,
                    n => {
                        self.end = n;
                        self.moved += n as u64;
                    }
                }
            }
        }
    }
}
