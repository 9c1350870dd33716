//! Balancing, ejection and retries; timeouts and broken upstreams.

use super::common::bounded;
use super::{
    curl, dead_port, fibr_upstream, gateway, http, raw_upstream, url, Balance, Config, LIMIT,
};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

#[test]
fn round_robin_spreads_and_least_outstanding_avoids_the_busy() {
    bounded(LIMIT, || {
        let ups: Vec<_> = ["a", "b", "c"]
            .map(fibr_upstream)
            .into_iter()
            .map(|(a, _)| http(a))
            .collect();
        let gw = gateway(ups.clone(), Config::default());
        let mut got: Vec<_> = (0..6).map(|_| curl(&[&url(gw, "/id")]).text()).collect();
        got.sort();
        assert_eq!(got, ["a", "a", "b", "b", "c", "c"]);
        let gw = gateway(
            ups[..2].to_vec(),
            Config::default().with_balance(Balance::LeastOutstanding),
        );
        // Two slow requests in flight, one on each... then one more on whichever is free:
        // a slow one holds `a` while quick ones all go to `b`.
        let slow = thread::spawn(move || curl(&[&url(gw, "/slow")]).text());
        thread::sleep(Duration::from_millis(200));
        let quick: Vec<_> = (0..4).map(|_| curl(&[&url(gw, "/id")]).text()).collect();
        let busy = slow.join().unwrap();
        let other = if busy == "a" { "b" } else { "a" };
        assert_eq!(quick, [other; 4], "the busy upstream was {busy}");
    });
}

#[test]
fn a_failing_upstream_is_ejected_for_a_while_and_requests_retry_elsewhere() {
    bounded(LIMIT, || {
        // Accepts and closes at once: "closed before the response".
        let (bad, bad_conns) = raw_upstream(|_, _| {});
        let (good, _) = fibr_upstream("good");
        let config = Config::default().with_eject_for(Duration::from_millis(3000));
        let gw = gateway(vec![http(bad), http(good)], config);
        let t0 = Instant::now();
        for _ in 0..6 {
            let r = curl(&[&url(gw, "/id")]);
            assert_eq!((r.status, r.text().as_str()), (200, "good"), "{r:?}");
        }
        assert!(t0.elapsed() < Duration::from_millis(3000));
        assert_eq!(
            bad_conns.load(Ordering::SeqCst),
            1,
            "an ejected upstream got requests"
        );
        thread::sleep(Duration::from_millis(3100));
        for _ in 0..2 {
            assert_eq!(curl(&[&url(gw, "/id")]).text(), "good");
        }
        assert_eq!(
            bad_conns.load(Ordering::SeqCst),
            2,
            "the ejection did not end"
        );
    });
}

#[test]
fn retries_what_was_not_sent_and_not_a_post_that_was() {
    bounded(LIMIT, || {
        let (good, _) = fibr_upstream("good");
        // Nothing listens: a POST with a body goes to the next upstream, body and all.
        let gw = gateway(
            vec![http(dead_port()), http(good)],
            Config::default().with_balance(Balance::RoundRobin),
        );
        let r = curl(&["--data-binary", "0123456789", &url(gw, "/count")]);
        assert_eq!((r.status, r.text().as_str()), (200, "10"), "{r:?}");
        // The retried request carries every field of the first attempt.
        let gw = gateway(
            vec![http(dead_port()), http(good)],
            Config::default().with_balance(Balance::RoundRobin),
        );
        let r = curl(&["-H", "x-mark: 7", &url(gw, "/echo")]);
        assert_eq!(r.status, 200, "{r:?}");
        for field in ["x-mark: 7", "x-forwarded-for: 127.0.0.1", "via: 1.1 fibr"] {
            assert!(r.text().contains(field), "{field} missing: {}", r.text());
        }
        // An upstream that read the request and closed: a POST is not sent again...
        let (closer, closer_conns) = raw_upstream(|_, _| {});
        let gw = gateway(vec![http(closer), http(good)], Config::default());
        let r = curl(&["--data-binary", "x", &url(gw, "/count")]);
        assert_eq!(r.status, 502, "{r:?}");
        assert!(
            r.text().starts_with("fibr gateway: upstream http://"),
            "{}",
            r.text()
        );
        assert_eq!(closer_conns.load(Ordering::SeqCst), 1);
        // ... and with no retries, a GET that fails is answered 502.
        let gw = gateway(
            vec![http(dead_port()), http(good)],
            Config::default().with_retries(0),
        );
        let codes: Vec<_> = (0..2).map(|_| curl(&[&url(gw, "/id")]).status).collect();
        assert!(codes.contains(&502), "{codes:?}");
    });
}

