//! Proxies on fibr's connections (feature `proxy`): a byte [`relay`] between two
//! connections, and a [`Server`] that speaks SOCKS5 (RFC 1928, with RFC 1929
//! username/password), SOCKS4, SOCKS4a and HTTP `CONNECT` on one port, told apart by the
//! client's first byte (5, 4, anything else is HTTP), and forwards absolute-form
//! `http://` requests (`forward.rs`: fibr's HTTP server in front, fibr's client behind).
//! [`MakeForward`] is that HTTP side on its own, for `fibr::serve`: over TLS, HTTP/2 and
//! HTTP/3 its `CONNECT`s become tunnels too (`fibr::http::tunnel`).
//!
//! ```no_run
//! use fibr::proxy::{ProxyConfig, Rules, Server};
//! use fibr::{Binding, Config, Engine};
//!
//! let rules = Rules::new().allow_clients("10.0.0.0/8".parse()?);
//! let proxy = Server::new(ProxyConfig::new(rules));
//! let engine = Engine::new(Config::default(), [Binding::tcp("0.0.0.0:1080", proxy)])?;
//! engine.run()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Each protocol's handshake is a sans-IO machine (SOCKS's in `proto::socks::server`, on
//! the codec the client dialer shares; `http_connect.rs`: bytes in, replies and a
//! decision out). The driver here runs it on the client's connection,
//! checks the [`Rules`], resolves names off the loops, dials the target (or, for a SOCKS
//! BIND, listens for it: `bind.rs`), writes the protocol's answer, and then leaves both
//! connections to the relay: from then on no task stands between them.

mod bind;
mod forward;
mod http_connect;
mod pipe;
mod relay;
mod rules;
mod udp;

pub use forward::{Forward, ForwardBody, MakeForward};
pub use relay::{relay, Relay, RelayConfig};
pub use rules::{Authenticator, InvalidNet, IpNet, Rules};

use crate::engine::conn::{Conn, Handler};
use crate::engine::time::Sleep;
use crate::proto::socks::{self, Target};
pub(crate) use crate::proto::tunnel::{
    Auth, Credentials, Failure, ServerHandshake as Handshake, Step,
};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Context;
use std::time::{Duration, Instant};

/// How a [`Server`] behaves: its rules and every limit.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ProxyConfig {
    /// Who may use the proxy and which targets it may reach.
    pub rules: Rules,
    /// Time from accept to a complete request (greeting, authentication, request).
    pub handshake_timeout: Duration,
    /// Time to reach the target, name resolution included (SOCKS reply 4, HTTP 504 past it).
    pub connect_timeout: Duration,
    /// Time a SOCKS BIND waits for the host it named to connect (SOCKS5 reply 6, SOCKS4
    /// 91 past it).
    pub bind_timeout: Duration,
    /// Longest HTTP request head, `CONNECT` or forwarded (431 past it).
    pub max_request_head: usize,
    /// Time from forwarding an `http://` request to the target's response head, the
    /// connect included (504 past it).
    pub response_timeout: Duration,
    /// The tunnels' buffer bound and idle timeout.
    pub relay: RelayConfig,
    /// A SOCKS5 UDP association with no datagram either way for this long ends (its TCP
    /// connection is closed).
    pub udp_idle_timeout: Duration,
    /// Destinations a UDP association remembers as allowed to answer (the oldest is
    /// forgotten past it).
    pub udp_max_peers: usize,
}

impl ProxyConfig {
    /// The default limits with `rules`.
    pub fn new(rules: Rules) -> ProxyConfig {
        ProxyConfig {
            rules,
            ..ProxyConfig::default()
        }
    }
}

impl Default for ProxyConfig {
    /// No rule (everything refused), 10 s handshakes and connects, 8 KiB heads, 60 s for a
    /// forwarded request's response; UDP associations idle for 2 minutes end.
    fn default() -> ProxyConfig {
        ProxyConfig {
            rules: Rules::new(),
            handshake_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            bind_timeout: Duration::from_secs(60),
            max_request_head: 8 * 1024,
            response_timeout: Duration::from_secs(60),
            relay: RelayConfig::default(),
            udp_idle_timeout: Duration::from_secs(120),
            udp_max_peers: 64,
        }
    }
}

config_setters!(ProxyConfig {
    set with_rules => rules: Rules,
    set with_handshake_timeout => handshake_timeout: Duration,
    set with_connect_timeout => connect_timeout: Duration,
    set with_bind_timeout => bind_timeout: Duration,
    set with_max_request_head => max_request_head: usize,
    set with_response_timeout => response_timeout: Duration,
    set with_relay => relay: RelayConfig,
    set with_udp_idle_timeout => udp_idle_timeout: Duration,
    set with_udp_max_peers => udp_max_peers: usize,
});

