//! The examples of RFC 7541 Appendix C, decoded and re-encoded byte for byte; the error cases
//! (`errors`), the encoder's policy (`policy`), and property tests (`props`).

use super::table::Table;
use super::{decode_int, encode_int, huffman, DecodeError, Decoder, Encoder, Huffman, Indexing};

mod errors;
mod policy;
mod props;

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// Bytes from a hex dump, whitespace ignored.
fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

fn decode(dec: &mut Decoder, block: &[u8]) -> Result<Fields, DecodeError> {
    let mut fields = Vec::new();
    dec.decode(block, usize::MAX, |n, v| {
        fields.push((n.to_vec(), v.to_vec()))
    })?;
    Ok(fields)
}

fn fields(list: &[(&str, &str)]) -> Fields {
    list.iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

/// The table's entries, newest first, as the RFC prints them.
fn contents(table: &Table) -> Fields {
    (0..table.len())
        .map(|i| {
            let (n, v) = table.get(i).unwrap();
            (n.to_vec(), v.to_vec())
        })
        .collect()
}

/// Asserts a table holds `list` (newest first) and has the RFC's size for it.
fn assert_table(table: &Table, list: &[(&str, &str)], size: usize) {
    assert_eq!(contents(table), fields(list));
    assert_eq!(table.size(), size);
}

#[test]
fn c1_integers() {
    let mut out = Vec::new();
    encode_int(10, 5, 0, &mut out);
    assert_eq!(out, [0b01010]);
    out.clear();
    encode_int(1337, 5, 0, &mut out);
    assert_eq!(out, [0b11111, 0b10011010, 0b00001010]);
    out.clear();
    encode_int(42, 8, 0, &mut out);
    assert_eq!(out, [42]);

    // The prefix's other bits (here all set) are not part of the integer.
    let mut src: &[u8] = &[];
    assert_eq!(decode_int(0b111_01010, 5, &mut src), Ok(10));
    let mut src: &[u8] = &[0b10011010, 0b00001010, 0xaa];
    assert_eq!(decode_int(0b111_11111, 5, &mut src), Ok(1337));
    assert_eq!(src, [0xaa], "stops after the last byte of the integer");
    let mut src: &[u8] = &[];
    assert_eq!(decode_int(42, 8, &mut src), Ok(42));
    // The edges of a prefix: 30 fits in 5 bits, 31 needs a zero continuation byte.
    out.clear();
    encode_int(30, 5, 0, &mut out);
    encode_int(31, 5, 0, &mut out);
    assert_eq!(out, [30, 31, 0]);
    let mut src: &[u8] = &[0];
    assert_eq!(decode_int(31, 5, &mut src), Ok(31));
    // The largest integer accepted.
    out.clear();
    encode_int(u32::MAX as usize, 5, 0, &mut out);
    let mut src = &out[1..];
    assert_eq!(decode_int(out[0], 5, &mut src), Ok(u32::MAX as usize));
}

#[test]
fn c2_1_literal_with_indexing() {
    let mut dec = Decoder::new(4096);
    let block = hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572");
    assert_eq!(
        decode(&mut dec, &block),
        Ok(fields(&[("custom-key", "custom-header")]))
    );
    assert_table(dec.table(), &[("custom-key", "custom-header")], 55);
}

#[test]
fn c2_2_literal_without_indexing() {
    let mut dec = Decoder::new(4096);
    let block = hex("040c 2f73 616d 706c 652f 7061 7468");
    assert_eq!(
        decode(&mut dec, &block),
        Ok(fields(&[(":path", "/sample/path")]))
    );
    assert_table(dec.table(), &[], 0);
}

#[test]
fn c2_3_literal_never_indexed() {
    let mut dec = Decoder::new(4096);
    let block = hex("1008 7061 7373 776f 7264 0673 6563 7265 74");
    assert_eq!(
        decode(&mut dec, &block),
        Ok(fields(&[("password", "secret")]))
    );
    assert_table(dec.table(), &[], 0);
}

#[test]
fn c2_4_indexed() {
    let mut dec = Decoder::new(4096);
    assert_eq!(decode(&mut dec, &[0x82]), Ok(fields(&[(":method", "GET")])));
    assert_table(dec.table(), &[], 0);
}

/// One step of a C.3 to C.6 sequence: the block, the header list, the table after it.
struct Step {
    block: &'static str,
    list: &'static [(&'static str, &'static str)],
    table: &'static [(&'static str, &'static str)],
    size: usize,
}

fn run_decoder(table_size: usize, steps: &[Step]) {
    let mut dec = Decoder::new(table_size);
    for (i, step) in steps.iter().enumerate() {
        assert_eq!(
            decode(&mut dec, &hex(step.block)),
            Ok(fields(step.list)),
            "block {i}"
        );
        assert_table(dec.table(), step.table, step.size);
    }
}

const AUTH: (&str, &str) = (":authority", "www.example.com");
const NO_CACHE: (&str, &str) = ("cache-control", "no-cache");
const CUSTOM: (&str, &str) = ("custom-key", "custom-value");
const REQ1: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    AUTH,
];
const REQ2: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    AUTH,
    NO_CACHE,
];
const REQ3: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "https"),
    (":path", "/index.html"),
    AUTH,
    CUSTOM,
];

