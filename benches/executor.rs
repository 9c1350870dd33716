//! Executor micro-benchmarks: fibr's worker pool against tokio's multi-thread runtime with
//! the same number of workers, in one run, printed as a Markdown table.
//!
//! ```text
//! cargo bench --bench executor                      # full run
//! cargo bench --bench executor -- --quick           # CI smoke run (small sizes, 3 reps)
//! cargo bench --bench executor -- --workers 4       # or FIBR_BENCH_WORKERS=4
//! cargo bench --bench executor -- spawn burst       # only scenarios whose name matches
//! cargo bench --bench executor -- --only fibr --reps 20 spawn   # for profiling one side
//! cargo bench --bench executor -- --json out.json   # also the results as JSON
//! ```
//!
//! `cargo bench --bench compare` runs this bench with `--json` and puts its figures in its
//! report.
//!
//! Scenarios (each run `reps` times per runtime, fibr and tokio interleaved; the table
//! shows the median with min-max, in ns per task or per hand-off):
//!
//! * `ping-pong`: two tasks hand a token back and forth through a hand-rolled one-slot
//!   channel (Mutex + Waker, no runtime-specific primitive), N hand-offs.
//! * `spawn-storm`: M spawner tasks inside the runtime each spawn K empty tasks and await
//!   all the handles.
//! * `bursts`: an external thread submits 256-task bursts of tiny tasks (each increments an
//!   atomic, the last one unparks the submitter), sleeping ~1 ms between bursts; only the
//!   time from the first spawn of a burst to the submitter's wake-up is counted.
//! * `ext-submit`: 2 external threads each spawn T short CPU tasks (~200 ns of hashing);
//!   timed from the start until every task has run.

#[path = "support/skip.rs"]
mod common_skip;

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// Runtime-agnostic primitives used identically by both runtimes.

/// A one-value slot channel: `send` stores the value and wakes the receiver.
struct Slot {
    inner: Mutex<SlotInner>,
}

struct SlotInner {
    value: Option<u64>,
    waker: Option<Waker>,
}

impl Slot {
    fn new() -> Arc<Slot> {
        Arc::new(Slot {
            inner: Mutex::new(SlotInner {
                value: None,
                waker: None,
            }),
        })
    }

    fn send(&self, v: u64) {
        let waker = {
            let mut g = self.inner.lock().unwrap();
            debug_assert!(g.value.is_none());
            g.value = Some(v);
            g.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    fn recv(&self) -> Recv<'_> {
        Recv { slot: self }
    }
}

struct Recv<'a> {
    slot: &'a Slot,
}

impl Future for Recv<'_> {
    type Output = u64;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u64> {
        let mut g = self.slot.inner.lock().unwrap();
        if let Some(v) = g.value.take() {
            return Poll::Ready(v);
        }
        if !g.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            g.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

/// Counts finished tasks; the one that brings the count to `target` unparks the waiter.
struct Countdown {
    done: AtomicUsize,
    target: usize,
    waiter: Thread,
}

impl Countdown {
    fn new(target: usize) -> Arc<Countdown> {
        Arc::new(Countdown {
            done: AtomicUsize::new(0),
            target,
            waiter: thread::current(),
        })
    }

    #[inline]
    fn hit(&self) {
        if self.done.fetch_add(1, Ordering::AcqRel) + 1 == self.target {
            self.waiter.unpark();
        }
    }

    fn wait(&self) {
        while self.done.load(Ordering::Acquire) < self.target {
            thread::park();
        }
    }
}

/// A small hash loop: the "short CPU task" body.
#[inline(never)]
fn work(iters: u32) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for i in 0..black_box(iters) {
        h ^= u64::from(i);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        h = h.rotate_left(5);
    }
    black_box(h)
}

