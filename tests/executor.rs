//! The executor and timers: `fibr::run`, `fibr::spawn`, `JoinHandle` (await, abort, drop),
//! panics, fairness of `yield_now`, `time::{sleep, sleep_until, timeout, interval}`, and
//! `Engine::{spawn, block_on}` with a custom `Config`.
//!
//! Every test body runs under a watchdog (`bounded`): a hang fails the test instead of
//! stalling the suite.

mod common;

use fibr::time::{self, Elapsed};
use fibr::{Config, Engine};
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use common::bounded;

const LIMIT: Duration = Duration::from_secs(10);

/// Sets a flag when dropped: tells whether a future was dropped.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A waker that counts its wake-ups.
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A tiny deterministic PRNG (xorshift64*), so the test needs no extra crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[test]
fn run_returns_the_futures_output() {
    bounded(LIMIT, || {
        assert_eq!(fibr::run(async { 40 + 2 }), 42);
        let s = fibr::run(async {
            fibr::yield_now().await;
            String::from("done")
        });
        assert_eq!(s, "done");
        // A future that actually waits on a timer before finishing.
        let v = fibr::run(async {
            time::sleep(Duration::from_millis(5)).await;
            vec![1, 2, 3]
        });
        assert_eq!(v, [1, 2, 3]);
    });
}

#[test]
fn spawn_and_await_join_handle() {
    bounded(LIMIT, || {
        let out = fibr::run(async {
            let a = fibr::spawn(async { 7u64 });
            let b = fibr::spawn(async {
                time::sleep(Duration::from_millis(10)).await;
                String::from("slept")
            });
            let c = fibr::spawn(async {
                // A task that spawns and awaits its own child.
                fibr::spawn(async { 5u32 }).await.unwrap() * 2
            });
            (a.await.unwrap(), b.await.unwrap(), c.await.unwrap())
        });
        assert_eq!(out, (7, "slept".to_string(), 10));
    });
}

#[test]
fn abort_cancels_a_task_sleeping_forever() {
    bounded(LIMIT, || {
        let dropped = Arc::new(AtomicBool::new(false));
        let started = Arc::new(AtomicBool::new(false));
        let (d, s) = (dropped.clone(), started.clone());
        fibr::run(async move {
            let h = fibr::spawn(async move {
                let _guard = DropFlag(d);
                s.store(true, Ordering::SeqCst);
                time::sleep(Duration::from_secs(3600)).await;
                "never"
            });
            // Let it reach the sleep.
            while !started.load(Ordering::SeqCst) {
                time::sleep(Duration::from_millis(1)).await;
            }
            time::sleep(Duration::from_millis(10)).await;
            assert!(!h.is_finished());
            h.abort();
            let r = time::timeout(Duration::from_secs(5), h)
                .await
                .expect("awaiting an aborted task must not hang");
            let e = r.expect_err("an aborted task has no output");
            assert!(e.is_cancelled(), "{e:?}");
            assert!(!e.is_panic(), "{e:?}");
        });
        assert!(
            dropped.load(Ordering::SeqCst),
            "abort must drop the task's future"
        );
    });
}

#[test]
fn abort_after_completion_keeps_the_output() {
    bounded(LIMIT, || {
        fibr::run(async {
            let h = fibr::spawn(async { 99 });
            while !h.is_finished() {
                time::sleep(Duration::from_millis(1)).await;
            }
            h.abort();
            assert_eq!(h.await.unwrap(), 99);
        });
    });
}

#[test]
fn a_panicking_task_gives_is_panic_and_the_runtime_keeps_working() {
    bounded(LIMIT, || {
        fibr::run(async {
            let h = fibr::spawn(async {
                time::sleep(Duration::from_millis(1)).await;
                if std::hint::black_box(true) {
                    panic!("boom in a spawned task");
                }
                1
            });
            let e = h.await.expect_err("the task panicked");
            assert!(e.is_panic(), "{e:?}");
            assert!(!e.is_cancelled(), "{e:?}");
            let payload = e.into_panic();
            let msg = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(|s| s.as_str()))
                .unwrap_or("");
            assert!(msg.contains("boom"), "payload: {msg:?}");

            // Several more panics, then ordinary work on every worker still runs.
            let mut hs = Vec::new();
            for i in 0..8 {
                hs.push(fibr::spawn(async move {
                    if i % 2 == 0 {
                        panic!("panic {i}");
                    }
                    i
                }));
            }
            for (i, h) in hs.into_iter().enumerate() {
                match h.await {
                    Ok(v) => assert_eq!(v, i),
                    Err(e) => assert!(i % 2 == 0 && e.is_panic(), "{i}: {e:?}"),
                }
            }
            let mut sum = 0;
            for h in (0..64)
                .map(|i| fibr::spawn(async move { i }))
                .collect::<Vec<_>>()
            {
                sum += h.await.unwrap();
            }
            assert_eq!(sum, (0..64).sum::<i32>());
            time::sleep(Duration::from_millis(2)).await;
        });
        // And a fresh run afterwards works too.
        assert_eq!(
            fibr::run(async { fibr::spawn(async { 3 }).await.unwrap() }),
            3
        );
    });
}

