//! The request-head parser's tests: every rule, limit and error status.
use super::super::testutil::Rng;
use super::*;
use http::StatusCode;

fn limits() -> Limits {
    Limits::default()
}

fn parse(buf: &[u8]) -> Result<Option<(RequestHead, usize)>, ParseError> {
    parse_request_head(buf, &limits())
}

fn ok(buf: &[u8]) -> (RequestHead, usize) {
    match parse(buf) {
        Ok(Some(r)) => r,
        other => panic!(
            "expected a head for {:?}, got {:?}",
            String::from_utf8_lossy(buf),
            other.map(|o| o.map(|(h, n)| (h.method, h.uri, n)))
        ),
    }
}

fn err(buf: &[u8]) -> ParseError {
    match parse(buf) {
        Err(e) => e,
        Ok(o) => panic!(
            "expected an error for {:?}, got {:?}",
            String::from_utf8_lossy(buf),
            o.map(|(h, n)| (h.method, h.uri, n))
        ),
    }
}

fn status(buf: &[u8]) -> u16 {
    err(buf).status().as_u16()
}

#[test]
fn simple_get() {
    let buf = b"GET /index.html?a=b HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n";
    let (h, n) = ok(buf);
    assert_eq!(n, buf.len());
    assert_eq!(h.method, Method::GET);
    assert_eq!(h.uri.path(), "/index.html");
    assert_eq!(h.uri.query(), Some("a=b"));
    assert_eq!(h.version, Version::HTTP_11);
    assert_eq!(h.headers.len(), 2);
    assert_eq!(h.headers["host"], "example.com");
    assert_eq!(h.headers["accept"], "*/*");
    assert_eq!(h.framing, BodyFraming::Empty);
    assert!(h.keep_alive);
    assert!(!h.expect_continue);
    assert!(!h.upgrade);
}

#[test]
fn incomplete_at_every_prefix() {
    let buf = b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello";
    let head_len = buf.len() - 5;
    for i in 0..head_len {
        assert!(
            matches!(parse(&buf[..i]), Ok(None)),
            "prefix {i} should be incomplete"
        );
    }
    for i in head_len..=buf.len() {
        let (h, n) = ok(&buf[..i]);
        assert_eq!(n, head_len);
        assert_eq!(h.framing, BodyFraming::Length(5));
    }
}

#[test]
fn pipelined_heads_consumed_exactly() {
    let first = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
    let second = b"GET /b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
    let mut buf = first.to_vec();
    buf.extend_from_slice(second);
    let (h1, n1) = ok(&buf);
    assert_eq!(n1, first.len());
    assert_eq!(h1.uri.path(), "/a");
    assert!(h1.keep_alive);
    let (h2, n2) = ok(&buf[n1..]);
    assert_eq!(n2, second.len());
    assert_eq!(h2.uri.path(), "/b");
    assert!(!h2.keep_alive);
}

#[test]
fn pipelined_with_body_in_between() {
    let buf = b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\nHost: h\r\n\r\n";
    let (h1, n1) = ok(buf);
    assert_eq!(h1.framing, BodyFraming::Length(3));
    assert_eq!(&buf[n1..n1 + 3], b"abc");
    let (h2, n2) = ok(&buf[n1 + 3..]);
    assert_eq!(h2.uri.path(), "/b");
    assert_eq!(n1 + 3 + n2, buf.len());
}

