//! Spawned futures: a task is a future plus its scheduling state, run by the pool.

use super::pool::{Runnable, WorkerPool};
use super::state::SchedState;
use std::any::Any;
use std::cell::UnsafeCell;
use std::fmt;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

/// Event bits of a task (see [`SchedState`]).
const WAKE: u32 = 1 << 1;
const ABORT: u32 = 1 << 2;

/// Why a task did not produce its output.
pub struct JoinError {
    repr: JoinErrorRepr,
}

enum JoinErrorRepr {
    Cancelled,
    Panicked(Box<dyn Any + Send + 'static>),
}

impl JoinError {
    /// True if the task was aborted before it finished.
    pub fn is_cancelled(&self) -> bool {
        matches!(self.repr, JoinErrorRepr::Cancelled)
    }

    /// True if the task panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, JoinErrorRepr::Panicked(_))
    }

    /// The panic payload, if the task panicked.
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        match self.repr {
            JoinErrorRepr::Panicked(p) => p,
            JoinErrorRepr::Cancelled => Box::new("task was cancelled"),
        }
    }
}

fn panic_message(p: &(dyn Any + Send)) -> &str {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(|s| s.as_str()))
        .unwrap_or("..")
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            JoinErrorRepr::Cancelled => f.write_str("JoinError::Cancelled"),
            JoinErrorRepr::Panicked(p) => {
                write!(f, "JoinError::Panicked({:?})", panic_message(&**p))
            }
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            JoinErrorRepr::Cancelled => f.write_str("task was cancelled"),
            JoinErrorRepr::Panicked(p) => write!(f, "task panicked: {}", panic_message(&**p)),
        }
    }
}

impl std::error::Error for JoinError {}

struct JoinSlot<T> {
    output: Option<Result<T, JoinError>>,
    waker: Option<Waker>,
    /// The output was taken (or the handle dropped): nobody will read it.
    detached: bool,
    /// The task finished (or was cancelled).
    done: bool,
    /// Registered with the pool as a detached task waiting for a wake-up (see `track`).
    tracked: bool,
}

struct Task<F: Future> {
    state: SchedState,
    pool: WorkerPool,
    /// Only the runner touches the future: the scheduled flag makes it exclusive.
    future: UnsafeCell<Option<F>>,
    join: Mutex<JoinSlot<F::Output>>,
    /// The task's own handle while it runs detached (see `detach`).
    keep: Mutex<Option<Arc<Task<F>>>>,
    /// Set (once) when a poll first returned Pending.
    pended: AtomicBool,
}

// SAFETY: `future` is only accessed by the one worker that holds the task's scheduled
// flag (see SchedState), or dropped with the task; F itself is Send.
unsafe impl<F: Future + Send> Sync for Task<F> where F::Output: Send {}

impl<F> Task<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn complete(&self, out: Result<F::Output, JoinError>) {
        let (waker, keep, tracked) = {
            let mut j = self.join.lock().unwrap();
            j.done = true;
            if !j.detached {
                j.output = Some(out);
            }
            (j.waker.take(), self.keep.lock().unwrap().take(), j.tracked)
        };
        if keep.is_some() && tracked {
            self.pool.untrack_detached(self as *const Self as usize);
        }
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Registers a detached task that is waiting for a wake-up with the pool, so shutdown
    /// can free it (see `WorkerPool::shutdown`). Only such tasks need it: a queued one is found in
    /// the queue, and most tasks finish in their first poll and never get here. Called under
    /// the join lock (by `detach`, or by the first poll that returned Pending, whichever
    /// comes second), so `complete` cannot slip in between and leave a stale entry.
    fn track(self: &Arc<Self>, j: &mut JoinSlot<F::Output>) {
        if j.detached && !j.done && !j.tracked {
            j.tracked = true;
            let key = Arc::as_ptr(self) as *const () as usize;
            let weak: Weak<dyn Runnable> = Arc::downgrade(&(self.clone() as Arc<dyn Runnable>));
            self.pool.track_detached(key, weak);
        }
    }

