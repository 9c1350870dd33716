//! Flow control, limits, floods, timeouts and shutdown: each bound at its edge.

use super::*;

#[test]
fn a_request_body_reaches_the_sink_and_reopens_the_window_as_it_is_read() {
    let mut t = T::open();
    let fields = post(56_000);
    let h = t.headers(1, &as_refs(&fields), false);
    t.recv(&h);
    assert_eq!(
        t.d.requests[0].2,
        Some(NewBody {
            length: Some(56_000)
        })
    );
    let mut data = Vec::new();
    for b in [7, 8, 9] {
        frame::write_data(&mut data, 1, &[b; 16_000], false);
    }
    t.recv(&data);
    let sink = t.d.sink(1);
    assert_eq!(sink.lock().unwrap().data.len(), 48_000);
    // Nothing read yet: no WINDOW_UPDATE.
    t.end_round();
    assert_eq!(t.take(), vec![]);
    // Less than half the window read: still none (updates are batched).
    sink.lock().unwrap().consumed = 32_000;
    t.end_round();
    assert_eq!(t.take(), vec![]);
    // Past half: the stream's window reopens by all that was read, and no more than was
    // delivered.
    sink.lock().unwrap().consumed = 100_000;
    t.end_round();
    assert_eq!(
        t.take(),
        vec![Got::WindowUpdate {
            stream: 1,
            increment: 48_000
        }]
    );
    let mut last = Vec::new();
    frame::write_data(&mut last, 1, &[9; 8_000], true);
    t.recv(&last);
    let log = sink.lock().unwrap();
    assert_eq!(log.data.len(), 56_000);
    assert!(matches!(log.finished, Some(None)));
}

#[test]
fn the_connection_window_reopens_once_half_of_it_is_read() {
    let mut cfg = ServerConfig::default();
    cfg.http2.initial_connection_window = 100_000;
    cfg.http2.initial_stream_window = 60_000;
    let mut t = T::open_with(cfg);
    let mut input = Vec::new();
    for id in [1, 3] {
        let fields = post(100_000);
        input.extend(t.headers(id, &as_refs(&fields), false));
        frame::write_data(&mut input, id, &[1; 16_000], false);
        frame::write_data(&mut input, id, &[1; 16_000], false);
    }
    t.recv(&input);
    t.take();
    for id in [1, 3] {
        t.d.sink(id).lock().unwrap().consumed = 32_000;
    }
    t.end_round();
    let got = t.take();
    assert!(
        got.contains(&Got::WindowUpdate {
            stream: 1,
            increment: 32_000
        }),
        "{got:?}"
    );
    assert!(
        got.contains(&Got::WindowUpdate {
            stream: 3,
            increment: 32_000
        }),
        "{got:?}"
    );
    assert!(
        got.contains(&Got::WindowUpdate {
            stream: 0,
            increment: 64_000
        }),
        "{got:?}"
    );
    // Beyond the connection window (100,000, 64,000 given back): a connection error.
    let mut flood = Vec::new();
    for _ in 0..7 {
        frame::write_data(&mut flood, 1, &[1; 16_000], false);
        frame::write_data(&mut flood, 3, &[1; 16_000], false);
    }
    t.recv(&flood);
    assert!(t.take().iter().any(goaway(ErrorCode::FLOW_CONTROL_ERROR)));
}

#[test]
fn data_beyond_the_stream_window_resets_the_stream() {
    let mut cfg = ServerConfig::default();
    cfg.http2.initial_stream_window = 100;
    let mut t = T::open_with(cfg);
    let fields = post(1_000);
    let h = t.headers(1, &as_refs(&fields), false);
    t.recv(&h);
    let mut data = Vec::new();
    frame::write_data(&mut data, 1, &[1; 100], false);
    t.recv(&data);
    assert_eq!(t.take(), vec![], "exactly the window is fine");
    let mut more = Vec::new();
    frame::write_data(&mut more, 1, &[1; 1], false);
    t.recv(&more);
    assert_eq!(
        t.take(),
        vec![Got::Rst {
            stream: 1,
            code: ErrorCode::FLOW_CONTROL_ERROR
        }]
    );
    assert_eq!(
        t.d.sink(1).lock().unwrap().failed,
        Some(BodyFailure::Incomplete)
    );
}