#[test]
fn leading_empty_lines_ignored() {
    let buf = b"\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
    let (h, n) = ok(buf);
    assert_eq!(n, buf.len());
    assert_eq!(h.method, Method::GET);
    let buf = b"\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
    assert_eq!(ok(buf).1, buf.len());
    // Only empty lines so far: incomplete.
    assert!(matches!(parse(b"\r\n\r\n"), Ok(None)));
    assert!(matches!(parse(b"\r"), Ok(None)));
    // Too many.
    let mut many = b"\r\n".repeat(MAX_LEADING_EMPTY_LINES + 1);
    many.extend_from_slice(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(err(&many), ParseError::TooManyEmptyLines);
    assert_eq!(status(&many), 400);
    let mut max = b"\r\n".repeat(MAX_LEADING_EMPTY_LINES);
    max.extend_from_slice(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(ok(&max).1, max.len());
    // A bare CR is not an empty line.
    assert_eq!(
        err(b"\rxGET / HTTP/1.1\r\n\r\n"),
        ParseError::InvalidLineEnding
    );
}

#[test]
fn bare_lf_line_endings_accepted() {
    let buf = b"GET / HTTP/1.1\nHost: h\n\n";
    let (h, n) = ok(buf);
    assert_eq!(n, buf.len());
    assert_eq!(h.headers["host"], "h");
}

#[test]
fn malformed_request_lines_are_400() {
    for buf in [
        &b"GET  / HTTP/1.1\r\nHost: h\r\n\r\n"[..],
        b"GET / HTTP/1.1 \r\nHost: h\r\n\r\n",
        b"GET /\r\nHost: h\r\n\r\n",
        b"GET\r\n\r\n",
        b" GET / HTTP/1.1\r\nHost: h\r\n\r\n",
        b"G(T / HTTP/1.1\r\nHost: h\r\n\r\n",
        b"GET /a\x01b HTTP/1.1\r\nHost: h\r\n\r\n",
        b"GET / HTTP/1.1\rHost: h\r\n\r\n",
        b"GET / http/1.1\r\nHost: h\r\n\r\n",
        b"GET / HTTP/1.10\r\nHost: h\r\n\r\n",
        b"GET / HTTP/1.1x\r\nHost: h\r\n\r\n",
        b"GET / HTTP/11\r\nHost: h\r\n\r\n",
        b"GET / FOO/1.1\r\nHost: h\r\n\r\n",
        b"GET / HTTP/a.b\r\nHost: h\r\n\r\n",
        b"GET /\xff HTTP/1.1\r\nHost: h\r\n\r\n",
    ] {
        assert_eq!(status(buf), 400, "{:?}", String::from_utf8_lossy(buf));
    }
    assert_eq!(
        err(b"GET / HTTP/a.b\r\nHost: h\r\n\r\n"),
        ParseError::InvalidVersion
    );
    assert_eq!(
        err(b"GET / HTTP/1.1x\r\nHost: h\r\n\r\n"),
        ParseError::InvalidRequestLine
    );
}

#[test]
fn unsupported_versions_are_505() {
    for buf in [
        &b"GET / HTTP/2.0\r\nHost: h\r\n\r\n"[..],
        b"GET / HTTP/1.2\r\nHost: h\r\n\r\n",
        b"GET / HTTP/3.0\r\n\r\n",
        b"GET / HTTP/0.9\r\n\r\n",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    ] {
        assert_eq!(
            err(buf),
            ParseError::UnsupportedVersion,
            "{:?}",
            String::from_utf8_lossy(buf)
        );
        assert_eq!(status(buf), 505);
    }
    // Until the line ends we can't tell "HTTP/2.0\r\n" from "HTTP/2.0x".
    assert!(matches!(parse(b"GET / HTTP/2"), Ok(None)));
    assert!(matches!(parse(b"GET / HTTP/2.0"), Ok(None)));
    assert!(matches!(parse(b"GET / HTTP/2.0\r"), Ok(None)));
    assert_eq!(err(b"GET / HTTP/2.0x"), ParseError::InvalidVersion);
    assert_eq!(err(b"GET / HTTP/2x"), ParseError::InvalidVersion);
}

#[test]
fn http10() {
    let (h, _) = ok(b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(h.version, Version::HTTP_10);
    assert!(!h.keep_alive);
    let (h, _) = ok(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
    assert!(h.keep_alive);
    let (h, _) = ok(b"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n");
    assert!(!h.keep_alive);
    // No Expect or Upgrade semantics in 1.0.
    let (h, _) =
        ok(b"GET / HTTP/1.0\r\nExpect: 100-continue\r\nConnection: upgrade\r\nUpgrade: x\r\n\r\n");
    assert!(!h.expect_continue);
    assert!(!h.upgrade);
    // Body by Content-Length is fine.
    let (h, _) = ok(b"POST / HTTP/1.0\r\nContent-Length: 7\r\n\r\n");
    assert_eq!(h.framing, BodyFraming::Length(7));
}

#[test]
fn transfer_encoding_in_http10_is_400() {
    let e = err(b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert_eq!(e, ParseError::TransferEncodingInHttp10);
    assert_eq!(e.status(), StatusCode::BAD_REQUEST);
}

#[test]
fn connection_keep_alive_http11() {
    let (h, _) = ok(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: CLOSE\r\n\r\n");
    assert!(!h.keep_alive);
    let (h, _) =
        ok(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: foo\r\nConnection: bar, close\r\n\r\n");
    assert!(!h.keep_alive);
    let (h, _) = ok(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: closed\r\n\r\n");
    assert!(h.keep_alive);
}

#[test]
fn expect_continue() {
    let (h, _) =
        ok(b"PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nExpect: 100-Continue\r\n\r\n");
    assert!(h.expect_continue);
    let (h, _) = ok(b"PUT / HTTP/1.1\r\nHost: h\r\nExpect: something-else\r\n\r\n");
    assert!(!h.expect_continue);
    assert_eq!(h.headers["expect"], "something-else");
}

#[test]
fn upgrade() {
    let (h, _) = ok(b"GET /ws HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n");
    assert!(h.upgrade);
    assert!(h.keep_alive);
    let (h, _) = ok(b"GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n\r\n");
    assert!(!h.upgrade);
    let (h, _) = ok(b"GET /ws HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\n\r\n");
    assert!(!h.upgrade);
}

#[test]
fn host_rules() {
    assert_eq!(err(b"GET / HTTP/1.1\r\n\r\n"), ParseError::MissingHost);
    assert_eq!(status(b"GET / HTTP/1.1\r\n\r\n"), 400);
    assert_eq!(
        err(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
        ParseError::MultipleHost
    );
    assert_eq!(
        err(b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"),
        ParseError::MultipleHost
    );
    assert_eq!(
        err(b"GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n"),
        ParseError::MultipleHost
    );
    assert_eq!(status(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
    assert_eq!(
        err(b"GET / HTTP/1.1\r\nHost: user@evil\r\n\r\n"),
        ParseError::InvalidHost
    );
    assert_eq!(
        err(b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"),
        ParseError::InvalidHost
    );
    assert_eq!(
        err(b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n"),
        ParseError::InvalidHost
    );
    // Allowed forms.
    ok(b"GET / HTTP/1.1\r\nHost:\r\n\r\n");
    ok(b"GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n");
    ok(b"GET / HTTP/1.1\r\nHost: example.com:80\r\n\r\n");
    ok(b"GET / HTTP/1.0\r\n\r\n");
}

#[test]
fn content_length_rules() {
    let (h, _) = ok(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(h.framing, BodyFraming::Empty);
    let (h, _) = ok(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 18446744073709551615\r\n\r\n");
    assert_eq!(h.framing, BodyFraming::Length(u64::MAX));
    // Identical duplicates are fine, as separate lines or as a list.
    let (h, _) =
        ok(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n");
    assert_eq!(h.framing, BodyFraming::Length(5));
    let (h, _) = ok(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5,5\r\n\r\n");
    assert_eq!(h.framing, BodyFraming::Length(5));
    let (h, _) = ok(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 007\r\n\r\n");
    assert_eq!(h.framing, BodyFraming::Length(7));

    for (v, e) in [
        (
            &b"5\r\nContent-Length: 6"[..],
            ParseError::ConflictingContentLength,
        ),
        (b"5, 6", ParseError::ConflictingContentLength),
        (b"5,,5", ParseError::InvalidContentLength),
        (b"", ParseError::InvalidContentLength),
        (b"+5", ParseError::InvalidContentLength),
        (b"-5", ParseError::InvalidContentLength),
        (b"5a", ParseError::InvalidContentLength),
        (b"0x5", ParseError::InvalidContentLength),
        (b"5 5", ParseError::InvalidContentLength),
        (b"1.0", ParseError::InvalidContentLength),
        (b"18446744073709551616", ParseError::InvalidContentLength),
        (b"99999999999999999999999", ParseError::InvalidContentLength),
    ] {
        let mut buf = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: ".to_vec();
        buf.extend_from_slice(v);
        buf.extend_from_slice(b"\r\n\r\n");
        assert_eq!(err(&buf), e, "{:?}", String::from_utf8_lossy(v));
        assert_eq!(status(&buf), 400);
    }
}

#[test]
fn transfer_encoding_rules() {
    let buf = b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n";
    let (h, n) = ok(buf);
    assert_eq!(h.framing, BodyFraming::Chunked);
    assert_eq!(n, buf.len() - 3);
    let (h, _) = ok(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: CHUNKED\r\n\r\n");
    assert_eq!(h.framing, BodyFraming::Chunked);
    let (h, _) = ok(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: ,chunked\r\n\r\n");
    assert_eq!(h.framing, BodyFraming::Chunked);

    let cases: [(&[u8], ParseError); 9] = [
        (
            b"Transfer-Encoding: chunked\r\nContent-Length: 5",
            ParseError::ContentLengthWithTransferEncoding,
        ),
        (
            b"Content-Length: 5\r\nTransfer-Encoding: chunked",
            ParseError::ContentLengthWithTransferEncoding,
        ),
        (
            b"Transfer-Encoding: gzip, chunked",
            ParseError::UnsupportedTransferCoding,
        ),
        (
            b"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked",
            ParseError::UnsupportedTransferCoding,
        ),
        (
            b"Transfer-Encoding: chunked, gzip",
            ParseError::UnsupportedTransferCoding,
        ),
        (
            b"Transfer-Encoding: gzip",
            ParseError::UnsupportedTransferCoding,
        ),
        (
            b"Transfer-Encoding: chunked;x=1",
            ParseError::UnsupportedTransferCoding,
        ),
        (
            b"Transfer-Encoding: chunked, chunked",
            ParseError::InvalidTransferEncoding,
        ),
        (b"Transfer-Encoding: ", ParseError::InvalidTransferEncoding),
    ];
    for (hdrs, e) in cases {
        let mut buf = b"POST / HTTP/1.1\r\nHost: h\r\n".to_vec();
        buf.extend_from_slice(hdrs);
        buf.extend_from_slice(b"\r\n\r\n");
        assert_eq!(err(&buf), e, "{:?}", String::from_utf8_lossy(hdrs));
        let want = if e == ParseError::UnsupportedTransferCoding {
            501
        } else {
            400
        };
        assert_eq!(status(&buf), want);
    }
}

#[test]
fn header_syntax_errors() {
    // Whitespace before colon: httparse rejects it for requests.
    let e = err(b"GET / HTTP/1.1\r\nHost : h\r\n\r\n");
    assert_eq!(e, ParseError::WhitespaceBeforeColon);
    assert_eq!(e.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        err(b"GET / HTTP/1.1\r\nHost: h\r\nX-A\t: b\r\n\r\n"),
        ParseError::WhitespaceBeforeColon
    );
    // Obs-fold.
    let e = err(b"GET / HTTP/1.1\r\nHost: h\r\nX-A: b\r\n  c\r\n\r\n");
    assert_eq!(e, ParseError::ObsFold);
    assert_eq!(e.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        err(b"GET / HTTP/1.1\r\nHost: h\r\nX-A: b\r\n\tc\r\n\r\n"),
        ParseError::ObsFold
    );
    // Whitespace before the first header line.
    assert_eq!(
        err(b"GET / HTTP/1.1\r\n Host: h\r\n\r\n"),
        ParseError::ObsFold
    );
    // Bad names and values.
    assert_eq!(
        err(b"GET / HTTP/1.1\r\nHost: h\r\nX(A): b\r\n\r\n"),
        ParseError::InvalidHeaderName
    );
    assert_eq!(
        err(b"GET / HTTP/1.1\r\nHost: h\r\nnocolon\r\n\r\n"),
        ParseError::InvalidHeaderName
    );
    assert_eq!(
        err(b"GET / HTTP/1.1\r\nHost: h\r\n: empty\r\n\r\n"),
        ParseError::InvalidHeaderName
    );
    for v in [&b"a\x00b"[..], b"a\x7fb", b"a\x01", b"a\rb"] {
        let mut buf = b"GET / HTTP/1.1\r\nHost: h\r\nX: ".to_vec();
        buf.extend_from_slice(v);
        buf.extend_from_slice(b"\r\n\r\n");
        assert_eq!(status(&buf), 400, "{v:?}");
    }
    assert_eq!(
        err(b"GET / HTTP/1.1\r\nHost: h\r\nX: a\x00b\r\n\r\n"),
        ParseError::InvalidHeaderValue
    );
}

#[test]
fn header_values_keep_bytes() {
    let (h, _) = ok(b"GET / HTTP/1.1\r\nHost: h\r\nX-Obs: caf\xc3\xa9 \xff\r\nX-Empty:\r\nX-Tab: \ta\tb\t\r\n\r\n");
    assert_eq!(h.headers["x-obs"].as_bytes(), b"caf\xc3\xa9 \xff");
    assert_eq!(h.headers["x-empty"].as_bytes(), b"");
    assert_eq!(h.headers["x-tab"].as_bytes(), b"a\tb");
    let (h, _) = ok(b"GET / HTTP/1.1\r\nHost: h\r\nX-M: 1\r\nx-m: 2\r\n\r\n");
    let all: Vec<_> = h.headers.get_all("x-m").iter().collect();
    assert_eq!(all, ["1", "2"]);
}

#[test]
fn too_many_headers_is_431() {
    let l = Limits {
        max_headers: 3,
        ..limits()
    };
    let ok3 = b"GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n";
    assert!(matches!(parse_request_head(ok3, &l), Ok(Some(_))));
    let bad = b"GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    let e = parse_request_head(bad, &l).unwrap_err();
    assert_eq!(e, ParseError::TooManyHeaders);
    assert_eq!(e.status().as_u16(), 431);
    // With the heap path (more than STACK_HEADERS).
    let l = Limits {
        max_headers: STACK_HEADERS + 10,
        ..limits()
    };
    let mut buf = b"GET / HTTP/1.1\r\nHost: h\r\n".to_vec();
    for i in 0..STACK_HEADERS + 9 {
        buf.extend_from_slice(format!("X-{i}: {i}\r\n").as_bytes());
    }
    let mut exact = buf.clone();
    exact.extend_from_slice(b"\r\n");
    let (h, _) = parse_request_head(&exact, &l).unwrap().unwrap();
    assert_eq!(h.headers.len(), STACK_HEADERS + 10);
    buf.extend_from_slice(b"Y: 1\r\n\r\n");
    assert_eq!(
        parse_request_head(&buf, &l).unwrap_err(),
        ParseError::TooManyHeaders
    );
    // A huge max_headers is bounded by HeaderMap's capacity (no panic) and by the
    // head size for the slot allocation.
    let l = Limits {
        max_headers: usize::MAX,
        max_head_bytes: 1 << 20,
        ..limits()
    };
    let mut buf = b"GET / HTTP/1.0\r\n".to_vec();
    for i in 0..40_000 {
        buf.extend_from_slice(format!("h{i}:\r\n").as_bytes());
    }
    buf.extend_from_slice(b"\r\n");
    assert_eq!(
        parse_request_head(&buf, &l).unwrap_err(),
        ParseError::TooManyHeaders
    );
    // max_headers = 0: any header is too many.
    let l = Limits {
        max_headers: 0,
        ..limits()
    };
    assert!(matches!(
        parse_request_head(b"GET / HTTP/1.0\r\n\r\n", &l),
        Ok(Some(_))
    ));
    assert_eq!(
        parse_request_head(b"GET / HTTP/1.0\r\nA: b\r\n\r\n", &l).unwrap_err(),
        ParseError::TooManyHeaders
    );
}

#[test]
fn head_too_large_is_431() {
    let buf = b"GET / HTTP/1.1\r\nHost: h\r\nX-Long: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let l = Limits {
        max_head_bytes: buf.len(),
        ..limits()
    };
    assert!(matches!(parse_request_head(buf, &l), Ok(Some(_))));
    let l = Limits {
        max_head_bytes: buf.len() - 1,
        ..limits()
    };
    let e = parse_request_head(buf, &l).unwrap_err();
    assert_eq!(e, ParseError::HeadTooLarge);
    assert_eq!(e.status().as_u16(), 431);
    // Incomplete but already over the limit.
    let l = Limits {
        max_head_bytes: 20,
        ..limits()
    };
    assert!(matches!(
        parse_request_head(b"GET / HTTP/1.1\r\nHost", &l),
        Ok(None)
    ));
    assert_eq!(
        parse_request_head(b"GET / HTTP/1.1\r\nHost:", &l).unwrap_err(),
        ParseError::HeadTooLarge
    );
    // A complete head that fits, followed by lots of body: fine.
    let mut big = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n".to_vec();
    let head_len = big.len();
    big.extend_from_slice(&[b'x'; 100]);
    let l = Limits {
        max_head_bytes: head_len,
        ..limits()
    };
    let (_, n) = parse_request_head(&big, &l).unwrap().unwrap();
    assert_eq!(n, head_len);
    // Leading empty lines count.
    let mut lead = b"\r\n\r\n".to_vec();
    lead.extend_from_slice(&big[..head_len]);
    assert_eq!(
        parse_request_head(&lead, &l).unwrap_err(),
        ParseError::HeadTooLarge
    );
}

#[test]
fn uri_too_long_is_414() {
    let l = Limits {
        max_uri_len: 10,
        ..limits()
    };
    let fits = b"GET /123456789 HTTP/1.1\r\nHost: h\r\n\r\n";
    assert!(matches!(parse_request_head(fits, &l), Ok(Some(_))));
    let long = b"GET /1234567890 HTTP/1.1\r\nHost: h\r\n\r\n";
    let e = parse_request_head(long, &l).unwrap_err();
    assert_eq!(e, ParseError::UriTooLong);
    assert_eq!(e.status().as_u16(), 414);
    // Reported as soon as the target is too long, before the line is complete.
    assert!(matches!(
        parse_request_head(b"GET /123456789", &l),
        Ok(None)
    ));
    assert_eq!(
        parse_request_head(b"GET /1234567890", &l).unwrap_err(),
        ParseError::UriTooLong
    );
    // Request line complete, headers not.
    assert_eq!(
        parse_request_head(b"GET /1234567890 HTTP/1.1\r\nHo", &l).unwrap_err(),
        ParseError::UriTooLong
    );
    // Over http::Uri's own limit: 414 even with a generous max_uri_len.
    let l = Limits {
        max_uri_len: usize::MAX,
        max_head_bytes: 1 << 20,
        ..limits()
    };
    let mut buf = b"GET /".to_vec();
    buf.extend_from_slice(&vec![b'a'; 70_000]);
    buf.extend_from_slice(b" HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(
        parse_request_head(&buf, &l).unwrap_err(),
        ParseError::UriTooLong
    );
}

#[test]
fn target_forms() {
    // origin-form
    let (h, _) = ok(b"GET /p?q HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(h.uri.path_and_query().unwrap().as_str(), "/p?q");
    // absolute-form
    let (h, _) = ok(b"GET http://example.com:8080/p?q HTTP/1.1\r\nHost: example.com:8080\r\n\r\n");
    assert_eq!(h.uri.scheme_str(), Some("http"));
    assert_eq!(h.uri.authority().unwrap().as_str(), "example.com:8080");
    assert_eq!(h.uri.path(), "/p");
    // authority-form (CONNECT)
    let (h, _) = ok(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
    assert_eq!(h.method, Method::CONNECT);
    assert_eq!(h.uri.authority().unwrap().as_str(), "example.com:443");
    assert_eq!(h.uri.host(), Some("example.com"));
    assert_eq!(h.uri.port_u16(), Some(443));
    // asterisk-form (OPTIONS)
    let (h, _) = ok(b"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(h.method, Method::OPTIONS);
    assert_eq!(h.uri.path(), "*");
    // Mismatches.
    for buf in [
        &b"GET * HTTP/1.1\r\nHost: h\r\n\r\n"[..],
        b"GET example.com:443 HTTP/1.1\r\nHost: h\r\n\r\n",
        b"CONNECT / HTTP/1.1\r\nHost: h\r\n\r\n",
        b"CONNECT * HTTP/1.1\r\nHost: h\r\n\r\n",
        b"CONNECT http://example.com/ HTTP/1.1\r\nHost: h\r\n\r\n",
    ] {
        assert_eq!(
            err(buf),
            ParseError::InvalidTargetForm,
            "{:?}",
            String::from_utf8_lossy(buf)
        );
    }
    // Garbage targets.
    assert_eq!(
        err(b"GET http:// HTTP/1.1\r\nHost: h\r\n\r\n"),
        ParseError::InvalidUri
    );
}

#[test]
fn methods() {
    for (m, want) in [
        ("GET", Method::GET),
        ("HEAD", Method::HEAD),
        ("POST", Method::POST),
        ("PUT", Method::PUT),
        ("DELETE", Method::DELETE),
        ("PATCH", Method::PATCH),
        ("TRACE", Method::TRACE),
    ] {
        let buf = format!("{m} / HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(ok(buf.as_bytes()).0.method, want);
    }
    let (h, _) = ok(b"PROPFIND / HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(h.method.as_str(), "PROPFIND");
    let (h, _) = ok(b"get / HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(h.method.as_str(), "get"); // methods are case-sensitive
    assert_ne!(h.method, Method::GET);
}

#[test]
fn errors_have_status_and_text() {
    let all = [
        ParseError::TooManyEmptyLines,
        ParseError::InvalidRequestLine,
        ParseError::InvalidMethod,
        ParseError::InvalidUri,
        ParseError::InvalidTargetForm,
        ParseError::InvalidVersion,
        ParseError::InvalidLineEnding,
        ParseError::InvalidHeaderName,
        ParseError::WhitespaceBeforeColon,
        ParseError::ObsFold,
        ParseError::InvalidHeaderValue,
        ParseError::MissingHost,
        ParseError::MultipleHost,
        ParseError::InvalidHost,
        ParseError::InvalidContentLength,
        ParseError::ConflictingContentLength,
        ParseError::ContentLengthWithTransferEncoding,
        ParseError::TransferEncodingInHttp10,
        ParseError::InvalidTransferEncoding,
        ParseError::InvalidChunkSize,
        ParseError::ChunkSizeOverflow,
        ParseError::InvalidChunkExtension,
        ParseError::ChunkLineTooLong,
        ParseError::InvalidChunkLineEnding,
        ParseError::MissingChunkDataCrlf,
        ParseError::InvalidTrailer,
        ParseError::UriTooLong,
        ParseError::HeadTooLarge,
        ParseError::TooManyHeaders,
        ParseError::TrailersTooLarge,
        ParseError::UnsupportedTransferCoding,
        ParseError::UnsupportedVersion,
    ];
    let mut texts = std::collections::HashSet::new();
    for e in all {
        let s = e.to_string();
        assert!(!s.is_empty());
        assert!(texts.insert(s), "duplicate text for {e:?}");
        assert!(matches!(e.status().as_u16(), 400 | 414 | 431 | 501 | 505));
    }
    assert_eq!(
        ParseError::ContentLengthWithTransferEncoding.to_string(),
        "both Content-Length and Transfer-Encoding"
    );
}

#[test]
fn helpers() {
    assert_eq!(trim_ows(b" \t a b \t"), b"a b");
    assert_eq!(trim_ows(b"   "), b"");
    let v: Vec<&[u8]> = list_elements(b" a, ,b ,\tc,").collect();
    assert_eq!(v, [&b"a"[..], b"b", b"c"]);
    assert_eq!(version_syntax(b"HTTP/1.1"), VersionSyntax::Valid);
    assert_eq!(version_syntax(b"HTTP/"), VersionSyntax::Prefix);
    assert_eq!(version_syntax(b""), VersionSyntax::Prefix);
    assert_eq!(version_syntax(b"HTTP/1.1 "), VersionSyntax::Invalid);
    assert_eq!(version_syntax(b"HTTX"), VersionSyntax::Invalid);
}

#[test]
fn random_garbage_never_panics() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let l = Limits {
        max_head_bytes: 512,
        max_headers: 8,
        max_uri_len: 64,
    };
    let alphabet: &[u8] =
        b"GET /HTTP1.0\r\n: \t,;=chunkedContent-LengthTransfer-EncodingHost*\x00\x7f\xff";
    let seeds: [&[u8]; 3] = [
        b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n",
        b"POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nConnection: upgrade\r\nUpgrade: a\r\n\r\n",
        b"CONNECT a:1 HTTP/1.0\r\nExpect: 100-continue\r\n\r\n",
    ];
    for _ in 0..30_000 {
        let mut buf: Vec<u8> = match rng.below(3) {
            0 => (0..rng.below(600)).map(|_| rng.next() as u8).collect(),
            1 => (0..rng.below(600))
                .map(|_| alphabet[rng.below(alphabet.len())])
                .collect(),
            _ => {
                // Mutate a valid request.
                let mut b = seeds[rng.below(seeds.len())].to_vec();
                for _ in 0..1 + rng.below(4) {
                    let i = rng.below(b.len());
                    match rng.below(3) {
                        0 => b[i] = alphabet[rng.below(alphabet.len())],
                        1 => {
                            b.remove(i);
                        }
                        _ => b.insert(i, rng.next() as u8),
                    }
                }
                b
            }
        };
        if rng.below(4) == 0 {
            buf.truncate(rng.below(buf.len() + 1));
        }
        if let Ok(Some((_, n))) = parse_request_head(&buf, &l) {
            assert!(n <= buf.len());
            assert!(n <= l.max_head_bytes);
        }
    }
}
