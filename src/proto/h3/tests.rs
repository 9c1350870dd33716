use super::*;
use crate::proto::h2::hpack::{encode_int, huffman_encode};

/// An extended CONNECT's field section, built by hand: `:method CONNECT` and `:scheme
/// https` indexed, `:authority` and `:path` literals with static names, then `extra`
/// (field lines), then `x-a: b` with a literal name.
fn section(extra: &[u8]) -> Vec<u8> {
    let mut s = vec![0, 0, 0xc0 | 15, 0xc0 | 23];
    s.extend_from_slice(b"\x50\x09localhost\x51\x05/chat");
    s.extend_from_slice(extra);
    s.extend_from_slice(b"\x23x-a\x01b");
    s
}

fn frame(block: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    put_varint(HEADERS, &mut f);
    put_varint(block.len() as u64, &mut f);
    f.extend_from_slice(block);
    f
}

/// `:protocol: websocket`, literal name and value.
const PROTOCOL_LINE: &[u8] = b"\x27\x02:protocol\x09websocket";

#[test]
fn the_protocol_line_is_taken_out_and_what_follows_is_left() {
    let with = frame(&section(PROTOCOL_LINE));
    let mut buf = with.clone();
    buf.extend_from_slice(b"\x00\x02hi");
    assert_eq!(
        take_protocol(&buf, 16 << 10),
        First::Taken {
            frame: frame(&section(b"")),
            protocol: b"websocket".to_vec(),
            consumed: with.len(),
        }
    );
    for cut in 0..with.len() {
        assert_eq!(
            take_protocol(&buf[..cut], 16 << 10),
            First::More,
            "at {cut}"
        );
    }
}

#[test]
fn a_huffman_coded_name_and_value_are_read() {
    let name = huffman_encode(b":protocol");
    let value = huffman_encode(b"websocket");
    let mut line = Vec::new();
    encode_int(name.len(), 3, 0x20 | 0x08, &mut line);
    line.extend_from_slice(&name);
    encode_int(value.len(), 7, 0x80, &mut line);
    line.extend_from_slice(&value);
    let got = take_protocol(&frame(&section(&line)), 16 << 10);
    assert!(
        matches!(&got, First::Taken { frame: f, protocol, .. }
            if *f == frame(&section(b"")) && protocol == b"websocket"),
        "{got:?}"
    );
}

#[test]
fn reserved_frames_before_the_headers_are_kept() {
    let grease = [0x21, 0x02, b'g', b'g'];
    let mut buf = grease.to_vec();
    buf.extend_from_slice(&frame(&section(PROTOCOL_LINE)));
    let mut want = grease.to_vec();
    want.extend_from_slice(&frame(&section(b"")));
    assert_eq!(
        take_protocol(&buf, 16 << 10),
        First::Taken {
            frame: want,
            protocol: b"websocket".to_vec(),
            consumed: buf.len(),
        }
    );
    assert_eq!(take_protocol(&grease[..3], 16 << 10), First::More);
    let many = [0x21, 0x00].repeat(100);
    assert_eq!(take_protocol(&many, 64), First::Pass, "past the bound");
}

#[test]
fn anything_else_passes() {
    let plain = frame(&section(b""));
    assert_eq!(take_protocol(&plain, 16 << 10), First::Pass, "no :protocol");
    let with = frame(&section(PROTOCOL_LINE));
    assert_eq!(take_protocol(&with, 8), First::Pass, "over the bound");
    let mut data = vec![0x00, 0x01, b'x'];
    data.extend_from_slice(&with);
    assert_eq!(take_protocol(&data, 16 << 10), First::Pass, "DATA first");
    let mut dynamic = section(PROTOCOL_LINE);
    dynamic[0] = 1;
    assert_eq!(
        take_protocol(&frame(&dynamic), 16 << 10),
        First::Pass,
        "the dynamic table"
    );
    let mut truncated = vec![0, 0];
    truncated.extend_from_slice(&PROTOCOL_LINE[..PROTOCOL_LINE.len() - 3]);
    assert_eq!(
        take_protocol(&frame(&truncated), 16 << 10),
        First::Pass,
        "a line cut short"
    );
}

#[test]
fn a_marker_becomes_the_protocol_the_server_takes_back_out() {
    let plain = frame(&section(b""));
    let name = huffman_encode(PROTOCOL_MARKER.as_bytes());
    let mut marker = Vec::new();
    encode_int(name.len(), 3, 0x20 | 0x08, &mut marker);
    marker.extend_from_slice(&name);
    marker.extend_from_slice(b"\x09websocket");
    let swapped = swap_marker(&frame(&section(&marker))).unwrap();
    assert_eq!(
        take_protocol(&swapped, 16 << 10),
        First::Taken {
            frame: plain.clone(),
            protocol: b"websocket".to_vec(),
            consumed: swapped.len(),
        }
    );
    assert_eq!(swap_marker(&plain), None, "no marker");
    assert_eq!(swap_marker(b"\x00\x01x"), None, "not HEADERS");
}

#[test]
fn varints_of_every_length_round_trip() {
    for v in [
        0,
        63,
        64,
        16_383,
        16_384,
        (1 << 30) - 1,
        1 << 30,
        (1 << 62) - 1,
    ] {
        let mut out = Vec::new();
        put_varint(v, &mut out);
        let mut src = &out[..];
        assert_eq!(varint(&mut src), Some(v));
        assert!(src.is_empty());
        assert_eq!(varint(&mut &out[..out.len() - 1]), None);
    }
}

mod props {
    use super::*;
    use proptest::prelude::*;

    /// Field sections of valid and broken lines around a `:protocol` line.
    fn first_bytes() -> impl Strategy<Value = Vec<u8>> {
        let line = prop_oneof![
            Just(PROTOCOL_LINE.to_vec()),
            Just(b"\x23x-a\x01b".to_vec()),
            Just(vec![0xc0 | 15]),
            proptest::collection::vec(any::<u8>(), 0..12),
        ];
        (
            proptest::collection::vec(line, 0..6),
            any::<bool>(),
            proptest::collection::vec(any::<u8>(), 0..8),
        )
            .prop_map(|(lines, grease, tail)| {
                let mut buf = if grease {
                    vec![0x21, 0x01, 0x00]
                } else {
                    Vec::new()
                };
                buf.extend_from_slice(&frame(&[&[0u8, 0][..], &lines.concat()].concat()));
                buf.extend_from_slice(&tail);
                buf
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 500, failure_persistence: None, ..ProptestConfig::default() })]

        /// Any bytes: no panic, a taken frame is never longer than what it replaces, and
        /// a prefix of the input is either incomplete or decided the same way.
        #[test]
        fn any_first_bytes_are_taken_consistently(
            buf in prop_oneof![first_bytes(), proptest::collection::vec(any::<u8>(), 0..64)],
            cut in 0usize..64,
        ) {
            let whole = take_protocol(&buf, 1 << 10);
            if let First::Taken { frame, consumed, .. } = &whole {
                prop_assert!(*consumed <= buf.len());
                prop_assert!(frame.len() < *consumed);
            }
            let cut = cut.min(buf.len());
            let part = take_protocol(&buf[..cut], 1 << 10);
            prop_assert!(part == First::More || part == whole, "{part:?} vs {whole:?}");
            let _ = swap_marker(&buf);
        }
    }
}
