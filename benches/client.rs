//! HTTP client cost: `fibr::client::Client` on a fibr engine (one event loop, one worker)
//! against hyper-util's legacy `Client` on tokio (a multi-thread runtime with one worker,
//! and a current-thread runtime), all fetching `GET /` from the same server with 50
//! requests in flight. Two more rows on the same fibr engine place it: hyper's own client
//! connection over fibr sockets (the other way to build the client: "native or hyper,
//! measure both"), and a hand-written exchange with no client library (the floor).
//!
//! ```sh
//! cargo bench --bench client --features client              # 5 s phases, 3 runs
//! cargo bench --bench client --features client -- --quick   # 1 s phases, 1 run
//! BENCH_SERVER=axum cargo bench --bench client --features client   # serve with axum::serve
//! cargo bench --bench client --features client -- --json out.json  # also the results as JSON
//! ```
//!
//! `cargo bench --bench compare` runs this bench with `--json` and puts its figures in its
//! report.
//!
//! The server is `examples/bench_server.rs` (built here unless `--no-build`; `fibr` by
//! default, `BENCH_SERVER=axum` for axum on tokio, one worker either way), a child process
//! pinned to the first CPU this process may use (`taskset -c`); this process, so every
//! client runtime's threads, is pinned to the second. Each client phase runs on a fresh
//! runtime and client after a 1 s warm-up with the same load. The client's CPU time is
//! this process's (`getrusage(RUSAGE_SELF)`: user + system over all its threads) during
//! the phase, divided by the requests completed; requests/s is completed requests over the
//! phase's wall time. Each figure is the median over the runs, with min–max. The issue's
//! goal: fibr's CPU per request at most 0.8× hyper-util's.

#[path = "support/skip.rs"]
mod common_skip;
#[path = "support/os.rs"]
mod os_support;
use os_support::{find_server, pin_to};
#[path = "support/server.rs"]
mod server_support;
use server_support::ServerChild;

use bytes::Bytes;
use http::{Request, Uri};
use http_body_util::{BodyExt, Empty};
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const IN_FLIGHT: usize = 50;
const WARMUP: Duration = Duration::from_secs(1);
const IO_TIMEOUT: Duration = Duration::from_secs(10);
const GOAL: f64 = 0.8;

#[derive(Clone, Copy, PartialEq)]
enum Which {
    Fibr,
    HyperUtilMt,
    HyperUtilCt,
    /// hyper's own HTTP/1 client connection (`hyper::client::conn::http1`) over
    /// `fibr::net` sockets, one connection per task, its dispatcher spawned on fibr: the
    /// other way to build fibr's client (which it was until it went native).
    HyperOnFibr,
    /// No client library: keep-alive requests written and responses parsed by hand on
    /// `fibr::net` sockets, one connection per task: the floor.
    FibrRaw,
}

const CLIENTS: [Which; 5] = [
    Which::Fibr,
    Which::HyperUtilMt,
    Which::HyperUtilCt,
    Which::HyperOnFibr,
    Which::FibrRaw,
];

impl Which {
    fn key(self) -> &'static str {
        match self {
            Which::Fibr => "fibr",
            Which::HyperUtilMt => "mt",
            Which::HyperUtilCt => "ct",
            Which::HyperOnFibr => "hyper_on_fibr",
            Which::FibrRaw => "raw",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Which::Fibr => "fibr::client (fibr, 1 loop + 1 worker)",
            Which::HyperUtilMt => "hyper-util legacy (tokio multi-thread, 1 worker)",
            Which::HyperUtilCt => "hyper-util legacy (tokio current-thread)",
            Which::HyperOnFibr => "hyper's client connection on fibr::net (no pool)",
            Which::FibrRaw => "hand-written HTTP/1 on fibr::net (the floor)",
        }
    }
}

/// One measured phase.
#[derive(Clone, Copy)]
struct Sample {
    requests: u64,
    wall: Duration,
    cpu_us: f64,
    /// The user-space part of `cpu_us`.
    user_us: f64,
    /// Context switches (voluntary + involuntary) of this process's threads.
    switches: u64,
}

