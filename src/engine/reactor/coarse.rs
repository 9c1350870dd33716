//! Long timeouts that share a loop timer.
//!
//! Most timeouts are cancelled long before their deadline: a request's first-byte limit,
//! a connect limit, a caller's `timeout(30 s, ...)` around a call that takes microseconds.
//! Arming each on the loop would cost an allocation, a message to the loop, a heap entry
//! and a free on the loop's thread, per request. Here a deadline is rounded up to a slot
//! (a power of two of nanoseconds, at most 1/64 of the duration and at most about a
//! second); the first waiter of a slot arms one loop timer for it, the
//! others just add their waker to its list, and a cancelled waiter unlinks itself under
//! one lock, with no allocation once the table has grown to the peak of live waiters.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

/// Timeouts shorter than 64 × 2^this nanoseconds (about 67 ms) get a timer of their own:
/// their slot would be under a millisecond, too fine to be shared.
const MIN_SHIFT: u32 = 20;
/// A shared timeout fires at most 2^this nanoseconds (about a second) after its deadline;
/// a timeout that long keeps a slot (and a loop timer) per second of its duration.
const MAX_LATENESS_SHIFT: u32 = 30;

/// The slot width for a timeout of `duration`, as a shift; `None` when it should keep a
/// timer of its own.
pub(crate) fn slot_shift(duration: Duration) -> Option<u32> {
    let slice = (duration.as_nanos() / 64).min(u64::MAX as u128) as u64;
    let shift = slice.checked_ilog2()?;
    (shift >= MIN_SHIFT).then_some(shift.min(MAX_LATENESS_SHIFT))
}

/// A waiter's place in the table, held by its `Sleep`.
#[derive(Debug)]
pub(crate) struct Ticket {
    index: u32,
    generation: u32,
}

/// What a registration asks of its caller: a new slot needs a loop timer.
pub(crate) struct Arm {
    pub at: Instant,
    pub waker: Waker,
}

/// A loop's shared timeouts.
pub(crate) struct CoarseTimers {
    epoch: Instant,
    inner: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    /// Live slots by their firing time (nanoseconds since `epoch`).
    slots: BTreeMap<u64, SlotRef>,
    /// The slot registered into last: most registrations go to the same one as the last.
    recent: Option<(u64, SlotRef)>,
    /// Each slot's waiters are a ring through `prev`/`next`, around a node of the slot's
    /// own (which has no waker), so a waiter unlinks itself without finding its slot.
    nodes: Vec<Node>,
    free: Vec<u32>,
    next_slot_id: u64,
}

#[derive(Clone, Copy, PartialEq)]
struct SlotRef {
    /// Tells this slot from an earlier one at the same time (fired, then armed again by
    /// a waiter that raced the firing): a loop timer fires only the slot it armed.
    id: u64,
    ring: u32,
}

struct Node {
    generation: u32,
    prev: u32,
    next: u32,
    waker: Option<Waker>,
}

/// The waker of a slot's loop timer: firing it wakes the slot's waiters.
struct SlotFire {
    timers: Arc<CoarseTimers>,
    at: u64,
    id: u64,
}

impl Wake for SlotFire {
    fn wake(self: Arc<Self>) {
        self.timers.fire(self.at, self.id);
    }
}

impl CoarseTimers {
    pub fn new() -> CoarseTimers {
        CoarseTimers {
            epoch: Instant::now(),
            inner: Mutex::new(Table::default()),
        }
    }

    /// Adds `waker` to the slot `deadline` rounds up to (slots 2^`shift` ns wide). When
    /// the slot is new, the caller must arm a loop timer with the returned `Arm`.
    pub fn register(
        self: &Arc<Self>,
        deadline: Instant,
        shift: u32,
        waker: &Waker,
    ) -> (Ticket, Option<Arm>) {
        let nanos = deadline.saturating_duration_since(self.epoch).as_nanos();
        let width = 1u128 << shift;
        let at = (nanos.div_ceil(width) * width).min(u64::MAX as u128) as u64;
        let mut t = self.inner.lock().unwrap();
        let (slot, new) = t.slot_at(at);
        let index = t.node(Some(waker.clone()));
        t.link_after(slot.ring, index);
        let ticket = Ticket {
            index,
            generation: t.nodes[index as usize].generation,
        };
        drop(t);
        let arm = new.then(|| Arm {
            at: self.epoch + Duration::from_nanos(at),
            waker: Waker::from(Arc::new(SlotFire {
                timers: self.clone(),
                at,
                id: slot.id,
            })),
        });
        (ticket, arm)
    }

