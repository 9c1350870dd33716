//! UDP: one shared socket read by its loop in batches, one logical connection per peer.
//!
//! The loop reads datagrams with recvmmsg, finds (or creates) the peer's connection and
//! queues the datagram in its inbox; the peer's round hands each to `on_data`. A peer's
//! sends are batched with sendmmsg at the end of its round. Peers that stay silent for
//! `udp_peer_idle_timeout` are closed; at most `udp_max_peers` are tracked at once.
//!
//! A handler that routes datagrams itself (a QUIC endpoint, by connection ID) offers a
//! [`DatagramHandler`] instead: the loop then hands it every datagram as it is read, with
//! the socket's [`UdpSender`] to answer through, and keeps no peer table, no inboxes and
//! no connection per peer.
//!
//! On Linux the socket asks for UDP_GRO (`Config::udp_gro`): a read may then carry several
//! datagrams of one peer coalesced, which are split again before the inbox, so `on_data`
//! still sees one datagram per call. `Conn::send_segments` queues equal-size datagrams as
//! one buffer, sent as one GSO entry (UDP_SEGMENT) of the sendmmsg batch while the socket
//! can (`Config::udp_gso`, probed at bind, turned off by the first send the kernel
//! refuses), else as separate datagrams.

use super::{ConnInner, Handler, Kind, EV_CLOSE, EV_OPEN, EV_READ};
use crate::engine::conn::output::Output;
use crate::engine::reactor::Source;
use crate::engine::runtime::{Config, ReadyCtx, Runtime};
use crate::engine::sys::socket;
use crate::engine::sys::udp::{self, OutDatagram};
use crate::engine::sys::{Event, Interest};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// Datagrams read per recvmmsg call.
const BATCH: usize = 16;
/// Read buffer size: the largest datagram, and the most a GRO read coalesces (64 KiB).
const MAX_DATAGRAM: usize = 65_536;
/// Most datagrams waiting in one peer's inbox; more are dropped (UDP may lose them anyway).
const MAX_INBOX: usize = 1024;

/// Takes a UDP binding's datagrams as the socket reads them, with no connection per peer:
/// for a protocol that routes datagrams itself (a QUIC endpoint routes by connection ID).
/// A binding's handler offers one through [`Handler::datagrams`]; the binding then keeps
/// no peer table, and the handler's `on_data` is not called.
pub trait DatagramHandler: Send + Sync {
    /// `datagram` arrived from `from` on the socket `socket` sends through. Runs on the
    /// thread that reads the socket, one call after another: hand slow work to a task.
    fn on_datagram(&self, socket: &UdpSender, from: SocketAddr, datagram: &[u8]);

    /// The binding stopped (removed, or its server ended): no more datagrams come. The
    /// socket stays open while [`UdpSender`]s of it are held, so drop them.
    fn on_socket_closed(&self, _socket: &UdpSender) {}
}

/// A UDP binding's socket, to send datagrams to any address: what a [`DatagramHandler`]
/// answers through. Cloning it is cheap; the socket closes when the binding has stopped
/// and the last clone is dropped.
#[derive(Clone)]
pub struct UdpSender(Arc<SocketInner>);

struct SocketInner {
    fd: OwnedFd,
    local: Option<SocketAddr>,
    /// Sends may carry several datagrams in one GSO entry (see `udp::send_batch`).
    gso: AtomicBool,
}

impl UdpSender {
    /// The address the socket is bound to.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.0.local
    }

    /// How many datagrams one [`UdpSender::send_segments_to`] carries in a single GSO send:
    /// as [`Conn::max_segments`](crate::Conn::max_segments).
    pub fn max_segments(&self) -> usize {
        if self.0.gso.load(Ordering::Relaxed) {
            udp::GSO_MAX_SEGMENTS
        } else {
            1
        }
    }

    /// Sends one datagram to `to` now. A full socket buffer drops it, as UDP may.
    pub fn send_to(&self, to: SocketAddr, data: &[u8]) -> io::Result<()> {
        self.send_batch(to, &[OutDatagram::single(data)], 1)
    }

    /// Sends `data` to `to` now as datagrams of `segment_size` bytes (the last may be
    /// shorter): one GSO send where the socket can, else one datagram each, as
    /// [`Conn::send_segments`](crate::Conn::send_segments) queues them. Empty `data`
    /// sends nothing.
    ///
    /// Errors: `InvalidInput` if `segment_size` is 0 or larger than a UDP datagram can be.
    pub fn send_segments_to(
        &self,
        to: SocketAddr,
        data: &[u8],
        segment_size: usize,
    ) -> io::Result<()> {
        udp::check_segment_size(segment_size)?;
        if data.is_empty() {
            return Ok(());
        }
        let count = data.len().div_ceil(segment_size);
        let gso = self.0.gso.load(Ordering::Relaxed);
        if count == 1
            || (gso && count <= udp::GSO_MAX_SEGMENTS && data.len() <= udp::MAX_UDP_PAYLOAD)
        {
            // One entry: a QUIC transmit (at most `max_segments` datagrams) needs no list.
            let entry = OutDatagram {
                data,
                segment_size: segment_size.min(data.len()),
            };
            return self.send_batch(to, &[entry], count);
        }
        let mut entries = Vec::new();
        udp::push_segmented(&mut entries, data, segment_size, gso);
        self.send_batch(to, &entries, count)
    }

    /// Whether both send through the same socket.
    pub fn same_socket(&self, other: &UdpSender) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    fn send_batch(
        &self,
        to: SocketAddr,
        entries: &[OutDatagram<'_>],
        count: usize,
    ) -> io::Result<()> {
        let sent = udp::send_batch(self.0.fd.as_raw_fd(), to, entries, &self.0.gso)?;
        if sent < count {
            tracing::debug!(dropped = count - sent, "UDP send buffer full");
        }
        Ok(())
    }
}

