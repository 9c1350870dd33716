//! The server child the benchmarks share: a process started with stderr piped, waited on
//! until it prints "listening on ADDR", and killed and reaped when dropped. Each bench
//! includes this file and uses part of it.
#![allow(dead_code)]

use std::io::{self, BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// A server child process; killed and reaped when dropped, whatever happened.
pub struct ServerChild {
    child: Child,
    /// The address from its "listening on ADDR" line.
    pub addr: SocketAddr,
    lines: mpsc::Receiver<String>,
}

impl ServerChild {
    /// Starts `taskset -c CPU PROGRAM ARGS...` with `envs` set, killed if this process dies,
    /// and waits up to `timeout` for it to listen. `label` names it in messages.
    pub fn start(
        cpu: usize,
        program: &Path,
        args: &[&str],
        envs: &[(&str, &str)],
        label: &str,
        timeout: Duration,
    ) -> Result<ServerChild, String> {
        let mut cmd = pinned_command(cpu, program);
        cmd.args(args);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        ServerChild::spawn(cmd, program, label, timeout)
    }

    /// Spawns `cmd` (stdin and stdout null, stderr piped) and waits up to `timeout` for a
    /// stderr line containing "listening on ADDR"; earlier lines are printed as
    /// "  LABEL said: LINE". `program` names it in the spawn error.
    pub fn spawn(
        mut cmd: Command,
        program: &Path,
        label: &str,
        timeout: Duration,
    ) -> Result<ServerChild, String> {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("starting {}: {e}", program.display()))?;
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // From here on, the guard kills the child on every path.
        let mut guard = ServerChild {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            lines: rx,
        };
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match guard.lines.recv_timeout(left) {
                Ok(line) => line,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(format!("{label} did not start listening in time"))
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = guard.child.wait().map(|s| s.to_string());
                    return Err(format!("{label} exited at start-up: {status:?}"));
                }
            };
            if let Some((_, addr)) = line.split_once("listening on ") {
                guard.addr = addr
                    .trim()
                    .parse()
                    .map_err(|e| format!("bad address in {line:?}: {e}"))?;
                return Ok(guard);
            }
            eprintln!("  {label} said: {line}");
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// An error if the server has exited, from /proc (no reaping, so `&self`).
    pub fn check_alive(&self) -> Result<(), String> {
        // Reading /proc/PID/stat of a zombie works, so look at the state field.
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))
            .map_err(|e| format!("the server is gone: {e}"))?;
        match stat.rsplit_once(") ").and_then(|(_, r)| r.chars().next()) {
            Some('Z') | Some('X') => Err("the server exited".into()),
            _ => Ok(()),
        }
    }

    /// `Child::try_wait` on the server.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// The stderr lines the server printed since its start-up line (or the last call).
    pub fn new_lines(&self) -> mpsc::TryIter<'_, String> {
        self.lines.try_iter()
    }
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Asks the kernel to kill this (forked) process when the bench dies. Async-signal-safe.
pub fn die_with_parent() -> io::Result<()> {
    // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number and no pointers.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `taskset -c CPU PROGRAM`, killed if this process dies first (taskset execs the program
/// in the same process, which keeps the parent-death signal); the caller adds its arguments.
pub fn pinned_command(cpu: usize, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new("taskset");
    cmd.arg("-c").arg(cpu.to_string()).arg(program);
    // SAFETY: one prctl call between fork and exec: async-signal-safe.
    unsafe {
        cmd.pre_exec(die_with_parent);
    }
    cmd
}

/// What `/proc/PID/status` says about a process's memory and threads.
pub struct ProcStatus {
    pub rss_kib: u64,
    /// VmHWM: the peak resident set since the process started.
    pub hwm_kib: u64,
    pub threads: u64,
}

impl ProcStatus {
    /// Reads `/proc/PID/status`.
    pub fn read(pid: u32) -> Result<ProcStatus, String> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .map_err(|e| format!("reading /proc/{pid}/status: {e}"))?;
        let field = |name: &str| -> Result<u64, String> {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
                .ok_or_else(|| format!("no {name} in /proc/{pid}/status"))
        };
        Ok(ProcStatus {
            rss_kib: field("VmRSS")?,
            hwm_kib: field("VmHWM")?,
            threads: field("Threads")?,
        })
    }
}

/// utime + stime of all of process `pid`'s threads so far, in µs.
pub fn process_cpu_us(pid: u32) -> Result<f64, String> {
    let (user, system) = process_cpu_split_us(pid)?;
    Ok(user + system)
}

/// (utime, stime) of all of process `pid`'s threads so far, in µs: user space and kernel.
pub fn process_cpu_split_us(pid: u32) -> Result<(f64, f64), String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("reading /proc/{pid}/stat: {e}"))?;
    // Fields after "(comm) ": state is field 3, utime 14, stime 15.
    let rest = stat
        .rsplit_once(") ")
        .map(|(_, r)| r)
        .ok_or_else(|| format!("bad /proc/{pid}/stat: {stat:?}"))?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| -> Result<f64, String> {
        f.get(i - 3)
            .and_then(|v| v.parse::<u64>().ok())
            .map(|ticks| ticks as f64)
            .ok_or_else(|| format!("no field {i} in /proc/{pid}/stat"))
    };
    let us = 1e6 / clock_ticks()? as f64;
    Ok((field(14)? * us, field(15)? * us))
}

/// The kernel's clock ticks per second (the unit of /proc's CPU times).
pub fn clock_ticks() -> Result<i64, String> {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz <= 0 {
        return Err("sysconf(_SC_CLK_TCK) failed".into());
    }
    Ok(hz)
}

/// How many descriptors process `pid` has open.
pub fn count_fds(pid: u32) -> Result<usize, String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .map_err(|e| format!("listing /proc/{pid}/fd: {e}"))
}
