//! fibr::arpc's server against Go's arpc (`arpc-peer server`, the real library), under the
//! same load from fibr's client: `cargo bench --bench arpc --features arpc`.
//!
//! ```sh
//! cargo bench --bench arpc --features arpc                   # 5 s phases, 10,000 idle connections
//! cargo bench --bench arpc --features arpc -- --quick        # 1 s phases, 1,000 idle connections
//! cargo bench --bench arpc --features arpc -- --json FILE    # the figures as JSON too
//! ```
//!
//! Each server runs pinned to one CPU (`examples/arpc.rs` built in release; the Go peer
//! from `../shared/conformance/arpc/`), this process (the load) to another. 100
//! connections each keep 16 async `/echo` calls in flight, with 64-byte and with 1 KiB
//! bodies: calls per second, and the server's CPU (utime + stime from `/proc`) per call.
//! Then idle connections are opened and the server's RSS per connection is read. Issue
//! 32's goals: server CPU per call at most 0.5× Go arpc's; at most 1 KB per idle
//! connection.

#[path = "support/os.rs"]
mod os_support;
#[path = "support/server.rs"]
mod server_support;
#[path = "support/side.rs"]
mod side;
#[path = "support/skip.rs"]
mod skip;

use bytes::Bytes;
use fibr::arpc::{Client, Router};
use server_support::{pinned_command, process_cpu_us, ProcStatus};
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CONNS: usize = 100;
const IN_FLIGHT: usize = 16;
const BODIES: [usize; 2] = [64, 1024];

fn main() -> ExitCode {
    skip::bench_main("arpc bench", run)
}

