//! HTTP/2 on the wire, written by hand: frame types, flags, error codes and settings,
//! frame builders (any length, stream word or padding, so invalid frames too), and a
//! minimal HPACK encoder (literals without Huffman, a few Huffman codes for lowercase
//! letters, raw integers and size updates).

#![allow(dead_code)] // a toolkit: not every helper or constant is used by a case

pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// Frame types (§6).
pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PRIORITY: u8 = 0x2;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

// Flags.
pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY_FLAG: u8 = 0x20;

// Error codes (§7).
pub const NO_ERROR: u32 = 0x0;
pub const PROTOCOL_ERROR: u32 = 0x1;
pub const INTERNAL_ERROR: u32 = 0x2;
pub const FLOW_CONTROL_ERROR: u32 = 0x3;
pub const SETTINGS_TIMEOUT: u32 = 0x4;
pub const STREAM_CLOSED: u32 = 0x5;
pub const FRAME_SIZE_ERROR: u32 = 0x6;
pub const REFUSED_STREAM: u32 = 0x7;
pub const CANCEL: u32 = 0x8;
pub const COMPRESSION_ERROR: u32 = 0x9;
pub const ENHANCE_YOUR_CALM: u32 = 0xb;

// SETTINGS parameters (§6.5.2).
pub const HEADER_TABLE_SIZE: u16 = 0x1;
pub const ENABLE_PUSH: u16 = 0x2;
pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const MAX_FRAME_SIZE: u16 = 0x5;
pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;

pub fn code_name(code: u32) -> String {
    const NAMES: [&str; 14] = [
        "NO_ERROR",
        "PROTOCOL_ERROR",
        "INTERNAL_ERROR",
        "FLOW_CONTROL_ERROR",
        "SETTINGS_TIMEOUT",
        "STREAM_CLOSED",
        "FRAME_SIZE_ERROR",
        "REFUSED_STREAM",
        "CANCEL",
        "COMPRESSION_ERROR",
        "CONNECT_ERROR",
        "ENHANCE_YOUR_CALM",
        "INADEQUATE_SECURITY",
        "HTTP_1_1_REQUIRED",
    ];
    match NAMES.get(code as usize) {
        Some(n) => (*n).to_string(),
        None => format!("0x{code:x}"),
    }
}

pub fn codes_name(codes: &[u32]) -> String {
    codes
        .iter()
        .map(|&c| code_name(c))
        .collect::<Vec<_>>()
        .join(" or ")
}

// ---------------------------------------------------------------------------------------
// Writing frames
// ---------------------------------------------------------------------------------------

/// A frame with an arbitrary length field and the whole 32-bit stream word (reserved bit
/// included): for frames that lie about themselves.
pub fn raw_frame(len: u32, kind: u8, flags: u8, stream_word: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(9 + payload.len());
    f.extend_from_slice(&len.to_be_bytes()[1..]);
    f.push(kind);
    f.push(flags);
    f.extend_from_slice(&stream_word.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A frame whose length field is its payload's length.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    raw_frame(payload.len() as u32, kind, flags, stream, payload)
}

pub fn data(stream: u32, body: &[u8], end_stream: bool) -> Vec<u8> {
    frame(DATA, if end_stream { END_STREAM } else { 0 }, stream, body)
}

/// A padded DATA frame: pad length byte, body, `pad` zero bytes.
pub fn data_padded(stream: u32, body: &[u8], pad: u8, end_stream: bool) -> Vec<u8> {
    let mut p = vec![pad];
    p.extend_from_slice(body);
    p.extend(std::iter::repeat_n(0, pad as usize));
    let flags = PADDED | if end_stream { END_STREAM } else { 0 };
    frame(DATA, flags, stream, &p)
}

pub fn headers(stream: u32, block: &[u8], end_stream: bool, end_headers: bool) -> Vec<u8> {
    let flags = if end_stream { END_STREAM } else { 0 } | if end_headers { END_HEADERS } else { 0 };
    frame(HEADERS, flags, stream, block)
}

pub fn continuation(stream: u32, block: &[u8], end_headers: bool) -> Vec<u8> {
    frame(
        CONTINUATION,
        if end_headers { END_HEADERS } else { 0 },
        stream,
        block,
    )
}

pub fn priority_payload(dependency: u32, exclusive: bool, weight: u8) -> Vec<u8> {
    let word = dependency | if exclusive { 0x8000_0000 } else { 0 };
    let mut p = word.to_be_bytes().to_vec();
    p.push(weight);
    p
}

pub fn priority(stream: u32, dependency: u32, exclusive: bool, weight: u8) -> Vec<u8> {
    frame(
        PRIORITY,
        0,
        stream,
        &priority_payload(dependency, exclusive, weight),
    )
}

pub fn rst_stream(stream: u32, code: u32) -> Vec<u8> {
    frame(RST_STREAM, 0, stream, &code.to_be_bytes())
}

pub fn settings(params: &[(u16, u32)]) -> Vec<u8> {
    let mut p = Vec::new();
    for &(id, v) in params {
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&v.to_be_bytes());
    }
    frame(SETTINGS, 0, 0, &p)
}

pub fn settings_ack() -> Vec<u8> {
    frame(SETTINGS, ACK, 0, &[])
}

