//! TLS session tickets across prefork children, over real processes. Run with
//! `FIBR_PREFORK_PORT` set, this binary is a supervisor of `WORKERS` children serving
//! HTTPS (`/` answers the child's pid) with a `ServerConfig` that names no ticketer, so
//! `serve` takes the children's shared one, whose period (key rotation and ticket
//! lifetime) is `PERIOD` here. Run as a test, it starts itself that way and checks with
//! rustls clients, on TLS 1.3 and 1.2, that a ticket one child issued resumes a session on
//! another after the keys rotated, and on the next generation after a graceful restart.

mod common;

use common::pki::{provider, Pki};
use common::prefork::Supervisor;
use fibr::tls::rustls;
use rustls::client::Resumption;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{
    ClientConfig, ClientConnection, HandshakeKind, StreamOwned, SupportedProtocolVersion,
};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const WORKERS: usize = 3;
/// Seconds: short, so that a test crosses a rotation.
const PERIOD: u64 = 3;
/// Sessions each check starts (one client config, so one ticket store, each).
const SAMPLES: usize = 16;

fn main() {
    if let Ok(port) = std::env::var("FIBR_PREFORK_PORT") {
        serve(port.parse().expect("a port"));
        return;
    }
    let pki = Pki::new();
    let leaf = pki.server(&["localhost"]);
    let envs = [
        ("FIBR_TLS_CERT", leaf.cert_pem.display().to_string()),
        ("FIBR_TLS_KEY", leaf.key_pem.display().to_string()),
    ];
    let server = Supervisor::start(WORKERS, &envs, |addr| {
        get(addr, &client(&pki, &rustls::version::TLS13, false)).is_ok()
    });
    for (name, test) in [
        (
            "a_ticket_from_one_child_resumes_on_another_after_a_key_rotation",
            a_ticket_resumes_on_another_child_after_a_rotation as fn(&Supervisor, &Pki),
        ),
        (
            "tickets_resume_on_the_next_generation_after_a_graceful_restart",
            tickets_resume_on_the_next_generation,
        ),
    ] {
        eprint!("test {name} ... ");
        test(&server, &pki);
        eprintln!("ok");
    }
}

fn serve(port: u16) {
    let pem = |var| std::env::var(var).expect("set by the test");
    let chain: Vec<_> = CertificateDer::pem_file_iter(pem("FIBR_TLS_CERT"))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(pem("FIBR_TLS_KEY")).unwrap();
    let tickets = fibr::tls::SharedTicketer::new()
        .unwrap()
        .with_period(Duration::from_secs(PERIOD));
    let result = fibr::prefork::Prefork::new(WORKERS)
        .listen(SocketAddr::from(([127, 0, 0, 1], port)))
        .stop_timeout(Duration::from_secs(10))
        .session_tickets(tickets)
        .run(|mut child| {
            let listener = child.take_listener(0)?;
            let config = rustls::ServerConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(chain.clone(), key.clone_key())
                .unwrap();
            assert!(!config.ticketer.enabled(), "serve is to pick the ticketer");
            fibr::run(async move {
                let pid = || async { std::process::id().to_string() };
                let app = axum::Router::new().route("/", axum::routing::get(pid));
                let listener = fibr::net::TcpListener::from_std(listener)?;
                child.ready();
                fibr::serve(listener, app)
                    .with_tls(Arc::new(config))
                    .with_graceful_shutdown(child.shutdown_signal())
                    .await
            })
        });
    if let Err(e) = result {
        eprintln!("prefork: {e}");
        std::process::exit(1);
    }
}

/// A client of `version` trusting the test CA, with a ticket store of its own (or none).
fn client(
    pki: &Pki,
    version: &'static SupportedProtocolVersion,
    resume: bool,
) -> Arc<ClientConfig> {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[version])
        .unwrap()
        .with_root_certificates(pki.roots())
        .with_no_client_auth();
    config.resumption = if resume {
        Resumption::in_memory_sessions(8)
    } else {
        Resumption::disabled()
    };
    Arc::new(config)
}

/// One GET over a new TLS connection (read to its close_notify, so a TLS 1.3 ticket sent
/// after the handshake is stored): the pid that answered, and the handshake's kind.
fn get(addr: SocketAddr, config: &Arc<ClientConfig>) -> std::io::Result<(i32, HandshakeKind)> {
    let tcp = TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    let name = ServerName::try_from("localhost").unwrap();
    let tls = ClientConnection::new(config.clone(), name).map_err(std::io::Error::other)?;
    let mut s = StreamOwned::new(tls, tcp);
    let pid = common::prefork::get_pid(&mut s, "/")?;
    Ok((pid, s.conn.handshake_kind().expect("handshake done")))
}

