//! Property tests: no input panics, and encoding round-trips.

use super::*;
use proptest::prelude::*;

/// Names the policy treats differently, static ones, and made-up ones.
fn name() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::sample::select(vec![
            ":status",
            ":path",
            ":authority",
            ":method",
            "content-type",
            "date",
            "cookie",
            "authorization",
            "accept-encoding",
            "set-cookie",
            "server",
            "vary",
            "x-request-id",
        ])
        .prop_map(|n| n.as_bytes().to_vec()),
        "[a-z-]{1,12}".prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 0..8),
    ]
}

/// Values that repeat (so the table is used) and arbitrary ones.
fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::sample::select(vec![
            "200",
            "GET",
            "/",
            "gzip, deflate",
            "text/html",
            "",
            "x"
        ])
        .prop_map(|v| v.as_bytes().to_vec()),
        prop::collection::vec(any::<u8>(), 0..40),
        prop::collection::vec(any::<u8>(), 0..3000),
    ]
}

fn field_list() -> impl Strategy<Value = Vec<(Vec<u8>, Vec<u8>, bool)>> {
    prop::collection::vec((name(), value(), prop::bool::weighted(0.1)), 0..12)
}

/// Huffman decoding one bit at a time against the code table: slow, and obviously right.
fn reference_huffman(src: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::new();
    let (mut code, mut len) = (0u32, 0u8);
    for byte in src {
        for shift in (0..8).rev() {
            code = (code << 1) | u32::from(byte >> shift & 1);
            len += 1;
            if let Some(sym) = (0..257).find(|&s| huffman::CODES[s] == (code, len)) {
                if sym == 256 {
                    return Err(DecodeError::HuffmanEos);
                }
                out.push(sym as u8);
                (code, len) = (0, 0);
            }
        }
    }
    let ones = code == (1 << len) - 1;
    match (ones, len) {
        (true, 0..=7) => Ok(out),
        (true, _) => Err(DecodeError::HuffmanPaddingTooLong),
        (false, _) => Err(DecodeError::HuffmanPaddingNotOnes),
    }
}

proptest! {
    #[test]
    fn huffman_decoder_agrees_with_the_reference(
        src in prop::collection::vec(prop_oneof![any::<u8>(), Just(0xff), Just(0xfe)], 0..24),
    ) {
        let mut buf = vec![0; huffman::max_decoded_len(src.len())];
        let got = huffman::decode(&src, &mut buf).map(|n| buf[..n].to_vec());
        prop_assert_eq!(got, reference_huffman(&src));
    }

    #[test]
    fn damaged_blocks_never_panic(
        list in field_list(),
        damage in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut enc = Encoder::new();
        let mut block = Vec::new();
        for (n, v, sensitive) in &list {
            enc.encode_field(n, v, *sensitive, &mut block);
        }
        if block.is_empty() {
            return Ok(());
        }
        for (at, byte) in &damage {
            let i = at.index(block.len());
            block[i] = *byte;
        }
        let mut dec = Decoder::new(4096);
        let _ = dec.decode(&block, usize::MAX, |_, _| {});
        let _ = dec.decode(&block[..cut.index(block.len())], 4096, |_, _| {});
    }

    #[test]
    fn random_bytes_never_panic(
        blocks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 1..4),
        table in prop_oneof![Just(0usize), Just(64), Just(4096), 0..10_000usize],
        limit in prop_oneof![Just(usize::MAX), 0..2000usize],
    ) {
        let mut dec = Decoder::new(table);
        for block in &blocks {
            let mut seen = 0usize;
            let result = dec.decode(block, limit, |n, v| seen += n.len() + v.len() + 32);
            prop_assert!(seen <= limit);
            prop_assert!(dec.table().size() <= dec.table().max_size());
            if result.is_err_and(|e| e.is_connection_error()) {
                break;
            }
        }
    }

    #[test]
    fn huffman_round_trips(src in prop::collection::vec(any::<u8>(), 0..500)) {
        let mut coded = Vec::new();
        huffman::encode(&src, &mut coded);
        prop_assert_eq!(coded.len(), huffman::encoded_len(&src));
        let mut buf = vec![0; huffman::max_decoded_len(coded.len())];
        let n = huffman::decode(&coded, &mut buf).unwrap();
        prop_assert_eq!(&buf[..n], &src[..]);
    }

    #[test]
    fn fields_round_trip_across_blocks(
        blocks in prop::collection::vec(
            (prop::collection::vec(0..6000usize, 0..3), field_list()),
            1..8,
        ),
    ) {
        let mut enc = Encoder::new();
        let mut dec = Decoder::new(4096);
        for (sizes, list) in &blocks {
            // The peer (our decoder) changes its setting; the encoder hears of it, the
            // decoder applies it as the acknowledgement comes back.
            for &size in sizes {
                enc.set_max_table_size(size);
                dec.set_max_table_size(size);
            }
            let mut block = Vec::new();
            enc.begin_block(&mut block);
            for (n, v, sensitive) in list {
                enc.encode_field(n, v, *sensitive, &mut block);
            }
            let expected: Fields = list.iter().map(|(n, v, _)| (n.clone(), v.clone())).collect();
            prop_assert_eq!(decode(&mut dec, &block), Ok(expected));
            prop_assert_eq!(contents(dec.table()), contents(enc.table()));
            prop_assert_eq!(dec.table().size(), enc.table().size());
            prop_assert_eq!(dec.table().max_size(), enc.table().max_size());
            // Memory follows the table's size: the bytes never outgrow it, plus 12 per entry.
            let max = dec.table().max_size();
            prop_assert!(dec.table().heap_bytes() <= 2 * max + 64, "{}", dec.table().heap_bytes());
            prop_assert!(enc.table().heap_bytes() <= 2 * max + 64, "{}", enc.table().heap_bytes());
        }
    }

    #[test]
    fn responses_round_trip(
        status in 100u16..1000,
        list in prop::collection::vec(
            (prop::sample::select(vec!["content-type", "server", "date", "x-a", "x-b", "cookie"]),
             "[ -~]{0,30}"),
            0..10,
        ),
        rounds in 1usize..4,
    ) {
        let mut headers = http::HeaderMap::new();
        for (n, v) in &list {
            headers.append(*n, http::HeaderValue::from_str(v).unwrap());
        }
        let status = http::StatusCode::from_u16(status).unwrap();
        let mut expected = vec![(b":status".to_vec(), status.as_str().as_bytes().to_vec())];
        expected.extend(headers.iter().map(|(n, v)| (n.as_str().as_bytes().to_vec(), v.as_bytes().to_vec())));
        let mut enc = Encoder::new();
        let mut dec = Decoder::new(4096);
        for _ in 0..rounds {
            let mut block = Vec::new();
            enc.encode_response(status, &headers, &mut block);
            prop_assert_eq!(decode(&mut dec, &block), Ok(expected.clone()));
        }
    }
}
