use super::*;
use proptest::prelude::*;

const MAX: u32 = DEFAULT_MAX_FRAME_SIZE;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    write_frame(&mut out, kind, flags, stream, payload);
    out
}

/// Parses one whole frame that must be valid and fill `buf`.
fn parse_one(buf: &[u8]) -> Frame<'_> {
    match parse(buf, MAX) {
        Ok(Some((frame, consumed))) => {
            assert_eq!(consumed, buf.len(), "{frame:?}");
            frame
        }
        other => panic!("{other:?}"),
    }
}

fn conn_err(buf: &[u8]) -> (ErrorCode, &'static str) {
    match parse(buf, MAX) {
        Err(FrameError::Connection { code, reason }) => (code, reason),
        other => panic!("{other:?}"),
    }
}

fn stream_err(buf: &[u8]) -> (u32, ErrorCode, &'static str, usize) {
    match parse(buf, MAX) {
        Err(FrameError::Stream {
            stream,
            code,
            reason,
            consumed,
        }) => (stream, code, reason, consumed),
        other => panic!("{other:?}"),
    }
}

const P: ErrorCode = ErrorCode::PROTOCOL_ERROR;
const FS: ErrorCode = ErrorCode::FRAME_SIZE_ERROR;

#[test]
fn error_code_debug_prints_names_and_keeps_unknown_codes() {
    assert_eq!(format!("{:?}", ErrorCode::NO_ERROR), "NO_ERROR");
    assert_eq!(
        format!("{:?}", ErrorCode::ENHANCE_YOUR_CALM),
        "ENHANCE_YOUR_CALM"
    );
    assert_eq!(
        format!("{:?}", ErrorCode::HTTP_1_1_REQUIRED),
        "HTTP_1_1_REQUIRED"
    );
    assert_eq!(ErrorCode::HTTP_1_1_REQUIRED.0, 0xd);
    assert_eq!(format!("{:?}", ErrorCode(0xe)), "ErrorCode(0xe)");
    let buf = frame(kind::RST_STREAM, 0, 1, &0xdead_beef_u32.to_be_bytes());
    assert_eq!(
        parse_one(&buf),
        Frame::RstStream {
            stream: 1,
            code: ErrorCode(0xdead_beef)
        }
    );
}

#[test]
fn head_drops_the_reserved_bit() {
    let b = [0x01, 0x02, 0x03, 0x07, 0xff, 0x80, 0, 0, 0x05];
    assert_eq!(
        parse_head(&b),
        Head {
            len: 0x010203,
            kind: 7,
            flags: 0xff,
            stream: 5
        }
    );
    // Reserved bit set on a DATA frame's stream id: ignored.
    let buf = frame(kind::DATA, 0, 0x8000_0003, b"x");
    assert_eq!(parse_one(&buf).stream(), 3);
}

