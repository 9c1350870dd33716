//! The HTTP/2 client machine, driven without sockets: against fibr's server machine in
//! memory, and against hand-made frames.

use super::*;
use crate::http::ServerConfig;
use crate::proto::h2::frame::{Frame, PREFACE};
use crate::proto::h2::hpack::Encoder;
use crate::proto::h2::pair_tests::Net as Pair;
use std::time::Instant;

mod timers;

fn pair() -> Pair {
    Pair::new(ClientConfig::default(), ServerConfig::default().h2_limits())
}

/// The body bytes and whether the response ended, from `events` for `stream`.
fn body_of(events: &[Event], stream: u32) -> (Option<StatusCode>, Vec<u8>, bool) {
    let mut status = None;
    let mut body = Vec::new();
    let mut ended = false;
    for e in events {
        match e {
            Event::Head { stream: s, head } if *s == stream => status = Some(head.status),
            Event::Data { stream: s, data } if *s == stream => body.extend_from_slice(data),
            Event::End { stream: s, .. } if *s == stream => ended = true,
            _ => {}
        }
    }
    (status, body, ended)
}

#[test]
fn a_get_round_trips_through_the_server_machine() {
    let mut p = pair();
    let id = p.get("/hello?x=1");
    assert_eq!(id, 1);
    p.pump();
    let (stream, head) = &p.d.requests[0];
    assert_eq!(*stream, 1);
    assert_eq!(head.method, http::Method::GET);
    assert_eq!(head.uri, "http://example.com/hello?x=1");
    p.respond(1, b"hi there", None);
    let ev = p.take_events();
    assert_eq!(
        body_of(&ev, 1),
        (Some(StatusCode::OK), b"hi there".to_vec(), true)
    );
    assert_eq!(p.client.streams(), 0);
    assert_eq!(p.get("/again"), 3);
}

#[test]
fn an_extended_connect_sends_its_protocol_scheme_and_path_once_the_server_allows_it() {
    let mut scfg = ServerConfig::default();
    scfg.http2.extended_connect = true;
    let mut out = Vec::new();
    let fresh = ClientConn::new(&ClientConfig::default(), Instant::now(), &mut out);
    assert_eq!(
        fresh.extended_connect(),
        None,
        "before the server's SETTINGS"
    );
    let mut p = Pair::new(ClientConfig::default(), scfg.h2_limits());
    p.pump();
    assert_eq!(p.client.extended_connect(), Some(true));
    let head = RequestHead {
        method: &http::Method::CONNECT,
        scheme: "http",
        authority: "example.com",
        path: "/chat",
        protocol: Some("websocket"),
        headers: &HeaderMap::new(),
    };
    assert_eq!(p.client.open(&head, false, &mut p.to_server), Some(1));
    p.pump();
    let (_, got) = &p.d.requests[0];
    assert_eq!(got.method, http::Method::CONNECT);
    assert_eq!(got.protocol.as_ref().map(|p| p.as_str()), Some("websocket"));
    assert_eq!(got.uri, "http://example.com/chat");
    // A server that does not advertise it.
    let mut scfg = ServerConfig::default();
    scfg.http2.extended_connect = false;
    let mut p = Pair::new(ClientConfig::default(), scfg.h2_limits());
    p.pump();
    assert_eq!(p.client.extended_connect(), Some(false));
}

#[test]
fn forbidden_request_fields_are_not_sent_and_host_becomes_the_authority() {
    let mut p = pair();
    let mut h = HeaderMap::new();
    h.insert("connection", "keep-alive".parse().unwrap());
    h.insert("host", "example.com".parse().unwrap());
    h.insert("te", "trailers".parse().unwrap());
    h.insert("x-kept", "yes".parse().unwrap());
    p.open(&http::Method::GET, "/", &h, true);
    p.pump();
    // The server machine resets a request with connection-specific fields; this one
    // was dispatched.
    let (_, head) = &p.d.requests[0];
    assert_eq!(head.headers["x-kept"], "yes");
    assert_eq!(head.headers["te"], "trailers");
    assert!(head.headers.get("connection").is_none());
}

