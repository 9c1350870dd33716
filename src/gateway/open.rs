//! A WebSocket (or another HTTP/1.1 upgrade) opened at an upstream, whatever the upstream
//! speaks, for `tunnel.rs` (a client's HTTP/1.1 `Upgrade`) and `extended.rs` (a client's
//! extended CONNECT over HTTP/2 or HTTP/3) to join to the client's end:
//!
//! - `http://` and `h2c://`: an HTTP/1.1 `Upgrade` over a TCP connection of its own;
//! - `https://`: a WebSocket goes as an extended CONNECT (RFC 8441) through the gateway's
//!   `https` client when the upstream's connection is HTTP/2 and allows it, so many share
//!   one connection; else (ALPN picked HTTP/1.1, or no SETTINGS_ENABLE_CONNECT_PROTOCOL)
//!   and for other upgrades, an HTTP/1.1 `Upgrade` over a TLS connection of its own (ALPN
//!   `http/1.1`);
//! - `h3://`: a WebSocket goes as an extended CONNECT over HTTP/3 (RFC 9220); other
//!   upgrades have no way there (501).
//!
//! The request comes in HTTP/1.1's shape (`GET`, `Upgrade`, `Sec-WebSocket-Key`) and is
//! reshaped for an extended CONNECT (`CONNECT` with `:protocol`, no key). The answer that
//! accepts is a `101` or a `2xx`; [`Accepted::extended`] says which, so the client's side
//! can answer in its own protocol's terms.

use super::config::Speaks;
use super::headers::{add_via, strip_hop_by_hop};
use super::splice::End;
use super::upstreams::InFlight;
use super::{text_response, Failure, GatewayBody, Head, Shared};
use crate::client::ResponseBody;
use crate::dial::{HandshakeIo, HyperIo};
use crate::engine::net::TcpStream;
use crate::http::pipe::{StreamIo, StreamPipe, UpgradeBody};
use crate::proto::h1::client::{encode_request_head, parse_response_head, ResponseLimits};
use crate::proto::h1::framing::BodyFraming;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode, Version};
use std::io;

/// The largest body of a refused upgrade (a `4xx` with a reason) the gateway relays.
const MAX_REFUSAL_BODY: u64 = 64 * 1024;

/// An upgrade an upstream accepted.
pub(super) struct Accepted {
    /// The upstream, counted in flight while the tunnel lasts.
    pub up: InFlight,
    /// The upstream's answer, cleaned (hop-by-hop fields out): a `101`, or an extended
    /// CONNECT's `2xx`; no body.
    pub res: Response<GatewayBody>,
    /// The upstream's end of the tunnel.
    pub io: Box<dyn End>,
    /// What the upstream sent past a `101`'s head: the tunnel's first bytes.
    pub first: Vec<u8>,
    /// Accepted by an extended CONNECT (a `2xx`), not a `101`.
    pub extended: bool,
}

/// What one upstream answered.
enum Answer {
    /// It accepted: its cleaned answer, its end of the tunnel, the first bytes, whether
    /// by extended CONNECT.
    Accepted(Response<GatewayBody>, Box<dyn End>, Vec<u8>, bool),
    /// It refused, with a short body (HTTP/1.1).
    Refused(Response<GatewayBody>),
    /// It refused an extended CONNECT: the response streams from the gateway's client.
    RefusedStream(Response<ResponseBody>),
}

/// How an upgrade goes to an upstream.
#[derive(Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
enum Way {
    /// An HTTP/1.1 `Upgrade` on a connection of its own.
    Upgrade,
    /// An extended CONNECT through the gateway's client for the upstream; with `fallback`,
    /// an HTTP/1.1 `Upgrade` if the connection cannot carry one.
    Extended { fallback: bool },
}

/// Why an attempt on one upstream failed.
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
enum Failed {
    /// No connection (or TLS) to it: another upstream may be tried.
    Connect(io::Error),
    /// It answered nothing usable (a timeout, a malformed answer).
    Exchange(io::Error),
    /// The gateway's client failed (the extended CONNECT's way).
    Client(Failure),
    /// The connection cannot carry an extended CONNECT (HTTP/1.1, or not allowed).
    NoExtended,
}