#[test]
fn dropping_a_join_handle_detaches_the_task() {
    bounded(LIMIT, || {
        let (tx, rx) = mpsc::channel();
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        fibr::run(async move {
            let h = fibr::spawn(async move {
                time::sleep(Duration::from_millis(30)).await;
                d.store(true, Ordering::SeqCst);
                tx.send("finished").unwrap();
            });
            drop(h);
        });
        // The run returned right away; the task keeps going on its own.
        let got = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("a detached task must still run to completion");
        assert_eq!(got, "finished");
        assert!(done.load(Ordering::SeqCst));
    });
}

#[test]
fn a_hundred_thousand_tasks_spawned_from_many_tasks_all_complete() {
    const OUTER: usize = 200;
    const INNER: usize = 500;
    bounded(Duration::from_secs(15), || {
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        let t0 = Instant::now();
        let total = fibr::run(async move {
            let outers: Vec<_> = (0..OUTER)
                .map(|o| {
                    let c = c.clone();
                    fibr::spawn(async move {
                        let inners: Vec<_> = (0..INNER)
                            .map(|i| {
                                let c = c.clone();
                                fibr::spawn(async move {
                                    if i % 16 == 0 {
                                        fibr::yield_now().await;
                                    }
                                    c.fetch_add(1, Ordering::Relaxed);
                                    o * INNER + i
                                })
                            })
                            .collect();
                        let mut sum = 0usize;
                        for h in inners {
                            sum += h.await.unwrap();
                        }
                        sum
                    })
                })
                .collect();
            let mut sum = 0usize;
            for h in outers {
                sum += h.await.unwrap();
            }
            sum
        });
        let n = OUTER * INNER;
        assert_eq!(count.load(Ordering::SeqCst), n);
        assert_eq!(total, n * (n - 1) / 2);
        eprintln!("{n} tasks spawned from {OUTER} tasks in {:?}", t0.elapsed());
    });
}

/// An engine with exactly one worker and no replacements, so fairness is observable.
fn one_worker_engine(name: &str) -> Engine {
    Engine::new(
        Config::default()
            .with_workers(1)
            .with_max_workers(1)
            .with_thread_name(name),
        [],
    )
    .unwrap()
}

#[test]
fn yield_now_lets_another_task_run_on_a_single_worker() {
    bounded(LIMIT, || {
        let engine = one_worker_engine("yield-flag");
        let flag = Arc::new(AtomicBool::new(false));
        let f2 = flag.clone();
        // The spinner occupies the only worker until the setter has run.
        let spinner = engine.spawn(async move {
            let mut spins = 0u64;
            while !flag.load(Ordering::SeqCst) {
                fibr::yield_now().await;
                spins += 1;
            }
            spins
        });
        let setter = engine.spawn(async move { f2.store(true, Ordering::SeqCst) });
        let spins = engine.block_on(async move {
            setter.await.unwrap();
            spinner.await.unwrap()
        });
        assert!(spins >= 1);
        engine.shutdown(Duration::from_millis(100));
    });
}