#[test]
fn preface_is_the_rfcs() {
    assert_eq!(PREFACE.len(), 24);
    assert_eq!(&PREFACE[..], b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
}

#[test]
fn short_input_is_incomplete() {
    let buf = frame(kind::PING, 0, 0, &[1; 8]);
    for n in 0..buf.len() {
        assert_eq!(parse(&buf[..n], MAX), Ok(None), "{n}");
    }
}

#[test]
fn length_over_max_frame_size_is_refused_from_the_head() {
    let buf = frame(kind::DATA, 0, 1, &[0; 100]);
    assert_eq!(
        parse(&buf[..HEAD_LEN], 99),
        Err(conn(FS, "frame longer than SETTINGS_MAX_FRAME_SIZE"))
    );
    assert!(parse(&buf, 100).unwrap().is_some());
    // A 16 MB head is refused before any of its payload.
    let head = [0xff, 0xff, 0xff, kind::HEADERS, 0, 0, 0, 0, 1];
    assert_eq!(
        conn_err(&head),
        (FS, "frame longer than SETTINGS_MAX_FRAME_SIZE")
    );
    // An unknown type too.
    let head = [0, 0x40, 0x01, 0xee, 0, 0, 0, 0, 0];
    assert_eq!(
        conn_err(&head),
        (FS, "frame longer than SETTINGS_MAX_FRAME_SIZE")
    );
}

#[test]
fn stream_frames_on_stream_0_are_protocol_errors() {
    let cases: [(u8, &[u8], &str); 6] = [
        (kind::DATA, b"", "DATA on stream 0"),
        (kind::HEADERS, b"", "HEADERS on stream 0"),
        (kind::PRIORITY, &[0; 5], "PRIORITY on stream 0"),
        (kind::RST_STREAM, &[0; 4], "RST_STREAM on stream 0"),
        (
            kind::PUSH_PROMISE,
            &[0, 0, 0, 2],
            "PUSH_PROMISE on stream 0",
        ),
        (kind::CONTINUATION, b"", "CONTINUATION on stream 0"),
    ];
    for (kind, payload, reason) in cases {
        let buf = frame(kind, 0, 0, payload);
        assert_eq!(conn_err(&buf), (P, reason));
        // The head alone says it.
        assert_eq!(conn_err(&buf[..HEAD_LEN]), (P, reason));
        // The reserved bit does not make a stream.
        let buf = frame(kind, 0, 0x8000_0000, payload);
        assert_eq!(conn_err(&buf), (P, reason));
    }
}

#[test]
fn connection_frames_on_a_stream_are_protocol_errors() {
    let cases: [(u8, &[u8], &str); 3] = [
        (kind::SETTINGS, b"", "SETTINGS on a stream"),
        (kind::PING, &[0; 8], "PING on a stream"),
        (kind::GOAWAY, &[0; 8], "GOAWAY on a stream"),
    ];
    for (kind, payload, reason) in cases {
        assert_eq!(conn_err(&frame(kind, 0, 1, payload)), (P, reason));
        assert_eq!(conn_err(&frame(kind, flag::ACK, 7, payload)), (P, reason));
    }
}

#[test]
fn window_update_may_be_on_either() {
    for stream in [0, 1, MAX_WINDOW] {
        let mut buf = Vec::new();
        write_window_update(&mut buf, stream, 10);
        assert_eq!(
            parse_one(&buf),
            Frame::WindowUpdate {
                stream,
                increment: 10
            }
        );
    }
}

#[test]
fn padding_is_stripped() {
    let mut buf = Vec::new();
    write_data_padded(&mut buf, 1, b"hello", true, 3);
    assert_eq!(
        parse_one(&buf),
        Frame::Data {
            stream: 1,
            end_stream: true,
            data: b"hello",
            flow_len: 9
        }
    );
    let mut buf = Vec::new();
    write_headers(&mut buf, 3, b"block", false, true, None, Some(7));
    assert_eq!(
        parse_one(&buf),
        Frame::Headers {
            stream: 3,
            end_stream: false,
            end_headers: true,
            priority: None,
            fragment: b"block"
        }
    );
    let mut buf = Vec::new();
    write_push_promise_padded(&mut buf, 3, 2, b"block", false, 1);
    assert_eq!(
        parse_one(&buf),
        Frame::PushPromise {
            stream: 3,
            promised: 2,
            end_headers: false,
            fragment: b"block"
        }
    );
}

#[test]
fn padding_may_take_everything_after_the_fixed_fields() {
    // Pad length 4 in a 5-byte payload: no data, valid (§6.1 refuses only padding
    // of the payload's length or more).
    let buf = frame(kind::DATA, flag::PADDED, 1, &[4, 0, 0, 0, 0]);
    assert_eq!(
        parse_one(&buf),
        Frame::Data {
            stream: 1,
            end_stream: false,
            data: b"",
            flow_len: 5
        }
    );
    let mut buf = Vec::new();
    let priority = Priority {
        dependency: 0,
        exclusive: false,
        weight: 15,
    };
    write_headers(&mut buf, 1, b"", false, true, Some(priority), Some(255));
    assert!(matches!(
        parse_one(&buf),
        Frame::Headers { fragment: b"", .. }
    ));
    let mut buf = Vec::new();
    write_push_promise_padded(&mut buf, 1, 2, b"", true, 0);
    assert!(matches!(
        parse_one(&buf),
        Frame::PushPromise { fragment: b"", .. }
    ));
}

#[test]
fn padding_longer_than_the_payload_is_a_protocol_error() {
    let reason = "padding longer than the frame's payload";
    // DATA: pad length 5 in a 5-byte payload.
    let buf = frame(kind::DATA, flag::PADDED, 1, &[5, 0, 0, 0, 0]);
    assert_eq!(conn_err(&buf), (P, reason));
    let buf = frame(kind::DATA, flag::PADDED, 1, &[255]);
    assert_eq!(conn_err(&buf), (P, reason));
    // HEADERS: the padding may not eat into the priority fields.
    let flags = flag::PADDED | flag::PRIORITY | flag::END_HEADERS;
    let buf = frame(kind::HEADERS, flags, 1, &[1, 0, 0, 0, 0, 16]);
    assert_eq!(conn_err(&buf), (P, reason));
    let buf = frame(kind::HEADERS, flag::PADDED, 1, &[3, b'a', 0]);
    assert_eq!(conn_err(&buf), (P, reason));
    // PUSH_PROMISE: nor into the promised stream id.
    let buf = frame(kind::PUSH_PROMISE, flag::PADDED, 1, &[1, 0, 0, 0, 2]);
    assert_eq!(conn_err(&buf), (P, reason));
}

#[test]
fn padded_frames_without_a_pad_length_are_frame_size_errors() {
    let cases = [
        (kind::DATA, "padded DATA without a pad length"),
        (kind::HEADERS, "padded HEADERS without a pad length"),
        (
            kind::PUSH_PROMISE,
            "padded PUSH_PROMISE without a pad length",
        ),
    ];
    for (kind, reason) in cases {
        assert_eq!(conn_err(&frame(kind, flag::PADDED, 1, b"")), (FS, reason));
    }
}

#[test]
fn priority_of_the_wrong_length_is_a_stream_error() {
    for len in [0, 4, 6, 100] {
        let mut buf = frame(kind::PRIORITY, 0, 3, &vec![0; len]);
        let consumed = buf.len();
        // It waits for the whole frame, which it consumes.
        assert_eq!(parse(&buf[..consumed - 1], MAX), Ok(None));
        buf.extend_from_slice(&frame(kind::PING, 0, 0, &[0; 8]));
        assert_eq!(stream_err(&buf), (3, FS, "PRIORITY length not 5", consumed));
    }
}

#[test]
fn rst_stream_of_the_wrong_length_is_a_frame_size_error() {
    for len in [0, 3, 5] {
        let buf = frame(kind::RST_STREAM, 0, 1, &vec![0; len]);
        assert_eq!(conn_err(&buf[..HEAD_LEN]), (FS, "RST_STREAM length not 4"));
    }
}

#[test]
fn ping_of_the_wrong_length_is_a_frame_size_error() {
    for len in [0, 7, 9] {
        let buf = frame(kind::PING, flag::ACK, 0, &vec![0; len]);
        assert_eq!(conn_err(&buf), (FS, "PING length not 8"));
    }
}

#[test]
fn window_update_of_the_wrong_length_is_a_frame_size_error() {
    for (stream, len) in [(0, 3), (1, 5), (1, 0)] {
        let buf = frame(kind::WINDOW_UPDATE, 0, stream, &vec![1; len]);
        assert_eq!(conn_err(&buf), (FS, "WINDOW_UPDATE length not 4"));
    }
}

#[test]
fn settings_length_not_a_multiple_of_6_is_a_frame_size_error() {
    for len in [1, 5, 7, 13] {
        let buf = frame(kind::SETTINGS, 0, 0, &vec![0; len]);
        assert_eq!(conn_err(&buf), (FS, "SETTINGS length not a multiple of 6"));
    }
}

#[test]
fn settings_ack_with_a_payload_is_a_frame_size_error() {
    let buf = frame(kind::SETTINGS, flag::ACK, 0, &[0; 6]);
    assert_eq!(conn_err(&buf), (FS, "SETTINGS ACK with a payload"));
    let mut buf = Vec::new();
    write_settings_ack(&mut buf);
    assert!(matches!(parse_one(&buf), Frame::Settings { ack: true, params } if params.len() == 0));
}

#[test]
fn goaway_shorter_than_8_is_a_frame_size_error() {
    for len in [0, 4, 7] {
        let buf = frame(kind::GOAWAY, 0, 0, &vec![0; len]);
        assert_eq!(conn_err(&buf), (FS, "GOAWAY shorter than 8"));
    }
}

#[test]
fn headers_with_priority_too_short_for_it_is_a_frame_size_error() {
    let reason = "HEADERS with PRIORITY shorter than its priority fields";
    let buf = frame(kind::HEADERS, flag::PRIORITY, 1, &[0; 4]);
    assert_eq!(conn_err(&buf), (FS, reason));
    let buf = frame(kind::HEADERS, flag::PRIORITY | flag::PADDED, 1, &[0; 5]);
    assert_eq!(conn_err(&buf), (FS, reason));
    // Exactly the fields: an empty fragment.
    let buf = frame(kind::HEADERS, flag::PRIORITY, 1, &[0, 0, 0, 0, 9]);
    assert!(matches!(
        parse_one(&buf),
        Frame::Headers { fragment: b"", .. }
    ));
}

#[test]
fn push_promise_too_short_for_its_promised_stream_is_a_frame_size_error() {
    let reason = "PUSH_PROMISE shorter than its promised stream id";
    assert_eq!(
        conn_err(&frame(kind::PUSH_PROMISE, 0, 1, &[0; 3])),
        (FS, reason)
    );
    let buf = frame(kind::PUSH_PROMISE, flag::PADDED, 1, &[0; 4]);
    assert_eq!(conn_err(&buf), (FS, reason));
}

#[test]
fn push_promise_of_stream_0_is_a_protocol_error() {
    let buf = frame(kind::PUSH_PROMISE, 0, 1, &[0x80, 0, 0, 0]);
    assert_eq!(conn_err(&buf), (P, "PUSH_PROMISE promising stream 0"));
}

#[test]
fn window_update_of_0_is_an_error_on_its_window() {
    let buf = frame(kind::WINDOW_UPDATE, 0, 0, &[0; 4]);
    assert_eq!(conn_err(&buf), (P, "WINDOW_UPDATE of 0 on the connection"));
    let buf = frame(kind::WINDOW_UPDATE, 0, 5, &[0; 4]);
    assert_eq!(
        stream_err(&buf),
        (5, P, "WINDOW_UPDATE of 0 on a stream", 13)
    );
    // The reserved bit is ignored: set alone it is an increment of 0, with 1 it is 1.
    let buf = frame(kind::WINDOW_UPDATE, 0, 5, &[0x80, 0, 0, 0]);
    assert_eq!(stream_err(&buf).1, P);
    let buf = frame(kind::WINDOW_UPDATE, 0, 0, &[0x80, 0, 0, 1]);
    assert_eq!(
        parse_one(&buf),
        Frame::WindowUpdate {
            stream: 0,
            increment: 1
        }
    );
}

#[test]
fn a_stream_depending_on_itself_is_refused() {
    let own = Priority {
        dependency: 7,
        exclusive: true,
        weight: 0,
    };
    let mut buf = Vec::new();
    write_priority(&mut buf, 7, own);
    assert_eq!(
        stream_err(&buf),
        (7, P, "PRIORITY depending on its own stream", 14)
    );
    // HEADERS: a connection error, as its field block cannot be dropped.
    let mut buf = Vec::new();
    write_headers(&mut buf, 7, b"x", true, true, Some(own), None);
    assert_eq!(conn_err(&buf), (P, "HEADERS depending on its own stream"));
    // On another stream it is fine.
    let mut buf = Vec::new();
    write_priority(&mut buf, 9, own);
    assert_eq!(
        parse_one(&buf),
        Frame::Priority {
            stream: 9,
            priority: own
        }
    );
}

#[test]
fn unknown_flags_are_ignored() {
    let buf = frame(kind::DATA, !flag::PADDED, 1, b"abc");
    assert_eq!(
        parse_one(&buf),
        Frame::Data {
            stream: 1,
            end_stream: true,
            data: b"abc",
            flow_len: 3
        }
    );
    let buf = frame(kind::PING, 0xfe, 0, &[9; 8]);
    assert_eq!(
        parse_one(&buf),
        Frame::Ping {
            ack: false,
            data: [9; 8]
        }
    );
    let buf = frame(kind::CONTINUATION, 0xff, 1, b"c");
    assert!(matches!(
        parse_one(&buf),
        Frame::Continuation {
            end_headers: true,
            fragment: b"c",
            ..
        }
    ));
    // PADDED and PRIORITY mean nothing on a CONTINUATION, nor PADDED on a SETTINGS.
    let buf = frame(kind::SETTINGS, flag::PADDED, 0, &[]);
    assert!(matches!(
        parse_one(&buf),
        Frame::Settings { ack: false, .. }
    ));
}

#[test]
fn unknown_types_are_skipped() {
    let mut buf = frame(0xfa, 0xff, 0, b"whatever is in it");
    let first = buf.len();
    buf.extend_from_slice(&frame(0x0a, 0, 3, b""));
    assert_eq!(
        parse(&buf, MAX),
        Ok(Some((
            Frame::Unknown {
                kind: 0xfa,
                stream: 0
            },
            first
        )))
    );
    assert_eq!(
        parse(&buf[first..], MAX),
        Ok(Some((
            Frame::Unknown {
                kind: 0x0a,
                stream: 3
            },
            HEAD_LEN
        )))
    );
}

#[test]
fn settings_defaults_are_the_rfcs() {
    let s = Settings::default();
    assert_eq!(s.header_table_size, 4096);
    assert!(s.enable_push);
    assert_eq!(s.max_concurrent_streams, None);
    assert_eq!(s.initial_window_size, 65_535);
    assert_eq!(s.max_frame_size, 16_384);
    assert_eq!(s.max_header_list_size, None);
    assert!(!s.enable_connect_protocol);
}

fn settings_params(params: &[(u16, u32)]) -> Vec<u8> {
    let mut buf = Vec::new();
    write_settings(&mut buf, params);
    buf
}

fn apply(params: &[(u16, u32)]) -> Result<Settings, FrameError> {
    let buf = settings_params(params);
    let Frame::Settings { ack: false, params } = parse_one(&buf) else {
        panic!()
    };
    let mut s = Settings::default();
    s.apply(params).map(|()| s)
}

#[test]
fn settings_apply_sets_every_known_value_and_ignores_unknown_ids() {
    let s = apply(&[
        (SETTINGS_HEADER_TABLE_SIZE, 0),
        (SETTINGS_ENABLE_PUSH, 0),
        (SETTINGS_MAX_CONCURRENT_STREAMS, 100),
        (SETTINGS_INITIAL_WINDOW_SIZE, MAX_WINDOW),
        (SETTINGS_MAX_FRAME_SIZE, MAX_MAX_FRAME_SIZE),
        (SETTINGS_MAX_HEADER_LIST_SIZE, 8192),
        (SETTINGS_ENABLE_CONNECT_PROTOCOL, 1),
        (0x9, 1),
        (0xffff, 0xffff_ffff),
        (0, 7),
    ])
    .unwrap();
    assert_eq!(
        s,
        Settings {
            header_table_size: 0,
            enable_push: false,
            max_concurrent_streams: Some(100),
            initial_window_size: MAX_WINDOW,
            max_frame_size: MAX_MAX_FRAME_SIZE,
            max_header_list_size: Some(8192),
            enable_connect_protocol: true,
        }
    );
    // In order: the last value for an id wins.
    let s = apply(&[
        (SETTINGS_MAX_FRAME_SIZE, 20_000),
        (SETTINGS_MAX_FRAME_SIZE, 16_384),
    ]);
    assert_eq!(s.unwrap().max_frame_size, 16_384);
}

#[test]
fn settings_enable_push_not_0_or_1_is_a_protocol_error() {
    assert_eq!(
        apply(&[(SETTINGS_ENABLE_PUSH, 2)]),
        Err(conn(P, "SETTINGS_ENABLE_PUSH not 0 or 1"))
    );
    assert!(apply(&[(SETTINGS_ENABLE_PUSH, 1)]).unwrap().enable_push);
}

#[test]
fn settings_initial_window_size_over_the_max_is_a_flow_control_error() {
    assert_eq!(
        apply(&[(SETTINGS_INITIAL_WINDOW_SIZE, MAX_WINDOW + 1)]),
        Err(conn(
            ErrorCode::FLOW_CONTROL_ERROR,
            "SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1"
        ))
    );
}

#[test]
fn settings_max_frame_size_out_of_range_is_a_protocol_error() {
    for v in [0, 16_383, MAX_MAX_FRAME_SIZE + 1, u32::MAX] {
        assert_eq!(
            apply(&[(SETTINGS_MAX_FRAME_SIZE, v)]),
            Err(conn(P, "SETTINGS_MAX_FRAME_SIZE outside 2^14..=2^24-1"))
        );
    }
}

#[test]
fn settings_enable_connect_protocol_not_0_or_1_is_a_protocol_error() {
    assert_eq!(
        apply(&[(SETTINGS_ENABLE_CONNECT_PROTOCOL, 2)]),
        Err(conn(P, "SETTINGS_ENABLE_CONNECT_PROTOCOL not 0 or 1"))
    );
}

#[test]
fn settings_apply_is_all_or_nothing() {
    let buf = settings_params(&[(SETTINGS_HEADER_TABLE_SIZE, 1), (SETTINGS_ENABLE_PUSH, 9)]);
    let Frame::Settings { params, .. } = parse_one(&buf) else {
        panic!()
    };
    let mut s = Settings::default();
    assert!(s.apply(params).is_err());
    assert_eq!(s, Settings::default());
}

#[test]
fn every_frame_type_round_trips() {
    let priority = Priority {
        dependency: 0x7fff_fffe,
        exclusive: true,
        weight: 255,
    };
    let mut out = Vec::new();
    let mut expect = Vec::new();
    write_data(&mut out, 1, b"body", true);
    expect.push(format!(
        "{:?}",
        Frame::Data {
            stream: 1,
            end_stream: true,
            data: b"body",
            flow_len: 4
        }
    ));
    write_data_head(&mut out, 3, 2, false);
    out.extend_from_slice(b"hi");
    expect.push(format!(
        "{:?}",
        Frame::Data {
            stream: 3,
            end_stream: false,
            data: b"hi",
            flow_len: 2
        }
    ));
    write_headers(&mut out, 5, b"hpack", true, false, Some(priority), None);
    expect.push(format!(
        "{:?}",
        Frame::Headers {
            stream: 5,
            end_stream: true,
            end_headers: false,
            priority: Some(priority),
            fragment: b"hpack"
        }
    ));
    let mark = begin_headers(&mut out);
    out.extend_from_slice(b"block");
    finish_headers(&mut out, mark, 7, false, MAX);
    expect.push(format!(
        "{:?}",
        Frame::Headers {
            stream: 7,
            end_stream: false,
            end_headers: true,
            priority: None,
            fragment: b"block"
        }
    ));
    write_priority(&mut out, 9, priority);
    expect.push(format!(
        "{:?}",
        Frame::Priority {
            stream: 9,
            priority
        }
    ));
    write_rst_stream(&mut out, 11, ErrorCode::CANCEL);
    expect.push(format!(
        "{:?}",
        Frame::RstStream {
            stream: 11,
            code: ErrorCode::CANCEL
        }
    ));
    write_settings(
        &mut out,
        &[(SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20), (0xabcd, 7)],
    );
    expect.push("Settings { ack: false, params: [(4, 1048576), (43981, 7)] }".into());
    write_settings_ack(&mut out);
    expect.push("Settings { ack: true, params: [] }".into());
    write_push_promise(&mut out, 13, 2, b"promise", true);
    expect.push(format!(
        "{:?}",
        Frame::PushPromise {
            stream: 13,
            promised: 2,
            end_headers: true,
            fragment: b"promise"
        }
    ));
    write_ping(&mut out, false, *b"12345678");
    expect.push(format!(
        "{:?}",
        Frame::Ping {
            ack: false,
            data: *b"12345678"
        }
    ));
    write_ping(&mut out, true, [0xff; 8]);
    expect.push(format!(
        "{:?}",
        Frame::Ping {
            ack: true,
            data: [0xff; 8]
        }
    ));
    write_goaway(&mut out, 15, ErrorCode::ENHANCE_YOUR_CALM, b"calm down");
    expect.push(format!(
        "{:?}",
        Frame::GoAway {
            last_stream: 15,
            code: ErrorCode::ENHANCE_YOUR_CALM,
            debug: b"calm down"
        }
    ));
    write_goaway(&mut out, 0, ErrorCode::NO_ERROR, b"");
    expect.push(format!(
        "{:?}",
        Frame::GoAway {
            last_stream: 0,
            code: ErrorCode::NO_ERROR,
            debug: b""
        }
    ));
    write_window_update(&mut out, 0, MAX_WINDOW);
    expect.push(format!(
        "{:?}",
        Frame::WindowUpdate {
            stream: 0,
            increment: MAX_WINDOW
        }
    ));
    write_continuation(&mut out, 5, b"more", true);
    expect.push(format!(
        "{:?}",
        Frame::Continuation {
            stream: 5,
            end_headers: true,
            fragment: b"more"
        }
    ));
    write_frame(&mut out, 0x42, 0, 17, b"ext");
    expect.push(format!(
        "{:?}",
        Frame::Unknown {
            kind: 0x42,
            stream: 17
        }
    ));

    let mut rest = &out[..];
    let mut got = Vec::new();
    while let Some((frame, n)) = parse(rest, MAX).unwrap() {
        got.push(format!("{frame:?}"));
        rest = &rest[n..];
    }
    assert!(rest.is_empty());
    assert_eq!(got, expect);
}

#[test]
fn writers_unset_the_reserved_bit() {
    let mut out = Vec::new();
    write_window_update(&mut out, 0x8000_0001, 0x8000_0002);
    assert_eq!(&out[5..], &[0, 0, 0, 1, 0, 0, 0, 2]);
    let mut out = Vec::new();
    write_goaway(&mut out, u32::MAX, ErrorCode::NO_ERROR, b"");
    assert_eq!(&out[9..13], &[0x7f, 0xff, 0xff, 0xff]);
}

/// Parses all of `buf` into frames (must be valid and complete).
fn parse_all(buf: &[u8], max: u32) -> Vec<Frame<'_>> {
    let mut rest = buf;
    let mut frames = Vec::new();
    while !rest.is_empty() {
        let (frame, n) = parse(rest, max).unwrap().expect("complete");
        frames.push(frame);
        rest = &rest[n..];
    }
    frames
}

