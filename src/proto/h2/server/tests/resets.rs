//! Frames the client sent on a stream before it saw our RST_STREAM: ignored (RFC 9113
//! §5.1), with their DATA still counted against the connection's window (§6.9), for the
//! last `reset_streams_remembered` streams reset.

use super::*;

/// A POST of `len` bytes on `stream` whose service answers at once and drops the body
/// unread: the round's end resets the stream with NO_ERROR (§8.1).
fn answered_before_its_body(t: &mut T, stream: u32, len: usize) {
    let fields = post(len);
    let h = t.headers(stream, &as_refs(&fields), false);
    t.recv(&h);
    t.respond_all(200, b"ok");
    t.d.sink(stream).lock().unwrap().gone = true;
    t.end_round();
    let got = t.take();
    assert_eq!(
        got.last(),
        Some(&Got::Rst {
            stream,
            code: ErrorCode::NO_ERROR
        }),
        "{got:?}"
    );
}

fn data(stream: u32, len: usize, end: bool) -> Vec<u8> {
    let mut f = Vec::new();
    frame::write_data(&mut f, stream, &vec![1; len], end);
    f
}

#[test]
fn data_after_our_reset_is_ignored_but_counted_against_the_connection_window() {
    let mut cfg = ServerConfig::default();
    cfg.http2.initial_connection_window = 65_535;
    let mut t = T::open_with(cfg);
    answered_before_its_body(&mut t, 1, 40_000);
    // The body the client had sent before our reset arrived: no second RST_STREAM.
    let mut late = data(1, 16_000, false);
    late.extend(data(1, 16_000, false));
    late.extend(data(1, 8_000, true));
    t.recv(&late);
    assert_eq!(t.take(), vec![], "a late DATA frame was answered");
    // Its 40,000 bytes are past half the connection window: given back.
    t.end_round();
    assert_eq!(
        t.take(),
        vec![Got::WindowUpdate {
            stream: 0,
            increment: 40_000
        }]
    );
    // Counted, not skipped: more than the window without a round's update is an error.
    answered_before_its_body(&mut t, 3, 70_000);
    let mut flood = Vec::new();
    for _ in 0..5 {
        flood.extend(data(3, 14_000, false));
    }
    t.recv(&flood);
    assert!(t.take().iter().any(goaway(ErrorCode::FLOW_CONTROL_ERROR)));
}

#[test]
fn trailers_and_frames_after_our_reset_are_ignored_and_hpack_stays_in_sync() {
    let mut t = T::open();
    answered_before_its_body(&mut t, 1, 10);
    let mut late = data(1, 4, false);
    late.extend(t.headers(1, &[("grpc-status", "0")], true));
    frame::write_window_update(&mut late, 1, 1_000);
    frame::write_rst_stream(&mut late, 1, ErrorCode::CANCEL);
    t.recv(&late);
    assert_eq!(t.take(), vec![]);
    assert!(!t.conn.is_failed());
    let get = t.get(3);
    t.recv(&get);
    assert_eq!(t.d.requests.len(), 2);
    assert_eq!(t.d.requests[1].1.uri.path(), "/hello");
}

#[test]
fn data_after_a_reset_by_the_driver_is_ignored() {
    let mut t = T::open();
    let fields = post(10);
    let h = t.headers(1, &as_refs(&fields), false);
    t.recv(&h);
    // The service failed: the driver resets the stream while its body is arriving.
    t.conn.each_stream(clock(t.now), &mut t.out, |_, w| {
        w.reset(ErrorCode::INTERNAL_ERROR)
    });
    let late = data(1, 10, true);
    t.recv(&late);
    t.end_round();
    assert_eq!(
        t.take(),
        vec![Got::Rst {
            stream: 1,
            code: ErrorCode::INTERNAL_ERROR
        }]
    );
}

#[test]
fn refused_and_malformed_streams_ignore_their_late_data() {
    let mut cfg = ServerConfig::default();
    cfg.http2.max_concurrent_streams = 1;
    let mut t = T::open_with(cfg);
    let fields = post(10);
    let mut input = t.headers(1, &[(":method", "POST")], false);
    input.extend(t.headers(3, &as_refs(&fields), false));
    input.extend(t.headers(5, &as_refs(&fields), false));
    t.recv(&input);
    assert_eq!(
        t.take(),
        vec![
            Got::Rst {
                stream: 1,
                code: ErrorCode::PROTOCOL_ERROR
            },
            Got::Rst {
                stream: 5,
                code: ErrorCode::REFUSED_STREAM
            }
        ]
    );
    let mut late = data(1, 10, true);
    late.extend(data(5, 10, true));
    t.recv(&late);
    assert_eq!(t.take(), vec![]);
}

#[test]
fn only_the_last_reset_streams_remembered_are_ignored() {
    let mut cfg = ServerConfig::default();
    cfg.http2.reset_streams_remembered = 2;
    let mut t = T::open_with(cfg);
    for id in [1, 3, 5] {
        answered_before_its_body(&mut t, id, 10);
    }
    // 3 and 5 are remembered; 1 is forgotten and answered as any closed stream.
    for id in [5, 3] {
        let late = data(id, 10, true);
        t.recv(&late);
        assert_eq!(t.take(), vec![], "stream {id}");
    }
    let late = data(1, 10, true);
    t.recv(&late);
    assert_eq!(
        t.take(),
        vec![Got::Rst {
            stream: 1,
            code: ErrorCode::STREAM_CLOSED
        }]
    );
    // With none remembered, every late frame gets its STREAM_CLOSED.
    let mut cfg = ServerConfig::default();
    cfg.http2.reset_streams_remembered = 0;
    let mut t = T::open_with(cfg);
    answered_before_its_body(&mut t, 1, 10);
    let late = data(1, 10, true);
    t.recv(&late);
    assert_eq!(
        t.take(),
        vec![Got::Rst {
            stream: 1,
            code: ErrorCode::STREAM_CLOSED
        }]
    );
}
