//! Idle HTTP/1 connections per (scheme, authority): keep-alive reuse, a bound per host,
//! idle expiry (checked on checkout and by a reaper task while anything is idle).
//!
//! An idle connection is driven by nobody; on checkout its socket is looked at once,
//! which notices a server that closed it meanwhile. A connection in use is a [`Pooled`]:
//! it knows its pool, and goes back to it when its response ends cleanly.

use super::body::Wire;
use super::conn::Http1Conn;
use super::connect::{Connection, Key};
use super::error::Error;
use super::h2::H2Conn;
use bytes::BytesMut;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// FNV-1a: keys are short and hashed per byte (`Authority` hashes case-insensitively one
/// byte at a time), where SipHash's per-call cost dominates. Keys come from the client's
/// own requests, not from peers.
#[derive(Default)]
pub(crate) struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

type FnvMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

/// A connection out of its pool (carrying an exchange), and the way back.
pub(crate) struct Pooled<Io> {
    pub conn: Http1Conn<Io>,
    key: Key,
    home: Weak<IdlePool<Io>>,
    idle_since: Instant,
}

impl<Io> Pooled<Io> {
    /// A new connection for `key`, to go back to `home` when done.
    pub fn new(conn: Http1Conn<Io>, key: Key, home: &Arc<IdlePool<Io>>) -> Box<Pooled<Io>> {
        Box::new(Pooled {
            conn,
            key,
            home: Arc::downgrade(home),
            idle_since: Instant::now(),
        })
    }
}

impl<Io: Connection> Pooled<Io> {
    /// Back to the pool as it came out, no exchange started on it.
    pub fn unused(self: Box<Self>) {
        if let Some(pool) = self.home.upgrade() {
            pool.put(self);
        }
    }
}

impl<Io: Connection> Wire for Pooled<Io> {
    fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<Result<usize, Error>> {
        self.conn.read_body(cx, buf)
    }

    /// Back to the pool if the exchange left the connection clean; else closed.
    fn finish(mut self: Box<Self>, rbuf: BytesMut) {
        if self.conn.finish(rbuf) {
            if let Some(pool) = self.home.upgrade() {
                pool.put(self);
            }
        }
    }
}

/// The idle connections of one client.
pub(crate) struct IdlePool<Io> {
    idle: Mutex<FnvMap<Key, Vec<Box<Pooled<Io>>>>>,
    max_idle_per_host: usize,
    idle_timeout: Option<Duration>,
    reaping: AtomicBool,
    /// HTTP/2 connections: one shared per key (or one being made, which others await).
    h2: Mutex<FnvMap<Key, H2Entry>>,
}

enum H2Entry {
    Ready(H2Conn),
    /// A connection by prior knowledge is being made; these requests wait for it.
    Connecting(Vec<Waker>),
}

/// What a request gets when it asks for the key's HTTP/2 connection.
pub(crate) enum H2Claim<Io: Connection> {
    Ready(H2Conn),
    /// Nobody is connecting: this request makes the connection and hands it over.
    Connect(ConnectGuard<Io>),
}

/// The right (and duty) to make the key's HTTP/2 connection; dropped unfulfilled, the
/// waiters are woken to try themselves.
pub(crate) struct ConnectGuard<Io: Connection> {
    pool: Arc<IdlePool<Io>>,
    key: Key,
    done: bool,
}

impl<Io: Connection> ConnectGuard<Io> {
    /// Shares `conn` as the key's connection and wakes the requests waiting for it.
    pub fn fulfill(mut self, conn: &H2Conn) {
        self.done = true;
        let entry = H2Entry::Ready(conn.clone());
        let old = self.pool.h2_lock().insert(self.key.clone(), entry);
        wake_waiters(old);
    }
}

impl<Io: Connection> Drop for ConnectGuard<Io> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let old = {
            let mut map = self.pool.h2_lock();
            match map.get(&self.key) {
                Some(H2Entry::Connecting(_)) => map.remove(&self.key),
                _ => None,
            }
        };
        wake_waiters(old);
    }
}

fn wake_waiters(entry: Option<H2Entry>) {
    if let Some(H2Entry::Connecting(waiters)) = entry {
        waiters.into_iter().for_each(Waker::wake);
    }
}

impl<Io: Connection> IdlePool<Io> {
    pub fn new(max_idle_per_host: usize, idle_timeout: Option<Duration>) -> IdlePool<Io> {
        IdlePool {
            idle: Mutex::new(FnvMap::default()),
            max_idle_per_host,
            idle_timeout,
            reaping: AtomicBool::new(false),
            h2: Mutex::new(FnvMap::default()),
        }
    }

    fn h2_lock(&self) -> std::sync::MutexGuard<'_, FnvMap<Key, H2Entry>> {
        self.h2.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The key's HTTP/2 connection, if one is shared and still takes requests.
    pub fn h2_get(&self, key: &Key) -> Option<H2Conn> {
        let map = self.h2_lock();
        match map.get(key) {
            Some(H2Entry::Ready(c)) if c.is_usable() => Some(c.clone()),
            _ => None,
        }
    }

