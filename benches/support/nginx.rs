//! nginx as a benchmark peer: started by the bench from a config it writes (Debian's
//! nginx, one worker process, its own prefix so it touches nothing of the system's),
//! pinned like the other servers, stopped when dropped. Its CPU and memory are its master's
//! and its worker's together. Each bench includes this file and uses part of it.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::os_support;
use super::server_support::{pinned_command, process_cpu_us, ProcStatus};

pub struct Nginx {
    master: Child,
    pub addr: SocketAddr,
}

impl Nginx {
    /// nginx on a free port of 127.0.0.1, with its files under `prefix` and `http` (given
    /// the listening address) as the body of its `http {}` block, pinned to `cpu`.
    pub fn start(
        cpu: usize,
        prefix: &Path,
        http: impl FnOnce(SocketAddr) -> String,
    ) -> Result<Nginx, String> {
        os_support::which("nginx", "apt-get install nginx; scripts/peers installs it")?;
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let tmp = prefix.join("tmp");
        std::fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
        let (p, t) = (prefix.display(), tmp.display());
        let conf = format!(
            "worker_processes 1;\n\
             worker_rlimit_nofile 65536;\n\
             error_log {p}/error.log;\n\
             pid {p}/nginx.pid;\n\
             events {{ worker_connections 32768; }}\n\
             http {{\n\
               access_log off;\n\
               client_body_temp_path {t}/body; proxy_temp_path {t}/proxy;\n\
               fastcgi_temp_path {t}/fastcgi; uwsgi_temp_path {t}/uwsgi; scgi_temp_path {t}/scgi;\n\
               {}\n\
             }}\n",
            http(addr)
        );
        let conf_path = prefix.join("nginx.conf");
        std::fs::write(&conf_path, conf).map_err(|e| e.to_string())?;
        let mut cmd = pinned_command(cpu, "nginx");
        cmd.arg("-p")
            .arg(prefix)
            .arg("-c")
            .arg(&conf_path)
            .args(["-g", "daemon off;"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        let master = cmd.spawn().map_err(|e| format!("starting nginx: {e}"))?;
        let nginx = Nginx { master, addr };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(addr).is_err() {
            if Instant::now() > deadline {
                return Err("nginx did not start listening in time".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(nginx)
    }

    /// The master's and the workers' pids.
    fn pids(&self) -> Vec<u32> {
        let master = self.master.id();
        let mut pids = vec![master];
        if let Ok(dir) = std::fs::read_dir("/proc") {
            pids.extend(
                dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                    .filter(|p| parent(*p) == Some(master)),
            );
        }
        pids
    }

    /// CPU µs so far, master and workers.
    pub fn cpu_us(&self) -> Result<f64, String> {
        self.pids().into_iter().map(process_cpu_us).sum()
    }

    /// Resident KiB, master and workers.
    pub fn rss_kib(&self) -> Result<u64, String> {
        self.pids()
            .into_iter()
            .map(|p| ProcStatus::read(p).map(|s| s.rss_kib))
            .sum()
    }
}

/// Process `pid`'s parent.
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM: nginx's fast shutdown takes its workers with it.
        // SAFETY: kill takes a pid and a signal number.
        unsafe { libc::kill(self.master.id() as i32, libc::SIGTERM) };
        let _ = self.master.wait();
    }
}
