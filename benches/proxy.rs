//! fibr's proxy against a tokio proxy written the usual way (issue 16):
//! `cargo bench --bench proxy --features proxy`.
//!
//! ```sh
//! cargo bench --bench proxy --features proxy                # 1 GiB, 5 s, 3 runs, ~10,000 idle
//! cargo bench --bench proxy --features proxy -- --quick     # 256 MiB, 1 s, 1 run, 1,000 idle
//! cargo bench --bench proxy --features proxy -- --only pingpong,idle   # some scenarios:
//!                                                # connect-1gib socks5-1gib pingpong idle
//! cargo bench --bench proxy --features proxy -- --json FILE # the figures as JSON too
//! ```
//!
//! The proxies, each pinned to the first CPU this process may use, with one worker:
//!
//! - **fibr**: `examples/proxy.rs` as users run it, with `PROXY_ALLOW_ALL=1` (no rules to
//!   check) and `WORKERS=1`: SOCKS5/4/4a and HTTP CONNECT on one port, tunnels joined by
//!   `fibr::proxy::relay`;
//! - **tokio**: `benches/peers` `tokio_proxy`: SOCKS5 and HTTP CONNECT, a task per client,
//!   then `tokio::io::copy_bidirectional` (a multi-thread runtime with one worker).
//!
//! The targets and the clients run in this process, pinned to the second CPU: a source
//! that sends as many bytes as asked (a thread per connection, blocking writes) and an
//! echo server (a `fibr::Engine` echo handler, one loop and one worker).
//!
//! Scenarios, each on a freshly started proxy, the proxies alternated within a run:
//!
//! - **connect-1gib**, **socks5-1gib**: one tunnel (HTTP CONNECT, SOCKS5) to the source,
//!   which sends 1 GiB the client reads and checks (its position pattern at both ends of
//!   every read); proxy CPU ms per GiB, and GiB/s;
//! - **pingpong**: 100 SOCKS5 tunnels to the echo server, each sending 64 bytes and waiting
//!   for them back before the next (one epoll thread, every echo checked); proxy CPU µs per
//!   exchange, and exchanges/s;
//! - **idle**: N SOCKS5 tunnels to the echo server (N = 10,000, or fewer when the
//!   descriptor limit would not hold the proxy's two sockets per tunnel), each with one
//!   64-byte echo done, then held; the proxy's RSS per tunnel above the proxy that has
//!   served one tunnel already, and its descriptors per tunnel.
//!
//! Figures are medians over the runs (min–max); ratios are fibr / tokio. Servers are killed
//! on every path and die with this process.

#[path = "support/epoll.rs"]
mod epoll;
#[path = "support/os.rs"]
mod os_support;
#[path = "support/server.rs"]
mod server_support;
#[path = "support/skip.rs"]
mod skip;

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::thread;
use std::time::{Duration, Instant};

use epoll::{Epoll, EMPTY_EVENT};
use fibr::{Binding, Config, Conn, Engine, Handler};
use server_support::{count_fds, process_cpu_split_us, ProcStatus, ServerChild};

/// Bound on every client socket operation and on a proxy's start-up.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
const PINGPONG_TUNNELS: usize = 100;
const PING: usize = 64;
/// The source's byte at stream position `i` is `i % PATTERN` (a prime: misordered or lost
/// chunks show).
const PATTERN: usize = 251;
const GIB: u64 = 1 << 30;

#[derive(Clone, Copy, Debug)]
struct Settings {
    transfer: u64,
    phase: Duration,
    runs: usize,
    idle: usize,
}

const FULL: Settings = Settings {
    transfer: GIB,
    phase: Duration::from_secs(5),
    runs: 3,
    idle: 10_000,
};

const QUICK: Settings = Settings {
    transfer: 256 << 20,
    phase: Duration::from_secs(1),
    runs: 1,
    idle: 1_000,
};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Scenario {
    ConnectTransfer,
    Socks5Transfer,
    PingPong,
    Idle,
}

impl Scenario {
    const ALL: [Scenario; 4] = [
        Scenario::ConnectTransfer,
        Scenario::Socks5Transfer,
        Scenario::PingPong,
        Scenario::Idle,
    ];

