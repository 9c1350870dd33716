//! arpc ([github.com/lesismal/arpc](https://github.com/lesismal/arpc)) on fibr's loops:
//! two-way calls, notifies and broadcasts over one TCP connection, byte-compatible with Go's
//! arpc, so a fibr service joins Go services that speak it.
//!
//! A [`Server`] is a connection handler: bind it (`Binding::tcp(addr, server)`) or route a
//! `Mux` to it. A [`Client`] dials a server and dials again with backoff when the
//! connection is lost. Both serve a [`Router`] (handlers by method name, async functions of
//! a [`Context`]) and call the other side through a [`Peer`]: [`Peer::call`] with a
//! timeout, [`Peer::call_async`] with a callback, [`Peer::notify`]. Bodies are bytes; a
//! [`Codec`] turns values into them ([`Raw`], or [`Json`] as Go's default codec does).
//!
//! ```no_run
//! use fibr::arpc::{Json, Router, Server};
//! use fibr::{Binding, Config, Engine};
//!
//! let router = Router::new()
//!     .route("/echo", |ctx| async move { ctx.reply(ctx.body()) })
//!     .route("/sum", |ctx| async move {
//!         match ctx.bind::<serde_json::Value>(&Json) {
//!             Ok(v) => ctx.reply_with(&Json, &(v["a"].as_i64().unwrap_or(0) + v["b"].as_i64().unwrap_or(0))),
//!             Err(e) => ctx.reply_error(e),
//!         }
//!     });
//! let server = Server::new(router);
//! let engine = Engine::new(Config::default(), [Binding::tcp("127.0.0.1:8888", server)])?;
//! engine.run()?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! On the wire (the conformance folder's `WIRE.md`): a frame over
//! [`Config::max_body_len`] or with an unknown command closes the connection; one whose
//! method is empty or over 127 bytes is dropped; a request for a method without a handler
//! is answered `method not found`; a response to no call in flight (a timed-out call's
//! late answer) is dropped. Timeouts are local: nothing is sent when a call gives up.
//! Handlers run concurrently, so answers may come back out of order (matched by seq).
//! Streams (`CmdStream`): [`Router::stream`] serves the ones the other side opens,
//! [`Peer::open_stream`] opens one; a [`Stream`] is a `Stream` of bodies and a `Sink`.

mod client;
mod codec;
mod driver;
mod error;
mod peer;
mod router;
mod server;
mod stream;

pub use client::Client;
pub use codec::{Codec, Json, Raw};
pub use error::Error;
pub use peer::{Peer, Reply};
pub use router::{Context, Next, Router};
pub use server::{Message, Server};
pub use stream::Stream;

use crate::proto::arpc::{Cmd, MAX_METHOD_LEN};
use crate::proto::detect::{Matcher, Verdict};
use std::time::Duration;

/// A [`Mux`](crate::mux::Mux) matcher for arpc: a first frame header whose reserved byte
/// is 0, whose command is one of arpc's six and whose flag and method length are ones
/// arpc sends (8 bytes tell). arpc has no preface and its client speaks first, so a
/// client that stays silent is only told apart by the mux's default route.
///
/// ```no_run
/// use fibr::arpc::{Router, Server};
/// use fibr::mux::{Matcher, Mux};
///
/// let arpc = Server::new(Router::new().route("/echo", |ctx| async move { ctx.reply(ctx.body()) }));
/// // HTTP/1 elsewhere, arpc here; a silent client is taken for arpc too.
/// let mux = Mux::new()
///     .route(Matcher::http1(), fibr::http::Server::new(tower::service_fn(|_req| async {
///         Ok::<_, std::convert::Infallible>(http::Response::new(String::from("hi")))
///     })))
///     .route(fibr::arpc::matcher(), arpc.clone())
///     .default_handler(arpc);
/// ```
pub fn matcher() -> Matcher {
    Matcher::custom(|seen| {
        let Some(h) = seen.get(..8) else {
            return Verdict::NeedMore;
        };
        let (reserved, cmd, flag, method_len) = (h[4], h[5], h[6], usize::from(h[7]));
        let method_ok = match Cmd::from_byte(cmd) {
            None => false,
            Some(Cmd::Ping | Cmd::Pong) => method_len == 0,
            Some(_) => (1..=MAX_METHOD_LEN).contains(&method_len),
        };
        if reserved == 0 && flag & !3 == 0 && method_ok {
            Verdict::Match
        } else {
            Verdict::NoMatch
        }
    })
}

/// Limits of a connection, either role, and the client's dialing.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// The largest frame body (method and payload) taken from the peer; a bigger one
    /// closes the connection, before any of it is kept. arpc's default: 64 MiB less 16.
    pub max_body_len: u32,
    /// Calls one connection may have in flight at once; past it a call fails at once
    /// with [`Error::TooManyCalls`]. Default 65,536.
    pub max_pending_calls: usize,
    /// Handlers of one connection that may wait (not finished in the round that read
    /// their call) at once; at the bound the connection stops reading until one is done.
    /// Default 4,096.
    pub max_running_handlers: usize,
    /// Bodies a stream keeps for a reader that has not taken them; at the bound the
    /// connection stops reading until it does (arpc has no flow control). Default 16.
    pub stream_queue: usize,
    /// Client: how long a dial may take. Default 3 s.
    pub connect_timeout: Duration,
    /// Client: dial again when the connection is lost. Default on.
    pub reconnect: bool,
    /// Client: the wait before the first redial, doubled after each failure. Default 100 ms.
    pub reconnect_min: Duration,
    /// Client: the longest wait between redials. Default 5 s.
    pub reconnect_max: Duration,
    /// Client: failed redials after which it stops (`None`: never). Default `None`.
    pub max_reconnects: Option<u32>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_body_len: crate::proto::arpc::Limits::default().max_body_len,
            max_pending_calls: 1 << 16,
            max_running_handlers: 4096,
            stream_queue: 16,
            connect_timeout: Duration::from_secs(3),
            reconnect: true,
            reconnect_min: Duration::from_millis(100),
            reconnect_max: Duration::from_secs(5),
            max_reconnects: None,
        }
    }
}

config_setters!(Config {
    set with_max_body_len => max_body_len: u32,
    set with_max_pending_calls => max_pending_calls: usize,
    set with_max_running_handlers => max_running_handlers: usize,
    set with_stream_queue => stream_queue: usize,
    set with_connect_timeout => connect_timeout: Duration,
    set with_reconnect => reconnect: bool,
    set with_reconnect_min => reconnect_min: Duration,
    set with_reconnect_max => reconnect_max: Duration,
    opt with_max_reconnects => max_reconnects: u32,
});
