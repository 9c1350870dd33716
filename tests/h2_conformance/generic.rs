//! h2spec's generic tests: what a server must accept (every frame type used correctly,
//! ordinary exchanges), plus the limits fibr answers without failing the connection.

use super::client::*;
use super::{case, Case, HELLO};

pub fn cases() -> Vec<Case> {
    vec![
        // Streams and multiplexing.
        case(
            "generic/2/1",
            "PRIORITY on an idle stream, then a request on it -> processed",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&priority(1, 0, false, 200));
                c.send_get(1);
                c.expect_status(1, "200", Some(HELLO)).map(|_| ())
            },
        ),
        case(
            "generic/2/2",
            "WINDOW_UPDATE on a half-closed (remote) stream -> accepted",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_get(1);
                c.send(&window_update(1, 100));
                c.expect_status(1, "200", Some(HELLO)).map(|_| ())
            },
        ),
        case(
            "generic/2/3",
            "PRIORITY on a half-closed (remote) stream -> accepted",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_get(1);
                c.send(&priority(1, 0, false, 10));
                c.expect_status(1, "200", Some(HELLO)).map(|_| ())
            },
        ),
        case(
            "generic/2/4",
            "RST_STREAM on a half-closed (remote) stream -> accepted",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_get(1);
                c.send(&rst_stream(1, CANCEL));
                c.expect_alive()
            },
        ),
        case(
            "generic/2/5",
            "PRIORITY on a closed stream -> accepted",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_get(1);
                c.expect_response(1)?;
                c.send(&priority(1, 0, false, 10));
                c.expect_alive()
            },
        ),
        case(
            "generic/2/6",
            "several streams at once -> each answered",
            |a| {
                let mut c = Conn::handshake(a)?;
                let mut b = Vec::new();
                for id in [1, 3, 5] {
                    b.extend(headers(id, &block(&post(None)), false, true));
                }
                for id in [5, 1, 3] {
                    b.extend(data(id, format!("body {id}").as_bytes(), true));
                }
                c.send(&b);
                let got = c.expect_responses(&[1, 3, 5])?;
                for (id, (status, body)) in [1, 3, 5].into_iter().zip(got) {
                    if status != "200" || body != format!("body {id}").as_bytes() {
                        return Err(format!(
                            "stream {id}: {status} {:?}",
                            String::from_utf8_lossy(&body)
                        ));
                    }
                }
                Ok(())
            },
        ),
        // Frame definitions.
        case("generic/3.1/1", "DATA -> processed", |a| {
            let mut c = Conn::handshake(a)?;
            c.send_headers(1, &post(Some(4)), false);
            c.send(&data(1, b"test", true));
            c.expect_status(1, "200", Some(b"test")).map(|_| ())
        }),
        case("generic/3.1/2", "several DATA frames -> processed", |a| {
            let mut c = Conn::handshake(a)?;
            c.send_headers(1, &post(None), false);
            c.send(&data(1, b"one ", false));
            c.send(&data(1, b"two ", false));
            c.send(&data(1, b"three", true));
            c.expect_status(1, "200", Some(b"one two three"))
                .map(|_| ())
        }),
        case(
            "generic/3.1/3",
            "empty DATA with END_STREAM -> processed",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_headers(1, &post(None), false);
                c.send(&data(1, b"test", false));
                c.send(&data(1, b"", true));
                c.expect_status(1, "200", Some(b"test")).map(|_| ())
            },
        ),
        case("generic/3.2/1", "HEADERS with padding -> processed", |a| {
            let mut c = Conn::handshake(a)?;
            let b = block(&get());
            let mut p = vec![16];
            p.extend(&b);
            p.extend([0; 16]);
            c.send(&frame(HEADERS, PADDED | END_STREAM | END_HEADERS, 1, &p));
            c.expect_status(1, "200", Some(HELLO)).map(|_| ())
        }),
        case("generic/3.2/2", "HEADERS with priority -> processed", |a| {
            let mut c = Conn::handshake(a)?;
            let mut p = priority_payload(0, true, 255);
            p.extend(block(&get()));
            c.send(&frame(
                HEADERS,
                PRIORITY_FLAG | END_STREAM | END_HEADERS,
                1,
                &p,
            ));
            c.expect_status(1, "200", Some(HELLO)).map(|_| ())
        }),
        case(
            "generic/3.2/3",
            "HEADERS with padding and priority -> processed",
            |a| {
                let mut c = Conn::handshake(a)?;
                let mut p = vec![3];
                p.extend(priority_payload(0, false, 1));
                p.extend(block(&get()));
                p.extend([0; 3]);
                let flags = PADDED | PRIORITY_FLAG | END_STREAM | END_HEADERS;
                c.send(&frame(HEADERS, flags, 1, &p));
                c.expect_status(1, "200", Some(HELLO)).map(|_| ())
            },
        ),
        case(
            "generic/3.3/1",
            "PRIORITY with exclusive dependency on another stream -> accepted",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_headers(1, &post(None), false);
                c.send(&priority(3, 1, true, 1));
                c.send(&data(1, b"test", true));
                c.expect_status(1, "200", Some(b"test")).map(|_| ())
            },
        ),
        case(
            "generic/3.4/1",
            "RST_STREAM on an open stream -> accepted",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_headers(1, &post(None), false);
                c.send(&rst_stream(1, CANCEL));
                c.expect_alive()
            },
        ),
        case(
            "generic/3.5/1",
            "SETTINGS with every defined parameter -> ACKed",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&settings(&[
                    (HEADER_TABLE_SIZE, 4096),
                    (ENABLE_PUSH, 0),
                    (MAX_CONCURRENT_STREAMS, 100),
                    (INITIAL_WINDOW_SIZE, 65535),
                    (MAX_FRAME_SIZE, 16384),
                    (MAX_HEADER_LIST_SIZE, 65535),
                ]));
                c.expect_settings_ack()?;
                c.send_get(1);
                c.expect_status(1, "200", Some(HELLO)).map(|_| ())
            },
        ),
        case(
            "generic/3.5/2",
            "SETTINGS_HEADER_TABLE_SIZE 0 -> responses still decodable",
            |a| {
                let mut c = Conn::handshake_with(a, &[(HEADER_TABLE_SIZE, 0)])?;
                for id in [1, 3] {
                    c.send_get(id);
                    c.expect_status(id, "200", Some(HELLO))?;
                }
                Ok(())
            },
        ),
        case(
            "generic/3.8/1",
            "GOAWAY (NO_ERROR) from the client -> accepted",
            |a| {
                let mut c = Conn::handshake(a)?;
                let mut b = goaway(0, NO_ERROR, b"h2spec");
                b.extend(ping(false, *b"after-ga"));
                c.send(&b);
                c.expect_ping_ack(*b"after-ga")
            },
        ),
        case(
            "generic/3.8/2",
            "GOAWAY with a stream in flight -> its response still comes",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_headers(1, &post(None), false);
                c.send(&goaway(0, NO_ERROR, b""));
                c.send(&data(1, b"test", true));
                c.expect_status(1, "200", Some(b"test")).map(|_| ())
            },
        ),
        case(
            "generic/3.9/1",
            "WINDOW_UPDATE on the connection -> accepted",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&window_update(0, 1));
                c.expect_alive()
            },
        ),
        case(
            "generic/3.9/2",
            "WINDOW_UPDATE on an open stream -> accepted",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_headers(1, &post(None), false);
                c.send(&window_update(1, 1));
                c.send(&data(1, b"test", true));
                c.expect_status(1, "200", Some(b"test")).map(|_| ())
            },
        ),
        case("generic/3.10/1", "CONTINUATION -> processed", |a| {
            let mut c = Conn::handshake(a)?;
            let fields = get();
            c.send(&headers(1, &block(&fields[..2].to_vec()), true, false));
            c.send(&continuation(1, &block(&fields[2..].to_vec()), true));
            c.expect_status(1, "200", Some(HELLO)).map(|_| ())
        }),
        case(
            "generic/3.10/2",
            "empty CONTINUATION frames -> processed",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&headers(1, &block(&get()), true, false));
                c.send(&continuation(1, b"", false));
                c.send(&continuation(1, b"", true));
                c.expect_status(1, "200", Some(HELLO)).map(|_| ())
            },
        ),
        // HTTP message exchanges.
        case("generic/4/1", "GET -> 200 with the body", |a| {
            let mut c = Conn::handshake(a)?;
            c.send_get(1);
            let r = c.expect_status(1, "200", Some(HELLO))?;
            let len = HELLO.len().to_string();
            if !r
                .fields
                .iter()
                .any(|f| f.0 == "content-length" && f.1 == len)
            {
                return Err(format!("no content-length: {len}: {:?}", r.fields));
            }
            Ok(())
        }),
        case("generic/4/2", "HEAD -> 200 without a body", |a| {
            let mut c = Conn::handshake(a)?;
            c.send_headers(1, &req("HEAD", "/"), true);
            let (fields, end) = c.expect_headers(1)?;
            if !end {
                return Err(format!(
                    "HEAD response HEADERS without END_STREAM: {fields:?}"
                ));
            }
            c.expect_alive()
        }),
        case("generic/4/3", "POST -> 200 with the body echoed", |a| {
            let mut c = Conn::handshake(a)?;
            c.send_headers(1, &post(Some(11)), false);
            c.send(&data(1, b"posted body", true));
            c.expect_status(1, "200", Some(b"posted body")).map(|_| ())
        }),
        case(
            "generic/4/4",
            "POST of 100 KB (past the stream window) -> echoed",
            |a| {
                let mut c = Conn::handshake(a)?;
                let body: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
                c.send_headers(1, &post(Some(body.len())), false);
                // Within both of the server's windows, sent as they open (the stream's
                // as the service reads).
                let mut stream_window =
                    i64::from(c.server_setting(INITIAL_WINDOW_SIZE).unwrap_or(65535));
                let mut conn_window = c.conn_window;
                let mut sent = 0;
                let deadline = std::time::Instant::now() + EXPECT;
                loop {
                    while stream_window.min(conn_window) > 0 && sent < body.len() {
                        let n = (stream_window.min(conn_window) as usize)
                            .min(16384)
                            .min(body.len() - sent);
                        c.send(&data(1, &body[sent..sent + n], sent + n == body.len()));
                        sent += n;
                        stream_window -= n as i64;
                        conn_window -= n as i64;
                    }
                    if sent == body.len() {
                        break;
                    }
                    match c.next(deadline) {
                        Ev::Frame(f) if f.kind == WINDOW_UPDATE => {
                            let inc = i64::from(be32(&f.payload));
                            match f.stream {
                                0 => conn_window += inc,
                                1 => stream_window += inc,
                                _ => {}
                            }
                        }
                        Ev::Frame(f) if f.kind == SETTINGS => {}
                        other => return Err(format!("while uploading: {other:?}; {}", c.trace())),
                    }
                }
                // The echo is 100 KB against our 64 KiB windows: open ours.
                c.send(&window_update(0, 1 << 20));
                c.send(&window_update(1, 1 << 20));
                let r = c.expect_status(1, "200", None)?;
                if r.body != body {
                    return Err(format!("echo of {} bytes differs", r.body.len()));
                }
                Ok(())
            },
        ),
        case(
            "generic/4/5",
            "response DATA frames within the client's SETTINGS_MAX_FRAME_SIZE",
            |a| {
                let mut c = Conn::handshake(a)?;
                let body = vec![b'z'; 40000];
                c.send_headers(1, &post(Some(body.len())), false);
                for chunk in body.chunks(16384) {
                    c.send(&data(1, chunk, false));
                }
                c.send(&data(1, b"", true));
                let r = c.expect_status(1, "200", Some(&body))?;
                if r.frames.iter().any(|&n| n > 16384) {
                    return Err(format!("DATA frames over 16384: {:?}", r.frames));
                }
                Ok(())
            },
        ),
        // Limits: answered, the connection goes on.
        case(
            "generic/limits/1",
            "header list over SETTINGS_MAX_HEADER_LIST_SIZE -> 431, connection goes on",
            |a| {
                let mut c = Conn::handshake(a)?;
                let max = c.server_setting(MAX_HEADER_LIST_SIZE).unwrap_or(65536) as usize;
                // One 4000-octet field in the dynamic table, then referenced by index: a small
                // block that decodes to more than the limit.
                let mut b = block(&get());
                b.extend(lit_indexed(b"x-big", &vec![b'v'; 4000]));
                for _ in 0..max / 4000 + 1 {
                    b.extend(indexed(62));
                }
                c.send(&headers(1, &b, true, true));
                c.expect_status(1, "431", None)?;
                c.send_get(3);
                c.expect_status(3, "200", Some(HELLO)).map(|_| ())
            },
        ),
    ]
}
