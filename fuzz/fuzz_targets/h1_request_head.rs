//! The HTTP/1 request-head parser on arbitrary bytes (the input is the raw request
//! stream), with the default and small limits: see `fibr_fuzz::check_request_head`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fibr_fuzz::check_request_head(data);
});
