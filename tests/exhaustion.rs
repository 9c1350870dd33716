//! Resource exhaustion and lifecycle. This file is its own test binary, so its own
//! process: it lowers RLIMIT_NOFILE, and it counts the process's threads and descriptors.
//! Its tests run one at a time (`GATE`), each under a watchdog.
//!
//! - EMFILE on accept: with every descriptor taken, pending connections wait in the
//!   backlog while the engine backs off (it must not spin a core: process CPU time from
//!   /proc/self/stat); connections accepted before keep being served; once descriptors
//!   are freed, the pending ones are accepted and answered.
//! - An engine with an HTTP binding started, used and shut down 20 times in one process
//!   leaves threads (/proc/self/task), descriptors (/proc/self/fd) and RSS where they were.

mod common;

use axum::routing;
use axum::Router;
use fibr::{Binding, Config, Engine};
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use common::{
    bounded, fd_count, nofile, rss, set_nofile, settle, thread_count, Client, RestoreNofile,
    IO_TIMEOUT,
};

static GATE: Mutex<()> = Mutex::new(());

fn gate() -> MutexGuard<'static, ()> {
    GATE.lock().unwrap_or_else(|e| e.into_inner())
}

fn router() -> Router {
    Router::new().route("/", routing::get(|| async { "ok" }))
}

/// An engine serving `router()` over HTTP on 127.0.0.1:0.
fn engine() -> (Engine, SocketAddr) {
    let engine = Engine::new(
        Config::default(),
        [Binding::tcp(
            "127.0.0.1:0",
            fibr::http::Server::new(router()),
        )],
    )
    .expect("start the engine");
    let addr = engine.binding_addrs(0)[0];
    (engine, addr)
}

/// GET / on a keep-alive connection: a 200 with a Content-Length; returns the body.
fn get(c: &mut Client) -> String {
    let r = c.get("/");
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.header("content-length").is_some(), "{r:?}");
    r.text()
}

