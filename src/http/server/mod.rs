//! The HTTP server: a fibr [`Handler`] that serves a tower service over HTTP/1.1 and
//! HTTP/2 (and, beside it, HTTP/3), one driver per protocol on one shared exchange:
//!
//! - `mod.rs`: `Server`, its connections' callbacks, the choice of protocol (ALPN, the h2c
//!   preface, an `Upgrade`) and the hand-offs (hyper, a WebSocket);
//! - `h1.rs`, `h2.rs`, `h3.rs`: each protocol's driver;
//! - `exchange.rs`: the request exchange all three share (the service call, polling it,
//!   TLS's extension, the body pump);
//! - `round.rs`: a round's output buffer, clock and Date, and the machine's timer.
//!
//! The HTTP/1 driver (`h1.rs`) joins the sans-IO connection machine
//! (`proto::h1::server::ServerConn`) to a connection:
//! The machine decides everything HTTP/1 decides; this driver does the rest: it feeds the
//! machine the round's bytes and time, calls the service and polls its futures and
//! response bodies, and applies what the machine returns (reads held or resumed, the
//! connection closed, a timer armed). Each round parses every complete request in the
//! bytes read, polls the response futures right away (most finish in that first poll),
//! and sends every response that is ready, in request order, in the round's single write.
//! Futures that are still pending hold the connection's waker; their wake-up runs another
//! round.

mod exchange;
mod h1;
mod h2;
#[cfg(feature = "http3")]
mod h3;
pub(crate) mod round;

#[cfg(feature = "http3")]
pub use h3::Http3Server;

use super::body::Incoming;
use super::config::ServerConfig;
use super::service::{BoxError, ConnInfo, MakeService, UnixPeer};
use crate::engine::conn::live::{Admission, LiveCount};
use crate::engine::conn::{Conn, Handler};
use crate::proto::h1::server::Limits as H1Limits;
use crate::proto::h2::config::ServerLimits as H2Limits;
use exchange::ConnTls;
use h1::{with_state, H1State};
use h2::{with_h2, H2State};
use http::{Request, Response};
use http_body::Body;
use round::with_round_output;
use std::io;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use tower_service::Service;

/// Serves a tower service (or a make-service) over HTTP/1.1 as a fibr connection handler.
pub struct Server<M, Marker = super::service::ServiceMarker> {
    shared: Arc<Shared<M>>,
    _marker: PhantomData<fn() -> Marker>,
}

pub(crate) struct Shared<M> {
    make: M,
    config: ServerConfig,
    /// What the HTTP/1 machine reads of `config`, built once.
    h1_limits: H1Limits,
    /// What the HTTP/2 machine reads of `config`, built once.
    h2_limits: H2Limits,
    /// Live connections, for graceful shutdown.
    conns: Mutex<Vec<Conn>>,
    /// What a drain waits for: `conns`, HTTP/3's connections, and (under `fibr::serve`)
    /// connections accepted and not yet opened.
    live: Arc<LiveCount>,
    /// Set when draining starts: HTTP/3 connections send GOAWAY.
    #[cfg(feature = "http3")]
    drain_started: crate::engine::sync_notify::Notify,
}

impl<M> Server<M> {
    /// A server for `app` with the default [`ServerConfig`].
    pub fn new<Marker>(app: M) -> Server<M, Marker>
    where
        M: MakeService<Marker>,
    {
        Server::with_config(app, ServerConfig::default())
    }
}

impl<M, Marker> Server<M, Marker> {
    /// A server for `app` with `config`.
    pub fn with_config(app: M, config: ServerConfig) -> Server<M, Marker> {
        Server {
            shared: Arc::new(Shared {
                make: app,
                h1_limits: config.h1_limits(),
                h2_limits: config.h2_limits(),
                config,
                conns: Mutex::new(Vec::new()),
                live: Arc::new(LiveCount::new()),
                #[cfg(feature = "http3")]
                drain_started: crate::engine::sync_notify::Notify::new(),
            }),
            _marker: PhantomData,
        }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared<M>> {
        &self.shared
    }
}

impl<M> Shared<M> {
    /// A connection left this server (closed, or handed to hyper for an upgrade).
    pub(super) fn forget(&self, conn: &Conn) {
        self.conns.lock().unwrap().retain(|c| !c.same(conn));
        self.live.left();
    }

