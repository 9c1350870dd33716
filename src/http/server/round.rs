//! A round's shared parts, whatever the protocol: the output buffer its responses are
//! encoded into before the one send, the round's clock and Date header (each read at most
//! once per round), and the one timer a connection keeps armed for its machine.

use crate::engine::time::Sleep;
use crate::proto::date::{format_http_date, DATE_LEN};
use crate::proto::shared::Clock;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

thread_local! {
    /// Per-thread buffer a round's responses are encoded into before the one send.
    static ROUND_OUTPUT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// The round's clock and Date header, each read at most once per round (a round
    /// lasts microseconds; pipelined responses share them).
    static ROUND_CLOCK: Cell<Option<Instant>> = const { Cell::new(None) };
    static ROUND_DATE: Cell<Option<[u8; DATE_LEN]>> = const { Cell::new(None) };
}

/// Now, as of this round (see `ROUND_CLOCK`).
fn round_now() -> Instant {
    ROUND_CLOCK.with(|c| match c.get() {
        Some(t) => t,
        None => {
            let t = Instant::now();
            c.set(Some(t));
            t
        }
    })
}

/// The Date header value, as of this round.
fn round_date() -> [u8; DATE_LEN] {
    ROUND_DATE.with(|c| match c.get() {
        Some(d) => d,
        None => {
            let d = http_date();
            c.set(Some(d));
            d
        }
    })
}

/// The machine's view of the round's time.
pub(crate) fn round_clock() -> Clock {
    Clock {
        now: round_now(),
        date: round_date,
    }
}

/// Runs one round of a connection's HTTP work with an empty output buffer, which the round
/// sends before it ends (`ConnState::drive`). The buffer is taken out of the thread-local
/// (not borrowed), so even a nested round could never see another connection's bytes.
pub(crate) fn with_round_output<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    let mut out = ROUND_OUTPUT.with(|o| o.take());
    out.clear();
    ROUND_CLOCK.with(|c| c.set(None));
    ROUND_DATE.with(|c| c.set(None));
    let r = f(&mut out);
    if out.capacity() <= 256 * 1024 {
        out.clear();
        ROUND_OUTPUT.with(|o| o.replace(out));
    }
    r
}

thread_local! {
    static CACHE: Cell<(u64, [u8; DATE_LEN])> = const { Cell::new((u64::MAX, [0; DATE_LEN])) };
}

/// The current IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), formatted at most once per
/// second per thread (each call still reads the clock: `SystemTime::now`, a vDSO call).
fn http_date() -> [u8; DATE_LEN] {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    CACHE.with(|cache| {
        let (secs, date) = cache.get();
        if secs == now {
            return date;
        }
        let date = format_http_date(now);
        cache.set((now, date));
        date
    })
}

/// Keeps one timer armed for a machine's deadline; it wakes `waker`.
///
/// A timer that fires early is fine (the machine re-arms it); one that fires late is not.
/// So with no deadline (a request in flight) the armed timer stays: dropping it would
/// cost a new one, an allocation and a message to the loop, at the next idle deadline,
/// on every request whose handler waits on I/O (a gateway's upstream, a database).
pub(crate) fn arm_timer(timer: &mut Option<Sleep>, deadline: Option<Instant>, waker: &Waker) {
    let Some(at) = deadline else {
        return;
    };
    if timer.as_ref().is_none_or(|t| t.deadline() > at) {
        *timer = Some(crate::engine::time::sleep_until(at));
    }
    if let Some(t) = timer.as_mut() {
        let mut cx = Context::from_waker(waker);
        if Pin::new(t).poll(&mut cx).is_ready() {
            *timer = None;
            waker.wake_by_ref();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_date_is_well_formed_and_cached() {
        let a = http_date();
        assert_eq!(a.len(), DATE_LEN);
        let s = std::str::from_utf8(&a).unwrap();
        assert!(s.ends_with(" GMT"));
        assert_eq!(&s[3..5], ", ");
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        // Equal to formatting now (or the second before, if the clock ticked).
        assert!(a == format_http_date(now) || a == format_http_date(now - 1));
        let (secs, cached) = CACHE.with(|c| c.get());
        assert!(secs == now || secs + 1 == now);
        assert_eq!(cached, a);
        let b = http_date();
        let later = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!(b == format_http_date(later) || later > now);
    }

    /// A request in flight (no deadline) keeps the idle timer armed, and a later deadline
    /// keeps the earlier timer: a keep-alive connection arms one timer per idle period,
    /// not one per request.
    #[test]
    fn a_timer_is_kept_while_no_deadline_applies_and_for_a_later_one() {
        crate::engine::runtime::run(async {
            let waker = std::task::Waker::noop();
            let first = Instant::now() + std::time::Duration::from_secs(60);
            let mut timer = None;
            arm_timer(&mut timer, Some(first), waker);
            assert_eq!(timer.as_ref().map(Sleep::deadline), Some(first));
            arm_timer(&mut timer, None, waker);
            assert_eq!(timer.as_ref().map(Sleep::deadline), Some(first));
            let later = first + std::time::Duration::from_secs(1);
            arm_timer(&mut timer, Some(later), waker);
            assert_eq!(timer.as_ref().map(Sleep::deadline), Some(first));
            let earlier = first - std::time::Duration::from_secs(30);
            arm_timer(&mut timer, Some(earlier), waker);
            assert_eq!(timer.as_ref().map(Sleep::deadline), Some(earlier));
        });
    }
}
