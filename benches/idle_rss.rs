//! Idle-connection memory: the resident set of the fibr echo server (`examples/echo.rs`)
//! holding N idle TCP connections, per connection above the empty server, next to a plain
//! tokio echo server (`examples/tokio_echo.rs`), in one run.
//!
//! ```sh
//! cargo bench --bench idle_rss              # 10,000 connections, 3 runs per server
//! cargo bench --bench idle_rss -- --quick   # 1,000 connections (CI smoke run)
//! ```
//!
//! The bench builds both servers (`cargo build --release --example echo --example
//! tokio_echo`) unless given `--no-build`, which uses the ones already built.
//!
//! Each run starts a fresh server pinned to one CPU, reads its VmRSS once it listens (the
//! empty server), opens the connections from this process (pinned to another CPU) and does
//! one echo round trip on each, so every connection is fully set up and has been through a
//! round, waits a second and reads VmRSS again. VmRSS counts user-space memory only: the
//! kernel's socket buffers and epoll entries are not in it. The table shows the median of
//! the runs. "marginal" is the slope over the second half of the connections, which leaves
//! out one-time costs (first-use caches, table growth) that the plain per-connection figure
//! spreads over all N. Servers are killed, and connections closed, even on error.

#[path = "support/skip.rs"]
mod common_skip;
#[path = "support/os.rs"]
mod os_support;
use os_support::*;
#[path = "support/server.rs"]
mod server_support;
use server_support::{count_fds, die_with_parent, ProcStatus, ServerChild};

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::thread;
use std::time::{Duration, Instant};

const FULL_CONNS: usize = 10_000;
const QUICK_CONNS: usize = 1_000;
const RUNS: usize = 3;
/// Connections opened before their round trips (stays under the servers' listen backlog).
const BATCH: usize = 500;
/// Wait after the last round trip before reading VmRSS.
const SETTLE: Duration = Duration::from_secs(1);
/// Bound on every client socket operation and on server start-up.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// fibr's goal for an idle connection.
const GOAL_BYTES: f64 = 1024.0;
const MSG_LEN: usize = 16;

struct Server {
    name: &'static str,
    example: &'static str,
    env: &'static [(&'static str, &'static str)],
}

const SERVERS: [Server; 3] = [
    Server {
        name: "fibr (epoll)",
        example: "echo",
        env: &[("FIBR_BACKEND", "epoll")],
    },
    Server {
        name: "fibr (portable)",
        example: "echo",
        env: &[("FIBR_BACKEND", "portable")],
    },
    Server {
        name: "tokio",
        example: "tokio_echo",
        env: &[],
    },
];

fn main() -> ExitCode {
    common_skip::bench_main("idle_rss", bench)
}