/// utime + stime of the whole process, in clock ticks, read from an already open
/// /proc/self/stat (opening it needs a descriptor, and there are none to spare).
fn cpu_ticks(stat: &mut File) -> u64 {
    let mut s = String::new();
    stat.rewind().unwrap();
    stat.read_to_string(&mut s).unwrap();
    // Fields after the command name (which may contain spaces): state is field 3, utime
    // and stime are fields 14 and 15.
    let rest = &s[s.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// With every descriptor taken, accept fails with EMFILE: the engine must back off
/// (under 30% of a core while 16 connections wait), keep serving the connections it
/// has, and accept and answer the waiting ones once descriptors are free again.
#[test]
fn emfile_on_accept_backs_off_and_recovers() {
    let _g = gate();
    bounded(Duration::from_secs(20), || {
        const PENDING: usize = 16;
        let (engine, addr) = engine();
        let mut old = Client::connect(addr);
        assert_eq!(get(&mut old), "ok");
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let mut stat = File::open("/proc/self/stat").unwrap();

        let orig = nofile();
        let _restore = RestoreNofile(orig);
        let open = fd_count() as u64;
        set_nofile(libc::rlimit {
            rlim_cur: open + 64,
            rlim_max: orig.rlim_max,
        });
        // The clients' sockets are made first (connecting needs no new descriptor), then
        // every descriptor left is taken, then the clients connect: the server cannot
        // accept them.
        let sockets: Vec<socket2::Socket> = (0..PENDING)
            .map(|_| {
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap()
            })
            .collect();
        let mut hog = Vec::new();
        loop {
            match File::open("/dev/null") {
                Ok(f) => hog.push(f),
                Err(e) if e.raw_os_error() == Some(libc::EMFILE) => break,
                Err(e) => panic!("open /dev/null: {e}"),
            }
        }
        let mut pending: Vec<TcpStream> = sockets
            .into_iter()
            .map(|sock| {
                sock.connect_timeout(&addr.into(), IO_TIMEOUT).unwrap();
                let s: TcpStream = sock.into();
                s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
                s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
                s
            })
            .collect();
        for s in pending.iter_mut() {
            s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                .unwrap();
        }
        // Let the engine hit EMFILE and settle into its back-off, then measure.
        thread::sleep(Duration::from_millis(300));
        let (c0, t0) = (cpu_ticks(&mut stat), Instant::now());
        thread::sleep(Duration::from_secs(1));
        let (c1, t1) = (cpu_ticks(&mut stat), Instant::now());
        let share = (c1 - c0) as f64 / hz / (t1 - t0).as_secs_f64();

        // A connection accepted before is still served.
        assert_eq!(get(&mut old), "ok");
        // The waiting ones have had no answer.
        for s in pending.iter() {
            s.set_nonblocking(true).unwrap();
            let mut b = [0u8; 1];
            match s.peek(&mut b) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                other => panic!("a client got {other:?} while the server had no fd"),
            }
            s.set_nonblocking(false).unwrap();
        }

        drop(hog);
        let t = Instant::now();
        for mut s in pending {
            let mut out = String::new();
            s.read_to_string(&mut out).expect("answer after recovery");
            assert!(
                out.starts_with("HTTP/1.1 200 OK") && out.ends_with("ok"),
                "{out}"
            );
        }
        let recovered = t.elapsed();
        eprintln!(
            "EMFILE: {PENDING} connections pending with no fd left: process CPU {:.1}% of a \
             core over {:?}; all answered {recovered:?} after fds were freed",
            share * 100.0,
            t1 - t0
        );
        assert!(
            share < 0.30,
            "{:.0}% of a core while accept fails with EMFILE",
            share * 100.0
        );
        assert!(
            recovered < Duration::from_secs(2),
            "recovered in {recovered:?}"
        );
        assert_eq!(get(&mut old), "ok");
        drop(old);
        engine.shutdown(Duration::from_millis(100));
    });
}

/// One engine lifetime: start with an HTTP binding, a few requests on two connections,
/// shutdown with one connection still open (it must be closed).
fn cycle() {
    let (engine, addr) = engine();
    let mut a = Client::connect(addr);
    for _ in 0..3 {
        assert_eq!(get(&mut a), "ok");
    }
    let mut idle = Client::connect(addr);
    assert_eq!(get(&mut idle), "ok");
    drop(a);
    engine.shutdown(Duration::from_millis(50));
    let mut rest = Vec::new();
    match idle.s.read_to_end(&mut rest) {
        Ok(_) => assert!(rest.is_empty(), "{rest:?}"),
        Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{e}"),
    }
    drop(engine);
}

/// 20 engine lifetimes in one process: threads and fds return to the baseline after each
/// shutdown, and RSS does not creep.
#[test]
fn engine_start_stop_20_times_leaks_nothing() {
    let _g = gate();
    bounded(Duration::from_secs(30), || {
        let (threads0, fds0) = (thread_count(), fd_count());
        // Process-wide state made once (fibr's background tokio runtime with feature
        // `tokio`, the buffer pool's thread-local lists) is not a per-engine leak: the
        // baseline is taken after one warm-up lifetime.
        cycle();
        let (threads1, fds1) = settle(threads0, fds0);
        let rss1 = rss();
        let t = Instant::now();
        let mut worst = (0, 0);
        for _ in 0..20 {
            cycle();
            let (th, fd) = settle(threads1, fds1);
            worst = (worst.0.max(th), worst.1.max(fd));
        }
        let took = t.elapsed();
        let (threads2, fds2) = settle(threads1, fds1);
        let rss2 = rss();
        eprintln!(
            "start/stop: threads {threads0} (before any engine) / {threads1} (after one) -> \
             {threads2} after 20 more (worst right after a shutdown: {}); fds {fds0} / \
             {fds1} -> {fds2} (worst {}); RSS {} KiB -> {} KiB; 20 lifetimes in {took:?}",
            worst.0,
            worst.1,
            rss1 / 1024,
            rss2 / 1024
        );
        assert!(threads2 <= threads1, "threads {threads1} -> {threads2}");
        assert!(fds2 <= fds1, "fds {fds1} -> {fds2}");
        assert!(
            worst.0 <= threads1 && worst.1 <= fds1,
            "leaked within a cycle"
        );
        assert!(
            rss2 < rss1 + (4 << 20),
            "RSS {} KiB -> {} KiB",
            rss1 / 1024,
            rss2 / 1024
        );
    });
}
