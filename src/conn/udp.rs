//! UDP: one shared socket read by its loop in batches, one logical connection per peer.
//!
//! The loop reads datagrams with recvmmsg, finds (or creates) the peer's connection and
//! queues the datagram in its inbox; the peer's round hands each to `on_data`. A peer's
//! sends are batched with sendmmsg at the end of its round. Peers that stay silent for
//! `udp_peer_idle_timeout` are closed; at most `udp_max_peers` are tracked at once.
//!
//! On Linux the socket asks for UDP_GRO (`Config::udp_gro`): a read may then carry several
//! datagrams of one peer coalesced, which are split again before the inbox, so `on_data`
//! still sees one datagram per call. `Conn::send_segments` queues equal-size datagrams as
//! one buffer, sent as one GSO entry (UDP_SEGMENT) of the sendmmsg batch while the socket
//! can (`Config::udp_gso`, probed at bind, turned off by the first send the kernel
//! refuses), else as separate datagrams.

use super::{ConnInner, Handler, Kind, EV_CLOSE, EV_OPEN, EV_READ};
use crate::conn::output::Output;
use crate::reactor::Source;
use crate::runtime::{Config, ReadyCtx, Runtime};
use crate::sys::{socket, Event, Interest};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// Datagrams read per recvmmsg call.
const BATCH: usize = 16;
/// Read buffer size: the largest datagram, and the most a GRO read coalesces (64 KiB).
const MAX_DATAGRAM: usize = 65_536;
/// Most datagrams waiting in one peer's inbox; more are dropped (UDP may lose them anyway).
const MAX_INBOX: usize = 1024;

pub(crate) struct UdpSocketSource {
    fd: OwnedFd,
    handler: Arc<dyn Handler>,
    peers: Mutex<HashMap<SocketAddr, Arc<ConnInner>>>,
    /// The read slots, `BATCH` of `MAX_DATAGRAM` bytes in one allocation (made on the first
    /// read): at 1 MiB it is above malloc's mmap threshold, so its pages are untouched zeros
    /// until the kernel writes them, and a socket that only ever reads 1,200-byte datagrams
    /// keeps a page per slot resident, not 64 KiB.
    bufs: Mutex<Box<[u8]>>,
    /// Sends may carry several datagrams in one GSO entry (see `socket::send_batch`).
    gso: AtomicBool,
    /// When the next idle sweep is due and when the armed retry fires (ms since epoch).
    sweep_at: AtomicU64,
    retry_at: AtomicU64,
    epoch: Instant,
    me: Weak<UdpSocketSource>,
}

impl UdpSocketSource {
    /// A source reading `fd`, with UDP_GRO and GSO where `config` asks and the kernel can.
    pub fn new(fd: OwnedFd, handler: Arc<dyn Handler>, config: &Config) -> Arc<UdpSocketSource> {
        let gro = config.udp_gro && socket::set_udp_gro(fd.as_raw_fd());
        let gso = config.udp_gso && socket::udp_gso_supported(fd.as_raw_fd());
        tracing::debug!(gro, gso, "UDP socket offloads");
        Arc::new_cyclic(|me| UdpSocketSource {
            fd,
            handler,
            peers: Mutex::new(HashMap::new()),
            bufs: Mutex::new(Box::default()),
            gso: AtomicBool::new(gso),
            sweep_at: AtomicU64::new(0),
            retry_at: AtomicU64::new(0),
            epoch: Instant::now(),
            me: me.clone(),
        })
    }

    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
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
}

/// A peer connection's tie to its shared socket.
pub(crate) struct PeerLink {
    socket: Arc<UdpSocketSource>,
    peer: SocketAddr,
    inbox: Mutex<VecDeque<Vec<u8>>>,
    last_active: AtomicU64,
}

impl PeerLink {
    pub fn next_datagram(&self) -> Option<Vec<u8>> {
        self.inbox.lock().unwrap().pop_front()
    }

    /// How many datagrams one GSO send may carry now: `socket::GSO_MAX_SEGMENTS`, or 1
    /// without GSO.
    pub fn max_segments(&self) -> usize {
        if self.socket.gso.load(Ordering::Relaxed) {
            socket::GSO_MAX_SEGMENTS
        } else {
            1
        }
    }

    /// Sends every queued datagram to the peer; what the socket refuses is dropped, as UDP may.
    pub fn send_all(&self, out: &mut Output) {
        let queued = out.take_datagrams();
        if queued.is_empty() {
            return;
        }
        let gso = self.socket.gso.load(Ordering::Relaxed);
        let mut entries = Vec::with_capacity(queued.len());
        for q in &queued {
            socket::push_segmented(&mut entries, &q.data, q.segment_size, gso);
        }
        let total = queued
            .iter()
            .map(|q| match q.segment_size {
                0 => 1,
                s => q.data.len().div_ceil(s).max(1),
            })
            .sum::<usize>();
        match socket::send_batch(
            self.socket.fd.as_raw_fd(),
            self.peer,
            &entries,
            &self.socket.gso,
        ) {
            Ok(n) if n < total => {
                tracing::debug!(dropped = total - n, "UDP send buffer full")
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, peer = %self.peer, "UDP send failed"),
        }
    }

    /// Removes this peer from its socket's table (on close).
    pub fn forget(&self) {
        let mut peers = self.socket.peers.lock().unwrap();
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
            match socket::recv_batch(self.fd.as_raw_fd(), &mut bufs, &mut got) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::debug!(error = %e, "UDP receive failed");
                    break;
                }
            }
            let now = self.now_ms();
            for (i, d) in got.iter().enumerate() {
                let Some(from) = d.from else { continue };
                let mut peers = self.peers.lock().unwrap();
                let conn = match peers.get(&from) {
                    Some(c) => c.clone(),
                    None => {
                        if peers.len() >= cfg.udp_max_peers {
                            tracing::debug!(peer = %from, "UDP peer table full; datagram dropped");
                            continue;
                        }
                        let link = PeerLink {
                            socket: me.clone(),
                            peer: from,
                            inbox: Mutex::new(VecDeque::new()),
                            last_active: AtomicU64::new(now),
                        };
                        let c = ConnInner::new(
                            ctx.rt.clone(),
                            ctx.lp.clone(),
                            None,
                            self.fd.as_raw_fd(),
                            Kind::Udp,
                            self.handler.clone(),
                            Some(from),
                            socket::local_addr(self.fd.as_raw_fd()),
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
                    for datagram in d.datagrams(bufs[i]) {
                        if inbox.len() < MAX_INBOX {
                            inbox.push_back(datagram.to_vec());
                        }
                    }
                }
                conn.notify(EV_READ);
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
        ctx.lp
            .rearm(self.fd.as_raw_fd(), ctx.token(), Interest::READ);
    }

    fn interest(&self) -> Interest {
        Interest::READ
    }

    fn abort(&self) {
        for conn in self.peers.lock().unwrap().values() {
            conn.notify(super::EV_ABORT);
        }
    }

    fn deregistered(&self) {
        // Nothing reads this socket any more: close its peers once their output is out.
        for conn in self.peers.lock().unwrap().values() {
            conn.notify(EV_CLOSE);
        }
    }
}
