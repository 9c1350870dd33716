//! The HTTP/3 scenarios (issue 15): fibr's `with_http3()` against axum's `Router` on
//! quinn and h3-quinn on tokio (`benches/peers` `h3_quinn`), loaded by `benches/peers`
//! `h3_load`, a quinn and h3 client on tokio (not fibr's h3 code), pinned to the load
//! generator's CPU.
//!
//! Both servers get the HTTPS scenarios' certificate and rustls config (`compare/tls.rs`,
//! ring provider) with ALPN `h3`, and the same QUIC limits (fibr's `Http3Config` defaults,
//! which the quinn peer copies). The load generator's connections each have a UDP socket of
//! their own, as separate clients would; it verifies no certificate (as h2load and wrk do)
//! and resumes no session.
//!
//! - **h3-c1**, **h3-c10**: 100 connections with 1 or 10 `GET /` in flight on each
//!   (`h3_load load`), server CPU per request. The measured run includes the 100
//!   handshakes at its start (as the HTTPS scenarios' wrk runs do; under 1 % of a 5 s
//!   phase's requests' cost);
//! - **h3-download**: `GET /bytes/10485760` (10 MiB, streamed in 64 KiB chunks by both)
//!   one after the other on one connection (`h3_load download`), every byte counted;
//!   server CPU per MiB (the table's "requests" are MiB);
//! - **h3-idle**: 1,000 connections, each a full handshake and one `GET /` answered, then
//!   silent; the server's RSS per connection above the empty server, as in idle. Always
//!   1,000 (not the idle scenarios' 10,000): the load generator holds a UDP socket per
//!   connection.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::idle::{self, Idle};
use crate::load::{self, Load, Measured};
use crate::proc::{self, RunningServer};
use crate::{Scenario, Settings};

/// Connections of the load scenarios.
pub const CONNS: usize = 100;
/// The download's body.
pub const DOWNLOAD_BYTES: usize = 10 * 1024 * 1024;
/// Idle QUIC connections (at most: `--quick` has as many).
pub const IDLE_CONNS: usize = 1_000;
/// Bound on the load generator's answer to one "open N" (N up to 1,000 handshakes).
const IDLE_OPEN_TIMEOUT: Duration = Duration::from_secs(120);
const MIB: u64 = 1024 * 1024;

/// The README's note on these rows.
pub const README_NOTE: &str = "The HTTP/3 rows (issue 15) run fibr's \
    `serve(..).with_tls(..).with_http3()` against the same axum `Router` on quinn + h3-quinn \
    on tokio (`benches/peers/src/bin/h3_quinn.rs`: a task per connection and per request, \
    the body streamed both ways), the ratios' base in those rows, with the HTTPS rows' \
    certificate and rustls config (ALPN `h3`) and the same QUIC limits. The load is \
    `benches/peers/src/bin/h3_load`, quinn + h3's client on tokio with a UDP socket per \
    connection; the download row counts MiB, not requests.";

/// Streams in flight per connection.
pub fn streams(sc: Scenario) -> usize {
    match sc {
        Scenario::H3C1 => 1,
        Scenario::H3C10 => 10,
        _ => unreachable!("{} is not an HTTP/3 request load", sc.key()),
    }
}

/// The idle connections: the idle scenarios' count, at most [`IDLE_CONNS`].
pub fn idle_conns(set: &Settings) -> usize {
    set.idle_conns.min(IDLE_CONNS)
}

/// The load generator's arguments for `sc` on `addr`, running `d`.
fn command(tool: &Path, sc: Scenario, addr: &str, d: Duration) -> Vec<String> {
    let secs = d.as_secs().max(1).to_string();
    let tool = tool.display().to_string();
    match sc {
        Scenario::H3Download => vec![
            tool,
            "download".into(),
            addr.into(),
            DOWNLOAD_BYTES.to_string(),
            secs,
        ],
        sc => vec![
            tool,
            "load".into(),
            addr.into(),
            CONNS.to_string(),
            streams(sc).to_string(),
            secs,
        ],
    }
}