fn bench() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let n = if quick { QUICK_CONNS } else { FULL_CONNS };

    let examples = find_examples(!args.iter().any(|a| a == "--no-build"))?;
    let (server_cpu, client_cpu) = pick_cpus()?;
    // The servers inherit this limit; the client side needs as many descriptors again.
    let nofile = raise_nofile(n as u64 + 512)?;
    if let Some(cpu) = client_cpu {
        pin_to(cpu).map_err(|e| format!("pinning the client to CPU {cpu}: {e}"))?;
    }
    println!(
        "idle_rss: {n} idle connections, {RUNS} runs per server, servers on CPU {server_cpu}, \
         client on CPU {}, RLIMIT_NOFILE {nofile}",
        client_cpu.map_or("(unpinned)".to_string(), |c| c.to_string()),
    );

    let mut results = Vec::new();
    for server in SERVERS.iter() {
        let bin = examples.join(server.example);
        let mut samples = Vec::new();
        for run in 1..=RUNS {
            let s = run_once(server, &bin, server_cpu, n)
                .map_err(|e| format!("{} run {run}: {e}", server.name))?;
            eprintln!(
                "  {:<16} run {run}: empty {} KiB, loaded {} KiB, {:.0} B/conn, marginal {:.0} B/conn, \
                 peak {} KiB, after close {} KiB, {} threads",
                server.name,
                s.empty_kib,
                s.loaded_kib,
                s.per_conn(n),
                s.marginal(n),
                s.hwm_kib,
                s.closed_kib,
                s.threads
            );
            samples.push(s);
        }
        results.push((server, samples));
    }

    println!();
    println!(
        "| server | empty RSS (KiB) | loaded RSS (KiB) | peak VmHWM (KiB) | per conn (B) | marginal per conn (B) | RSS after close (KiB) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut per_conn = Vec::new();
    for (server, samples) in &results {
        let med = |f: &dyn Fn(&Sample) -> f64| median(samples.iter().map(f).collect());
        let pc = med(&|s| s.per_conn(n));
        per_conn.push((server.name, pc));
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
            server.name,
            med(&|s| s.empty_kib as f64),
            med(&|s| s.loaded_kib as f64),
            med(&|s| s.hwm_kib as f64),
            pc,
            med(&|s| s.marginal(n)),
            med(&|s| s.closed_kib as f64),
        );
    }
    println!();
    let tokio = per_conn.iter().find(|p| p.0 == "tokio").map(|p| p.1);
    for (name, pc) in per_conn.iter().filter(|p| p.0 != "tokio") {
        if let Some(t) = tokio {
            println!("tokio / {name} per connection: {:.1}x", t / pc.max(1.0));
        }
        println!(
            "{name}: {:.0} B per idle connection, goal <= {GOAL_BYTES:.0} B: {}",
            pc,
            if *pc <= GOAL_BYTES { "met" } else { "NOT met" }
        );
    }
    if quick {
        println!(
            "(--quick: with {n} connections, one-time costs weigh more per connection; \
             see the marginal column)"
        );
    }
    Ok(())
}

/// Builds the two servers in release mode (if `build`); returns the directory holding them.
fn find_examples(build: bool) -> Result<PathBuf, String> {
    if build {
        let args = [
            "build",
            "--release",
            "--example",
            "echo",
            "--example",
            "tokio_echo",
        ];
        cargo_build(&args, "the examples")?;
    }
    examples_dir(&["echo", "tokio_echo"])
}

/// One server run: start it, fill it with `n` connections, read its memory, tear down.
fn run_once(server: &Server, bin: &Path, cpu: usize, n: usize) -> Result<Sample, String> {
    let mut child = RunningServer::start(server, bin, cpu)?;
    let pid = child.pid();
    thread::sleep(Duration::from_millis(300));
    let empty = child.status()?;
    let fds_empty = count_fds(pid)?;

    let mut conns: Vec<TcpStream> = Vec::with_capacity(n);
    let half = n / 2;
    connect_and_echo(child.0.addr, &mut conns, half)?;
    thread::sleep(Duration::from_millis(200));
    let at_half = child.status()?;
    connect_and_echo(child.0.addr, &mut conns, n)?;
    thread::sleep(SETTLE);
    let loaded = child.status()?;
    let fds_loaded = count_fds(pid)?;
    if fds_loaded < fds_empty + n {
        return Err(format!(
            "the server holds {} descriptors more than empty, expected at least {n}",
            fds_loaded.saturating_sub(fds_empty)
        ));
    }

    // Close every connection and give the server a moment to see the EOFs.
    drop(conns);
    let deadline = Instant::now() + Duration::from_secs(5);
    while count_fds(pid)? > fds_empty && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    let fds_closed = count_fds(pid)?;
    if fds_closed > fds_empty {
        eprintln!(
            "  warning: {} still holds {} descriptors more than empty 5 s after the clients closed",
            server.name,
            fds_closed - fds_empty
        );
    }
    let closed = child.status()?;
    for line in child.extra_output() {
        eprintln!("  {} said: {line}", server.name);
    }
    Ok(Sample {
        empty_kib: empty.rss_kib,
        half_kib: at_half.rss_kib,
        loaded_kib: loaded.rss_kib,
        hwm_kib: loaded.hwm_kib,
        closed_kib: closed.rss_kib,
        threads: loaded.threads,
    })
}

