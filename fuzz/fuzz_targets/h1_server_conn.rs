//! The server's HTTP/1 connection machine, whole: bytes 0..2 are a split point (u16,
//! little endian, modulo the length); the rest is one connection's input, served with an
//! echo service in one read, in two, and byte by byte (`fibr_fuzz::check_server_conn`).
#![no_main]

use fibr_fuzz::check_server_conn;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let split = u16::from_le_bytes([data[0], data[1]]) as usize;
    check_server_conn(&data[2..], split);
});
