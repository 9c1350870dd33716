//! OS helpers the benchmarks share: CPU pinning and descriptor limits.

use std::io;

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