/// A header block written through begin/finish_headers after some other frame, re-parsed:
/// the HEADERS + CONTINUATIONs, checked for flags and lengths, and their fragments joined.
fn split_block(len: usize, max: u32, end_stream: bool) -> usize {
    let block: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let mut out = Vec::new();
    write_ping(&mut out, false, [1; 8]);
    let mark = begin_headers(&mut out);
    out.extend_from_slice(&block);
    finish_headers(&mut out, mark, 3, end_stream, max);
    write_ping(&mut out, true, [2; 8]);

    let frames = parse_all(&out, MAX_MAX_FRAME_SIZE);
    assert_eq!(
        frames[0],
        Frame::Ping {
            ack: false,
            data: [1; 8]
        }
    );
    assert_eq!(
        frames[frames.len() - 1],
        Frame::Ping {
            ack: true,
            data: [2; 8]
        }
    );
    let block_frames = &frames[1..frames.len() - 1];
    let mut joined = Vec::new();
    for (i, frame) in block_frames.iter().enumerate() {
        let last = i == block_frames.len() - 1;
        let fragment = match *frame {
            Frame::Headers {
                stream: 3,
                end_stream: es,
                end_headers,
                priority: None,
                fragment,
            } if i == 0 => {
                assert_eq!(es, end_stream);
                assert_eq!(end_headers, last);
                fragment
            }
            Frame::Continuation {
                stream: 3,
                end_headers,
                fragment,
            } if i > 0 => {
                assert_eq!(end_headers, last);
                fragment
            }
            ref other => panic!("frame {i}: {other:?}"),
        };
        // Every frame but the last is full.
        if last {
            assert!(!fragment.is_empty() || len == 0);
            assert!(fragment.len() <= max as usize);
        } else {
            assert_eq!(fragment.len(), max as usize);
        }
        joined.extend_from_slice(fragment);
    }
    assert_eq!(joined, block);
    assert_eq!(out.len(), 2 * 17 + block_frames.len() * HEAD_LEN + len);
    block_frames.len()
}

