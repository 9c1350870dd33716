//! The proxy's HTTP side (`fibr::proxy::MakeForward`, what `examples/proxy` serves with
//! `TLS_CERT`/`TLS_KEY`) over HTTPS and HTTP/3 on one port: CONNECT tunnels to local
//! origins from Python's `h2` (TLS, ALPN h2), aioquic (HTTP/3) and a raw HTTP/1.1 client
//! over TLS; bytes both ways, half-close each way, resets both ways (CONNECT_ERROR from
//! a target that resets), a refused target (502), the client rules (403), and the
//! relay's idle timeout.

mod common;

use common::pki::Pki;
use common::tunnel::{Origins, PY_H2_CONNECT, PY_H3_CONNECT};
use fibr::net::TcpListener;
use fibr::proxy::{MakeForward, ProxyConfig, RelayConfig, Rules};
use fibr::tls::rustls;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// The proxy with `rules` over TLS and HTTP/3, on a port free on both TCP and UDP.
fn start(pki: &Pki, rules: Rules) -> SocketAddr {
    start_with(pki, ProxyConfig::new(rules))
}

fn start_with(pki: &Pki, config: ProxyConfig) -> SocketAddr {
    let leaf = pki.server(&["localhost"]);
    let tls = Arc::new(pki.server_config(&leaf));
    let make = MakeForward::new(Arc::new(config));
    for _ in 0..100 {
        let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).expect("bind");
        let addr = listener.local_addr().unwrap();
        let serve = fibr::serve(listener, make.clone())
            .with_tls(tls.clone())
            .with_http3();
        if serve.http3_local_addr().is_ok_and(|udp| udp == addr) {
            drop(fibr::spawn(async move {
                if let Err(e) = serve.await {
                    eprintln!("serve failed: {e}");
                }
            }));
            return addr;
        }
    }
    panic!("no port free on both TCP and UDP");
}

const STEPS: [&str; 5] = ["echo", "half-close", "reset", "connect-error", "refused"];

fn origins_saw_it_all(origins: &Origins) {
    assert!(common::wait_until(Duration::from_secs(5), || {
        let seen = origins.seen.lock().unwrap();
        seen.after_half_close == b"late data" && seen.echo_ended == 2
    }));
}

#[test]
fn python_h2_over_tls_tunnels_through_the_proxy() {
    common::bounded(LIMIT, || {
        common::require_python("h2");
        let pki = Pki::new();
        let origins = Origins::start();
        let addr = start(&pki, Rules::allow_all());
        let mut args = vec![addr.port().to_string()];
        args.extend(origins.args());
        args.extend(["-".into(), pki.ca_pem.path().display().to_string()]);
        assert_eq!(common::python_lines(PY_H2_CONNECT, &args), STEPS);
        origins_saw_it_all(&origins);
    });
}

#[test]
fn aioquic_tunnels_through_the_proxy_over_http3() {
    common::bounded(LIMIT, || {
        common::require_python("aioquic");
        let pki = Pki::new();
        let origins = Origins::start();
        let addr = start(&pki, Rules::allow_all());
        let mut args = vec![
            addr.port().to_string(),
            pki.ca_pem.path().display().to_string(),
        ];
        args.extend(origins.args());
        args.push("-".into());
        assert_eq!(common::python_lines(PY_H3_CONNECT, &args), STEPS);
        origins_saw_it_all(&origins);
    });
}

type TlsStream = rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>;

/// One HTTP/1.1 CONNECT over TLS: the response head, then (after a `2xx`) `ping` echoed
/// back through the tunnel, and the stream.
fn https_connect(pki: &Pki, addr: SocketAddr, target: SocketAddr) -> (String, Vec<u8>, TlsStream) {
    let config = Arc::new(pki.client_config());
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(config, name).unwrap();
    let sock = common::connect_within(addr, LIMIT);
    sock.set_read_timeout(Some(LIMIT)).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, sock);
    write!(
        tls,
        "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\nping"
    )
    .unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        tls.read_exact(&mut b).unwrap();
        head.push(b[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let mut back = vec![0u8; 4];
    if head.starts_with("HTTP/1.1 200") {
        tls.read_exact(&mut back).unwrap();
    } else {
        back.clear();
    }
    (head, back, tls)
}

#[test]
fn http1_connect_over_tls_is_tunneled_under_the_rules() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let origins = Origins::start();
        let open = start(&pki, Rules::allow_all());
        let (head, back, _) = https_connect(&pki, open, origins.echo);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_eq!(back, b"ping");
        // Loopback targets are refused by default rules, as is every client.
        let closed = start(&pki, Rules::new());
        let (head, _, _) = https_connect(&pki, closed, origins.echo);
        assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    });
}

#[test]
fn an_idle_tunnel_ends_at_the_relays_idle_timeout() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let origins = Origins::start();
        let relay = RelayConfig::default().with_idle_timeout(Duration::from_millis(300));
        let addr = start_with(&pki, ProxyConfig::new(Rules::allow_all()).with_relay(relay));
        let (head, back, mut tls) = https_connect(&pki, addr, origins.echo);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_eq!(back, b"ping");
        let started = std::time::Instant::now();
        let mut rest = Vec::new();
        let _ = tls.read_to_end(&mut rest);
        let waited = started.elapsed();
        assert!(rest.is_empty(), "{rest:?}");
        assert!(
            waited >= Duration::from_millis(200) && waited < Duration::from_secs(5),
            "closed after {waited:?}"
        );
    });
}