#[test]
fn a_header_list_over_the_limit_gets_431_and_the_connection_goes_on() {
    let mut cfg = ServerConfig::default();
    cfg.http2.max_header_list_size = 200;
    let mut t = T::open_with(cfg);
    let big = "v".repeat(100);
    let mut fields = GET.to_vec();
    fields.push(("x-big", &big));
    let h = t.headers(1, &fields, true);
    t.recv(&h);
    let got = t.take();
    let Got::Headers {
        stream: 1,
        end_stream: true,
        fields,
    } = &got[0]
    else {
        panic!("{got:?}")
    };
    assert_eq!(fields[0], (":status".into(), "431".into()));
    assert!(t.d.requests.is_empty());
    let get = t.get(3);
    t.recv(&get);
    assert_eq!(t.d.requests.len(), 1);
}

#[test]
fn a_continuation_flood_is_cut_off_at_max_header_list_size() {
    let mut cfg = ServerConfig::default();
    cfg.http2.max_header_list_size = 1_000;
    let mut t = T::open_with(cfg);
    let mut input = Vec::new();
    frame::write_headers(&mut input, 1, &[0x82], false, false, None, None);
    // 999 bytes in all: still within the bound.
    for _ in 0..9 {
        frame::write_continuation(&mut input, 1, &[0x82; 111], false);
    }
    t.recv(&input);
    assert!(!t.take().iter().any(goaway(ErrorCode::ENHANCE_YOUR_CALM)));
    let mut one_more = Vec::new();
    frame::write_continuation(&mut one_more, 1, &[0x82; 2], false);
    t.recv(&one_more);
    assert!(t.take().iter().any(goaway(ErrorCode::ENHANCE_YOUR_CALM)));
}

#[test]
fn the_clients_goaway_keeps_the_connection_until_its_eof() {
    let mut t = T::open();
    let mut input = Vec::new();
    frame::write_goaway(&mut input, 0, ErrorCode::NO_ERROR, b"");
    t.recv(&input);
    assert!(!t.end_round().close);
    let mut ping = Vec::new();
    frame::write_ping(&mut ping, false, [3; 8]);
    t.recv(&ping);
    assert_eq!(
        t.take(),
        vec![Got::Ping {
            ack: true,
            data: [3; 8]
        }]
    );
    // No new streams after it.
    let h = t.get(1);
    t.recv(&h);
    assert!(t.d.requests.is_empty());
    t.conn.peer_closed();
    assert!(t.end_round().close);
}

#[test]
fn streams_over_max_concurrent_are_refused() {
    let mut cfg = ServerConfig::default();
    cfg.http2.max_concurrent_streams = 3;
    let mut t = T::open_with(cfg);
    let mut input = Vec::new();
    for id in [1, 3, 5, 7] {
        input.extend(t.get(id));
    }
    t.recv(&input);
    assert_eq!(t.d.requests.len(), 3);
    assert_eq!(
        t.take(),
        vec![Got::Rst {
            stream: 7,
            code: ErrorCode::REFUSED_STREAM
        }]
    );
    // Once one finishes, a new one is taken.
    t.respond_all(204, b"");
    t.take();
    let h = t.get(9);
    t.recv(&h);
    assert_eq!(t.d.requests.len(), 4);
}

#[test]
fn rapid_resets_end_the_connection_past_max_resets() {
    let mut cfg = ServerConfig::default();
    cfg.http2.max_resets = 10;
    let mut t = T::open_with(cfg);
    let mut input = Vec::new();
    for i in 0..10u32 {
        let id = 2 * i + 1;
        input.extend(t.get(id));
        frame::write_rst_stream(&mut input, id, ErrorCode::CANCEL);
    }
    t.recv(&input);
    assert_eq!(t.conn.streams(), 0, "reset streams are dropped at once");
    assert!(!t.take().iter().any(goaway(ErrorCode::ENHANCE_YOUR_CALM)));
    let mut one_more = t.get(21);
    frame::write_rst_stream(&mut one_more, 21, ErrorCode::CANCEL);
    t.recv(&one_more);
    assert!(t.take().iter().any(goaway(ErrorCode::ENHANCE_YOUR_CALM)));
}

