//! One port, many protocols: a [`Mux`] is a connection [`Handler`] that looks at what a
//! client sends first and hands the connection to the handler of the protocol it speaks:
//! TLS (told apart further by the ALPN protocols its ClientHello offers), HTTP/1, h2c
//! (the HTTP/2 preface), SOCKS5, SOCKS4, or a [`Matcher`] of your own (a prefix, or a
//! function over the bytes).
//!
//! ```no_run
//! # #[cfg(all(feature = "axum", feature = "proxy", feature = "tls"))]
//! # mod example {
//! use fibr::mux::{Matcher, Mux};
//! use fibr::proxy::{ProxyConfig, Rules};
//! use fibr::tls::rustls::ServerConfig;
//! use fibr::{Binding, Config, Engine};
//! use std::sync::Arc;
//!
//! /// Serves HTTPS (with `tls`'s certificate), HTTP/1.1, h2c and SOCKS on port 8080.
//! pub fn serve(tls: Arc<ServerConfig>) -> std::io::Result<()> {
//!     let app = axum::Router::new().route("/", axum::routing::get(|| async { "hello" }));
//!     let http = Arc::new(fibr::http::Server::new(app));
//!     let proxy = fibr::proxy::Server::new(ProxyConfig::new(Rules::new()));
//!     // The TLS config's ALPN list is what the TLS handshake picks from: h2, http/1.1.
//!     let https = fibr::tls::TlsServer::new(tls, http.clone());
//!     let mux = Mux::new()
//!         .route(Matcher::tls(), https)
//!         .route(Matcher::http1(), http.clone())
//!         .route(Matcher::h2c(), http)
//!         .route(Matcher::socks5(), proxy.clone())
//!         .route(Matcher::socks4(), proxy);
//!     let engine = Engine::new(Config::default(), [Binding::tcp("0.0.0.0:8080", mux)])?;
//!     engine.run()
//! }
//! # }
//! ```
//!
//! Routes are asked in the order they were added; the first that matches wins, once every
//! route before it has said no. The chosen handler gets the connection as if it had been
//! accepted for it: its `on_open`, then the bytes already read as `on_data`. A TLS handler
//! ([`TlsServer`](crate::tls::TlsServer)) gets them as the first records of its handshake.
//!
//! A client that says nothing recognizable gets the default handler, if there is one, and is
//! closed otherwise: one whose bytes no route can match, one that sends
//! [`MuxConfig::max_peek`] bytes without being told apart, one that half-closes first, and
//! one still undecided after [`MuxConfig::peek_timeout`] (which makes a protocol whose
//! server speaks first, SSH-like, a possible default). The default then gets what was
//! seen, if anything.
//!
//! Telling protocols apart is a pure function over the bytes seen so far ([`detect`]);
//! the handler here only keeps those bytes (none when the first read decides, as it nearly
//! always does) and the timer.

#[cfg(test)]
mod tests;

pub use crate::proto::detect::{detect, Detection, Matcher, Verdict};

use crate::engine::conn::{Conn, Handler};
use crate::engine::time::Sleep;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Context;
use std::time::{Duration, Instant};

/// How long a [`Mux`] waits and how much it reads before deciding.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct MuxConfig {
    /// Time from accept to a decision; past it the client counts as unrecognized (the
    /// default handler, or a close).
    pub peek_timeout: Duration,
    /// The most bytes kept while deciding; a client not told apart by then counts as
    /// unrecognized. It must hold a TLS ClientHello for ALPN routes (browsers' are 2 KB,
    /// with post-quantum key shares).
    pub max_peek: usize,
}

impl Default for MuxConfig {
    /// 10 s and 16 KiB.
    fn default() -> MuxConfig {
        MuxConfig {
            peek_timeout: Duration::from_secs(10),
            max_peek: 16 * 1024,
        }
    }
}

config_setters!(MuxConfig {
    set with_peek_timeout => peek_timeout: Duration,
    set with_max_peek => max_peek: usize,
});

/// Serves several protocols on one port: see the [module docs](self).
pub struct Mux {
    config: MuxConfig,
    matchers: Vec<Matcher>,
    handlers: Vec<Arc<dyn Handler>>,
    default: Option<Arc<dyn Handler>>,
}

impl Default for Mux {
    fn default() -> Mux {
        Mux::new()
    }
}

impl Mux {
    /// A mux with no routes and no default (every connection is closed), with the default
    /// [`MuxConfig`].
    pub fn new() -> Mux {
        Mux::with_config(MuxConfig::default())
    }

    /// A mux with no routes, with `config`.
    pub fn with_config(config: MuxConfig) -> Mux {
        Mux {
            config,
            matchers: Vec::new(),
            handlers: Vec::new(),
            default: None,
        }
    }

    /// Connections that `matcher` recognizes go to `handler` (after every earlier route
    /// has said no).
    #[must_use]
    pub fn route(self, matcher: Matcher, handler: impl Handler) -> Mux {
        self.route_shared(matcher, Arc::new(handler))
    }

