//! The worker pool: OS threads that run tasks, park LIFO when idle, and are replaced when
//! one gets stuck inside a single task.
//!
//! Queueing: one shared FIFO queue plus a per-worker "next" slot. A task woken by the task
//! running on a worker goes into that worker's next slot and runs right after it, with no
//! wake-up at all (the common hand-off). Everything else goes to the shared queue. The
//! queue and the stack of idle workers sit under one lock, so a worker can never park
//! while work it should have seen waits in the queue.
//!
//! Wake-ups: a submission wakes at most one idle worker; a worker that takes a task and
//! sees more queued wakes at most one more. So a burst ramps up worker by worker ("one
//! wake-up per hop"), and the warmest (most recently parked) worker wakes first.
//!
//! Waiting for readiness: an idle worker first tries to drive a free event loop (the
//! reactor implements [`Drive`]), waiting in the poller itself rather than parking, and
//! runs what the turn readied. Under load the worker that finishes a round thus picks up
//! the next readiness with no thread switch; a submission that finds no parked worker
//! interrupts a driving one. A busy worker also takes a non-blocking turn every
//! [`TURN_EVERY`] tasks, so readiness is not starved while the queue never empties.
//!
//! Blocking: a monitor thread watches each worker's task counter. A worker that stays in
//! one task longer than the blocking threshold is marked replaced and a new worker starts
//! (up to `max_workers`), and its next slot is moved to the shared queue. Extra workers
//! retire after idling for `idle_timeout`.

use super::drive_gate::DriveGate;
use super::next_slot::NextSlot;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

/// A unit of work: a connection's round or a spawned future's poll.
pub(crate) trait Runnable: Send + Sync + 'static {
    fn run(self: Arc<Self>);
    /// The pool shut down with this job queued: drop what it holds instead of running it.
    /// (The caller owns the job's scheduled state, as a worker would.)
    fn cancel(self: Arc<Self>) {}
    /// The pool shut down while this (detached, registered) job was idle: cancel it if it
    /// is idle indeed.
    fn release(self: Arc<Self>) {}
}

pub(crate) type Job = Arc<dyn Runnable>;

/// How many times in a row a worker runs its next slot before it looks at the shared queue.
const NEXT_SLOT_BUDGET: u32 = 8;

/// A busy worker takes a non-blocking turn of a loop after this many tasks in a row.
const TURN_EVERY: u32 = 61;

/// Event loops that idle workers may drive (implemented by the reactor).
pub(crate) trait Drive: Send + Sync + 'static {
    /// Drives one event loop no one else is driving for a turn, waiting up to `max_wait`
    /// for readiness (`worker` picks which loop to try first). The tasks it readies are
    /// scheduled on this thread, into an open batch. False if no loop was free.
    fn turn(&self, worker: usize, max_wait: Option<Duration>) -> bool;
    /// Makes every turn blocked in a wait return soon.
    fn interrupt(&self);
}

/// Runs a worker's whole life (the closure) inside contexts the owner sets up.
pub(crate) type WorkerWrap = dyn Fn(&mut dyn FnMut()) + Send + Sync;

pub(crate) struct WorkerPoolConfig {
    pub name: String,
    pub workers: usize,
    pub max_workers: usize,
    pub blocking_threshold: Duration,
    pub idle_timeout: Duration,
    /// Run on each worker thread before it takes work (enters contexts).
    pub around: Option<Arc<WorkerWrap>>,
    /// The event loops idle workers drive, if any.
    pub driver: Option<Arc<dyn Drive>>,
}

#[derive(Clone)]
pub(crate) struct WorkerPool {
    inner: Arc<Inner>,
}

