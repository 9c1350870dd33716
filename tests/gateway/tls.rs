//! Upstreams over TLS: `https://` (HTTP/2 by ALPN) and `h3://` (HTTP/3 by prior
//! knowledge), a fibr server with a certificate from a test CA.

use super::common::bounded;
use super::common::h3::{pattern, start};
use super::common::pki::Pki;
use super::{curl, gateway, up, url, Config};
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
