//! The machine against RFC 6455: §5.7's examples byte-exact, every error with its close
//! code and the Close written, limits at and past their bound, UTF-8 failing at the
//! fragment that breaks it, the closing handshake both ways, Ping floods, held memory, and
//! proptests: any split of the input equals the whole, and random messages round-trip.

use super::deflate::DeflateParams;
use super::*;
use proptest::prelude::*;

/// RFC 6455 §5.7's masking key.
const K: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];
const FIN: u8 = 0x80;

/// A frame built by hand (independent of `frame.rs`): `b0` is FIN/RSV/opcode.
fn frame(b0: u8, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut v = vec![b0];
    let m = if mask.is_some() { 0x80 } else { 0 };
    let n = payload.len();
    if n < 126 {
        v.push(m | n as u8);
    } else if n <= 0xffff {
        v.push(m | 126);
        v.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        v.push(m | 127);
        v.extend_from_slice(&(n as u64).to_be_bytes());
    }
    match mask {
        Some(k) => {
            v.extend_from_slice(&k);
            v.extend(payload.iter().enumerate().map(|(i, b)| b ^ k[i % 4]));
        }
        None => v.extend_from_slice(payload),
    }
    v
}

/// A frame as a client sends it (masked).
fn cf(b0: u8, payload: &[u8]) -> Vec<u8> {
    frame(b0, payload, Some(K))
}

fn server() -> Machine {
    Machine::new(Role::Server, Limits::default(), None, 1)
}

fn client() -> Machine {
    Machine::new(Role::Client, Limits::default(), None, 1)
}

fn with_limits(role: Role, limits: Limits) -> Machine {
    Machine::new(role, limits, None, 1)
}

fn deflate(role: Role) -> PerMessageDeflate {
    let p = DeflateParams {
        server_no_context_takeover: true,
        client_no_context_takeover: true,
        server_max_window_bits: 15,
        client_max_window_bits: 15,
    };
    PerMessageDeflate::new(role, &p, 6)
}

fn run(m: &mut Machine, data: &[u8]) -> (Result<(), Error>, Vec<Message>, Vec<u8>) {
    let (mut got, mut out) = (Vec::new(), Vec::new());
    let r = m.receive(data, &mut out, &mut |msg| got.push(msg));
    (r, got, out)
}

/// What a machine of `writer` role wrote, read as its peer reads it.
fn decode(writer: Role, out: &[u8]) -> Vec<Message> {
    let peer = match writer {
        Role::Server => Role::Client,
        Role::Client => Role::Server,
    };
    let limits = Limits {
        auto_pong: false,
        ..Limits::default()
    };
    let mut m = Machine::new(peer, limits, None, 3);
    let (r, got, _) = run(&mut m, out);
    assert_eq!(r, Ok(()), "unreadable output {out:?}");
    got
}

fn close(code: u16, reason: &'static str) -> Message {
    Message::Close(Some(CloseFrame {
        code,
        reason: Bytes::from_static(reason.as_bytes()),
    }))
}

fn text(s: &'static str) -> Message {
    Message::Text(Bytes::from_static(s.as_bytes()))
}

/// `data` fails `m` with `code`: the Close written, the state Closed, later input ignored
/// (sending still works: answers to what came before go ahead of the Close).
fn expect_fail(m: &mut Machine, data: &[u8], code: u16) -> Vec<Message> {
    let (r, got, out) = run(m, data);
    let e = r.expect_err("should fail");
    assert_eq!(e.close_code(), code, "{e:?}");
    assert!(!e.to_string().is_empty());
    assert_eq!(decode(m.role, &out), vec![close(code, "")]);
    assert_eq!(m.state(), State::Closed);
    assert_eq!(m.held_bytes(), 0);
    let next = match m.role {
        Role::Server => cf(FIN | 1, b"hi"),
        Role::Client => frame(FIN | 1, b"hi", None),
    };
    assert_eq!(run(m, &next), (Ok(()), vec![], vec![]));
    got
}

// ---------------------------------------------------------------------------------------
// RFC 6455 §5.7, byte-exact
// ---------------------------------------------------------------------------------------

