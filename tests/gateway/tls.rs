//! Upstreams over TLS: `https://` (HTTP/2 by ALPN) and `h3://` (HTTP/3 by prior
//! knowledge), a fibr server with a certificate from a test CA.

use super::common::bounded;
use super::common::h3::{pattern, start};
use super::common::pki::Pki;
use super::{curl, gateway, up, url, Config};
use axum::Router;
use fibr::client::Client;
use fibr::gateway::Gateway;
use fibr::net::TcpListener;
use http::Version;
use http_body_util::BodyExt;
use std::future::IntoFuture;
use std::sync::Arc;

#[test]
fn https_and_h3_upstreams() {
    bounded(super::LIMIT, || {
        let pki = Pki::new();
        let upstream = start(&pki);
        let config = Config::default().with_tls(Arc::new(pki.client_config()));
        for (scheme, via) in [("https", "2 fibr"), ("h3", "3 fibr")] {
            let target = up(&format!("{scheme}://localhost:{}", upstream.port()));
            let gw = gateway(vec![target], config.clone());
            let r = curl(&[&url(gw, "/")]);
            assert_eq!(
                (r.status, r.text().as_str()),
                (200, "hello over h3"),
                "{scheme}: {r:?}"
            );
            // The response's Via names the protocol the upstream answered in.
            assert_eq!(r.header("via"), Some(via), "{scheme}: {r:?}");
            let len = 3 << 20;
            let r = curl(&[&url(gw, &format!("/pattern/{len}"))]);
            assert_eq!(r.exit, 0, "{scheme}: {r:?}");
            assert!(
                r.body == pattern(0..len),
                "{scheme}: {} bytes",
                r.body.len()
            );
        }
        // Without the test CA the upstream's certificate is refused: 502.
        let target = up(&format!("https://localhost:{}", upstream.port()));
        let gw = gateway(vec![target], Config::default());
        let r = curl(&[&url(gw, "/")]);
        assert_eq!(r.status, 502, "{r:?}");
    });
}

/// Clients over TLS: h2 by ALPN (curl) and HTTP/3 (fibr's client) into the gateway, an
/// HTTP/1.1 upstream behind; the upstream hears `https` and the protocol the client used.
#[test]
fn clients_over_https_and_h3() {
    bounded(super::LIMIT, || {
        let pki = Pki::new();
        let (upstream, _) = super::fibr_upstream("plain");
        let addr = tls_gateway(&pki, super::http(upstream));
        let base = format!("https://localhost:{}", addr.port());
        let resolve = format!("localhost:{}:127.0.0.1", addr.port());
        let r = curl(&[
            "--http2",
            "--cacert",
            pki.ca_pem.path().to_str().unwrap(),
            "--resolve",
            &resolve,
            &format!("{base}/echo"),
        ]);
        assert_eq!((r.exit, r.status), (0, 200), "{r:?}");
        assert!(r.text().contains("via: 2 fibr\n"), "{}", r.text());
        assert!(
            r.text().contains("x-forwarded-proto: https\n"),
            "{}",
            r.text()
        );
        let text = h3_get(&pki, &format!("{base}/echo"));
        assert!(text.contains("via: 3 fibr\n"), "{text}");
        assert!(text.contains("x-forwarded-proto: https\n"), "{text}");
    });
}

/// A gateway to `upstream` served over TLS (h2 and HTTP/1.1 by ALPN) and HTTP/3 on the
/// same port, with a certificate for `localhost` from `pki`.
fn tls_gateway(pki: &Pki, upstream: fibr::gateway::Upstream) -> std::net::SocketAddr {
    tls_gateway_with(pki, upstream, Config::default())
}

/// [`tls_gateway`] with `config`.
pub(super) fn tls_gateway_with(
    pki: &Pki,
    upstream: fibr::gateway::Upstream,
    config: Config,
) -> std::net::SocketAddr {
    let gw = Gateway::new([upstream], config).unwrap();
    let app = Router::new().fallback_service(gw);
    let tls = Arc::new(pki.server_config(&pki.server(&["localhost"])));
    (0..100)
        .find_map(|_| {
            let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).expect("bind");
            let addr = listener.local_addr().unwrap();
            let serve = fibr::serve(listener, app.clone())
                .with_tls(tls.clone())
                .with_http3();
            let both = serve.http3_local_addr().is_ok_and(|udp| udp == addr);
            both.then(|| {
                drop(fibr::spawn(serve.into_future()));
                addr
            })
        })
        .expect("a port free on both TCP and UDP")
}

/// WebSocket from an HTTP/1.1 client over TLS (Python's `websockets`, wss): fibr's own
/// HTTP/1.1 serves the connection, the gateway claims its switch on the upstream's `101`.
#[cfg(feature = "tunnel")]
#[test]
fn websocket_over_tls_http1() {
    bounded(super::LIMIT, || {
        let pki = Pki::new();
        let (upstream, _rt) = super::axum_upstream_of(super::ws::echo_app());
        let addr = tls_gateway(&pki, super::http(upstream));
        let url = format!("wss://localhost:{}/ws", addr.port());
        super::ws::python_echo_over(&url, Some(pki.ca_pem.path()));
    });
}

/// RFC 9220: fibr's WebSocket client over HTTP/3 sends an extended CONNECT to the
/// gateway, which opens the WebSocket upstream over HTTP/1.1 (axum's echo) and joins the
/// two, as it does for HTTP/2's.
#[cfg(feature = "ws")]
#[test]
fn websocket_over_h3_extended_connect() {
    bounded(super::LIMIT, || {
        let pki = Pki::new();
        let (upstream, _rt) = super::axum_upstream_of(super::ws::echo_app());
        let addr = tls_gateway(&pki, super::http(upstream));
        h3_websocket_echo(&pki, &format!("wss://localhost:{}/ws", addr.port()));
    });
}

/// A GET over HTTP/3 (fibr's client, trusting `pki`'s CA): the body as text.
pub(super) fn h3_get(pki: &Pki, url: &str) -> String {
    let client = h3_client(pki);
    let url = url.to_owned();
    let body = fibr::run(async move {
        let res = client.get(url).await.unwrap();
        assert_eq!(res.version(), Version::HTTP_3);
        res.into_body().collect().await.unwrap().to_bytes()
    });
    String::from_utf8_lossy(&body).into_owned()
}

/// fibr's WebSocket client over HTTP/3 against a gateway at `url` in front of an
/// HTTP/1.1 echo (`super::ws::fibr_echo`).
#[cfg(feature = "ws")]
pub(super) fn h3_websocket_echo(pki: &Pki, url: &str) {
    let res = super::ws::fibr_echo(&h3_client(pki), url);
    assert_eq!(res.version(), Version::HTTP_3);
    assert_eq!(res.headers()["via"], "1.1 fibr");
}

/// fibr's client over HTTP/3 only, trusting `pki`'s CA.
pub(super) fn h3_client(pki: &Pki) -> Client<fibr::client::HttpsConnector> {
    Client::builder()
        .tls_config(Arc::new(pki.client_config()))
        .http3_prior_knowledge()
        .build_https()
}