/// `h3_load`'s `key value` lines: (requests, measuring time, p99 µs, errors, bytes).
fn parse(text: &str) -> Result<(u64, Duration, f64, u64, u64), String> {
    let field = |key: &str| -> Result<u64, String> {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
            .ok_or_else(|| format!("no {key} in h3_load's output:\n{text}"))
    };
    Ok((
        field("requests")?,
        Duration::from_micros(field("wall_us")?),
        field("p99_us")? as f64,
        field("errors")?,
        field("bytes")?,
    ))
}

/// Every route answers over HTTP/3 (`h3_load check`).
pub fn check_routes(tool: &Path, addr: std::net::SocketAddr, cpu: usize) -> Result<(), String> {
    let args = [tool.display().to_string(), "check".into(), addr.to_string()];
    let out = load::run_tool(cpu, &args).map_err(|e| format!("over HTTP/3: {e}"))?;
    match out.trim() {
        "ok" => Ok(()),
        other => Err(format!("over HTTP/3: h3_load check said {other:?}")),
    }
}

/// One HTTP/3 load run: a warm-up with the same load, then the measured phase. A download
/// counts MiB as its requests. Errors fail the phase: a server that resets streams must
/// not show up as a fast one.
pub fn load_run(
    srv: &RunningServer,
    sc: Scenario,
    set: &Settings,
    cpu: usize,
    tool: &Path,
) -> Result<Load, String> {
    let addr = srv.addr.to_string();
    let idle_rss_kib = srv.status()?.rss_kib;
    let warm = parse(&load::run_tool(cpu, &command(tool, sc, &addr, set.warmup))?)?;
    if warm.0 == 0 {
        return Err("no request completed during the warm-up".into());
    }
    srv.check_alive()?;
    let args = command(tool, sc, &addr, set.phase);
    let (sampled, text) = load::measure(srv, cpu, || load::run_tool(cpu, &args))?;
    let (requests, wall, p99_us, errors, bytes) = parse(&text)?;
    if requests == 0 || errors > 0 {
        return Err(format!("h3_load: {requests} requests, {errors} errors"));
    }
    let requests = match sc {
        Scenario::H3Download => bytes / MIB,
        _ => requests,
    };
    let m = Measured {
        requests,
        wall,
        p99_us,
        errors,
    };
    Ok(Load::from_parts(sampled, m, idle_rss_kib))
}

/// The load generator in idle mode, pinned to the load CPU: it holds the connections, and
/// is killed when dropped.
struct IdleClient {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl IdleClient {
    fn start(tool: &Path, addr: std::net::SocketAddr, cpu: usize) -> Result<IdleClient, String> {
        let mut cmd = proc::pinned_command(cpu, tool);
        cmd.arg("idle")
            .arg(addr.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("running {}: {e}", tool.display()))?;
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
            return Err("h3_load idle: no pipes".into());
        };
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(IdleClient {
            child,
            stdin,
            lines,
        })
    }

    /// Has the load generator hold `upto` connections, each with one GET / answered.
    fn open(&mut self, upto: usize) -> Result<(), String> {
        writeln!(self.stdin, "open {upto}").map_err(|e| format!("h3_load idle: {e}"))?;
        match self.lines.recv_timeout(IDLE_OPEN_TIMEOUT) {
            Ok(line) if line == format!("open {upto}") => Ok(()),
            Ok(line) => Err(format!("h3_load idle said {line:?}")),
            Err(_) => Err(format!(
                "h3_load idle did not open {upto} connections in time (or failed: see above)"
            )),
        }
    }
}

impl Drop for IdleClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The idle scenario over HTTP/3: `idle::sample_idle` around the load generator's opening.
/// QUIC connections share the server's UDP socket: no descriptor per connection to check.
pub fn idle_run(srv: &RunningServer, n: usize, cpu: usize, tool: &Path) -> Result<Idle, String> {
    let mut client = IdleClient::start(tool, srv.addr, cpu)?;
    idle::sample_idle(srv, n, 0, |upto| client.open(upto))
}