pub fn ping(ack: bool, payload: [u8; 8]) -> Vec<u8> {
    frame(PING, if ack { ACK } else { 0 }, 0, &payload)
}

pub fn goaway(last_stream: u32, code: u32, debug: &[u8]) -> Vec<u8> {
    let mut p = last_stream.to_be_bytes().to_vec();
    p.extend_from_slice(&code.to_be_bytes());
    p.extend_from_slice(debug);
    frame(GOAWAY, 0, 0, &p)
}

pub fn window_update(stream: u32, increment: u32) -> Vec<u8> {
    frame(WINDOW_UPDATE, 0, stream, &increment.to_be_bytes())
}

// ---------------------------------------------------------------------------------------
// A minimal HPACK encoder (RFC 7541)
// ---------------------------------------------------------------------------------------

/// An integer with an `n`-bit prefix (§5.1); `flags` are the bits above the prefix.
pub fn hpack_int(flags: u8, n: u32, value: u64) -> Vec<u8> {
    let max = (1u64 << n) - 1;
    if value < max {
        return vec![flags | value as u8];
    }
    let mut out = vec![flags | max as u8];
    let mut v = value - max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
    out
}

/// A string literal without Huffman (§5.2).
pub fn hpack_str(s: &[u8]) -> Vec<u8> {
    let mut out = hpack_int(0, 7, s.len() as u64);
    out.extend_from_slice(s);
    out
}

/// A literal field without indexing, new name (§6.2.2).
pub fn lit(name: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = vec![0x00];
    out.extend(hpack_str(name));
    out.extend(hpack_str(value));
    out
}

/// A literal field with incremental indexing, new name (§6.2.1).
pub fn lit_indexed(name: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = vec![0x40];
    out.extend(hpack_str(name));
    out.extend(hpack_str(value));
    out
}

/// A literal field never indexed, new name (§6.2.3).
pub fn lit_never(name: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = vec![0x10];
    out.extend(hpack_str(name));
    out.extend(hpack_str(value));
    out
}

/// An indexed field (§6.1).
pub fn indexed(index: u64) -> Vec<u8> {
    hpack_int(0x80, 7, index)
}

/// A dynamic table size update (§6.3).
pub fn size_update(size: u64) -> Vec<u8> {
    hpack_int(0x20, 5, size)
}

/// Huffman codes (RFC 7541 Appendix B) of the lowercase letters, as (code, bits).
const HUFFMAN_LOWER: [(u32, u32); 26] = [
    (0x3, 5),  // a 00011
    (0x23, 6), // b 100011
    (0x4, 5),  // c 00100
    (0x24, 6), // d 100100
    (0x5, 5),  // e 00101
    (0x25, 6), // f 100101
    (0x26, 6), // g 100110
    (0x27, 6), // h 100111
    (0x6, 5),  // i 00110
    (0x74, 7), // j 1110100
    (0x75, 7), // k 1110101
    (0x28, 6), // l 101000
    (0x29, 6), // m 101001
    (0x2a, 6), // n 101010
    (0x7, 5),  // o 00111
    (0x2b, 6), // p 101011
    (0x76, 7), // q 1110110
    (0x2c, 6), // r 101100
    (0x8, 5),  // s 01000
    (0x9, 5),  // t 01001
    (0x2d, 6), // u 101101
    (0x77, 7), // v 1110111
    (0x78, 7), // w 1111000
    (0x79, 7), // x 1111001
    (0x7a, 7), // y 1111010
    (0x7b, 7), // z 1111011
];

/// The Huffman coding of a lowercase ASCII string, padded with 1-bits (§5.2).
pub fn huffman_lower(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u64, 0u32);
    for b in s.bytes() {
        let (code, len) = HUFFMAN_LOWER[(b - b'a') as usize];
        acc = (acc << len) | u64::from(code);
        bits += len;
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    if bits > 0 {
        out.push(((acc << (8 - bits)) as u8) | (0xff >> bits));
    }
    out
}

/// A Huffman string literal from already coded bytes (§5.2, H = 1).
pub fn hpack_huffman_str(coded: &[u8]) -> Vec<u8> {
    let mut out = hpack_int(0x80, 7, coded.len() as u64);
    out.extend_from_slice(coded);
    out
}

/// A header list as owned pairs, easy to edit.
pub type Fields = Vec<(String, String)>;

/// A request's pseudo-headers (h2spec's common headers).
pub fn req(method: &str, path: &str) -> Fields {
    vec![
        (":method".into(), method.into()),
        (":scheme".into(), "http".into()),
        (":path".into(), path.into()),
        (":authority".into(), "127.0.0.1".into()),
    ]
}

pub fn get() -> Fields {
    req("GET", "/")
}

pub fn post(len: Option<usize>) -> Fields {
    let mut f = req("POST", "/");
    if let Some(n) = len {
        f.push(("content-length".into(), n.to_string()));
    }
    f
}

/// The header block of `fields`, each a literal without indexing.
pub fn block(fields: &Fields) -> Vec<u8> {
    let mut out = Vec::new();
    for (n, v) in fields {
        out.extend(lit(n.as_bytes(), v.as_bytes()));
    }
    out
}