#[test]
fn streams_beyond_the_servers_max_concurrent_streams_wait() {
    let mut scfg = ServerConfig::default();
    scfg.http2.max_concurrent_streams = 2;
    let mut p = Pair::new(ClientConfig::default(), scfg.h2_limits());
    assert!(p.client.can_open());
    p.get("/1");
    p.get("/2");
    assert!(!p.client.can_open(), "the server's SETTINGS allow two");
    p.pump();
    p.respond(1, b"one", None);
    assert!(p.client.can_open(), "one ended: another may open");
    assert_eq!(p.get("/3"), 5);
}

#[test]
fn before_the_servers_settings_the_configured_initial_limit_holds() {
    let cfg = ClientConfig {
        initial_max_concurrent_streams: 1,
        ..ClientConfig::default()
    };
    let mut out = Vec::new();
    let mut c = ClientConn::new(&cfg, Instant::now(), &mut out);
    assert!(out.starts_with(PREFACE));
    let h = HeaderMap::new();
    let head = RequestHead {
        method: &http::Method::GET,
        scheme: "https",
        authority: "h",
        path: "/",
        protocol: None,
        headers: &h,
    };
    assert_eq!(c.open(&head, true, &mut out), Some(1));
    assert_eq!(c.open(&head, true, &mut out), None);
}

#[test]
fn an_upload_larger_than_the_windows_goes_as_the_server_reads() {
    let mut p = pair();
    let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let mut h = HeaderMap::new();
    h.insert("content-length", body.len().to_string().parse().unwrap());
    let id = p.open(&http::Method::POST, "/up", &h, false);
    let mut rest: &[u8] = &body;
    let mut rounds = 0;
    let mut reported = 0;
    while !p.client.send_data(id, &mut rest, true, &mut p.to_server) {
        rounds += 1;
        assert!(rounds < 100, "the upload stalled");
        assert_eq!(p.client.window(id), 0);
        p.pump();
        // The service reads what arrived: the server reopens the windows.
        let sink = p.d.sink(id);
        let n = sink.lock().unwrap().data.len();
        sink.lock().unwrap().consumed = n - reported;
        reported = n;
        p.pump();
    }
    p.pump();
    let sink = p.d.sink(id);
    let log = sink.lock().unwrap();
    assert!(
        rounds > 0,
        "300 kB exceeds the server's 64 KiB stream window"
    );
    assert_eq!(log.data, body);
    assert!(log.finished.is_some());
}

#[test]
fn a_download_larger_than_the_windows_reopens_them_in_batches_as_read() {
    let ccfg = ClientConfig {
        initial_stream_window: 64 * 1024,
        initial_connection_window: 128 * 1024,
        ..ClientConfig::default()
    };
    let mut p = Pair::new(ccfg, ServerConfig::default().h2_limits());
    let id = p.get("/down");
    p.pump();
    let body: Vec<u8> = (0..1_000_000u32).map(|i| (i % 253) as u8).collect();
    let mut got = Vec::new();
    let mut rest: &[u8] = &body;
    let mut head_sent = false;
    let mut updates = 0;
    for _ in 0..1000 {
        let clock = p.clock();
        let mut done = false;
        p.server.each_stream(clock, &mut p.to_client, |_, w| {
            if !head_sent {
                let mut parts = http::Response::new(()).into_parts().0;
                w.respond(&mut parts, Some(body.len() as u64));
                head_sent = true;
            }
            done = w.send_data(&mut rest, true);
        });
        let before = p.to_server.len();
        p.pump();
        let _ = before;
        for e in p.take_events() {
            if let Event::Data { stream, data } = e {
                assert_eq!(stream, id);
                got.extend_from_slice(&data);
                p.client.release(stream, data.len());
            }
        }
        let mut out = Vec::new();
        p.client.flush_credit(&mut out);
        if !out.is_empty() {
            updates += 1;
        }
        p.to_server.extend_from_slice(&out);
        p.pump();
        if done && got.len() == body.len() {
            break;
        }
    }
    assert_eq!(got.len(), body.len());
    assert!(got == body);
    assert!(updates >= 1, "the windows were reopened");
}

