//! Static files (issue 30): fibr's `fibr::fs::ServeDir` against nginx and tower-http's
//! `ServeDir`, side by side in one run: `cargo bench --bench files`.
//!
//! ```sh
//! cargo bench --bench files                      # 5 s phases, 3 runs
//! cargo bench --bench files -- --quick           # 1 s phases, 1 run
//! cargo bench --bench files -- --runs 5 --only file-1k   # some scenarios: file-1k file-100m
//! cargo bench --bench files -- --json FILE       # the figures as JSON too (for compare)
//! ```
//!
//! The servers, each pinned to the first CPU this process may use, one worker each:
//!
//! - **fibr**: `examples/bench_server.rs fibr` with `BENCH_STATIC_DIR`: the bench `Router`
//!   with `fibr::fs::ServeDir` nested at `/static` (`nest_service`), on `fibr::serve`;
//! - **nginx**: Debian's nginx, started by this bench from a config it writes: one worker
//!   process, `sendfile on`, `tcp_nopush on`, `open_file_cache`, no access log,
//!   `location /static/ { alias DIR/; }`;
//! - **axum**: `bench_server axum` with `BENCH_STATIC_DIR`: the same `Router` with
//!   tower-http's `ServeDir` on `axum::serve` (a tokio runtime with one worker; tower-http
//!   reads files on tokio's blocking pool, whose threads count too).
//!
//! Scenarios (the load generator, wrk, pinned to the second CPU; a 1 s warm-up first):
//!
//! - **file-1k**: `wrk -t1 -c100` GET `/static/1k.bin` (1 KiB, keep-alive): server CPU µs per
//!   request, and requests/s;
//! - **file-100m**: `wrk -t1 -c1` GET `/static/100m.bin` (100 MiB) one after another on one
//!   connection: server CPU ms per GiB wrk read, and GiB/s.
//!
//! Server CPU is utime + stime from `/proc` (for nginx, its master and worker). Figures are
//! medians over the runs (min–max); the servers are alternated within a run. Ratios are
//! fibr / nginx and fibr / axum. Servers are killed on every path and die with this process.

#[path = "support/nginx.rs"]
mod nginx;
#[path = "support/os.rs"]
mod os_support;
#[path = "support/server.rs"]
mod server_support;
#[path = "support/side.rs"]
mod side;
#[path = "support/skip.rs"]
mod skip;
#[path = "support/wrk.rs"]
mod wrk;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use nginx::Nginx;
use server_support::{process_cpu_us, ServerChild};
use wrk::{median, spread};

const SMALL: usize = 1024;
const LARGE: usize = 100 * 1024 * 1024;
const GIB: f64 = (1u64 << 30) as f64;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Scenario {
    Small,
    Large,
}

impl Scenario {
    const ALL: [Scenario; 2] = [Scenario::Small, Scenario::Large];

