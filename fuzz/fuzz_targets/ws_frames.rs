//! The WebSocket machine (`fibr::fuzzing::ws::check_input`, layout there): byte 0 picks
//! the role, permessage-deflate, small limits, auto-pong and the mode; bytes 1-2 a split
//! point; then what the peer sent (fed whole, split and byte by byte: the same messages,
//! error, state and Close) or messages to round-trip client → server → client.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fibr::fuzzing::ws::check_input(data);
});