#[test]
fn data_beyond_the_clients_window_is_a_flow_control_error() {
    let (mut c, mut out, mut ev) = hand_made();
    let id = open_get(&mut c, &mut out);
    let mut input = Vec::new();
    response_head(&mut input, id, false, &[]);
    // 65535 is the default stream window (our config says 1 MiB, but the connection
    // window starts at 4 MiB and the stream at 1 MiB): overrun the stream's.
    let big = vec![0u8; 16 * 1024];
    for _ in 0..65 {
        frame::write_data(&mut input, id, &big, false);
    }
    c.receive(Instant::now(), &input, &mut out, &mut ev);
    assert!(
        ev.iter()
            .any(|e| matches!(e, Event::Reset { stream, why: Why::Protocol(_) } if *stream == id)),
        "{ev:?}"
    );
}

#[test]
fn trailers_end_the_response_and_the_request() {
    let mut p = pair();
    let id = p.open(&http::Method::POST, "/t", &HeaderMap::new(), false);
    let mut t = HeaderMap::new();
    t.insert("grpc-status", "0".parse().unwrap());
    let mut data: &[u8] = b"abc";
    assert!(p.client.send_data(id, &mut data, false, &mut p.to_server));
    p.client.send_trailers(id, &t, &mut p.to_server);
    p.pump();
    let sink = p.d.sink(id);
    assert_eq!(sink.lock().unwrap().data, b"abc");
    let finished = sink.lock().unwrap().finished.clone();
    assert_eq!(finished.unwrap().unwrap()["grpc-status"], "0");
    p.respond(id, b"xyz", Some(&t));
    let ev = p.take_events();
    assert_eq!(
        body_of(&ev, id),
        (Some(StatusCode::OK), b"xyz".to_vec(), true)
    );
    let trailers = ev.iter().find_map(|e| match e {
        Event::End { trailers, .. } => trailers.clone(),
        _ => None,
    });
    assert_eq!(trailers.unwrap()["grpc-status"], "0");
}

// --- Hand-made server frames ---------------------------------------------------------

/// A client whose SETTINGS exchange is done, talking to a hand-made server.
fn hand_made() -> (ClientConn, Vec<u8>, Vec<Event>) {
    hand_made_with(&ClientConfig::default(), Instant::now())
}

/// [`hand_made`] with `cfg`, the exchange done at `now`.
fn hand_made_with(cfg: &ClientConfig, now: Instant) -> (ClientConn, Vec<u8>, Vec<Event>) {
    let mut out = Vec::new();
    let mut c = ClientConn::new(cfg, now, &mut out);
    let mut input = Vec::new();
    frame::write_settings(&mut input, &[]);
    frame::write_settings_ack(&mut input);
    let mut ev = Vec::new();
    out.clear();
    c.receive(now, &input, &mut out, &mut ev);
    assert!(ev.is_empty() && !c.is_failed());
    (c, out, ev)
}

fn open_get(c: &mut ClientConn, out: &mut Vec<u8>) -> u32 {
    let h = HeaderMap::new();
    let head = RequestHead {
        method: &http::Method::GET,
        scheme: "http",
        authority: "h",
        path: "/",
        protocol: None,
        headers: &h,
    };
    c.open(&head, true, out).unwrap()
}

/// A response head with `:status 200` and `fields`, by a fresh encoder each time (so
/// nothing depends on the dynamic table).
fn response_head(input: &mut Vec<u8>, stream: u32, end: bool, fields: &[(&str, &str)]) {
    block(input, stream, end, "200", fields)
}

