//! Load phases: the external load generators, run pinned, and their output parsed.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::thread;
use std::time::{Duration, Instant};

use crate::proc::{self, RunningServer};
use crate::{Scenario, Settings};

/// Bound on one load generator run (the longest takes a few seconds).
const TOOL_TIMEOUT: Duration = Duration::from_secs(120);
/// Connections the keep-alive tools open, and `ab`'s concurrency.
const CONNS: usize = 100;
const CHURN_CONCURRENCY: usize = 50;

/// One load phase's result.
#[derive(Clone, Debug, Default)]
pub struct Load {
    pub requests: u64,
    /// The load generator's measuring time.
    pub wall: Duration,
    /// Server CPU time (all threads) over the tool's run, µs.
    pub cpu_us: f64,
    /// CPU time of this process and the load generator over the tool's run, µs.
    pub client_us: f64,
    /// CPU time of other work on the server's and the load generator's CPUs, µs.
    pub other_server_us: f64,
    pub other_client_us: f64,
    pub p99_us: f64,
    /// p50, p99.9 and the largest latency, µs: reported by `compare/h1load.rs`'s generator
    /// (the c10k and fixed-rate scenarios), NaN from the others.
    pub p50_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// The fixed rate the requests were sent at, requests/s (0: as fast as answered).
    pub target_rps: f64,
    /// VmHWM after the phase (the server was fresh: its peak), and VmRSS before the load.
    pub peak_rss_kib: u64,
    pub idle_rss_kib: u64,
    /// TCP connections opened on the machine during the phase (`ActiveOpens`).
    pub opens: u64,
    pub errors: u64,
}

impl Load {
    pub fn rps(&self) -> f64 {
        self.requests as f64 / self.wall.as_secs_f64()
    }
    pub fn cpu_per_req(&self) -> f64 {
        self.cpu_us / self.requests.max(1) as f64
    }
    pub fn cpu_pct(&self) -> f64 {
        self.cpu_us / (self.wall.as_secs_f64() * 1e6) * 100.0
    }
    pub fn client_pct(&self) -> f64 {
        self.client_us / (self.wall.as_secs_f64() * 1e6) * 100.0
    }
    pub fn opens_per_req(&self) -> f64 {
        self.opens as f64 / self.requests.max(1) as f64
    }
    /// The larger share of either CPU taken by other work (a noisy run when high).
    pub fn other_pct(&self) -> f64 {
        self.other_server_us.max(self.other_client_us) / (self.wall.as_secs_f64() * 1e6) * 100.0
    }
}

/// A temporary file, removed when dropped (on every path).
pub struct TempFile(pub PathBuf);

