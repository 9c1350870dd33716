//! Requests, responses, bodies, trailers, stream states and upgrades through the machine.

use super::*;

#[test]
fn a_get_is_dispatched_and_answered_with_headers_and_data() {
    let mut t = T::open();
    let get = t.get(1);
    t.recv(&get);
    assert_eq!(t.d.requests.len(), 1);
    let (stream, head, body) = &t.d.requests[0];
    assert_eq!(*stream, 1);
    assert_eq!(head.method, http::Method::GET);
    assert_eq!(head.uri, "http://example.com/hello?x=1");
    assert!(body.is_none());
    t.respond_all(200, b"hello");
    let got = t.take();
    assert_eq!(got.len(), 2, "{got:?}");
    let Got::Headers {
        stream: 1,
        end_stream: false,
        fields,
    } = &got[0]
    else {
        panic!("{got:?}")
    };
    assert_eq!(fields[0], (":status".into(), "200".into()));
    assert!(fields.contains(&("content-length".into(), "5".into())));
    assert!(fields.contains(&("date".into(), String::from_utf8(date().to_vec()).unwrap())));
    assert_eq!(
        got[1],
        Got::Data {
            stream: 1,
            end_stream: true,
            data: b"hello".to_vec()
        }
    );
    assert_eq!(t.conn.streams(), 0, "a finished stream is forgotten");
    assert!(!t.end_round().close);
    assert_eq!(
        t.conn.streams.capacity(),
        0,
        "an idle connection keeps no stream table"
    );
    assert_eq!(t.conn.core.kept_capacity(), 0, "nor any input");
}

#[test]
fn our_settings_go_out_before_the_preface_arrives() {
    let mut t = T::new();
    let got = t.take();
    assert_eq!(got[0], Got::Settings { ack: false });
    // The connection window is opened to the configured size at once.
    let extra = ServerConfig::default().http2.initial_connection_window - 65_535;
    assert_eq!(
        got[1],
        Got::WindowUpdate {
            stream: 0,
            increment: extra
        }
    );
}

#[test]
fn a_preface_split_anywhere_is_accepted() {
    for cut in 1..PREFACE.len() {
        let mut t = T::new();
        t.take();
        t.recv(&PREFACE[..cut]);
        let mut rest = PREFACE[cut..].to_vec();
        frame::write_settings(&mut rest, &[]);
        t.recv(&rest);
        assert_eq!(t.take(), vec![Got::Settings { ack: true }], "cut at {cut}");
    }
}

#[test]
fn not_the_preface_is_a_protocol_error() {
    let mut t = T::new();
    t.take();
    t.recv(b"GET / HTTP/1.1\r\n\r\n");
    assert!(t.take().iter().any(goaway(ErrorCode::PROTOCOL_ERROR)));
    assert!(t.end_round().close);
}

#[test]
fn the_first_frame_must_be_settings() {
    let mut t = T::new();
    t.take();
    let mut input = PREFACE.to_vec();
    frame::write_ping(&mut input, false, [0; 8]);
    t.recv(&input);
    assert!(t.take().iter().any(goaway(ErrorCode::PROTOCOL_ERROR)));
}

#[test]
fn requests_split_at_every_byte_are_the_same() {
    let mut whole = T::open();
    let mut input = whole.get(1);
    input.extend(whole.get(3));
    whole.recv(&input);
    let expected: Vec<_> = whole
        .d
        .requests
        .iter()
        .map(|r| (r.0, r.1.uri.clone()))
        .collect();
    assert_eq!(expected.len(), 2);
    for cut in 1..input.len() {
        let mut t = T::open();
        t.recv(&input[..cut]);
        t.recv(&input[cut..]);
        let got: Vec<_> =
            t.d.requests
                .iter()
                .map(|r| (r.0, r.1.uri.clone()))
                .collect();
        assert_eq!(got, expected, "cut at {cut}");
    }
}

#[test]
fn ping_is_answered() {
    let mut t = T::open();
    let mut p = Vec::new();
    frame::write_ping(&mut p, false, *b"12345678");
    t.recv(&p);
    assert_eq!(
        t.take(),
        vec![Got::Ping {
            ack: true,
            data: *b"12345678"
        }]
    );
}