fn block(input: &mut Vec<u8>, stream: u32, end: bool, status: &str, fields: &[(&str, &str)]) {
    let mut e = Encoder::new();
    let mut b = Vec::new();
    e.begin_block(&mut b);
    if !status.is_empty() {
        e.encode_literal(
            b":status",
            None,
            status.as_bytes(),
            crate::proto::h2::hpack::Indexing::Without,
            crate::proto::h2::hpack::Huffman::Never,
            &mut b,
        );
    }
    for (n, v) in fields {
        e.encode_literal(
            n.as_bytes(),
            None,
            v.as_bytes(),
            crate::proto::h2::hpack::Indexing::Without,
            crate::proto::h2::hpack::Huffman::Never,
            &mut b,
        );
    }
    frame::write_headers(input, stream, &b, end, true, None, None);
}

fn failed_with(out: &[u8], code: ErrorCode) -> bool {
    let mut pos = 0;
    while let Ok(Some((f, used))) = frame::parse(&out[pos..], frame::MAX_MAX_FRAME_SIZE) {
        pos += used;
        if let Frame::GoAway { code: c, .. } = f {
            return c == code;
        }
    }
    false
}

#[test]
fn the_servers_first_frame_must_be_settings() {
    let mut out = Vec::new();
    let mut c = ClientConn::new(&ClientConfig::default(), Instant::now(), &mut out);
    let mut input = Vec::new();
    frame::write_ping(&mut input, false, [0; 8]);
    out.clear();
    let mut ev = Vec::new();
    c.receive(Instant::now(), &input, &mut out, &mut ev);
    assert!(c.is_failed());
    assert!(failed_with(&out, ErrorCode::PROTOCOL_ERROR));
}

#[test]
fn a_goaway_refuses_the_streams_above_its_last_id_and_lets_the_rest_finish() {
    let (mut c, mut out, mut ev) = hand_made();
    let a = open_get(&mut c, &mut out);
    let b = open_get(&mut c, &mut out);
    let mut input = Vec::new();
    frame::write_goaway(&mut input, a, ErrorCode::NO_ERROR, b"bye");
    c.receive(Instant::now(), &input, &mut out, &mut ev);
    assert!(matches!(&ev[0], Event::GoAway { last_stream, .. } if *last_stream == a));
    assert!(matches!(&ev[1], Event::Reset { stream, why: Why::Refused } if *stream == b));
    assert!(!c.can_open() && !c.is_usable());
    ev.clear();
    input.clear();
    response_head(&mut input, a, true, &[]);
    c.receive(Instant::now(), &input, &mut out, &mut ev);
    assert!(matches!(&ev[0], Event::Head { stream, .. } if *stream == a));
    assert!(matches!(&ev[1], Event::End { stream, .. } if *stream == a));
    assert_eq!(c.streams(), 0);
}

#[test]
fn rst_stream_refused_is_retryable_and_other_codes_are_not() {
    let (mut c, mut out, mut ev) = hand_made();
    let a = open_get(&mut c, &mut out);
    let b = open_get(&mut c, &mut out);
    let mut input = Vec::new();
    frame::write_rst_stream(&mut input, a, ErrorCode::REFUSED_STREAM);
    frame::write_rst_stream(&mut input, b, ErrorCode::CANCEL);
    c.receive(Instant::now(), &input, &mut out, &mut ev);
    assert!(matches!(
        &ev[0],
        Event::Reset {
            why: Why::Refused,
            ..
        }
    ));
    assert!(matches!(
        &ev[1],
        Event::Reset {
            why: Why::Reset(ErrorCode::CANCEL),
            ..
        }
    ));
    assert!(c.can_open() && !c.is_failed());
}

