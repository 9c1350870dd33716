//! A QUIC connection's driver, on either side: it turns the connection's
//! `quinn_proto::Connection` (the machine) into datagrams, timers and wakeups. A server
//! connection's is polled by the task that serves it ([`Alongside`]); a client's is a
//! task of its own.
//!
//! Whenever it is woken (a datagram, a stream operation, its timer) it drains the machine:
//! datagrams its [`Side`] has for it, expired timers, endpoint events (new connection ids,
//! the end of the connection: to the endpoint and back), application events (to
//! [`Wakers`]), transmits (to the side, which knows the sockets), and sleeps until
//! `poll_timeout`. The server's side is its shared endpoint (`endpoint.rs`), the client's
//! a connection's own endpoint and socket (`client.rs`).
//!
//! Locks: a connection's state, then its side's endpoint; never the other way round.

use super::wakers::Wakers;
use crate::engine::conn::UdpSender;
use quinn_proto::{
    ConnectionError, ConnectionEvent, ConnectionHandle, EndpointEvent, StreamId, Transmit,
};
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// What a connection's driver needs from the side it runs on.
pub(crate) trait Side: Send + Sync + 'static {
    /// Hands an endpoint event to the endpoint; its answer goes back to the connection.
    fn endpoint_event(&self, ch: ConnectionHandle, ev: EndpointEvent) -> Option<ConnectionEvent>;
    /// Sends one transmit of the connection (`buf[..t.size]`: datagrams of
    /// `t.segment_size` bytes each when it is set).
    fn transmit(&self, st: &ConnState, buf: &[u8], t: &Transmit);
    /// How many datagrams one transmit may carry (more than one with GSO).
    fn max_datagrams(&self, st: &ConnState) -> usize;
    /// Feeds the connection what arrived for it since the last turn: what the server's
    /// endpoint routed to it, or what a client's own socket holds (`cx` is woken when
    /// more comes); whether anything did.
    fn receive(&self, st: &mut ConnState, cx: &mut Context<'_>) -> bool;
    /// A connection's handshake finished, or the connection ended first.
    fn handshake_over(&self);
    /// The connection is drained and gone.
    fn drained(&self, ch: ConnectionHandle);
}

/// One QUIC connection, shared by its driver task, the h3 connection and its streams.
pub(crate) struct ConnShared {
    pub(super) state: Mutex<ConnState>,
}

pub(crate) struct ConnState {
    pub conn: quinn_proto::Connection,
    pub wakers: Wakers,
    /// Why the connection ended, once it has (boxed: it is large, and rarely there).
    pub error: Option<Box<ConnectionError>>,
    /// The server's socket the peer's packets last came on (a client sends through its
    /// own, which its side holds).
    pub(super) udp: Option<UdpSender>,
    /// What the server's endpoint routed here since the driver's last turn (empty, and
    /// without capacity, while idle).
    delivered: Vec<ConnectionEvent>,
    /// Counted as a handshake in progress until `Event::Connected` (or the end).
    pub(super) handshaking: bool,
    /// Waits for the handshake's end (a client's connect) or for `close_sent` (a
    /// server's connection, at its end): one slot, since no one waits for both, and a
    /// spurious wake only has the waiter look again.
    watcher: Option<Waker>,
    driver: Option<Waker>,
    /// A stream wrote, read or ended something since the driver's last turn.
    send_wanted: bool,
    /// The connection is closed and its CONNECTION_CLOSE has been handed to the socket.
    close_sent: bool,
    /// A server that takes extended CONNECT's `:protocol` out of request streams (h3
    /// cannot parse `websocket`: `proto::h3`); boxed, and only when asked for.
    pub(super) protocols: Option<Box<Protocols>>,
}

/// The `:protocol`s taken out of request streams' first frames, until their requests
/// claim them.
pub(crate) struct Protocols {
    /// The largest first frame looked into (the server's field section bound).
    pub max: usize,
    pub taken: Vec<(StreamId, Vec<u8>)>,
}