    /// Drops the future without polling it (the caller holds the scheduled flag).
    fn cancel_now(&self) {
        // SAFETY: the caller holds the scheduled flag, so no other thread touches the
        // future (see the `Sync` impl).
        let fut = unsafe { &mut *self.future.get() }.take();
        if fut.is_none() {
            return;
        }
        if catch_unwind(AssertUnwindSafe(|| drop(fut))).is_err() {
            tracing::error!("dropping a cancelled task panicked");
        }
        self.complete(Err(JoinError {
            repr: JoinErrorRepr::Cancelled,
        }));
    }

    fn wake_arc(self: Arc<Self>) {
        if self.state.notify(WAKE) {
            if self.pool.is_local() {
                // Woken on one of our workers: its next slot, without cloning the pool
                // handle (an atomic on a cache line every thread of the pool shares).
                super::pool::schedule_local(self);
            } else {
                let pool = self.pool.clone();
                pool.schedule(self);
            }
        }
    }

    fn waker(self: &Arc<Self>) -> ManuallyDrop<Waker> {
        let ptr = Arc::as_ptr(self) as *const ();
        // SAFETY: the vtable below treats the pointer as a borrowed `Arc<Task<F>>`; the
        // ManuallyDrop'd Waker is never dropped, so it does not give back a count it never
        // took, and `self` outlives it.
        ManuallyDrop::new(unsafe { Waker::from_raw(RawWaker::new(ptr, Self::VTABLE)) })
    }

    const VTABLE: &'static RawWakerVTable = &RawWakerVTable::new(
        Self::vt_clone,
        Self::vt_wake,
        Self::vt_wake_by_ref,
        Self::vt_drop,
    );

    /// # Safety
    /// `p` comes from `Arc::as_ptr` of a live `Arc<Task<F>>` (the waker vtable contract).
    unsafe fn vt_clone(p: *const ()) -> RawWaker {
        // SAFETY: `p` came from Arc::as_ptr of a live Arc<Task<F>>; the clone owns one count.
        unsafe { Arc::increment_strong_count(p as *const Self) };
        RawWaker::new(p, Self::VTABLE)
    }

    /// # Safety
    /// `p` comes from `Arc::as_ptr` of a live `Arc<Task<F>>` (the waker vtable contract).
    unsafe fn vt_wake(p: *const ()) {
        // SAFETY: an owned waker holds one strong count, which this consumes.
        let arc = unsafe { Arc::from_raw(p as *const Self) };
        arc.wake_arc();
    }

    /// # Safety
    /// `p` comes from `Arc::as_ptr` of a live `Arc<Task<F>>` (the waker vtable contract).
    unsafe fn vt_wake_by_ref(p: *const ()) {
        // SAFETY: `p` is a live Arc<Task<F>>; take a count for the scheduled reference.
        unsafe { Arc::increment_strong_count(p as *const Self) };
        // SAFETY: the count just taken is consumed here.
        let arc = unsafe { Arc::from_raw(p as *const Self) };
        arc.wake_arc();
    }

    /// # Safety
    /// `p` comes from `Arc::as_ptr` of a live `Arc<Task<F>>` (the waker vtable contract).
    unsafe fn vt_drop(p: *const ()) {
        // SAFETY: an owned waker holds one strong count, which this gives back.
        drop(unsafe { Arc::from_raw(p as *const Self) });
    }
}