/// A SOCKS5, SOCKS4/4a and HTTP `CONNECT` proxy: a [`Handler`] for an [`Engine`]
/// binding.
///
/// [`Engine`]: crate::Engine
#[derive(Clone)]
pub struct Server {
    config: Arc<ProxyConfig>,
    /// Where a connection goes once its first request asks for forwarding.
    forward: Arc<dyn Handler>,
}

impl Server {
    /// A proxy that follows `config` (its rules: nothing is allowed without one).
    pub fn new(config: ProxyConfig) -> Server {
        let config = Arc::new(config);
        Server {
            forward: forward::server(config.clone()),
            config,
        }
    }
}

/// A client connection's handshake state (its context until the tunnel is up).
struct Session {
    machine: Option<Box<dyn Handshake>>,
    timer: Sleep,
    /// Set once the request is taken: the machine lives there from then on.
    pending: Option<Arc<Pending>>,
}

/// A request being connected, shared by the client's callbacks, the resolver task and
/// the target's dial: the first to finish (connected, failed, timed out, client gone)
/// sets `done`, and the others then do nothing.
struct Pending {
    config: Arc<ProxyConfig>,
    state: Mutex<PendingState>,
}

struct PendingState {
    done: bool,
    machine: Box<dyn Handshake>,
    client: Option<Conn>,
    /// The dial in progress.
    target: Option<Conn>,
    /// Addresses left to try, last first.
    addrs: Vec<SocketAddr>,
    last_error: Option<io::Error>,
    /// A BIND's listening socket, until its peer connects.
    listening: Option<crate::engine::conn::StopAccepting>,
}

impl Pending {
    fn lock(&self) -> MutexGuard<'_, PendingState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Checks the resolved addresses against the rules, then dials the first allowed.
    fn dial_allowed(self: &Arc<Self>, name: Option<&str>, addrs: Vec<SocketAddr>) {
        let rules = &self.config.rules;
        let mut st = self.lock();
        if st.done {
            return;
        }
        st.addrs = addrs
            .into_iter()
            .rev()
            .filter(|a| rules.check_target(name, a.ip(), a.port()))
            .collect();
        if st.addrs.is_empty() {
            return st.fail(Failure::NotAllowed);
        }
        self.dial_next(&mut st);
    }

    /// Dials the next address, or fails with the last error if none is left.
    fn dial_next(self: &Arc<Self>, st: &mut PendingState) {
        let Some(client) = st.client.clone() else {
            return;
        };
        while let Some(addr) = st.addrs.pop() {
            let dial = Arc::new(Dial(self.clone()));
            match Conn::dial_on(&client.inner.rt, addr, dial) {
                Ok(target) => {
                    st.target = Some(target);
                    return;
                }
                Err(e) => st.last_error = Some(e),
            }
        }
        let why = st
            .last_error
            .as_ref()
            .map_or(Failure::General, Failure::from_io);
        st.fail(why);
    }
}

impl PendingState {
    /// Answers the client with the failure and closes it.
    fn fail(&mut self, why: Failure) {
        self.done = true;
        let mut out = Vec::new();
        self.machine.failed(why, &mut out);
        if let Some(client) = self.client.take() {
            tracing::debug!(peer = ?client.peer_addr(), ?why, "proxy request failed");
            let _ = client.send(&out);
            client.close();
        }
        if let Some(target) = self.target.take() {
            target.close();
        }
        self.listening = None;
    }
}

impl Pending {
    /// `target` is connected (dialed, or accepted by a BIND): answers the client with
    /// `reply` (the address its protocol names) and relays between the two.
    fn tunnel(&self, target: &Conn, reply: SocketAddr) {
        let (client, reply, rest) = {
            let mut st = self.lock();
            if st.done {
                drop(st);
                return target.close();
            }
            st.done = true;
            st.target = None;
            st.listening = None;
            let Some(client) = st.client.take() else {
                return target.close();
            };
            let mut out = Vec::new();
            st.machine.connected(reply, &mut out);
            (client, out, st.machine.take_rest())
        };
        // Drops the handshake timer (outside the pending lock: the client's callbacks
        // take the context first, then that lock).
        drop(client.take_context::<Session>());
        let _ = client.send(&reply);
        if !rest.is_empty() {
            let _ = target.send(&rest);
        }
        relay(&client, target, &self.config.relay);
        client.resume_reads();
    }
}

/// The target connection's handler while it is being dialed.
struct Dial(Arc<Pending>);

impl Handler for Dial {
    fn on_open(&self, target: &Conn) {
        let bound = target
            .local_addr()
            .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
        self.0.tunnel(target, bound);
    }

    fn on_data(&self, _target: &Conn, _data: &[u8]) {}