struct Inner {
    cfg: WorkerPoolConfig,
    state: Mutex<Shared>,
    /// Workers waiting in a loop's poller, and the pact that keeps them from missing work.
    drive_gate: DriveGate,
    live: AtomicUsize,
    /// Workers stuck in a task that a replacement was started for (counted in `live`).
    stuck: AtomicUsize,
    /// Detached tasks not finished yet, by address: they keep themselves alive (as tokio's
    /// do), so shutdown must find them to drop their futures and what those hold.
    detached: Mutex<HashMap<usize, Weak<dyn Runnable>>>,
    shutdown: AtomicBool,
    /// Signalled when the last worker exits.
    exited: Condvar,
    next_id: AtomicUsize,
}

struct Shared {
    queue: VecDeque<Job>,
    idle: Vec<Arc<Worker>>,
    all: Vec<Arc<Worker>>,
}

/// A worker's shared face: how to wake it and how the monitor sees it.
struct Worker {
    id: usize,
    thread: Thread,
    /// Set by whoever pops this worker off the idle stack, before unparking it.
    woken: AtomicBool,
    /// Incremented when a task starts and when it ends: odd while inside a task.
    seq: AtomicU64,
    /// Set by the monitor once a replacement was started for this stuck worker.
    replaced: AtomicBool,
    next: NextSlot<Job>,
}

thread_local! {
    /// The pool and worker this thread belongs to, if it is a worker.
    static CURRENT: RefCell<Option<(Weak<Inner>, Arc<Worker>)>> = const { RefCell::new(None) };
    /// While a loop thread dispatches one readiness batch, wake-ups collect here and reach
    /// the pool as one submission.
    /// Tagged with the pool it is for: wake-ups of other pools' tasks bypass it.
    static BATCH: RefCell<Option<(*const Inner, Vec<Job>)>> = const { RefCell::new(None) };
    static NEXT_RUNS: Cell<u32> = const { Cell::new(0) };
    /// The batch vector, kept between batches so a loop allocates none per wait.
    static SPARE_BATCH: RefCell<Vec<Job>> = const { RefCell::new(Vec::new()) };
}

impl WorkerPool {
    pub fn new(cfg: WorkerPoolConfig) -> WorkerPool {
        let inner = Arc::new(Inner {
            state: Mutex::new(Shared {
                queue: VecDeque::new(),
                idle: Vec::new(),
                all: Vec::new(),
            }),
            drive_gate: DriveGate::new(),
            live: AtomicUsize::new(0),
            stuck: AtomicUsize::new(0),
            detached: Mutex::new(HashMap::new()),
            shutdown: AtomicBool::new(false),
            exited: Condvar::new(),
            next_id: AtomicUsize::new(0),
            cfg,
        });
        WorkerPool { inner }
    }

    /// Starts the workers and the monitor. Separate from `new` so the owner can finish
    /// building what the workers' `around` refers to first.
    pub fn start(&self) -> std::io::Result<()> {
        let inner = &self.inner;
        for _ in 0..inner.cfg.workers.max(1) {
            Inner::start_worker(inner);
        }
        let weak = Arc::downgrade(inner);
        let tick = (inner.cfg.blocking_threshold / 4).max(Duration::from_millis(1));
        thread::Builder::new()
            .name(format!("{}-monitor", inner.cfg.name))
            .spawn(move || monitor(weak, tick))?;
        Ok(())
    }

    /// Schedules a task: into this worker's next slot when called from one of this pool's
    /// workers, into the loop's batch when called while a loop dispatches, else onto the
    /// shared queue with at most one wake-up.
    #[inline]
    pub fn schedule(&self, job: Job) {
        self.inner.schedule(job)
    }

    /// True if the calling thread is one of this pool's workers and no loop batch is
    /// open, i.e. [`schedule_local`] may be used for this pool's tasks.
    #[inline]
    pub fn is_local(&self) -> bool {
        BATCH.with(|b| b.borrow().is_none())
            && CURRENT.with(|c| {
                c.borrow()
                    .as_ref()
                    .is_some_and(|(pool, _)| std::ptr::eq(pool.as_ptr(), Arc::as_ptr(&self.inner)))
            })
    }

    /// Queues a task at the back of the shared queue (fairness: a task that used up its
    /// turn goes behind the others).
    pub fn yield_job(&self, job: Job) {
        self.inner.submit(std::iter::once(job))
    }