#[test]
fn yield_now_two_tasks_alternate() {
    const ROUNDS: usize = 2000;
    bounded(LIMIT, || {
        let engine = one_worker_engine("yield-alt");
        let a = Arc::new(AtomicUsize::new(0));
        let b = Arc::new(AtomicUsize::new(0));
        let ready = Arc::new(AtomicUsize::new(0));
        let mk = |mine: Arc<AtomicUsize>, other: Arc<AtomicUsize>, ready: Arc<AtomicUsize>| {
            async move {
                ready.fetch_add(1, Ordering::SeqCst);
                // Start together.
                while ready.load(Ordering::SeqCst) < 2 {
                    fibr::yield_now().await;
                }
                let mut max_lead = 0usize;
                for _ in 0..ROUNDS {
                    let m = mine.fetch_add(1, Ordering::SeqCst) + 1;
                    let o = other.load(Ordering::SeqCst);
                    if o < ROUNDS {
                        max_lead = max_lead.max(m.saturating_sub(o));
                    }
                    fibr::yield_now().await;
                }
                max_lead
            }
        };
        let ha = engine.spawn(mk(a.clone(), b.clone(), ready.clone()));
        let hb = engine.spawn(mk(b.clone(), a.clone(), ready.clone()));
        let (la, lb) = engine.block_on(async move { (ha.await.unwrap(), hb.await.unwrap()) });
        assert_eq!(a.load(Ordering::SeqCst), ROUNDS);
        assert_eq!(b.load(Ordering::SeqCst), ROUNDS);
        // On one worker, yielding must put a task behind the other: neither runs ahead by
        // more than a step or two (allow slack for wake-up ordering).
        assert!(la <= 8 && lb <= 8, "max leads: a {la}, b {lb}");
        engine.shutdown(Duration::from_millis(100));
    });
}

#[test]
fn sleep_is_not_early_and_not_much_late() {
    bounded(LIMIT, || {
        fibr::run(async {
            for ms in [50u64, 20, 1] {
                let d = Duration::from_millis(ms);
                let t0 = Instant::now();
                time::sleep(d).await;
                let el = t0.elapsed();
                assert!(el >= d, "sleep({d:?}) woke after {el:?}");
                assert!(
                    el < d + Duration::from_millis(100),
                    "sleep({d:?}) woke after {el:?}"
                );
            }
            // Zero sleeps complete immediately.
            let t0 = Instant::now();
            time::sleep(Duration::ZERO).await;
            assert!(t0.elapsed() < Duration::from_millis(50));
        });
        // Also from inside a spawned task (a worker's waker rather than a parked thread).
        let el = fibr::run(async {
            fibr::spawn(async {
                let t0 = Instant::now();
                time::sleep(Duration::from_millis(50)).await;
                t0.elapsed()
            })
            .await
            .unwrap()
        });
        assert!(
            el >= Duration::from_millis(50) && el < Duration::from_millis(150),
            "{el:?}"
        );
    });
}

#[test]
fn sleep_until_a_deadline() {
    bounded(LIMIT, || {
        fibr::run(async {
            let deadline = Instant::now() + Duration::from_millis(30);
            let s = time::sleep_until(deadline);
            assert_eq!(s.deadline(), deadline);
            s.await;
            let now = Instant::now();
            assert!(now >= deadline);
            assert!(
                now - deadline < Duration::from_millis(100),
                "{:?}",
                now - deadline
            );
            // A deadline in the past is ready at once.
            let t0 = Instant::now();
            time::sleep_until(t0 - Duration::from_millis(5)).await;
            assert!(t0.elapsed() < Duration::from_millis(50));
        });
    });
}

#[test]
fn sleep_reset_moves_the_deadline() {
    bounded(LIMIT, || {
        fibr::run(async {
            let t0 = Instant::now();
            let mut s = pin!(time::sleep(Duration::from_secs(3600)));
            // Poll once so the long timer is armed, then move it close.
            let armed = std::future::poll_fn(|cx| Poll::Ready(s.as_mut().poll(cx).is_pending()));
            assert!(armed.await);
            s.as_mut().reset(t0 + Duration::from_millis(30));
            s.await;
            let el = t0.elapsed();
            assert!(
                el >= Duration::from_millis(30) && el < Duration::from_millis(150),
                "{el:?}"
            );
        });
    });
}