// ---------------------------------------------------------------------------------------
// Timeouts and broken upstreams
// ---------------------------------------------------------------------------------------

#[test]
fn no_response_head_in_time_is_504_and_garbage_is_502() {
    bounded(LIMIT, || {
        let (silent, _) = raw_upstream(|s, _| {
            thread::sleep(Duration::from_secs(5));
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        });
        let config = Config::default().with_first_byte_timeout(Duration::from_millis(500));
        let gw = gateway(vec![http(silent)], config);
        let t0 = Instant::now();
        let r = curl(&[&url(gw, "/")]);
        assert_eq!(r.status, 504, "{r:?}");
        assert!(t0.elapsed() < Duration::from_secs(4));
        assert!(
            r.text().contains("no response head within 500ms"),
            "{}",
            r.text()
        );

        for garbage in [
            &b"garbage\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n",
        ] {
            let (bad, _) = raw_upstream(move |s, _| {
                let _ = s.write_all(garbage);
            });
            let gw = gateway(vec![http(bad)], Config::default());
            let r = curl(&[&url(gw, "/")]);
            assert_eq!(
                r.status,
                502,
                "{:?}: {r:?}",
                String::from_utf8_lossy(garbage)
            );
            assert!(r.text().starts_with("fibr gateway:"), "{}", r.text());
        }
    });
}

#[test]
fn connect_timeout_is_504() {
    bounded(LIMIT, || {
        // A listener with a backlog of one that never accepts: once its queue is full,
        // further SYNs are dropped and connecting hangs.
        let sock =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        sock.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        sock.listen(0).unwrap();
        let addr = sock.local_addr().unwrap().as_socket().unwrap();
        let mut fill = Vec::new();
        while fill.len() < 8 {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                Ok(s) => fill.push(s),
                Err(_) => break,
            }
        }
        assert!(
            TcpStream::connect_timeout(&addr, Duration::from_millis(300)).is_err(),
            "the backlog did not fill"
        );
        let config = Config::default().with_connect_timeout(Duration::from_millis(400));
        let gw = gateway(vec![http(addr)], config);
        let t0 = Instant::now();
        let r = curl(&[&url(gw, "/")]);
        assert_eq!(r.status, 504, "{r:?}");
        assert!(r.text().contains("connect timed out"), "{}", r.text());
        assert!(t0.elapsed() < Duration::from_secs(3));
        drop(fill);
    });
}

/// A response that breaks off reaches curl broken (exit 18, partial file; HTTP/2: 92,
/// stream error), never as a whole body.
#[test]
fn a_body_cut_off_or_idle_reaches_the_client_broken() {
    bounded(LIMIT, || {
        let (cut_length, _) = raw_upstream(|s, _| {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n");
            let _ = s.write_all(&[b'x'; 1000]);
        });
        let (cut_chunked, _) = raw_upstream(|s, _| {
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n");
        });
        let (idle, _) = raw_upstream(|s, _| {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello");
            thread::sleep(Duration::from_secs(5));
        });
        let (bad_chunk, _) = raw_upstream(|s, _| {
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n",
            );
            thread::sleep(Duration::from_secs(2));
        });
        let config = Config::default().with_idle_timeout(Duration::from_millis(500));
        for (what, upstream) in [
            ("content-length", cut_length),
            ("chunked", cut_chunked),
            ("idle", idle),
            ("bad chunk", bad_chunk),
        ] {
            let gw = gateway(vec![http(upstream)], config.clone());
            let r = curl(&[&url(gw, "/")]);
            assert_eq!(r.status, 200, "{what}: {r:?}");
            assert_ne!(r.exit, 0, "{what}: curl took a broken body as whole: {r:?}");
            let r = curl(&["--http2-prior-knowledge", &url(gw, "/")]);
            assert_ne!(
                r.exit, 0,
                "{what} (h2): curl took a broken body as whole: {r:?}"
            );
        }
        // A fibr upstream that breaks a body off, spoken to in HTTP/1.1 and in HTTP/2.
        let (fibr_up, _) = fibr_upstream("fibr");
        for upstream in [http(fibr_up), super::up(&format!("h2c://{fibr_up}"))] {
            let gw = gateway(vec![upstream.clone()], Config::default());
            for front in ["--http1.1", "--http2-prior-knowledge"] {
                let r = curl(&[front, &url(gw, "/broken")]);
                assert_eq!(r.status, 200, "{upstream} {front}: {r:?}");
                assert_ne!(r.exit, 0, "{upstream} {front}: taken as whole: {r:?}");
                assert!(r.body.len() < 17 * 64 * 1024, "{upstream} {front}");
            }
        }
    });
}