#[test]
fn a_body_longer_or_shorter_than_content_length_is_malformed() {
    for (sent, end) in [(11, false), (9, true)] {
        let mut t = T::open();
        let fields = post(10);
        let h = t.headers(1, &as_refs(&fields), false);
        t.recv(&h);
        let mut data = Vec::new();
        frame::write_data(&mut data, 1, &vec![1; sent], end);
        t.recv(&data);
        assert_eq!(
            t.take(),
            vec![Got::Rst {
                stream: 1,
                code: ErrorCode::PROTOCOL_ERROR
            }],
            "{sent} bytes"
        );
    }
}

#[test]
fn request_trailers_end_the_body() {
    let mut t = T::open();
    let mut fields = post(3);
    fields.pop();
    let h = t.headers(1, &as_refs(&fields), false);
    t.recv(&h);
    let mut data = Vec::new();
    frame::write_data(&mut data, 1, b"abc", false);
    t.recv(&data);
    let tr = t.headers(1, &[("grpc-status", "0")], true);
    t.recv(&tr);
    let log = t.d.sink(1);
    let log = log.lock().unwrap();
    let trailers = log.finished.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(trailers["grpc-status"], "0");
}

#[test]
fn trailers_without_end_stream_reset_the_stream() {
    let mut t = T::open();
    let mut fields = post(3);
    fields.pop();
    let h = t.headers(1, &as_refs(&fields), false);
    t.recv(&h);
    let tr = t.headers(1, &[("x", "y")], false);
    t.recv(&tr);
    assert_eq!(
        t.take(),
        vec![Got::Rst {
            stream: 1,
            code: ErrorCode::PROTOCOL_ERROR
        }]
    );
}

#[test]
fn malformed_requests_are_reset_with_protocol_error() {
    let cases: [&[(&str, &str)]; 9] = [
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            ("Upper", "x"),
        ],
        &[(":method", "GET"), (":scheme", "http")],
        &[(":method", "GET"), (":path", "/")],
        &[(":scheme", "http"), (":path", "/")],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            ("connection", "close"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            ("te", "gzip"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            ("x", "y"),
            (":path", "/"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":status", "200"),
        ],
        &[
            (":method", "GET"),
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
        ],
    ];
    for fields in cases {
        let mut t = T::open();
        let h = t.headers(1, fields, true);
        t.recv(&h);
        assert_eq!(
            t.take(),
            vec![Got::Rst {
                stream: 1,
                code: ErrorCode::PROTOCOL_ERROR
            }],
            "{fields:?}"
        );
        assert!(t.d.requests.is_empty());
        // The connection goes on: HPACK stayed in sync.
        let get = t.get(3);
        t.recv(&get);
        assert_eq!(t.d.requests.len(), 1, "{fields:?}");
    }
}

#[test]
fn te_trailers_is_allowed() {
    let mut t = T::open();
    let mut fields = GET.to_vec();
    fields.push(("te", "trailers"));
    let h = t.headers(1, &fields, true);
    t.recv(&h);
    assert_eq!(t.d.requests.len(), 1);
}

#[test]
fn continuation_joins_a_header_block() {
    let mut t = T::open();
    let block = t.block(&GET);
    let (a, b) = block.split_at(block.len() / 2);
    let mut input = Vec::new();
    frame::write_headers(&mut input, 1, a, true, false, None, None);
    frame::write_continuation(&mut input, 1, b, true);
    t.recv(&input);
    assert_eq!(t.d.requests.len(), 1);
    assert_eq!(t.d.requests[0].1.uri, "http://example.com/hello?x=1");
}

#[test]
fn a_frame_inside_a_header_block_is_a_protocol_error() {
    let mut t = T::open();
    let block = t.block(&GET);
    let mut input = Vec::new();
    frame::write_headers(&mut input, 1, &block, true, false, None, None);
    frame::write_ping(&mut input, false, [0; 8]);
    t.recv(&input);
    assert!(t.take().iter().any(goaway(ErrorCode::PROTOCOL_ERROR)));
    assert!(t.end_round().close);
}

#[test]
fn headers_on_an_even_or_closed_stream_end_the_connection() {
    let mut t = T::open();
    let h = t.get(2);
    t.recv(&h);
    assert!(t.take().iter().any(goaway(ErrorCode::PROTOCOL_ERROR)));

    // A stream that ended: STREAM_CLOSED (§5.1); an id below the last that was never used:
    // PROTOCOL_ERROR (§5.1.1).
    for (again, code) in [
        (5, ErrorCode::STREAM_CLOSED),
        (3, ErrorCode::PROTOCOL_ERROR),
    ] {
        let mut t = T::open();
        let h = t.get(5);
        t.recv(&h);
        t.respond_all(200, b"");
        t.take();
        let h = t.get(again);
        t.recv(&h);
        assert!(t.take().iter().any(goaway(code)), "stream {again}");
    }
}