impl ConnState {
    pub(super) fn new(conn: quinn_proto::Connection, udp: Option<UdpSender>) -> ConnState {
        ConnState {
            conn,
            wakers: Wakers::default(),
            error: None,
            udp,
            delivered: Vec::new(),
            handshaking: true,
            watcher: None,
            driver: None,
            send_wanted: false,
            close_sent: false,
            protocols: None,
        }
    }

    /// Has the driver run: a datagram arrived or the connection was closed.
    pub fn kick(&self) {
        if let Some(w) = &self.driver {
            w.wake_by_ref();
        }
    }

    /// Hands the connection what arrived for it, for the driver's next turn (the decrypting
    /// and the answers are the connection's task's work, not the reading loop's). Past
    /// [`MAX_DELIVERED`] waiting, datagrams are dropped, as UDP may.
    pub(super) fn deliver(&mut self, ev: ConnectionEvent) {
        if self.delivered.len() >= MAX_DELIVERED {
            return;
        }
        if self.delivered.capacity() == 0 {
            self.delivered = SPARE_DELIVERED.take();
        }
        self.delivered.push(ev);
        self.kick();
    }

    /// Feeds the machine what [`ConnState::deliver`] queued; whether there was any. The
    /// emptied list goes to the thread's spare, so an idle connection keeps none.
    pub(super) fn take_delivered(&mut self) -> bool {
        if self.delivered.is_empty() {
            return false;
        }
        let mut events = std::mem::take(&mut self.delivered);
        for ev in events.drain(..) {
            self.conn.handle_event(ev);
        }
        SPARE_DELIVERED.set(events);
        true
    }

    /// Has the driver send what a stream wrote, read (window credit) or ended, once the
    /// tasks queued before it have had their turn: the other requests a datagram brought
    /// write their answers first, and these leave in the same packets.
    pub fn kick_to_send(&mut self) {
        self.send_wanted = true;
        self.kick();
    }
}

/// A handle on a QUIC connection (the `h3::quic` traits are implemented on it).
#[derive(Clone)]
pub(crate) struct QuicConn(pub(super) Arc<ConnShared>);

impl QuicConn {
    pub(super) fn new(state: ConnState) -> QuicConn {
        QuicConn(Arc::new(ConnShared {
            state: Mutex::new(state),
        }))
    }