const C3: [Step; 3] = [
    Step {
        block: "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        list: REQ1,
        table: &[AUTH],
        size: 57,
    },
    Step {
        block: "8286 84be 5808 6e6f 2d63 6163 6865",
        list: REQ2,
        table: &[NO_CACHE, AUTH],
        size: 110,
    },
    Step {
        block: "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
        list: REQ3,
        table: &[CUSTOM, NO_CACHE, AUTH],
        size: 164,
    },
];

const C4: [Step; 3] = [
    Step {
        block: "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        ..C3[0]
    },
    Step {
        block: "8286 84be 5886 a8eb 1064 9cbf",
        ..C3[1]
    },
    Step {
        block: "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        ..C3[2]
    },
];

const STATUS_302: (&str, &str) = (":status", "302");
const STATUS_307: (&str, &str) = (":status", "307");
const PRIVATE: (&str, &str) = ("cache-control", "private");
const DATE_21: (&str, &str) = ("date", "Mon, 21 Oct 2013 20:13:21 GMT");
const DATE_22: (&str, &str) = ("date", "Mon, 21 Oct 2013 20:13:22 GMT");
const LOCATION: (&str, &str) = ("location", "https://www.example.com");
const GZIP: (&str, &str) = ("content-encoding", "gzip");
const COOKIE: (&str, &str) = (
    "set-cookie",
    "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
);

const C5: [Step; 3] = [
    Step {
        block: "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
                2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
                6c65 2e63 6f6d",
        list: &[STATUS_302, PRIVATE, DATE_21, LOCATION],
        table: &[LOCATION, DATE_21, PRIVATE, STATUS_302],
        size: 222,
    },
    Step {
        block: "4803 3330 37c1 c0bf",
        list: &[STATUS_307, PRIVATE, DATE_21, LOCATION],
        table: &[STATUS_307, LOCATION, DATE_21, PRIVATE],
        size: 222,
    },
    Step {
        block: "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
                54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
                5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
                3d31",
        list: &[(":status", "200"), PRIVATE, DATE_22, LOCATION, GZIP, COOKIE],
        table: &[COOKIE, GZIP, DATE_22],
        size: 215,
    },
];

const C6: [Step; 3] = [
    Step {
        block: "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
                2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        ..C5[0]
    },
    Step {
        block: "4883 640e ffc1 c0bf",
        ..C5[1]
    },
    Step {
        block: "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
                77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
                9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        ..C5[2]
    },
];

#[test]
fn c3_requests_without_huffman() {
    run_decoder(4096, &C3);
}

#[test]
fn c4_requests_with_huffman() {
    run_decoder(4096, &C4);
}

#[test]
fn c5_responses_without_huffman() {
    run_decoder(256, &C5);
}

#[test]
fn c6_responses_with_huffman() {
    run_decoder(256, &C6);
}

/// One representation, as the RFC's examples chose it.
enum Rep {
    Indexed(usize),
    Literal(&'static str, Option<usize>, &'static str),
}