#[test]
fn the_clients_table_size_setting_reaches_the_encoder() {
    let mut t = T::open();
    let mut s = Vec::new();
    frame::write_settings(&mut s, &[(frame::SETTINGS_HEADER_TABLE_SIZE, 0)]);
    t.recv(&s);
    t.take();
    t.dec.set_max_table_size(0);
    let get = t.get(1);
    t.recv(&get);
    t.respond_all(200, b"x");
    // Decodes with a zero-size table: the server emitted the size update first.
    let got = t.take();
    assert!(matches!(got[0], Got::Headers { stream: 1, .. }), "{got:?}");
}

#[test]
fn an_upgraded_request_is_stream_1_and_the_preface_follows() {
    let mut t = T::new();
    t.take();
    let mut settings = Vec::new();
    // The client's SETTINGS payload from HTTP2-Settings: a small initial window.
    settings.extend_from_slice(&frame::SETTINGS_INITIAL_WINDOW_SIZE.to_be_bytes());
    settings.extend_from_slice(&3u32.to_be_bytes());
    let head = RequestHead {
        method: http::Method::GET,
        uri: "/up".parse().unwrap(),
        headers: HeaderMap::new(),
        content_length: None,
        protocol: None,
    };
    t.conn.accept_upgrade(&settings, head, &mut t.d, &mut t.out);
    assert_eq!(t.d.requests.len(), 1);
    assert_eq!(t.d.requests[0].0, 1);
    let mut input = PREFACE.to_vec();
    frame::write_settings(&mut input, &[]);
    t.recv(&input);
    assert_eq!(t.take(), vec![Got::Settings { ack: true }]);
    // The window from HTTP2-Settings applies to stream 1.
    let mut rest: &[u8] = b"hello";
    t.conn.each_stream(clock(t.now), &mut t.out, |_, w| {
        let mut parts = http::Response::new(()).into_parts().0;
        assert!(w.respond(&mut parts, None));
        assert!(!w.send_data(&mut rest, true));
    });
    let got = t.take();
    assert_eq!(
        got[1],
        Got::Data {
            stream: 1,
            end_stream: false,
            data: b"hel".to_vec()
        }
    );
    // Stream 1 is half-closed (remote): more HEADERS on it are a stream error.
    let h = t.get(1);
    t.recv(&h);
    assert_eq!(
        t.take(),
        vec![Got::Rst {
            stream: 1,
            code: ErrorCode::STREAM_CLOSED
        }]
    );
    assert_eq!(t.d.requests.len(), 1);
}

#[test]
fn bad_http2_settings_in_an_upgrade_fail_the_connection() {
    let mut t = T::new();
    t.take();
    let head = RequestHead {
        method: http::Method::GET,
        uri: "/".parse().unwrap(),
        headers: HeaderMap::new(),
        content_length: None,
        protocol: None,
    };
    t.conn
        .accept_upgrade(&[0, 4, 0xff, 0xff, 0xff, 0xff], head, &mut t.d, &mut t.out);
    assert!(t.take().iter().any(goaway(ErrorCode::FLOW_CONTROL_ERROR)));
    assert!(t.d.requests.is_empty());
}

#[test]
fn connection_specific_response_fields_are_dropped() {
    let mut t = T::open();
    let get = t.get(1);
    t.recv(&get);
    t.conn.each_stream(clock(t.now), &mut t.out, |_, w| {
        let mut parts = http::Response::new(()).into_parts().0;
        parts.headers.insert("connection", "close".parse().unwrap());
        parts
            .headers
            .insert("transfer-encoding", "chunked".parse().unwrap());
        parts.headers.insert("x-kept", "1".parse().unwrap());
        w.respond(&mut parts, Some(0));
    });
    let got = t.take();
    let Got::Headers { fields, .. } = &got[0] else {
        panic!("{got:?}")
    };
    let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"x-kept"), "{names:?}");
    assert!(
        !names.contains(&"connection") && !names.contains(&"transfer-encoding"),
        "{names:?}"
    );
}

