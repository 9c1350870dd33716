//! Timers driven by the event loops: [`sleep`], [`sleep_until`], [`timeout`], [`interval`].
//!
//! ```
//! use fibr::time::{interval, sleep, timeout};
//! use std::time::Duration;
//!
//! fibr::run(async {
//!     sleep(Duration::from_millis(5)).await;
//!     // A future that takes longer than its timeout gives `Elapsed`.
//!     let slow = sleep(Duration::from_secs(60));
//!     assert!(timeout(Duration::from_millis(5), slow).await.is_err());
//!     let mut ticks = interval(Duration::from_millis(5));
//!     for _ in 0..3 {
//!         ticks.tick().await;
//!     }
//! });
//! ```

use crate::engine::reactor::coarse::{self, CoarseTimers, Ticket};
use crate::engine::reactor::TimerEntry;
use crate::engine::runtime::{Command, Runtime};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// A future that completes at a deadline. Dropping it cancels the timer.
///
/// As small as it can be (a deadline and a pointer): every connection keeps one armed.
pub struct Sleep {
    deadline: Instant,
    entry: Option<Arc<TimerEntry>>,
}

/// Waits until `duration` has passed.
pub fn sleep(duration: Duration) -> Sleep {
    sleep_until(Instant::now() + duration)
}

/// Waits until `deadline`.
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        entry: None,
    }
}

impl Sleep {
    /// The instant this sleep completes at.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Moves the deadline (re-arming the timer).
    pub fn reset(&mut self, deadline: Instant) {
        if let Some(e) = self.entry.take() {
            e.cancel();
        }
        self.deadline = deadline;
    }

    /// True once the deadline has passed.
    pub fn is_elapsed(&self) -> bool {
        Instant::now() >= self.deadline
    }
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if let Some(e) = &self.entry {
            return e.poll(cx.waker());
        }
        if Instant::now() >= self.deadline {
            return Poll::Ready(());
        }
        let entry = TimerEntry::new(self.deadline, cx.waker().clone());
        Runtime::current()
            .pick_loop()
            .send(Command::Timer(entry.clone()));
        self.entry = Some(entry);
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(e) = &self.entry {
            e.cancel();
        }
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .finish()
    }
}

/// A timeout's timer. From about 67 ms up it joins the slot of a loop's shared timeouts
/// (`reactor::coarse`) and may fire up to 1/64 of its duration (at most about a second)
/// late; shorter, it is a [`Sleep`].
enum Limit {
    Own(Sleep),
    Shared(SharedSleep),
}

struct SharedSleep {
    deadline: Instant,
    shift: u32,
    waiting: Option<(Arc<CoarseTimers>, Ticket)>,
}

impl Limit {
    fn new(duration: Duration) -> Limit {
        let deadline = Instant::now() + duration;
        match coarse::slot_shift(duration) {
            None => Limit::Own(sleep_until(deadline)),
            Some(shift) => Limit::Shared(SharedSleep {
                deadline,
                shift,
                waiting: None,
            }),
        }
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self {
            Limit::Own(sleep) => Pin::new(sleep).poll(cx),
            Limit::Shared(shared) => shared.poll(cx.waker()),
        }
    }
}

impl SharedSleep {
    fn poll(&mut self, waker: &Waker) -> Poll<()> {
        if Instant::now() >= self.deadline {
            self.cancel();
            return Poll::Ready(());
        }
        if let Some((timers, ticket)) = &self.waiting {
            if timers.update(ticket, waker) {
                return Poll::Pending;
            }
            // The slot fired before the deadline by this clock: wait again.
        }
        let rt = Runtime::current();
        let lp = rt.pick_loop();
        let (ticket, new_slot) = lp.coarse.register(self.deadline, self.shift, waker);
        self.waiting = Some((lp.coarse.clone(), ticket));
        // Only a slot's first waiter arms its loop timer.
        if let Some(arm) = new_slot {
            lp.send(Command::Timer(TimerEntry::new(arm.at, arm.waker)));
        }
        Poll::Pending
    }

    fn cancel(&mut self) {
        if let Some((timers, ticket)) = self.waiting.take() {
            timers.cancel(&ticket);
        }
    }
}

