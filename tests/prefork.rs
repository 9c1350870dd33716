//! Prefork over real processes. This binary is its own server: run with
//! `FIBR_PREFORK_PORT` set, it is a supervisor of `FIBR_PREFORK_WORKERS` children serving
//! an axum app (`/` answers the child's pid, `/slow` the same after 200 ms). Run as a
//! test, it starts itself that way and checks, with HTTP/1.1 clients over real sockets
//! and signals: a child killed with SIGKILL comes back while the others serve; a
//! graceful restart (SIGHUP) under load fails no request; SIGTERM stops everything.

mod common;

use common::prefork::Supervisor;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const WORKERS: usize = 3;

fn main() {
    if let Ok(port) = std::env::var("FIBR_PREFORK_PORT") {
        serve(port.parse().expect("a port"));
        return;
    }
    for (name, test) in [
        (
            "a_killed_child_comes_back_while_the_others_serve",
            a_killed_child_comes_back as fn(),
        ),
        (
            "a_graceful_restart_under_load_fails_no_request",
            a_graceful_restart_fails_nothing,
        ),
        (
            "sigterm_stops_the_supervisor_and_every_child",
            sigterm_stops_everything,
        ),
        (
            "a_killed_supervisor_takes_its_children_with_it",
            a_killed_supervisor_takes_its_children_with_it,
        ),
    ] {
        eprint!("test {name} ... ");
        test();
        eprintln!("ok");
    }
}

fn serve(port: u16) {
    let workers = std::env::var("FIBR_PREFORK_WORKERS")
        .ok()
        .and_then(|w| w.parse().ok())
        .unwrap_or(WORKERS);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let result = fibr::prefork::Prefork::new(workers)
        .listen(addr)
        .stop_timeout(Duration::from_secs(10))
        .run(|mut child| {
            let listener = child.take_listener(0)?;
            fibr::run(async move {
                use axum::routing::get;
                let pid = || async { std::process::id().to_string() };
                let slow = || async {
                    fibr::time::sleep(Duration::from_millis(200)).await;
                    std::process::id().to_string()
                };
                let app = axum::Router::new()
                    .route("/", get(pid))
                    .route("/slow", get(slow));
                let listener = fibr::net::TcpListener::from_std(listener)?;
                child.ready();
                fibr::serve(listener, app)
                    .with_graceful_shutdown(child.shutdown_signal())
                    .await
            })
        });
    if let Err(e) = result {
        eprintln!("prefork: {e}");
        std::process::exit(1);
    }
}

/// The supervisor of `WORKERS` children serving [`serve`]'s app.
fn start() -> Supervisor {
    Supervisor::start(WORKERS, &[], |addr| get(addr, "/").is_ok())
}

/// One request on its own connection; the body (a pid).
fn get(addr: SocketAddr, path: &str) -> std::io::Result<i32> {
    let s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    common::prefork::get_pid(s, path)
}

/// Clients requesting in a loop until stopped: (stop, ok count, failures).
struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicUsize>,
    threads: Vec<thread::JoinHandle<Vec<String>>>,
}

impl Load {
    fn start(addr: SocketAddr, clients: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicUsize::new(0));
        let threads = (0..clients)
            .map(|i| {
                let (stop, ok) = (stop.clone(), ok.clone());
                thread::spawn(move || {
                    let mut failures = Vec::new();
                    let path = if i % 2 == 0 { "/slow" } else { "/" };
                    while !stop.load(Ordering::Relaxed) {
                        match get(addr, path) {
                            Ok(_) => ok.fetch_add(1, Ordering::Relaxed),
                            Err(e) => {
                                failures.push(e.to_string());
                                0
                            }
                        };
                    }
                    failures
                })
            })
            .collect();
        Load { stop, ok, threads }
    }

    fn ok(&self) -> usize {
        self.ok.load(Ordering::Relaxed)
    }

    fn finish(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect()
    }
}

fn a_killed_child_comes_back() {
    let server = start();
    let before = server.children();
    let load = Load::start(server.addr, 4);
    let victim = *before.iter().next().unwrap();
    server.signal(victim, libc::SIGKILL);
    let after = server.wait_children("a replacement", |c| !c.contains(&victim));
    assert_eq!(
        before.intersection(&after).count(),
        WORKERS - 1,
        "the others live on"
    );
    let served = load.ok();
    thread::sleep(Duration::from_millis(300));
    assert!(load.ok() > served, "requests are served after the kill");
    // Only requests the killed child had taken may fail.
    let failures = load.finish();
    assert!(failures.len() <= 4, "{failures:?}");
}

fn a_graceful_restart_fails_nothing() {
    let server = start();
    let old = server.children();
    let load = Load::start(server.addr, 6);
    thread::sleep(Duration::from_millis(300));
    server.signal(server.pid(), libc::SIGHUP);
    let new = server.wait_children("the new generation", |c| c.is_disjoint(&old));
    thread::sleep(Duration::from_millis(300));
    let served = load.ok();
    let failures = load.finish();
    // The old children's queue is the new ones' too, and a connection an old child's
    // loop accepted before its listener went away is in its drain's count from then on
    // (through the registration, the worker queue, `on_open`), so it is served.
    assert!(
        failures.is_empty(),
        "{} failed of {served}: {failures:?}",
        failures.len()
    );
    for _ in 0..20 {
        assert!(
            new.contains(&get(server.addr, "/").unwrap()),
            "served by the new children"
        );
    }
}

fn a_killed_supervisor_takes_its_children_with_it() {
    let mut server = start();
    let children = server.children();
    server.proc.kill().unwrap();
    server.proc.wait().unwrap();
    let until = Instant::now() + Duration::from_secs(15);
    while children
        .iter()
        .any(|c| std::path::Path::new(&format!("/proc/{c}")).exists())
    {
        assert!(Instant::now() < until, "children outlive their supervisor");
        thread::sleep(Duration::from_millis(20));
    }
}

fn sigterm_stops_everything() {
    let mut server = start();
    let children = server.children();
    server.signal(server.pid(), libc::SIGTERM);
    let until = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = server.proc.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < until, "the supervisor did not stop");
        thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    for c in children {
        assert!(
            !std::path::Path::new(&format!("/proc/{c}")).exists(),
            "child {c} lives on"
        );
    }
    assert!(get(server.addr, "/").is_err(), "nothing listens any more");
}