#[test]
fn finish_headers_fits_a_block_at_the_limit_in_one_frame() {
    assert_eq!(split_block(0, MAX, true), 1);
    assert_eq!(split_block(100, MAX, false), 1);
    assert_eq!(split_block(MAX as usize, MAX, true), 1);
}

#[test]
fn finish_headers_splits_a_block_one_byte_over() {
    assert_eq!(split_block(MAX as usize + 1, MAX, true), 2);
    assert_eq!(split_block(2 * MAX as usize, MAX, false), 2);
    assert_eq!(split_block(2 * MAX as usize + 1, MAX, false), 3);
}

#[test]
fn finish_headers_splits_a_block_many_times_over() {
    assert_eq!(split_block(10 * MAX as usize + 77, MAX, true), 11);
    // Small limits (the clamp keeps 0 from looping).
    assert_eq!(split_block(1000, 1, false), 1000);
    assert_eq!(split_block(1000, 7, true), 143);
    let mut out = Vec::new();
    let mark = begin_headers(&mut out);
    out.extend_from_slice(b"ab");
    finish_headers(&mut out, mark, 1, false, 0);
    assert_eq!(parse_all(&out, 1).len(), 2);
}

/// A buffer of many valid frames of every type.
fn many_frames() -> Vec<u8> {
    let mut out = Vec::new();
    write_settings(&mut out, &[(SETTINGS_MAX_CONCURRENT_STREAMS, 100)]);
    write_settings_ack(&mut out);
    write_window_update(&mut out, 0, 1 << 20);
    let priority = Priority {
        dependency: 1,
        exclusive: false,
        weight: 3,
    };
    write_headers(&mut out, 3, b"abc", false, false, Some(priority), Some(2));
    write_continuation(&mut out, 3, b"def", true);
    write_data_padded(&mut out, 3, b"data", false, 5);
    write_data(&mut out, 3, b"", true);
    write_priority(&mut out, 5, priority);
    write_frame(&mut out, 0xbb, 0, 0, b"unknown");
    write_rst_stream(&mut out, 3, ErrorCode::CANCEL);
    write_push_promise_padded(&mut out, 1, 2, b"pp", true, 1);
    write_ping(&mut out, false, [7; 8]);
    let mark = begin_headers(&mut out);
    out.extend_from_slice(&[b'h'; 40]);
    finish_headers(&mut out, mark, 7, true, 16);
    write_goaway(&mut out, 7, ErrorCode::NO_ERROR, b"bye");
    out
}