#[test]
fn timeout_ok_when_fast_err_when_slow_and_the_slow_future_is_dropped() {
    bounded(LIMIT, || {
        fibr::run(async {
            // Fast: the output comes back, long before the deadline.
            let t0 = Instant::now();
            let r = time::timeout(Duration::from_secs(2), async {
                time::sleep(Duration::from_millis(10)).await;
                7
            })
            .await;
            assert_eq!(r, Ok(7));
            assert!(t0.elapsed() < Duration::from_millis(500));

            // Immediately ready.
            assert_eq!(
                time::timeout(Duration::from_millis(1), async { 1 }).await,
                Ok(1)
            );

            // Slow: Elapsed at about the deadline, and the inner future is dropped.
            let dropped = Arc::new(AtomicBool::new(false));
            let d = dropped.clone();
            let t0 = Instant::now();
            let r = time::timeout(Duration::from_millis(40), async move {
                let _g = DropFlag(d);
                time::sleep(Duration::from_secs(3600)).await;
                8
            })
            .await;
            let el = t0.elapsed();
            let _elapsed: Elapsed = r.expect_err("the slow future must time out");
            assert!(
                el >= Duration::from_millis(40) && el < Duration::from_millis(200),
                "{el:?}"
            );
            assert!(
                dropped.load(Ordering::SeqCst),
                "the slow future was not dropped"
            );

            // Elapsed is an error that becomes io::ErrorKind::TimedOut.
            let e = time::timeout(Duration::from_millis(1), std::future::pending::<()>())
                .await
                .unwrap_err();
            assert!(!e.to_string().is_empty());
            let io: std::io::Error = e.into();
            assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
        });
    });
}

#[test]
fn interval_ticks_at_its_period() {
    bounded(LIMIT, || {
        fibr::run(async {
            let period = Duration::from_millis(20);
            let t0 = Instant::now();
            let mut iv = time::interval(period);
            assert_eq!(iv.period(), period);
            let mut ticks = Vec::new();
            for _ in 0..5 {
                ticks.push(iv.tick().await);
            }
            let el = t0.elapsed();
            // The first tick is immediate; four periods follow.
            assert!(
                el >= Duration::from_millis(80) && el < Duration::from_millis(200),
                "5 ticks of 20 ms took {el:?}"
            );
            for w in ticks.windows(2) {
                assert_eq!(w[1] - w[0], period, "scheduled tick instants: {ticks:?}");
            }
            assert!(ticks[0] - t0 < Duration::from_millis(5));
        });
    });
}

#[test]
fn interval_skips_missed_ticks() {
    bounded(LIMIT, || {
        fibr::run(async {
            let period = Duration::from_millis(10);
            let mut iv = time::interval(period);
            let first = iv.tick().await;
            // Miss several periods without ticking.
            thread::sleep(Duration::from_millis(55));
            let late = iv.tick().await; // the overdue one, at once
            assert_eq!(late, first + period);
            let t = Instant::now();
            let next = iv.tick().await;
            // Missed ticks are skipped, not bunched: the next one is on the grid, in the future
            // relative to when the late tick was taken.
            assert!(
                next > first + Duration::from_millis(50),
                "{:?}",
                next - first
            );
            assert_eq!((next - first).as_nanos() % period.as_nanos(), 0);
            assert!(t.elapsed() < Duration::from_millis(100));
        });
    });
}

#[test]
fn a_thousand_concurrent_random_sleeps_all_complete() {
    bounded(LIMIT, || {
        let t0 = Instant::now();
        let worst_late = fibr::run(async {
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
            let hs: Vec<_> = (0..1000)
                .map(|_| {
                    let d = Duration::from_millis(1 + rng.next() % 50);
                    fibr::spawn(async move {
                        let t = Instant::now();
                        time::sleep(d).await;
                        let el = t.elapsed();
                        assert!(el >= d, "slept {el:?} for {d:?}");
                        el - d
                    })
                })
                .collect();
            let mut worst = Duration::ZERO;
            for h in hs {
                worst = worst.max(h.await.unwrap());
            }
            worst
        });
        let el = t0.elapsed();
        assert!(el < Duration::from_secs(2), "1000 sleeps took {el:?}");
        assert!(worst_late < Duration::from_millis(500), "{worst_late:?}");
        eprintln!("1000 random sleeps: total {el:?}, worst lateness {worst_late:?}");
    });
}

/// Timeouts from about 67 ms up share loop timers by slot: each still fails at or after its
/// own deadline, and about a slot late at most (1 and 4 ms here) plus the loop's delay,
/// with two lengths and many start times at once; the ones that finish first are fine.
#[test]
fn a_thousand_concurrent_timeouts_each_fire_at_their_own_deadline() {
    bounded(LIMIT, || {
        fibr::run(async {
            let mut rng = Rng(0x2545_f491_4f6c_dd1d);
            let hs: Vec<_> = (0..1000)
                .map(|i| {
                    let d = Duration::from_millis(if i % 2 == 0 { 100 } else { 300 });
                    // Spread the starts over several slots.
                    let start = Duration::from_micros(rng.next() % 20_000);
                    fibr::spawn(async move {
                        time::sleep(start).await;
                        let t = Instant::now();
                        let pass = i % 10 == 0;
                        let r = time::timeout(d, async move {
                            if pass {
                                return 1;
                            }
                            std::future::pending::<u32>().await
                        })
                        .await;
                        let el = t.elapsed();
                        if pass {
                            assert_eq!(r, Ok(1));
                            return Duration::ZERO;
                        }
                        assert!(r.is_err(), "a pending future did not time out");
                        assert!(el >= d, "timed out after {el:?}, before its {d:?}");
                        el - d
                    })
                })
                .collect();
            let mut worst = Duration::ZERO;
            for h in hs {
                worst = worst.max(h.await.unwrap());
            }
            assert!(worst < Duration::from_millis(150), "{worst:?} late");
            eprintln!("1000 shared timeouts: worst lateness {worst:?}");
        });
    });
}