#[test]
fn resets_spread_over_time_are_fine() {
    let mut cfg = ServerConfig::default();
    cfg.http2.max_resets = 10;
    cfg.http2.reset_window = Duration::from_secs(1);
    let mut t = T::open_with(cfg);
    for i in 0..30u32 {
        let id = 2 * i + 1;
        let mut input = t.get(id);
        frame::write_rst_stream(&mut input, id, ErrorCode::CANCEL);
        t.recv(&input);
        t.now += Duration::from_millis(200);
    }
    assert!(!t.take().iter().any(goaway(ErrorCode::ENHANCE_YOUR_CALM)));
}

#[test]
fn a_ping_flood_is_cut_off_at_max_idle_frames() {
    let mut cfg = ServerConfig::default();
    cfg.http2.max_idle_frames = 50;
    let mut t = T::open_with(cfg);
    let mut input = Vec::new();
    // The client's first SETTINGS counted as one already.
    for _ in 0..49 {
        frame::write_ping(&mut input, false, [1; 8]);
    }
    t.recv(&input);
    assert!(!t.take().iter().any(goaway(ErrorCode::ENHANCE_YOUR_CALM)));
    let mut one_more = Vec::new();
    frame::write_ping(&mut one_more, false, [1; 8]);
    t.recv(&one_more);
    assert!(t.take().iter().any(goaway(ErrorCode::ENHANCE_YOUR_CALM)));
}

#[test]
fn a_response_waits_for_the_clients_window() {
    let mut t = T::open();
    let mut s = Vec::new();
    frame::write_settings(&mut s, &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 10)]);
    t.recv(&s);
    assert_eq!(t.take(), vec![Got::Settings { ack: true }]);
    let get = t.get(1);
    t.recv(&get);
    let mut rest: &[u8] = b"0123456789abcdefghijklmno";
    t.conn.each_stream(clock(t.now), &mut t.out, |_, w| {
        let mut parts = http::Response::new(()).into_parts().0;
        assert!(w.respond(&mut parts, None));
        assert!(!w.send_data(&mut rest, true), "only 10 bytes fit");
        assert_eq!(w.window(), 0);
    });
    let got = t.take();
    assert_eq!(
        got[1],
        Got::Data {
            stream: 1,
            end_stream: false,
            data: b"0123456789".to_vec()
        }
    );
    let mut wu = Vec::new();
    frame::write_window_update(&mut wu, 1, 100);
    t.recv(&wu);
    t.conn.each_stream(clock(t.now), &mut t.out, |_, w| {
        assert!(w.send_data(&mut rest, true));
    });
    assert_eq!(
        t.take(),
        vec![Got::Data {
            stream: 1,
            end_stream: true,
            data: b"abcdefghijklmno".to_vec()
        }]
    );
    assert_eq!(t.conn.streams(), 0);
}

#[test]
fn a_window_past_2_31_is_a_flow_control_error() {
    let mut t = T::open();
    let mut wu = Vec::new();
    frame::write_window_update(&mut wu, 0, MAX_WINDOW);
    t.recv(&wu);
    assert!(t.take().iter().any(goaway(ErrorCode::FLOW_CONTROL_ERROR)));

    let mut t = T::open();
    let get = t.get(1);
    t.recv(&get);
    let mut wu = Vec::new();
    frame::write_window_update(&mut wu, 1, MAX_WINDOW);
    t.recv(&wu);
    assert_eq!(
        t.take(),
        vec![Got::Rst {
            stream: 1,
            code: ErrorCode::FLOW_CONTROL_ERROR
        }]
    );
}