    fn key(self) -> &'static str {
        match self {
            Scenario::ConnectTransfer => "connect-1gib",
            Scenario::Socks5Transfer => "socks5-1gib",
            Scenario::PingPong => "pingpong",
            Scenario::Idle => "idle",
        }
    }

    fn desc(self, set: &Settings, idle: usize) -> String {
        let mib = set.transfer >> 20;
        match self {
            Scenario::ConnectTransfer => format!("{mib} MiB down one HTTP CONNECT tunnel"),
            Scenario::Socks5Transfer => format!("{mib} MiB down one SOCKS5 tunnel"),
            Scenario::PingPong => {
                format!("{PING}-byte ping-pong over {PINGPONG_TUNNELS} SOCKS5 tunnels")
            }
            Scenario::Idle => format!("{idle} idle SOCKS5 tunnels, one echo each"),
        }
    }
}

/// The two proxies.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Proxy {
    Fibr,
    Tokio,
}

impl Proxy {
    const ALL: [Proxy; 2] = [Proxy::Fibr, Proxy::Tokio];

    fn label(self) -> &'static str {
        match self {
            Proxy::Fibr => "fibr",
            Proxy::Tokio => "tokio",
        }
    }
}

/// Where the built proxies are.
struct Programs {
    fibr: PathBuf,
    tokio: PathBuf,
}

impl Programs {
    fn find(build: bool) -> Result<Programs, String> {
        if build {
            os_support::cargo_build(
                &[
                    "build",
                    "--release",
                    "--example",
                    "proxy",
                    "--features",
                    "proxy",
                ],
                "examples/proxy",
            )?;
            os_support::cargo_build(
                &[
                    "build",
                    "--release",
                    "-p",
                    "fibr-bench-peers",
                    "--bin",
                    "tokio_proxy",
                ],
                "the tokio proxy",
            )?;
        }
        let examples = os_support::examples_dir(&["proxy"])?;
        let release = examples
            .parent()
            .ok_or("the examples directory has no parent")?
            .to_path_buf();
        let tokio = release.join("tokio_proxy");
        if !tokio.is_file() {
            return Err(format!("{} is not built", tokio.display()));
        }
        Ok(Programs {
            fibr: examples.join("proxy"),
            tokio,
        })
    }

    fn start(&self, proxy: Proxy, cpu: usize) -> Result<ServerChild, String> {
        match proxy {
            Proxy::Fibr => ServerChild::start(
                cpu,
                &self.fibr,
                &[],
                &[("PORT", "0"), ("PROXY_ALLOW_ALL", "1"), ("WORKERS", "1")],
                "fibr",
                IO_TIMEOUT,
            ),
            Proxy::Tokio => ServerChild::start(
                cpu,
                &self.tokio,
                &["0"],
                &[("BENCH_WORKERS", "1")],
                "tokio",
                IO_TIMEOUT,
            ),
        }
    }
}

/// How a tunnel is asked for.
#[derive(Clone, Copy, Debug)]
enum Via {
    Connect,
    Socks5,
}

/// A tunnel through `proxy` to `target`, handshake done (blocking, with timeouts).
fn tunnel(proxy: SocketAddr, target: SocketAddr, via: Via) -> io::Result<TcpStream> {
    let mut s = TcpStream::connect_timeout(&proxy, IO_TIMEOUT)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    s.set_nodelay(true)?;
    let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
    let SocketAddr::V4(v4) = target else {
        return Err(bad("an IPv4 target".into()));
    };
    match via {
        Via::Socks5 => {
            s.write_all(&[5, 1, 0])?;
            let mut reply = [0; 2];
            s.read_exact(&mut reply)?;
            if reply != [5, 0] {
                return Err(bad(format!("SOCKS5 method reply {reply:?}")));
            }
            let mut req = vec![5, 1, 0, 1];
            req.extend_from_slice(&v4.ip().octets());
            req.extend_from_slice(&v4.port().to_be_bytes());
            s.write_all(&req)?;
            // An IPv4 bound address: ten bytes in all.
            let mut reply = [0; 10];
            s.read_exact(&mut reply)?;
            if reply[..2] != [5, 0] || reply[3] != 1 {
                return Err(bad(format!("SOCKS5 reply {reply:?}")));
            }
        }
        Via::Connect => {
            write!(s, "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n")?;
            let mut head = Vec::new();
            let mut byte = [0; 1];
            // Byte by byte: nothing past the head may be taken from the tunnel.
            while !head.ends_with(b"\r\n\r\n") {
                if s.read(&mut byte)? == 0 || head.len() > 4096 {
                    return Err(bad(format!("CONNECT answer {head:?}")));
                }
                head.push(byte[0]);
            }
            if !head.starts_with(b"HTTP/1.1 200") {
                return Err(bad(format!(
                    "CONNECT answer {:?}",
                    String::from_utf8_lossy(&head)
                )));
            }
        }
    }
    Ok(s)
}

