//! The chunked body decoder.
//!
//! Input layout: byte 0 picks the mode (bit 0) and the trailer bound (bits 1..4, an index
//! into `TRAILER_LIMITS`); bytes 1..3 are the split point (u16, little endian, modulo the
//! length). Then:
//! - mode 0: the rest is a chunked body, decoded whole, split in two and byte by byte
//!   (`fibr_fuzz::check_chunked`);
//! - mode 1: the rest drives `arbitrary` to make chunks, trailers and a following message,
//!   which are encoded and decoded back (`fibr_fuzz::check_chunked_round_trip`).
#![no_main]

use arbitrary::Unstructured;
use fibr_fuzz::{
    check_chunked, check_chunked_round_trip, trailer_name, trailer_value, TRAILER_LIMITS,
};
use http::HeaderMap;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let flags = data[0];
    let split = u16::from_le_bytes([data[1], data[2]]) as usize;
    let max_trailer = TRAILER_LIMITS[(flags as usize >> 1) % TRAILER_LIMITS.len()];
    let rest = &data[3..];
    if flags & 1 == 0 {
        check_chunked(rest, split, max_trailer);
        return;
    }
    let mut u = Unstructured::new(rest);
    let Ok(chunks) = u.arbitrary::<Vec<Vec<u8>>>() else {
        return;
    };
    let Ok(fields) = u.arbitrary::<Vec<(Vec<u8>, Vec<u8>)>>() else {
        return;
    };
    let next: &[u8] = u.take_rest();
    let mut trailers = HeaderMap::new();
    for (name, value) in fields.iter().take(64) {
        trailers.append(trailer_name(name), trailer_value(value));
    }
    let chunks: Vec<&[u8]> = chunks.iter().map(|c| c.as_slice()).collect();
    check_chunked_round_trip(&chunks, &trailers, next, split, max_trailer);
});
