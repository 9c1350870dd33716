//! Bodies streamed through: large ones in bounded memory, a slow client's backpressure,
//! and many requests at once (h2load).

use super::common::{self, bounded, require_tool};
use super::{curl, curl_with_input, fibr_upstream, gateway, http, url, Config, Feed, LIMIT};
use std::io::{Read, Write};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;

/// This process's resident memory, in bytes.
fn rss() -> usize {
    common::rss()
}

#[test]
fn large_bodies_stream_through_in_bounded_memory() {
    bounded(Duration::from_secs(180), || {
        const BIG: u64 = 512 << 20;
        let (fibr_up, _) = fibr_upstream("fibr");
        let gw = gateway(vec![http(fibr_up)], Config::default());
        // Warm up, then measure.
        curl(&[&url(gw, "/bytes/1000000"), "-o", "/dev/null"]);
        let before = rss();
        let sampler = common::RssSampler::start(Duration::from_millis(20));
        let r = curl(&[
            "-o",
            "/dev/null",
            "-w",
            "%{size_download}",
            &url(gw, &format!("/bytes/{BIG}")),
        ]);
        assert_eq!(r.exit, 0, "{r:?}");
        let input: Feed = Box::new(|w: &mut dyn Write| {
            let block = vec![b'u'; 1 << 20];
            for _ in 0..(BIG >> 20) {
                if w.write_all(&block).is_err() {
                    return;
                }
            }
        });
        let r = curl_with_input(&["-T", "-", "-X", "POST", &url(gw, "/count")], Some(input));
        assert_eq!((r.status, r.text()), (200, BIG.to_string()), "{r:?}");
        let peak = sampler.finish();
        let grew = peak.saturating_sub(before);
        assert!(
            grew < 64 << 20,
            "RSS grew by {} MiB moving 2 x {} MiB",
            grew >> 20,
            BIG >> 20
        );
    });
}

#[test]
fn a_slow_client_slows_the_upstream() {
    bounded(LIMIT, || {
        let (fibr_up, counters) = fibr_upstream("fibr");
        let gw = gateway(vec![http(fibr_up)], Config::default());
        let mut s = common::connect(gw);
        s.write_all(b"GET /forever HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut buf = vec![0u8; 1 << 20];
        let mut read = 0u64;
        while read < 4 << 20 {
            read += s.read(&mut buf).unwrap() as u64;
        }
        // The client stops reading: the upstream must stop soon after.
        thread::sleep(Duration::from_millis(1500));
        let a = counters.produced.load(Ordering::SeqCst);
        thread::sleep(Duration::from_millis(1000));
        let b = counters.produced.load(Ordering::SeqCst);
        assert_eq!(
            a, b,
            "the upstream kept producing for a client that reads nothing"
        );
        assert!(a - read < 48 << 20, "{} MiB in flight", (a - read) >> 20);
        // Reading again resumes it.
        let mut again = 0u64;
        while counters.produced.load(Ordering::SeqCst) == b {
            again += s.read(&mut buf).unwrap() as u64;
            assert!(again < 128 << 20, "the upstream did not resume");
        }
    });
}

/// h2load through the gateway over h2c, many streams at once, to two upstreams (one
/// spoken to in HTTP/1.1, one in HTTP/2): every request answered.
#[test]
fn h2load_many_streams_at_once() {
    bounded(LIMIT, || {
        require_tool("h2load", "nghttp2-client");
        let (a, _) = fibr_upstream("a");
        let (b, _) = fibr_upstream("b");
        let h2c = super::up(&format!("h2c://{b}"));
        let gw = gateway(vec![http(a), h2c], Config::default());
        let out = Command::new("h2load")
            .args(["-n", "2000", "-c", "8", "-m", "16", &url(gw, "/id")])
            .output()
            .expect("run h2load");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("2000 succeeded, 0 failed, 0 errored"),
            "{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("status codes: 2000 2xx"), "{text}");
    });
}