/// Encodes the choices with the low-level calls and compares bytes and table with the RFC.
fn run_encoder(table_size: usize, huffman: Huffman, steps: &[Step], reps: &[&[Rep]]) {
    let mut enc = Encoder::new();
    if table_size != 4096 {
        enc.set_max_table_size(table_size);
        let mut update = Vec::new();
        enc.begin_block(&mut update);
        let mut expected = Vec::new();
        encode_int(table_size, 5, 0x20, &mut expected);
        assert_eq!(update, expected);
    }
    for (i, (step, reps)) in steps.iter().zip(reps).enumerate() {
        let mut out = Vec::new();
        enc.begin_block(&mut out);
        for rep in reps.iter() {
            match *rep {
                Rep::Indexed(index) => enc.encode_indexed(index, &mut out),
                Rep::Literal(name, index, value) => {
                    let (n, v) = (name.as_bytes(), value.as_bytes());
                    enc.encode_literal(n, index, v, Indexing::Incremental, huffman, &mut out);
                }
            }
        }
        assert_eq!(out, hex(step.block), "block {i}");
        assert_table(enc.table(), step.table, step.size);
    }
}

const C3_REPS: [&[Rep]; 3] = [
    &[
        Rep::Indexed(2),
        Rep::Indexed(6),
        Rep::Indexed(4),
        Rep::Literal(":authority", Some(1), "www.example.com"),
    ],
    &[
        Rep::Indexed(2),
        Rep::Indexed(6),
        Rep::Indexed(4),
        Rep::Indexed(62),
        Rep::Literal("cache-control", Some(24), "no-cache"),
    ],
    &[
        Rep::Indexed(2),
        Rep::Indexed(7),
        Rep::Indexed(5),
        Rep::Indexed(63),
        Rep::Literal("custom-key", None, "custom-value"),
    ],
];

const C5_REPS: [&[Rep]; 3] = [
    &[
        Rep::Literal(":status", Some(8), "302"),
        Rep::Literal("cache-control", Some(24), "private"),
        Rep::Literal("date", Some(33), DATE_21.1),
        Rep::Literal("location", Some(46), LOCATION.1),
    ],
    &[
        Rep::Literal(":status", Some(8), "307"),
        Rep::Indexed(65),
        Rep::Indexed(64),
        Rep::Indexed(63),
    ],
    &[
        Rep::Indexed(8),
        Rep::Indexed(65),
        Rep::Literal("date", Some(33), DATE_22.1),
        Rep::Indexed(64),
        Rep::Literal("content-encoding", Some(26), "gzip"),
        Rep::Literal("set-cookie", Some(55), COOKIE.1),
    ],
];

#[test]
fn c3_encoded() {
    run_encoder(4096, Huffman::Never, &C3, &C3_REPS);
}

#[test]
fn c4_encoded() {
    run_encoder(4096, Huffman::Always, &C4, &C3_REPS);
}

#[test]
fn c5_encoded() {
    run_encoder(256, Huffman::Never, &C5, &C5_REPS);
}

#[test]
fn c6_encoded() {
    run_encoder(256, Huffman::Always, &C6, &C5_REPS);
}

#[test]
fn huffman_strings_of_appendix_c() {
    let cases = [
        ("www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"),
        ("no-cache", "a8eb 1064 9cbf"),
        ("custom-key", "25a8 49e9 5ba9 7d7f"),
        ("custom-value", "25a8 49e9 5bb8 e8b4 bf"),
        ("302", "6402"),
        ("307", "640e ff"),
        ("private", "aec3 771a 4b"),
        (
            DATE_21.1,
            "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff",
        ),
        (
            DATE_22.1,
            "d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff",
        ),
        (LOCATION.1, "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3"),
        ("gzip", "9bd9 ab"),
        (
            COOKIE.1,
            "94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587
             3160 65c0 03ed 4ee5 b106 3d50 07",
        ),
    ];
    for (plain, coded) in cases {
        let coded = hex(coded);
        let mut out = Vec::new();
        huffman::encode(plain.as_bytes(), &mut out);
        assert_eq!(out, coded, "{plain}");
        assert_eq!(huffman::encoded_len(plain.as_bytes()), coded.len());
        let mut buf = vec![0; huffman::max_decoded_len(coded.len())];
        let n = huffman::decode(&coded, &mut buf).unwrap();
        assert_eq!(&buf[..n], plain.as_bytes());
    }
}