#[test]
fn frames_on_idle_streams_are_protocol_errors() {
    for which in 0..3 {
        let mut t = T::open();
        let mut input = Vec::new();
        match which {
            0 => frame::write_data(&mut input, 1, b"x", false),
            1 => frame::write_rst_stream(&mut input, 1, ErrorCode::CANCEL),
            _ => frame::write_window_update(&mut input, 1, 1),
        }
        t.recv(&input);
        assert!(
            t.take().iter().any(goaway(ErrorCode::PROTOCOL_ERROR)),
            "case {which}"
        );
    }
}

#[test]
fn drain_finishes_the_streams_in_flight_then_closes() {
    let mut t = T::open();
    let get = t.get(1);
    t.recv(&get);
    t.conn.drain(&mut t.out);
    assert_eq!(
        t.take(),
        vec![Got::GoAway {
            last: 1,
            code: ErrorCode::NO_ERROR
        }]
    );
    // A stream opened after the GOAWAY is not processed.
    let late = t.get(3);
    t.recv(&late);
    assert_eq!(t.d.requests.len(), 1);
    assert!(!t.end_round().close, "stream 1 is still answering");
    t.respond_all(200, b"ok");
    assert!(t.end_round().close);
}

#[test]
fn an_idle_connection_closes_after_idle_timeout() {
    let mut t = T::open();
    let a = t.end_round();
    assert!(!a.close);
    let limit = t.cfg.idle_timeout.unwrap();
    assert_eq!(a.deadline, Some(t.now + limit));
    t.now += limit;
    assert!(t.end_round().close);
    assert!(t.take().iter().any(goaway(ErrorCode::NO_ERROR)));
}

#[test]
fn a_missing_preface_times_out() {
    let mut t = T::new();
    let a = t.end_round();
    let limit = t.cfg.header_read_timeout.unwrap();
    assert_eq!(a.deadline, Some(t.now + limit));
    t.now += limit;
    assert!(t.end_round().close);
}

#[test]
fn keep_alive_pings_close_a_silent_peer() {
    let mut cfg = ServerConfig::default();
    cfg.http2.keep_alive_interval = Some(Duration::from_secs(5));
    cfg.http2.keep_alive_timeout = Duration::from_secs(2);
    cfg.idle_timeout = None;
    let mut t = T::open_with(cfg);
    t.now += Duration::from_secs(5);
    let a = t.end_round();
    assert!(!a.close);
    assert_eq!(
        t.take(),
        vec![Got::Ping {
            ack: false,
            data: frame::KEEP_ALIVE_PING
        }]
    );
    t.now += Duration::from_secs(2);
    assert!(t.end_round().close);
}

#[test]
fn a_settings_window_change_moves_open_streams_windows() {
    let mut t = T::open();
    let get = t.get(1);
    t.recv(&get);
    let mut s = Vec::new();
    frame::write_settings(&mut s, &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 0)]);
    t.recv(&s);
    t.take();
    t.conn.each_stream(clock(t.now), &mut t.out, |_, w| {
        let mut parts = http::Response::new(()).into_parts().0;
        assert!(w.respond(&mut parts, None));
        assert_eq!(w.window(), 0);
    });
    let mut s = Vec::new();
    frame::write_settings(&mut s, &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, MAX_WINDOW)]);
    frame::write_window_update(&mut s, 1, 1);
    t.recv(&s);
    assert!(t.take().contains(&Got::Rst {
        stream: 1,
        code: ErrorCode::FLOW_CONTROL_ERROR
    }));
}

#[test]
fn an_eof_fails_bodies_and_closes_after_the_responses() {
    let mut t = T::open();
    let fields = post(10);
    let h = t.headers(1, &as_refs(&fields), false);
    t.recv(&h);
    t.conn.peer_closed();
    assert_eq!(
        t.d.sink(1).lock().unwrap().failed,
        Some(BodyFailure::Incomplete)
    );
    assert!(!t.end_round().close);
    t.respond_all(200, b"");
    assert!(t.end_round().close);
}