    fn on_close(&self, _target: &Conn, err: Option<io::Error>) {
        let mut st = self.0.lock();
        if st.done {
            return;
        }
        st.target = None;
        st.last_error = Some(err.unwrap_or_else(|| io::ErrorKind::ConnectionRefused.into()));
        self.0.dial_next(&mut st);
    }
}

impl Server {
    fn session<R>(conn: &Conn, f: impl FnOnce(&mut Session) -> R) -> Option<R> {
        conn.with_context::<Session, _>(|s| s.map(f))
    }

    /// Arms the session's timer for `deadline` on the client's waker.
    fn arm(conn: &Conn, timer: &mut Sleep, deadline: Instant) {
        timer.reset(deadline);
        let waker = conn.waker();
        // Registers the timer; a deadline already past shows as a wake-up right away.
        if Pin::new(timer)
            .poll(&mut Context::from_waker(&waker))
            .is_ready()
        {
            waker.wake();
        }
    }

    /// Acts on a machine's steps until it needs input or is done. Answers what to do
    /// with the connection once the session (the context being borrowed) is dropped.
    fn drive(
        &self,
        conn: &Conn,
        session: &mut Session,
        mut step: Step,
        out: &mut Vec<u8>,
    ) -> Option<HandOff> {
        loop {
            // What the machine wrote goes out before anything the step does (a close, a
            // failure's reply).
            if !out.is_empty() {
                let _ = conn.send(out);
                out.clear();
            }
            step = match step {
                Step::More => return None,
                Step::Close => {
                    conn.close();
                    return None;
                }
                Step::Authenticate(creds) => {
                    let ok = self.config.rules.verify(&creds);
                    let machine = session.machine.as_mut()?;
                    machine.authenticated(ok, out)
                }
                Step::Connect(target, auth) => {
                    self.connect(conn, session, target, auth, Request::Connect);
                    return None;
                }
                Step::Bind(target, auth) => {
                    self.connect(conn, session, target, auth, Request::Bind);
                    return None;
                }
                Step::Associate(hint, auth) => {
                    return Some(HandOff::Associate(session.machine.take()?, hint, auth))
                }
                Step::Forward => {
                    return Some(HandOff::Forward(session.machine.take()?.take_rest()))
                }
            };
        }
    }

    /// The request is complete: hold the client's reads, check the rules, resolve, and
    /// dial the target (or, for a BIND, listen for it).
    fn connect(
        &self,
        conn: &Conn,
        session: &mut Session,
        target: Target,
        auth: Auth,
        request: Request,
    ) {
        let Some(machine) = session.machine.take() else {
            return;
        };
        conn.hold_reads();
        let cfg = &self.config;
        let deadline = Instant::now()
            + match request {
                Request::Connect => cfg.connect_timeout,
                Request::Bind => cfg.bind_timeout,
            };
        Server::arm(conn, &mut session.timer, deadline);
        let pending = Arc::new(Pending {
            config: cfg.clone(),
            state: Mutex::new(PendingState {
                done: false,
                machine,
                client: Some(conn.clone()),
                target: None,
                addrs: Vec::new(),
                last_error: None,
                listening: None,
            }),
        });
        session.pending = Some(pending.clone());
        if let Err(why) = self.check_client(conn, &auth) {
            return pending.lock().fail(why);
        }
        let go = move |pending: Arc<Pending>, name: Option<&str>, addrs| match request {
            Request::Connect => pending.dial_allowed(name, addrs),
            Request::Bind => pending.listen(name, addrs),
        };
        match target {
            Target::Addr(addr) => go(pending, None, vec![addr]),
            Target::Name(name, port) => {
                crate::engine::exec::spawn_on(&conn.inner.rt.pool, async move {
                    match crate::engine::net::resolve((name.as_str(), port)).await {
                        Ok(addrs) => go(pending, Some(&name), addrs),
                        Err(e) => pending.lock().fail(Failure::from_io(&e)),
                    }
                });
            }
        }
    }
}

/// What a request asks the proxy to do with its target.
#[derive(Clone, Copy)]
enum Request {
    /// Dial it (SOCKS CONNECT, HTTP `CONNECT`).
    Connect,
    /// Wait for it to connect (SOCKS BIND).
    Bind,
}

/// What becomes of a client connection whose handshake is over without a tunnel.
enum HandOff {
    /// To the forwarding HTTP server, with the bytes read so far.
    Forward(Vec<u8>),
    /// A UDP association: the machine (for its reply), the client's UDP address if it
    /// named one, what it proved.
    Associate(Box<dyn Handshake>, Target, Auth),
}

impl Server {
    /// The rules' checks on the client, with what its request proved.
    fn check_client(&self, conn: &Conn, auth: &Auth) -> Result<(), Failure> {
        let rules = &self.config.rules;
        let authed = match auth {
            Auth::None => false,
            Auth::Verified => true,
            Auth::Offered(creds) => rules.verify(creds),
        };
        rules.check_client(conn.peer_addr().map(|a| a.ip()), authed)
    }