    /// Replaces the ticket's waker; false if its slot has fired (the ticket is spent).
    pub fn update(&self, ticket: &Ticket, waker: &Waker) -> bool {
        let mut t = self.inner.lock().unwrap();
        match t.live(ticket) {
            Some(node) => {
                if !node.waker.as_ref().is_some_and(|old| old.will_wake(waker)) {
                    node.waker = Some(waker.clone());
                }
                true
            }
            None => false,
        }
    }

    /// Takes the waiter out of its slot (a no-op once the slot has fired).
    pub fn cancel(&self, ticket: &Ticket) {
        let mut t = self.inner.lock().unwrap();
        let Some(node) = t.live(ticket) else { return };
        let (prev, next) = (node.prev, node.next);
        t.nodes[prev as usize].next = next;
        t.nodes[next as usize].prev = prev;
        let waker = t.release(ticket.index);
        drop(t);
        drop(waker);
    }

    /// The loop timer of slot `at` fired: wakes its waiters.
    fn fire(&self, at: u64, id: u64) {
        let mut wake = Vec::new();
        {
            let mut t = self.inner.lock().unwrap();
            if t.slots.get(&at).is_none_or(|s| s.id != id) {
                return;
            }
            let slot = t.slots.remove(&at).expect("just found");
            if t.recent.is_some_and(|(_, r)| r == slot) {
                t.recent = None;
            }
            let mut i = t.nodes[slot.ring as usize].next;
            while i != slot.ring {
                let next = t.nodes[i as usize].next;
                wake.extend(t.release(i));
                i = next;
            }
            t.release(slot.ring);
        }
        for w in wake {
            w.wake();
        }
    }

    #[cfg(test)]
    fn counts(&self) -> (usize, usize) {
        let t = self.inner.lock().unwrap();
        let slots = t.slots.len();
        (slots, t.nodes.len() - t.free.len() - slots)
    }
}

impl Table {
    /// The slot firing at `at`, and whether it was just made (it then needs a timer).
    fn slot_at(&mut self, at: u64) -> (SlotRef, bool) {
        if let Some((recent_at, slot)) = self.recent {
            if recent_at == at {
                return (slot, false);
            }
        }
        let (slot, new) = match self.slots.get(&at) {
            Some(slot) => (*slot, false),
            None => {
                let ring = self.node(None);
                let slot = SlotRef {
                    id: self.next_slot_id,
                    ring,
                };
                self.next_slot_id += 1;
                self.slots.insert(at, slot);
                (slot, true)
            }
        };
        self.recent = Some((at, slot));
        (slot, new)
    }

