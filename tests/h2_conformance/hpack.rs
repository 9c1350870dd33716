//! RFC 7541 (HPACK) as a server's decoder must enforce it: index space, table size
//! updates, Huffman strings; and the representations a client may use.

use super::client::*;
use super::{case, Case, HELLO};
use fibr::fuzzing::http::HpackDecoder;

/// A GET whose block is `get()`'s followed by `extra` must fail with COMPRESSION_ERROR.
fn compression_error(a: std::net::SocketAddr, prefix: &[u8], extra: &[u8]) -> R {
    let mut c = Conn::handshake(a)?;
    let mut b = prefix.to_vec();
    b.extend(block(&get()));
    b.extend_from_slice(extra);
    c.send(&headers(1, &b, true, true));
    c.expect_connection_error(&[COMPRESSION_ERROR])
}

/// A GET whose block is `b` gets 200.
fn accepted(a: std::net::SocketAddr, b: &[u8]) -> R {
    let mut c = Conn::handshake(a)?;
    c.send(&headers(1, b, true, true));
    c.expect_status(1, "200", Some(HELLO)).map(|_| ())
}

/// The field `x-test: <huffman coded>` as a literal without indexing.
fn huffman_field(coded: &[u8]) -> Vec<u8> {
    let mut out = vec![0x00];
    out.extend(hpack_str(b"x-test"));
    out.extend(hpack_huffman_str(coded));
    out
}