    /// Graceful shutdown: idle connections close now, busy ones after their response.
    pub(crate) fn start_draining(&self) {
        // Set first, so that the connections woken below see it.
        self.live
            .start_draining(self.config.drain_first_request_grace);
        #[cfg(feature = "http3")]
        self.drain_started.notify();
        // A snapshot: the list itself stays, so a connection closing meanwhile is still
        // forgotten (taking the list out and putting it back would resurrect it, and with
        // it a cycle that keeps the whole runtime alive).
        let conns = self.conns.lock().unwrap().clone();
        for c in conns.iter() {
            c.waker().wake();
        }
    }

    /// The count `fibr::serve`'s listener admits its connections into.
    pub(crate) fn live(&self) -> &Arc<LiveCount> {
        &self.live
    }
}

impl<M, Marker, S, B> Handler for Server<M, Marker>
where
    M: MakeService<Marker, Service = S, Body = B>,
    Marker: 'static,
    S: Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    fn on_open(&self, conn: &Conn) {
        let shared = &self.shared;
        // Accepted before the drain began (`fibr::serve` counts it from its accept on,
        // through a TLS handshake): held until the count is ours below, or given up on a
        // return before.
        let admission = conn.take_context::<Admission>();
        // Over HTTP/1 the first request of a connection opened while draining is still
        // answered, so its client does not fail; HTTP/2 has no such grace here.
        let draining = shared.live.draining();
        let peer = conn.peer_addr();
        let info = ConnInfo {
            peer,
            local: conn.local_addr(),
            // Only a Unix socket has no address (UDP peers are not served here).
            unix: peer.is_none().then(|| UnixPeer::of(conn.as_raw_fd())),
        };
        let svc = match shared.make.make_service(&info) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "could not make a service for a connection");
                conn.close();
                return;
            }
        };
        let tls = ConnTls::of(conn);
        if draining && tls.alpn_is_h2() {
            return conn.close();
        }
        match admission {
            Some(admission) => admission.claim(&shared.live),
            None => shared.live.entered(),
        }
        shared.conns.lock().unwrap().push(conn.clone());
        if tls.alpn_is_h2() {
            H2State::<S, B>::start(conn, svc, tls, &shared.config, &shared.h2_limits, &[]);
            return;
        }
        let state: H1State<S, B> = H1State::new(conn, svc, tls);
        conn.set_context(state);
        with_state::<S, B, _>(conn, |st| {
            if draining {
                st.h1.drain(conn.input_waiting());
            }
            with_round_output(|out| st.drive(conn, &shared.config, &shared.h1_limits, out))
        });
    }

    fn on_data(&self, conn: &Conn, data: &[u8]) {
        self.round(conn, data);
    }

    fn on_wake(&self, conn: &Conn) {
        self.round(conn, &[]);
    }

    fn on_drained(&self, conn: &Conn) {
        let cfg = &self.shared.config;
        let limits = &self.shared.h1_limits;
        let h1 = with_state::<S, B, _>(conn, |st| {
            with_round_output(|out| st.drive(conn, cfg, limits, out))
        });
        if h1.is_none() {
            with_h2::<S, B, _>(conn, |st| {
                st.round(conn, &[], cfg, &self.shared.h2_limits, false)
            });
        }
    }

    fn on_eof(&self, conn: &Conn) {
        let cfg = &self.shared.config;
        let h1 = with_state::<S, B, _>(conn, |st| {
            st.h1.peer_closed();
            with_round_output(|out| st.drive(conn, cfg, &self.shared.h1_limits, out));
        });
        if h1.is_none() {
            with_h2::<S, B, _>(conn, |st| st.peer_closed(conn, cfg, &self.shared.h2_limits));
        }
    }

    fn on_close(&self, conn: &Conn, _err: Option<io::Error>) {
        if conn.take_context::<H1State<S, B>>().is_some()
            || conn.take_context::<H2State<S, B>>().is_some()
        {
            self.shared.forget(conn);
        }
    }
}