/// Sends the upgrade request `head` (HTTP/1.1's shape; `Connection: upgrade` is added) to
/// an upstream (another one while connecting fails), and reads its answer. `Err` is the
/// answer for the client: the upstream's refusal with its short body, or the gateway's
/// own when no upstream gave one.
pub(super) async fn open(
    shared: &Shared,
    head: &mut Head,
) -> Result<Accepted, Response<GatewayBody>> {
    head.headers
        .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    let websocket = head
        .headers
        .get(header::UPGRADE)
        .is_some_and(|u| u.as_bytes().eq_ignore_ascii_case(b"websocket"));
    let refuse = |up: &InFlight, status, why: &dyn std::fmt::Display| {
        text_response(
            status,
            &format!("fibr gateway: upstream {}: {why}", up.upstream()),
        )
    };
    let mut tried = Vec::new();
    loop {
        let Some(up) = shared.upstreams.pick(&tried) else {
            unreachable!("a request stops before it has tried every upstream");
        };
        tried.push(up.index());
        let way = match (up.upstream().speaks(), websocket) {
            (Speaks::Http1 | Speaks::H2c, _) => Way::Upgrade,
            #[cfg(feature = "tls")]
            (Speaks::Https, true) => Way::Extended { fallback: true },
            #[cfg(feature = "tls")]
            (Speaks::Https, false) => Way::Upgrade,
            #[cfg(feature = "http3")]
            (Speaks::H3, true) => Way::Extended { fallback: false },
            #[cfg(feature = "http3")]
            (Speaks::H3, false) => {
                let why = "only WebSocket upgrades pass to h3:// upstreams (as RFC 9220's extended CONNECT)";
                return Err(refuse(&up, StatusCode::NOT_IMPLEMENTED, &why));
            }
        };
        let attempt = match way {
            Way::Upgrade => upgrade(shared, &up, head).await,
            Way::Extended { fallback } => match extended(shared, &up, head).await {
                Err(Failed::NoExtended) if fallback => upgrade(shared, &up, head).await,
                other => other,
            },
        };
        let failed = match attempt {
            Ok(answer) => {
                up.succeeded();
                return match answer {
                    Answer::Accepted(res, io, first, extended) => Ok(Accepted {
                        up,
                        res,
                        io,
                        first,
                        extended,
                    }),
                    Answer::Refused(res) => Err(res),
                    Answer::RefusedStream(res) => Err(shared.respond(res, up)),
                };
            }
            Err(f) => f,
        };
        up.failed();
        let again = tried.len() <= shared.config.retries && tried.len() < shared.upstreams.len();
        if again && failed.is_connect() {
            continue;
        }
        return Err(match failed {
            Failed::Connect(e) | Failed::Exchange(e) => refuse(&up, gateway_status(&e), &e),
            Failed::Client(f) => f.answer(up.upstream()),
            Failed::NoExtended => refuse(
                &up,
                StatusCode::BAD_GATEWAY,
                &"its connection does not allow extended CONNECT",
            ),
        });
    }
}

impl Failed {
    /// Nothing reached the upstream: another may take the request.
    fn is_connect(&self) -> bool {
        match self {
            Failed::Connect(_) => true,
            Failed::Client(Failure(e)) => e.is_connect(),
            _ => false,
        }
    }
}

/// What one upstream did with the upgrade, or why it did nothing.
type Attempt = Result<Answer, Failed>;

/// An HTTP/1.1 `Upgrade` over a connection of its own (TLS for `https://`).
async fn upgrade(shared: &Shared, up: &InFlight, head: &Head) -> Attempt {
    let upstream = up.upstream();
    let mut io = connect(shared, upstream).await.map_err(Failed::Connect)?;
    let path = upstream
        .uri(&head.path_and_query)
        .ok()
        .and_then(|u| u.path_and_query().cloned())
        .unwrap_or_else(|| head.path_and_query.clone());
    let mut headers = head.headers.clone();
    if let Ok(host) = HeaderValue::from_str(upstream.authority().as_str()) {
        // HTTP/1.1 wants a Host; the client's is kept only with `preserve_host`.
        headers.entry(header::HOST).or_insert(host);
    }
    let head = Head {
        method: head.method.clone(),
        path_and_query: path,
        headers,
    };
    let exchanging = exchange(shared, HyperIo(&mut io), &head);
    let answered = match shared.config.first_byte_timeout {
        None => exchanging.await,
        Some(t) => crate::engine::time::timeout(t, exchanging)
            .await
            .unwrap_or_else(|_| {
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no response head within {t:?}"),
                ))
            }),
    };
    let (mut res, first) = answered.map_err(Failed::Exchange)?;
    if shared.config.via {
        add_via(res.headers_mut(), Version::HTTP_11);
    }
    if res.status() != StatusCode::SWITCHING_PROTOCOLS {
        return Ok(Answer::Refused(res));
    }
    Ok(Answer::Accepted(res, io, first, false))
}