#[test]
fn a_frame_head_over_max_frame_size_fails_before_its_payload() {
    let mut t = T::open();
    let mut head = [0u8; HEAD_LEN];
    let len = t.cfg.http2.max_frame_size + 1;
    head[..3].copy_from_slice(&len.to_be_bytes()[1..]);
    head[3] = 0; // DATA
    head[8] = 1;
    let _ = Head {
        len,
        kind: 0,
        flags: 0,
        stream: 1,
    };
    t.recv(&head);
    assert!(t.take().iter().any(goaway(ErrorCode::FRAME_SIZE_ERROR)));
}

#[test]
fn a_response_stalled_on_a_closed_window_is_reset_after_window_stall_timeout() {
    let mut t = T::open();
    let mut s = Vec::new();
    frame::write_settings(&mut s, &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 0)]);
    t.recv(&s);
    let get = t.get(1);
    t.recv(&get);
    t.conn.each_stream(clock(t.now), &mut t.out, |_, w| {
        let mut parts = http::Response::new(()).into_parts().0;
        assert!(w.respond(&mut parts, None));
        assert!(!w.send_data(&mut &b"held"[..], true));
    });
    t.take();
    let limit = t.cfg.http2.window_stall_timeout.unwrap();
    let a = t.end_round();
    assert_eq!(a.deadline, Some(t.now + limit));
    t.now += limit - Duration::from_millis(1);
    t.end_round();
    assert_eq!(t.conn.streams(), 1, "not yet");
    t.now += Duration::from_millis(1);
    t.end_round();
    assert_eq!(
        t.take(),
        vec![Got::Rst {
            stream: 1,
            code: ErrorCode::CANCEL
        }]
    );
    assert_eq!(t.conn.streams(), 0);
}

#[test]
fn a_stalled_request_body_fails_after_body_read_timeout() {
    let mut t = T::open();
    let fields = post(100);
    let h = t.headers(1, &as_refs(&fields), false);
    t.recv(&h);
    let limit = t.cfg.body_read_timeout.unwrap();
    t.now += limit;
    t.end_round();
    assert_eq!(
        t.take(),
        vec![Got::Rst {
            stream: 1,
            code: ErrorCode::CANCEL
        }]
    );
    assert_eq!(
        t.d.sink(1).lock().unwrap().failed,
        Some(BodyFailure::TimedOut)
    );
}

#[test]
fn a_body_the_service_has_not_read_is_not_the_clients_stall() {
    let mut cfg = ServerConfig::default();
    cfg.http2.initial_stream_window = 10;
    let mut t = T::open_with(cfg);
    let fields = post(100);
    let h = t.headers(1, &as_refs(&fields), false);
    t.recv(&h);
    let mut data = Vec::new();
    frame::write_data(&mut data, 1, &[1; 10], false);
    t.recv(&data);
    // The window is full and nobody read it: however long that lasts, no timeout.
    t.now += t.cfg.body_read_timeout.unwrap() * 3;
    t.end_round();
    assert_eq!(t.take(), vec![]);
    assert_eq!(t.d.sink(1).lock().unwrap().failed, None);
}

#[test]
fn nothing_is_written_after_a_floods_goaway() {
    // The frame that crosses the bound gets no answer of its own after the GOAWAY.
    for last in 0..3 {
        let mut cfg = ServerConfig::default();
        cfg.http2.max_idle_frames = 1;
        let mut t = T::open_with(cfg);
        let mut input = Vec::new();
        match last {
            0 => frame::write_settings(&mut input, &[]),
            1 => frame::write_ping(&mut input, false, [0; 8]),
            _ => {
                // The request earns its allowance back: two empty DATA cross it.
                input.extend(t.headers(1, &as_refs(&post(10)), false));
                frame::write_data(&mut input, 1, b"", false);
                frame::write_data(&mut input, 1, b"", false);
            }
        }
        t.recv(&input);
        let got = t.take();
        assert!(
            matches!(
                got.last(),
                Some(Got::GoAway {
                    code: ErrorCode::ENHANCE_YOUR_CALM,
                    ..
                })
            ),
            "case {last}: {got:?}"
        );
    }
}