#[test]
fn a_dropped_sleep_fires_nothing() {
    bounded(LIMIT, || {
        // Control: a polled and kept Sleep does wake its waker once.
        let kept = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let kept_waker = Waker::from(kept.clone());
        let mut s1 = Box::pin(time::sleep(Duration::from_millis(20)));
        assert!(s1
            .as_mut()
            .poll(&mut Context::from_waker(&kept_waker))
            .is_pending());

        // The dropped one: polled (so its timer is armed on a loop), then dropped.
        let dropped = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let dropped_waker = Waker::from(dropped.clone());
        let mut s2 = Box::pin(time::sleep(Duration::from_millis(20)));
        assert!(s2
            .as_mut()
            .poll(&mut Context::from_waker(&dropped_waker))
            .is_pending());
        drop(s2);
        drop(dropped_waker);

        thread::sleep(Duration::from_millis(120));
        assert_eq!(kept.0.load(Ordering::SeqCst), 1, "the kept sleep must fire");
        assert!(s1
            .as_mut()
            .poll(&mut Context::from_waker(&kept_waker))
            .is_ready());
        assert_eq!(
            dropped.0.load(Ordering::SeqCst),
            0,
            "a dropped sleep must not wake anything"
        );
        // The loop released its reference to the cancelled entry's waker.
        assert_eq!(Arc::strong_count(&dropped), 1);
    });
}

#[test]
fn a_sleep_dropped_inside_a_task_does_not_wake_it_later() {
    bounded(LIMIT, || {
        let polls = Arc::new(AtomicUsize::new(0));
        let p = polls.clone();
        fibr::run(async move {
            let h = fibr::spawn(async move {
                // Arm a 20 ms sleep, drop it, then wait on something else for 100 ms and
                // count how many times this task gets polled meanwhile.
                {
                    let mut s = pin!(time::sleep(Duration::from_millis(20)));
                    std::future::poll_fn(|cx| {
                        assert!(s.as_mut().poll(cx).is_pending());
                        Poll::Ready(())
                    })
                    .await;
                }
                let mut long = pin!(time::sleep(Duration::from_millis(100)));
                std::future::poll_fn(|cx| {
                    p.fetch_add(1, Ordering::SeqCst);
                    long.as_mut().poll(cx)
                })
                .await;
            });
            h.await.unwrap();
        });
        // Once to arm the long sleep, once when it fires: the dropped one adds nothing.
        assert_eq!(polls.load(Ordering::SeqCst), 2);
    });
}

fn engine_spawn_and_block_on(workers: usize) {
    let name = format!("exec-w{workers}");
    let engine = Engine::new(
        Config::default()
            .with_workers(workers)
            .with_thread_name(name.clone()),
        [],
    )
    .unwrap();
    assert!(engine.workers() >= workers, "{} workers", engine.workers());

    // Engine::spawn runs on this engine's workers.
    let prefix = name.clone();
    let h = engine.spawn(async move {
        let t = thread::current();
        assert!(
            t.name().unwrap_or("").starts_with(&prefix),
            "ran on {:?}",
            t.name()
        );
        time::sleep(Duration::from_millis(5)).await;
        11
    });

    // block_on makes the engine current: fibr::spawn and timers inside use it too.
    let (a, names) = engine.block_on(async move {
        let a = h.await.unwrap();
        let hs: Vec<_> = (0..200)
            .map(|i| {
                fibr::spawn(async move {
                    time::sleep(Duration::from_millis(1 + i % 5)).await;
                    thread::current().name().unwrap_or("").to_string()
                })
            })
            .collect();
        let mut names = std::collections::HashSet::new();
        for h in hs {
            names.insert(h.await.unwrap());
        }
        (a, names)
    });
    assert_eq!(a, 11);
    // Which threads ran them is checked by `tasks_of_an_engine_stay_on_its_workers`.
    assert!(!names.is_empty());

    // The engine's workers and timers interoperate with a JoinHandle awaited elsewhere.
    let h = engine.spawn(async { time::sleep(Duration::from_millis(10)).await });
    let r = fibr::run(time::timeout(Duration::from_secs(5), h));
    assert!(matches!(r, Ok(Ok(()))));

    engine.shutdown(Duration::from_millis(200));
}

