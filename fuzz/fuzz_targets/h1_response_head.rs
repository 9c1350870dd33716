//! The client's side of the HTTP/1 codec: the response-head parser, and the request
//! heads the client encodes.
//!
//! Input layout: byte 0 picks the request's method (bit 0: GET / HEAD), the limits
//! (bit 1: default / small), obsolete line folding (bit 2) and the mode (bits 3-4).
//! Then:
//! - modes 0 and 1: the rest is what the server sent: one head, then a stream of
//!   responses (`fibr_fuzz::check_response_input`);
//! - mode 2: the rest drives `arbitrary` to make a response (status, reason, fields,
//!   Connection, body framing, the bytes after it), which is built, parsed back and
//!   compared (`fibr_fuzz::check_response_round_trip`);
//! - mode 3: the rest drives `arbitrary` to make a request (method, target, version,
//!   fields, the caller's framing fields, body length), which `encode_request_head`
//!   writes and the server's parser reads back (`fibr_fuzz::check_request_round_trip`).
#![no_main]

use arbitrary::{Result, Unstructured};
use fibr_fuzz::{
    check_request_round_trip, check_response_input, check_response_round_trip, BodySpec,
    RequestSpec, ResponseSpec,
};
use libfuzzer_sys::fuzz_target;

fn fields(u: &mut Unstructured<'_>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut out = Vec::new();
    for _ in 0..u.int_in_range(0..=40)? {
        out.push((u.arbitrary()?, u.arbitrary()?));
    }
    Ok(out)
}

fn response(head_request: bool, mut u: Unstructured<'_>) -> Result<ResponseSpec> {
    let status = u.arbitrary()?;
    let reason = u.arbitrary()?;
    let http10 = u.arbitrary()?;
    let fields = fields(&mut u)?;
    let connection = u.arbitrary()?;
    let bare_lf = u.arbitrary()?;
    let body = match u.int_in_range(0..=6)? {
        0 => BodySpec::Absent(u.arbitrary()?),
        1 => BodySpec::Length(u.arbitrary()?),
        2 => BodySpec::LengthList(u.arbitrary()?),
        3 => BodySpec::Chunked(u.arbitrary()?),
        4 => BodySpec::Coded(u.arbitrary()?),
        5 => BodySpec::CodedChunked(u.arbitrary()?),
        _ => BodySpec::LengthAndChunked(u.arbitrary()?),
    };
    Ok(ResponseSpec {
        head_request,
        status,
        reason,
        http10,
        fields,
        connection,
        body,
        bare_lf,
        next: u.take_rest().to_vec(),
    })
}

fn request(u: &mut Unstructured<'_>) -> Result<RequestSpec> {
    Ok(RequestSpec {
        method: u.arbitrary()?,
        custom_method: u.arbitrary()?,
        target: u.arbitrary()?,
        http10: u.arbitrary()?,
        fields: fields(u)?,
        content_length: u.arbitrary()?,
        declared: u.arbitrary()?,
        transfer_encoding: u.arbitrary()?,
        body_len: u.arbitrary()?,
        title_case: u.arbitrary()?,
    })
}

fuzz_target!(|data: &[u8]| {
    let Some(&flags) = data.first() else {
        return;
    };
    let mut u = Unstructured::new(&data[1..]);
    match (flags >> 3) & 3 {
        2 => {
            if let Ok(spec) = response(flags & 1 == 1, u) {
                check_response_round_trip(&spec);
            }
        }
        3 => {
            if let Ok(spec) = request(&mut u) {
                check_request_round_trip(&spec);
            }
        }
        _ => check_response_input(data),
    }
});