#[test]
fn parsing_every_prefix_gives_the_complete_frames_then_none() {
    let buf = many_frames();
    let mut full = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let (frame, n) = parse(&buf[at..], 16).unwrap().unwrap();
        at += n;
        full.push((frame, at));
    }
    assert_eq!(full.len(), 16);
    for cut in 0..=buf.len() {
        let prefix = &buf[..cut];
        let mut at = 0;
        let mut got = 0;
        while let Some((frame, n)) = parse(&prefix[at..], 16).unwrap() {
            at += n;
            assert_eq!((&frame, at), (&full[got].0, full[got].1), "cut {cut}");
            got += 1;
        }
        // Every frame that ends within the prefix, and no more.
        assert_eq!(
            got,
            full.iter().filter(|(_, end)| *end <= cut).count(),
            "cut {cut}"
        );
    }
}

#[test]
fn frame_helpers() {
    let e = conn(P, "x");
    assert_eq!((e.code(), e.reason()), (P, "x"));
    let head = parse_head(&[0, 0, 5, 0, 0, 0, 0, 0, 1]);
    assert_eq!(head.frame_len(), 14);
    let params = SettingsParams::new(&[0, 1, 0, 0, 0, 2, 0, 3]);
    assert_eq!(params.collect::<Vec<_>>(), [(1, 2)]);
}

