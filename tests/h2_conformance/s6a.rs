//! RFC 9113 §6.1–§6.5: DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS.

use super::client::*;
use super::{case, Case, HELLO};

pub fn cases() -> Vec<Case> {
    vec![
        // §6.1 DATA.
        case("6.1/1", "DATA on stream 0 -> PROTOCOL_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&data(0, b"test", true));
            c.expect_connection_error(&[PROTOCOL_ERROR])
        }),
        case(
            "6.1/2",
            "DATA on a stream not open or half-closed (local) -> STREAM_CLOSED",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_get(1);
                c.send(&data(1, b"test", true));
                c.expect_stream_error(1, &[STREAM_CLOSED])
            },
        ),
        case(
            "6.1/3",
            "DATA with a pad length over the payload -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_headers(1, &post(None), false);
                // Pad length 6, 4 octets after it.
                c.send(&frame(DATA, PADDED | END_STREAM, 1, b"\x06Test"));
                c.expect_connection_error(&[PROTOCOL_ERROR])
            },
        ),
        case(
            "6.1/4",
            "padded DATA: padding not counted in the body, counted in flow control",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_headers(1, &post(Some(4)), false);
                c.send(&data_padded(1, b"Test", 200, true));
                c.expect_status(1, "200", Some(b"Test")).map(|_| ())
            },
        ),
        // §6.2 HEADERS.
        case(
            "6.2/1",
            "HEADERS without END_HEADERS, then PRIORITY -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&headers(1, &block(&get()), true, false));
                c.send(&priority(3, 0, false, 255));
                c.expect_connection_error(&[PROTOCOL_ERROR])
            },
        ),
        case(
            "6.2/2",
            "HEADERS to another stream while a field block is open -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&headers(1, &block(&get()), true, false));
                c.send_headers(3, &get(), true);
                c.expect_connection_error(&[PROTOCOL_ERROR])
            },
        ),
        case("6.2/3", "HEADERS on stream 0 -> PROTOCOL_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send_get(0);
            c.expect_connection_error(&[PROTOCOL_ERROR])
        }),
        case(
            "6.2/4",
            "HEADERS with a pad length over the payload -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                let b = block(&get());
                let mut p = vec![(b.len() + 1) as u8];
                p.extend(&b);
                c.send(&frame(HEADERS, PADDED | END_STREAM | END_HEADERS, 1, &p));
                c.expect_connection_error(&[PROTOCOL_ERROR])
            },
        ),
        case(
            "6.2/5",
            "HEADERS without END_HEADERS and no CONTINUATION, then DATA -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&headers(1, &block(&post(None)), false, false));
                c.send(&data(1, b"test", true));
                c.expect_connection_error(&[PROTOCOL_ERROR])
            },
        ),
        // §6.3 PRIORITY.
        case("6.3/1", "PRIORITY on stream 0 -> PROTOCOL_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&priority(0, 1, false, 255));
            c.expect_connection_error(&[PROTOCOL_ERROR])
        }),
        case(
            "6.3/2",
            "PRIORITY of 4 octets -> FRAME_SIZE_ERROR (stream)",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send_headers(1, &post(None), false);
                c.send(&frame(PRIORITY, 0, 1, &[0x80, 0, 0, 1]));
                c.expect_stream_error(1, &[FRAME_SIZE_ERROR])
            },
        ),
        // §6.4 RST_STREAM.
        case("6.4/1", "RST_STREAM on stream 0 -> PROTOCOL_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&rst_stream(0, CANCEL));
            c.expect_connection_error(&[PROTOCOL_ERROR])
        }),
        case(
            "6.4/2",
            "RST_STREAM on an idle stream -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&rst_stream(1, CANCEL));
                c.expect_connection_error(&[PROTOCOL_ERROR])
            },
        ),
        case("6.4/3", "RST_STREAM of 3 octets -> FRAME_SIZE_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send_headers(1, &post(None), false);
            c.send(&frame(RST_STREAM, 0, 1, &[0, 0, 0]));
            c.expect_connection_error(&[FRAME_SIZE_ERROR])
        }),
        // §6.5 SETTINGS.
        case(
            "6.5/1",
            "SETTINGS ACK with a payload -> FRAME_SIZE_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&frame(SETTINGS, ACK, 0, &[0, 1, 0, 0, 0x10, 0]));
                c.expect_connection_error(&[FRAME_SIZE_ERROR])
            },
        ),
        case("6.5/2", "SETTINGS on stream 1 -> PROTOCOL_ERROR", |a| {
            let mut c = Conn::handshake(a)?;
            c.send(&frame(SETTINGS, 0, 1, &[0, 1, 0, 0, 0x10, 0]));
            c.expect_connection_error(&[PROTOCOL_ERROR])
        }),
        case(
            "6.5/3",
            "SETTINGS of a length not a multiple of 6 -> FRAME_SIZE_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&frame(SETTINGS, 0, 0, &[0, 1, 0]));
                c.expect_connection_error(&[FRAME_SIZE_ERROR])
            },
        ),
        // §6.5.2 defined parameters.
        case(
            "6.5.2/1",
            "SETTINGS_ENABLE_PUSH of 2 -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&settings(&[(ENABLE_PUSH, 2)]));
                c.expect_connection_error(&[PROTOCOL_ERROR])
            },
        ),
        case(
            "6.5.2/2",
            "SETTINGS_INITIAL_WINDOW_SIZE of 2^31 -> FLOW_CONTROL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&settings(&[(INITIAL_WINDOW_SIZE, 1 << 31)]));
                c.expect_connection_error(&[FLOW_CONTROL_ERROR])
            },
        ),
        case(
            "6.5.2/3",
            "SETTINGS_MAX_FRAME_SIZE of 2^14-1 -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&settings(&[(MAX_FRAME_SIZE, (1 << 14) - 1)]));
                c.expect_connection_error(&[PROTOCOL_ERROR])
            },
        ),
        case(
            "6.5.2/4",
            "SETTINGS_MAX_FRAME_SIZE of 2^24 -> PROTOCOL_ERROR",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&settings(&[(MAX_FRAME_SIZE, 1 << 24)]));
                c.expect_connection_error(&[PROTOCOL_ERROR])
            },
        ),
        case(
            "6.5.2/5",
            "SETTINGS with an unknown identifier -> ignored, ACKed",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&settings(&[(0xff, 1), (0xabcd, 0xffff_ffff)]));
                c.expect_settings_ack()?;
                c.expect_alive()
            },
        ),
        case(
            "6.5.2/6",
            "SETTINGS_MAX_FRAME_SIZE of 2^24-1 -> accepted",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&settings(&[(MAX_FRAME_SIZE, (1 << 24) - 1)]));
                c.expect_settings_ack()?;
                c.send_get(1);
                c.expect_status(1, "200", Some(HELLO)).map(|_| ())
            },
        ),
        // §6.5.3 synchronization.
        case(
            "6.5.3/1",
            "several SETTINGS_INITIAL_WINDOW_SIZE values -> the last applies",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&settings(&[
                    (INITIAL_WINDOW_SIZE, 100),
                    (INITIAL_WINDOW_SIZE, 1),
                ]));
                c.expect_settings_ack()?;
                c.send_get(1);
                c.expect_headers(1)?;
                let d = c.expect_data(1)?;
                if d.payload.len() != 1 {
                    return Err(format!("expected a DATA of 1 octet, got {}", d.describe()));
                }
                Ok(())
            },
        ),
        case(
            "6.5.3/2",
            "SETTINGS without ACK -> SETTINGS with ACK",
            |a| {
                let mut c = Conn::handshake(a)?;
                c.send(&settings(&[(ENABLE_PUSH, 0)]));
                c.expect_settings_ack()
            },
        ),
    ]
}
