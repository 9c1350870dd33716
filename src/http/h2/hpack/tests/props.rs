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

proptest! {
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
