//! The server processes and what `/proc` says about them and the machine.

use std::net::SocketAddr;
use std::path::PathBuf;

pub use crate::server_support::ProcStatus;
use crate::server_support::{clock_ticks, count_fds, process_cpu_us, ServerChild};
use crate::{Server, IO_TIMEOUT};

pub use crate::os_support::{allowed_cpus, pick_cpus};
pub use crate::server_support::pinned_command;

/// A server process (`taskset -c CPU PROGRAM [ARG] 0`); killed and reaped when dropped.
pub struct RunningServer {
    child: ServerChild,
    label: &'static str,
    /// The CPU it is pinned to.
    pub cpu: usize,
    pub addr: SocketAddr,
}

impl RunningServer {
    /// `env`: more of the server's environment (`BENCH_TLS_CERT` and `BENCH_TLS_KEY` for
    /// HTTPS).
    pub fn start(
        bin: &(PathBuf, Option<&'static str>),
        server: &Server,
        cpu: usize,
        workers: &str,
        env: &[(&str, &str)],
    ) -> Result<RunningServer, String> {
        let (path, arg) = bin;
        let mut args: Vec<&str> = arg.iter().copied().collect();
        args.push("0");
        let mut envs = vec![("BENCH_WORKERS", workers)];
        envs.extend_from_slice(env);
        let child = ServerChild::start(cpu, path, &args, &envs, server.label, IO_TIMEOUT)?;
        Ok(RunningServer {
            addr: child.addr,
            child,
            label: server.label,
            cpu,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    pub fn check_alive(&self) -> Result<(), String> {
        self.child.check_alive()
    }

    /// utime + stime of all the server's threads, in µs.
    pub fn cpu_us(&self) -> Result<f64, String> {
        self.check_alive()?;
        process_cpu_us(self.pid())
    }

    /// The server's memory figures (an error if it has died).
    pub fn status(&self) -> Result<ProcStatus, String> {
        self.check_alive()?;
        ProcStatus::read(self.pid())
    }

    pub fn fds(&self) -> Result<usize, String> {
        count_fds(self.pid())
    }

    /// Prints what the server said after its start-up line.
    pub fn report_output(&self) {
        for line in self.child.new_lines() {
            eprintln!("  {} said: {line}", self.label);
        }
    }
}

/// Busy time of one CPU so far (user, nice, system, irq, softirq, steal), in µs.
pub fn core_busy_us(cpu: usize) -> Result<f64, String> {
    let text =
        std::fs::read_to_string("/proc/stat").map_err(|e| format!("reading /proc/stat: {e}"))?;
    let name = format!("cpu{cpu}");
    let fields: Vec<u64> = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name.as_str()))
        .ok_or_else(|| format!("no {name} in /proc/stat"))?
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal
    let busy: u64 = [0, 1, 2, 5, 6, 7]
        .iter()
        .filter_map(|&i| fields.get(i))
        .sum();
    Ok(busy as f64 * 1e6 / clock_ticks()? as f64)
}

/// The TCP connections this network namespace has opened (`connect`) so far: the kernel's
/// `Tcp: ActiveOpens` counter in /proc/net/snmp.
pub fn tcp_active_opens() -> Result<u64, String> {
    let text = std::fs::read_to_string("/proc/net/snmp")
        .map_err(|e| format!("reading /proc/net/snmp: {e}"))?;
    let mut tcp = text.lines().filter(|l| l.starts_with("Tcp:"));
    let (names, values) = tcp
        .next()
        .zip(tcp.next())
        .ok_or("no Tcp lines in /proc/net/snmp")?;
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "ActiveOpens")
        .and_then(|(_, v)| v.parse().ok())
        .ok_or_else(|| "no ActiveOpens in /proc/net/snmp".into())
}

/// CPU time of this process and its reaped children (the load generators), in µs.
pub fn own_cpu_us() -> f64 {
    let mut total = 0.0;
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: rusage is plain data for getrusage to fill.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a valid, writable rusage.
        if unsafe { libc::getrusage(who, &mut ru) } == 0 {
            for tv in [ru.ru_utime, ru.ru_stime] {
                total += tv.tv_sec as f64 * 1e6 + tv.tv_usec as f64;
            }
        }
    }
    total
}

/// SIGKILLs `pid` and every process under it (children first found through
/// `/proc/*/stat`'s parent field), for a child that runs grandchildren (cargo).
pub fn kill_tree(pid: u32) {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
                continue;
            };
            // "pid (comm) state ppid ..."
            if let Some(ppid) = stat
                .rsplit_once(") ")
                .and_then(|(_, r)| r.split_whitespace().nth(1)?.parse::<u32>().ok())
            {
                parents.push((p, ppid));
            }
        }
    }
    let mut tree = vec![pid];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    for p in tree.into_iter().rev() {
        // SAFETY: kill takes a pid and a signal number.
        unsafe { libc::kill(p as libc::pid_t, libc::SIGKILL) };
    }
}

/// "1/5/15-minute load average" from /proc/loadavg.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "?".into())
}

/// "CPU model, N CPUs, Linux VERSION".
pub fn machine() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    // Not available_parallelism: this process is pinned to one CPU by now.
    // SAFETY: sysconf has no preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|k| k.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    format!("{model}, {cpus} CPUs, Linux {kernel}")
}
