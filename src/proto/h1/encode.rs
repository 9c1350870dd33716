//! Response-head and chunk encoding (RFC 9112 §4, §6, §7.1).
//!
//! The status line is always `HTTP/1.1`, also when answering an HTTP/1.0 request: RFC
//! 9110 §6.2 says a server sends the highest minor version it conforms to within the
//! request's major version, and an HTTP/1.0 client reads an HTTP/1.1 response fine as
//! long as no HTTP/1.1-only feature is used. `framing_for` never picks chunked for an
//! HTTP/1.0 client, and `encode_head` adds `connection: keep-alive` for a persistent
//! HTTP/1.0 connection, which is all that matters.

use http::header::{self, HeaderMap, HeaderValue};
use http::{StatusCode, Version};

use super::chunked::is_forbidden_trailer;
use super::framing::BodyFraming;
use super::parse::list_elements;

/// Picks the framing for a response (RFC 9112 §6.3): no body for HEAD, 1xx, 204 and 304;
/// `Length` when the body size is known exactly; otherwise chunked for HTTP/1.1 and
/// close-delimited for HTTP/1.0 (which has no chunked coding). `version` is the request's.
///
/// (A 2xx response to CONNECT has no body either; the dispatcher handles CONNECT.)
pub(crate) fn framing_for(
    method_is_head: bool,
    status: StatusCode,
    body_size_hint_exact: Option<u64>,
    version: Version,
) -> BodyFraming {
    if method_is_head
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        BodyFraming::Empty
    } else if let Some(n) = body_size_hint_exact {
        BodyFraming::Length(n)
    } else if version == Version::HTTP_11 {
        BodyFraming::Chunked
    } else {
        BodyFraming::UntilClose
    }
}