    /// Number of worker threads alive now (replacements included).
    pub fn live_workers(&self) -> usize {
        self.inner.live.load(Ordering::Acquire)
    }

    /// Stops the workers after the tasks already queued; waits up to `deadline` for them.
    pub fn shutdown(&self, deadline: Duration) {
        self.inner.shutdown.store(true, Ordering::Release);
        let until = Instant::now() + deadline;
        let mut st = self.inner.state.lock().unwrap();
        for w in st.idle.drain(..) {
            w.woken.store(true, Ordering::Release);
            w.thread.unpark();
        }
        for w in st.all.iter() {
            w.thread.unpark();
        }
        if let Some(driver) = &self.inner.cfg.driver {
            driver.interrupt();
        }
        while self.inner.live.load(Ordering::Acquire) > 0 {
            let now = Instant::now();
            if now >= until {
                break;
            }
            st = self.inner.exited.wait_timeout(st, until - now).unwrap().0;
        }
        drop(st);
        // Tasks still queued, and detached ones waiting for a wake-up that will not come,
        // are cancelled: their futures dropped here. Dropping one may wake or detach
        // others, hence the passes (bounded: a future that spawns on drop cannot loop us).
        for _ in 0..16 {
            let queued: Vec<Job> = {
                let mut st = self.inner.state.lock().unwrap();
                self.inner.drive_gate.set_queued(0);
                st.queue.drain(..).collect()
            };
            let detached: Vec<Weak<dyn Runnable>> = self
                .inner
                .detached
                .lock()
                .unwrap()
                .drain()
                .map(|(_, t)| t)
                .collect();
            if queued.is_empty() && detached.is_empty() {
                break;
            }
            for job in queued {
                job.cancel();
            }
            for task in detached.iter().filter_map(Weak::upgrade) {
                task.release();
            }
        }
    }

    /// Registers a detached task (see `Inner::detached`).
    pub fn track_detached(&self, key: usize, task: Weak<dyn Runnable>) {
        self.inner.detached.lock().unwrap().insert(key, task);
    }

    /// A detached task finished.
    pub fn untrack_detached(&self, key: usize) {
        self.inner.detached.lock().unwrap().remove(&key);
    }
}

/// Puts `job` into the calling worker's next slot (call only when [`WorkerPool::is_local`] said
/// so for the job's pool); a displaced job goes to the shared queue. Needs no pool handle
/// from the caller.
#[inline]
pub(crate) fn schedule_local(job: Job) {
    CURRENT.with(|c| {
        let c = c.borrow();
        let (pool, worker) = c.as_ref().expect("schedule_local off a worker");
        if let Some(displaced) = worker.next.with(|n| n.replace(job)) {
            if let Some(pool) = pool.upgrade() {
                pool.submit(std::iter::once(displaced));
            }
        }
    })
}

/// Runs `f` with wake-ups on this thread collected into one batch submitted at the end;
/// also returns how many tasks that batch held.
pub(crate) fn batched<R>(pool: &WorkerPool, f: impl FnOnce() -> R) -> (R, usize) {
    pool.inner.batched(f)
}

/// How many tasks the batch open on this thread holds so far.
pub(crate) fn batch_len() -> usize {
    BATCH.with(|b| b.borrow().as_ref().map_or(0, |(_, jobs)| jobs.len()))
}

impl Inner {
    fn batched<R>(&self, f: impl FnOnce() -> R) -> (R, usize) {
        let spare = SPARE_BATCH.with(|s| std::mem::take(&mut *s.borrow_mut()));
        let outer = BATCH.with(|b| b.borrow_mut().replace((self as *const Inner, spare)));
        let r = f();
        let mut jobs = BATCH
            .with(|b| std::mem::replace(&mut *b.borrow_mut(), outer))
            .map(|(_, j)| j)
            .unwrap_or_default();
        let n = jobs.len();
        if n > 0 {
            self.submit(jobs.drain(..));
        }
        // Emptied by the submission; its capacity serves the next batch.
        SPARE_BATCH.with(|s| *s.borrow_mut() = jobs);
        (r, n)
    }