    /// Whether the key has spoken HTTP/2 (its spent connection is kept as the mark), so
    /// its next connection is made once for all requests, as with prior knowledge.
    pub fn h2_known(&self, key: &Key) -> bool {
        self.h2_lock().contains_key(key)
    }

    /// Shares `conn` (made by ALPN) as the key's HTTP/2 connection.
    pub fn h2_put(&self, key: &Key, conn: &H2Conn) {
        let old = self
            .h2_lock()
            .insert(key.clone(), H2Entry::Ready(conn.clone()));
        wake_waiters(old);
    }

    /// For prior knowledge (or a key known to speak HTTP/2): the key's connection, or the
    /// duty to make it, or (pending) a wait while another request makes it.
    pub fn poll_h2_claim(self: &Arc<Self>, key: &Key, cx: &mut Context<'_>) -> Poll<H2Claim<Io>> {
        let mut map = self.h2_lock();
        match map.get_mut(key) {
            Some(H2Entry::Ready(c)) if c.is_usable() => {
                return Poll::Ready(H2Claim::Ready(c.clone()))
            }
            Some(H2Entry::Connecting(waiters)) => {
                if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
                    waiters.push(cx.waker().clone());
                }
                return Poll::Pending;
            }
            _ => {}
        }
        map.insert(key.clone(), H2Entry::Connecting(Vec::new()));
        Poll::Ready(H2Claim::Connect(ConnectGuard {
            pool: self.clone(),
            key: key.clone(),
            done: false,
        }))
    }

    fn expired(&self, c: &Pooled<Io>, now: Instant) -> bool {
        self.idle_timeout
            .is_some_and(|t| now.saturating_duration_since(c.idle_since) >= t)
    }

    /// The most recently idled live connection for `key`, polled once with `cx`.
    pub fn checkout(&self, key: &Key, cx: &mut Context<'_>) -> Option<Box<Pooled<Io>>> {
        loop {
            let mut c = {
                let mut idle = self.idle.lock().unwrap();
                let list = idle.get_mut(key)?;
                let c = list.pop();
                if list.is_empty() {
                    idle.remove(key);
                }
                c?
            };
            if self.expired(&c, Instant::now()) {
                // Every older one has expired too.
                let rest = self.idle.lock().unwrap().remove(key);
                drop((c, rest));
                return None;
            }
            // A server that closed the connection while it sat idle is noticed here.
            if !c.conn.is_idle_alive(cx) {
                continue;
            }
            return Some(c);
        }
    }

    /// Keeps `c` for reuse (over the bound, the oldest idle one is closed).
    fn put(self: Arc<Self>, mut c: Box<Pooled<Io>>) {
        if self.max_idle_per_host == 0 {
            return;
        }
        c.idle_since = Instant::now();
        let evicted = {
            let mut idle = self.idle.lock().unwrap();
            let list = idle.entry(c.key.clone()).or_default();
            list.push(c);
            if list.len() > self.max_idle_per_host {
                Some(list.remove(0))
            } else {
                None
            }
        };
        drop(evicted);
        self.start_reaper();
    }

    /// Closes expired idle connections every half idle timeout while any are idle.
    fn start_reaper(self: Arc<Self>) {
        let Some(timeout) = self.idle_timeout else {
            return;
        };
        if self.reaping.load(Ordering::Relaxed) || self.reaping.swap(true, Ordering::AcqRel) {
            return;
        }
        let period = (timeout / 2).max(Duration::from_millis(1));
        let weak = Arc::downgrade(&self);
        drop(self);
        drop(crate::engine::runtime::spawn(async move {
            loop {
                crate::engine::time::sleep(period).await;
                let Some(pool) = weak.upgrade() else { return };
                if pool.reap() {
                    continue;
                }
                pool.reaping.store(false, Ordering::Release);
                // A connection that went idle meanwhile restarts the reaper only if this
                // one is really gone.
                if pool.idle.lock().unwrap().is_empty() || pool.reaping.swap(true, Ordering::AcqRel)
                {
                    return;
                }
            }
        }));
    }

    /// Drops expired connections; true if any connection is still idle.
    fn reap(&self) -> bool {
        let now = Instant::now();
        let mut expired = Vec::new();
        let left = {
            let mut idle = self.idle.lock().unwrap();
            idle.retain(|_, list| {
                let mut i = 0;
                while i < list.len() {
                    if self.expired(&list[i], now) {
                        expired.push(list.remove(i));
                    } else {
                        i += 1;
                    }
                }
                !list.is_empty()
            });
            !idle.is_empty()
        };
        drop(expired);
        left
    }

    /// Connections now kept, all hosts: idle HTTP/1 ones and shared HTTP/2 ones (for
    /// tests and diagnostics).
    pub fn idle_count(&self) -> usize {
        let h2 = self
            .h2_lock()
            .values()
            .filter(|e| matches!(e, H2Entry::Ready(c) if c.is_usable()))
            .count();
        h2 + self
            .idle
            .lock()
            .unwrap()
            .values()
            .map(Vec::len)
            .sum::<usize>()
    }
}