/// Writes the status line and the header section (through the final empty line).
///
/// - Status line: `HTTP/1.1 <code> <canonical reason>` (empty reason for unknown codes),
///   whatever `version` (the request's version) is; see the module docs.
/// - The app's headers are written as stored (names lowercase), each value on its own
///   line, except:
///   - `content-length` / `transfer-encoding` are dropped and replaced per `framing` for
///     `Length`, `Chunked` and `UntilClose` (none is written for the latter), and for
///     `Empty` with a 1xx, 204 or 304 status (a 304's would have to equal the 200's, which
///     the server cannot know). For `Empty` with any other status (a HEAD response) the
///     app's values are kept, since they describe the body a GET would get.
///   - `connection` is dropped when the connection is to close; then `connection: close`
///     is written. That happens when `!keep_alive` or the framing is `UntilClose`.
/// - `date: <date>` is added unless the app set Date (or `date` is empty).
/// - For an HTTP/1.0 request kept alive, `connection: keep-alive` is added (unless the
///   app's Connection already says so).
///
/// The app's own `connection: close` is written as is even when `keep_alive` is true:
/// the caller should check `response_wants_close` and close after the response.
pub(crate) fn encode_head(
    version: Version,
    status: StatusCode,
    headers: &HeaderMap,
    framing: &BodyFraming,
    keep_alive: bool,
    date: &[u8],
    out: &mut Vec<u8>,
) {
    debug_assert!(
        version == Version::HTTP_11 || !matches!(framing, BodyFraming::Chunked),
        "chunked framing for an HTTP/1.0 client"
    );
    // Status line + date + framing + connection + final CRLF, plus the app's headers.
    let mut need = 32 + 8 + date.len() + 40 + 26 + 2;
    for (name, value) in headers.iter() {
        need += name.as_str().len() + value.len() + 4;
    }
    out.reserve(need);

    write_status_line(status, out);

    // 304 too: a Content-Length there must equal the 200's, which a server cannot know
    // from an empty body, so (as hyper does) none is sent.
    let no_body_status = status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let strip_framing = !matches!(framing, BodyFraming::Empty) || no_body_status;
    let close = !keep_alive || *framing == BodyFraming::UntilClose;
    let mut has_date = date.is_empty();
    let mut app_keep_alive = false;

    for (name, value) in headers.iter() {
        if *name == header::CONTENT_LENGTH || *name == header::TRANSFER_ENCODING {
            if strip_framing {
                continue;
            }
        } else if *name == header::CONNECTION {
            if close {
                continue;
            }
            if has_token(value, b"keep-alive") {
                app_keep_alive = true;
            }
        } else if *name == header::DATE {
            has_date = true;
        }
        put_header(name.as_str().as_bytes(), value.as_bytes(), out);
    }

    if !has_date {
        put_header(b"date", date, out);
    }
    match framing {
        BodyFraming::Length(n) => {
            out.extend_from_slice(b"content-length: ");
            put_dec(*n, out);
            out.extend_from_slice(b"\r\n");
        }
        BodyFraming::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        BodyFraming::Empty | BodyFraming::UntilClose => {}
    }
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    } else if version != Version::HTTP_11 && !app_keep_alive {
        out.extend_from_slice(b"connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Whether the app's response headers ask to close the connection (`Connection: close`).
/// The dispatcher should then close after this response (and pass `keep_alive: false`).
pub(crate) fn response_wants_close(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .any(|v| has_token(v, b"close"))
}

/// One chunk: hex size CRLF data CRLF. Writes nothing for empty `data` (an empty chunk
/// would end the body).
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn encode_chunk(data: &[u8], out: &mut Vec<u8>) {
    if data.is_empty() {
        return;
    }
    out.reserve(data.len() + 16 + 4);
    encode_chunk_header(data.len(), out);
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// Just the chunk-size line, `hex size CRLF`, so a big chunk's data can be sent without
/// copying; the caller then writes exactly `len` bytes of data and `\r\n`.
/// `len` must not be 0 (that is the last chunk: use `encode_last_chunk`); for 0 this
/// writes nothing, so the caller must then write neither data nor `\r\n`.
pub(crate) fn encode_chunk_header(len: usize, out: &mut Vec<u8>) {
    debug_assert!(len > 0, "an empty chunk would end the body");
    if len == 0 {
        return;
    }
    let mut buf = [0u8; 2 * std::mem::size_of::<usize>() + 2];
    let mut i = buf.len() - 2;
    buf[i..].copy_from_slice(b"\r\n");
    let mut n = len;
    loop {
        i -= 1;
        buf[i] = b"0123456789abcdef"[n & 0xf];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// The last chunk and the trailer section: `0 CRLF [trailer lines] CRLF`. Trailer
/// fields that must not appear in trailers (framing, routing, authentication, content
/// description...; see `chunked::is_forbidden_trailer`) are skipped.
pub(crate) fn encode_last_chunk(trailers: Option<&HeaderMap>, out: &mut Vec<u8>) {
    out.extend_from_slice(b"0\r\n");
    if let Some(trailers) = trailers {
        for (name, value) in trailers.iter() {
            if !is_forbidden_trailer(name) {
                put_header(name.as_str().as_bytes(), value.as_bytes(), out);
            }
        }
    }
    out.extend_from_slice(b"\r\n");
}

fn write_status_line(status: StatusCode, out: &mut Vec<u8>) {
    if status == StatusCode::OK {
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        return;
    }
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
}

#[inline]
pub(crate) fn put_header(name: &[u8], value: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

pub(crate) fn put_dec(n: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(decimal(n, &mut [0; 20]));
}

/// `n` in decimal, written at the end of `buf` (no allocation).
pub(crate) fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

fn has_token(value: &HeaderValue, token: &[u8]) -> bool {
    list_elements(value.as_bytes()).any(|t| t.eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &[u8; 29] = b"Sun, 06 Nov 1994 08:49:37 GMT";

    fn head(
        version: Version,
        status: u16,
        headers: &[(&'static str, &'static str)],
        framing: BodyFraming,
        keep_alive: bool,
    ) -> String {
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            map.append(*k, HeaderValue::from_static(v));
        }
        let mut out = Vec::new();
        encode_head(
            version,
            StatusCode::from_u16(status).unwrap(),
            &map,
            &framing,
            keep_alive,
            DATE,
            &mut out,
        );
        String::from_utf8(out).unwrap()
    }

    const V11: Version = Version::HTTP_11;
    const V10: Version = Version::HTTP_10;

    #[test]
    fn basic_200() {
        let h = head(
            V11,
            200,
            &[("content-type", "text/plain")],
            BodyFraming::Length(5),
            true,
        );
        assert_eq!(
            h,
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\
             date: Sun, 06 Nov 1994 08:49:37 GMT\r\ncontent-length: 5\r\n\r\n"
        );
    }

    #[test]
    fn status_lines() {
        assert!(head(V11, 404, &[], BodyFraming::Length(0), true)
            .starts_with("HTTP/1.1 404 Not Found\r\n"));
        assert!(head(V11, 101, &[], BodyFraming::Empty, true)
            .starts_with("HTTP/1.1 101 Switching Protocols\r\n"));
        assert!(head(V11, 599, &[], BodyFraming::Length(0), true).starts_with("HTTP/1.1 599 \r\n"));
        // HTTP/1.0 requests get an HTTP/1.1 status line.
        assert!(
            head(V10, 200, &[], BodyFraming::Length(0), true).starts_with("HTTP/1.1 200 OK\r\n")
        );
        assert!(head(V10, 500, &[], BodyFraming::Length(0), false)
            .starts_with("HTTP/1.1 500 Internal Server Error\r\n"));
    }

    #[test]
    fn date_added_unless_present() {
        let h = head(V11, 200, &[], BodyFraming::Length(0), true);
        assert!(h.contains("\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT\r\n"));
        let h = head(
            V11,
            200,
            &[("date", "Mon, 01 Jan 2024 00:00:00 GMT")],
            BodyFraming::Length(0),
            true,
        );
        assert_eq!(h.matches("date: ").count(), 1);
        assert!(h.contains("date: Mon, 01 Jan 2024 00:00:00 GMT\r\n"));
        // An empty date slice means "don't add one".
        let mut out = Vec::new();
        encode_head(
            V11,
            StatusCode::OK,
            &HeaderMap::new(),
            &BodyFraming::Length(0),
            true,
            b"",
            &mut out,
        );
        assert_eq!(out, b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
    }

    #[test]
    fn framing_headers_replaced() {
        let app = [
            ("content-length", "999"),
            ("transfer-encoding", "gzip"),
            ("x-a", "1"),
        ];
        let h = head(V11, 200, &app, BodyFraming::Length(12), true);
        assert!(!h.contains("999") && !h.contains("gzip"));
        assert!(h.contains("content-length: 12\r\n"));
        assert_eq!(h.matches("content-length").count(), 1);
        let h = head(V11, 200, &app, BodyFraming::Chunked, true);
        assert!(!h.contains("content-length") && !h.contains("gzip"));
        assert!(h.contains("transfer-encoding: chunked\r\n"));
        assert_eq!(h.matches("transfer-encoding").count(), 1);
        let h = head(V10, 200, &app, BodyFraming::UntilClose, true);
        assert!(!h.contains("content-length") && !h.contains("transfer-encoding"));
        assert!(h.contains("connection: close\r\n"));
        assert!(h.contains("x-a: 1\r\n"));
        let h = head(V11, 200, &[], BodyFraming::Length(u64::MAX), true);
        assert!(h.contains("content-length: 18446744073709551615\r\n"));
    }

    #[test]
    fn empty_framing() {
        // HEAD: the app's Content-Length describes the GET body: keep it.
        let h = head(
            V11,
            200,
            &[("content-length", "42")],
            BodyFraming::Empty,
            true,
        );
        assert!(h.contains("content-length: 42\r\n"));
        // 304: dropped (frameworks add a `content-length: 0` that would be wrong).
        let h = head(
            V11,
            304,
            &[("content-length", "42")],
            BodyFraming::Empty,
            true,
        );
        assert!(!h.contains("content-length"));
        // No Content-Length invented.
        let h = head(V11, 200, &[], BodyFraming::Empty, true);
        assert!(!h.contains("content-length") && !h.contains("transfer-encoding"));
        // 204 and 1xx must not carry them.
        for s in [204, 101, 103] {
            let h = head(
                V11,
                s,
                &[("content-length", "42"), ("transfer-encoding", "chunked")],
                BodyFraming::Empty,
                true,
            );
            assert!(
                !h.contains("content-length") && !h.contains("transfer-encoding"),
                "{s}"
            );
        }
    }

    #[test]
    fn connection_handling() {
        // Closing: the app's Connection is replaced by `close`.
        let h = head(
            V11,
            200,
            &[("connection", "keep-alive")],
            BodyFraming::Length(0),
            false,
        );
        assert!(h.contains("connection: close\r\n"));
        assert!(!h.contains("keep-alive"));
        assert_eq!(h.matches("connection").count(), 1);
        // Keep-alive HTTP/1.1: nothing added.
        let h = head(V11, 200, &[], BodyFraming::Length(0), true);
        assert!(!h.contains("connection"));
        // Keep-alive HTTP/1.0: `connection: keep-alive`, once.
        let h = head(V10, 200, &[], BodyFraming::Length(0), true);
        assert!(h.contains("connection: keep-alive\r\n"));
        let h = head(
            V10,
            200,
            &[("connection", "Keep-Alive")],
            BodyFraming::Length(0),
            true,
        );
        assert_eq!(h.to_ascii_lowercase().matches("keep-alive").count(), 1);
        let h = head(V10, 200, &[], BodyFraming::Length(0), false);
        assert!(h.contains("connection: close\r\n"));
        // Upgrade responses keep the app's Connection.
        let h = head(
            V11,
            101,
            &[("connection", "upgrade"), ("upgrade", "websocket")],
            BodyFraming::Empty,
            true,
        );
        assert!(h.contains("connection: upgrade\r\nupgrade: websocket\r\n"));
        // UntilClose forces close even if keep_alive was passed.
        let h = head(
            V11,
            200,
            &[("connection", "keep-alive")],
            BodyFraming::UntilClose,
            true,
        );
        assert!(h.contains("connection: close\r\n") && !h.contains("keep-alive"));
    }

    #[test]
    fn wants_close() {
        let mut m = HeaderMap::new();
        assert!(!response_wants_close(&m));
        m.append(header::CONNECTION, HeaderValue::from_static("upgrade"));
        assert!(!response_wants_close(&m));
        m.append(header::CONNECTION, HeaderValue::from_static("foo, Close"));
        assert!(response_wants_close(&m));
    }

    #[test]
    fn head_round_trips_through_httparse() {
        let mut map = HeaderMap::new();
        map.append("x-multi", HeaderValue::from_static("a"));
        map.append("x-multi", HeaderValue::from_static("b"));
        map.append("set-cookie", HeaderValue::from_static("k=v; Path=/"));
        map.append(
            "x-bytes",
            HeaderValue::from_bytes(b"caf\xc3\xa9\t\xff").unwrap(),
        );
        map.append("X-Upper", HeaderValue::from_static("v"));
        let mut out = Vec::new();
        encode_head(
            V11,
            StatusCode::CREATED,
            &map,
            &BodyFraming::Chunked,
            true,
            DATE,
            &mut out,
        );
        let mut slots = [httparse::EMPTY_HEADER; 16];
        let mut resp = httparse::Response::new(&mut slots);
        let n = resp.parse(&out).unwrap().unwrap();
        assert_eq!(n, out.len());
        assert_eq!(resp.version, Some(1));
        assert_eq!(resp.code, Some(201));
        assert_eq!(resp.reason, Some("Created"));
        let got: Vec<(&str, &[u8])> = resp.headers.iter().map(|h| (h.name, h.value)).collect();
        assert_eq!(
            got,
            [
                ("x-multi", &b"a"[..]),
                ("x-multi", b"b"),
                ("set-cookie", b"k=v; Path=/"),
                ("x-bytes", b"caf\xc3\xa9\t\xff"),
                ("x-upper", b"v"),
                ("date", DATE),
                ("transfer-encoding", b"chunked"),
            ]
        );
    }

    #[test]
    fn appends_to_existing_output() {
        let mut out = b"previous".to_vec();
        encode_head(
            V11,
            StatusCode::OK,
            &HeaderMap::new(),
            &BodyFraming::Length(1),
            true,
            DATE,
            &mut out,
        );
        assert!(out.starts_with(b"previousHTTP/1.1 200 OK\r\n"));
        encode_chunk(b"x", &mut out);
        assert!(out.ends_with(b"\r\n\r\n1\r\nx\r\n"));
    }

    #[test]
    fn framing_choice() {
        use BodyFraming::*;
        let s = StatusCode::from_u16;
        let cases = [
            (false, 200, Some(10), V11, Length(10)),
            (false, 200, Some(0), V11, Length(0)),
            (false, 200, None, V11, Chunked),
            (false, 200, None, V10, UntilClose),
            (false, 200, Some(3), V10, Length(3)),
            (true, 200, Some(10), V11, Empty),
            (true, 200, None, V10, Empty),
            (false, 204, Some(10), V11, Empty),
            (false, 304, None, V11, Empty),
            (false, 100, None, V11, Empty),
            (false, 101, None, V11, Empty),
            (false, 404, None, V11, Chunked),
            (false, 500, Some(5), V10, Length(5)),
        ];
        for (head, status, hint, v, want) in cases {
            assert_eq!(
                framing_for(head, s(status).unwrap(), hint, v),
                want,
                "{head} {status} {hint:?} {v:?}"
            );
        }
    }

    #[test]
    fn chunks() {
        let mut out = Vec::new();
        encode_chunk(b"", &mut out);
        assert!(out.is_empty());
        for (len, hex) in [
            (1usize, "1"),
            (9, "9"),
            (10, "a"),
            (15, "f"),
            (16, "10"),
            (255, "ff"),
            (4096, "1000"),
            (65535, "ffff"),
            (1 << 20, "100000"),
        ] {
            let data = vec![b'z'; len];
            let mut out = Vec::new();
            encode_chunk(&data, &mut out);
            let mut want = format!("{hex}\r\n").into_bytes();
            want.extend_from_slice(&data);
            want.extend_from_slice(b"\r\n");
            assert_eq!(out, want, "{len}");
            let mut out = Vec::new();
            encode_chunk_header(len, &mut out);
            assert_eq!(out, format!("{hex}\r\n").as_bytes());
        }
        let mut out = Vec::new();
        encode_chunk_header(usize::MAX, &mut out);
        assert_eq!(out, format!("{:x}\r\n", usize::MAX).as_bytes());
    }

    #[test]
    fn last_chunk() {
        let mut out = Vec::new();
        encode_last_chunk(None, &mut out);
        assert_eq!(out, b"0\r\n\r\n");
        let mut out = Vec::new();
        encode_last_chunk(Some(&HeaderMap::new()), &mut out);
        assert_eq!(out, b"0\r\n\r\n");
        let mut t = HeaderMap::new();
        t.append("grpc-status", HeaderValue::from_static("0"));
        t.append("content-length", HeaderValue::from_static("5"));
        t.append("x-sum", HeaderValue::from_static("a"));
        t.append("x-sum", HeaderValue::from_static("b"));
        let mut out = Vec::new();
        encode_last_chunk(Some(&t), &mut out);
        assert_eq!(out, b"0\r\ngrpc-status: 0\r\nx-sum: a\r\nx-sum: b\r\n\r\n");
    }

    #[test]
    fn decimal() {
        for n in [0u64, 1, 9, 10, 99, 100, 12345, u64::MAX] {
            let mut out = Vec::new();
            put_dec(n, &mut out);
            assert_eq!(out, n.to_string().as_bytes());
        }
    }
}
