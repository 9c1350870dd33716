//! The HTTP/2 frame codec (`parse`, the writers).
//!
//! Input layout: bit 0 of byte 0 picks the mode. Then:
//! - mode 0: the rest is raw bytes (`fibr_fuzz::h2::run_frames_raw`: bits 1-2 of byte 0
//!   pick the max frame size), parsed as one frame and as a stream of frames
//!   (`check_frames`);
//! - mode 1: the rest drives `arbitrary` to make frames, which the writers write and the
//!   parser reads back (`check_frames_round_trip`), a header block split at a max frame
//!   size (`check_header_block`), and a hand-built padded or prioritized frame
//!   (`check_raw_frame`).
#![no_main]

use arbitrary::{Result, Unstructured};
use fibr::fuzzing::http::{H2Frame, H2Priority};
use fibr_fuzz::h2::{
    check_frames_round_trip, check_header_block, check_raw_frame, run_frames_raw, RawFrame,
};
use libfuzzer_sys::fuzz_target;

fn stream(u: &mut Unstructured<'_>) -> Result<u32> {
    Ok(if u.arbitrary()? {
        u.int_in_range(0..=5)?
    } else {
        u.arbitrary()?
    })
}

fn bytes(u: &mut Unstructured<'_>, max: usize) -> Result<Vec<u8>> {
    let n = u.int_in_range(0..=max)?;
    Ok(u.bytes(n)?.to_vec())
}

fn frame(u: &mut Unstructured<'_>) -> Result<H2Frame> {
    Ok(match u.int_in_range(0..=9)? {
        0 => {
            let data = bytes(u, 300)?;
            H2Frame::Data {
                stream: stream(u)?,
                end_stream: u.arbitrary()?,
                flow_len: data.len() as u32,
                data,
            }
        }
        1 => H2Frame::Headers {
            stream: stream(u)?,
            end_stream: u.arbitrary()?,
            end_headers: true,
            priority: None,
            fragment: bytes(u, 300)?,
        },
        2 => H2Frame::Priority {
            stream: stream(u)?,
            priority: H2Priority {
                dependency: stream(u)?,
                exclusive: u.arbitrary()?,
                weight: u.arbitrary()?,
            },
        },
        3 => H2Frame::RstStream {
            stream: stream(u)?,
            code: u.arbitrary()?,
        },
        4 => H2Frame::Settings {
            ack: u.arbitrary()?,
            params: u.arbitrary_iter()?.take(10).collect::<Result<_>>()?,
        },
        5 => H2Frame::PushPromise {
            stream: stream(u)?,
            promised: stream(u)?,
            end_headers: u.arbitrary()?,
            fragment: bytes(u, 100)?,
        },
        6 => H2Frame::Ping {
            ack: u.arbitrary()?,
            data: u.arbitrary()?,
        },
        7 => H2Frame::GoAway {
            last_stream: u.arbitrary()?,
            code: u.arbitrary()?,
            debug: bytes(u, 100)?,
        },
        8 => H2Frame::WindowUpdate {
            stream: stream(u)?,
            increment: if u.arbitrary()? {
                u.int_in_range(0..=2)?
            } else {
                u.arbitrary()?
            },
        },
        _ => H2Frame::Continuation {
            stream: stream(u)?,
            end_headers: u.arbitrary()?,
            fragment: bytes(u, 100)?,
        },
    })
}

fn structured(u: &mut Unstructured<'_>) -> Result<()> {
    let mut frames = Vec::new();
    for _ in 0..u.int_in_range(1..=8)? {
        frames.push(frame(u)?);
    }
    let mfs = u.int_in_range(0..=400)?;
    check_frames_round_trip(&frames, mfs);
    let block = bytes(u, 1000)?;
    check_header_block(u.arbitrary()?, &block, u.arbitrary()?, mfs);
    let raw = RawFrame {
        kind: *u.choose(&[0, 1, 5, 2, 3, 9, 0x20])?,
        flags: u.arbitrary()?,
        stream: stream(u)?,
        pad: u.arbitrary()?,
        priority: (stream(u)?, u.arbitrary()?),
        promised: stream(u)?,
        body: bytes(u, 300)?,
    };
    check_raw_frame(&raw);
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    match data.first() {
        None => {}
        Some(f) if f & 1 == 0 => run_frames_raw(data),
        Some(_) => {
            let _ = structured(&mut Unstructured::new(&data[1..]));
        }
    }
});