impl TempFile {
    /// In /dev/shm where there is one: h2load writes a line per request, and a disk file's
    /// writeback would load the CPUs (kernel threads the phase does not count).
    pub fn new(suffix: &str) -> TempFile {
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        TempFile(dir.join(format!("fibr-compare-{}-{suffix}", std::process::id())))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The wrk script for POST /echo with a 1 KiB body.
pub fn write_lua() -> Result<TempFile, String> {
    let f = TempFile::new("post.lua");
    let script = "wrk.method = \"POST\"\n\
                  wrk.body = string.rep(\"x\", 1024)\n\
                  wrk.headers[\"Content-Type\"] = \"application/octet-stream\"\n";
    std::fs::write(&f.0, script).map_err(|e| format!("writing {}: {e}", f.0.display()))?;
    Ok(f)
}

/// The load generator's command line for `sc`, running `d`; with a per-request log or
/// percentile file for the measured phase. A TLS scenario runs its plain-text one's tool
/// on an `https://` URL (each tool speaks TLS through OpenSSL, and verifies no
/// certificate).
fn command(sc: Scenario, url: &str, d: Duration, lua: &Path, log: Option<&Path>) -> Vec<String> {
    let secs = d.as_secs().max(1).to_string();
    let conns = CONNS.to_string();
    let mut a: Vec<String> = Vec::new();
    let mut push = |xs: &[&str]| a.extend(xs.iter().map(|s| s.to_string()));
    match sc.plain() {
        Scenario::Plain | Scenario::Echo => {
            push(&["wrk", "-t1", "-c", &conns, "-d", &format!("{secs}s")]);
            push(&["--latency", "--timeout", "5s"]);
            if sc == Scenario::Echo {
                push(&["-s", &lua.display().to_string(), &format!("{url}echo")]);
            } else {
                push(&[url]);
            }
        }
        Scenario::Pipelined => {
            push(&["h2load", "--h1", "-c", &conns, "-m16", "-D", &secs]);
            if let Some(l) = log {
                push(&[&format!("--log-file={}", l.display())]);
            }
            push(&[url]);
        }
        Scenario::Churn => {
            // No -k: HTTP/1.0 without keep-alive, a new connection per request. -r: a
            // reset does not end the run; -n: bounded by -t, not by the count.
            let c = CHURN_CONCURRENCY.to_string();
            push(&["ab", "-q", "-r", "-c", &c, "-t", &secs, "-n", "10000000"]);
            if sc.tls() {
                // Over https: a full TLS 1.3 handshake per request (ab keeps no session
                // to resume).
                push(&["-f", "TLS1.3"]);
            }
            if let Some(l) = log {
                push(&["-e", &l.display().to_string()]);
            }
            push(&[url]);
        }
        _ => unreachable!("{} has no external load generator", sc.key()),
    }
    a
}

/// What a tool's output says: (requests completed, measuring time, p99 µs if given,
/// errors).
fn parse(sc: Scenario, text: &str) -> Result<(u64, Duration, Option<f64>, u64), String> {
    match sc.plain() {
        Scenario::Plain | Scenario::Echo => {
            parse_wrk(text).map(|(n, wall, p99, errors)| (n, wall, Some(p99), errors))
        }
        Scenario::Pipelined => parse_h2load(text).map(|(n, wall, errors)| (n, wall, None, errors)),
        Scenario::Churn => parse_ab(text).map(|(n, wall, errors)| (n, wall, None, errors)),
        _ => unreachable!(),
    }
}

/// What a load generator counted in its measured phase.
pub struct Measured {
    pub requests: u64,
    /// Its measuring time.
    pub wall: Duration,
    pub p99_us: f64,
    pub errors: u64,
}

/// What `/proc` says about the server and the CPUs over a measured phase.
pub struct Sampled {
    /// Server CPU time (all threads), µs.
    pub cpu_us: f64,
    /// CPU time of this process and its reaped children (the load generator), µs.
    pub client_us: f64,
    pub other_server_us: f64,
    pub other_client_us: f64,
    /// TCP connections opened on the machine (`ActiveOpens`).
    pub opens: u64,
    /// VmHWM after the phase.
    pub peak_rss_kib: u64,
}

/// Runs `phase` (the measured load, on CPU `cpu`: in this process or a child it reaps) and
/// samples the server's CPU time and the two CPUs' busy time around it.
pub fn measure<T>(
    srv: &RunningServer,
    cpu: usize,
    phase: impl FnOnce() -> Result<T, String>,
) -> Result<(Sampled, T), String> {
    let opens_before = proc::tcp_active_opens()?;
    let before = srv.cpu_us()?;
    let (server_core_before, client_core_before) =
        (proc::core_busy_us(srv.cpu)?, proc::core_busy_us(cpu)?);
    let ours_before = proc::own_cpu_us();
    let out = phase();
    let after = srv.cpu_us()?;
    let (server_core_after, client_core_after) =
        (proc::core_busy_us(srv.cpu)?, proc::core_busy_us(cpu)?);
    let ours = proc::own_cpu_us() - ours_before;
    let opens = proc::tcp_active_opens()? - opens_before;
    let out = out?;
    let peak_rss_kib = srv.status()?.hwm_kib;
    Ok((
        Sampled {
            cpu_us: after - before,
            client_us: ours,
            // The load generator and this process ran on the client CPU.
            other_server_us: (server_core_after - server_core_before - (after - before)).max(0.0),
            other_client_us: (client_core_after - client_core_before - ours).max(0.0),
            opens,
            peak_rss_kib,
        },
        out,
    ))
}

impl Load {
    pub fn from_parts(s: Sampled, m: Measured, idle_rss_kib: u64) -> Load {
        Load {
            requests: m.requests,
            wall: m.wall,
            cpu_us: s.cpu_us,
            client_us: s.client_us,
            other_server_us: s.other_server_us,
            other_client_us: s.other_client_us,
            p99_us: m.p99_us,
            p50_us: f64::NAN,
            p999_us: f64::NAN,
            max_us: f64::NAN,
            target_rps: 0.0,
            peak_rss_kib: s.peak_rss_kib,
            idle_rss_kib,
            opens: s.opens,
            errors: m.errors,
        }
    }
}

/// Warms the server up with the same load, then measures one phase.
pub fn load_run(
    srv: &RunningServer,
    sc: Scenario,
    set: &Settings,
    cpu: usize,
    lua: &Path,
) -> Result<Load, String> {
    let scheme = if sc.tls() { "https" } else { "http" };
    let url = format!("{scheme}://{}/", srv.addr);
    let idle_rss_kib = srv.status()?.rss_kib;
    let warm = run_tool(cpu, &command(sc, &url, set.warmup, lua, None))?;
    if parse(sc, &warm)?.0 == 0 {
        return Err(format!("no request completed during the warm-up:\n{warm}"));
    }
    srv.check_alive()?;

    // h2load's per-request log, or ab's percentile table.
    let log = TempFile::new(&format!("{}.log", sc.key()));
    let _ = std::fs::remove_file(&log.0);
    let args = command(sc, &url, set.phase, lua, Some(&log.0));
    let (sampled, text) = measure(srv, cpu, || run_tool(cpu, &args))?;
    let (requests, wall, p99, errors) = parse(sc, &text)?;
    let p99_us = match (p99, sc.plain()) {
        (Some(p), _) => p,
        (None, Scenario::Pipelined) => h2load_log_p99(&log.0)?,
        (None, _) => ab_csv_p99(&log.0)?,
    };
    if requests == 0 {
        return Err(format!("no request completed:\n{text}"));
    }
    // Each churn request must have had its own connection: a tool that reused them would
    // measure something else. (Other processes' connections only add to the count.)
    if sc.plain() == Scenario::Churn && (sampled.opens as f64) < requests as f64 * 0.99 {
        return Err(format!(
            "{} connections opened for {requests} requests: the load generator reused connections",
            sampled.opens
        ));
    }
    let m = Measured {
        requests,
        wall,
        p99_us,
        errors,
    };
    Ok(Load::from_parts(sampled, m, idle_rss_kib))
}

/// Runs a load generator pinned to `cpu`; its stdout, or an error with its output.
pub fn run_tool(cpu: usize, args: &[String]) -> Result<String, String> {
    let mut cmd = proc::pinned_command(cpu, &args[0]);
    cmd.args(&args[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("running {}: {e}", args[0]))?;
    let drain = |r: Option<Box<dyn Read + Send>>| {
        thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let out = drain(child.stdout.take().map(|s| Box::new(s) as _));
    let err = drain(child.stderr.take().map(|s| Box::new(s) as _));
    // A stalled server must not hang the bench.
    let deadline = Instant::now() + TOOL_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{} did not finish within {} s",
                    args.join(" "),
                    TOOL_TIMEOUT.as_secs()
                ));
            }
            Err(e) => return Err(format!("waiting for {}: {e}", args[0])),
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if !status.success() {
        return Err(format!(
            "{} failed ({status}):\n{stdout}\n{stderr}",
            args.join(" ")
        ));
    }
    Ok(stdout)
}

/// wrk's output: (requests, measuring time, p99 µs, errors).
pub fn parse_wrk(text: &str) -> Result<(u64, Duration, f64, u64), String> {
    let bad = |what: &str| format!("no {what} in wrk's output:\n{text}");
    // "  123456 requests in 5.00s, 14.25MB read"
    let line = text
        .lines()
        .find(|l| l.contains(" requests in "))
        .ok_or_else(|| bad("request count"))?;
    let mut words = line.split_whitespace();
    let requests: u64 = words
        .next()
        .and_then(|w| w.parse().ok())
        .ok_or_else(|| bad("request count"))?;
    let wall = words
        .nth(2)
        .map(|w| w.trim_end_matches(','))
        .and_then(parse_duration_us)
        .map(|us| Duration::from_secs_f64(us / 1e6))
        .ok_or_else(|| bad("duration"))?;
    let p99 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("99%"))
        .and_then(|v| parse_duration_us(v.trim()))
        .ok_or_else(|| bad("99% latency"))?;
    let mut errors = 0;
    for l in text.lines().map(str::trim) {
        if let Some(v) = l.strip_prefix("Non-2xx or 3xx responses:") {
            errors += v.trim().parse::<u64>().unwrap_or(0);
        }
        if let Some(v) = l.strip_prefix("Socket errors:") {
            // "connect 0, read 0, write 0, timeout 0"
            errors += v
                .split(',')
                .filter_map(|p| p.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>();
        }
    }
    Ok((requests, wall, p99, errors))
}

/// "4.68ms", "812.00us", "1.02s", "2.5m" -> microseconds.
pub fn parse_duration_us(s: &str) -> Option<f64> {
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = s.split_at(split);
    let x: f64 = num.parse().ok()?;
    let scale = match unit {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" => 60e6,
        "h" => 3600e6,
        _ => return None,
    };
    Some(x * scale)
}

/// h2load's output: (requests succeeded, measuring time, errors).
pub fn parse_h2load(text: &str) -> Result<(u64, Duration, u64), String> {
    let bad = |what: &str| format!("no {what} in h2load's output:\n{text}");
    // "finished in 1.03s, 388423.05 req/s, 44.82MB/s"
    let wall = text
        .lines()
        .find_map(|l| l.strip_prefix("finished in "))
        .and_then(|l| parse_duration_us(l.split(',').next()?.trim()))
        .map(|us| Duration::from_secs_f64(us / 1e6))
        .ok_or_else(|| bad("duration"))?;
    // "requests: 400000 total, 400000 started, 400000 done, 400000 succeeded, 0 failed, 0 errored, 0 timeout"
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("requests: "))
        .ok_or_else(|| bad("request counts"))?;
    let count = |name: &str| -> Option<u64> {
        line.split(',')
            .find_map(|p| p.trim().strip_suffix(name)?.trim().parse().ok())
    };
    let done = count("done").ok_or_else(|| bad("done"))?;
    let ok = count("succeeded").ok_or_else(|| bad("succeeded"))?;
    let failed = count("failed").unwrap_or(0)
        + count("errored").unwrap_or(0)
        + count("timeout").unwrap_or(0);
    // With -D, requests in flight at the end are started but not done: not errors.
    Ok((ok, wall, failed.max(done - ok)))
}