/// Nanoseconds one `work(iters)` takes: the best of a few batches (robust to preemption).
fn time_work(iters: u32) -> f64 {
    (0..7)
        .map(|_| {
            let reps = 2_000;
            let t = Instant::now();
            for _ in 0..reps {
                work(iters);
            }
            t.elapsed().as_nanos() as f64 / reps as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// Finds the iteration count for which `work` takes about `target_ns`.
fn calibrate(target_ns: f64) -> (u32, f64) {
    let mut iters = 16u32;
    while time_work(iters) < target_ns / 2.0 && iters < 1 << 20 {
        iters *= 2;
    }
    for _ in 0..2 {
        iters = ((iters as f64) * target_ns / time_work(iters)).max(1.0) as u32;
    }
    (iters, time_work(iters))
}

// ---------------------------------------------------------------------------------------
// The two runtimes behind one interface.

enum Rt {
    Fibr(fibr::Engine),
    Tokio(tokio::runtime::Runtime),
}

type BoxFut = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A join handle of either runtime, awaitable from inside either.
enum Handle {
    Fibr(fibr::JoinHandle<()>),
    Tokio(tokio::task::JoinHandle<()>),
}

impl Handle {
    async fn join(self) {
        match self {
            Handle::Fibr(h) => h.await.expect("fibr task failed"),
            Handle::Tokio(h) => h.await.expect("tokio task failed"),
        }
    }
}

/// Which runtime a task runs on, so it can spawn on "its own" runtime from inside.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Fibr,
    Tokio,
}

impl Kind {
    /// Spawns from inside the runtime (the current one of a worker thread).
    #[inline]
    fn spawn_inside<F: Future<Output = ()> + Send + 'static>(self, f: F) -> Handle {
        match self {
            Kind::Fibr => Handle::Fibr(fibr::spawn(f)),
            Kind::Tokio => Handle::Tokio(tokio::spawn(f)),
        }
    }
}

impl Rt {
    fn kind(&self) -> Kind {
        match self {
            Rt::Fibr(_) => Kind::Fibr,
            Rt::Tokio(_) => Kind::Tokio,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Rt::Fibr(_) => "fibr",
            Rt::Tokio(_) => "tokio",
        }
    }

    /// A cheap handle for spawning from external threads.
    fn spawner(&self) -> Spawner {
        match self {
            Rt::Fibr(e) => Spawner::Fibr(e.clone()),
            Rt::Tokio(r) => Spawner::Tokio(r.handle().clone()),
        }
    }

    fn block_on<T>(&self, f: impl Future<Output = T>) -> T {
        match self {
            Rt::Fibr(e) => e.block_on(f),
            Rt::Tokio(r) => r.block_on(f),
        }
    }

    fn spawn(&self, f: BoxFut) -> Handle {
        self.spawner().spawn(f)
    }
}

#[derive(Clone)]
enum Spawner {
    Fibr(fibr::Engine),
    Tokio(tokio::runtime::Handle),
}

impl Spawner {
    /// Spawns from outside the runtime (`Engine::spawn` / `Handle::spawn`); the handle is
    /// dropped (detached) unless the caller keeps it.
    #[inline]
    fn spawn<F: Future<Output = ()> + Send + 'static>(&self, f: F) -> Handle {
        match self {
            Spawner::Fibr(e) => Handle::Fibr(e.spawn(f)),
            Spawner::Tokio(h) => Handle::Tokio(h.spawn(f)),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Scenarios. Each returns (nanoseconds measured, number of units the time is divided by).

struct Sizes {
    ping_pong: u64,
    storm_spawners: usize,
    storm_tasks: usize,
    bursts: usize,
    burst_size: usize,
    ext_threads: usize,
    ext_tasks: usize,
    work_iters: u32,
}

/// (a) Two tasks hand a token back and forth `n` times in total.
fn ping_pong(rt: &Rt, n: u64) -> (f64, u64) {
    let a2b = Slot::new();
    let b2a = Slot::new();
    let rounds = n / 2;
    let t = Instant::now();
    let hb = {
        let (a2b, b2a) = (a2b.clone(), b2a.clone());
        rt.spawn(Box::pin(async move {
            for _ in 0..rounds {
                let v = a2b.recv().await;
                b2a.send(v + 1);
            }
        }))
    };
    let ha = rt.spawn(Box::pin(async move {
        let mut v = 0;
        for _ in 0..rounds {
            a2b.send(v);
            v = b2a.recv().await + 1;
        }
        assert_eq!(v, 2 * rounds);
    }));
    rt.block_on(async move {
        ha.join().await;
        hb.join().await;
    });
    (t.elapsed().as_nanos() as f64, 2 * rounds)
}

/// (b) `m` spawner tasks each spawn `k` empty tasks from inside and await all handles.
fn spawn_storm(rt: &Rt, m: usize, k: usize) -> (f64, u64) {
    let kind = rt.kind();
    let t = Instant::now();
    let spawners: Vec<Handle> = (0..m)
        .map(|_| {
            rt.spawn(Box::pin(async move {
                let mut hs = Vec::with_capacity(k);
                for _ in 0..k {
                    hs.push(kind.spawn_inside(async {}));
                }
                for h in hs {
                    h.join().await;
                }
            }))
        })
        .collect();
    rt.block_on(async move {
        for h in spawners {
            h.join().await;
        }
    });
    (t.elapsed().as_nanos() as f64, (m * k) as u64)
}

/// (c) Bursts of tiny tasks from an external thread with ~1 ms idle gaps; gaps excluded.
fn bursts(rt: &Rt, bursts: usize, size: usize) -> (f64, u64) {
    let sp = rt.spawner();
    let busy = thread::spawn(move || {
        let mut busy = Duration::ZERO;
        for _ in 0..bursts {
            thread::sleep(Duration::from_millis(1));
            let cd = Countdown::new(size);
            let t = Instant::now();
            for _ in 0..size {
                let cd = cd.clone();
                drop(sp.spawn(async move { cd.hit() }));
            }
            cd.wait();
            busy += t.elapsed();
        }
        busy
    })
    .join()
    .unwrap();
    (busy.as_nanos() as f64, (bursts * size) as u64)
}

/// (d) `threads` external threads each spawn `tasks` short CPU tasks; until all ran.
fn ext_submit(rt: &Rt, threads: usize, tasks: usize, iters: u32) -> (f64, u64) {
    let total = threads * tasks;
    let cd = Countdown::new(total);
    let start = Arc::new(Barrier::new(threads + 1));
    let submitters: Vec<_> = (0..threads)
        .map(|_| {
            let (sp, cd, start) = (rt.spawner(), cd.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                for _ in 0..tasks {
                    let cd = cd.clone();
                    drop(sp.spawn(async move {
                        work(iters);
                        cd.hit();
                    }));
                }
            })
        })
        .collect();
    start.wait();
    let t = Instant::now();
    cd.wait();
    let elapsed = t.elapsed();
    for s in submitters {
        s.join().unwrap();
    }
    (elapsed.as_nanos() as f64, total as u64)
}

// ---------------------------------------------------------------------------------------
// Driver.

struct Scenario {
    name: &'static str,
    unit: &'static str,
    desc: String,
    run: RunFn,
}

/// Runs one repetition of a scenario on a runtime: (ns measured, units).
type RunFn = Box<dyn Fn(&Rt) -> (f64, u64)>;

#[derive(Clone, Copy)]
struct Stats {
    median: f64,
    min: f64,
    max: f64,
}

fn stats(mut v: Vec<f64>) -> Option<Stats> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some(Stats {
        median,
        min: v[0],
        max: v[n - 1],
    })
}

fn fmt_ns(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn main() {
    if common_skip::skip_unless_benchmarking() {
        return;
    }
    let mut quick = false;
    let mut workers: Option<usize> = std::env::var("FIBR_BENCH_WORKERS")
        .ok()
        .and_then(|s| s.parse().ok());
    let mut filters: Vec<String> = Vec::new();
    let mut only: Option<String> = None;
    let mut reps: Option<usize> = None;
    let mut json_path: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => quick = true,
            // cargo bench passes --bench to harness = false targets.
            "--bench" => {}
            "--workers" => {
                workers = Some(
                    args.next()
                        .and_then(|s| s.parse().ok())
                        .expect("--workers N"),
                )
            }
            "--only" => only = Some(args.next().expect("--only fibr|tokio")),
            "--reps" => reps = Some(args.next().and_then(|s| s.parse().ok()).expect("--reps N")),
            "--json" => json_path = Some(args.next().expect("--json PATH")),
            s if s.starts_with("--workers=") => {
                workers = Some(s["--workers=".len()..].parse().expect("--workers=N"))
            }
            s if s.starts_with('-') => eprintln!("ignoring unknown flag {s}"),
            s => filters.push(s.to_string()),
        }
    }
    let workers = workers
        .filter(|&n| n > 0)
        .unwrap_or_else(|| thread::available_parallelism().map_or(1, |n| n.get()));
    let reps = reps.filter(|&r| r > 0).unwrap_or(if quick { 3 } else { 5 });

    let (work_iters, work_ns) = calibrate(200.0);
    let s = if quick {
        Sizes {
            ping_pong: 20_000,
            storm_spawners: 4,
            storm_tasks: 10_000,
            bursts: 50,
            burst_size: 256,
            ext_threads: 2,
            ext_tasks: 10_000,
            work_iters,
        }
    } else {
        Sizes {
            ping_pong: 200_000,
            storm_spawners: 4,
            storm_tasks: 100_000,
            bursts: 500,
            burst_size: 256,
            ext_threads: 2,
            ext_tasks: 100_000,
            work_iters,
        }
    };

    let scenarios = [
        Scenario {
            name: "ping-pong",
            unit: "ns/hand-off",
            desc: format!("{} hand-offs between 2 tasks", s.ping_pong),
            run: Box::new({
                let n = s.ping_pong;
                move |rt| ping_pong(rt, n)
            }),
        },
        Scenario {
            name: "spawn-storm",
            unit: "ns/task",
            desc: format!(
                "{} spawners x {} empty tasks",
                s.storm_spawners, s.storm_tasks
            ),
            run: Box::new({
                let (m, k) = (s.storm_spawners, s.storm_tasks);
                move |rt| spawn_storm(rt, m, k)
            }),
        },
        Scenario {
            name: "bursts",
            unit: "ns/task",
            desc: format!(
                "{} bursts x {} tiny tasks, 1 ms gaps excluded",
                s.bursts, s.burst_size
            ),
            run: Box::new({
                let (b, n) = (s.bursts, s.burst_size);
                move |rt| bursts(rt, b, n)
            }),
        },
        Scenario {
            name: "ext-submit",
            unit: "ns/task",
            desc: format!(
                "{} external threads x {} tasks of ~{:.0} ns",
                s.ext_threads, s.ext_tasks, work_ns
            ),
            run: Box::new({
                let (t, n, it) = (s.ext_threads, s.ext_tasks, s.work_iters);
                move |rt| ext_submit(rt, t, n, it)
            }),
        },
    ];

    let fibr = Rt::Fibr(
        fibr::Engine::new(fibr::Config::default().with_workers(workers), [])
            .expect("start fibr engine"),
    );
    let tokio = Rt::Tokio(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
            .expect("start tokio runtime"),
    );

    eprintln!(
        "executor bench: workers={workers} reps={reps}{} work={work_iters} iters (~{work_ns:.0} ns)",
        if quick { " (quick)" } else { "" }
    );

    let selected = |rt: &Rt| !matches!(only.as_deref(), Some(o) if o != rt.name());
    let mut rows = Vec::new();
    // Every repetition's figure, for --json.
    let mut runs: Vec<(&Scenario, Vec<f64>, Vec<f64>)> = Vec::new();
    for sc in scenarios.iter() {
        if !filters.is_empty() && !filters.iter().any(|f| sc.name.contains(f.as_str())) {
            continue;
        }
        // Warm-up: one run each (thread start-up, allocator, page faults).
        for rt in [&fibr, &tokio] {
            if selected(rt) {
                black_box((sc.run)(rt));
            }
        }
        let mut f = Vec::new();
        let mut t = Vec::new();
        for rep in 0..reps {
            // Interleave, alternating who goes first, so drift hits both alike.
            let order = if rep % 2 == 0 {
                [&fibr, &tokio]
            } else {
                [&tokio, &fibr]
            };
            for rt in order.into_iter().filter(|rt| selected(rt)) {
                let (ns, units) = (sc.run)(rt);
                let per = ns / units as f64;
                eprintln!(
                    "  {:<12} {:<5} rep {rep}: {:>8} {}",
                    sc.name,
                    rt.name(),
                    fmt_ns(per),
                    sc.unit
                );
                if rt.kind() == Kind::Fibr {
                    f.push(per);
                } else {
                    t.push(per);
                }
            }
        }
        rows.push((sc, stats(f.clone()), stats(t.clone())));
        runs.push((sc, f, t));
    }

    println!();
    println!(
        "workers = {workers}, {reps} runs per cell: median (min-max){}",
        if quick { ", --quick sizes" } else { "" }
    );
    println!();
    println!("| scenario | unit | fibr | tokio | fibr/tokio |");
    println!("|---|---|---|---|---|");
    let cell = |st: &Option<Stats>| match st {
        Some(st) => format!(
            "{} ({}-{})",
            fmt_ns(st.median),
            fmt_ns(st.min),
            fmt_ns(st.max)
        ),
        None => "-".into(),
    };
    for (sc, f, t) in rows.iter() {
        let ratio = match (f, t) {
            (Some(f), Some(t)) => format!("{:.2}", f.median / t.median),
            _ => "-".into(),
        };
        println!(
            "| {} ({}) | {} | {} | {} | {} |",
            sc.name,
            sc.desc,
            sc.unit,
            cell(f),
            cell(t),
            ratio
        );
    }

    if let Some(path) = json_path {
        let scenarios: Vec<serde_json::Value> = runs
            .iter()
            .map(|(sc, f, t)| {
                let med = |v: &[f64]| stats(v.to_vec()).map(|s| s.median);
                serde_json::json!({
                    "name": sc.name,
                    "desc": sc.desc,
                    "unit": sc.unit,
                    "fibr": f,
                    "tokio": t,
                    "median": { "fibr": med(f), "tokio": med(t) },
                })
            })
            .collect();
        let doc = serde_json::json!({
            "bench": "executor",
            "command": format!("cargo bench --bench executor{}",
                if quick { " -- --quick" } else { "" }),
            "workers": workers,
            "reps": reps,
            "quick": quick,
            "work_ns": work_ns,
            "scenarios": scenarios,
        });
        let mut text = serde_json::to_string_pretty(&doc).expect("JSON values serialize");
        text.push('\n');
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing {path}: {e}"));
        println!("wrote {path}");
    }

    if let Rt::Fibr(e) = &fibr {
        e.shutdown(Duration::from_secs(2));
    }
    if let Rt::Tokio(r) = tokio {
        r.shutdown_timeout(Duration::from_secs(2));
    }
}