    fn key(self) -> &'static str {
        match self {
            Scenario::Small => "file-1k",
            Scenario::Large => "file-100m",
        }
    }

    fn desc(self) -> &'static str {
        match self {
            Scenario::Small => "1 KiB file, wrk -c100 keep-alive",
            Scenario::Large => "100 MiB file, one connection",
        }
    }

    fn units(self) -> (&'static str, &'static str) {
        match self {
            Scenario::Small => ("server CPU µs/request", "requests/s"),
            Scenario::Large => ("server CPU ms/GiB", "GiB/s"),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Server {
    Fibr,
    Nginx,
    Axum,
}

impl Server {
    const ALL: [Server; 3] = [Server::Fibr, Server::Nginx, Server::Axum];

    fn label(self) -> &'static str {
        match self {
            Server::Fibr => "fibr::fs",
            Server::Nginx => "nginx",
            Server::Axum => "tower-http ServeDir",
        }
    }
}

/// The files served: `1k.bin` and `100m.bin` in a directory of their own (readable by
/// nginx's unprivileged worker), removed when dropped.
struct Files(PathBuf);

impl Files {
    fn create() -> Result<Files, String> {
        let dir = std::env::temp_dir().join(format!("fibr-bench-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let pattern = |len: usize| -> Vec<u8> { (0..len).map(|i| (i % 251) as u8).collect() };
        std::fs::write(dir.join("1k.bin"), pattern(SMALL)).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("100m.bin"), pattern(LARGE)).map_err(|e| e.to_string())?;
        Ok(Files(dir))
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running server.
enum Running {
    Child(ServerChild),
    Nginx(Nginx),
}

impl Running {
    fn addr(&self) -> SocketAddr {
        match self {
            Running::Child(c) => c.addr,
            Running::Nginx(n) => n.addr,
        }
    }

    /// CPU µs so far of the server's processes.
    fn cpu_us(&self) -> Result<f64, String> {
        match self {
            Running::Child(c) => process_cpu_us(c.pid()),
            Running::Nginx(n) => n.cpu_us(),
        }
    }
}

fn start(
    server: Server,
    bench_server: &Path,
    files: &Files,
    cpu: usize,
) -> Result<Running, String> {
    let dir = files.0.to_str().ok_or("a non-UTF-8 temp dir")?;
    match server {
        Server::Fibr | Server::Axum => {
            let mode = if server == Server::Fibr {
                "fibr"
            } else {
                "axum"
            };
            let envs = [("BENCH_STATIC_DIR", dir), ("BENCH_WORKERS", "1")];
            ServerChild::start(
                cpu,
                bench_server,
                &[mode, "0"],
                &envs,
                server.label(),
                Duration::from_secs(10),
            )
            .map(Running::Child)
        }
        Server::Nginx => Nginx::start(cpu, &files.0.join("nginx"), |addr| {
            format!(
                "sendfile on; tcp_nopush on;\n\
                 open_file_cache max=1000 inactive=60s; open_file_cache_valid 60s;\n\
                 keepalive_requests 10000000; keepalive_timeout 65;\n\
                 types {{ application/octet-stream bin; }}\n\
                 server {{ listen {addr}; location /static/ {{ alias {dir}/; }} }}"
            )
        })
        .map(Running::Nginx),
    }
}

/// Checks that `path` answers 200 with `len` bytes (the servers serve the same files).
fn check(addr: SocketAddr, path: &str, len: usize) -> Result<(), String> {
    let out = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{size_download}",
        ])
        .arg(format!("http://{addr}{path}"))
        .output()
        .map_err(|e| format!("curl: {e}"))?;
    let got = String::from_utf8_lossy(&out.stdout).to_string();
    if got != format!("200 {len}") {
        return Err(format!("GET {path}: {got:?}, not \"200 {len}\""));
    }
    Ok(())
}

/// One phase: (the figure, the throughput).
fn measure(
    sc: Scenario,
    running: &Running,
    phase: Duration,
    load_cpu: usize,
) -> Result<(f64, f64), String> {
    let (path, conns, size) = match sc {
        Scenario::Small => ("/static/1k.bin", 100, SMALL),
        Scenario::Large => ("/static/100m.bin", 1, LARGE),
    };
    let addr = running.addr();
    check(addr, path, size)?;
    let url = format!("http://{addr}{path}");
    wrk::requests(load_cpu, conns, Duration::from_secs(1), &url)?;
    let cpu0 = running.cpu_us()?;
    let t0 = Instant::now();
    let done = wrk::run(load_cpu, conns, phase, &url)?;
    let secs = t0.elapsed().as_secs_f64();
    let cpu = running.cpu_us()? - cpu0;
    Ok(match sc {
        Scenario::Small if done.requests > 0 => {
            (cpu / done.requests as f64, done.requests as f64 / secs)
        }
        // By the bytes wrk read: a download cut by the phase's end counts for what it sent.
        Scenario::Large if done.bytes > 0.0 => {
            let gib = done.bytes / GIB;
            (cpu / 1000.0 / gib, gib / secs)
        }
        _ => return Err("nothing was served".into()),
    })
}

fn run() -> Result<(), String> {
    let o = side::Options::parse()?;
    let only = o.scenarios(&Scenario::ALL, Scenario::key)?;
    os_support::which("wrk", "apt-get install wrk")?;
    os_support::which("curl", "apt-get install curl")?;
    let (server_cpu, load_cpu) = os_support::pick_cpus()?;
    let bench_server = os_support::find_server(o.build)?;
    os_support::pin_to(load_cpu).map_err(|e| format!("pinning to CPU {load_cpu}: {e}"))?;
    let files = Files::create()?;
    eprintln!(
        "files bench: servers on CPU {server_cpu}, wrk on CPU {load_cpu}; {} run(s) of {} s",
        o.runs,
        o.phase.as_secs()
    );
    // [scenario][server] -> (figures, throughputs)
    let mut figs = vec![vec![(Vec::new(), Vec::new()); Server::ALL.len()]; only.len()];
    for run in 0..o.runs {
        for (i, &sc) in only.iter().enumerate() {
            for k in 0..Server::ALL.len() {
                let s = (k + run) % Server::ALL.len();
                let server = Server::ALL[s];
                let running = start(server, &bench_server, &files, server_cpu)?;
                let (value, rate) = measure(sc, &running, o.phase, load_cpu)
                    .map_err(|e| format!("{} on {}: {e}", sc.key(), server.label()))?;
                drop(running);
                let (unit, rate_unit) = sc.units();
                eprintln!(
                    "  run {} {} {}: {value:.2} {unit} ({rate:.2} {rate_unit})",
                    run + 1,
                    sc.key(),
                    server.label()
                );
                figs[i][s].0.push(value);
                figs[i][s].1.push(rate);
            }
        }
    }
    println!(
        "\n| scenario | figure | {} | fibr / nginx | fibr / ServeDir |",
        Server::ALL.map(Server::label).join(" | ")
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    for (i, &sc) in only.iter().enumerate() {
        let (unit, rate_unit) = sc.units();
        let cells: Vec<String> = figs[i].iter().map(|(v, _)| spread(v)).collect();
        let m: Vec<f64> = figs[i].iter().map(|(v, _)| median(v)).collect();
        println!(
            "| {} | {unit} | {} | {:.2}× | {:.2}× |",
            sc.key(),
            cells.join(" | "),
            m[0] / m[1],
            m[0] / m[2]
        );
        let rates: Vec<String> = figs[i].iter().map(|(_, r)| spread(r)).collect();
        println!("| {} | {rate_unit} | {} | | |", sc.key(), rates.join(" | "));
    }
    if let Some(path) = &o.json {
        let rows = only
            .iter()
            .zip(&figs)
            .map(|(sc, f)| {
                let values: Vec<Vec<f64>> = f.iter().map(|(v, _)| v.clone()).collect();
                side::scenario(sc.key(), sc.desc(), sc.units().0, &values)
            })
            .collect();
        let command = format!("cargo bench --bench files{}", o.quick_suffix());
        let servers = Server::ALL.map(Server::label);
        side::write_json(
            path,
            "files",
            &command,
            "static files",
            &servers,
            o.runs,
            rows,
        )?;
    }
    Ok(())
}

fn main() -> ExitCode {
    skip::bench_main("files bench", run)
}