    fn start_worker(this: &Arc<Inner>) {
        let id = this.next_id.fetch_add(1, Ordering::Relaxed);
        this.live.fetch_add(1, Ordering::AcqRel);
        let pool = this.clone();
        let spawned = thread::Builder::new()
            .name(format!("{}-worker-{id}", this.cfg.name))
            .spawn(move || worker_main(pool, id));
        if let Err(e) = spawned {
            this.live.fetch_sub(1, Ordering::AcqRel);
            tracing::error!(error = %e, "could not start a worker thread");
        }
    }

    #[inline]
    fn schedule(self: &Arc<Self>, job: Job) {
        // A loop thread dispatching a batch.
        let job = match BATCH.with(|b| match b.borrow_mut().as_mut() {
            Some((owner, batch)) if std::ptr::eq(*owner, Arc::as_ptr(self)) => {
                batch.push(job);
                None
            }
            _ => Some(job),
        }) {
            None => return,
            Some(job) => job,
        };
        // One of our own workers: the next slot.
        let job = CURRENT.with(|c| match c.borrow().as_ref() {
            Some((pool, worker)) if std::ptr::eq(pool.as_ptr(), Arc::as_ptr(self)) => {
                let displaced = worker.next.with(|n| n.replace(job));
                Err(displaced)
            }
            _ => Ok(job),
        });
        match job {
            Ok(job) => self.submit(std::iter::once(job)),
            Err(Some(displaced)) => self.submit(std::iter::once(displaced)),
            Err(None) => {}
        }
    }

    fn submit(&self, jobs: impl Iterator<Item = Job>) {
        let mut st = self.state.lock().unwrap();
        let before = st.queue.len();
        st.queue.extend(jobs);
        let added = st.queue.len() - before;
        if added == 0 {
            return;
        }
        self.drive_gate.set_queued(st.queue.len());
        // Wake only when the queue goes from empty to not: if it already held work, a
        // worker was woken for it (or none was idle), and whoever takes that work wakes
        // the next one if more remains ("one wake-up per hop"). A burst from one thread
        // thus costs a wake or two, not one per task.
        let wake = if before == 0 { st.idle.pop() } else { None };
        drop(st);
        match wake {
            Some(w) => {
                w.woken.store(true, Ordering::Release);
                w.thread.unpark();
            }
            None if before == 0 && self.drive_gate.must_interrupt() => {
                if let Some(driver) = &self.cfg.driver {
                    driver.interrupt();
                }
            }
            None => {}
        }
    }

    /// Takes a task from the shared queue, waking one more worker if more remain.
    fn pop(&self) -> Option<Job> {
        if self.drive_gate.queued() == 0 {
            return None;
        }
        let mut st = self.state.lock().unwrap();
        let job = st.queue.pop_front();
        self.drive_gate.set_queued(st.queue.len());
        let wake = if !st.queue.is_empty() {
            st.idle.pop()
        } else {
            None
        };
        drop(st);
        if let Some(w) = wake {
            w.woken.store(true, Ordering::Release);
            w.thread.unpark();
        }
        job
    }

    /// Gives up one place in `live` if more than the core workers are alive.
    fn try_retire(&self) -> bool {
        self.live
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                // Workers stuck in a task are not available: keep `workers` that are.
                let stuck = self.stuck.load(Ordering::Acquire);
                (n.saturating_sub(stuck) > self.cfg.workers).then(|| n - 1)
            })
            .is_ok()
    }

    fn retire(&self, me: &Arc<Worker>, st: &mut Shared) {
        st.all.retain(|w| !Arc::ptr_eq(w, me));
        st.idle.retain(|w| !Arc::ptr_eq(w, me));
        if let Some(job) = me.next.with(|n| n.take()) {
            st.queue.push_back(job);
            self.drive_gate.set_queued(st.queue.len());
            if st.queue.len() == 1 {
                if let Some(w) = st.idle.pop() {
                    w.woken.store(true, Ordering::Release);
                    w.thread.unpark();
                }
            }
        }
    }
}