/// Appendix B's "code as hex" column, transcribed separately from the lengths `huffman`
/// derives the codes from.
#[rustfmt::skip]
const APPENDIX_B_CODES: [u32; 257] = [
    0x1ff8, 0x7fffd8, 0xfffffe2, 0xfffffe3, 0xfffffe4, 0xfffffe5, 0xfffffe6, 0xfffffe7,
    0xfffffe8, 0xffffea, 0x3ffffffc, 0xfffffe9, 0xfffffea, 0x3ffffffd, 0xfffffeb, 0xfffffec,
    0xfffffed, 0xfffffee, 0xfffffef, 0xffffff0, 0xffffff1, 0xffffff2, 0x3ffffffe, 0xffffff3,
    0xffffff4, 0xffffff5, 0xffffff6, 0xffffff7, 0xffffff8, 0xffffff9, 0xffffffa, 0xffffffb,
    0x14, 0x3f8, 0x3f9, 0xffa, 0x1ff9, 0x15, 0xf8, 0x7fa, 0x3fa, 0x3fb, 0xf9, 0x7fb, 0xfa, 0x16, 0x17, 0x18,
    0x0, 0x1, 0x2, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x5c, 0xfb, 0x7ffc, 0x20, 0xffb, 0x3fc,
    0x1ffa, 0x21, 0x5d, 0x5e, 0x5f, 0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a,
    0x6b, 0x6c, 0x6d, 0x6e, 0x6f, 0x70, 0x71, 0x72, 0xfc, 0x73, 0xfd, 0x1ffb, 0x7fff0, 0x1ffc, 0x3ffc, 0x22,
    0x7ffd, 0x3, 0x23, 0x4, 0x24, 0x5, 0x25, 0x26, 0x27, 0x6, 0x74, 0x75, 0x28, 0x29, 0x2a, 0x7,
    0x2b, 0x76, 0x2c, 0x8, 0x9, 0x2d, 0x77, 0x78, 0x79, 0x7a, 0x7b, 0x7ffe, 0x7fc, 0x3ffd, 0x1ffd, 0xffffffc,
    0xfffe6, 0x3fffd2, 0xfffe7, 0xfffe8, 0x3fffd3, 0x3fffd4, 0x3fffd5, 0x7fffd9,
    0x3fffd6, 0x7fffda, 0x7fffdb, 0x7fffdc, 0x7fffdd, 0x7fffde, 0xffffeb, 0x7fffdf,
    0xffffec, 0xffffed, 0x3fffd7, 0x7fffe0, 0xffffee, 0x7fffe1, 0x7fffe2, 0x7fffe3,
    0x7fffe4, 0x1fffdc, 0x3fffd8, 0x7fffe5, 0x3fffd9, 0x7fffe6, 0x7fffe7, 0xffffef,
    0x3fffda, 0x1fffdd, 0xfffe9, 0x3fffdb, 0x3fffdc, 0x7fffe8, 0x7fffe9, 0x1fffde,
    0x7fffea, 0x3fffdd, 0x3fffde, 0xfffff0, 0x1fffdf, 0x3fffdf, 0x7fffeb, 0x7fffec,
    0x1fffe0, 0x1fffe1, 0x3fffe0, 0x1fffe2, 0x7fffed, 0x3fffe1, 0x7fffee, 0x7fffef,
    0xfffea, 0x3fffe2, 0x3fffe3, 0x3fffe4, 0x7ffff0, 0x3fffe5, 0x3fffe6, 0x7ffff1,
    0x3ffffe0, 0x3ffffe1, 0xfffeb, 0x7fff1, 0x3fffe7, 0x7ffff2, 0x3fffe8, 0x1ffffec,
    0x3ffffe2, 0x3ffffe3, 0x3ffffe4, 0x7ffffde, 0x7ffffdf, 0x3ffffe5, 0xfffff1, 0x1ffffed,
    0x7fff2, 0x1fffe3, 0x3ffffe6, 0x7ffffe0, 0x7ffffe1, 0x3ffffe7, 0x7ffffe2, 0xfffff2,
    0x1fffe4, 0x1fffe5, 0x3ffffe8, 0x3ffffe9, 0xffffffd, 0x7ffffe3, 0x7ffffe4, 0x7ffffe5,
    0xfffec, 0xfffff3, 0xfffed, 0x1fffe6, 0x3fffe9, 0x1fffe7, 0x1fffe8, 0x7ffff3,
    0x3fffea, 0x3fffeb, 0x1ffffee, 0x1ffffef, 0xfffff4, 0xfffff5, 0x3ffffea, 0x7ffff4,
    0x3ffffeb, 0x7ffffe6, 0x3ffffec, 0x3ffffed, 0x7ffffe7, 0x7ffffe8, 0x7ffffe9, 0x7ffffea,
    0x7ffffeb, 0xffffffe, 0x7ffffec, 0x7ffffed, 0x7ffffee, 0x7ffffef, 0x7fffff0, 0x3ffffee,
    0x3fffffff,
];