/// The wall clock in seconds (what the server's periods are counted on).
fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn period(t: f64) -> u64 {
    t as u64 / PERIOD
}

/// Sleeps until the clock is `at` seconds into a period (the next such instant).
fn sleep_until_into_period(at: f64) {
    let t = now();
    let start = (period(t) * PERIOD) as f64;
    let mut target = start + at;
    if target <= t {
        target += PERIOD as f64;
    }
    thread::sleep(Duration::from_secs_f64(target - t));
}

/// A session one child made (a full handshake): its client, which holds the ticket.
struct Issued {
    config: Arc<ClientConfig>,
    pid: i32,
    /// When the handshake began and when the response was read.
    at: (f64, f64),
}

fn issue(addr: SocketAddr, pki: &Pki, version: &'static SupportedProtocolVersion) -> Issued {
    let config = client(pki, version, true);
    let begun = now();
    let (pid, kind) = get(addr, &config).unwrap();
    assert_eq!(kind, HandshakeKind::Full, "a new client's first handshake");
    Issued {
        config,
        pid,
        at: (begun, now()),
    }
}

/// A new connection with an issued session's client.
struct Resumed {
    pid: i32,
    resumed: bool,
    /// Whether the ticket was sealed in the period before the one it was offered in.
    across_rotation: bool,
}

/// Resumes `issued` on a new connection; None if the timing makes the outcome no proof
/// either way (the issue or the use straddled a period's end, or the ticket is no longer
/// sure to be valid: older than its lifetime, or sealed two periods back).
fn resume(addr: SocketAddr, issued: &Issued) -> Option<Resumed> {
    let begun = now();
    let (pid, kind) = get(addr, &issued.config).unwrap();
    let done = now();
    let sealed = period(issued.at.0);
    let offered = period(begun);
    let clean = sealed == period(issued.at.1)
        && offered == period(done)
        && (offered == sealed || offered == sealed + 1)
        // The client stops offering a ticket past its lifetime (whole seconds).
        && done as u64 <= issued.at.0 as u64 + PERIOD;
    clean.then_some(Resumed {
        pid,
        resumed: kind == HandshakeKind::Resumed,
        across_rotation: offered == sealed + 1,
    })
}

fn a_ticket_resumes_on_another_child_after_a_rotation(server: &Supervisor, pki: &Pki) {
    for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
        // Sessions made late in a period, resumed early in the next: the tickets were
        // sealed with the key before the rotation and are opened with the one after it.
        sleep_until_into_period(1.5);
        let issued: Vec<Issued> = (0..SAMPLES)
            .map(|_| issue(server.addr, pki, version))
            .collect();
        sleep_until_into_period(0.2);
        let mut proofs = 0;
        let mut clean = 0;
        for (i, s) in issued.iter().enumerate() {
            let Some(r) = resume(server.addr, s) else {
                continue;
            };
            clean += 1;
            assert!(
                r.resumed,
                "{version:?} session {i} (child {}) not resumed on {}",
                s.pid, r.pid
            );
            if r.across_rotation && r.pid != s.pid {
                proofs += 1;
            }
        }
        eprint!("[{version:?}: {proofs} of {clean} resumed on another child after a rotation] ");
        assert!(
            clean >= SAMPLES / 2,
            "{version:?}: only {clean} samples were timed cleanly"
        );
        assert!(
            proofs > 0,
            "{version:?}: no session resumed on another child after a rotation"
        );
    }
}

fn tickets_resume_on_the_next_generation(server: &Supervisor, pki: &Pki) {
    let old = server.children();
    sleep_until_into_period(0.1);
    let versions = [&rustls::version::TLS13, &rustls::version::TLS12];
    let issued: Vec<(_, Issued)> = versions
        .iter()
        .flat_map(|v| (0..SAMPLES / 2).map(move |_| *v))
        .map(|v| (v, issue(server.addr, pki, v)))
        .collect();
    server.signal(server.pid(), libc::SIGHUP);
    let new = server.wait_children("the new generation", |c| c.is_disjoint(&old));
    let mut resumed = 0;
    for (version, s) in &issued {
        let Some(r) = resume(server.addr, s) else {
            continue;
        };
        assert!(new.contains(&r.pid), "served by the new generation");
        assert!(
            r.resumed,
            "{version:?}: a session of the old child {} not resumed",
            s.pid
        );
        resumed += 1;
    }
    eprint!("[{resumed} of {} resumed] ", issued.len());
    assert!(
        resumed > 0,
        "the restart took too long for any ticket to be tried"
    );
}