fn worker_main(pool: Arc<Inner>, id: usize) {
    let me = Arc::new(Worker {
        id,
        thread: thread::current(),
        woken: AtomicBool::new(false),
        seq: AtomicU64::new(0),
        replaced: AtomicBool::new(false),
        next: NextSlot::new(),
    });
    pool.state.lock().unwrap().all.push(me.clone());
    CURRENT.with(|c| *c.borrow_mut() = Some((Arc::downgrade(&pool), me.clone())));
    let mut retired = false;
    match &pool.cfg.around {
        Some(around) => around(&mut || retired = worker_loop(&pool, &me)),
        None => retired = worker_loop(&pool, &me),
    }
    CURRENT.with(|c| *c.borrow_mut() = None);
    let mut st = pool.state.lock().unwrap();
    pool.retire(&me, &mut st);
    let left = if retired {
        pool.live.load(Ordering::Acquire)
    } else {
        pool.live.fetch_sub(1, Ordering::AcqRel) - 1
    };
    drop(st);
    if left == 0 {
        pool.exited.notify_all();
    }
}

/// Runs tasks until shutdown (returns false) or until this worker retires as an extra
/// (returns true, having already given up its place in `live`).
fn worker_loop(pool: &Arc<Inner>, me: &Arc<Worker>) -> bool {
    let mut since_turn = 0;
    loop {
        let job = take_next(me).or_else(|| pool.pop());
        if let Some(job) = job {
            // Only this thread writes `seq`: plain stores, no locked read-modify-write.
            let seq = me.seq.load(Ordering::Relaxed);
            me.seq.store(seq + 1, Ordering::Release);
            job.run();
            me.seq.store(seq + 2, Ordering::Release);
            if me.replaced.load(Ordering::Acquire) {
                // A replacement took our place while we were stuck; leave if not needed.
                me.replaced.store(false, Ordering::Release);
                pool.stuck.fetch_sub(1, Ordering::AcqRel);
                if pool.try_retire() {
                    return true;
                }
            }
            since_turn += 1;
            if since_turn >= TURN_EVERY {
                since_turn = 0;
                if let Some(driver) = &pool.cfg.driver {
                    pool.batched(|| driver.turn(me.id, Some(Duration::ZERO)));
                }
            }
            continue;
        }
        since_turn = 0;
        if let Some(retired) = idle(pool, me) {
            return retired;
        }
    }
}

/// Waits for work: in a free event loop's wait, else parked. Returns when there may be work
/// (None), or Some(false) on shutdown, or Some(true) when this extra worker retired.
fn idle(pool: &Arc<Inner>, me: &Arc<Worker>) -> Option<bool> {
    let mut idle_since = Instant::now();
    loop {
        if pool.shutdown.load(Ordering::Acquire) {
            return Some(false);
        }
        let mut waited = idle_since.elapsed();
        if waited >= pool.cfg.idle_timeout {
            let mut st = pool.state.lock().unwrap();
            if st.queue.is_empty() && pool.try_retire() {
                st.idle.retain(|w| !Arc::ptr_eq(w, me));
                return Some(true);
            }
            // A core worker: keep waiting, checking again a timeout later.
            idle_since = Instant::now();
            waited = Duration::ZERO;
        }
        let max_wait = pool
            .cfg
            .idle_timeout
            .saturating_sub(waited)
            .max(Duration::from_millis(1));
        if let Some(driver) = &pool.cfg.driver {
            let drove = pool.drive_gate.enter()
                && me.next.with(|n| n.is_none())
                && pool.batched(|| driver.turn(me.id, Some(max_wait))).0;
            pool.drive_gate.leave();
            if drove {
                // Whatever the turn readied is queued now (or came from elsewhere).
                if pool.drive_gate.queued() > 0 || me.next.with(|n| n.is_some()) {
                    return None;
                }
                continue;
            }
        }
        // Park: register as idle under the queue's lock unless work arrived meanwhile.
        {
            let mut st = pool.state.lock().unwrap();
            if !st.queue.is_empty() || me.next.with(|n| n.is_some()) {
                return None;
            }
            me.woken.store(false, Ordering::Release);
            st.idle.push(me.clone());
        }
        let parked_at = Instant::now();
        while !me.woken.load(Ordering::Acquire) {
            if pool.shutdown.load(Ordering::Acquire) {
                return Some(false);
            }
            let left = max_wait.saturating_sub(parked_at.elapsed());
            if left.is_zero() {
                // Time to check for retirement; leave the idle stack first, unless woken.
                let mut st = pool.state.lock().unwrap();
                if me.woken.load(Ordering::Acquire) {
                    break;
                }
                st.idle.retain(|w| !Arc::ptr_eq(w, me));
                drop(st);
                break;
            }
            thread::park_timeout(left);
        }
        if me.woken.load(Ordering::Acquire) {
            return None;
        }
    }
}

