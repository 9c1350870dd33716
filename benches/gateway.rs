//! The reverse proxy (issue 30): `fibr::gateway` against nginx and axum's reverse proxy on
//! hyper-util's client, side by side in one run: `cargo bench --bench gateway --features
//! client`.
//!
//! ```sh
//! cargo bench --bench gateway --features client                 # 5 s phases, 3 runs, 10,000 idle
//! cargo bench --bench gateway --features client -- --quick      # 1 s, 1 run, 1,000 idle
//! cargo bench --bench gateway --features client -- --only gateway-get --runs 5
//! cargo bench --bench gateway --features client -- --json FILE   # JSON too (for compare)
//! ```
//!
//! The gateways, each pinned to the first CPU this process may use, one worker each (fibr
//! and tokio size their pools by the CPUs a process may use: one):
//!
//! - **fibr**: `examples/gateway.rs` as users run it (`UPSTREAM=http://…`): an axum
//!   `Router` whose fallback is `fibr::gateway::Gateway`, on `fibr::serve`, with its
//!   default forwarding fields (`Forwarded`, `X-Forwarded-For`, `X-Forwarded-Proto`, `Via`);
//! - **nginx**: Debian's nginx from a config this bench writes: one worker process,
//!   `proxy_pass` to an `upstream` block with `keepalive 1024` (as many idle upstream
//!   connections as fibr's gateway keeps by default), `proxy_http_version 1.1`;
//! - **axum proxy**: `benches/peers` `axum_gateway`, axum's reverse-proxy example (a
//!   fallback handler sending each request through hyper-util's pooled legacy client) on
//!   `axum::serve`, a tokio runtime with one worker.
//!
//! The upstream, the same for all, is `bench_server fibr` (GET / → `hello`), pinned with
//! the load generator to the second CPU.
//!
//! Scenarios:
//!
//! - **gateway-get**: `wrk -t1 -c100` GET / through the gateway (keep-alive on both sides):
//!   the gateway's CPU µs per proxied request, and requests/s;
//! - **gateway-idle**: N keep-alive client connections (10,000; `--quick`: 1,000) opened by
//!   this process, each with one GET / proxied and answered, then held: the gateway's RSS
//!   per connection above the gateway that has proxied one request (no load before: memory
//!   a load left in the allocator would hide what the connections take).
//!
//! Medians over the runs (min–max), the gateways alternated within a run; ratios are
//! fibr / nginx and fibr / axum proxy. Processes are killed on every path and die with
//! this process.

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

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use nginx::Nginx;
use server_support::{pinned_command, process_cpu_us, ProcStatus, ServerChild};
use wrk::{median, spread};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Scenario {
    Get,
    Idle,
}

impl Scenario {
    const ALL: [Scenario; 2] = [Scenario::Get, Scenario::Idle];