/// ab's output: (complete requests less failed ones, measuring time, errors).
pub fn parse_ab(text: &str) -> Result<(u64, Duration, u64), String> {
    let bad = |what: &str| format!("no {what} in ab's output:\n{text}");
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
    };
    let complete: u64 = field("Complete requests:")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| bad("Complete requests"))?;
    let failed: u64 = field("Failed requests:")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| bad("Failed requests"))?;
    let non2xx: u64 = field("Non-2xx responses:")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let secs: f64 = field("Time taken for tests:")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| bad("Time taken for tests"))?;
    let errors = failed + non2xx;
    Ok((
        complete.saturating_sub(errors),
        Duration::from_secs_f64(secs),
        errors,
    ))
}

/// The 99th percentile of h2load's per-request times (third column, µs).
pub fn h2load_log_p99(path: &Path) -> Result<f64, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let mut v: Vec<u64> = text
        .lines()
        .filter_map(|l| l.split('\t').nth(2)?.trim().parse().ok())
        .collect();
    if v.is_empty() {
        return Err(format!("no request times in {}", path.display()));
    }
    let i = ((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len()) - 1;
    let (_, p99, _) = v.select_nth_unstable(i);
    Ok(*p99 as f64)
}

/// The 99th percentile from ab's `-e` table ("99,1.234": percent, milliseconds).
fn ab_csv_p99(path: &Path) -> Result<f64, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    text.lines()
        .find_map(|l| l.strip_prefix("99,"))
        .and_then(|ms| ms.trim().parse::<f64>().ok())
        .map(|ms| ms * 1000.0)
        .ok_or_else(|| format!("no 99% line in {}", path.display()))
}
