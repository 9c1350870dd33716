//! RFC 9113 §6.7–§6.10 (PING, GOAWAY, WINDOW_UPDATE and flow control, CONTINUATION) and
//! §7 (error codes).

use super::client::*;
use super::{case, Case, HELLO};

/// Reads DATA frames on `stream` until `n` octets came; each must be at most `max`.
fn expect_body_in_frames(c: &mut Conn, stream: u32, n: usize, max: usize) -> R {
    let mut got = 0;
    while got < n {
        let d = c.expect_data(stream)?;
        if d.payload.len() > max {
            return Err(format!(
                "expected DATA of at most {max} octets, got {}",
                d.describe()
            ));
        }
        got += d.payload.len();
    }
    Ok(())
}

pub fn cases() -> Vec<Case> {
    vec![
        // §6.7 PING.
        case("6.7/1", "PING -> PING ACK with the same payload", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&ping(false, *b"h2spec!!"));
            c.expect_ping_ack(*b"h2spec!!")
        }),
        case("6.7/2", "PING with ACK from the client -> not answered", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&ping(true, *b"unwanted"));
            c.send(&ping(false, *b"answered"));
            c.expect_ping_ack(*b"answered")
        }),
        case("6.7/3", "PING on stream 1 -> PROTOCOL_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&frame(PING, 0, 1, b"h2spec!!"));
            c.expect_connection_error(&[PROTOCOL_ERROR])
        }),
        case("6.7/4", "PING of 6 octets -> FRAME_SIZE_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&frame(PING, 0, 0, b"h2spec"));
            c.expect_connection_error(&[FRAME_SIZE_ERROR])
        }),
        // §6.8 GOAWAY.
        case("6.8/1", "GOAWAY on stream 1 -> PROTOCOL_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            let mut p = 0u32.to_be_bytes().to_vec();
            p.extend(NO_ERROR.to_be_bytes());
            c.send(&frame(GOAWAY, 0, 1, &p));
            c.expect_connection_error(&[PROTOCOL_ERROR])
        }),
        case("6.8/2", "client GOAWAY with no streams, PING a moment later -> answered, or a GOAWAY before the close", |a| {
            // h2spec (7/1, generic 3.8/1) sends GOAWAY and then PING as two writes. A
            // server may close once the client said GOAWAY and nothing is in flight, but
            // "SHOULD always send a GOAWAY frame before closing a connection" (§6.8).
            let mut c = Conn::handshake(a)?;
            c.send(&goaway(0, NO_ERROR, b""));
            std::thread::sleep(std::time::Duration::from_millis(50));
            c.send(&ping(false, *b"later-ga"));
            let deadline = std::time::Instant::now() + EXPECT;
            loop {
                match c.next(deadline) {
                    Ev::Frame(f) if f.kind == PING && f.has(ACK) => return Ok(()),
                    Ev::Frame(f) if f.kind == GOAWAY => return Ok(()),
                    Ev::Frame(_) | Ev::Headers { .. } => {}
                    _ => {
                        return Err(format!(
                            "expected PING(ACK) or GOAWAY, got: {}",
                            c.trace()
                        ))
                    }
                }
            }
        }),
        // §6.9 WINDOW_UPDATE.
        case("6.9/1", "WINDOW_UPDATE of 0 on the connection -> PROTOCOL_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&window_update(0, 0));
            c.expect_connection_error(&[PROTOCOL_ERROR])
        }),
        case("6.9/2", "WINDOW_UPDATE of 0 on a stream -> PROTOCOL_ERROR (stream)", |a| {
            let mut c = Conn::handshake(a)?;
            c.send_headers(1, &post(None), false);
            c.send(&window_update(1, 0));
            c.expect_stream_error(1, &[PROTOCOL_ERROR])
        }),
        case("6.9/3", "WINDOW_UPDATE of 3 octets -> FRAME_SIZE_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&frame(WINDOW_UPDATE, 0, 0, &[0, 0, 1]));
            c.expect_connection_error(&[FRAME_SIZE_ERROR])
        }),
        case("6.9/4", "WINDOW_UPDATE on a closed stream -> ignored", |a| {
            let mut c = Conn::handshake(a)?;
            c.send_get(1);
            c.expect_response(1)?;
            c.send(&window_update(1, 100));
            c.expect_alive()
        }),
        // §6.9.1 the flow-control window.
        case("6.9.1/1", "SETTINGS_INITIAL_WINDOW_SIZE 1 -> DATA of 1 octet", |a| {
            let mut c = Conn::handshake_with(a, &[(INITIAL_WINDOW_SIZE, 1)])?;
            c.send_get(1);
            c.expect_headers(1)?;
            let d = c.expect_data(1)?;
            if d.payload.len() != 1 {
                return Err(format!("expected a DATA of 1 octet, got {}", d.describe()));
            }
            // And no more until the window opens; then 1 octet per WINDOW_UPDATE of 1.
            c.send(&window_update(1, 1));
            expect_body_in_frames(&mut c, 1, 1, 1)
        }),
        case("6.9.1/2", "WINDOW_UPDATEs taking the connection window over 2^31-1 -> FLOW_CONTROL_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&window_update(0, 0x7fff_ffff));
            c.send(&window_update(0, 0x7fff_ffff));
            c.expect_connection_error(&[FLOW_CONTROL_ERROR])
        }),
        case("6.9.1/3", "WINDOW_UPDATEs taking a stream window over 2^31-1 -> FLOW_CONTROL_ERROR (stream)", |a| {
            let mut c = Conn::handshake(a)?;
            c.send_headers(1, &post(None), false);
            c.send(&window_update(1, 0x7fff_ffff));
            c.send(&window_update(1, 0x7fff_ffff));
            c.expect_stream_error(1, &[FLOW_CONTROL_ERROR])
        }),
        case("6.9.1/4", "the server sends no more than the stream window", |a| {
            let mut c = Conn::handshake_with(a, &[(INITIAL_WINDOW_SIZE, 5)])?;
            c.send_get(1);
            c.expect_headers(1)?;
            expect_body_in_frames(&mut c, 1, 5, 5)?;
            // The window is used up: a PING overtakes anything more.
            c.expect_alive()?;
            c.send(&window_update(1, HELLO.len() as u32));
            expect_body_in_frames(&mut c, 1, HELLO.len() - 5, HELLO.len() - 5)
        }),
        case(
            "6.9.1/5",
            "DATA beyond the server's stream window -> FLOW_CONTROL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                let window = c.server_setting(INITIAL_WINDOW_SIZE).unwrap_or(65535) as usize;
                c.send_headers(1, &req("POST", "/hold"), false);
                let body = vec![b'w'; window];
                for chunk in body.chunks(16384) {
                    c.send(&data(1, chunk, false));
                }
                c.expect_alive()?;
                c.send(&data(1, b"!", false));
                c.expect_stream_error(1, &[FLOW_CONTROL_ERROR])
            },
        ),
        case(
            "6.9.1/6",
            "DATA beyond the server's connection window -> FLOW_CONTROL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                let window = c.server_setting(INITIAL_WINDOW_SIZE).unwrap_or(65535) as i64;
                let mut left = c.conn_window;
                let mut id = 1;
                let chunk = vec![b'w'; 16384];
                while left > 0 {
                    c.send_headers(id, &req("POST", "/hold"), false);
                    let mut in_stream = window.min(left);
                    left -= in_stream;
                    while in_stream > 0 {
                        let n = in_stream.min(16384) as usize;
                        c.send(&data(id, &chunk[..n], false));
                        in_stream -= n as i64;
                    }
                    id += 2;
                }
                c.expect_alive()?;
                c.send_headers(id, &req("POST", "/hold"), false);
                c.send(&data(id, b"!", false));
                c.expect_connection_error(&[FLOW_CONTROL_ERROR])
            },
        ),
        // §6.9.2 the initial window size.
        case("6.9.2/1", "SETTINGS_INITIAL_WINDOW_SIZE change applies to open streams", |a| {
            let mut c = Conn::handshake_with(a, &[(INITIAL_WINDOW_SIZE, 0)])?;
            c.send_get(1);
            c.expect_headers(1)?;
            c.send(&settings(&[(INITIAL_WINDOW_SIZE, 1)]));
            let d = c.expect_data(1)?;
            if d.payload.len() != 1 {
                return Err(format!("expected a DATA of 1 octet, got {}", d.describe()));
            }
            Ok(())
        }),
        case("6.9.2/2", "SETTINGS making a stream window negative -> respected", |a| {
            let mut c = Conn::handshake_with(a, &[(INITIAL_WINDOW_SIZE, 3)])?;
            c.send_get(1);
            c.expect_headers(1)?;
            expect_body_in_frames(&mut c, 1, 3, 3)?;
            // Window 3 - 3 = 0, then 0 + (2 - 3) = -1, then -1 + 2 = 1.
            c.send(&settings(&[(INITIAL_WINDOW_SIZE, 2)]));
            c.expect_settings_ack()?;
            c.send(&window_update(1, 2));
            let d = c.expect_data(1)?;
            if d.payload.len() != 1 {
                return Err(format!("expected a DATA of 1 octet, got {}", d.describe()));
            }
            Ok(())
        }),
        case("6.9.2/3", "SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1 -> FLOW_CONTROL_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&settings(&[(INITIAL_WINDOW_SIZE, 0x8000_0000)]));
            c.expect_connection_error(&[FLOW_CONTROL_ERROR])
        }),
        case("6.9.2/4", "SETTINGS_INITIAL_WINDOW_SIZE taking an open stream's window over 2^31-1 -> FLOW_CONTROL_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send_headers(1, &post(None), false);
            c.send(&window_update(1, 0x7fff_ffff - 65535));
            c.send(&settings(&[(INITIAL_WINDOW_SIZE, 65536)]));
            c.expect_connection_error(&[FLOW_CONTROL_ERROR])
        }),
        // §6.10 CONTINUATION.
        case("6.10/1", "several CONTINUATION frames after HEADERS -> processed", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&headers(1, &block(&get()), true, false));
            c.send(&continuation(1, &lit(b"x-dummy1", b"one"), false));
            c.send(&continuation(1, &lit(b"x-dummy2", b"two"), true));
            c.expect_status(1, "200", Some(HELLO)).map(|_| ())
        }),
        case("6.10/2", "CONTINUATION followed by a frame other than CONTINUATION -> PROTOCOL_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&headers(1, &block(&post(None)), false, false));
            c.send(&continuation(1, &lit(b"x-dummy1", b"one"), false));
            c.send(&data(1, b"test", true));
            c.expect_connection_error(&[PROTOCOL_ERROR])
        }),
        case("6.10/3", "CONTINUATION on stream 0 -> PROTOCOL_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&headers(1, &block(&get()), true, false));
            c.send(&continuation(0, &lit(b"x-dummy1", b"one"), true));
            c.expect_connection_error(&[PROTOCOL_ERROR])
        }),
        case("6.10/4", "CONTINUATION after HEADERS with END_HEADERS -> PROTOCOL_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send_headers(1, &post(None), false);
            c.send(&continuation(1, &lit(b"x-dummy1", b"one"), true));
            c.expect_connection_error(&[PROTOCOL_ERROR])
        }),
        case("6.10/5", "CONTINUATION after CONTINUATION with END_HEADERS -> PROTOCOL_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&headers(1, &block(&post(None)), false, false));
            c.send(&continuation(1, &lit(b"x-dummy1", b"one"), true));
            c.send(&continuation(1, &lit(b"x-dummy2", b"two"), true));
            c.expect_connection_error(&[PROTOCOL_ERROR])
        }),
        case("6.10/6", "CONTINUATION after DATA -> PROTOCOL_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send_headers(1, &post(None), false);
            c.send(&data(1, b"test", false));
            c.send(&continuation(1, &lit(b"x-dummy1", b"one"), true));
            c.expect_connection_error(&[PROTOCOL_ERROR])
        }),
        case("6.10/7", "CONTINUATION on a different stream -> PROTOCOL_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&headers(1, &block(&get()), true, false));
            c.send(&continuation(3, &lit(b"x-dummy1", b"one"), true));
            c.expect_connection_error(&[PROTOCOL_ERROR])
        }),
        // §7 error codes.
        case("7/1", "GOAWAY with an unknown error code -> no special behaviour", |a| {
            let mut c = Conn::handshake(a)?;
            // Both in one write: the client's GOAWAY lets the server close once idle.
            let mut b = goaway(0, 0xff, b"");
            b.extend(ping(false, *b"after-ga"));
            c.send(&b);
            c.expect_ping_ack(*b"after-ga")
        }),
        case("7/2", "RST_STREAM with an unknown error code -> no special behaviour", |a| {
            let mut c = Conn::handshake(a)?;
            c.send_headers(1, &post(None), false);
            c.send(&rst_stream(1, 0xff));
            c.expect_alive()
        }),
    ]
}