/// 504 for a timeout, else 502.
fn gateway_status(e: &io::Error) -> StatusCode {
    if e.kind() == io::ErrorKind::TimedOut {
        StatusCode::GATEWAY_TIMEOUT
    } else {
        StatusCode::BAD_GATEWAY
    }
}

/// A connection of its own to `upstream` (TLS with ALPN `http/1.1` for `https://`), within
/// the connect timeout.
async fn connect(shared: &Shared, upstream: &super::Upstream) -> io::Result<Box<dyn End>> {
    let connecting = async {
        let stream = TcpStream::connect(upstream.authority().as_str()).await?;
        stream.set_nodelay(true)?;
        #[cfg(feature = "tls")]
        if upstream.speaks().is_tls() {
            let host = upstream.authority().host();
            let tls = crate::client::tls_handshake(stream, host, shared.upgrade_tls.clone())
                .await
                .map_err(io::Error::other)?;
            return Ok(Box::new(tls) as Box<dyn End>);
        }
        Ok(Box::new(stream) as Box<dyn End>)
    };
    match shared.config.connect_timeout {
        None => connecting.await,
        Some(t) => crate::engine::time::timeout(t, connecting)
            .await
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("connect timed out after {t:?}"),
                )
            })?,
    }
}

/// Writes the request head, reads the response head (and a refusal's short body).
/// Returns the response and the bytes read past a `101`'s head (the tunnel's first).
async fn exchange(
    shared: &Shared,
    mut stream: impl HandshakeIo,
    head: &Head,
) -> io::Result<(Response<GatewayBody>, Vec<u8>)> {
    let mut out = Vec::new();
    encode_request_head(
        &head.method,
        head.path_and_query.as_str(),
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
        read_more(&mut stream, &mut buf).await?;
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
        read_more(&mut stream, &mut rest).await?;
    }
    rest.truncate(len as usize);
    *res.body_mut() = GatewayBody::text(rest);
    Ok((res, Vec::new()))
}

/// Appends what the upstream sends next; its end before the head is an error.
async fn read_more(stream: &mut impl HandshakeIo, buf: &mut Vec<u8>) -> io::Result<()> {
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

/// An extended CONNECT (`:protocol: websocket`) through the gateway's client for the
/// upstream (HTTP/2 over TLS, or HTTP/3): its request body the tunnel's output, its
/// response body the input.
async fn extended(shared: &Shared, up: &InFlight, head: &Head) -> Attempt {
    let output = StreamIo::new(shared.config.tunnel_buffer.max(1024));
    let mut req = Request::new(UpgradeBody::stream(output.clone(), None));
    *req.method_mut() = Method::CONNECT;
    *req.headers_mut() = head.headers.clone();
    for name in [
        header::CONNECTION,
        header::UPGRADE,
        header::SEC_WEBSOCKET_KEY,
    ] {
        req.headers_mut().remove(name);
    }
    let protocol = crate::http::Protocol::new("websocket").expect("a token");
    req.extensions_mut().insert(protocol);
    if let Err(f) = shared.set_uri(up, &head.path_and_query, &mut req) {
        return Err(Failed::Client(f));
    }
    let res = match shared.send(up, req).await {
        Err(Failure(e)) if e.is_no_extended_connect() => return Err(Failed::NoExtended),
        Err(f) => return Err(Failed::Client(f)),
        Ok(res) => res,
    };
    if !res.status().is_success() {
        return Ok(Answer::RefusedStream(res));
    }
    let (mut parts, body) = res.into_parts();
    shared.clean(&mut parts);
    let res = Response::from_parts(parts, GatewayBody::text(""));
    let io = Box::new(StreamPipe::new(body, output));
    Ok(Answer::Accepted(res, io, Vec::new(), true))
}
