//! HTTP/3 through loss and reordering: a UDP relay between a quinn + h3-quinn client and
//! fibr's server drops every 7th datagram and delays every 5th past the next, both ways,
//! and every request still completes intact.

mod common;

use common::h3::*;
use common::pki::Pki;
use http::StatusCode;
use std::time::Duration;

/// 50 GETs one after another, 20 at once, a 1 MiB body echoed back and a 3 MiB streamed
/// response, each checked byte for byte.
#[test]
fn requests_complete_intact_through_loss_and_reordering() {
    common::bounded(Duration::from_secs(120), || {
        let pki = Pki::new();
        let addr = start(&pki);
        assert!(https_get(&pki, addr).starts_with("HTTP/1.1 200"));
        let relay = Relay::start(
            addr,
            Faults {
                drop_every: 7,
                hold_every: 5,
            },
        );
        tokio_rt().block_on(async {
            let (endpoint, mut send) = h3_connect(&pki, relay.addr).await;
            for i in 0..50 {
                let got = exchange(&mut send, get_req("/"), b"", None).await;
                assert_eq!(got.status, StatusCode::OK, "GET {i}");
                assert_eq!(got.body, b"hello over h3", "GET {i}");
            }
            let at_once = (0..20).map(|i| {
                let mut send = send.clone();
                async move {
                    let got = exchange(&mut send, get_req("/"), b"", None).await;
                    assert_eq!(got.body, b"hello over h3", "concurrent GET {i}");
                }
            });
            futures_util::future::join_all(at_once).await;

            let body = pattern(0..1 << 20);
            let got = exchange(&mut send, post_to("/echo"), &body, None).await;
            assert_eq!(got.status, StatusCode::OK);
            assert!(
                got.body == body,
                "echo differs ({} bytes back)",
                got.body.len()
            );

            let len = 3 << 20;
            let got = exchange(&mut send, get_req(&format!("/pattern/{len}")), b"", None).await;
            assert_eq!(got.status, StatusCode::OK);
            assert_eq!(got.body.len(), len);
            assert!(got.body == pattern(0..len), "the streamed response differs");

            drop(send);
            endpoint.close(0u32.into(), b"done");
        });
        // The relay did get in the way, both ways.
        let s = &relay.stats;
        let (dropped, reordered) = (RelayStats::get(&s.dropped), RelayStats::get(&s.reordered));
        let forwarded = RelayStats::get(&s.forwarded);
        eprintln!("forwarded {forwarded:?}, dropped {dropped:?}, reordered {reordered:?}");
        assert!(
            dropped.iter().all(|&n| n > 0),
            "nothing dropped: {dropped:?}"
        );
        assert!(
            reordered.iter().all(|&n| n > 0),
            "nothing reordered: {reordered:?}"
        );
    });
}