impl Drop for SharedSleep {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl fmt::Debug for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let deadline = match self {
            Limit::Own(sleep) => sleep.deadline,
            Limit::Shared(shared) => shared.deadline,
        };
        f.debug_struct("Limit")
            .field("deadline", &deadline)
            .finish()
    }
}

/// The error of a [`timeout`] whose deadline passed first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed(());

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

impl From<Elapsed> for std::io::Error {
    fn from(e: Elapsed) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::TimedOut, e)
    }
}

/// Runs `future` for at most `duration`.
///
/// Timeouts are for when something went wrong, and most never fire: from about 67 ms up,
/// the ones due close together share one timer, and one may fire up to 1/64 of its
/// `duration` (at most about a second) after its deadline, never before.
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    Timeout {
        future,
        limit: Limit::new(duration),
    }
}

pin_project_lite::pin_project! {
    /// The future returned by [`timeout`].
    #[derive(Debug)]
    pub struct Timeout<F> {
        #[pin]
        future: F,
        limit: Limit,
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(v) = this.future.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match this.limit.poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed(()))),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(feature = "client")]
pin_project_lite::pin_project! {
    /// A fallible future under a time limit that may be absent; see [`or_elapsed`].
    pub(crate) struct OrElapsed<F, E> {
        #[pin]
        future: F,
        limit: Option<(Limit, Duration)>,
        elapsed: fn(Duration) -> E,
    }
}

/// Runs `future` for at most `limit` (for ever without one); past it, the error
/// `elapsed(limit)`. A future of its own rather than an async fn around [`timeout`]:
/// that would hold `future` twice (as it took it, and inside the timeout), and a request's
/// future is large. (The client's and the gateway's.)
#[cfg(feature = "client")]
pub(crate) fn or_elapsed<F, T, E>(
    limit: Option<Duration>,
    future: F,
    elapsed: fn(Duration) -> E,
) -> OrElapsed<F, E>
where
    F: Future<Output = Result<T, E>>,
{
    OrElapsed {
        future,
        limit: limit.map(|t| (Limit::new(t), t)),
        elapsed,
    }
}

#[cfg(feature = "client")]
impl<F, T, E> Future for OrElapsed<F, E>
where
    F: Future<Output = Result<T, E>>,
{
    type Output = Result<T, E>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(v) = this.future.poll(cx) {
            return Poll::Ready(v);
        }
        if let Some((limit, t)) = this.limit {
            if limit.poll(cx).is_ready() {
                return Poll::Ready(Err((this.elapsed)(*t)));
            }
        }
        Poll::Pending
    }
}

/// Ticks every `period`, starting now. Missed ticks are skipped, not bunched.
pub fn interval(period: Duration) -> Interval {
    assert!(!period.is_zero(), "interval period must be non-zero");
    Interval {
        period,
        sleep: sleep_until(Instant::now()),
    }
}

/// A periodic timer; see [`interval`].
#[derive(Debug)]
pub struct Interval {
    period: Duration,
    sleep: Sleep,
}

impl Interval {
    /// Waits for the next tick and returns its scheduled instant.
    pub async fn tick(&mut self) -> Instant {
        std::future::poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick.
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        match Pin::new(&mut self.sleep).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(()) => {
                let at = self.sleep.deadline();
                let now = Instant::now();
                let mut next = at + self.period;
                if next <= now {
                    // Skip the ticks we missed.
                    let behind = (now - at).as_nanos() / self.period.as_nanos();
                    next = at + self.period * (behind as u32 + 1);
                }
                self.sleep.reset(next);
                Poll::Ready(at)
            }
        }
    }

    /// The period between ticks.
    pub fn period(&self) -> Duration {
        self.period
    }
}

#[cfg(test)]
mod tests {
    /// Every connection keeps a `Sleep` armed, so its size is part of an idle connection's
    /// memory (the shared timeouts' extra state, 24 bytes, once made every one larger).
    #[test]
    fn a_sleep_is_a_deadline_and_a_pointer() {
        assert_eq!(
            std::mem::size_of::<super::Sleep>(),
            std::mem::size_of::<std::time::Instant>() + std::mem::size_of::<usize>()
        );
    }
}