    /// Once the connection is closed and its CONNECTION_CLOSE is out (or it ended some
    /// other way): a server that stops before then would take the UDP socket with it,
    /// and the peer, hearing nothing, would wait for its idle timeout.
    pub(crate) async fn close_sent(&self) {
        poll_fn(|cx| {
            let mut st = self.0.state.lock().unwrap();
            if st.close_sent || st.error.is_some() {
                return Poll::Ready(());
            }
            st.watcher = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// Once the handshake is done: `Err` with why the connection ended before.
    #[cfg(feature = "client")]
    pub(crate) async fn handshake_done(&self) -> Result<(), ConnectionError> {
        poll_fn(|cx| {
            let mut st = self.0.state.lock().unwrap();
            if let Some(e) = &st.error {
                return Poll::Ready(Err(ConnectionError::clone(e)));
            }
            if !st.handshaking {
                return Poll::Ready(Ok(()));
            }
            st.watcher = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// Whether the connection still takes new streams (not closed, not closing).
    #[cfg(feature = "client")]
    pub(crate) fn is_open(&self) -> bool {
        let st = self.0.state.lock().unwrap();
        st.error.is_none() && !st.conn.is_closed()
    }

    /// Closes the connection with an application `code` (its streams end).
    pub(crate) fn close(&self, code: u32, reason: &'static [u8]) {
        let mut st = self.0.state.lock().unwrap();
        st.conn.close(
            Instant::now(),
            code.into(),
            bytes::Bytes::from_static(reason),
        );
        st.kick();
    }
}

/// The handshake is over (or never will be): uncount it and wake whoever waits for it.
fn end_handshake(side: &dyn Side, st: &mut ConnState) {
    if !std::mem::take(&mut st.handshaking) {
        return;
    }
    side.handshake_over();
    if let Some(w) = st.watcher.take() {
        w.wake();
    }
}

/// Datagrams a connection's driver may have waiting: as many as 1,000 full-size packets,
/// far past what a peer within its flow control and congestion window sends in one turn.
const MAX_DELIVERED: usize = 1024;

thread_local! {
    /// The list [`ConnState::deliver`] fills, between connections: one per thread.
    static SPARE_DELIVERED: std::cell::Cell<Vec<ConnectionEvent>> = const { std::cell::Cell::new(Vec::new()) };
    /// The buffer transmits are built in, one per worker thread: a connection holds none
    /// between its turns (an idle one would keep a few KB for nothing).
    static TRANSMIT_BUF: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// A connection's driver: runs the machine whenever it is woken, until the connection is
/// drained. A client's runs as a task of its own; a server's runs on the task that serves
/// the connection ([`alongside`]), so an idle connection keeps one task, not two.
pub(crate) struct Driver<S: Side> {
    side: Arc<S>,
    ch: ConnectionHandle,
    c: Arc<ConnShared>,
    sleep: Option<crate::engine::time::Sleep>,
    /// Stepped aside once for a stream's send (see `turn`).
    deferred: bool,
}

impl<S: Side> Driver<S> {
    pub(super) fn new(side: Arc<S>, ch: ConnectionHandle, c: Arc<ConnShared>) -> Driver<S> {
        Driver {
            side,
            ch,
            c,
            sleep: None,
            deferred: false,
        }
    }
}

impl<S: Side> Future for Driver<S> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let me = self.get_mut();
        let mut buf = TRANSMIT_BUF.take();
        let ready = turn(
            &*me.side,
            me.ch,
            &me.c,
            &mut me.sleep,
            &mut me.deferred,
            &mut buf,
            cx,
        );
        buf.clear();
        TRANSMIT_BUF.set(buf);
        ready
    }
}

pin_project_lite::pin_project! {
    /// Runs `serve` (h3 on the connection) and the connection's driver on one task, until
    /// both are done: the driver goes on after `serve` while the connection closes.
    /// A struct, not an async fn, so `serve` is held once (an async fn pinning its
    /// argument would keep room for it twice).
    pub(crate) struct Alongside<S: Side, F> {
        driver: Option<Driver<S>>,
        #[pin]
        serve: Option<F>,
    }
}

/// `serve` and `driver` on one task (see [`Alongside`]).
pub(crate) fn alongside<S: Side, F: Future<Output = ()>>(
    driver: Driver<S>,
    serve: F,
) -> Alongside<S, F> {
    Alongside {
        driver: Some(driver),
        serve: Some(serve),
    }
}

impl<S: Side, F: Future<Output = ()>> Future for Alongside<S, F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut me = self.project();
        // The driver first: what it hands the streams is then seen by `serve` at once.
        if let Some(driver) = me.driver {
            if Pin::new(driver).poll(cx).is_ready() {
                *me.driver = None;
            }
        }
        if let Some(serve) = me.serve.as_mut().as_pin_mut() {
            if serve.poll(cx).is_ready() {
                me.serve.set(None);
            }
        }
        if me.driver.is_none() && me.serve.is_none() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// One turn of a connection's task: its machine drained, then asleep until its deadline.
#[allow(clippy::too_many_arguments)]
fn turn(
    side: &dyn Side,
    ch: ConnectionHandle,
    c: &ConnShared,
    sleep: &mut Option<crate::engine::time::Sleep>,
    deferred: &mut bool,
    buf: &mut Vec<u8>,
    cx: &mut Context<'_>,
) -> Poll<()> {
    let mut st = c.state.lock().unwrap();
    if !st.driver.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
        st.driver = Some(cx.waker().clone());
    }
    // Woken to send what streams wrote ([`ConnState::kick_to_send`]) and not yet stepped
    // aside for it: go behind the tasks already queued (a task that wakes itself while it
    // runs is queued last), and run the turn when it comes back.
    if std::mem::take(&mut st.send_wanted) && !std::mem::replace(deferred, true) {
        cx.waker().wake_by_ref();
        return Poll::Pending;
    }
    *deferred = false;
    let mut now;
    loop {
        let mut busy = side.receive(&mut st, cx);
        if st.error.is_some() {
            // The side ended it (a client's socket was refused).
            end_handshake(side, &mut st);
        }
        now = Instant::now();
        if st.conn.poll_timeout().is_some_and(|t| t <= now) {
            st.conn.handle_timeout(now);
        }
        while let Some(ev) = st.conn.poll_endpoint_events() {
            busy = true;
            if let Some(back) = side.endpoint_event(ch, ev) {
                st.conn.handle_event(back);
            }
        }
        while let Some(ev) = st.conn.poll() {
            busy = true;
            match &ev {
                quinn_proto::Event::ConnectionLost { reason } => {
                    st.error = Some(Box::new(reason.clone()));
                    end_handshake(side, &mut st);
                }
                quinn_proto::Event::Connected => end_handshake(side, &mut st),
                _ => {}
            }
            st.wakers.on_event(&ev);
        }
        let batch = side.max_datagrams(&st);
        while let Some(t) = st.conn.poll_transmit(now, batch, buf) {
            busy = true;
            side.transmit(&st, buf, &t);
            buf.clear();
        }
        if st.conn.is_closed() && !st.close_sent {
            st.close_sent = true;
            if let Some(w) = st.watcher.take() {
                w.wake();
            }
        }
        if st.conn.is_drained() {
            if st.error.is_none() {
                st.error = Some(Box::new(ConnectionError::LocallyClosed));
            }
            st.wakers.wake_all();
            if let Some(w) = st.watcher.take() {
                w.wake();
            }
            end_handshake(side, &mut st);
            st.driver = None;
            drop(st);
            side.drained(ch);
            return Poll::Ready(());
        }
        if !busy {
            break;
        }
    }
    let Some(deadline) = st.conn.poll_timeout() else {
        *sleep = None;
        return Poll::Pending;
    };
    let timer = sleep.get_or_insert_with(|| crate::engine::time::sleep_until(deadline));
    // QUIC's deadline moves on almost every turn (each packet pushes the idle timeout
    // later). Re-arming costs a timer entry and a message to a loop, so a later deadline
    // keeps the armed one: when that fires, the turn finds nothing due and arms the new
    // one. Only an earlier deadline, or an armed one already past (by the turn's clock
    // reading), re-arms now.
    if deadline < timer.deadline() || timer.deadline() <= now {
        timer.reset(deadline);
    }
    if Pin::new(timer).poll(cx).is_ready() {
        // Due already: run again at once.
        cx.waker().wake_by_ref();
    }
    Poll::Pending
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The task that serves a server connection holds `serve` and the driver once each:
    /// an async fn that pinned its `serve` argument kept room for it twice (2.5 KB more
    /// per idle connection with h3's future).
    #[test]
    fn alongside_holds_serve_and_the_driver_once() {
        type Server = super::super::QuicEndpoint;
        fn returned_size<A, B, R>(_: fn(A, B) -> R) -> usize {
            std::mem::size_of::<R>()
        }
        fn task_size<F: Future<Output = ()>>(_: &F) -> usize {
            returned_size(alongside::<Server, F>)
        }
        let big = [0u8; 1000];
        let serve = poll_fn(move |_| Poll::Ready(big.len()).map(|_| ()));
        let task = task_size(&serve);
        let serve = std::mem::size_of_val(&serve);
        let driver = std::mem::size_of::<Driver<Server>>();
        assert!(
            task <= serve + driver + 16,
            "{task} B for a {serve} B future and a {driver} B driver"
        );
    }
}