impl Sample {
    fn rps(&self) -> f64 {
        self.requests as f64 / self.wall.as_secs_f64()
    }
    fn cpu_per_req(&self) -> f64 {
        self.cpu_us / self.requests.max(1) as f64
    }
    fn user_per_req(&self) -> f64 {
        self.user_us / self.requests.max(1) as f64
    }
    fn switches_per_req(&self) -> f64 {
        self.switches as f64 / self.requests.max(1) as f64
    }
    fn cpu_pct(&self) -> f64 {
        self.cpu_us / 1e6 / self.wall.as_secs_f64() * 100.0
    }
}

fn main() -> ExitCode {
    common_skip::bench_main("client bench failed", bench)
}

fn bench() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let json_path = match args.iter().position(|a| a == "--json") {
        Some(i) => Some(args.get(i + 1).ok_or("--json takes a file path")?.clone()),
        None => None,
    };
    let (phase, runs) = if quick {
        (Duration::from_secs(1), 1)
    } else {
        (Duration::from_secs(5), 3)
    };
    which_tool("taskset")?;
    let bin = find_server(!args.iter().any(|a| a == "--no-build"))?;
    let server_name = std::env::var("BENCH_SERVER").unwrap_or_else(|_| "fibr".into());
    let (server_cpu, client_cpu) = os_support::pick_cpus()?;
    pin_to(client_cpu).map_err(|e| format!("pinning to CPU {client_cpu}: {e}"))?;
    let server = start_server(&bin, &server_name, server_cpu)?;
    let uri: Uri = format!("http://{}/", server.addr)
        .parse()
        .map_err(|e| format!("uri: {e}"))?;
    println!(
        "server: {server_name} (1 worker) on CPU {server_cpu}, {}; clients on CPU {client_cpu}; \
         {IN_FLIGHT} requests in flight, GET /, {} s phases, {runs} run(s)",
        server.addr,
        phase.as_secs()
    );

    // Diagnostic knob (unset in the bench): `BENCH_ONLY=fibr|mt|ct|hyper_on_fibr|raw` runs one client alone.
    let only = std::env::var("BENCH_ONLY").ok();
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); CLIENTS.len()];
    for run in 0..runs {
        for (i, &c) in CLIENTS.iter().enumerate() {
            if only.as_deref().is_some_and(|o| o != c.key()) {
                continue;
            }
            server.check_alive()?;
            let s = measure(c, &uri, phase)?;
            println!(
                "  run {}: {:<50} {:>9.0} req/s  {:>6.2} µs CPU/req ({:.2} user)  {:.0} % CPU  {:.2} switches/req",
                run + 1,
                c.name(),
                s.rps(),
                s.cpu_per_req(),
                s.user_per_req(),
                s.cpu_pct(),
                s.switches_per_req()
            );
            samples[i].push(s);
        }
    }

    if only.is_some() {
        return Ok(());
    }
    println!();
    println!(
        "{:<50} {:>22} {:>24} {:>10}",
        "client", "req/s", "client CPU µs/req", "vs fibr"
    );
    let fibr_cpu = median(samples[0].iter().map(Sample::cpu_per_req));
    for (i, &c) in CLIENTS.iter().enumerate() {
        let rps: Vec<f64> = samples[i].iter().map(Sample::rps).collect();
        let cpu: Vec<f64> = samples[i].iter().map(Sample::cpu_per_req).collect();
        println!(
            "{:<50} {:>22} {:>24} {:>9.2}x",
            c.name(),
            range(&rps, 0),
            range(&cpu, 2),
            median(cpu.iter().copied()) / fibr_cpu
        );
    }
    for (i, &c) in CLIENTS.iter().enumerate() {
        if !matches!(c, Which::HyperUtilMt | Which::HyperUtilCt) {
            continue;
        }
        let ratio = fibr_cpu / median(samples[i].iter().map(Sample::cpu_per_req));
        println!(
            "fibr CPU/request vs {}: {ratio:.2}x (goal <= {GOAL}x): {}",
            c.name(),
            if ratio <= GOAL { "met" } else { "NOT met" }
        );
    }
    if let Some(path) = json_path {
        let doc = to_json(&server_name, phase, runs, quick, &samples);
        std::fs::write(&path, doc).map_err(|e| format!("writing {path}: {e}"))?;
        println!("wrote {path}");
    }
    Ok(())
}