pub fn cases() -> Vec<Case> {
    vec![
        // §2.3.3 index address space.
        case("hpack/2.3.3/1", "indexed field with an index past both tables -> COMPRESSION_ERROR", |a| {
            compression_error(a, &[], &indexed(62))
        }),
        case("hpack/2.3.3/2", "literal whose name index is past both tables -> COMPRESSION_ERROR", |a| {
            let mut rep = hpack_int(0x40, 6, 62);
            rep.extend(hpack_str(b"a"));
            compression_error(a, &[], &rep)
        }),
        // §4.2 maximum table size.
        case("hpack/4.2/1", "table size update at the end of a block -> COMPRESSION_ERROR", |a| {
            compression_error(a, &[], &size_update(4096))
        }),
        case("hpack/4.2/2", "table size update between fields -> COMPRESSION_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            let fields = get();
            let mut b = block(&fields[..1].to_vec());
            b.extend(size_update(0));
            b.extend(block(&fields[1..].to_vec()));
            c.send(&headers(1, &b, true, true));
            c.expect_connection_error(&[COMPRESSION_ERROR])
        }),
        case("hpack/4.2/3", "table size updates at the start (two, within the limit) -> accepted", |a| {
            let mut b = size_update(0);
            b.extend(size_update(4096));
            b.extend(block(&get()));
            accepted(a, &b)
        }),
        // §5.2 string literals.
        case("hpack/5.2/0", "Huffman-coded string literal -> accepted", |a| {
            let field = huffman_field(&huffman_lower("conformance"));
            // Check this client's Huffman table against fibr's decoder first.
            let decoded = HpackDecoder::new(4096).decode(&field, usize::MAX)?;
            if decoded != [(b"x-test".to_vec(), b"conformance".to_vec())] {
                return Err(format!("the suite's Huffman coder is wrong: {decoded:?}"));
            }
            let mut b = block(&get());
            b.extend(field);
            accepted(a, &b)
        }),
        case("hpack/5.2/1", "Huffman string with padding over 7 bits -> COMPRESSION_ERROR", |a| {
            let mut coded = huffman_lower("test");
            coded.push(0xff);
            compression_error(a, &[], &huffman_field(&coded))
        }),
        case("hpack/5.2/2", "Huffman string padded with zeros -> COMPRESSION_ERROR", |a| {
            // "test" is 20 bits: the last octet's low 4 bits are padding.
            let mut coded = huffman_lower("test");
            *coded.last_mut().unwrap() &= 0xf0;
            compression_error(a, &[], &huffman_field(&coded))
        }),
        case("hpack/5.2/3", "Huffman string containing EOS -> COMPRESSION_ERROR", |a| {
            compression_error(a, &[], &huffman_field(&[0xff, 0xff, 0xff, 0xff]))
        }),
        // §6.1 indexed field.
        case("hpack/6.1/1", "indexed field with index 0 -> COMPRESSION_ERROR", |a| {
            compression_error(a, &[], &indexed(0))
        }),
        // §6.3 dynamic table size update.
        case("hpack/6.3/1", "table size update over SETTINGS_HEADER_TABLE_SIZE -> COMPRESSION_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            let limit = c.server_setting(HEADER_TABLE_SIZE).unwrap_or(4096);
            let mut b = size_update(u64::from(limit) + 1);
            b.extend(block(&get()));
            c.send(&headers(1, &b, true, true));
            c.expect_connection_error(&[COMPRESSION_ERROR])
        }),
        // §5.1 integers.
        case("hpack/5.1/1", "integer overflowing (continuation bytes without end) -> COMPRESSION_ERROR", |a| {
            compression_error(a, &[], &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f])
        }),
        // RFC 9113 §4.3: every field block is decoded, also one whose stream fails.
        case("hpack/9113-4.3/1", "field block of a malformed request still updates the table", |a| {
            let mut c = Conn::handshake(a)?;
            let mut b = block(&get());
            b.extend(lit_indexed(b"x-dynamic", b"value"));
            b.extend(lit(b"X-UPPER", b"malformed"));
            c.send(&headers(1, &b, true, true));
            c.expect_stream_error(1, &[PROTOCOL_ERROR])?;
            let mut b = block(&get());
            b.extend(indexed(62));
            c.send(&headers(3, &b, true, true));
            c.expect_status(3, "200", Some(HELLO)).map(|_| ())
        }),
        case("hpack/9113-4.3/2", "field block of a refused stream still updates the table", |a| {
            let mut c = Conn::handshake(a)?;
            let max = c.server_setting(MAX_CONCURRENT_STREAMS).unwrap_or(100);
            let mut out = Vec::new();
            let mut id = 1;
            for _ in 0..max {
                out.extend(headers(id, &block(&post(None)), false, true));
                id += 2;
            }
            let mut b = block(&post(None));
            b.extend(lit_indexed(b"x-dynamic", b"value"));
            out.extend(headers(id, &b, true, true));
            c.send(&out);
            c.expect_stream_error(id, &[REFUSED_STREAM])?;
            // Free a slot, then use the entry the refused block added.
            c.send(&data(1, b"x", true));
            c.expect_status(1, "200", Some(b"x"))?;
            let mut b = block(&get());
            b.extend(indexed(62));
            c.send(&headers(id + 2, &b, true, true));
            c.expect_status(id + 2, "200", Some(HELLO)).map(|_| ())
        }),
        // RFC 7541 §4.2: the encoder follows our SETTINGS_HEADER_TABLE_SIZE.
        case("hpack/4.2/4", "SETTINGS_HEADER_TABLE_SIZE 0 -> the server's first block starts with a size update to 0", |a| {
            let mut c = Conn::handshake_with(a, &[(HEADER_TABLE_SIZE, 0)])?;
            c.send_get(1);
            c.expect_headers(1)?;
            if c.last_block.first() != Some(&0x20) {
                return Err(format!(
                    "the first response block does not start with a table size update to 0: {:02x?}",
                    &c.last_block[..c.last_block.len().min(8)]
                ));
            }
            Ok(())
        }),
        // Representations a client may use (h2spec generic/5).
        case("hpack/6.1/2", "indexed fields from the static table -> accepted", |a| {
            // :method GET (2), :scheme http (6), :path / (4), then :authority literal.
            let mut b = [indexed(2), indexed(6), indexed(4)].concat();
            b.extend(hpack_int(0x00, 4, 1));
            b.extend(hpack_str(b"127.0.0.1"));
            accepted(a, &b)
        }),
        case("hpack/6.2.1/1", "literal with incremental indexing, then its dynamic index -> accepted", |a| {
            let mut c = Conn::handshake(a)?;
            let mut b = block(&get());
            b.extend(lit_indexed(b"x-dynamic", b"value"));
            c.send(&headers(1, &b, true, true));
            c.expect_status(1, "200", Some(HELLO))?;
            let mut b = block(&get());
            b.extend(indexed(62));
            c.send(&headers(3, &b, true, true));
            c.expect_status(3, "200", Some(HELLO)).map(|_| ())
        }),
        case("hpack/6.2.2/1", "literal without indexing, indexed name -> accepted", |a| {
            let mut b = block(&get()[..3].to_vec());
            b.extend(hpack_int(0x00, 4, 1)); // :authority
            b.extend(hpack_str(b"127.0.0.1"));
            accepted(a, &b)
        }),
        case("hpack/6.2.3/1", "literal never indexed -> accepted", |a| {
            let mut b = block(&get());
            b.extend(lit_never(b"x-secret", b"hush"));
            accepted(a, &b)
        }),
    ]
}
