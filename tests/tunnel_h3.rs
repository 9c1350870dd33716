//! CONNECT tunnels over HTTP/3 (RFC 9114 §4.4) in a handler (`fibr::http::tunnel`),
//! against aioquic's HTTP/3 layer: the same axum app as `tests/tunnel.rs` pipes each
//! tunnel to a local TCP origin. Bytes both ways, half-close each way, a reset from the
//! client, a reset from the origin (H3_CONNECT_ERROR), a refused target, and QUIC flow
//! control holding a client whose tunnel does not read.

mod common;

use common::h3::{h3_serve_app, https_get, LIMIT};
use common::pki::Pki;
use common::tunnel::{tunnel_app, Origins, HOLD_AUTHORITY, PY_H3_CONNECT};
use std::net::SocketAddr;
use std::time::Duration;

fn start(pki: &Pki) -> SocketAddr {
    let (addr, serve) = h3_serve_app(pki, tunnel_app());
    drop(fibr::spawn(async move {
        if let Err(e) = serve.await {
            eprintln!("serve failed: {e}");
        }
    }));
    addr
}

#[test]
fn aioquic_connects_through_a_handler_tunnel() {
    common::bounded(LIMIT * 2, || {
        common::require_python("aioquic");
        let pki = Pki::new();
        let origins = Origins::start();
        let addr = start(&pki);
        assert!(https_get(&pki, addr).starts_with("HTTP/1.1"));
        let mut args = vec![
            addr.port().to_string(),
            pki.ca_pem.path().display().to_string(),
        ];
        args.extend(origins.args());
        args.push(HOLD_AUTHORITY.to_string());
        assert_eq!(
            common::python_lines(PY_H3_CONNECT, &args),
            [
                "echo",
                "half-close",
                "reset",
                "connect-error",
                "refused",
                "flow-control",
                "dropped"
            ]
        );
        assert!(common::wait_until(Duration::from_secs(5), || {
            let seen = origins.seen.lock().unwrap();
            seen.after_half_close == b"late data" && seen.echo_ended == 2
        }));
    });
}
