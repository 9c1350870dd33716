//! The decoder against WIRE.md's bytes, every split of a stream, and each bad input.

use super::*;

/// What one frame delivered, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Got {
    kind: Kind,
    flag: u8,
    seq: u64,
    method: Vec<u8>,
    payload: Vec<u8>,
}

fn frame(cmd: u8, flag: u8, seq: u64, method: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_frame(&mut out, cmd, flag, seq, method, payload).unwrap();
    out
}

/// Raw bytes of a frame whose header says whatever the test wants.
fn raw(body_len: u32, cmd: u8, method_len: u8, rest: &[u8]) -> Vec<u8> {
    let mut b = body_len.to_le_bytes().to_vec();
    b.extend([0, cmd, 0, method_len]);
    b.extend(7u64.to_le_bytes());
    b.extend_from_slice(rest);
    b
}

/// Feeds `pieces` to a fresh decoder: the frames, the bytes written, the result.
fn feed(limits: Limits, pieces: &[&[u8]]) -> (Vec<Got>, Vec<u8>, Result<(), Error>, Decoder) {
    let mut d = Decoder::new(limits);
    let (mut got, mut out, mut result) = (Vec::new(), Vec::new(), Ok(()));
    for p in pieces {
        let r = d.receive(p, &mut out, &mut |f| {
            got.push(Got {
                kind: f.kind,
                flag: f.flag,
                seq: f.seq,
                method: f.method.to_vec(),
                payload: f.payload.to_vec(),
            })
        });
        if result.is_ok() {
            result = r;
        }
    }
    (got, out, result, d)
}

fn whole(input: &[u8]) -> (Vec<Got>, Vec<u8>, Result<(), Error>) {
    let (g, o, r, _) = feed(Limits::default(), &[input]);
    (g, o, r)
}