// Generated frames, written and parsed back.
#[derive(Debug, Clone)]
enum Gen {
    Data(u32, bool, Vec<u8>, Option<u8>),
    Headers(u32, bool, bool, Option<Priority>, Option<u8>, Vec<u8>),
    Priority(u32, Priority),
    RstStream(u32, u32),
    Settings(Vec<(u16, u32)>),
    SettingsAck,
    PushPromise(u32, u32, bool, Option<u8>, Vec<u8>),
    Ping(bool, [u8; 8]),
    GoAway(u32, u32, Vec<u8>),
    WindowUpdate(u32, u32),
    Continuation(u32, bool, Vec<u8>),
    Unknown(u8, u8, u32, Vec<u8>),
}

fn stream_id() -> impl Strategy<Value = u32> {
    1..=MAX_WINDOW
}

fn priority_not_on(stream: u32) -> impl Strategy<Value = Priority> {
    (0..=MAX_WINDOW, any::<bool>(), any::<u8>()).prop_map(move |(d, exclusive, weight)| Priority {
        dependency: if d == stream { d - 1 } else { d },
        exclusive,
        weight,
    })
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..64)
}

fn gen_frame() -> impl Strategy<Value = Gen> {
    prop_oneof![
        (stream_id(), any::<bool>(), bytes(), any::<Option<u8>>())
            .prop_map(|(s, e, d, p)| Gen::Data(s, e, d, p)),
        stream_id()
            .prop_flat_map(|s| (
                Just(s),
                any::<bool>(),
                any::<bool>(),
                proptest::option::of(priority_not_on(s)),
                any::<Option<u8>>(),
                bytes()
            ))
            .prop_map(|(s, es, eh, pr, pad, b)| Gen::Headers(s, es, eh, pr, pad, b)),
        stream_id()
            .prop_flat_map(|s| (Just(s), priority_not_on(s)))
            .prop_map(|(s, p)| Gen::Priority(s, p)),
        (stream_id(), any::<u32>()).prop_map(|(s, c)| Gen::RstStream(s, c)),
        proptest::collection::vec(any::<(u16, u32)>(), 0..8).prop_map(Gen::Settings),
        Just(Gen::SettingsAck),
        (
            stream_id(),
            stream_id(),
            any::<bool>(),
            any::<Option<u8>>(),
            bytes()
        )
            .prop_map(|(s, p, e, pad, b)| Gen::PushPromise(s, p, e, pad, b)),
        (any::<bool>(), any::<[u8; 8]>()).prop_map(|(a, d)| Gen::Ping(a, d)),
        (0..=MAX_WINDOW, any::<u32>(), bytes()).prop_map(|(l, c, d)| Gen::GoAway(l, c, d)),
        (0..=MAX_WINDOW, 1..=MAX_WINDOW).prop_map(|(s, i)| Gen::WindowUpdate(s, i)),
        (stream_id(), any::<bool>(), bytes()).prop_map(|(s, e, b)| Gen::Continuation(s, e, b)),
        (10..=255u8, any::<u8>(), any::<u32>(), bytes())
            .prop_map(|(k, f, s, b)| Gen::Unknown(k, f, s, b)),
    ]
}