#[test]
fn rfc_single_frame_unmasked_hello() {
    let wire = [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
    assert_eq!(
        run(&mut client(), &wire),
        (Ok(()), vec![text("Hello")], vec![])
    );
    let mut out = Vec::new();
    server().send(&text("Hello"), &mut out).unwrap();
    assert_eq!(out, wire);
}

#[test]
fn rfc_single_frame_masked_hello() {
    let wire = [
        0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
    ];
    assert_eq!(cf(FIN | 1, b"Hello"), wire);
    assert_eq!(
        run(&mut server(), &wire),
        (Ok(()), vec![text("Hello")], vec![])
    );
}

#[test]
fn rfc_fragmented_unmasked() {
    let wire = [0x01, 0x03, 0x48, 0x65, 0x6c, 0x80, 0x02, 0x6c, 0x6f];
    assert_eq!(
        run(&mut client(), &wire),
        (Ok(()), vec![text("Hello")], vec![])
    );
}

#[test]
fn rfc_ping_and_masked_pong() {
    let ping = [0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
    let mut out = Vec::new();
    server()
        .send(&Message::Ping("Hello".into()), &mut out)
        .unwrap();
    assert_eq!(out, ping);
    // The client receives it and answers with a masked Pong of the same payload.
    let (r, got, out) = run(&mut client(), &ping);
    assert_eq!((r, got), (Ok(()), vec![Message::Ping("Hello".into())]));
    assert_eq!(&out[..2], &[0x8a, 0x85]);
    let k = [out[2], out[3], out[4], out[5]];
    let unmasked: Vec<u8> = out[6..]
        .iter()
        .enumerate()
        .map(|(i, b)| b ^ k[i % 4])
        .collect();
    assert_eq!(unmasked, b"Hello");
    let pong = [
        0x8a, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
    ];
    assert_eq!(
        run(&mut server(), &pong),
        (Ok(()), vec![Message::Pong("Hello".into())], vec![])
    );
}

#[test]
fn rfc_256_bytes_and_64_kib_binary() {
    for (len, head) in [
        (256usize, vec![0x82, 0x7e, 0x01, 0x00]),
        (65536, vec![0x82, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0]),
    ] {
        let payload: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
        let mut out = Vec::new();
        server()
            .send(&Message::Binary(payload.clone().into()), &mut out)
            .unwrap();
        assert_eq!(&out[..head.len()], &head[..]);
        assert_eq!(&out[head.len()..], &payload[..]);
        let want = vec![Message::Binary(payload.clone().into())];
        assert_eq!(run(&mut client(), &out), (Ok(()), want.clone(), vec![]));
        // Masked, to a server.
        let wire = cf(FIN | 2, &payload);
        assert_eq!(run(&mut server(), &wire), (Ok(()), want, vec![]));
    }
}

#[test]
fn non_minimal_lengths_are_accepted() {
    let mut wire = vec![0x81, 0xfe, 0, 5];
    wire.extend_from_slice(&K);
    wire.extend(b"Hello".iter().enumerate().map(|(i, b)| b ^ K[i % 4]));
    assert_eq!(
        run(&mut server(), &wire),
        (Ok(()), vec![text("Hello")], vec![])
    );
    let mut wire = vec![0x81, 0x7f, 0, 0, 0, 0, 0, 0, 0, 5];
    wire.extend_from_slice(b"Hello");
    assert_eq!(
        run(&mut client(), &wire),
        (Ok(()), vec![text("Hello")], vec![])
    );
}

// ---------------------------------------------------------------------------------------
// The pieces: masking, UTF-8
// ---------------------------------------------------------------------------------------

#[test]
fn mask_matches_bytewise_at_every_offset() {
    let data: Vec<u8> = (0..100u8).collect();
    for offset in 0..9 {
        for len in 0..data.len() {
            let mut fast = data[..len].to_vec();
            mask::apply(&mut fast, K, offset);
            let slow: Vec<u8> = data[..len]
                .iter()
                .enumerate()
                .map(|(i, b)| b ^ K[(offset + i) % 4])
                .collect();
            assert_eq!(fast, slow, "offset {offset} len {len}");
        }
    }
}

#[test]
fn utf8_carries_a_cut_code_point_and_fails_when_certain() {
    let s = "aκόσμε€𝄞".as_bytes();
    for cut in 0..=s.len() {
        let mut v = utf8::Utf8::default();
        v.feed(&s[..cut]).unwrap();
        v.feed(&s[cut..]).unwrap();
        assert!(v.is_complete());
    }
    // F4 90 is past U+10FFFF: certain at the second byte, fed apart.
    let mut v = utf8::Utf8::default();
    v.feed(&[0xf4]).unwrap();
    assert!(!v.is_complete());
    assert_eq!(v.feed(&[0x90]), Err(utf8::Invalid));
    // E0 80 (overlong), ED A0 (surrogate), lone continuation.
    for bad in [&[0xe0, 0x80][..], &[0xed, 0xa0], &[0x80], &[0xff]] {
        let mut v = utf8::Utf8::default();
        let r = v.feed(&bad[..1]).and_then(|()| v.feed(&bad[1..]));
        assert_eq!(r, Err(utf8::Invalid), "{bad:?}");
    }
}

proptest! {
    #[test]
    fn utf8_chunked_agrees_with_std(bytes in proptest::collection::vec(any::<u8>(), 0..40), cuts in proptest::collection::vec(0usize..40, 0..4)) {
        let mut v = utf8::Utf8::default();
        let mut ok = true;
        let mut at = 0;
        let mut cuts = cuts;
        cuts.sort_unstable();
        for c in cuts.into_iter().chain([bytes.len()]) {
            let c = c.clamp(at, bytes.len());
            ok = ok && v.feed(&bytes[at..c]).is_ok();
            at = c;
        }
        prop_assert_eq!(ok && v.is_complete(), std::str::from_utf8(&bytes).is_ok());
    }
}

// ---------------------------------------------------------------------------------------
// Errors: each with its close code and the Close written
// ---------------------------------------------------------------------------------------

#[test]
fn unmasked_to_server_and_masked_to_client_are_1002() {
    expect_fail(&mut server(), &frame(FIN | 1, b"hi", None), 1002);
    expect_fail(&mut client(), &cf(FIN | 1, b"hi"), 1002);
}

#[test]
fn reserved_opcodes_and_bits_are_1002() {
    for op in [3, 4, 5, 6, 7, 0xb, 0xc, 0xd, 0xe, 0xf] {
        expect_fail(&mut server(), &cf(FIN | op, b""), 1002);
    }
    for rsv in [0x40, 0x20, 0x10] {
        expect_fail(&mut server(), &cf(FIN | rsv | 1, b"hi"), 1002);
        expect_fail(&mut server(), &cf(FIN | rsv | 9, b""), 1002);
    }
}

#[test]
fn rsv1_only_on_a_compressed_message_first_frame() {
    let with = || {
        Machine::new(
            Role::Server,
            Limits::default(),
            Some(deflate(Role::Server)),
            1,
        )
    };
    // On a control frame, on a continuation: 1002 even with deflate.
    expect_fail(&mut with(), &cf(FIN | 0x40 | 9, b""), 1002);
    let mut wire = cf(0x40 | 1, b"");
    wire.extend(cf(FIN | 0x40, b""));
    expect_fail(&mut with(), &wire, 1002);
    // RSV2/RSV3 never.
    expect_fail(&mut with(), &cf(FIN | 0x20 | 1, b""), 1002);
}

#[test]
fn control_frames_fragmented_or_over_125_are_1002() {
    expect_fail(&mut server(), &cf(9, b"x"), 1002);
    expect_fail(&mut server(), &cf(FIN | 9, &[0; 126]), 1002);
    expect_fail(&mut server(), &cf(FIN | 8, &[0; 126]), 1002);
    // Exactly 125 is fine.
    let (r, got, _) = run(&mut server(), &cf(FIN | 9, &[7; 125]));
    assert_eq!((r, got), (Ok(()), vec![Message::Ping(vec![7; 125].into())]));
}

#[test]
fn continuation_without_message_and_message_inside_message_are_1002() {
    expect_fail(&mut server(), &cf(FIN, b"x"), 1002);
    let mut wire = cf(1, b"a");
    wire.extend(cf(FIN | 1, b"b"));
    expect_fail(&mut server(), &wire, 1002);
    let mut wire = cf(2, b"a");
    wire.extend(cf(2, b"b"));
    expect_fail(&mut server(), &wire, 1002);
}

#[test]
fn length_with_top_bit_is_1002() {
    let mut wire = vec![0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 1];
    wire.extend_from_slice(&K);
    expect_fail(&mut server(), &wire, 1002);
}

#[test]
fn invalid_utf8_text_is_1007() {
    expect_fail(&mut server(), &cf(FIN | 1, &[0x61, 0xff]), 1007);
    // Cut short at the message's end.
    expect_fail(&mut server(), &cf(FIN | 1, &[0x61, 0xe2, 0x82]), 1007);
    // Binary is not checked.
    let (r, ..) = run(&mut server(), &cf(FIN | 2, &[0xff]));
    assert_eq!(r, Ok(()));
}

#[test]
fn utf8_fails_at_the_fragment_that_breaks_it() {
    // Autobahn 6.4.1: a valid fragment, then one past U+10FFFF; the last never comes.
    let mut m = server();
    let (r, got, out) = run(&mut m, &cf(1, "κόσμε".as_bytes()));
    assert_eq!((r, got, out), (Ok(()), vec![], vec![]));
    expect_fail(&mut m, &cf(0, &[0xf4, 0x90, 0x80, 0x80]), 1007);
    // Within one frame still arriving (6.4.3): the header and the bad bytes, no more.
    let mut m = server();
    let mut bad = "κόσμε".as_bytes().to_vec();
    bad.extend_from_slice(&[0xf4, 0x90, 0x80, 0x80]);
    bad.extend_from_slice(b"edited");
    let wire = cf(FIN | 1, &bad);
    let good = 2 + 4 + "κόσμε".len();
    let (r, ..) = run(&mut m, &wire[..good]);
    assert_eq!(r, Ok(()));
    let (r, ..) = run(&mut m, &wire[good..good + 1]);
    assert_eq!(r, Ok(()), "F4 alone may still start a code point");
    expect_fail(&mut m, &wire[good + 1..good + 2], 1007);
}

#[test]
fn close_payload_rules() {
    expect_fail(&mut server(), &cf(FIN | 8, &[0x03]), 1002);
    for code in [
        0u16, 999, 1004, 1005, 1006, 1012, 1013, 1014, 1015, 1016, 1100, 2000, 2999, 5000, 65535,
    ] {
        expect_fail(&mut server(), &cf(FIN | 8, &code.to_be_bytes()), 1002);
    }
    let mut bad = 1000u16.to_be_bytes().to_vec();
    bad.extend_from_slice(&[0xce, 0xba, 0xed, 0xa0, 0x80]);
    expect_fail(&mut server(), &cf(FIN | 8, &bad), 1007);
    for code in [
        1000u16, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999,
    ] {
        let mut m = server();
        let mut p = code.to_be_bytes().to_vec();
        p.extend_from_slice("ok κ".as_bytes());
        let (r, got, out) = run(&mut m, &cf(FIN | 8, &p));
        assert_eq!(r, Ok(()));
        assert_eq!(
            got,
            vec![Message::Close(Some(CloseFrame {
                code,
                reason: "ok κ".into()
            }))]
        );
        // The reply echoes the code.
        assert_eq!(out, [0x88, 0x02, (code >> 8) as u8, code as u8]);
        assert_eq!(m.state(), State::Closed);
    }
}

#[test]
fn corrupt_compressed_message_is_1007() {
    // deflate: holds with the real permessage-deflate too (0xff: a reserved block type).
    let mut m = Machine::new(
        Role::Server,
        Limits::default(),
        Some(deflate(Role::Server)),
        1,
    );
    expect_fail(&mut m, &cf(FIN | 0x40 | 2, &[0xff, 0xff, 0xff]), 1007);
}

// ---------------------------------------------------------------------------------------
// Limits, exactly at the bound and one past it
// ---------------------------------------------------------------------------------------

fn small(frame: usize, message: usize) -> Limits {
    Limits {
        max_frame_size: frame,
        max_message_size: message,
        auto_pong: true,
    }
}

#[test]
fn frame_size_limit_is_exact_and_checked_before_allocating() {
    let mut m = with_limits(Role::Server, small(100, 1000));
    let (r, got, _) = run(&mut m, &cf(FIN | 2, &[1; 100]));
    assert_eq!((r, got.len()), (Ok(()), 1));
    // One over fails on the header alone, with nothing allocated.
    let wire = cf(FIN | 2, &[1; 101]);
    expect_fail(
        &mut with_limits(Role::Server, small(100, 1000)),
        &wire[..8],
        1009,
    );
    // A 2^62-byte length fails the same way.
    let mut huge = vec![0x82, 0xff, 0x40, 0, 0, 0, 0, 0, 0, 0];
    huge.extend_from_slice(&K);
    expect_fail(&mut server(), &huge, 1009);
}

#[test]
fn message_limit_is_checked_before_allocating_too() {
    // No frame limit to speak of: a 1 TiB header must fail on the message limit, not
    // try to allocate.
    let mut huge = vec![0x82, 0xff, 0, 0, 1, 0, 0, 0, 0, 0];
    huge.extend_from_slice(&K);
    let limits = small(usize::MAX, 100);
    expect_fail(&mut with_limits(Role::Server, limits), &huge, 1009);
}

#[test]
fn message_size_limit_is_exact_across_fragments() {
    let mut wire = cf(2, &[1; 60]);
    wire.extend(cf(FIN, &[2; 40]));
    let (r, got, _) = run(&mut with_limits(Role::Server, small(100, 100)), &wire);
    assert_eq!((r, got.len()), (Ok(()), 1));
    let mut wire = cf(2, &[1; 60]);
    wire.extend(cf(FIN, &[2; 41]));
    expect_fail(&mut with_limits(Role::Server, small(100, 100)), &wire, 1009);
}

#[test]
fn inflated_size_is_limited() {
    // deflate: holds with the real permessage-deflate too.
    let mut c = Machine::new(
        Role::Client,
        Limits::default(),
        Some(deflate(Role::Client)),
        1,
    );
    let mut wire = Vec::new();
    c.send(&Message::Binary(vec![0; 101].into()), &mut wire)
        .unwrap();
    c.send(&Message::Binary(vec![0; 100].into()), &mut wire)
        .unwrap();
    let limits = small(1000, 100);
    let mut s = Machine::new(Role::Server, limits, Some(deflate(Role::Server)), 1);
    // The first is one over once inflated.
    expect_fail(&mut s, &wire, 1009);
}

#[test]
fn a_single_frame_message_is_allocated_exactly_once_its_header_is_in() {
    let mut m = server();
    let wire = cf(FIN | 2, &[9; 16384]);
    let (r, ..) = run(&mut m, &wire[..8]);
    assert_eq!(r, Ok(()));
    assert_eq!(m.held_bytes(), 16384);
    let (r, got, _) = run(&mut m, &wire[8..]);
    assert_eq!(
        (r, got),
        (Ok(()), vec![Message::Binary(vec![9; 16384].into())])
    );
    assert_eq!(m.held_bytes(), 0);
}

// ---------------------------------------------------------------------------------------
// Control frames, the closing handshake, Ping floods
// ---------------------------------------------------------------------------------------

#[test]
fn control_frames_between_fragments() {
    let mut wire = cf(1, b"Hel");
    wire.extend(cf(FIN | 9, b"p"));
    wire.extend(cf(0, b"l"));
    wire.extend(cf(FIN | 0xa, b"q"));
    wire.extend(cf(FIN, b"o"));
    let (r, got, out) = run(&mut server(), &wire);
    assert_eq!(r, Ok(()));
    assert_eq!(
        got,
        vec![
            Message::Ping("p".into()),
            Message::Pong("q".into()),
            text("Hello")
        ]
    );
    assert_eq!(out, [0x8a, 0x01, b'p']);
}

#[test]
fn peer_closes_first() {
    let mut m = server();
    let mut wire = cf(FIN | 8, &[0x03, 0xe8, b'b', b'y', b'e']);
    wire.extend(cf(FIN | 1, b"after"));
    let (r, got, out) = run(&mut m, &wire);
    assert_eq!(r, Ok(()));
    assert_eq!(got, vec![close(1000, "bye")]);
    assert_eq!(out, [0x88, 0x02, 0x03, 0xe8]);
    assert_eq!(m.state(), State::Closed);
    assert_eq!(m.send(&text("late"), &mut Vec::new()), Err(Error::Closed));
    assert_eq!(
        m.send(&close(1000, ""), &mut Vec::new()),
        Err(Error::Closed)
    );
    assert_eq!(run(&mut m, &cf(FIN | 1, b"x")), (Ok(()), vec![], vec![]));
    // An empty Close is answered with an empty one.
    let (r, got, out) = run(&mut server(), &cf(FIN | 8, b""));
    assert_eq!(
        (r, got, out),
        (Ok(()), vec![Message::Close(None)], vec![0x88, 0])
    );
}

#[test]
fn we_close_first() {
    let mut m = server();
    let mut out = Vec::new();
    m.send(&close(1001, "going"), &mut out).unwrap();
    assert_eq!(out, [0x88, 0x07, 0x03, 0xe9, b'g', b'o', b'i', b'n', b'g']);
    assert_eq!(m.state(), State::CloseSent);
    assert_eq!(m.send(&text("x"), &mut Vec::new()), Err(Error::Closed));
    assert_eq!(
        m.send(&Message::Ping("x".into()), &mut Vec::new()),
        Err(Error::Closed)
    );
    // Data still arrives; a Ping is not answered (nothing may follow our Close).
    let mut wire = cf(FIN | 1, b"late");
    wire.extend(cf(FIN | 9, b"p"));
    let (r, got, out) = run(&mut m, &wire);
    assert_eq!(
        (r, got, out),
        (
            Ok(()),
            vec![text("late"), Message::Ping("p".into())],
            vec![]
        )
    );
    // The peer's Close ends it, with no reply.
    let (r, got, out) = run(&mut m, &cf(FIN | 8, &[0x03, 0xe9]));
    assert_eq!((r, got, out), (Ok(()), vec![close(1001, "")], vec![]));
    assert_eq!(m.state(), State::Closed);
    // An error after our Close writes no second Close.
    let mut m = server();
    m.send(&close(1000, ""), &mut Vec::new()).unwrap();
    let (r, _, out) = run(&mut m, &cf(FIN | 3, b""));
    assert_eq!((r.map_err(|e| e.close_code()), out), (Err(1002), vec![]));
}

#[test]
fn a_close_cuts_a_fragmented_message_and_frees_it() {
    let mut m = server();
    let mut wire = cf(2, &[1; 500]);
    wire.extend(cf(FIN | 8, b""));
    let (r, got, _) = run(&mut m, &wire);
    assert_eq!((r, got), (Ok(()), vec![Message::Close(None)]));
    assert_eq!(m.held_bytes(), 0);
}

#[test]
fn the_owed_pong_goes_before_the_close_reply() {
    let mut wire = cf(FIN | 9, b"a");
    wire.extend(cf(FIN | 8, b""));
    let (r, _, out) = run(&mut server(), &wire);
    assert_eq!((r, out), (Ok(()), vec![0x8a, 1, b'a', 0x88, 0]));
}

#[test]
fn every_ping_gets_its_pong_in_order() {
    let mut wire = Vec::new();
    let mut pongs = Vec::new();
    for i in 0..1000u32 {
        wire.extend(cf(FIN | 9, &i.to_be_bytes()));
        pongs.extend([0x8a, 4]);
        pongs.extend(i.to_be_bytes());
    }
    let (r, got, out) = run(&mut server(), &wire);
    assert_eq!((r, got.len()), (Ok(()), 1000));
    // As many bytes as came in: the connection's output bound holds a flood back.
    assert_eq!(out, pongs);
    // Without auto_pong: none.
    let limits = Limits {
        auto_pong: false,
        ..Limits::default()
    };
    let (r, got, out) = run(&mut with_limits(Role::Server, limits), &wire);
    assert_eq!((r, got.len(), out), (Ok(()), 1000, vec![]));
}

// ---------------------------------------------------------------------------------------
// Sending
// ---------------------------------------------------------------------------------------

#[test]
fn send_refuses_bad_control_frames() {
    let mut m = server();
    let mut out = Vec::new();
    let big = Bytes::from(vec![0; 126]);
    assert!(matches!(
        m.send(&Message::Ping(big.clone()), &mut out),
        Err(Error::InvalidControl(_))
    ));
    assert!(matches!(
        m.send(&Message::Pong(big), &mut out),
        Err(Error::InvalidControl(_))
    ));
    let long = Message::Close(Some(CloseFrame {
        code: 1000,
        reason: vec![b'a'; 124].into(),
    }));
    assert!(matches!(
        m.send(&long, &mut out),
        Err(Error::InvalidControl(_))
    ));
    assert!(matches!(
        m.send(&close(1005, ""), &mut out),
        Err(Error::InvalidControl(_))
    ));
    assert!(out.is_empty());
    assert_eq!(m.state(), State::Open);
    let ok = Message::Close(Some(CloseFrame {
        code: 1000,
        reason: vec![b'a'; 123].into(),
    }));
    m.send(&ok, &mut out).unwrap();
    assert_eq!(out.len(), 2 + 125);
}

#[test]
fn client_masks_come_from_the_seed_and_servers_never_mask() {
    let send = |seed| {
        let mut m = Machine::new(Role::Client, Limits::default(), None, seed);
        let mut out = Vec::new();
        m.send(&text("Hello"), &mut out).unwrap();
        m.send(&text("Hello"), &mut out).unwrap();
        out
    };
    assert_eq!(send(5), send(5));
    assert_ne!(send(5), send(6));
    let out = send(5);
    assert_eq!(out[1] & 0x80, 0x80);
    assert_ne!(out[2..6], out[13..17], "each frame its own mask");
    assert_eq!(
        decode(Role::Client, &out),
        vec![text("Hello"), text("Hello")]
    );
    let mut out = Vec::new();
    let mut s = server();
    for m in [
        text("a"),
        Message::Binary("b".into()),
        Message::Ping("c".into()),
        close(1000, ""),
    ] {
        s.send(&m, &mut out).unwrap();
    }
    assert_eq!(decode(Role::Server, &out).len(), 4);
    // Frames of 3, 3, 3 and 4 bytes: no mask bit in any.
    assert!([1, 4, 7, 10].iter().all(|&i| out[i] & 0x80 == 0));
}

#[test]
fn compressed_round_trip() {
    // deflate: run with the real permessage-deflate after merge.
    let mk = |role| Machine::new(role, Limits::default(), Some(deflate(role)), 11);
    let (mut c, mut s) = (mk(Role::Client), mk(Role::Server));
    let msgs = vec![
        text("Hello Hello Hello Hello"),
        Message::Binary(vec![0; 20000].into()),
        text(""),
        Message::Ping("p".into()),
        text("κόσμε κόσμε"),
    ];
    let mut wire = Vec::new();
    for m in &msgs {
        c.send(m, &mut wire).unwrap();
    }
    assert_eq!(wire[0], FIN | 0x40 | 1, "RSV1 marks a compressed message");
    assert!(wire.len() < 1000, "compressed: {} bytes", wire.len());
    let (r, got, _) = run(&mut s, &wire);
    assert_eq!((r, &got), (Ok(()), &msgs));
    let mut back = Vec::new();
    for m in &got {
        s.send(m, &mut back).unwrap();
    }
    let (r, echoed, _) = run(&mut c, &back);
    assert_eq!((r, echoed), (Ok(()), msgs));
    assert_eq!(
        s.held_bytes() - s.deflate.as_ref().map_or(0, |d| d.held_bytes()),
        0
    );
}

#[test]
fn compressed_text_is_validated_after_inflating() {
    // deflate: holds with the real permessage-deflate too.
    let mut d = deflate(Role::Client);
    let mut payload = Vec::new();
    d.compress(&[b'a', 0xff], &mut payload).unwrap();
    let mut s = Machine::new(
        Role::Server,
        Limits::default(),
        Some(deflate(Role::Server)),
        1,
    );
    expect_fail(&mut s, &cf(FIN | 0x40 | 1, &payload), 1007);
    // Fragmented: RSV1 on the first frame only.
    let mut d = deflate(Role::Client);
    let mut payload = Vec::new();
    d.compress("κόσμε".as_bytes(), &mut payload).unwrap();
    let (a, b) = payload.split_at(payload.len() / 2);
    let mut wire = cf(0x40 | 1, a);
    wire.extend(cf(FIN, b));
    let mut s = Machine::new(
        Role::Server,
        Limits::default(),
        Some(deflate(Role::Server)),
        1,
    );
    assert_eq!(run(&mut s, &wire), (Ok(()), vec![text("κόσμε")], vec![]));
}

// ---------------------------------------------------------------------------------------
// Held memory
// ---------------------------------------------------------------------------------------

#[test]
fn held_bytes_is_zero_between_messages() {
    let mut m = server();
    assert_eq!(m.held_bytes(), 0);
    let wire = cf(1, b"abc");
    run(&mut m, &wire).0.unwrap();
    assert!(m.held_bytes() >= 3, "a message being assembled is held");
    run(&mut m, &cf(FIN, b"def")).0.unwrap();
    assert_eq!(m.held_bytes(), 0);
    // A partial header is kept inline: no heap.
    run(&mut m, &cf(FIN | 2, &[0; 300])[..3]).0.unwrap();
    assert_eq!(m.held_bytes(), 0);
}

// ---------------------------------------------------------------------------------------
// Proptests: splits, round trips, random input
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Gen {
    Text(String),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
}

fn gen_msg() -> impl Strategy<Value = Gen> {
    prop_oneof![
        ".{0,60}".prop_map(Gen::Text),
        proptest::collection::vec(any::<u8>(), 0..300).prop_map(Gen::Binary),
        proptest::collection::vec(any::<u8>(), 0..126).prop_map(Gen::Ping),
    ]
}

/// A client's frames for `msgs`, data fragmented every `frag` bytes (cutting code points)
/// with a Ping between fragments, and the messages a server must deliver for them.
fn build(msgs: &[Gen], frag: usize, mask: [u8; 4]) -> (Vec<u8>, Vec<Message>) {
    let (mut wire, mut want) = (Vec::new(), Vec::new());
    for m in msgs {
        let (op, body) = match m {
            Gen::Text(s) => (1, s.as_bytes().to_vec()),
            Gen::Binary(b) => (2, b.clone()),
            Gen::Ping(p) => {
                wire.extend(frame(FIN | 9, p, Some(mask)));
                want.push(Message::Ping(p.clone().into()));
                continue;
            }
        };
        let pieces: Vec<&[u8]> = if body.is_empty() {
            vec![&[]]
        } else {
            body.chunks(frag).collect()
        };
        for (i, p) in pieces.iter().enumerate() {
            let first = if i == 0 { op } else { 0 };
            let fin = if i + 1 == pieces.len() { FIN } else { 0 };
            wire.extend(frame(fin | first, p, Some(mask)));
            if i == 0 && fin == 0 {
                wire.extend(frame(FIN | 0xa, b"mid", Some(mask)));
                want.push(Message::Pong("mid".into()));
            }
        }
        want.push(match m {
            Gen::Text(s) => Message::Text(s.clone().into()),
            _ => Message::Binary(body.into()),
        });
    }
    (wire, want)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_split_equals_whole(msgs in proptest::collection::vec(gen_msg(), 0..8), frag in 1usize..64, mask in any::<[u8; 4]>(), cuts in proptest::collection::vec(1usize..50, 1..20)) {
        let (wire, want) = build(&msgs, frag, mask);
        let (r, got, _) = run(&mut server(), &wire);
        prop_assert_eq!(r, Ok(()));
        prop_assert_eq!(&got, &want);
        // One byte at a time.
        let mut m = server();
        let mut got1 = Vec::new();
        for b in wire.chunks(1) {
            m.receive(b, &mut Vec::new(), &mut |msg| got1.push(msg)).unwrap();
        }
        prop_assert_eq!(&got1, &want);
        prop_assert_eq!(m.held_bytes(), 0);
        // Random cuts.
        let mut m = server();
        let mut got2 = Vec::new();
        let mut rest = &wire[..];
        for c in cuts.iter().cycle() {
            if rest.is_empty() { break; }
            let (a, b) = rest.split_at((*c).min(rest.len()));
            m.receive(a, &mut Vec::new(), &mut |msg| got2.push(msg)).unwrap();
            rest = b;
        }
        prop_assert_eq!(&got2, &want);
    }

    #[test]
    fn messages_round_trip(input in proptest::collection::vec(any::<u8>(), 0..600), split in any::<u16>(), deflate in any::<bool>()) {
        crate::fuzzing::ws::check_round_trip(if deflate { 18 } else { 16 }, &input, usize::from(split));
    }

    #[test]
    fn mutated_streams_split_the_same(msgs in proptest::collection::vec(gen_msg(), 1..5), frag in 1usize..64, flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4), split in any::<u16>(), flags in 0u8..16) {
        let (mut wire, _) = build(&msgs, frag, K);
        for (at, x) in flips {
            if !wire.is_empty() {
                let n = wire.len();
                wire[at % n] ^= x;
            }
        }
        // Server roles only (the frames are masked), any limits, deflate, auto-pong.
        crate::fuzzing::ws::check_frames(flags & !1, &wire, usize::from(split));
    }

    #[test]
    fn random_bytes_split_the_same(input in proptest::collection::vec(any::<u8>(), 0..200), split in any::<u16>(), flags in 0u8..16) {
        crate::fuzzing::ws::check_frames(flags, &input, usize::from(split));
    }
}

/// A Ping split across reads is held only until it is whole, then handed on (and
/// answered): an idle machine keeps no room for control frames.
#[test]
fn a_split_ping_is_held_only_while_it_is_read() {
    let mut m = server();
    let wire = cf(FIN | 9, b"hello");
    let (r, got, out) = run(&mut m, &wire[..8]);
    assert!(r.is_ok() && got.is_empty() && out.is_empty());
    assert_eq!(m.held_bytes(), 5);
    let (r, got, out) = run(&mut m, &wire[8..]);
    assert!(r.is_ok());
    assert_eq!(got, vec![Message::Ping(Bytes::from_static(b"hello"))]);
    assert_eq!(
        decode(Role::Server, &out),
        vec![Message::Pong(Bytes::from_static(b"hello"))]
    );
    assert_eq!(m.held_bytes(), 0);
}
