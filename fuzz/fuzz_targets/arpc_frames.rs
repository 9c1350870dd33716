//! The arpc frame decoder (`fibr::fuzzing::arpc::check_input`, layout there): byte 0 picks
//! a small body limit, bytes 1-2 a split point, then what the peer sent (fed whole, split
//! and byte by byte: the same frames, pongs and error; delivered frames re-encode).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fibr::fuzzing::arpc::check_input(data);
});