/// The results, machine-readable (what `benches/compare.rs` reads): every run of every
/// client, and the medians.
fn to_json(
    server: &str,
    phase: Duration,
    runs: usize,
    quick: bool,
    samples: &[Vec<Sample>],
) -> String {
    let clients: Vec<serde_json::Value> = CLIENTS
        .iter()
        .zip(samples)
        .map(|(c, ss)| {
            serde_json::json!({
                "key": c.key(),
                "name": c.name(),
                "runs": ss.iter().map(|s| serde_json::json!({
                    "requests": s.requests,
                    "wall_s": s.wall.as_secs_f64(),
                    "cpu_us": s.cpu_us,
                    "user_us": s.user_us,
                    "switches": s.switches,
                    "rps": s.rps(),
                    "cpu_per_req_us": s.cpu_per_req(),
                    "cpu_pct": s.cpu_pct(),
                })).collect::<Vec<_>>(),
                "median": {
                    "rps": median(ss.iter().map(Sample::rps)),
                    "cpu_per_req_us": median(ss.iter().map(Sample::cpu_per_req)),
                    "cpu_pct": median(ss.iter().map(Sample::cpu_pct)),
                },
            })
        })
        .collect();
    let doc = serde_json::json!({
        "bench": "client",
        "command": format!("cargo bench --bench client --features client{}",
            if quick { " -- --quick" } else { "" }),
        "server": server,
        "in_flight": IN_FLIGHT,
        "request": "GET /",
        "phase_s": phase.as_secs_f64(),
        "warmup_s": WARMUP.as_secs_f64(),
        "runs": runs,
        "quick": quick,
        "goal_cpu_vs_hyper_util": GOAL,
        "clients": clients,
    });
    let mut text = serde_json::to_string_pretty(&doc).expect("JSON values serialize");
    text.push('\n');
    text
}

fn median(v: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = v.collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn range(v: &[f64], decimals: usize) -> String {
    let m = median(v.iter().copied());
    if v.len() < 2 {
        return format!("{m:.decimals$}");
    }
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{m:.decimals$} ({lo:.decimals$}–{hi:.decimals$})")
}

/// The engine the fibr clients run on: one loop, one worker.
fn client_engine() -> Result<fibr::Engine, String> {
    let config = fibr::Config::default()
        .with_workers(1)
        .with_event_loops(1)
        .with_thread_name("fclient");
    fibr::Engine::new(config, []).map_err(|e| format!("fibr engine: {e}"))
}

/// Observes one phase of `tasks` on `engine`, then stops them and waits for them.
fn measure_fibr(
    engine: &fibr::Engine,
    tasks: Vec<fibr::JoinHandle<()>>,
    load: &Load,
    phase: Duration,
) -> Sample {
    let s = observe(load, phase);
    load.stop.store(true, Ordering::Relaxed);
    engine.block_on(async {
        for t in tasks {
            let _ = fibr::time::timeout(IO_TIMEOUT, t).await;
        }
    });
    s
}

/// Runs `session` on each of `IN_FLIGHT` connections of its own (no pool) on a fresh fibr
/// engine, for one measured phase.
fn per_connection<F, Fut>(load: &Load, phase: Duration, session: F) -> Result<Sample, String>
where
    F: Fn(fibr::net::TcpStream, Load, String) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let engine = client_engine()?;
    let authority = load
        .uri
        .authority()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let tasks: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let (load, authority) = (load.clone(), authority.clone());
            let connecting = async move {
                fibr::net::TcpStream::connect(authority.as_str())
                    .await
                    .map(|s| (s, load.clone(), authority))
                    .map_err(|_| load)
            };
            // Connect first, then hand the stream over.
            let ready = engine.block_on(connecting);
            match ready {
                Ok((s, load, authority)) => engine.spawn(session(s, load, authority)),
                Err(load) => engine.spawn(async move { load.count(false) }),
            }
        })
        .collect();
    let s = measure_fibr(&engine, tasks, load, phase);
    engine.shutdown(Duration::from_secs(1));
    Ok(s)
}