    /// A free node holding `waker`, linked to itself.
    fn node(&mut self, waker: Option<Waker>) -> u32 {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.nodes.push(Node {
                    generation: 0,
                    prev: 0,
                    next: 0,
                    waker: None,
                });
                (self.nodes.len() - 1) as u32
            }
        };
        let node = &mut self.nodes[index as usize];
        node.prev = index;
        node.next = index;
        node.waker = waker;
        index
    }

    fn link_after(&mut self, ring: u32, index: u32) {
        let next = self.nodes[ring as usize].next;
        self.nodes[index as usize].prev = ring;
        self.nodes[index as usize].next = next;
        self.nodes[next as usize].prev = index;
        self.nodes[ring as usize].next = index;
    }

    /// The ticket's node while its slot has not fired (a slot's own node has no waker and
    /// no ticket).
    fn live(&mut self, ticket: &Ticket) -> Option<&mut Node> {
        self.nodes
            .get_mut(ticket.index as usize)
            .filter(|n| n.generation == ticket.generation && n.waker.is_some())
    }

    /// Frees a node (its ticket goes stale) and hands back its waker.
    fn release(&mut self, index: u32) -> Option<Waker> {
        let node = &mut self.nodes[index as usize];
        node.generation = node.generation.wrapping_add(1);
        self.free.push(index);
        node.waker.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::counting_waker;

    #[test]
    fn slot_widths_follow_the_duration() {
        assert_eq!(slot_shift(Duration::from_millis(10)), None);
        assert_eq!(slot_shift(Duration::from_millis(60)), None);
        // 100 ms / 64 = 1.56 ms: slots of 2^20 ns (1.05 ms).
        assert_eq!(slot_shift(Duration::from_millis(100)), Some(20));
        // 30 s / 64 = 469 ms: slots of 2^28 ns (268 ms).
        assert_eq!(slot_shift(Duration::from_secs(30)), Some(28));
        // An hour, or for ever: at most 2^30 ns (1.07 s) late.
        assert_eq!(slot_shift(Duration::from_secs(3600)), Some(30));
        assert_eq!(slot_shift(Duration::MAX), Some(MAX_LATENESS_SHIFT));
    }

    #[test]
    fn waiters_of_a_slot_share_one_loop_timer_and_fire_together() {
        let timers = Arc::new(CoarseTimers::new());
        let base = timers.epoch + Duration::from_secs(10);
        let (count, waker) = counting_waker();
        let (a, arm) = timers.register(base, 20, &waker);
        let arm = arm.expect("the first waiter arms the slot");
        // Rounded up to the slot's end, never early, less than a slot late.
        assert!(arm.at >= base && arm.at - base < Duration::from_nanos(1 << 20));
        let (b, again) = timers.register(base + Duration::from_nanos(10), 20, &waker);
        assert!(again.is_none(), "a second waiter armed its own timer");
        let (c, _) = timers.register(base + Duration::from_millis(5), 20, &waker);
        assert_eq!(timers.counts(), (2, 3));
        arm.waker.wake();
        assert_eq!(count.wakes(), 2);
        assert_eq!(timers.counts(), (1, 1));
        // Spent tickets are refused; the other slot's is not.
        assert!(!timers.update(&a, &waker) && !timers.update(&b, &waker));
        assert!(timers.update(&c, &waker));
        timers.cancel(&a);
        assert_eq!(timers.counts(), (1, 1));
    }

    #[test]
    fn a_cancelled_waiter_is_not_woken_and_its_entry_is_reused() {
        let timers = Arc::new(CoarseTimers::new());
        let at = timers.epoch + Duration::from_secs(1);
        let (kept, kept_waker) = counting_waker();
        let (gone, gone_waker) = counting_waker();
        // Unlink from the head, the middle and the tail of the slot's ring.
        let (first, arm) = timers.register(at, 24, &gone_waker);
        let (middle, _) = timers.register(at, 24, &kept_waker);
        let (last, _) = timers.register(at, 24, &gone_waker);
        let (head, _) = timers.register(at, 24, &gone_waker);
        timers.cancel(&middle);
        timers.cancel(&head);
        timers.cancel(&first);
        let (again, _) = timers.register(at, 24, &kept_waker);
        assert_eq!(timers.counts(), (1, 2));
        assert_eq!(again.index, first.index, "a freed entry was not reused");
        assert!(
            !timers.update(&first, &gone_waker),
            "a stale ticket still works"
        );
        timers.cancel(&last);
        arm.unwrap().waker.wake();
        assert_eq!(gone.wakes(), 0);
        assert_eq!(kept.wakes(), 1);
        assert_eq!(timers.counts(), (0, 0));
    }

    #[test]
    fn a_slot_armed_again_after_firing_is_fired_only_by_its_own_timer() {
        let timers = Arc::new(CoarseTimers::new());
        let at = timers.epoch + Duration::from_secs(1);
        let (count, waker) = counting_waker();
        let (_, first) = timers.register(at, 20, &waker);
        let first = first.unwrap();
        first.waker.wake_by_ref();
        assert_eq!(count.wakes(), 1);
        // A waiter that raced the firing arms the same time again.
        let (_, second) = timers.register(at, 20, &waker);
        let second = second.expect("a fired slot is armed anew");
        first.waker.wake();
        assert_eq!(count.wakes(), 1, "the old timer fired the new slot");
        second.waker.wake();
        assert_eq!(count.wakes(), 2);
    }
}