/// Sends each client the number of bytes it asks for (a big-endian u64), then closes.
struct Source {
    addr: SocketAddr,
}

impl Source {
    fn start() -> Result<Source, String> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                thread::spawn(move || {
                    let _ = Source::serve(stream);
                });
            }
        });
        Ok(Source { addr })
    }

    fn serve(mut s: TcpStream) -> io::Result<()> {
        let mut len = [0; 8];
        s.read_exact(&mut len)?;
        let mut left = u64::from_be_bytes(len);
        const CHUNK: usize = 256 * 1024;
        let pattern: Vec<u8> = (0..CHUNK + PATTERN).map(|i| (i % PATTERN) as u8).collect();
        let mut pos = 0u64;
        while left > 0 {
            let n = (left as usize).min(CHUNK);
            let at = (pos % PATTERN as u64) as usize;
            let k = s.write(&pattern[at..at + n])?;
            pos += k as u64;
            left -= k as u64;
        }
        s.shutdown(Shutdown::Write)
    }
}

/// Echoes every byte back.
struct Echo;

impl Handler for Echo {
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        let _ = conn.send(data);
    }
}

fn echo_server() -> Result<(Engine, SocketAddr), String> {
    let config = Config::default().with_workers(1).with_event_loops(1);
    let engine = Engine::new(config, [Binding::tcp("127.0.0.1:0", Echo)])
        .map_err(|e| format!("the echo server: {e}"))?;
    let addr = engine.binding_addrs(0)[0];
    Ok((engine, addr))
}

/// Proxy CPU and wall time of a run.
struct Cost {
    cpu_us: f64,
    /// Of `cpu_us`, the part in user space (the rest is the kernel's: the sockets'
    /// TCP work, which on loopback includes the receiving side's).
    user_us: f64,
    wall: Duration,
    count: u64,
}

impl Cost {
    /// The user-space share of the CPU, in %.
    fn user_pct(&self) -> f64 {
        100.0 * self.user_us / self.cpu_us.max(1.0)
    }
}

/// A run's figure, the figure shown beside it, and the proxy's user-space share of its
/// CPU (%, where CPU is measured).
type Outcome = (f64, f64, Option<f64>);

fn measured(
    proxy: &ServerChild,
    run: impl FnOnce() -> Result<u64, String>,
) -> Result<Cost, String> {
    let (user0, sys0) = process_cpu_split_us(proxy.pid())?;
    let start = Instant::now();
    let count = run()?;
    let wall = start.elapsed();
    proxy.check_alive()?;
    let (user1, sys1) = process_cpu_split_us(proxy.pid())?;
    Ok(Cost {
        cpu_us: user1 - user0 + sys1 - sys0,
        user_us: user1 - user0,
        wall,
        count,
    })
}

/// One tunnel reading `bytes` from the source; the bytes read, checked.
fn transfer(proxy: SocketAddr, source: SocketAddr, via: Via, bytes: u64) -> Result<u64, String> {
    let mut s = tunnel(proxy, source, via).map_err(|e| format!("tunnel: {e}"))?;
    s.write_all(&bytes.to_be_bytes())
        .map_err(|e| format!("write: {e}"))?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut pos = 0u64;
    loop {
        let k = match s.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("read at byte {pos}: {e}")),
        };
        let want = |p: u64| (p % PATTERN as u64) as u8;
        if buf[0] != want(pos) || buf[k - 1] != want(pos + k as u64 - 1) {
            return Err(format!("wrong bytes at {pos}..{}", pos + k as u64));
        }
        pos += k as u64;
    }
    if pos != bytes {
        return Err(format!("{pos} bytes arrived of {bytes}"));
    }
    Ok(pos)
}

