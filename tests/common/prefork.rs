//! A prefork supervisor in a process of its own, for the prefork tests: the test binary
//! started again with `FIBR_PREFORK_PORT` set (and whatever else it is given), which makes
//! it the server; its children are found in /proc.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::process::{Child, Command};
use std::thread;
use std::time::{Duration, Instant};

/// A supervisor on a free port; killed (SIGKILL, children too) when dropped.
pub struct Supervisor {
    pub proc: Child,
    pub addr: SocketAddr,
    workers: usize,
}

impl Supervisor {
    /// Starts this binary as a supervisor of `workers` children, with `envs` set; returns
    /// once they are all up and `serves(addr)` says so.
    pub fn start(
        workers: usize,
        envs: &[(&str, String)],
        serves: impl Fn(SocketAddr) -> bool,
    ) -> Supervisor {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let proc = Command::new(std::env::current_exe().unwrap())
            .env("FIBR_PREFORK_PORT", port.to_string())
            .envs(envs.iter().map(|(k, v)| (k, v)))
            .spawn()
            .unwrap();
        let server = Supervisor {
            proc,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            workers,
        };
        let until = Instant::now() + Duration::from_secs(20);
        while server.children().len() < workers || !serves(server.addr) {
            assert!(Instant::now() < until, "the server did not start");
            thread::sleep(Duration::from_millis(20));
        }
        server
    }

    pub fn pid(&self) -> i32 {
        self.proc.id() as i32
    }

    /// The supervisor's children now (from /proc).
    pub fn children(&self) -> BTreeSet<i32> {
        let mut out = BTreeSet::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // The fields after the command's closing parenthesis: state, ppid, ...
            let rest = &stat[stat.rfind(')').unwrap() + 2..];
            let mut fields = rest.split(' ');
            let state = fields.next();
            let ppid: i32 = fields.next().unwrap().parse().unwrap();
            if ppid == self.pid() && state != Some("Z") {
                out.insert(pid);
            }
        }
        out
    }

    pub fn signal(&self, pid: i32, sig: libc::c_int) {
        // SAFETY: sends a signal to a process this test started (or its child).
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    }

    /// Waits until the children are `workers` processes that `pred` accepts.
    pub fn wait_children(
        &self,
        what: &str,
        pred: impl Fn(&BTreeSet<i32>) -> bool,
    ) -> BTreeSet<i32> {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let now = self.children();
            if now.len() == self.workers && pred(&now) {
                return now;
            }
            assert!(Instant::now() < until, "{what}: children {now:?}");
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        // The supervisor is frozen first, so it cannot replace the children killed here.
        // SAFETY: as in `signal`.
        unsafe { libc::kill(self.pid(), libc::SIGSTOP) };
        for c in self.children() {
            // SAFETY: as in `signal`.
            unsafe { libc::kill(c, libc::SIGKILL) };
        }
        let _ = self.proc.kill();
        let _ = self.proc.wait();
    }
}

/// `GET path` on `s` with `Connection: close`, read to the end: the body of a 200 as a
/// number (the prefork tests' children answer with their pid).
pub fn get_pid(mut s: impl Read + Write, path: &str) -> std::io::Result<i32> {
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)?;
    let (head, body) = resp
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no response: {resp:?}")))?;
    if !head.starts_with("HTTP/1.1 200 ") {
        return Err(std::io::Error::other(head.to_owned()));
    }
    body.trim().parse().map_err(std::io::Error::other)
}
