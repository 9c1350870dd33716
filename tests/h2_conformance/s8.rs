//! RFC 9113 §8: HTTP semantics (message framing, field validity, pseudo-headers, server
//! push, CONNECT).

use super::client::*;
use super::{case, Case};

fn f(n: &str, v: &str) -> (String, String) {
    (n.into(), v.into())
}

/// A GET whose field list is `edit`ed first must be malformed: PROTOCOL_ERROR (stream).
/// Stricter than h2spec, which also takes a connection error (§5.4.1 allows one): the
/// connection must go on, as fibr promises for malformed requests.
fn malformed(a: std::net::SocketAddr, edit: fn(&mut Fields)) -> R {
    let mut c = Conn::handshake(a)?;
    let mut fields = get();
    edit(&mut fields);
    c.send_headers(1, &fields, true);
    c.expect_stream_error(1, &[PROTOCOL_ERROR])?;
    // A stream error: the connection goes on.
    c.expect_alive()
}

pub fn cases() -> Vec<Case> {
    vec![
        // §8.1 message framing.
        case(
            "8.1/1",
            "second HEADERS without END_STREAM -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_headers(1, &post(None), false);
                c.send_headers(1, &vec![f("x-trailer", "a")], false);
                c.expect_stream_error(1, &[PROTOCOL_ERROR])
            },
        ),
        case("8.1/2", "request with trailers -> processed", |a| {
            let mut c = Conn::handshake(a)?;
            c.send_headers(1, &post(None), false);
            c.send(&data(1, b"with trailers", false));
            c.send_headers(1, &vec![f("x-trailer", "end")], true);
            c.expect_status(1, "200", Some(b"with trailers"))
                .map(|_| ())
        }),
        case(
            "8.1/3",
            "pseudo-header in trailers -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_headers(1, &post(None), false);
                c.send(&data(1, b"test", false));
                c.send_headers(1, &vec![f(":method", "POST")], true);
                c.expect_stream_error(1, &[PROTOCOL_ERROR])
            },
        ),
        case(
            "8.1/4",
            "HEADERS after trailers (END_STREAM) -> STREAM_CLOSED",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_headers(1, &post(None), false);
                c.send(&data(1, b"test", false));
                c.send_headers(1, &vec![f("x-trailer", "end")], true);
                c.send_headers(1, &vec![f("x-trailer", "again")], true);
                c.expect_stream_error(1, &[STREAM_CLOSED])
            },
        ),
        // §8.1.1 malformed messages: content-length.
        case(
            "8.1.1/1",
            "content-length not the DATA's length -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_headers(1, &post(Some(1)), false);
                c.send(&data(1, b"test", true));
                c.expect_stream_error(1, &[PROTOCOL_ERROR])
            },
        ),
        case(
            "8.1.1/2",
            "content-length not the sum of several DATA -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_headers(1, &post(Some(1)), false);
                c.send(&data(1, b"test", false));
                c.send(&data(1, b"test", true));
                c.expect_stream_error(1, &[PROTOCOL_ERROR])
            },
        ),
        case(
            "8.1.1/3",
            "content-length over the DATA, ended early -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_headers(1, &post(Some(100)), false);
                c.send(&data(1, b"test", true));
                c.expect_stream_error(1, &[PROTOCOL_ERROR])
            },
        ),
        case(
            "8.1.1/4",
            "content-length > 0 on HEADERS with END_STREAM -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_headers(1, &post(Some(4)), true);
                c.expect_stream_error(1, &[PROTOCOL_ERROR])
            },
        ),
        case(
            "8.1.1/5",
            "body short of content-length, ended by trailers -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_headers(1, &post(Some(100)), false);
                c.send(&data(1, b"test", false));
                c.send_headers(1, &vec![f("x-trailer", "end")], true);
                c.expect_stream_error(1, &[PROTOCOL_ERROR])
            },
        ),
        // §8.2.1 field validity.
        case("8.2.1/1", "uppercase field name -> PROTOCOL_ERROR", |a| {
            malformed(a, |h| h.push(f("X-TEST", "ok")))
        }),
        case("8.2.1/2", "field value with CR LF -> PROTOCOL_ERROR", |a| {
            malformed(a, |h| h.push(f("x-test", "a\r\nx-injected: b")))
        }),
        case(
            "8.2.1/3",
            "field value with leading whitespace -> PROTOCOL_ERROR",
            |a| malformed(a, |h| h.push(f("x-test", " padded"))),
        ),
        case(
            "8.2.1/4",
            "field name with a colon inside -> PROTOCOL_ERROR",
            |a| malformed(a, |h| h.push(f("x:test", "ok"))),
        ),
        case(
            "8.2.1/5",
            "field name with a space -> PROTOCOL_ERROR",
            |a| malformed(a, |h| h.push(f("x test", "ok"))),
        ),
        case("8.2.1/6", "field value with NUL -> PROTOCOL_ERROR", |a| {
            malformed(a, |h| h.push(f("x-test", "a\0b")))
        }),
        // §8.2.2 connection-specific fields.
        case(
            "8.2.2/1",
            "connection-specific field -> PROTOCOL_ERROR",
            |a| malformed(a, |h| h.push(f("connection", "keep-alive"))),
        ),
        case(
            "8.2.2/2",
            "TE other than \"trailers\" -> PROTOCOL_ERROR",
            |a| malformed(a, |h| h.push(f("te", "trailers, deflate"))),
        ),
        case("8.2.2/3", "TE: trailers -> accepted", |a| {
            let mut c = Conn::handshake(a)?;
            let mut h = get();
            h.push(f("te", "trailers"));
            c.send_headers(1, &h, true);
            c.expect_status(1, "200", None).map(|_| ())
        }),
        // §8.3 pseudo-header fields.
        case("8.3/1", "unknown pseudo-header -> PROTOCOL_ERROR", |a| {
            malformed(a, |h| h.push(f(":test", "ok")))
        }),
        case(
            "8.3/2",
            "response pseudo-header in a request -> PROTOCOL_ERROR",
            |a| malformed(a, |h| h.push(f(":status", "200"))),
        ),
        case(
            "8.3/3",
            "pseudo-header after a regular field -> PROTOCOL_ERROR",
            |a| {
                malformed(a, |h| {
                    h.insert(3, f("x-test", "ok"));
                })
            },
        ),
        // §8.3.1 request pseudo-headers.
        case("8.3.1/1", "empty :path -> PROTOCOL_ERROR", |a| {
            malformed(a, |h| h[2].1.clear())
        }),
        case("8.3.1/2", "no :method -> PROTOCOL_ERROR", |a| {
            malformed(a, |h| {
                h.remove(0);
            })
        }),
        case("8.3.1/3", "no :scheme -> PROTOCOL_ERROR", |a| {
            malformed(a, |h| {
                h.remove(1);
            })
        }),
        case("8.3.1/4", "no :path -> PROTOCOL_ERROR", |a| {
            malformed(a, |h| {
                h.remove(2);
            })
        }),
        case("8.3.1/5", "duplicate :method -> PROTOCOL_ERROR", |a| {
            malformed(a, |h| h.insert(1, f(":method", "GET")))
        }),
        case("8.3.1/6", "duplicate :scheme -> PROTOCOL_ERROR", |a| {
            malformed(a, |h| h.insert(2, f(":scheme", "http")))
        }),
        case("8.3.1/7", "duplicate :path -> PROTOCOL_ERROR", |a| {
            malformed(a, |h| h.insert(3, f(":path", "/")))
        }),
        case("8.3.1/8", ":path \"*\" on a GET -> PROTOCOL_ERROR", |a| {
            malformed(a, |h| h[2].1 = "*".into())
        }),
        // §8.4 server push.
        case(
            "8.4/1",
            "PUSH_PROMISE from the client -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_headers(1, &post(None), false);
                let mut p = 2u32.to_be_bytes().to_vec();
                p.extend(block(&get()));
                c.send(&frame(PUSH_PROMISE, END_HEADERS, 1, &p));
                c.expect_connection_error(&[PROTOCOL_ERROR])
            },
        ),
        // §8.5 CONNECT.
        case("8.5/1", "CONNECT with :authority only -> a response", |a| {
            let mut c = Conn::handshake(a)?;
            c.send_headers(
                1,
                &vec![f(":method", "CONNECT"), f(":authority", "example.com:443")],
                false,
            );
            c.expect_headers(1).map(|_| ())
        }),
        case(
            "8.5/2",
            "CONNECT with :scheme and :path -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                let mut h = req("CONNECT", "/");
                h[3].1 = "example.com:443".into();
                c.send_headers(1, &h, false);
                c.expect_stream_error(1, &[PROTOCOL_ERROR])
            },
        ),
        case(
            "8.5/3",
            "CONNECT without :authority -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_headers(1, &vec![f(":method", "CONNECT")], false);
                c.expect_stream_error(1, &[PROTOCOL_ERROR])
            },
        ),
    ]
}