#[test]
fn wire_md_examples_decode() {
    let sum = [
        &[0x13, 0, 0, 0, 0, 1, 0, 4, 0x4e, 0, 0, 0, 0, 0, 0, 0][..],
        b"/sum",
        br#"{"a":20,"b":22}"#,
    ]
    .concat();
    assert_eq!(sum, frame(1, 0, 78, b"/sum", br#"{"a":20,"b":22}"#));
    let notify = [
        &[9, 0, 0, 0, 0, 3, 2, 7, 2, 0, 0, 0, 0, 0, 0, 0][..],
        b"/pushed",
        b"hi",
    ]
    .concat();
    let (got, out, r) = whole(&[sum, notify].concat());
    assert_eq!(r, Ok(()));
    assert!(out.is_empty());
    assert_eq!(
        got,
        vec![
            Got {
                kind: Kind::Request,
                flag: 0,
                seq: 78,
                method: b"/sum".to_vec(),
                payload: br#"{"a":20,"b":22}"#.to_vec()
            },
            Got {
                kind: Kind::Notify,
                flag: FLAG_ASYNC,
                seq: 2,
                method: b"/pushed".to_vec(),
                payload: b"hi".to_vec()
            },
        ]
    );
}

#[test]
fn error_response_head_matches_wire_md() {
    let f = frame(2, FLAG_ERROR, 77, b"/nope", b"method not found");
    assert_eq!(
        &f[..16],
        &[0x15, 0, 0, 0, 0, 2, 1, 5, 0x4d, 0, 0, 0, 0, 0, 0, 0]
    );
    let (got, _, _) = whole(&f);
    assert!(got[0].kind == Kind::Response && got[0].flag == FLAG_ERROR);
}

#[test]
fn ping_gets_a_pong_and_pong_is_ignored() {
    let mut ping = [0u8; 16];
    ping[5] = 4;
    let mut pong = ping;
    pong[5] = 5;
    let (got, out, r) = whole(&[ping, pong, ping].concat());
    assert_eq!(r, Ok(()));
    assert!(got.is_empty());
    assert_eq!(out, [pong, pong].concat());
}

#[test]
fn ping_skips_the_method_checks() {
    // A ping with a body and no method is still a ping.
    let (got, out, r) = whole(&raw(3, 4, 0, b"abc"));
    assert_eq!((got.len(), out.len(), r), (0, 16, Ok(())));
}

#[test]
fn every_split_gives_the_same_frames() {
    let stream = [
        frame(1, 0, 0x0102030405060708, b"/echo", b"raw-a"),
        frame(1, FLAG_ASYNC, 0xfffffffffffffffe, b"/echo", b"raw-b"),
        raw(0, 4, 0, b""),
        frame(1, 0, 3, b"/echo", b""),
        frame(6 | 0x80 | 0x40, 0, 9, b"/s", b"last"),
        frame(2, FLAG_ERROR, 4, b"/x", &[0xAB; 300]),
    ]
    .concat();
    let (want, want_out, r) = whole(&stream);
    assert_eq!(r, Ok(()));
    assert_eq!(want.len(), 5);
    assert_eq!(
        want[3].kind,
        Kind::Stream {
            local: true,
            eof: true
        }
    );
    for at in 0..=stream.len() {
        let (a, b) = stream.split_at(at);
        let (got, out, r, d) = feed(Limits::default(), &[a, b]);
        assert_eq!(
            (&got, &out, &r),
            (&want, &want_out, &Ok(())),
            "split at {at}"
        );
        assert_eq!(d.held_bytes(), 0);
    }
    let bytes: Vec<&[u8]> = stream.chunks(1).collect();
    let (got, out, r, _) = feed(Limits::default(), &bytes);
    assert_eq!((got, out, r), (want, want_out, Ok(())), "byte by byte");
}

#[test]
fn body_limit_is_exact_and_checked_on_the_first_four_bytes() {
    let limits = Limits { max_body_len: 10 };
    let at = frame(1, 0, 2, b"/e", &[1; 8]);
    let (got, _, r, _) = feed(limits, &[&at]);
    assert_eq!((got.len(), r), (1, Ok(())));
    let over = frame(1, 0, 2, b"/e", &[1; 9]);
    let (got, _, r, d) = feed(limits, &[&over[..4]]);
    assert_eq!(r, Err(Error::TooLarge { len: 11, max: 10 }));
    assert!(got.is_empty());
    assert_eq!(d.held_bytes(), 0);
}

#[test]
fn a_huge_announced_length_fails_before_anything_is_kept() {
    let (_, _, r, d) = feed(Limits::default(), &[&[0xff, 0xff, 0xff, 0xff, 0, 1]]);
    assert!(matches!(r, Err(Error::TooLarge { .. })));
    assert_eq!(d.held_bytes(), 0);
}

#[test]
fn default_limit_is_arpcs() {
    assert_eq!(Limits::default().max_body_len, 67_108_848);
}

#[test]
fn bad_method_lengths_are_dropped_silently_and_the_stream_goes_on() {
    let m127 = [b'/'; 127];
    let ok = frame(1, 0, 5, &m127, b"x");
    let mut m128 = raw(129, 1, 128, &[b'/'; 128]);
    m128.push(b'x');
    let empty = raw(1, 1, 0, b"x");
    let longer_than_body = raw(2, 1, 5, b"/e");
    let after = frame(3, 0, 6, b"/n", b"");
    let (got, out, r, d) = feed(
        Limits::default(),
        &[&[ok, m128, empty, longer_than_body, after].concat()],
    );
    assert_eq!(r, Ok(()));
    assert!(out.is_empty());
    assert_eq!(got.iter().map(|g| g.seq).collect::<Vec<_>>(), [5, 6]);
    assert_eq!(got[0].method.len(), 127);
    assert_eq!(d.dropped(), 3);
}

#[test]
fn unknown_commands_fail_the_connection_unless_the_method_check_drops_them_first() {
    for cmd in [0u8, 7, 63, 0x80 | 7] {
        let (got, _, r) = whole(&[raw(2, cmd, 2, b"/x"), frame(3, 0, 1, b"/n", b"")].concat());
        assert_eq!(r, Err(Error::UnknownCommand(cmd & 0x3f)), "cmd {cmd}");
        assert!(got.is_empty(), "nothing after the failure");
    }
    let (_, _, r) = whole(&raw(0, 9, 0, b""));
    assert_eq!(r, Ok(()), "dropped by the method check first");
}

#[test]
fn input_after_a_failure_is_ignored() {
    let (got, out, r, d) = feed(
        Limits::default(),
        &[
            &raw(2, 0, 2, b"/x"),
            &frame(1, 0, 2, b"/e", b""),
            &raw(0, 4, 0, b""),
        ],
    );
    assert!(r.is_err());
    assert!(got.is_empty() && out.is_empty());
    assert_eq!(d.held_bytes(), 0);
}

#[test]
fn a_truncated_frame_is_held_within_its_length() {
    let f = frame(1, 0, 2, b"/e", &[9; 100]);
    let (got, _, r, d) = feed(Limits::default(), &[&f[..f.len() - 1]]);
    assert_eq!((got.len(), r), (0, Ok(())));
    assert_eq!(d.held_bytes(), f.len() - 1);
}

#[test]
fn method_checks_on_send() {
    assert_eq!(check_method(b""), Err(MethodError::BadMethod(0)));
    assert_eq!(check_method(&[b'a'; 127]), Ok(()));
    assert_eq!(check_method(&[b'a'; 128]), Err(MethodError::BadMethod(128)));
    assert!(Head::new(1, 0, 2, b"", 0).is_err());
    let h = Head::new(2, FLAG_ASYNC, 9, b"/sum", 2).unwrap();
    assert_eq!(h.as_bytes(), &frame(2, FLAG_ASYNC, 9, b"/sum", b"42")[..20]);
}