fn extended_connect(on: bool) -> ServerConfig {
    let mut cfg = ServerConfig::default();
    cfg.http2.extended_connect = on;
    cfg
}

/// SETTINGS_ENABLE_CONNECT_PROTOCOL in the server's first SETTINGS, if it is on.
fn advertised_connect_protocol(t: &T) -> Option<u32> {
    let (f, _) = frame::parse(&t.out, frame::MAX_MAX_FRAME_SIZE)
        .unwrap()
        .unwrap();
    let frame::Frame::Settings { ack: false, params } = f else {
        panic!("{f:?}")
    };
    params
        .into_iter()
        .find(|&(id, _)| id == frame::SETTINGS_ENABLE_CONNECT_PROTOCOL)
        .map(|(_, v)| v)
}

const WS_CONNECT: [(&str, &str); 5] = [
    (":method", "CONNECT"),
    (":protocol", "websocket"),
    (":scheme", "https"),
    (":path", "/chat?room=1"),
    (":authority", "example.com"),
];

#[test]
fn extended_connect_is_advertised_only_when_on() {
    assert_eq!(
        advertised_connect_protocol(&T::with(extended_connect(true))),
        Some(1)
    );
    assert_eq!(
        advertised_connect_protocol(&T::with(extended_connect(false))),
        None
    );
}

#[test]
fn an_extended_connect_carries_its_protocol_target_and_body() {
    let mut t = T::open_with(extended_connect(true));
    let h = t.headers(1, &WS_CONNECT, false);
    t.recv(&h);
    assert_eq!(t.take(), vec![]);
    let (stream, head, body) = &t.d.requests[0];
    assert_eq!(*stream, 1);
    assert_eq!(head.method, http::Method::CONNECT);
    assert_eq!(
        head.protocol.as_ref().map(|p| p.as_str()),
        Some("websocket")
    );
    assert_eq!(head.uri, "https://example.com/chat?room=1");
    assert!(body.is_some(), "the stream stays open for the tunnel");
}

#[test]
fn malformed_extended_connects_are_reset_with_protocol_error() {
    let without = |name: &str| -> Vec<(&'static str, &'static str)> {
        WS_CONNECT
            .iter()
            .copied()
            .filter(|(n, _)| *n != name)
            .collect()
    };
    let mut on_get = without(":method");
    on_get.insert(0, (":method", "GET"));
    let mut twice = WS_CONNECT.to_vec();
    twice.insert(2, (":protocol", "websocket"));
    let mut not_token = without(":protocol");
    not_token.insert(1, (":protocol", "web socket"));
    let cases = [
        (true, on_get),
        (true, without(":scheme")),
        (true, without(":path")),
        (true, without(":authority")),
        (true, twice),
        (true, not_token),
        // Not advertised: an unknown pseudo-header (RFC 8441 §3).
        (false, WS_CONNECT.to_vec()),
    ];
    for (on, fields) in cases {
        let mut t = T::open_with(extended_connect(on));
        let h = t.headers(1, &fields, false);
        t.recv(&h);
        assert_eq!(
            t.take(),
            vec![Got::Rst {
                stream: 1,
                code: ErrorCode::PROTOCOL_ERROR
            }],
            "{on} {fields:?}"
        );
        assert!(t.d.requests.is_empty(), "{fields:?}");
    }
}

#[test]
fn a_header_block_begun_on_an_open_stream_stays_trailers_if_the_stream_ends_meanwhile() {
    let mut t = T::open();
    let h = t.get(1);
    t.recv(&h);
    // A second block on stream 1 (after its END_STREAM), split over CONTINUATION, whose
    // first half comes while stream 1 is still answering.
    let block = t.block(&GET);
    let (first, rest) = block.split_at(2);
    let raw = |kind: u8, flags: u8, payload: &[u8]| {
        let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        f.extend([kind, flags, 0, 0, 0, 1]);
        f.extend_from_slice(payload);
        f
    };
    t.recv(&raw(0x1, 0x1, first));
    t.respond_all(200, b"ok");
    t.end_round();
    t.take();
    // Stream 1 is gone when the block completes: not a new request on a used id.
    t.recv(&raw(0x9, 0x4, rest));
    assert_eq!(t.d.requests.len(), 1, "stream 1 dispatched twice");
    assert_eq!(
        t.take(),
        vec![Got::Rst {
            stream: 1,
            code: ErrorCode::STREAM_CLOSED
        }]
    );
}