pub(crate) struct UdpSocketSource {
    socket: UdpSender,
    handler: Arc<dyn Handler>,
    peers: Mutex<HashMap<SocketAddr, Arc<ConnInner>>>,
    /// The read slots, `BATCH` of `MAX_DATAGRAM` bytes in one allocation (made on the first
    /// read): at 1 MiB it is above malloc's mmap threshold, so its pages are untouched zeros
    /// until the kernel writes them, and a socket that only ever reads 1,200-byte datagrams
    /// keeps a page per slot resident, not 64 KiB.
    bufs: Mutex<Box<[u8]>>,
    /// When the next idle sweep is due and when the armed retry fires (ms since epoch).
    sweep_at: AtomicU64,
    retry_at: AtomicU64,
    epoch: Instant,
    me: Weak<UdpSocketSource>,
}

impl UdpSocketSource {
    /// A source reading `fd`, with UDP_GRO and GSO where `config` asks and the kernel can.
    pub fn new(fd: OwnedFd, handler: Arc<dyn Handler>, config: &Config) -> Arc<UdpSocketSource> {
        let gro = config.udp_gro && udp::set_udp_gro(fd.as_raw_fd());
        let gso = config.udp_gso && udp::udp_gso_supported(fd.as_raw_fd());
        tracing::debug!(gro, gso, "UDP socket offloads");
        let local = socket::local_addr(fd.as_raw_fd());
        Arc::new_cyclic(|me| UdpSocketSource {
            socket: UdpSender(Arc::new(SocketInner {
                fd,
                local,
                gso: AtomicBool::new(gso),
            })),
            handler,
            peers: Mutex::new(HashMap::new()),
            bufs: Mutex::new(Box::default()),
            sweep_at: AtomicU64::new(0),
            retry_at: AtomicU64::new(0),
            epoch: Instant::now(),
            me: me.clone(),
        })
    }

    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        self.socket.0.fd.as_raw_fd()
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn sweep(&self, idle: Duration) {
        let cutoff = self.now_ms().saturating_sub(idle.as_millis() as u64);
        let peers = self.peers.lock().unwrap();
        for conn in peers.values() {
            if let Some(link) = &conn.udp {
                if link.last_active.load(Ordering::Relaxed) < cutoff {
                    conn.notify(EV_CLOSE);
                }
            }
        }
    }

    /// Queues a read's datagrams in the inbox of `from`'s connection (made for a new
    /// peer while the table has room) and schedules its round.
    fn to_peer<'a>(
        self: &Arc<Self>,
        ctx: &ReadyCtx<'_>,
        from: SocketAddr,
        datagrams: impl Iterator<Item = &'a [u8]>,
        now: u64,
    ) {
        let mut peers = self.peers.lock().unwrap();
        let conn = match peers.get(&from) {
            Some(c) => c.clone(),
            None => {
                if peers.len() >= ctx.rt.config.udp_max_peers {
                    tracing::debug!(peer = %from, "UDP peer table full; datagram dropped");
                    return;
                }
                let link = PeerLink {
                    source: self.clone(),
                    peer: from,
                    inbox: Mutex::new(VecDeque::new()),
                    last_active: AtomicU64::new(now),
                };
                let c = ConnInner::new(
                    ctx.rt.clone(),
                    ctx.lp.clone(),
                    None,
                    self.raw_fd(),
                    Kind::Udp,
                    self.handler.clone(),
                    Some(from),
                    self.socket.local_addr(),
                    Some(link),
                    EV_OPEN,
                );
                peers.insert(from, c.clone());
                c
            }
        };
        drop(peers);
        let link = conn.udp.as_ref().unwrap();
        link.last_active.store(now, Ordering::Relaxed);
        {
            // A GRO read holds several datagrams: each goes in on its own.
            let mut inbox = link.inbox.lock().unwrap();
            for datagram in datagrams {
                if inbox.len() < MAX_INBOX {
                    inbox.push_back(datagram.to_vec());
                }
            }
        }
        conn.notify(EV_READ);
    }
}

