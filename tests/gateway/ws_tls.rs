//! WebSocket through the gateway to upstreams over TLS and HTTP/3: fibr's echo with
//! permessage-deflate behind, served over TLS (h2 with extended CONNECT, h2 without it, or
//! HTTP/1.1 alone) with HTTP/3 on the same port; every client side in front: Python's
//! `websockets` over `ws://` (hyper's upgrade) and `wss://` (fibr's own HTTP/1.1 over
//! TLS), and fibr's client by extended CONNECT over h2c and over HTTP/3. Each pair echoes
//! byte for byte with permessage-deflate agreed end to end, and the answer's `Via` names
//! the way the gateway went upstream: `2 fibr`, an extended CONNECT over h2; `3 fibr`, over
//! HTTP/3; `1.1 fibr`, an HTTP/1.1 Upgrade over TLS (where the upstream's connection
//! cannot carry an extended CONNECT).

use super::common::bounded;
use super::common::h3::h3_serve_app;
use super::common::pki::Pki;
use super::tls::{h3_client, tls_gateway_with};
use super::ws::{fibr_echo, fibr_ws_app, python_echo_over, UPGRADE};
use super::{curl, gateway, up, url, Config, LIMIT};
use fibr::http::{Http2Config, ServerConfig};
use fibr::net::TcpListener;
use std::future::IntoFuture;
use std::sync::Arc;

/// fibr's echo over TLS and HTTP/3 on one port, with `cfg`.
fn upstream(pki: &Pki, cfg: ServerConfig) -> u16 {
    let (addr, serve) = h3_serve_app(pki, fibr_ws_app());
    drop(fibr::spawn(serve.with_config(cfg).into_future()));
    addr.port()
}

/// fibr's echo over TLS whose ALPN offers `http/1.1` alone.
fn http1_upstream(pki: &Pki) -> u16 {
    let mut tls = pki.server_config(&pki.server(&["localhost"]));
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let port = listener.local_addr().unwrap().port();
    let serve = fibr::serve(listener, fibr_ws_app()).with_tls(Arc::new(tls));
    drop(fibr::spawn(serve.into_future()));
    port
}

/// Every client side through a gateway to `upstream` (a URL): each answer's `Via` is
/// `via`, and permessage-deflate was agreed.
fn every_client_to(pki: &Pki, upstream: &str, via: &str) {
    let config = Config::default().with_tls(Arc::new(pki.client_config()));
    let plain = gateway(vec![up(upstream)], config.clone());
    let tls = tls_gateway_with(pki, up(upstream), config).port();
    let ca = pki.ca_pem.path();
    let wss = format!("wss://localhost:{tls}/ws");
    for (client, url, ca) in [
        ("ws://", format!("ws://{plain}/ws"), None),
        ("wss://", wss.clone(), Some(ca)),
    ] {
        let (seen, extensions) = python_echo_over(&url, ca);
        assert_eq!(seen, via, "{client} to {upstream}");
        assert!(
            extensions.starts_with("permessage-deflate"),
            "{client} to {upstream}: {extensions}"
        );
    }
    let h2c = fibr::client::Client::builder()
        .http2_prior_knowledge()
        .build();
    let h2 = fibr_echo(&h2c, &format!("ws://{plain}/ws"));
    let h3 = fibr_echo(&h3_client(pki), &wss);
    for (client, res) in [("h2c", h2), ("h3", h3)] {
        let headers = res.headers();
        assert_eq!(headers["via"], via, "{client} to {upstream}");
        assert!(
            headers.contains_key("sec-websocket-extensions"),
            "{client} to {upstream}: {headers:?}"
        );
    }
}

#[test]
fn websocket_to_an_https_upstream_by_extended_connect_over_h2() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let port = upstream(&pki, ServerConfig::default());
        every_client_to(&pki, &format!("https://localhost:{port}"), "2 fibr");
    });
}

#[test]
fn websocket_to_an_h3_upstream_by_extended_connect_over_http3() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let port = upstream(&pki, ServerConfig::default());
        every_client_to(&pki, &format!("h3://localhost:{port}"), "3 fibr");
    });
}

/// An upstream whose h2 does not allow extended CONNECT, and one that speaks HTTP/1.1
/// alone over TLS: an `Upgrade` over a TLS connection of the gateway's own.
#[test]
fn websocket_to_https_upstreams_without_extended_connect_goes_as_an_http1_upgrade() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let h2 = Http2Config::default().with_extended_connect(false);
        let no_extended = upstream(&pki, ServerConfig::default().with_http2(h2));
        every_client_to(
            &pki,
            &format!("https://localhost:{no_extended}"),
            "1.1 fibr",
        );
        let http1 = http1_upstream(&pki);
        every_client_to(&pki, &format!("https://localhost:{http1}"), "1.1 fibr");
    });
}

/// An HTTP/2 or HTTP/3 upstream's refusal reaches an HTTP/1.1 client as its answer; an
/// upgrade other than WebSocket has no way to an HTTP/3 upstream (501).
#[test]
fn refusals_of_h2_and_h3_upstreams_come_back_as_their_answer() {
    bounded(LIMIT, || {
        let pki = Pki::new();
        let port = upstream(&pki, ServerConfig::default());
        let config = Config::default().with_tls(Arc::new(pki.client_config()));
        for scheme in ["https", "h3"] {
            let upstream = up(&format!("{scheme}://localhost:{port}"));
            let gw = gateway(vec![upstream], config.clone());
            let missing = url(gw, "/missing");
            let mut args = UPGRADE.to_vec();
            args.push(&missing);
            let r = curl(&args);
            assert_eq!(r.status, 404, "{scheme}: {r:?}");
        }
        let gw = gateway(vec![up(&format!("h3://localhost:{port}"))], config);
        let ws = url(gw, "/ws");
        let r = curl(&["-H", "Connection: Upgrade", "-H", "Upgrade: foo", &ws]);
        assert_eq!(r.status, 501, "{r:?}");
    });
}