/// Keep-alive GETs through hyper's client connection, its dispatcher spawned on fibr.
async fn hyper_session(s: fibr::net::TcpStream, load: Load, authority: String) {
    let Ok((mut tx, conn)) = hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(s).await
    else {
        load.count(false);
        return;
    };
    let driver = fibr::spawn(conn);
    while !load.stop.load(Ordering::Relaxed) {
        let req = Request::get("/")
            .header(http::header::HOST, authority.as_str())
            .body(Empty::<Bytes>::new())
            .unwrap();
        let ok = match tx.send_request(req).await {
            Ok(res) => res.into_body().collect().await.is_ok(),
            Err(_) => false,
        };
        load.count(ok);
        if !ok {
            break;
        }
    }
    drop(tx);
    let _ = driver.await;
}

/// Keep-alive GETs written and parsed by hand.
async fn raw_session(s: fibr::net::TcpStream, load: Load, authority: String) {
    let request = format!("GET / HTTP/1.1\r\nhost: {authority}\r\n\r\n");
    let mut buf = vec![0u8; 16 * 1024];
    while !load.stop.load(Ordering::Relaxed) {
        let ok = raw_exchange(&s, request.as_bytes(), &mut buf).await;
        load.count(ok);
        if !ok {
            return;
        }
    }
}

/// One request and its whole response (Content-Length framed) on a kept-alive connection.
async fn raw_exchange(s: &fibr::net::TcpStream, request: &[u8], buf: &mut [u8]) -> bool {
    if s.write_all(request).await.is_err() {
        return false;
    }
    let mut have = 0;
    loop {
        match s.read(&mut buf[have..]).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => have += n,
        }
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut res = httparse::Response::new(&mut headers);
        let Ok(httparse::Status::Complete(head)) = res.parse(&buf[..have]) else {
            continue;
        };
        let len = res
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-length"))
            .and_then(|h| std::str::from_utf8(h.value).ok()?.parse::<usize>().ok());
        match len {
            Some(len) if have >= head + len => return res.code == Some(200),
            Some(_) => {}
            None => return false,
        }
    }
}