#[test]
fn huffman_codes_match_appendix_b() {
    for (sym, &code) in APPENDIX_B_CODES.iter().enumerate() {
        let (derived, len) = huffman::CODES[sym];
        assert_eq!(derived, code, "symbol {sym}");
        // The code fits its length, and only the 5-bit '0' is all zeros.
        assert!(u64::from(code) < 1u64 << len, "symbol {sym}");
    }
    // A sample of the lengths, one per distinct length, straight from the RFC.
    let lengths = [
        (b'0', 5),
        (b' ', 6),
        (b':', 7),
        (b'&', 8),
        (b'!', 10),
        (b'\'', 11),
        (b'#', 12),
        (0, 13),
        (b'^', 14),
        (b'<', 15),
        (b'\\', 19),
        (128, 20),
        (153, 21),
        (129, 22),
        (1, 23),
        (9, 24),
        (199, 25),
        (192, 26),
        (203, 27),
        (2, 28),
    ];
    for (sym, len) in lengths {
        assert_eq!(huffman::CODES[sym as usize].1, len, "symbol {sym}");
    }
    assert_eq!(huffman::CODES[256], (0x3fffffff, 30));
}

/// The memory figures: the sizes of the two types and the heap their tables take.
#[test]
fn memory() {
    let dec = Decoder::new(4096);
    let enc = Encoder::new();
    assert_eq!(dec.table().heap_bytes(), 0);
    assert_eq!(enc.table().heap_bytes(), 0);
    // A curl request on one side, a small response on the other.
    let mut client = Encoder::new();
    let mut server = Decoder::new(4096);
    let mut headers = http::HeaderMap::new();
    headers.insert(http::header::USER_AGENT, "curl/8.5.0".parse().unwrap());
    headers.insert(http::header::ACCEPT, "*/*".parse().unwrap());
    let mut block = Vec::new();
    let get = http::Method::GET;
    client.encode_request(
        &get,
        "https",
        Some("localhost:8443"),
        "/",
        &headers,
        &mut block,
    );
    server.decode(&block, usize::MAX, |_, _| {}).unwrap();
    let request_heap = server.table().heap_bytes();

    let mut resp = Encoder::new();
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        "text/plain; charset=utf-8".parse().unwrap(),
    );
    headers.insert(http::header::CONTENT_LENGTH, "13".parse().unwrap());
    headers.insert(
        http::header::DATE,
        "Mon, 21 Oct 2013 20:13:21 GMT".parse().unwrap(),
    );
    headers.insert(http::header::SERVER, "fibr".parse().unwrap());
    block.clear();
    resp.encode_response(http::StatusCode::OK, &headers, &mut block);
    let response_heap = resp.table().heap_bytes();
    eprintln!(
        "size_of Decoder {} Encoder {}; table heap: empty 0, after a curl request {} \
         ({} entries, HPACK size {}), after a small response {} ({} entries, HPACK size {})",
        std::mem::size_of::<Decoder>(),
        std::mem::size_of::<Encoder>(),
        request_heap,
        server.table().len(),
        server.table().size(),
        response_heap,
        resp.table().len(),
        resp.table().size(),
    );
    assert!(std::mem::size_of::<Decoder>() <= 72);
    assert!(std::mem::size_of::<Encoder>() <= 72);
    assert!(request_heap <= 256, "{request_heap}");
    assert!(response_heap <= 256, "{response_heap}");
}
