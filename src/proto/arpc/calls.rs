//! One side's outgoing numbering and its calls in flight: the seq of each request, notify
//! and stream it starts, the calls waiting for a response (with the async bit the
//! response must repeat), and their deadlines. Timeouts are local: an expired call is
//! forgotten and its late response, like any response to no call, is dropped.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

/// A call not started: [`Calls`] already holds its maximum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Full;

struct Pending<T> {
    value: T,
    is_async: bool,
    deadline: Option<Instant>,
}

/// The calls one side of a connection has in flight; `T` is whatever waits for the answer.
pub(crate) struct Calls<T> {
    /// The last seq used: starts at 1 and is bumped before use, so the first is 2 (arpc's).
    last_seq: u64,
    max_pending: usize,
    pending: HashMap<u64, Pending<T>>,
    deadlines: BTreeSet<(Instant, u64)>,
}

impl<T> Calls<T> {
    /// No calls; at most `max_pending` at once.
    pub(crate) fn new(max_pending: usize) -> Calls<T> {
        Calls {
            last_seq: 1,
            max_pending,
            pending: HashMap::new(),
            deadlines: BTreeSet::new(),
        }
    }

    /// The seq of something that gets no response (a notify, a new stream).
    pub(crate) fn next_seq(&mut self) -> u64 {
        loop {
            self.last_seq = self.last_seq.wrapping_add(1);
            // After 2^64 frames a seq could come round to a call still waiting.
            if !self.pending.contains_key(&self.last_seq) {
                return self.last_seq;
            }
        }
    }

    /// Starts a call: the seq to send it with. `is_async` is the async bit it is sent
    /// with; `deadline`, when it is given up.
    pub(crate) fn start(
        &mut self,
        is_async: bool,
        deadline: Option<Instant>,
        value: T,
    ) -> Result<u64, Full> {
        if self.pending.len() >= self.max_pending {
            return Err(Full);
        }
        let seq = self.next_seq();
        if let Some(d) = deadline {
            self.deadlines.insert((d, seq));
        }
        self.pending.insert(
            seq,
            Pending {
                value,
                is_async,
                deadline,
            },
        );
        Ok(seq)
    }

    /// A response came with `seq` and async bit `is_async`: the call it answers, if one
    /// waits. A response whose async bit differs from its call's answers nothing (arpc
    /// looks in another table for it).
    pub(crate) fn complete(&mut self, seq: u64, is_async: bool) -> Option<T> {
        if self.pending.get(&seq)?.is_async != is_async {
            return None;
        }
        self.remove(seq)
    }

    /// Forgets a call (its caller stopped waiting).
    pub(crate) fn remove(&mut self, seq: u64) -> Option<T> {
        let p = self.pending.remove(&seq)?;
        if let Some(d) = p.deadline {
            self.deadlines.remove(&(d, seq));
        }
        Some(p.value)
    }

    /// The earliest deadline of a call in flight.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|&(d, _)| d)
    }

    /// Takes out every call whose deadline is at or before `now`.
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<T> {
        let mut due = Vec::new();
        while let Some(&(d, seq)) = self.deadlines.first() {
            if d > now {
                break;
            }
            self.deadlines.pop_first();
            if let Some(p) = self.pending.remove(&seq) {
                due.push(p.value);
            }
        }
        due
    }

    /// Takes out every call (the connection is gone).
    pub(crate) fn drain(&mut self) -> Vec<T> {
        self.deadlines.clear();
        self.pending.drain().map(|(_, p)| p.value).collect()
    }

    /// Calls in flight.
    pub(crate) fn len(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn first_seq_is_two_and_notifies_share_the_counter() {
        let mut c = Calls::new(8);
        assert_eq!(c.start(false, None, "a"), Ok(2));
        assert_eq!(c.next_seq(), 3);
        assert_eq!(c.start(true, None, "b"), Ok(4));
    }

    #[test]
    fn response_must_repeat_the_async_bit() {
        let mut c = Calls::new(8);
        let s = c.start(true, None, "a").unwrap();
        assert_eq!(c.complete(s, false), None, "sync response to an async call");
        assert_eq!(c.complete(s, true), Some("a"));
        assert_eq!(c.complete(s, true), None, "answered twice");
        assert_eq!(c.complete(999, false), None, "a response to no call");
    }

    #[test]
    fn deadlines_expire_in_order_and_late_responses_match_nothing() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut c = Calls::new(8);
        let a = c.start(false, Some(ms(5)), "a").unwrap();
        let b = c.start(false, Some(ms(1)), "b").unwrap();
        let _ = c.start(false, None, "c").unwrap();
        assert_eq!(c.next_deadline(), Some(ms(1)));
        assert_eq!(c.expire(ms(0)), Vec::<&str>::new());
        assert_eq!(c.expire(ms(1)), vec!["b"]);
        assert_eq!(c.next_deadline(), Some(ms(5)));
        assert_eq!(c.complete(b, false), None, "late reply");
        assert_eq!(c.remove(a), Some("a"));
        assert_eq!(c.next_deadline(), None);
        assert_eq!(c.len(), 1);
        assert_eq!(c.drain(), vec!["c"]);
    }

    #[test]
    fn max_pending_is_exact() {
        let mut c = Calls::new(2);
        c.start(false, None, 1).unwrap();
        let s = c.start(false, None, 2).unwrap();
        assert_eq!(c.start(false, None, 3), Err(Full));
        c.remove(s);
        assert!(c.start(false, None, 3).is_ok());
    }

    #[test]
    fn seq_skips_calls_still_waiting_when_it_wraps() {
        let mut c = Calls::new(8);
        c.last_seq = u64::MAX - 1;
        assert_eq!(c.start(false, None, "x"), Ok(u64::MAX));
        c.last_seq = u64::MAX - 1;
        assert_eq!(c.next_seq(), 0);
    }
}