struct Opts {
    phase: Duration,
    idle: usize,
    json: Option<PathBuf>,
    build: bool,
    quick: bool,
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        phase: Duration::from_secs(5),
        idle: 10_000,
        json: None,
        build: true,
        quick: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bench" => {}
            "--quick" => {
                o.phase = Duration::from_secs(1);
                o.idle = 1_000;
                o.quick = true;
            }
            "--no-build" => o.build = false,
            "--json" => o.json = Some(args.next().ok_or("--json takes a file")?.into()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(o)
}

/// A server process, pinned, that printed `READY ADDR`; killed when dropped.
struct Running {
    child: Child,
    addr: SocketAddr,
}

impl Running {
    fn start(cpu: usize, program: &PathBuf, args: &[&str]) -> Result<Running, String> {
        let mut cmd = pinned_command(cpu, program);
        cmd.args(args)
            .env("PORT", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("starting {}: {e}", program.display()))?;
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped");
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        let mut running = Running {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        running.addr = line
            .trim()
            .strip_prefix("READY ")
            .ok_or_else(|| format!("{} said {line:?}", program.display()))?
            .parse()
            .map_err(|e| format!("{line:?}: {e}"))?;
        Ok(running)
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Keeps one async call in flight on `client` until `stop`: each answer starts the next.
fn pump(client: Client, body: Bytes, done: Arc<AtomicU64>, stop: Arc<AtomicBool>) {
    let again = client.clone();
    let _ = client.call_async("/echo", body.clone(), Duration::from_secs(10), move |r| {
        if r.is_ok() {
            done.fetch_add(1, Ordering::Relaxed);
        }
        if !stop.load(Ordering::Relaxed) {
            pump(again, body, done, stop);
        }
    });
}

/// Calls per second and server CPU µs per call, `body`-byte echoes for `phase`.
fn load(server: &Running, body: usize, phase: Duration) -> Result<(f64, f64), String> {
    let addr = server.addr;
    fibr::run(async move {
        let mut clients = Vec::new();
        for _ in 0..CONNS {
            clients.push(
                Client::connect(addr, Router::new())
                    .await
                    .map_err(|e| e.to_string())?,
            );
        }
        let (done, stop) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let body = Bytes::from(vec![b'x'; body]);
        for c in &clients {
            for _ in 0..IN_FLIGHT {
                pump(c.clone(), body.clone(), done.clone(), stop.clone());
            }
        }
        fibr::time::sleep(Duration::from_millis(500)).await;
        let (n0, cpu0, t0) = (
            done.load(Ordering::Relaxed),
            process_cpu_us(server.pid())?,
            Instant::now(),
        );
        fibr::time::sleep(phase).await;
        let (n1, cpu1, took) = (
            done.load(Ordering::Relaxed),
            process_cpu_us(server.pid())?,
            t0.elapsed(),
        );
        stop.store(true, Ordering::Relaxed);
        fibr::time::sleep(Duration::from_millis(200)).await;
        for c in &clients {
            c.stop();
        }
        let calls = (n1 - n0) as f64;
        if calls == 0.0 {
            return Err("no calls answered".into());
        }
        Ok((calls / took.as_secs_f64(), (cpu1 - cpu0) / calls))
    })
}

/// The server's RSS per idle connection, `n` of them.
fn idle(server: &Running, n: usize) -> Result<f64, String> {
    let rss = || ProcStatus::read(server.pid()).map(|s| s.rss_kib as f64 * 1024.0);
    let mut conns = vec![TcpStream::connect(server.addr).map_err(|e| e.to_string())?];
    std::thread::sleep(Duration::from_millis(300));
    let before = rss()?;
    for _ in 0..n {
        conns.push(TcpStream::connect(server.addr).map_err(|e| e.to_string())?);
    }
    std::thread::sleep(Duration::from_secs(1));
    Ok((rss()? - before) / n as f64)
}

fn run() -> Result<(), String> {
    let opts = parse_args()?;
    let (server_cpu, load_cpu) = os_support::pick_cpus()?;
    if opts.build {
        os_support::cargo_build(
            &[
                "build",
                "--release",
                "--example",
                "arpc",
                "--features",
                "arpc",
            ],
            "examples/arpc",
        )?;
    }
    let fibr_bin = os_support::examples_dir(&["arpc"])?.join("arpc");
    let go_bin =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance/arpc/arpc-peer");
    if !go_bin.exists() {
        return Err(format!(
            "the Go arpc peer is missing at {}",
            go_bin.display()
        ));
    }
    os_support::raise_nofile(opts.idle as u64 + 1000)?;
    os_support::pin_to(load_cpu).map_err(|e| format!("pinning to CPU {load_cpu}: {e}"))?;
    eprintln!("arpc bench: servers on CPU {server_cpu}, load on CPU {load_cpu}");
    let servers: [(&str, &PathBuf, &[&str]); 2] = [
        ("fibr::arpc", &fibr_bin, &[]),
        ("Go arpc", &go_bin, &["server", "127.0.0.1:0"]),
    ];
    let mut rows = Vec::new();
    for (label, bin, args) in servers {
        let mut figs = Vec::new();
        for body in BODIES {
            let server = Running::start(server_cpu, bin, args)?;
            let (rate, cpu) =
                load(&server, body, opts.phase).map_err(|e| format!("{label}: {e}"))?;
            eprintln!("  {label}, {body} B: {rate:.0} calls/s, {cpu:.2} µs server CPU per call");
            figs.push((rate, cpu));
        }
        let server = Running::start(server_cpu, bin, args)?;
        let per_conn = idle(&server, opts.idle)?;
        eprintln!("  {label}, idle: {per_conn:.0} B per connection");
        rows.push((label, figs, per_conn));
    }
    println!(
        "| server | 64 B calls/s | µs CPU/call | 1 KiB calls/s | µs CPU/call | B per idle conn |"
    );
    println!("|---|---|---|---|---|---|");
    for (label, f, idle) in &rows {
        println!(
            "| {label} | {:.0} | {:.2} | {:.0} | {:.2} | {idle:.0} |",
            f[0].0, f[0].1, f[1].0, f[1].1
        );
    }
    let (fibr, go) = (&rows[0], &rows[1]);
    println!(
        "\nserver CPU per call, fibr / Go: {:.2}× (64 B), {:.2}× (1 KiB); goal ≤ 0.5×. Idle: {:.0} B per connection; goal ≤ 1 KB.",
        fibr.1[0].1 / go.1[0].1,
        fibr.1[1].1 / go.1[1].1,
        fibr.2
    );
    if let Some(path) = &opts.json {
        let per_body =
            |k: usize| -> Vec<Vec<f64>> { rows.iter().map(|r| vec![r.1[k].1]).collect() };
        let unit = "server CPU µs/call";
        let load = |body: usize| {
            format!("{body}-byte async /echo, {CONNS} connections x {IN_FLIGHT} in flight")
        };
        let scenarios = vec![
            side::scenario("arpc-64b", &load(BODIES[0]), unit, &per_body(0)),
            side::scenario("arpc-1k", &load(BODIES[1]), unit, &per_body(1)),
            side::scenario(
                "arpc-idle",
                &format!("{} idle connections", opts.idle),
                "server RSS B/connection",
                &rows.iter().map(|r| vec![r.2]).collect::<Vec<_>>(),
            ),
        ];
        let quick = if opts.quick { " -- --quick" } else { "" };
        let command = format!("cargo bench --bench arpc --features arpc{quick}");
        let servers: Vec<&str> = rows.iter().map(|r| r.0).collect();
        side::write_json(path, "arpc", &command, "arpc", &servers, 1, scenarios)?;
    }
    Ok(())
}