#[test]
fn informational_heads_are_skipped() {
    let (mut c, mut out, mut ev) = hand_made();
    let a = open_get(&mut c, &mut out);
    let mut input = Vec::new();
    block(&mut input, a, false, "103", &[("link", "</s.css>")]);
    response_head(&mut input, a, true, &[("x", "1")]);
    c.receive(Instant::now(), &input, &mut out, &mut ev);
    assert_eq!(ev.len(), 2, "{ev:?}");
    let Event::Head { head, .. } = &ev[0] else {
        panic!("{ev:?}")
    };
    assert_eq!(head.status, 200);
    assert_eq!(head.headers["x"], "1");
}

#[test]
fn malformed_responses_reset_their_stream_only() {
    for fields in [
        &[("connection", "close")][..],
        &[("Upper", "x")],
        &[("content-length", "x")],
        &[("content-length", "5")], // then END_STREAM with no body
    ] {
        let (mut c, mut out, mut ev) = hand_made();
        let a = open_get(&mut c, &mut out);
        let mut input = Vec::new();
        response_head(&mut input, a, true, fields);
        c.receive(Instant::now(), &input, &mut out, &mut ev);
        assert!(
            matches!(
                &ev[..],
                [Event::Reset {
                    why: Why::Protocol(_),
                    ..
                }]
            ),
            "{fields:?}: {ev:?}"
        );
        assert!(!c.is_failed());
    }
    let (mut c, mut out, mut ev) = hand_made();
    let a = open_get(&mut c, &mut out);
    let mut input = Vec::new();
    block(&mut input, a, true, "", &[("x", "y")]);
    c.receive(Instant::now(), &input, &mut out, &mut ev);
    assert!(
        matches!(
            &ev[..],
            [Event::Reset {
                why: Why::Protocol(_),
                ..
            }]
        ),
        "{ev:?}"
    );
}

#[test]
fn a_body_longer_than_its_content_length_is_malformed() {
    let (mut c, mut out, mut ev) = hand_made();
    let a = open_get(&mut c, &mut out);
    let mut input = Vec::new();
    response_head(&mut input, a, false, &[("content-length", "2")]);
    frame::write_data(&mut input, a, b"abc", true);
    c.receive(Instant::now(), &input, &mut out, &mut ev);
    assert!(
        matches!(
            &ev[1],
            Event::Reset {
                why: Why::Protocol(_),
                ..
            }
        ),
        "{ev:?}"
    );
}

#[test]
fn push_promise_and_frames_on_unopened_streams_close_the_connection() {
    let (mut c, mut out, mut ev) = hand_made();
    let a = open_get(&mut c, &mut out);
    let mut input = Vec::new();
    frame::write_push_promise(&mut input, a, 2, &[0x82], true);
    c.receive(Instant::now(), &input, &mut out, &mut ev);
    assert!(c.is_failed() && failed_with(&out, ErrorCode::PROTOCOL_ERROR));
    assert!(matches!(
        &ev[..],
        [Event::Reset {
            why: Why::Lost(_),
            ..
        }]
    ));

    let (mut c, mut out, mut ev) = hand_made();
    let mut input = Vec::new();
    response_head(&mut input, 7, true, &[]);
    c.receive(Instant::now(), &input, &mut out, &mut ev);
    assert!(c.is_failed() && failed_with(&out, ErrorCode::PROTOCOL_ERROR));
}

#[test]
fn pings_are_answered_and_a_flood_of_them_closes_the_connection() {
    let (mut c, mut out, mut ev) = hand_made();
    out.clear();
    let mut input = Vec::new();
    frame::write_ping(&mut input, false, *b"12345678");
    c.receive(Instant::now(), &input, &mut out, &mut ev);
    let mut want = Vec::new();
    frame::write_ping(&mut want, true, *b"12345678");
    assert_eq!(out, want);
    let mut flood = Vec::new();
    for _ in 0..10_001 {
        frame::write_ping(&mut flood, false, [0; 8]);
    }
    c.receive(Instant::now(), &flood, &mut out, &mut ev);
    assert!(c.is_failed() && failed_with(&out, ErrorCode::ENHANCE_YOUR_CALM));
}

