//! The upstream set: which one a request goes to (round-robin or least-outstanding),
//! requests in flight per upstream, and ejection after failures.

use super::config::{Balance, Upstream};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The upstreams and their health, shared by every clone of a gateway.
pub(super) struct Upstreams {
    members: Vec<Member>,
    balance: Balance,
    max_fails: u32,
    eject_for: Duration,
    /// The turn counter of round-robin (and of least-outstanding's ties).
    next: AtomicUsize,
    /// What `ejected_until` counts from.
    epoch: Instant,
}

struct Member {
    upstream: Upstream,
    in_flight: AtomicUsize,
    fails: AtomicU32,
    /// Milliseconds since `epoch` until which it gets no requests (0: never ejected).
    ejected_until: AtomicU64,
}

impl Upstreams {
    pub(super) fn new(
        upstreams: Vec<Upstream>,
        balance: Balance,
        max_fails: u32,
        eject_for: Duration,
    ) -> Upstreams {
        Upstreams {
            members: upstreams
                .into_iter()
                .map(|upstream| Member {
                    upstream,
                    in_flight: AtomicUsize::new(0),
                    fails: AtomicU32::new(0),
                    ejected_until: AtomicU64::new(0),
                })
                .collect(),
            balance,
            max_fails: max_fails.max(1),
            eject_for,
            next: AtomicUsize::new(0),
            epoch: Instant::now(),
        }
    }

    /// How many upstreams there are.
    pub(super) fn len(&self) -> usize {
        self.members.len()
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// The upstream for a request that has not tried those in `tried` yet (None when it
    /// tried them all): among the ones not ejected, or, when every one left is ejected,
    /// among those (a gateway with no live upstream still tries one rather than fail
    /// every request until an ejection ends).
    pub(super) fn pick(self: &Arc<Self>, tried: &[usize]) -> Option<InFlight> {
        let n = self.members.len();
        let now = self.now_ms();
        let untried = |i: &usize| !tried.contains(i);
        let live = |i: &usize| self.members[*i].ejected_until.load(Ordering::Relaxed) <= now;
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let turn = (0..n).map(|k| (start + k) % n);
        let choose = |only_live: bool| {
            let mut candidates = turn
                .clone()
                .filter(untried)
                .filter(|i| !only_live || live(i));
            match self.balance {
                Balance::RoundRobin => candidates.next(),
                Balance::LeastOutstanding => {
                    candidates.min_by_key(|i| self.members[*i].in_flight.load(Ordering::Relaxed))
                }
            }
        };
        let index = choose(true).or_else(|| choose(false))?;
        self.members[index]
            .in_flight
            .fetch_add(1, Ordering::Relaxed);
        Some(InFlight {
            set: self.clone(),
            index,
        })
    }
}

/// A request on an upstream: counts in its `in_flight` until dropped (with the
/// response's body, when there is one), and reports how the upstream did.
pub(crate) struct InFlight {
    set: Arc<Upstreams>,
    index: usize,
}

impl InFlight {
    pub(super) fn upstream(&self) -> &Upstream {
        &self.member().upstream
    }

    /// Which upstream of the set (for a retry to skip).
    pub(super) fn index(&self) -> usize {
        self.index
    }

    fn member(&self) -> &Member {
        &self.set.members[self.index]
    }

    /// The upstream answered: its failures start over.
    pub(super) fn succeeded(&self) {
        self.member().fails.store(0, Ordering::Relaxed);
    }

    /// The upstream failed; `max_fails` in a row eject it for `eject_for`.
    pub(super) fn failed(&self) {
        let member = self.member();
        let fails = member.fails.fetch_add(1, Ordering::Relaxed) + 1;
        if fails >= self.set.max_fails {
            member.fails.store(0, Ordering::Relaxed);
            let until = self.set.now_ms() + self.set.eject_for.as_millis() as u64;
            member.ejected_until.store(until.max(1), Ordering::Relaxed);
            tracing::warn!(upstream = %member.upstream, for_ = ?self.set.eject_for, "upstream ejected");
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.member().in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(n: usize, balance: Balance) -> Arc<Upstreams> {
        let ups = (0..n)
            .map(|i| Upstream::parse(&format!("http://127.0.0.1:{}", 9000 + i)).unwrap())
            .collect();
        Arc::new(Upstreams::new(ups, balance, 2, Duration::from_secs(60)))
    }

    #[test]
    fn round_robin_takes_turns_and_skips_what_a_request_tried() {
        let s = set(3, Balance::RoundRobin);
        let picks: Vec<_> = (0..6).map(|_| s.pick(&[]).unwrap().index()).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
        assert_eq!(s.pick(&[0, 1]).unwrap().index(), 2);
        assert!(s.pick(&[0, 1, 2]).is_none());
    }

    #[test]
    fn least_outstanding_prefers_the_idlest() {
        let s = set(3, Balance::LeastOutstanding);
        let a = s.pick(&[]).unwrap();
        let b = s.pick(&[]).unwrap();
        assert_ne!(a.index(), b.index());
        let c = s.pick(&[]).unwrap();
        let free = 3 - a.index() - b.index();
        assert_eq!(c.index(), free);
        drop(b);
        let held = [a.index(), c.index()];
        let d = s.pick(&[]).unwrap();
        assert!(!held.contains(&d.index()), "{} is busy", d.index());
    }

    #[test]
    fn failures_in_a_row_eject_and_a_success_forgives() {
        let s = set(2, Balance::RoundRobin);
        let first = s.pick(&[]).unwrap();
        assert_eq!(first.index(), 0);
        first.failed();
        first.succeeded();
        first.failed();
        // One failure since the success: still in.
        let picks: Vec<_> = (0..4).map(|_| s.pick(&[]).unwrap().index()).collect();
        assert_eq!(picks, [1, 0, 1, 0]);
        first.failed();
        let picks: Vec<_> = (0..4).map(|_| s.pick(&[]).unwrap().index()).collect();
        assert_eq!(picks, [1, 1, 1, 1]);
        // Every live one tried: the ejected one still gets the request.
        assert_eq!(s.pick(&[1]).unwrap().index(), 0);
    }
}