/// A peer connection's tie to its shared socket.
pub(crate) struct PeerLink {
    source: Arc<UdpSocketSource>,
    peer: SocketAddr,
    inbox: Mutex<VecDeque<Vec<u8>>>,
    last_active: AtomicU64,
}

impl PeerLink {
    pub fn next_datagram(&self) -> Option<Vec<u8>> {
        self.inbox.lock().unwrap().pop_front()
    }

    /// How many datagrams one GSO send may carry now: `udp::GSO_MAX_SEGMENTS`, or 1
    /// without GSO.
    pub fn max_segments(&self) -> usize {
        self.source.socket.max_segments()
    }

    /// Sends every queued datagram to the peer; what the socket refuses is dropped, as UDP may.
    pub fn send_all(&self, out: &mut Output) {
        let queued = out.take_datagrams();
        if queued.is_empty() {
            return;
        }
        let sender = &self.source.socket;
        let gso = sender.0.gso.load(Ordering::Relaxed);
        let mut entries = Vec::with_capacity(queued.len());
        for q in &queued {
            udp::push_segmented(&mut entries, &q.data, q.segment_size, gso);
        }
        let total = queued
            .iter()
            .map(|q| match q.segment_size {
                0 => 1,
                s => q.data.len().div_ceil(s).max(1),
            })
            .sum::<usize>();
        if let Err(e) = sender.send_batch(self.peer, &entries, total) {
            tracing::debug!(error = %e, peer = %self.peer, "UDP send failed");
        }
    }

    /// Removes this peer from its socket's table (on close).
    pub fn forget(&self) {
        let mut peers = self.source.peers.lock().unwrap();
        if peers
            .get(&self.peer)
            .is_some_and(|c| c.udp.as_ref().is_some_and(|l| std::ptr::eq(&**l, self)))
        {
            peers.remove(&self.peer);
        }
    }
}

impl Source<Runtime> for UdpSocketSource {
    fn ready(&self, _ev: Event, ctx: &mut ReadyCtx<'_>) {
        let cfg = &ctx.rt.config;
        let Some(me) = self.me.upgrade() else { return };
        let direct = self.handler.datagrams();
        let mut arena = self.bufs.lock().unwrap();
        if arena.is_empty() {
            *arena = vec![0u8; BATCH * MAX_DATAGRAM].into_boxed_slice();
        }
        let mut slots = arena.chunks_mut(MAX_DATAGRAM);
        let mut bufs: [&mut [u8]; BATCH] = std::array::from_fn(|_| slots.next().unwrap());
        let mut got = Vec::with_capacity(BATCH);
        // Bounded per event so one flooded socket cannot starve the loop.
        for _ in 0..64 {
            got.clear();
            match udp::recv_batch(self.raw_fd(), &mut bufs, &mut got) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::debug!(error = %e, "UDP receive failed");
                    break;
                }
            }
            let now = self.now_ms();
            for (i, d) in got.iter().enumerate() {
                let Some(from) = d.from else { continue };
                // A GRO read holds several datagrams: each is handed on alone.
                let datagrams = d.datagrams(bufs[i]);
                match direct {
                    Some(h) => {
                        for datagram in datagrams {
                            let call = || h.on_datagram(&self.socket, from, datagram);
                            if catch_unwind(AssertUnwindSafe(call)).is_err() {
                                tracing::error!("a datagram handler panicked");
                            }
                        }
                    }
                    None => me.to_peer(ctx, from, datagrams, now),
                }
            }
            if got.len() < bufs.len() {
                break;
            }
        }
        drop(arena);
        // Sweep idle peers at most every half timeout, and keep one retry armed for that
        // while there are peers (the loop's retry is a synthetic readable event).
        let now = self.now_ms();
        let half = (cfg.udp_peer_idle_timeout / 2).max(Duration::from_millis(1));
        if now >= self.sweep_at.load(Ordering::Relaxed) {
            self.sweep(cfg.udp_peer_idle_timeout);
            self.sweep_at
                .store(now + half.as_millis() as u64, Ordering::Relaxed);
        }
        let has_peers = !self.peers.lock().unwrap().is_empty();
        if has_peers && now >= self.retry_at.load(Ordering::Relaxed) {
            self.retry_at
                .store(now + half.as_millis() as u64, Ordering::Relaxed);
            ctx.retry_at(Instant::now() + half);
        }
        ctx.lp.rearm(self.raw_fd(), ctx.token(), Interest::READ);
    }

    fn interest(&self) -> Interest {
        Interest::READ
    }

    fn abort(&self) {
        if let Some(h) = self.handler.datagrams() {
            h.on_socket_closed(&self.socket);
        }
        for conn in self.peers.lock().unwrap().values() {
            conn.notify(super::EV_ABORT);
        }
    }

    fn deregistered(&self) {
        // Nothing reads this socket any more: close its peers once their output is out.
        if let Some(h) = self.handler.datagrams() {
            h.on_socket_closed(&self.socket);
        }
        for conn in self.peers.lock().unwrap().values() {
            conn.notify(EV_CLOSE);
        }
    }
}