    /// Starts a UDP association: binds its socket on the address the client reached,
    /// answers with it, and relays until the client's connection closes.
    fn associate(&self, conn: &Conn, mut machine: Box<dyn Handshake>, hint: Target, auth: Auth) {
        let mut out = Vec::new();
        let addrs = self.check_client(conn, &auth).and_then(|()| {
            match (conn.peer_addr(), conn.local_addr()) {
                (Some(peer), Some(local)) => Ok((peer, local)),
                _ => Err(Failure::General),
            }
        });
        let (peer, local) = match addrs {
            Ok(addrs) => addrs,
            Err(why) => {
                machine.failed(why, &mut out);
                let _ = conn.send(&out);
                return conn.close();
            }
        };
        let (control, ended) = udp::Control::new();
        conn.set_handler(control);
        // Zeros (or a port of 0) mean the client does not know its UDP address yet.
        let client = match hint {
            Target::Addr(a) if !a.ip().is_unspecified() && a.port() != 0 => Some(a),
            _ => None,
        };
        let config = self.config.clone();
        let conn = conn.clone();
        crate::engine::exec::spawn_on(&conn.inner.rt.pool.clone(), async move {
            let bound = std::net::UdpSocket::bind(SocketAddr::new(local.ip(), 0))
                .and_then(crate::engine::net::UdpSocket::from_std)
                .and_then(|s| s.local_addr().map(|a| (s, a)));
            let (socket, bound) = match bound {
                Ok(bound) => bound,
                Err(e) => {
                    tracing::debug!(error = %e, "UDP ASSOCIATE: no socket");
                    machine.failed(Failure::General, &mut out);
                    let _ = conn.send(&out);
                    return conn.close();
                }
            };
            machine.connected(bound, &mut out);
            let _ = conn.send(&out);
            let relay = udp::Relay {
                config,
                socket,
                client_ip: peer.ip(),
                client,
                ended,
            };
            relay.run().await;
            conn.close();
        });
    }
}

impl Handler for Server {
    fn on_open(&self, conn: &Conn) {
        let mut timer = crate::engine::time::sleep_until(Instant::now());
        Server::arm(
            conn,
            &mut timer,
            Instant::now() + self.config.handshake_timeout,
        );
        conn.set_context(Session {
            machine: None,
            timer,
            pending: None,
        });
    }

    fn on_data(&self, conn: &Conn, data: &[u8]) {
        let mut out = Vec::new();
        let hand_off = Server::session(conn, |session| {
            if session.pending.is_some() {
                // The request was taken; what follows waits for the tunnel.
                return None;
            }
            let machine = session.machine.get_or_insert_with(|| match data[0] {
                5 => Box::new(socks::server::Socks5::new(
                    self.config.rules.auth_required(),
                )),
                4 => Box::new(socks::server::Socks4::new()),
                _ => Box::new(http_connect::HttpConnect::new(self.config.max_request_head)),
            });
            let step = machine.receive(data, &mut out);
            self.drive(conn, session, step, &mut out)
        });
        let Some(Some(hand_off)) = hand_off else {
            return;
        };
        // The session (its timer) goes: the HTTP server has its own timeouts, and an
        // association lasts as long as its connection.
        drop(conn.take_context::<Session>());
        match hand_off {
            HandOff::Forward(head) => {
                conn.set_shared_handler(self.forward.clone());
                self.forward.on_open(conn);
                self.forward.on_data(conn, &head);
            }
            HandOff::Associate(machine, hint, auth) => self.associate(conn, machine, hint, auth),
        }
    }

    fn on_wake(&self, conn: &Conn) {
        let expired = Server::session(conn, |session| {
            if !session.timer.is_elapsed() {
                // Woken early (a timer moved): wait on for the deadline.
                let deadline = session.timer.deadline();
                Server::arm(conn, &mut session.timer, deadline);
                return None;
            }
            if let Some(pending) = &session.pending {
                let mut st = pending.lock();
                if !st.done {
                    st.fail(Failure::TimedOut);
                }
                return None;
            }
            let mut out = Vec::new();
            if let Some(machine) = session.machine.as_mut() {
                machine.timed_out(&mut out);
            }
            Some(out)
        });
        if let Some(Some(out)) = expired {
            tracing::debug!(peer = ?conn.peer_addr(), "proxy handshake timed out");
            let _ = conn.send(&out);
            conn.close();
        }
    }

    fn on_close(&self, conn: &Conn, _err: Option<io::Error>) {
        Server::session(conn, |session| {
            if let Some(pending) = &session.pending {
                let mut st = pending.lock();
                st.done = true;
                st.client = None;
                st.listening = None;
                if let Some(target) = st.target.take() {
                    target.close();
                }
            }
        });
    }
}