    /// [`route`](Self::route) with a handler already in an `Arc`.
    #[must_use]
    pub fn route_shared(mut self, matcher: Matcher, handler: Arc<dyn Handler>) -> Mux {
        self.matchers.push(matcher);
        self.handlers.push(handler);
        self
    }

    /// Connections no route recognizes go to `handler` (without one they are closed).
    #[must_use]
    pub fn default_handler(self, handler: impl Handler) -> Mux {
        self.default_shared(Arc::new(handler))
    }

    /// [`default_handler`](Self::default_handler) with a handler already in an `Arc`.
    #[must_use]
    pub fn default_shared(mut self, handler: Arc<dyn Handler>) -> Mux {
        self.default = Some(handler);
        self
    }

    /// Where the bytes seen so far send the connection, if they decide it: `Some(None)`
    /// is "unrecognized, no default".
    fn decide(&self, seen: &[u8], ended: bool) -> Option<Option<&Arc<dyn Handler>>> {
        match detect(&self.matchers, seen, self.config.max_peek, ended) {
            Detection::NeedMore => None,
            Detection::Matched(i) => Some(Some(&self.handlers[i])),
            Detection::NoMatch => Some(self.default.as_ref()),
        }
    }

    /// Gives the connection to `to` (or closes it): its `on_open`, then the bytes seen,
    /// `seen` and `rest` in order. True if `to`'s `on_open` put a record layer (TLS) on
    /// the connection, which then takes the bytes as its input instead.
    fn hand_off(conn: &Conn, to: Option<&Arc<dyn Handler>>, seen: &[u8], rest: &[u8]) -> bool {
        let Some(to) = to else {
            tracing::debug!(peer = ?conn.peer_addr(), "mux: unrecognized protocol");
            conn.close();
            return false;
        };
        let layered = conn.has_layer();
        conn.set_shared_handler(to.clone());
        to.on_open(conn);
        if !layered && conn.has_layer() {
            conn.inner.replay_into_layer(&[seen, rest]);
            return true;
        }
        for bytes in [seen, rest] {
            if !bytes.is_empty() && conn.is_open() {
                // To the handler as it is now: `on_open` may have replaced itself.
                conn.handler().on_data(conn, bytes);
            }
        }
        false
    }

    /// Arms the peek timer on the connection's waker.
    fn arm(conn: &Conn, timer: &mut Sleep) {
        let waker = conn.waker();
        // Registers the timer; one already due shows as a wake-up right away.
        if Pin::new(timer)
            .poll(&mut Context::from_waker(&waker))
            .is_ready()
        {
            waker.wake();
        }
    }

    /// Ends the peek without more bytes (EOF, or the timeout): decides on what was seen
    /// and hands off. True if the connection went to a handler without a layer.
    fn settle(&self, conn: &Conn) -> bool {
        let Some(peek) = conn.take_context::<Peek>() else {
            return false;
        };
        let to = self.decide(&peek.seen, true).flatten();
        let layered = Mux::hand_off(conn, to, &peek.seen, &[]);
        to.is_some() && !layered
    }
}

/// A connection's state while the mux decides: what it read (only once a read left the
/// question open) and the peek timer.
struct Peek {
    seen: Vec<u8>,
    timer: Sleep,
}

impl Handler for Mux {
    fn on_open(&self, conn: &Conn) {
        let mut timer = crate::engine::time::sleep_until(Instant::now() + self.config.peek_timeout);
        Mux::arm(conn, &mut timer);
        conn.set_context(Peek {
            seen: Vec::new(),
            timer,
        });
    }

    fn on_data(&self, conn: &Conn, data: &[u8]) {
        let max = self.config.max_peek;
        let Some(mut peek) = conn.take_context::<Peek>() else {
            return;
        };
        // Only what the limit allows is kept; the rest of this read follows it unlooked-at.
        let (seen, rest): (&[u8], &[u8]) = if peek.seen.is_empty() {
            (data, &[])
        } else {
            let take = data.len().min(max.saturating_sub(peek.seen.len()));
            peek.seen.extend_from_slice(&data[..take]);
            (&peek.seen, &data[take..])
        };
        let Some(to) = self.decide(seen, false) else {
            if peek.seen.is_empty() {
                peek.seen = data.to_vec();
            }
            return conn.set_context(peek);
        };
        // The timer goes now: the next handler's wake-ups are its own.
        drop(peek.timer);
        Mux::hand_off(conn, to, seen, rest);
    }

    fn on_eof(&self, conn: &Conn) {
        if self.settle(conn) {
            conn.handler().on_eof(conn);
        } else {
            conn.close();
        }
    }

    fn on_wake(&self, conn: &Conn) {
        let due = conn.with_context::<Peek, _>(|peek| {
            let peek = peek?;
            if peek.timer.is_elapsed() {
                return Some(());
            }
            // Woken early: wait on for the deadline.
            Mux::arm(conn, &mut peek.timer);
            None
        });
        if due.is_some() {
            tracing::debug!(peer = ?conn.peer_addr(), "mux: peek timed out");
            self.settle(conn);
        }
    }
}