/// Runs `which` on a fresh runtime: warm-up, then one measured phase.
fn measure(which: Which, uri: &Uri, phase: Duration) -> Result<Sample, String> {
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let load = Load {
        uri: uri.clone(),
        done: done.clone(),
        failed: failed.clone(),
        stop: stop.clone(),
    };
    let sample = match which {
        Which::Fibr => {
            let engine = client_engine()?;
            let client = fibr::client::Client::new();
            let tasks: Vec<_> = (0..IN_FLIGHT)
                .map(|_| {
                    let (client, load) = (client.clone(), load.clone());
                    engine.spawn(async move {
                        while !load.stop.load(Ordering::Relaxed) {
                            let req = Request::get(load.uri.clone())
                                .body(Empty::<Bytes>::new())
                                .unwrap();
                            let ok = match client.request(req).await {
                                Ok(res) => res.into_body().collect().await.is_ok(),
                                Err(_) => false,
                            };
                            load.count(ok);
                        }
                    })
                })
                .collect();
            let s = measure_fibr(&engine, tasks, &load, phase);
            drop(client);
            engine.shutdown(Duration::from_secs(1));
            s
        }
        Which::HyperOnFibr => per_connection(&load, phase, hyper_session)?,
        Which::FibrRaw => per_connection(&load, phase, raw_session)?,
        Which::HyperUtilMt | Which::HyperUtilCt => {
            let rt = if which == Which::HyperUtilMt {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
            } else {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
            }
            .map_err(|e| format!("tokio runtime: {e}"))?;
            let client =
                hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                    .build_http::<Empty<Bytes>>();
            let make_tasks = |client: &hyper_util::client::legacy::Client<_, Empty<Bytes>>| {
                (0..IN_FLIGHT)
                    .map(|_| {
                        let (client, load) = (client.clone(), load.clone());
                        rt.spawn(async move {
                            while !load.stop.load(Ordering::Relaxed) {
                                let req = Request::get(load.uri.clone())
                                    .body(Empty::<Bytes>::new())
                                    .unwrap();
                                let ok = match client.request(req).await {
                                    Ok(res) => res.into_body().collect().await.is_ok(),
                                    Err(_) => false,
                                };
                                load.count(ok);
                            }
                        })
                    })
                    .collect::<Vec<_>>()
            };
            let s = if which == Which::HyperUtilCt {
                // A current-thread runtime runs its tasks only inside block_on.
                let tasks = make_tasks(&client);
                let l2 = load.clone();
                let s = rt.block_on(async move {
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    thread::spawn(move || {
                        let _ = tx.send(observe(&l2, phase));
                    });
                    rx.await.expect("observer")
                });
                stop.store(true, Ordering::Relaxed);
                rt.block_on(async {
                    for t in tasks {
                        let _ = tokio::time::timeout(IO_TIMEOUT, t).await;
                    }
                });
                s
            } else {
                let tasks = make_tasks(&client);
                let s = observe(&load, phase);
                stop.store(true, Ordering::Relaxed);
                rt.block_on(async {
                    for t in tasks {
                        let _ = tokio::time::timeout(IO_TIMEOUT, t).await;
                    }
                });
                s
            };
            drop(client);
            rt.shutdown_timeout(Duration::from_secs(1));
            s
        }
    };
    let f = failed.load(Ordering::Relaxed);
    if f > 0 {
        return Err(format!("{}: {f} requests failed", which.name()));
    }
    if sample.requests == 0 {
        return Err(format!("{}: no request completed", which.name()));
    }
    Ok(sample)
}

#[derive(Clone)]
struct Load {
    uri: Uri,
    done: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Load {
    fn count(&self, ok: bool) {
        if ok {
            self.done.fetch_add(1, Ordering::Relaxed);
        } else {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Waits out the warm-up, then measures one phase (from a thread that sleeps throughout).
fn observe(load: &Load, phase: Duration) -> Sample {
    thread::sleep(WARMUP);
    let (r0, u0, t0) = (load.done.load(Ordering::Relaxed), usage(), Instant::now());
    thread::sleep(phase);
    let (r1, u1, wall) = (load.done.load(Ordering::Relaxed), usage(), t0.elapsed());
    Sample {
        requests: r1 - r0,
        wall,
        cpu_us: (u1.user + u1.system) - (u0.user + u0.system),
        user_us: u1.user - u0.user,
        switches: u1.switches - u0.switches,
    }
}

struct Usage {
    user: f64,
    system: f64,
    switches: u64,
}

/// User and system CPU time of this whole process (all threads), in µs, and its threads'
/// context switches.
fn usage() -> Usage {
    // SAFETY: rusage is plain data that getrusage fills.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    Usage {
        user: tv(ru.ru_utime),
        system: tv(ru.ru_stime),
        switches: (ru.ru_nvcsw + ru.ru_nivcsw) as u64,
    }
}

/// The server child (`taskset -c CPU bench_server NAME 0`); killed and reaped when dropped.
fn start_server(bin: &Path, name: &str, cpu: usize) -> Result<ServerChild, String> {
    ServerChild::start(
        cpu,
        bin,
        &[name, "0"],
        &[("BENCH_WORKERS", "1")],
        name,
        IO_TIMEOUT,
    )
}

fn which_tool(tool: &str) -> Result<(), String> {
    os_support::which(tool, "taskset is in util-linux")
}
