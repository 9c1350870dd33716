//! The server's TLS machine (`fibr::tls`) on arbitrary input: bytes 0..2 are a split point
//! (u16, little endian), bit 0 of byte 0 asks for the plain-HTTP answer; the rest is what
//! a client sent (`fibr::fuzzing::tls::check_split_invariance` holds the property).
#![no_main]

use fibr::fuzzing::tls::check_split_invariance;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let split = u16::from_le_bytes([data[0], data[1]]) as usize;
    check_split_invariance(&data[2..], split, data[0] & 1 == 1);
});
