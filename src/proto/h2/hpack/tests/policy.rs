//! The encoder's choices: what is indexed, never indexed, Huffman-coded, and the size updates.

use super::*;
use http::header::{HeaderMap, HeaderName, HeaderValue};

fn map(list: &[(&str, &str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (n, v) in list {
        headers.append(
            HeaderName::from_bytes(n.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    headers
}

fn response(enc: &mut Encoder, status: u16, list: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    let status = http::StatusCode::from_u16(status).unwrap();
    enc.encode_response(status, &map(list), &mut out);
    out
}

fn field(enc: &mut Encoder, name: &str, value: &str, sensitive: bool) -> Vec<u8> {
    let mut out = Vec::new();
    enc.encode_field(name.as_bytes(), value.as_bytes(), sensitive, &mut out);
    out
}

#[test]
fn static_statuses_are_one_byte() {
    let mut enc = Encoder::new();
    for (status, byte) in [(200, 0x88), (204, 0x89), (206, 0x8a), (304, 0x8b)] {
        assert_eq!(response(&mut enc, status, &[]), [byte]);
    }
    for (status, byte) in [(400, 0x8c), (404, 0x8d), (500, 0x8e)] {
        assert_eq!(response(&mut enc, status, &[]), [byte]);
    }
    assert_eq!(enc.table().len(), 0);
}

#[test]
fn other_statuses_are_indexed_once() {
    let mut enc = Encoder::new();
    let first = response(&mut enc, 302, &[]);
    assert_eq!(first[0], 0x48, "literal with indexing, name :status");
    assert_eq!(response(&mut enc, 302, &[]), [0xbe]);
    let mut dec = Decoder::new(4096);
    assert_eq!(decode(&mut dec, &first), Ok(fields(&[(":status", "302")])));
    assert_eq!(decode(&mut dec, &[0xbe]), Ok(fields(&[(":status", "302")])));
}

#[test]
fn repeating_fields_cost_one_byte_the_second_time() {
    let list = [
        ("content-type", "text/html; charset=utf-8"),
        ("server", "fibr"),
        ("vary", "accept-encoding"),
        ("x-custom", "same every time"),
    ];
    let mut enc = Encoder::new();
    let mut dec = Decoder::new(4096);
    let first = response(&mut enc, 200, &list);
    let second = response(&mut enc, 200, &list);
    assert_eq!(second, [0x88, 0xc1, 0xc0, 0xbf, 0xbe]);
    let mut expected = fields(&[(":status", "200")]);
    expected.extend(fields(&list));
    assert_eq!(decode(&mut dec, &first), Ok(expected.clone()));
    assert_eq!(decode(&mut dec, &second), Ok(expected));
    assert_eq!(contents(dec.table()), contents(enc.table()));
}

#[test]
fn per_message_fields_are_not_indexed() {
    let mut enc = Encoder::new();
    let list = [
        ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
        ("content-length", "1234"),
        ("etag", "\"abc\""),
        ("last-modified", "Mon, 21 Oct 2013 20:13:21 GMT"),
        ("set-cookie", "id=a3fWa; Max-Age=2592000"),
        ("location", "/elsewhere"),
    ];
    let block = response(&mut enc, 200, &list);
    assert_eq!(enc.table().len(), 0);
    // date is static index 33: 0000 1111, then 33 - 15.
    assert_eq!(block[1..3], [0x0f, 18]);
    let mut expected = fields(&[(":status", "200")]);
    expected.extend(fields(&list));
    assert_eq!(decode(&mut Decoder::new(4096), &block), Ok(expected));
}

#[test]
fn sensitive_fields_are_never_indexed() {
    let mut enc = Encoder::new();
    // authorization is static index 23: 0001 1111, then 23 - 15.
    let block = field(&mut enc, "authorization", "Bearer xyz", false);
    assert_eq!(block[..2], [0x1f, 8]);
    assert_eq!(
        field(&mut enc, "proxy-authorization", "Basic abc", false)[0],
        0x1f
    );
    assert_eq!(field(&mut enc, "cookie", "short=1", false)[0], 0x1f);
    // A field the caller marks, even one that would be in the static table.
    let block = field(&mut enc, ":status", "200", true);
    assert_eq!(block[0], 0x18);
    assert_eq!(
        decode(&mut Decoder::new(4096), &block),
        Ok(fields(&[(":status", "200")]))
    );
    assert_eq!(field(&mut enc, "x-secret", "s", true)[0], 0x10);
    assert_eq!(enc.table().len(), 0);
    // HeaderValue::set_sensitive reaches the encoder through the HeaderMap.
    let mut headers = HeaderMap::new();
    let mut value = HeaderValue::from_static("token");
    value.set_sensitive(true);
    headers.insert("x-api-key", value);
    let mut block = Vec::new();
    enc.encode_trailers(&headers, &mut block);
    assert_eq!(block[0], 0x10);
    assert_eq!(enc.table().len(), 0);
    assert_eq!(
        decode(&mut Decoder::new(4096), &block),
        Ok(fields(&[("x-api-key", "token")]))
    );
    // A long cookie is worth indexing (clients resend it with every request).
    field(&mut enc, "cookie", "session=0123456789abcdef0123", false);
    assert_eq!(enc.table().len(), 1);
}

#[test]
fn fields_over_half_the_table_are_not_indexed() {
    let mut enc = Encoder::new();
    // 5 + 2012 + 32 = 2049: one over half of 4096.
    let big = "v".repeat(2048 - 32 - 5 + 1);
    assert_eq!(field(&mut enc, "x-big", &big, false)[0], 0x00);
    assert_eq!(enc.table().len(), 0);
    let fits = "v".repeat(2048 - 32 - 5);
    assert_eq!(field(&mut enc, "x-big", &fits, false)[0], 0x40);
    assert_eq!(enc.table().len(), 1);
}

#[test]
fn huffman_only_when_shorter() {
    let mut enc = Encoder::new();
    // "www.example.com" is 12 bytes coded: H bit set.
    assert_eq!(
        field(&mut enc, ":authority", "www.example.com", false)[..2],
        [0x41, 0x8c]
    );
    // Rare bytes get longer coded: sent as they are.
    assert_eq!(
        field(&mut enc, "x-b", "\x7f\x7f", false),
        [0x40, 0x03, b'x', b'-', b'b', 0x02, 0x7f, 0x7f]
    );
}

#[test]
fn size_updates_smallest_then_final() {
    let mut enc = Encoder::new();
    enc.set_max_table_size(0);
    enc.set_max_table_size(4096);
    assert_eq!(response(&mut enc, 200, &[]), [0x20, 0x3f, 0xe1, 0x1f, 0x88]);
    // Only at the start of the next block.
    assert_eq!(response(&mut enc, 200, &[]), [0x88]);
    enc.set_max_table_size(1024);
    assert_eq!(response(&mut enc, 200, &[]), [0x3f, 0xe1, 0x07, 0x88]);
    assert_eq!(enc.table().max_size(), 1024);
    // Above the encoder's own cap (4096) there is nothing to signal past the cap.
    enc.set_max_table_size(65536);
    assert_eq!(response(&mut enc, 200, &[]), [0x3f, 0xe1, 0x1f, 0x88]);
    enc.set_max_table_size(1 << 20);
    assert_eq!(response(&mut enc, 200, &[]), [0x88]);
    // Lowered and raised back above the size in use: both are sent.
    enc.set_max_table_size(100);
    enc.set_max_table_size(8192);
    let block = response(&mut enc, 200, &[]);
    let mut expected = Vec::new();
    encode_int(100, 5, 0x20, &mut expected);
    encode_int(4096, 5, 0x20, &mut expected);
    expected.push(0x88);
    assert_eq!(block, expected);
}

#[test]
fn size_update_evicts_on_both_sides() {
    let mut enc = Encoder::new();
    let mut dec = Decoder::new(4096);
    let list = [("content-type", "text/plain"), ("server", "fibr")];
    decode(&mut dec, &response(&mut enc, 200, &list)).unwrap();
    assert_eq!(enc.table().len(), 2);
    enc.set_max_table_size(50);
    dec.set_max_table_size(50);
    let block = response(&mut enc, 200, &list);
    let mut expected = fields(&[(":status", "200")]);
    expected.extend(fields(&list));
    assert_eq!(decode(&mut dec, &block), Ok(expected));
    // "server: fibr" (42) survived the eviction and is reused; nothing new is indexed, as
    // half of 50 is less than either field.
    assert_eq!(
        block[..3],
        [0x3f, 50 - 31, 0x88],
        "the size update, then :status"
    );
    assert_eq!(block.last(), Some(&0xbe));
    assert_eq!(contents(enc.table()), fields(&[("server", "fibr")]));
    assert_eq!(contents(dec.table()), contents(enc.table()));
}

#[test]
fn request_pseudo_headers_first() {
    let mut enc = Encoder::new();
    let mut dec = Decoder::new(4096);
    let headers = map(&[("user-agent", "curl/8.5.0"), ("accept", "*/*")]);
    let mut block = Vec::new();
    let method = http::Method::GET;
    enc.encode_request(
        &method,
        "https",
        Some("example.com"),
        "/a?b",
        &headers,
        &mut block,
    );
    let expected = fields(&[
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/a?b"),
        ("user-agent", "curl/8.5.0"),
        ("accept", "*/*"),
    ]);
    assert_eq!(decode(&mut dec, &block), Ok(expected));
    assert_eq!(block[..2], [0x82, 0x87]);
    // :path is not indexed; :authority, user-agent and accept are.
    assert_eq!(enc.table().len(), 3);
    assert_eq!(contents(dec.table()), contents(enc.table()));
    // Without an authority, and with a method the static table lacks.
    block.clear();
    let method = http::Method::from_bytes(b"PROPFIND").unwrap();
    enc.encode_request(&method, "http", None, "/", &HeaderMap::new(), &mut block);
    let expected = fields(&[(":method", "PROPFIND"), (":scheme", "http"), (":path", "/")]);
    assert_eq!(decode(&mut dec, &block), Ok(expected));
    // A second identical request is all indexes.
    block.clear();
    enc.encode_request(
        &http::Method::GET,
        "https",
        Some("example.com"),
        "/",
        &headers,
        &mut block,
    );
    assert!(block.iter().all(|b| b & 0x80 != 0), "{block:x?}");
}

#[test]
fn extended_connect_protocol() {
    let mut enc = Encoder::new();
    let mut block = Vec::new();
    enc.begin_block(&mut block);
    enc.encode_field(b":method", b"CONNECT", false, &mut block);
    enc.encode_field(b":protocol", b"websocket", false, &mut block);
    enc.encode_fields(&map(&[("sec-websocket-version", "13")]), &mut block);
    let expected = fields(&[
        (":method", "CONNECT"),
        (":protocol", "websocket"),
        ("sec-websocket-version", "13"),
    ]);
    assert_eq!(decode(&mut Decoder::new(4096), &block), Ok(expected));
}