fn take_next(me: &Worker) -> Option<Job> {
    let runs = NEXT_RUNS.with(|n| n.get());
    if runs >= NEXT_SLOT_BUDGET {
        // Let the shared queue have a turn; the slot's task goes behind it.
        NEXT_RUNS.with(|n| n.set(0));
        return None;
    }
    let job = me.next.with(|n| n.take());
    NEXT_RUNS.with(|n| n.set(if job.is_some() { runs + 1 } else { 0 }));
    job
}

/// Watches for workers stuck in one task and starts replacements.
fn monitor(pool: Weak<Inner>, tick: Duration) {
    let mut seen: Vec<(usize, u64, Instant)> = Vec::new();
    loop {
        thread::sleep(tick);
        let Some(pool) = pool.upgrade() else { return };
        if pool.shutdown.load(Ordering::Acquire) {
            return;
        }
        let now = Instant::now();
        let mut st = pool.state.lock().unwrap();
        let mut stuck = 0;
        let mut fresh = Vec::with_capacity(st.all.len());
        for w in st.all.iter() {
            let key = Arc::as_ptr(w) as usize;
            let seq = w.seq.load(Ordering::Acquire);
            let since = match seen.iter().find(|(k, s, _)| *k == key && *s == seq) {
                Some(&(_, _, since)) => since,
                None => now,
            };
            fresh.push((key, seq, since));
            let in_task = seq % 2 == 1;
            if in_task
                && now - since >= pool.cfg.blocking_threshold
                && !w.replaced.load(Ordering::Acquire)
            {
                w.replaced.store(true, Ordering::Release);
                pool.stuck.fetch_add(1, Ordering::AcqRel);
                stuck += 1;
            }
        }
        seen = fresh;
        if stuck == 0 {
            continue;
        }
        // Move the stuck workers' next slots where others can take them.
        let rescued: Vec<Job> = st
            .all
            .iter()
            .filter(|w| w.replaced.load(Ordering::Acquire))
            .filter_map(|w| w.next.with(|n| n.take()))
            .collect();
        let was_empty = st.queue.is_empty();
        st.queue.extend(rescued);
        pool.drive_gate.set_queued(st.queue.len());
        let wake = if was_empty && !st.queue.is_empty() {
            st.idle.pop()
        } else {
            None
        };
        drop(st);
        if let Some(w) = wake {
            w.woken.store(true, Ordering::Release);
            w.thread.unpark();
        }
        for _ in 0..stuck {
            if pool.live.load(Ordering::Acquire) >= pool.cfg.max_workers {
                tracing::warn!(
                    max_workers = pool.cfg.max_workers,
                    "workers are blocked and the pool is at max_workers"
                );
                break;
            }
            tracing::debug!("a worker is blocked in one task; starting a replacement");
            Inner::start_worker(&pool);
        }
    }
}