impl<F> Runnable for Task<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn run(self: Arc<Self>) {
        let bits = self.state.take();
        // SAFETY: we hold the scheduled flag, so no other thread touches the future.
        let slot = unsafe { &mut *self.future.get() };
        if slot.is_some() {
            if bits & ABORT != 0 {
                *slot = None;
                self.complete(Err(JoinError {
                    repr: JoinErrorRepr::Cancelled,
                }));
            } else {
                let waker = self.waker();
                let mut cx = Context::from_waker(&waker);
                let fut = slot.as_mut().unwrap();
                // SAFETY: the future lives in the Arc'd task and is never moved until dropped.
                let pinned = unsafe { Pin::new_unchecked(fut) };
                match catch_unwind(AssertUnwindSafe(|| pinned.poll(&mut cx))) {
                    Ok(Poll::Pending) => {
                        if !self.pended.load(Ordering::Relaxed) {
                            self.pended.store(true, Ordering::Relaxed);
                            let mut j = self.join.lock().unwrap();
                            self.track(&mut j);
                        }
                    }
                    Ok(Poll::Ready(v)) => {
                        *slot = None;
                        self.complete(Ok(v));
                    }
                    Err(p) => {
                        *slot = None;
                        tracing::error!(panic = panic_message(&*p), "a spawned task panicked");
                        self.complete(Err(JoinError {
                            repr: JoinErrorRepr::Panicked(p),
                        }));
                    }
                }
            }
        }
        if !self.state.try_idle() {
            // Woken while running (or it yielded): go behind the other queued work.
            let pool = self.pool.clone();
            pool.yield_job(self);
        }
    }

    fn cancel(self: Arc<Self>) {
        self.cancel_now();
    }

    fn release(self: Arc<Self>) {
        // Idle (not queued, not running) until now: the abort makes it ours to cancel.
        if self.state.notify(ABORT) {
            self.cancel_now();
        }
    }
}

/// The type-erased side of a task that its [`JoinHandle`] sees.
trait Joinable<T>: Send + Sync {
    fn poll_join(&self, cx: &mut Context<'_>) -> Poll<Result<T, JoinError>>;
    fn abort(self: Arc<Self>);
    fn is_finished(&self) -> bool;
    fn detach(self: Arc<Self>);
}

impl<F> Joinable<F::Output> for Task<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn poll_join(&self, cx: &mut Context<'_>) -> Poll<Result<F::Output, JoinError>> {
        let mut j = self.join.lock().unwrap();
        if let Some(out) = j.output.take() {
            j.detached = true;
            return Poll::Ready(out);
        }
        if !j.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            j.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    fn abort(self: Arc<Self>) {
        if self.state.notify(ABORT) {
            let pool = self.pool.clone();
            pool.schedule(self);
        }
    }

    fn is_finished(&self) -> bool {
        self.join.lock().unwrap().done
    }

    fn detach(self: Arc<Self>) {
        let mut j = self.join.lock().unwrap();
        j.detached = true;
        j.output = None;
        j.waker = None;
        if !j.done {
            // A detached task belongs to the runtime until it finishes, even if nothing
            // else (no waker) refers to it, as with tokio.
            *self.keep.lock().unwrap() = Some(self.clone());
            if self.pended.load(Ordering::Relaxed) {
                self.track(&mut j);
            }
        }
    }
}

/// An owned permission to await a spawned task's output. Dropping it detaches the task
/// (it keeps running); [`JoinHandle::abort`] cancels it.
pub struct JoinHandle<T> {
    task: Arc<dyn Joinable<T>>,
}

impl<T> JoinHandle<T> {
    /// Cancels the task: its future is dropped at the next point it would run, and
    /// awaiting this handle then gives a cancelled [`JoinError`] (unless it had finished).
    pub fn abort(&self) {
        self.task.clone().abort()
    }

    /// True once the task has produced its output (or was cancelled).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.task.poll_join(cx)
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        self.task.clone().detach();
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("finished", &self.is_finished())
            .finish()
    }
}

/// Spawns `future` on `pool` and returns its handle.
pub(crate) fn spawn_on<F>(pool: &WorkerPool, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let task = Arc::new(Task {
        state: SchedState::scheduled(WAKE),
        pool: pool.clone(),
        future: UnsafeCell::new(Some(future)),
        join: Mutex::new(JoinSlot {
            output: None,
            waker: None,
            detached: false,
            done: false,
            tracked: false,
        }),
        keep: Mutex::new(None),
        pended: AtomicBool::new(false),
    });
    pool.schedule(task.clone());
    JoinHandle { task }
}