#[test]
fn engine_spawn_and_block_on_with_one_worker() {
    bounded(LIMIT, || engine_spawn_and_block_on(1));
}

#[test]
fn engine_spawn_and_block_on_with_three_workers() {
    bounded(LIMIT, || engine_spawn_and_block_on(3));
}

#[test]
fn a_join_handle_awaited_from_a_plain_thread() {
    bounded(LIMIT, || {
        let h = fibr::spawn(async {
            time::sleep(Duration::from_millis(20)).await;
            String::from("from a worker")
        });
        let h2 = fibr::spawn(async { 5 });
        let t = thread::spawn(move || (fibr::run(h), fibr::run(h2)));
        let (a, b) = t.join().unwrap();
        assert_eq!(a.unwrap(), "from a worker");
        assert_eq!(b.unwrap(), 5);

        // And an engine's task awaited from a plain thread.
        let engine = one_worker_engine("plain-thread");
        let h = engine.spawn(async {
            time::sleep(Duration::from_millis(10)).await;
            3
        });
        let got = thread::spawn(move || fibr::run(h)).join().unwrap();
        assert_eq!(got.unwrap(), 3);
        engine.shutdown(Duration::from_millis(100));
    });
}

fn thread_name() -> String {
    thread::current().name().unwrap_or("").to_string()
}

/// `fibr::spawn` from a task running on an engine's worker spawns onto that engine, and a
/// task resumes on its own engine's workers after a timer. (Regression: workers started
/// inside `Arc::new_cyclic` in `Runtime::start` once never got their runtime set.)
#[test]
fn tasks_of_an_engine_stay_on_its_workers() {
    bounded(LIMIT, || {
        let mut strays = Vec::new();
        for k in 0..30 {
            let name = format!("affinity{k}");
            let engine = Engine::new(
                Config::default()
                    .with_workers(3)
                    .with_thread_name(name.clone()),
                [],
            )
            .unwrap();
            let hs: Vec<_> = (0..20)
                .map(|_| {
                    engine.spawn(async {
                        let child = fibr::spawn(async { thread_name() }).await.unwrap();
                        time::sleep(Duration::from_millis(1)).await;
                        (child, thread_name())
                    })
                })
                .collect();
            for h in hs {
                let (child, resumed) = fibr::run(h).unwrap();
                for n in [child, resumed] {
                    if !n.starts_with(&name) {
                        strays.push(format!("engine {name}: ran on {n}"));
                    }
                }
            }
            engine.shutdown(Duration::from_millis(100));
        }
        assert!(
            strays.is_empty(),
            "{} of 1200 runs left their engine, e.g. {:?}",
            strays.len(),
            &strays[..strays.len().min(3)]
        );
    });
}

/// A task woken by another runtime's event loop still runs on its own engine's workers.
/// (Regression: a loop once collected every wake-up during dispatch into one batch for
/// *its own* pool, whatever pool the task belonged to; batches are tagged by pool now.)
#[test]
fn a_task_woken_by_another_runtimes_loop_runs_on_its_own_workers() {
    bounded(LIMIT, || {
        let engine = one_worker_engine("own-pool");
        // Arm a timer on the default runtime's loop (first poll from this thread)...
        let mut s = Box::pin(time::sleep(Duration::from_millis(30)));
        let w = Waker::from(Arc::new(CountingWaker(AtomicUsize::new(0))));
        assert!(s.as_mut().poll(&mut Context::from_waker(&w)).is_pending());
        // ...then await it from a task of the engine.
        let h = engine.spawn(async move {
            let before = thread_name();
            s.await;
            (before, thread_name())
        });
        let (before, after) = fibr::run(h).unwrap();
        assert!(before.starts_with("own-pool"), "{before}");
        assert!(
            after.starts_with("own-pool"),
            "the task resumed on {after}, not on its engine's worker"
        );
        engine.shutdown(Duration::from_millis(100));
    });
}