#[test]
fn an_oversized_response_head_fails_its_stream_and_a_continuation_flood_the_connection() {
    let (mut c, mut out, mut ev) = hand_made();
    let a = open_get(&mut c, &mut out);
    let mut input = Vec::new();
    let big = "v".repeat(40 * 1024);
    response_head(&mut input, a, true, &[("a", &big), ("b", &big)]);
    c.receive(Instant::now(), &input, &mut out, &mut ev);
    // 80 KiB on the wire is over the 64 KiB bound: a connection error (the flood rule).
    assert!(c.is_failed());

    let (mut c, mut out, mut ev) = hand_made();
    let a = open_get(&mut c, &mut out);
    let mut input = Vec::new();
    frame::write_headers(&mut input, a, &[], false, false, None, None);
    for _ in 0..10 {
        frame::write_continuation(&mut input, a, &[0; 8 * 1024], false);
    }
    c.receive(Instant::now(), &input, &mut out, &mut ev);
    assert!(c.is_failed() && failed_with(&out, ErrorCode::ENHANCE_YOUR_CALM));
}

#[test]
fn frames_split_at_every_byte_give_the_same_events() {
    let mut input = Vec::new();
    frame::write_settings(&mut input, &[(frame::SETTINGS_MAX_CONCURRENT_STREAMS, 5)]);
    response_head(&mut input, 1, false, &[("content-length", "5")]);
    frame::write_data_padded(&mut input, 1, b"hello", true, 3);
    for cut in 0..input.len() {
        let mut out = Vec::new();
        let mut c = ClientConn::new(&ClientConfig::default(), Instant::now(), &mut out);
        open_get(&mut c, &mut out);
        let mut ev = Vec::new();
        c.receive(Instant::now(), &input[..cut], &mut out, &mut ev);
        c.receive(Instant::now(), &input[cut..], &mut out, &mut ev);
        let (status, body, ended) = body_of(&ev, 1);
        assert_eq!(
            (status, body.as_slice(), ended),
            (Some(StatusCode::OK), &b"hello"[..], true),
            "cut {cut}"
        );
    }
}

#[test]
fn arbitrary_bytes_never_panic() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..2000 {
        let mut out = Vec::new();
        let mut c = ClientConn::new(&ClientConfig::default(), Instant::now(), &mut out);
        open_get(&mut c, &mut out);
        let mut input = Vec::new();
        frame::write_settings(&mut input, &[]);
        // Frames with random heads (types 0..=10, small lengths, streams 0..4) and bytes.
        for _ in 0..(next() % 6) {
            let r = next();
            let len = (r % 40) as usize;
            let payload: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            frame::write_frame(
                &mut input,
                (r >> 8) as u8 % 11,
                (r >> 16) as u8,
                ((r >> 24) % 4) as u32,
                &payload,
            );
        }
        let mut ev = Vec::new();
        c.receive(Instant::now(), &input, &mut out, &mut ev);
        c.flush_credit(&mut out);
        let _ = c.can_open();
    }
}

#[test]
fn a_reset_from_the_client_forgets_the_stream_and_credits_its_data() {
    let (mut c, mut out, mut ev) = hand_made();
    let a = open_get(&mut c, &mut out);
    let mut input = Vec::new();
    response_head(&mut input, a, false, &[]);
    frame::write_data(&mut input, a, &[1; 1000], false);
    c.receive(Instant::now(), &input, &mut out, &mut ev);
    out.clear();
    c.reset(a, ErrorCode::CANCEL, &mut out);
    assert_eq!(c.streams(), 0);
    let mut want = Vec::new();
    frame::write_rst_stream(&mut want, a, ErrorCode::CANCEL);
    assert_eq!(out, want);
    // The unread 1000 bytes go back to the connection (in a later batch).
    c.release(a, 1000);
    assert_eq!(c.core.credit, 1000);
}