fn write_gen(out: &mut Vec<u8>, g: &Gen) {
    match g {
        Gen::Data(s, e, d, None) => write_data(out, *s, d, *e),
        Gen::Data(s, e, d, Some(pad)) => write_data_padded(out, *s, d, *e, *pad),
        Gen::Headers(s, es, eh, pr, pad, b) => write_headers(out, *s, b, *es, *eh, *pr, *pad),
        Gen::Priority(s, p) => write_priority(out, *s, *p),
        Gen::RstStream(s, c) => write_rst_stream(out, *s, ErrorCode(*c)),
        Gen::Settings(params) => write_settings(out, params),
        Gen::SettingsAck => write_settings_ack(out),
        Gen::PushPromise(s, p, e, None, b) => write_push_promise(out, *s, *p, b, *e),
        Gen::PushPromise(s, p, e, Some(pad), b) => {
            write_push_promise_padded(out, *s, *p, b, *e, *pad)
        }
        Gen::Ping(a, d) => write_ping(out, *a, *d),
        Gen::GoAway(l, c, d) => write_goaway(out, *l, ErrorCode(*c), d),
        Gen::WindowUpdate(s, i) => write_window_update(out, *s, *i),
        Gen::Continuation(s, e, b) => write_continuation(out, *s, b, *e),
        Gen::Unknown(k, f, s, b) => write_frame(out, *k, *f, *s, b),
    }
}

