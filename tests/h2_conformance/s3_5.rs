//! RFC 9113 §3 (starting HTTP/2), §4 (frames, sizes, field blocks), §5 (streams, errors,
//! extensions).

use super::client::*;
use super::{case, Case};

pub fn cases() -> Vec<Case> {
    vec![
        // §3.4 / §3.5: the connection preface.
        case(
            "3.5/1",
            "client preface + SETTINGS -> server SETTINGS, our SETTINGS ACKed",
            |a| Conn::handshake(a).map(|_| ()),
        ),
        case(
            "3.5/2",
            "invalid connection preface -> connection closed",
            |a| {
                let mut c = Conn::connect(a)?;
                c.send(b"INVALID CONNECTION PREFACE\r\n\r\n");
                // Not HTTP/2 at all, so the HTTP/1.1 side may answer it (§3.4: the GOAWAY may
                // be omitted); the connection must close.
                c.read_until_close().map(|_| ())
            },
        ),
        case(
            "3.5/3",
            "preface wrong after its first bytes -> connection closed",
            |a| {
                let mut c = Conn::connect(a)?;
                c.send(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n");
                c.send(&settings(&[]));
                // §3.4: a connection error (PROTOCOL_ERROR), whose GOAWAY may be omitted.
                c.read_until_close().map(|_| ())
            },
        ),
        case(
            "3.5/5",
            "preface cut short by a wrong byte after SETTINGS began -> PROTOCOL_ERROR",
            |a| {
                // The first 23 octets right, the last wrong: HTTP/2 sniffed, then refused.
                let mut c = Conn::connect(a)?;
                c.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r");
                std::thread::sleep(std::time::Duration::from_millis(20));
                c.send(b"X");
                c.expect_connection_error(&[PROTOCOL_ERROR])
            },
        ),
        case(
            "3.5/4",
            "preface not followed by SETTINGS -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::connect(a)?;
                let mut b = PREFACE.to_vec();
                b.extend(ping(false, [0; 8]));
                c.send(&b);
                c.expect_connection_error(&[PROTOCOL_ERROR])
            },
        ),
        // §4.1: frame format.
        case("4.1/1", "frame of unknown type -> ignored", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&frame(0x16, 0, 0, b"unknown"));
            c.expect_alive()
        }),
        case("4.1/2", "frame with undefined flags -> ignored", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&frame(PING, 0x16, 0, b"flags!!!"));
            c.expect_ping_ack(*b"flags!!!")
        }),
        case("4.1/3", "frame with the reserved bit set -> ignored", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&raw_frame(8, PING, 0, 0x8000_0000, b"reserved"));
            c.expect_ping_ack(*b"reserved")
        }),
        // §4.2: frame size.
        case("4.2/1", "DATA of 2^14 octets -> processed", |a| {
            let mut c = Conn::handshake(a)?;
            let body = vec![b'x'; 16384];
            c.send_headers(1, &post(Some(body.len())), false);
            c.send(&data(1, &body, true));
            c.expect_status(1, "200", Some(&body)).map(|_| ())
        }),
        case(
            "4.2/2",
            "DATA over SETTINGS_MAX_FRAME_SIZE -> FRAME_SIZE_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                let max = c.server_setting(MAX_FRAME_SIZE).unwrap_or(16384) as usize;
                c.send_headers(1, &post(None), false);
                c.send(&data(1, &vec![b'x'; max + 1], true));
                c.expect_stream_error(1, &[FRAME_SIZE_ERROR])
            },
        ),
        case(
            "4.2/3",
            "HEADERS over SETTINGS_MAX_FRAME_SIZE -> FRAME_SIZE_ERROR (connection)",
            |a| {
                let mut c = Conn::handshake(a)?;
                let max = c.server_setting(MAX_FRAME_SIZE).unwrap_or(16384) as usize;
                let mut f = get();
                f.push(("x-big".into(), "y".repeat(max)));
                c.send_headers(1, &f, true);
                c.expect_connection_error(&[FRAME_SIZE_ERROR])
            },
        ),
        // §4.3: field blocks.
        case(
            "4.3/1",
            "invalid field block fragment -> COMPRESSION_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                // A literal with incremental indexing that ends after its first byte.
                c.send(&headers(1, &[0x40], true, true));
                c.expect_connection_error(&[COMPRESSION_ERROR])
            },
        ),
        case(
            "4.3/2",
            "PRIORITY between HEADERS and CONTINUATION -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&headers(1, &block(&get()), true, false));
                c.send(&priority(1, 0, false, 255));
                c.send(&continuation(1, &lit(b"x-test", b"ok"), true));
                c.expect_connection_error(&[PROTOCOL_ERROR])
            },
        ),
        case(
            "4.3/3",
            "HEADERS to another stream inside a field block -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&headers(1, &block(&get()), true, false));
                c.send_headers(3, &get(), true);
                c.expect_connection_error(&[PROTOCOL_ERROR])
            },
        ),
        // §5.1: stream states. Idle:
        case("5.1/1", "idle: DATA -> PROTOCOL_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&data(1, b"test", true));
            c.expect_connection_error(&[PROTOCOL_ERROR])
        }),
        case("5.1/2", "idle: RST_STREAM -> PROTOCOL_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&rst_stream(1, CANCEL));
            c.expect_connection_error(&[PROTOCOL_ERROR])
        }),
        case("5.1/3", "idle: WINDOW_UPDATE -> PROTOCOL_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&window_update(1, 100));
            c.expect_connection_error(&[PROTOCOL_ERROR])
        }),
        case("5.1/4", "idle: CONTINUATION -> PROTOCOL_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&continuation(1, &block(&get()), true));
            c.expect_connection_error(&[PROTOCOL_ERROR])
        }),
        // Half-closed (remote): the request ended with its HEADERS.
        case(
            "5.1/5",
            "half-closed (remote): DATA -> STREAM_CLOSED",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_get(1);
                c.send(&data(1, b"test", true));
                c.expect_stream_error(1, &[STREAM_CLOSED])
            },
        ),
        case(
            "5.1/6",
            "half-closed (remote): HEADERS -> STREAM_CLOSED",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_get(1);
                c.send_get(1);
                c.expect_stream_error(1, &[STREAM_CLOSED])
            },
        ),
        case(
            "5.1/7",
            "half-closed (remote): CONTINUATION -> STREAM_CLOSED or PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_get(1);
                c.send(&continuation(1, &lit(b"x-test", b"ok"), true));
                c.expect_stream_error(1, &[STREAM_CLOSED, PROTOCOL_ERROR])
            },
        ),
        // Closed by our RST_STREAM:
        case(
            "5.1/8",
            "closed (RST_STREAM sent): DATA -> STREAM_CLOSED",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_headers(1, &post(None), false);
                c.send(&rst_stream(1, CANCEL));
                c.send(&data(1, b"test", true));
                c.expect_stream_error(1, &[STREAM_CLOSED])
            },
        ),
        case(
            "5.1/9",
            "closed (RST_STREAM sent): HEADERS -> STREAM_CLOSED",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_headers(1, &post(None), false);
                c.send(&rst_stream(1, CANCEL));
                c.send_get(1);
                c.expect_stream_error(1, &[STREAM_CLOSED])
            },
        ),
        case(
            "5.1/10",
            "closed (RST_STREAM sent): CONTINUATION -> STREAM_CLOSED or PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_headers(1, &post(None), false);
                c.send(&rst_stream(1, CANCEL));
                c.send(&continuation(1, &lit(b"x-test", b"ok"), true));
                c.expect_stream_error(1, &[STREAM_CLOSED, PROTOCOL_ERROR])
            },
        ),
        // Closed after both sides' END_STREAM:
        case("5.1/11", "closed: DATA -> STREAM_CLOSED", |a| {
            let mut c = Conn::handshake(a)?;
            c.send_get(1);
            c.expect_response(1)?;
            c.send(&data(1, b"test", true));
            c.expect_stream_error(1, &[STREAM_CLOSED])
        }),
        case("5.1/12", "closed: HEADERS -> STREAM_CLOSED", |a| {
            let mut c = Conn::handshake(a)?;
            c.send_get(1);
            c.expect_response(1)?;
            c.send_get(1);
            c.expect_connection_error(&[STREAM_CLOSED])
        }),
        case(
            "5.1/13",
            "closed: CONTINUATION -> STREAM_CLOSED or PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_get(1);
                c.expect_response(1)?;
                c.send(&continuation(1, &lit(b"x-test", b"ok"), true));
                c.expect_connection_error(&[STREAM_CLOSED, PROTOCOL_ERROR])
            },
        ),
        // Closed by the server's RST_STREAM (not an h2spec case): what the client sent
        // before it saw the reset is ignored, and its DATA still counts against the
        // connection's window, which the server reopens (§5.1, §6.9).
        case(
            "5.1/14",
            "closed (the server's RST_STREAM): late DATA and trailers -> ignored, window given back",
            |a| {
                let mut c = Conn::handshake(a)?;
                // Nine streams' full windows (65,535 each) are past half of the server's
                // connection window (1 MiB), so it must send a WINDOW_UPDATE for them.
                for id in (1..=17).step_by(2) {
                    let mut head = req("POST", "/early");
                    head.push(("content-length".into(), "65535".into()));
                    c.send_headers(id, &head, false);
                    c.expect_response(id)?;
                    c.expect_rst_stream(id, &[NO_ERROR])?;
                    for _ in 0..4 {
                        c.send(&data(id, &[b'x'; 16_000], false));
                    }
                    c.send(&data(id, &[b'x'; 1_535], false));
                    c.send_headers(id, &vec![("x-trailer".into(), "late".into())], true);
                }
                let deadline = std::time::Instant::now() + EXPECT;
                loop {
                    match c.next(deadline) {
                        Ev::Frame(f) if f.kind == WINDOW_UPDATE && f.stream == 0 => break,
                        Ev::Frame(f) if f.kind != RST_STREAM && f.kind != GOAWAY => {}
                        _ => {
                            return Err(format!(
                                "expected a connection WINDOW_UPDATE and no RST_STREAM, got: {}",
                                c.trace()
                            ))
                        }
                    }
                }
                c.expect_alive()
            },
        ),
        // §5.1.1: stream identifiers.
        case(
            "5.1.1/1",
            "even-numbered stream id from the client -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_get(2);
                c.expect_connection_error(&[PROTOCOL_ERROR])
            },
        ),
        case(
            "5.1.1/2",
            "stream id lower than a previous one -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_get(5);
                c.expect_response(5)?;
                c.send_get(3);
                c.expect_connection_error(&[PROTOCOL_ERROR])
            },
        ),
        // §5.1.2: stream concurrency.
        case(
            "5.1.2/1",
            "streams over SETTINGS_MAX_CONCURRENT_STREAMS -> REFUSED_STREAM or PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                let Some(max) = c.server_setting(MAX_CONCURRENT_STREAMS) else {
                    return Err("the server sets no SETTINGS_MAX_CONCURRENT_STREAMS".into());
                };
                let mut out = Vec::new();
                let mut id = 1;
                for _ in 0..=max {
                    out.extend(headers(id, &block(&post(None)), false, true));
                    id += 2;
                }
                c.send(&out);
                c.expect_stream_error(id - 2, &[REFUSED_STREAM, PROTOCOL_ERROR])
            },
        ),
        // §5.3.1: stream dependencies (RFC 7540's priority scheme, still on the wire).
        case(
            "5.3.1/1",
            "HEADERS depending on its own stream -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                let mut p = priority_payload(1, false, 255);
                p.extend(block(&get()));
                c.send(&frame(
                    HEADERS,
                    END_STREAM | END_HEADERS | PRIORITY_FLAG,
                    1,
                    &p,
                ));
                c.expect_stream_error(1, &[PROTOCOL_ERROR])
            },
        ),
        case(
            "5.3.1/2",
            "PRIORITY depending on its own stream -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&priority(1, 1, false, 255));
                c.expect_stream_error(1, &[PROTOCOL_ERROR])
            },
        ),
        // §5.4.1: connection error handling.
        case(
            "5.4.1/1",
            "connection error (PING of 6 octets) -> connection closed",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&frame(PING, 0, 0, b"123456"));
                c.expect_close()
            },
        ),
        case(
            "5.4.1/2",
            "connection error -> GOAWAY with the last stream processed",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_get(1);
                c.expect_response(1)?;
                c.send(&frame(PING, 0, 0, b"123456"));
                let g = c.expect_goaway(&[FRAME_SIZE_ERROR])?;
                let last = be32(&g.payload[..4]);
                if last != 1 {
                    return Err(format!("GOAWAY's last stream id is {last}, not 1"));
                }
                c.expect_close()
            },
        ),
        // §5.5: extensions.
        case(
            "5.5/1",
            "unknown extension frame (flags set, on a stream) -> ignored",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&frame(0xff, 0xff, 1, b"extension payload"));
                c.expect_alive()
            },
        ),
        case(
            "5.5/2",
            "unknown extension frame inside a field block -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&headers(1, &block(&get()), true, false));
                c.send(&frame(0x16, 0, 0, b"extension"));
                c.send(&continuation(1, &lit(b"x-test", b"ok"), true));
                c.expect_connection_error(&[PROTOCOL_ERROR])
            },
        ),
    ]
}
