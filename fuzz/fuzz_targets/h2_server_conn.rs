//! The server's HTTP/2 connection machine, whole, with a recording service
//! (`fibr::fuzzing::http::H2Conn`).
//!
//! Input layout: bit 0 of byte 0 picks the mode. Then:
//! - mode 0: raw client bytes (`fibr_fuzz::h2::run_server_raw`: bit 1 of byte 0 says the
//!   input brings its own preface, else a valid preface and SETTINGS go first; bytes 1-2
//!   are a split point), served whole, split and byte by byte (`check_server_conn`);
//! - mode 1: bytes 1-2 are a split point, the rest drives `arbitrary` to make a sequence
//!   of client frames (requests with random fields, pseudo-headers, padding, priority and
//!   CONTINUATION splits, DATA, SETTINGS, WINDOW_UPDATE, RST_STREAM, PING, PRIORITY,
//!   CONTINUATION, GOAWAY, any frame), encoded by a client with its own HPACK encoder and
//!   served the same way (`check_server_frames`).
//!
//! The binary counts its heap (`Counting`), so the checks also bound the machine's memory.
#![no_main]

use arbitrary::{Result, Unstructured};
use fibr_fuzz::h2::{check_server_frames, counting_installed, run_server_raw, ClientFrame, Counting};
use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOC: Counting = Counting;

fn frame(u: &mut Unstructured<'_>) -> Result<ClientFrame> {
    Ok(match u.int_in_range(0..=19)? {
        0..=5 => ClientFrame::Headers {
            stream: u.arbitrary()?,
            method: u.arbitrary()?,
            pseudo: if u.ratio(3, 4)? { 0 } else { u.arbitrary()? },
            fields: u.arbitrary_iter()?.take(6).collect::<Result<_>>()?,
            content_length: u.arbitrary()?,
            end_stream: u.arbitrary()?,
            split_at: if u.ratio(1, 5)? { Some(u.arbitrary()?) } else { None },
            pad: if u.ratio(1, 5)? { Some(u.arbitrary()?) } else { None },
            priority: if u.ratio(1, 10)? {
                Some((u.int_in_range(0..=8)?, u.arbitrary()?))
            } else {
                None
            },
        },
        6..=9 => ClientFrame::Data {
            stream: u.arbitrary()?,
            len: u.arbitrary()?,
            end_stream: u.arbitrary()?,
            pad: if u.ratio(1, 5)? { Some(u.arbitrary()?) } else { None },
        },
        10 => ClientFrame::Settings(u.arbitrary_iter()?.take(6).collect::<Result<_>>()?),
        11 => ClientFrame::SettingsAck,
        12 | 13 => ClientFrame::WindowUpdate {
            stream: u.arbitrary()?,
            increment: u.arbitrary()?,
        },
        14 => ClientFrame::Reset {
            stream: u.arbitrary()?,
            code: u.int_in_range(0..=14)?,
        },
        15 => ClientFrame::Ping {
            ack: u.arbitrary()?,
            data: u.arbitrary()?,
        },
        16 => ClientFrame::Priority {
            stream: u.arbitrary()?,
            dependency: u.int_in_range(0..=8)?,
            weight: u.arbitrary()?,
        },
        17 => ClientFrame::Continuation {
            stream: u.arbitrary()?,
            fragment: u.arbitrary()?,
            end_headers: u.arbitrary()?,
        },
        18 => ClientFrame::GoAway {
            last_stream: u.int_in_range(0..=9)?,
            code: u.int_in_range(0..=2)?,
        },
        _ => ClientFrame::Raw {
            kind: u.int_in_range(0..=12)?,
            flags: u.arbitrary()?,
            stream: u.arbitrary()?,
            payload: u.arbitrary()?,
        },
    })
}

fuzz_target!(|data: &[u8]| {
    counting_installed();
    match data.first() {
        None => {}
        Some(f) if f & 1 == 0 => run_server_raw(data),
        Some(_) if data.len() < 3 => {}
        Some(_) => {
            let split = usize::from(u16::from_le_bytes([data[1], data[2]]));
            let mut u = Unstructured::new(&data[3..]);
            let mut frames = Vec::new();
            while frames.len() < 40 {
                match frame(&mut u) {
                    Ok(f) => frames.push(f),
                    Err(_) => break,
                }
                if u.is_empty() {
                    break;
                }
            }
            if !frames.is_empty() {
                check_server_frames(&frames, split);
            }
        }
    }
});