fn check_gen(g: &Gen, f: &Frame<'_>) {
    match (g, f) {
        (
            Gen::Data(s, e, d, pad),
            Frame::Data {
                stream,
                end_stream,
                data,
                flow_len,
            },
        ) => {
            assert_eq!((s, e, &d[..]), (stream, end_stream, *data));
            let pad_len = pad.map_or(0, |p| 1 + u32::from(p));
            assert_eq!(*flow_len, d.len() as u32 + pad_len);
        }
        (
            Gen::Headers(s, es, eh, pr, _, b),
            Frame::Headers {
                stream,
                end_stream,
                end_headers,
                priority,
                fragment,
            },
        ) => assert_eq!(
            (s, es, eh, pr, &b[..]),
            (stream, end_stream, end_headers, priority, *fragment)
        ),
        (Gen::Priority(s, p), Frame::Priority { stream, priority }) => {
            assert_eq!((s, p), (stream, priority))
        }
        (Gen::RstStream(s, c), Frame::RstStream { stream, code }) => {
            assert_eq!((s, c), (stream, &code.0))
        }
        (
            Gen::Settings(params),
            Frame::Settings {
                ack: false,
                params: got,
            },
        ) => {
            assert_eq!(&(*got).collect::<Vec<_>>(), params)
        }
        (Gen::SettingsAck, Frame::Settings { ack: true, params }) => assert_eq!(params.len(), 0),
        (
            Gen::PushPromise(s, p, e, _, b),
            Frame::PushPromise {
                stream,
                promised,
                end_headers,
                fragment,
            },
        ) => assert_eq!(
            (s, p, e, &b[..]),
            (stream, promised, end_headers, *fragment)
        ),
        (Gen::Ping(a, d), Frame::Ping { ack, data }) => assert_eq!((a, d), (ack, data)),
        (
            Gen::GoAway(l, c, d),
            Frame::GoAway {
                last_stream,
                code,
                debug,
            },
        ) => {
            assert_eq!((l, c, &d[..]), (last_stream, &code.0, *debug))
        }
        (Gen::WindowUpdate(s, i), Frame::WindowUpdate { stream, increment }) => {
            assert_eq!((s, i), (stream, increment))
        }
        (
            Gen::Continuation(s, e, b),
            Frame::Continuation {
                stream,
                end_headers,
                fragment,
            },
        ) => {
            assert_eq!((s, e, &b[..]), (stream, end_headers, *fragment))
        }
        (Gen::Unknown(k, _, s, _), Frame::Unknown { kind, stream }) => {
            assert_eq!((k, s & MAX_WINDOW), (kind, *stream))
        }
        _ => panic!("{g:?} parsed as {f:?}"),
    }
}

proptest! {
    #[test]
    fn random_bytes_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..256), max in any::<u32>()) {
        match parse(&buf, max) {
            Ok(Some((_, consumed))) => prop_assert!(consumed >= HEAD_LEN && consumed <= buf.len()),
            Err(FrameError::Stream { consumed, .. }) => prop_assert!(consumed <= buf.len()),
            Ok(None) | Err(FrameError::Connection { .. }) => {}
        }
    }

    /// Random payloads under well-formed heads of every type and flag, so the payload
    /// checks are reached.
    #[test]
    fn random_frames_never_panic(
        kind in 0..12u8,
        flags in any::<u8>(),
        stream in prop_oneof![Just(0u32), 1..4u32, any::<u32>()],
        payload in proptest::collection::vec(any::<u8>(), 0..40),
        extra in 0..3usize,
    ) {
        let mut buf = frame(kind, flags, stream, &payload);
        let whole = buf.len();
        buf.resize(whole + extra, 0);
        match parse(&buf, MAX) {
            Ok(Some((frame, consumed))) => {
                prop_assert_eq!(consumed, whole);
                if let Frame::Settings { params, .. } = frame {
                    let _ = Settings::default().apply(params);
                }
            }
            Err(FrameError::Stream { consumed, .. }) => prop_assert_eq!(consumed, whole),
            Ok(None) => prop_assert!(false, "complete frame reported incomplete"),
            Err(FrameError::Connection { .. }) => {}
        }
        // Any prefix is incomplete, or the same connection error as soon as the head is in.
        let full = parse(&buf, MAX);
        for cut in 0..whole {
            match parse(&buf[..cut], MAX) {
                Ok(None) => {}
                Err(e @ FrameError::Connection { .. }) => prop_assert_eq!(Some(&e), full.as_ref().err()),
                other => prop_assert!(false, "cut {}: {:?}", cut, other),
            }
        }
    }

    #[test]
    fn written_frames_parse_back(frames in proptest::collection::vec(gen_frame(), 1..8)) {
        let mut out = Vec::new();
        for g in &frames {
            write_gen(&mut out, g);
        }
        let parsed = parse_all(&out, MAX);
        prop_assert_eq!(parsed.len(), frames.len());
        for (g, f) in frames.iter().zip(&parsed) {
            check_gen(g, f);
        }
    }

    #[test]
    fn header_blocks_split_and_join(len in 0..3000usize, max in 1..600u32, end_stream in any::<bool>()) {
        let n = split_block(len, max, end_stream);
        prop_assert_eq!(n, len.div_ceil(max as usize).max(1));
    }
}