struct Sample {
    empty_kib: u64,
    half_kib: u64,
    loaded_kib: u64,
    hwm_kib: u64,
    closed_kib: u64,
    threads: u64,
}

impl Sample {
    fn per_conn(&self, n: usize) -> f64 {
        (self.loaded_kib as f64 - self.empty_kib as f64) * 1024.0 / n as f64
    }

    fn marginal(&self, n: usize) -> f64 {
        (self.loaded_kib as f64 - self.half_kib as f64) * 1024.0 / (n - n / 2) as f64
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        l if l % 2 == 1 => v[l / 2],
        l => (v[l / 2 - 1] + v[l / 2]) / 2.0,
    }
}

/// Opens connections until `conns` holds `upto`, in batches: connect a batch, send one
/// message on each, then read each echo back and check it.
fn connect_and_echo(
    addr: SocketAddr,
    conns: &mut Vec<TcpStream>,
    upto: usize,
) -> Result<(), String> {
    let msg = |i: usize| format!("ping {i:010}\n").into_bytes();
    while conns.len() < upto {
        let start = conns.len();
        let end = (start + BATCH).min(upto);
        for i in start..end {
            let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
                .and_then(|s| {
                    s.set_nodelay(true)?;
                    s.set_read_timeout(Some(IO_TIMEOUT))?;
                    s.set_write_timeout(Some(IO_TIMEOUT))?;
                    Ok(s)
                })
                .map_err(|e| format!("connection {i}: connect: {e}"))?;
            conns.push(s);
        }
        for (i, s) in conns.iter_mut().enumerate().take(end).skip(start) {
            let m = msg(i);
            debug_assert_eq!(m.len(), MSG_LEN);
            s.write_all(&m)
                .map_err(|e| format!("connection {i}: write: {e}"))?;
        }
        for (i, s) in conns.iter_mut().enumerate().take(end).skip(start) {
            let mut got = [0u8; MSG_LEN];
            s.read_exact(&mut got)
                .map_err(|e| format!("connection {i}: reading the echo: {e}"))?;
            if got[..] != msg(i)[..] {
                return Err(format!(
                    "connection {i}: echoed {:?}",
                    String::from_utf8_lossy(&got)
                ));
            }
        }
    }
    Ok(())
}

/// A server child process (pinned to `cpu`); killed and reaped when dropped, whatever happened.
struct RunningServer(ServerChild);

impl RunningServer {
    fn start(server: &Server, bin: &Path, cpu: usize) -> Result<RunningServer, String> {
        let mut cmd = Command::new(bin);
        cmd.arg("0");
        for (k, v) in server.env {
            cmd.env(k, v);
        }
        // SAFETY: the closure runs between fork and exec and makes only two system calls
        // (no allocation, no locks), which is async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                pin_to(cpu)?;
                // Die with this process even if it is killed before it can clean up.
                die_with_parent()
            });
        }
        ServerChild::spawn(cmd, bin, server.name, IO_TIMEOUT).map(RunningServer)
    }

    fn pid(&self) -> u32 {
        self.0.pid()
    }

    fn check_alive(&mut self) -> Result<(), String> {
        match self.0.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(format!("the server exited: {status}")),
            Err(e) => Err(format!("checking the server: {e}")),
        }
    }

    /// The server's memory figures (an error if it has died).
    fn status(&mut self) -> Result<ProcStatus, String> {
        self.check_alive()?;
        ProcStatus::read(self.pid())
    }

    /// What the server printed after its start-up line.
    fn extra_output(&self) -> Vec<String> {
        self.0.new_lines().collect()
    }
}

/// The CPUs this process may use: the servers get the first, the client the second.
fn pick_cpus() -> Result<(usize, Option<usize>), String> {
    let allowed = os_support::allowed_cpus()?;
    match allowed.as_slice() {
        [] => Err("no CPU in this process's affinity mask".into()),
        [only] => Ok((*only, None)),
        [first, second, ..] => Ok((*first, Some(*second))),
    }
}