    fn key(self) -> &'static str {
        match self {
            Scenario::Get => "gateway-get",
            Scenario::Idle => "gateway-idle",
        }
    }

    fn desc(self, idle: usize) -> String {
        match self {
            Scenario::Get => "GET / through the gateway, wrk -c100".into(),
            Scenario::Idle => format!("{idle} idle client connections"),
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Scenario::Get => "gateway CPU µs/request",
            Scenario::Idle => "gateway RSS B/connection",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Gateway {
    Fibr,
    Nginx,
    Axum,
}

impl Gateway {
    const ALL: [Gateway; 3] = [Gateway::Fibr, Gateway::Nginx, Gateway::Axum];

    fn label(self) -> &'static str {
        match self {
            Gateway::Fibr => "fibr::gateway",
            Gateway::Nginx => "nginx",
            Gateway::Axum => "axum proxy",
        }
    }
}

/// The programs: the bench server (the upstream), the gateway example, the axum peer.
struct Programs {
    bench_server: PathBuf,
    gateway: PathBuf,
    axum_gateway: PathBuf,
}

impl Programs {
    fn find(build: bool) -> Result<Programs, String> {
        let bench_server = os_support::find_server(build)?;
        if build {
            let args = [
                "build",
                "--release",
                "--example",
                "gateway",
                "--features",
                "client",
            ];
            os_support::cargo_build(&args, "the gateway example")?;
            let args = [
                "build",
                "--release",
                "-p",
                "fibr-bench-peers",
                "--bin",
                "axum_gateway",
            ];
            os_support::cargo_build(&args, "the axum gateway peer")?;
        }
        let examples = os_support::examples_dir(&["gateway"])?;
        let release = examples.parent().ok_or("no release dir")?.to_path_buf();
        Ok(Programs {
            bench_server,
            gateway: examples.join("gateway"),
            axum_gateway: release.join("axum_gateway"),
        })
    }
}

/// A gateway being measured.
enum Running {
    Child(ServerChild),
    /// A program that says where it listens in its own words: its address is the one
    /// given, waited for by connecting.
    Port(std::process::Child, SocketAddr),
    Nginx(Nginx),
}

impl Running {
    fn addr(&self) -> SocketAddr {
        match self {
            Running::Child(c) => c.addr,
            Running::Port(_, a) => *a,
            Running::Nginx(n) => n.addr,
        }
    }

    fn cpu_us(&self) -> Result<f64, String> {
        match self {
            Running::Child(c) => process_cpu_us(c.pid()),
            Running::Port(c, _) => process_cpu_us(c.id()),
            Running::Nginx(n) => n.cpu_us(),
        }
    }

    fn rss_kib(&self) -> Result<u64, String> {
        match self {
            Running::Child(c) => ProcStatus::read(c.pid()).map(|s| s.rss_kib),
            Running::Port(c, _) => ProcStatus::read(c.id()).map(|s| s.rss_kib),
            Running::Nginx(n) => n.rss_kib(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Running::Port(c, _) = self {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}

fn start(
    g: Gateway,
    programs: &Programs,
    upstream: SocketAddr,
    prefix: &Path,
    cpu: usize,
) -> Result<Running, String> {
    match g {
        Gateway::Fibr => {
            let port = free_port()?;
            let child = pinned_command(cpu, &programs.gateway)
                .env("PORT", port.to_string())
                .env("UPSTREAM", format!("http://{upstream}"))
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .map_err(|e| format!("starting the gateway example: {e}"))?;
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let running = Running::Port(child, addr);
            let deadline = Instant::now() + Duration::from_secs(10);
            while TcpStream::connect(addr).is_err() {
                if Instant::now() > deadline {
                    return Err("the gateway example did not listen in time".into());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(running)
        }
        Gateway::Axum => ServerChild::start(
            cpu,
            &programs.axum_gateway,
            &["0"],
            &[
                ("BENCH_UPSTREAM", &upstream.to_string()),
                ("BENCH_WORKERS", "1"),
            ],
            g.label(),
            Duration::from_secs(10),
        )
        .map(Running::Child),
        Gateway::Nginx => Nginx::start(cpu, prefix, |addr| {
            format!(
                "upstream up {{ server {upstream}; keepalive 1024; }}\n\
                 keepalive_requests 10000000; keepalive_timeout 300;\n\
                 server {{ listen {addr}; location / {{ proxy_pass http://up; \
                 proxy_http_version 1.1; proxy_set_header Connection \"\"; }} }}"
            )
        })
        .map(Running::Nginx),
    }
}

/// GET / on a fresh connection, answered `hello`; the connection, kept alive.
fn get(addr: SocketAddr) -> Result<TcpStream, String> {
    let mut s = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    s.write_all(b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n")
        .map_err(|e| format!("write: {e}"))?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b"hello") {
        let n = s.read(&mut buf).map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err(format!("closed after {:?}", String::from_utf8_lossy(&got)));
        }
        got.extend_from_slice(&buf[..n]);
    }
    if !got.starts_with(b"HTTP/1.1 200") {
        return Err(format!("answered {:?}", String::from_utf8_lossy(&got)));
    }
    Ok(s)
}

fn measure(
    sc: Scenario,
    g: &Running,
    o: &side::Options,
    idle: usize,
    load_cpu: usize,
) -> Result<f64, String> {
    let url = format!("http://{}/", g.addr());
    // One request first: the gateway's upstream connection is open before anything counts.
    drop(get(g.addr())?);
    match sc {
        Scenario::Get => {
            wrk::requests(load_cpu, 100, Duration::from_secs(1), &url)?;
            let cpu0 = g.cpu_us()?;
            let requests = wrk::requests(load_cpu, 100, o.phase, &url)?;
            let cpu = g.cpu_us()? - cpu0;
            Ok(cpu / requests.max(1) as f64)
        }
        Scenario::Idle => {
            std::thread::sleep(Duration::from_millis(300));
            let before = g.rss_kib()?;
            let held: Vec<TcpStream> =
                (0..idle).map(|_| get(g.addr())).collect::<Result<_, _>>()?;
            std::thread::sleep(Duration::from_millis(500));
            let after = g.rss_kib()?;
            drop(held);
            Ok((after.saturating_sub(before) * 1024) as f64 / idle as f64)
        }
    }
}

/// Idle client connections: 10,000, or 1,000 with `--quick`.
fn idle_conns(o: &side::Options) -> usize {
    if o.quick {
        1_000
    } else {
        10_000
    }
}

fn run() -> Result<(), String> {
    let o = side::Options::parse()?;
    let only = o.scenarios(&Scenario::ALL, Scenario::key)?;
    let idle = idle_conns(&o);
    os_support::which("wrk", "apt-get install wrk")?;
    let (gateway_cpu, load_cpu) = os_support::pick_cpus()?;
    let nofile = os_support::raise_nofile(idle as u64 + 1000)?;
    let programs = Programs::find(o.build)?;
    os_support::pin_to(load_cpu).map_err(|e| format!("pinning to CPU {load_cpu}: {e}"))?;
    let upstream = ServerChild::start(
        load_cpu,
        &programs.bench_server,
        &["fibr", "0"],
        &[("BENCH_WORKERS", "1")],
        "upstream",
        Duration::from_secs(10),
    )?;
    let prefix = std::env::temp_dir().join(format!("fibr-bench-gateway-{}", std::process::id()));
    eprintln!(
        "gateway bench: gateways on CPU {gateway_cpu}, wrk and the upstream on CPU {load_cpu}; \
         {} run(s); RLIMIT_NOFILE {nofile}",
        o.runs
    );
    let mut figs = vec![vec![Vec::new(); Gateway::ALL.len()]; only.len()];
    let result = (|| {
        for run in 0..o.runs {
            for (i, &sc) in only.iter().enumerate() {
                for k in 0..Gateway::ALL.len() {
                    let gi = (k + run) % Gateway::ALL.len();
                    let g = Gateway::ALL[gi];
                    let running = start(g, &programs, upstream.addr, &prefix, gateway_cpu)?;
                    let value = measure(sc, &running, &o, idle, load_cpu)
                        .map_err(|e| format!("{} on {}: {e}", sc.key(), g.label()))?;
                    drop(running);
                    eprintln!(
                        "  run {} {} {}: {value:.2} {}",
                        run + 1,
                        sc.key(),
                        g.label(),
                        sc.unit()
                    );
                    figs[i][gi].push(value);
                }
            }
        }
        Ok::<_, String>(())
    })();
    let _ = std::fs::remove_dir_all(&prefix);
    result?;
    println!(
        "\n| scenario | figure | {} | fibr / nginx | fibr / axum proxy |",
        Gateway::ALL.map(Gateway::label).join(" | ")
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    for (i, &sc) in only.iter().enumerate() {
        let cells: Vec<String> = figs[i].iter().map(|v| spread(v)).collect();
        let m: Vec<f64> = figs[i].iter().map(|v| median(v)).collect();
        println!(
            "| {} | {} | {} | {:.2}× | {:.2}× |",
            sc.key(),
            sc.unit(),
            cells.join(" | "),
            m[0] / m[1],
            m[0] / m[2]
        );
    }
    if let Some(path) = &o.json {
        let rows = only
            .iter()
            .zip(&figs)
            .map(|(sc, f)| side::scenario(sc.key(), &sc.desc(idle), sc.unit(), f))
            .collect();
        let quick = o.quick_suffix();
        let command = format!("cargo bench --bench gateway --features client{quick}");
        let servers = Gateway::ALL.map(Gateway::label);
        side::write_json(
            path,
            "gateway",
            &command,
            "reverse proxy",
            &servers,
            o.runs,
            rows,
        )?;
    }
    Ok(())
}

fn main() -> ExitCode {
    skip::bench_main("gateway bench", run)
}