/// One ping-pong tunnel's state.
struct Pinger {
    stream: TcpStream,
    ping: [u8; PING],
    got: usize,
    wrote: usize,
}

/// `n` tunnels ping-ponging for `d`; the exchanges completed.
fn pingpong(proxy: SocketAddr, echo: SocketAddr, n: usize, d: Duration) -> Result<u64, String> {
    let ep = Epoll::new().map_err(|e| format!("epoll_create1: {e}"))?;
    let mut tunnels = Vec::with_capacity(n);
    for i in 0..n {
        let stream = tunnel(proxy, echo, Via::Socks5).map_err(|e| format!("tunnel {i}: {e}"))?;
        stream.set_nonblocking(true).map_err(|e| e.to_string())?;
        ep.add(stream.as_raw_fd(), i as u64)
            .map_err(|e| format!("epoll_ctl: {e}"))?;
        let mut ping = [0u8; PING];
        for (j, b) in ping.iter_mut().enumerate() {
            *b = (i * 31 + j) as u8;
        }
        tunnels.push(Pinger {
            stream,
            ping,
            got: 0,
            wrote: 0,
        });
    }
    let deadline = Instant::now() + d;
    let mut exchanges = 0u64;
    let mut in_flight = n;
    for (i, t) in tunnels.iter_mut().enumerate() {
        flush(t).map_err(|e| format!("tunnel {i}: write: {e}"))?;
    }
    let mut events = vec![EMPTY_EVENT; 256];
    let mut buf = [0u8; 4096];
    while in_flight > 0 {
        if Instant::now() > deadline + IO_TIMEOUT {
            return Err(format!("{in_flight} pings did not come back"));
        }
        let k = ep
            .wait(&mut events, 100)
            .map_err(|e| format!("epoll_wait: {e}"))?;
        for ev in &events[..k] {
            let i = ev.u64 as usize;
            let t = &mut tunnels[i];
            if t.wrote < PING {
                flush(t).map_err(|e| format!("tunnel {i}: write: {e}"))?;
            }
            loop {
                let got = match t.stream.read(&mut buf) {
                    Ok(0) => return Err(format!("tunnel {i}: closed")),
                    Ok(got) => got,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(format!("tunnel {i}: read: {e}")),
                };
                if t.got + got > t.wrote || buf[..got] != t.ping[t.got..t.got + got] {
                    return Err(format!("tunnel {i}: a wrong echo"));
                }
                t.got += got;
            }
            if t.got == PING {
                exchanges += 1;
                in_flight -= 1;
                if Instant::now() < deadline {
                    t.got = 0;
                    t.wrote = 0;
                    in_flight += 1;
                    flush(t).map_err(|e| format!("tunnel {i}: write: {e}"))?;
                }
            }
        }
    }
    Ok(exchanges)
}

