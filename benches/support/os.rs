//! OS helpers the benchmarks share: CPU pinning, descriptor limits, finding tools and the
//! bench server. Each bench includes this file and uses part of it.
#![allow(dead_code)]

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Pins the calling thread (and what it later starts) to one CPU.
pub fn pin_to(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data, filled locally and passed with its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The CPUs this process may use.
pub fn allowed_cpus() -> Result<Vec<usize>, String> {
    // SAFETY: cpu_set_t is plain data, and sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(format!("sched_getaffinity: {}", io::Error::last_os_error()));
        }
        Ok((0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect())
    }
}

/// The first two CPUs this process may use: (server, load generator).
pub fn pick_cpus() -> Result<(usize, usize), String> {
    let allowed = allowed_cpus()?;
    match allowed.as_slice() {
        [first, second, ..] => Ok((*first, *second)),
        _ => Err(format!(
            "need two CPUs (server, load generator); this process may use {allowed:?}"
        )),
    }
}

/// Raises the soft RLIMIT_NOFILE to at least `need` (up to 30,000 if allowed); returns it.
pub fn raise_nofile(need: u64) -> Result<u64, String> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `rl` is a valid rlimit for the call to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
        return Err(format!("getrlimit: {}", io::Error::last_os_error()));
    }
    let want = need.max(30_000).min(rl.rlim_max);
    if want > rl.rlim_cur {
        let new = libc::rlimit {
            rlim_cur: want,
            rlim_max: rl.rlim_max,
        };
        // SAFETY: `new` is a valid rlimit.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) } != 0 {
            return Err(format!(
                "setrlimit(RLIMIT_NOFILE, {want}): {}",
                io::Error::last_os_error()
            ));
        }
        rl.rlim_cur = want;
    }
    if rl.rlim_cur < need {
        return Err(format!(
            "RLIMIT_NOFILE: the hard limit is {} but {need} descriptors are needed; raise it \
             (ulimit -Hn) or run with --quick",
            rl.rlim_max
        ));
    }
    Ok(rl.rlim_cur)
}

/// Fails with a clear message if `tool` is not on PATH (`hint` says where to get it).
pub fn which(tool: &str, hint: &str) -> Result<(), String> {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false);
    if found {
        Ok(())
    } else {
        Err(format!("`{tool}` is not on PATH ({hint})"))
    }
}

/// The fibr features `examples/bench_server.rs` is built with (its `/ws` route needs
/// `axum,tokio`; HTTPS, `tls`; the `fibr-ws` mode, `ws`). Every bench builds it alike, so one build serves them all.
pub const BENCH_SERVER_FEATURES: &str = "axum,tokio,tls,ws,http3";

/// The cargo arguments that build the bench server.
pub fn bench_server_build_args() -> [&'static str; 6] {
    [
        "build",
        "--release",
        "--example",
        "bench_server",
        "--features",
        BENCH_SERVER_FEATURES,
    ]
}

/// Builds the server in release mode (if `build`); returns its path.
pub fn find_server(build: bool) -> Result<PathBuf, String> {
    if build {
        cargo_build(&bench_server_build_args(), "the bench server")?;
    }
    examples_dir(&["bench_server"]).map(|d| d.join("bench_server"))
}

/// Runs `cargo ARGS` in the project (a release build of examples); `what` names it in errors.
pub fn cargo_build(args: &[&str], what: &str) -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .map_err(|e| format!("running cargo build: {e}"))?;
    if !status.success() {
        return Err(format!("cargo build of {what} failed: {status}"));
    }
    Ok(())
}

/// The release examples directory holding all of `names`. A bench runs from
/// <target>/release/deps; the examples are in <target>/release/examples.
pub fn examples_dir(names: &[&str]) -> Result<PathBuf, String> {
    let mut candidates = Vec::new();
    if let Some(release) = std::env::current_exe()
        .ok()
        .and_then(|p| Some(p.parent()?.parent()?.to_path_buf()))
    {
        candidates.push(release.join("examples"));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    candidates.push(target.join("release").join("examples"));
    candidates
        .into_iter()
        .find(|d| names.iter().all(|n| d.join(n).is_file()))
        .ok_or_else(|| format!("cannot find the built example(s) {}", names.join(", ")))
}