/// Writes what the socket takes of `t`'s ping.
fn flush(t: &mut Pinger) -> io::Result<()> {
    while t.wrote < PING {
        match t.stream.write(&t.ping[t.wrote..]) {
            Ok(k) => t.wrote += k,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A blocking 64-byte echo through `s`.
fn echo_once(s: &mut TcpStream) -> io::Result<()> {
    let ping = [7u8; PING];
    s.write_all(&ping)?;
    let mut back = [0u8; PING];
    s.read_exact(&mut back)?;
    if back != ping {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "a wrong echo"));
    }
    Ok(())
}

/// The proxy's bytes of RSS and descriptors per idle tunnel, over `n` tunnels.
fn idle(proxy: &ServerChild, echo: SocketAddr, n: usize) -> Result<(f64, f64), String> {
    let addr = proxy.addr;
    {
        let mut warm = tunnel(addr, echo, Via::Socks5).map_err(|e| format!("tunnel: {e}"))?;
        echo_once(&mut warm).map_err(|e| format!("echo: {e}"))?;
    }
    thread::sleep(Duration::from_millis(200));
    let base = ProcStatus::read(proxy.pid())?.rss_kib;
    let base_fds = count_fds(proxy.pid())?;
    let mut held = Vec::with_capacity(n);
    for i in 0..n {
        let mut s = tunnel(addr, echo, Via::Socks5).map_err(|e| format!("tunnel {i}: {e}"))?;
        echo_once(&mut s).map_err(|e| format!("tunnel {i}: echo: {e}"))?;
        held.push(s);
    }
    thread::sleep(Duration::from_millis(500));
    proxy.check_alive()?;
    let rss = ProcStatus::read(proxy.pid())?.rss_kib;
    let fds = count_fds(proxy.pid())?;
    drop(held);
    Ok((
        (rss.saturating_sub(base) * 1024) as f64 / n as f64,
        fds.saturating_sub(base_fds) as f64 / n as f64,
    ))
}

/// One scenario's figure per run on each proxy.
struct Figures {
    scenario: Scenario,
    unit: &'static str,
    /// The figure ratios are taken of (lower is better), per proxy.
    value: [Vec<f64>; 2],
    /// A second figure to show beside it (throughput, descriptors), per proxy.
    extra: [Vec<f64>; 2],
    extra_unit: &'static str,
}

fn run_scenario(
    sc: Scenario,
    proxy: &ServerChild,
    set: &Settings,
    idle_n: usize,
    source: &Source,
    echo: SocketAddr,
) -> Result<Outcome, String> {
    match sc {
        Scenario::ConnectTransfer | Scenario::Socks5Transfer => {
            let via = if sc == Scenario::ConnectTransfer {
                Via::Connect
            } else {
                Via::Socks5
            };
            // A warm-up tunnel first: the proxies' first-use costs are not the relay's.
            transfer(proxy.addr, source.addr, via, 16 << 20)?;
            let c = measured(proxy, || {
                transfer(proxy.addr, source.addr, via, set.transfer)
            })?;
            let gib = c.count as f64 / GIB as f64;
            Ok((
                c.cpu_us / 1e3 / gib,
                gib / c.wall.as_secs_f64(),
                Some(c.user_pct()),
            ))
        }
        Scenario::PingPong => {
            pingpong(
                proxy.addr,
                echo,
                PINGPONG_TUNNELS,
                Duration::from_millis(500),
            )?;
            let c = measured(proxy, || {
                pingpong(proxy.addr, echo, PINGPONG_TUNNELS, set.phase)
            })?;
            Ok((
                c.cpu_us / c.count as f64,
                c.count as f64 / c.wall.as_secs_f64(),
                Some(c.user_pct()),
            ))
        }
        Scenario::Idle => idle(proxy, echo, idle_n).map(|(rss, fds)| (rss, fds, None)),
    }
}

struct Opts {
    set: Settings,
    quick: bool,
    json: Option<PathBuf>,
    build: bool,
    only: Vec<Scenario>,
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        set: FULL,
        quick: false,
        json: None,
        build: true,
        only: Scenario::ALL.to_vec(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => {
                o.set = QUICK;
                o.quick = true;
            }
            "--no-build" => o.build = false,
            "--json" => o.json = Some(args.next().ok_or("--json FILE")?.into()),
            "--only" => {
                let list = args.next().ok_or("--only SCENARIO[,SCENARIO]")?;
                o.only = list
                    .split(',')
                    .map(|k| {
                        Scenario::ALL
                            .into_iter()
                            .find(|s| s.key() == k)
                            .ok_or_else(|| format!("no scenario {k:?}"))
                    })
                    .collect::<Result<_, _>>()?;
            }
            // cargo bench passes --bench to harness = false benches.
            "--bench" => {}
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(o)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn spread(v: &[f64]) -> String {
    let fmt = |x: f64| {
        if x >= 100.0 {
            format!("{x:.0}")
        } else {
            format!("{x:.2}")
        }
    };
    let m = fmt(median(v.to_vec()));
    if v.len() < 2 {
        return m;
    }
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{m} ({}–{})", fmt(lo), fmt(hi))
}

fn main() -> ExitCode {
    skip::bench_main("proxy bench", run)
}

fn run() -> Result<(), String> {
    let opts = parse_args()?;
    let set = opts.set;
    let (proxy_cpu, load_cpu) = os_support::pick_cpus()?;
    let programs = Programs::find(opts.build)?;
    // This process holds both ends of each idle tunnel but the proxy's: two descriptors
    // per tunnel, as the proxy does (which inherits this limit).
    let nofile = os_support::raise_nofile(1024)?;
    let idle_n = set.idle.min((nofile as usize).saturating_sub(600) / 2);
    os_support::pin_to(load_cpu).map_err(|e| format!("pinning to CPU {load_cpu}: {e}"))?;
    let source = Source::start()?;
    let (_echo_engine, echo) = echo_server()?;
    eprintln!(
        "proxy bench: proxies on CPU {proxy_cpu}, clients and targets on CPU {load_cpu}; \
         {} run(s); RLIMIT_NOFILE {nofile}",
        set.runs
    );
    let mut figs: Vec<Figures> = opts
        .only
        .iter()
        .map(|&sc| {
            let (unit, extra_unit) = match sc {
                Scenario::ConnectTransfer | Scenario::Socks5Transfer => {
                    ("proxy CPU ms/GiB", "GiB/s")
                }
                Scenario::PingPong => ("proxy CPU µs/exchange", "exchanges/s"),
                Scenario::Idle => ("proxy RSS B/tunnel", "fds/tunnel"),
            };
            Figures {
                scenario: sc,
                unit,
                value: [Vec::new(), Vec::new()],
                extra: [Vec::new(), Vec::new()],
                extra_unit,
            }
        })
        .collect();
    for run in 0..set.runs {
        for f in figs.iter_mut() {
            // Alternated: which proxy goes first changes every run.
            for k in 0..2 {
                let p = (k + run) % 2;
                let proxy = Proxy::ALL[p];
                let child = programs.start(proxy, proxy_cpu)?;
                let (value, extra, user) =
                    run_scenario(f.scenario, &child, &set, idle_n, &source, echo)
                        .map_err(|e| format!("{} on {}: {e}", f.scenario.key(), proxy.label()))?;
                for line in child.new_lines() {
                    eprintln!("  {} said: {line}", proxy.label());
                }
                let user = user.map_or(String::new(), |u| format!(", {u:.0} % in user space"));
                eprintln!(
                    "  run {} {} {}: {value:.2} {} ({extra:.2} {}{user})",
                    run + 1,
                    f.scenario.key(),
                    proxy.label(),
                    f.unit,
                    f.extra_unit
                );
                f.value[p].push(value);
                f.extra[p].push(extra);
            }
        }
    }
    let command = format!(
        "cargo bench --bench proxy --features proxy{}",
        if opts.quick { " -- --quick" } else { "" }
    );
    println!("| `{command}` | unit | fibr | tokio | fibr / tokio |");
    println!("|---|---|---:|---:|---:|");
    for f in &figs {
        let r = median(f.value[0].clone()) / median(f.value[1].clone());
        println!(
            "| {} ({}) | {} | {} | {} | {r:.2}× |",
            f.scenario.key(),
            f.scenario.desc(&set, idle_n),
            f.unit,
            spread(&f.value[0]),
            spread(&f.value[1]),
        );
        println!(
            "| | {} | {} | {} | |",
            f.extra_unit,
            spread(&f.extra[0]),
            spread(&f.extra[1]),
        );
    }
    if let Some(path) = &opts.json {
        let scenarios: Vec<serde_json::Value> = figs
            .iter()
            .map(|f| {
                serde_json::json!({
                    "name": f.scenario.key(),
                    "desc": f.scenario.desc(&set, idle_n),
                    "unit": f.unit,
                    "fibr": f.value[0],
                    "tokio": f.value[1],
                    "extra_unit": f.extra_unit,
                    "fibr_extra": f.extra[0],
                    "tokio_extra": f.extra[1],
                })
            })
            .collect();
        let doc = serde_json::json!({
            "bench": "proxy",
            "command": command,
            "reps": set.runs,
            "workers": 1,
            "idle_tunnels": idle_n,
            "scenarios": scenarios,
        });
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(())
}
