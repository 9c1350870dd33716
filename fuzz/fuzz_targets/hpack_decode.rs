//! HPACK (RFC 7541): the decoder on arbitrary blocks, and encode → decode round trips.
//!
//! Input layout: bit 0 of byte 0 picks the mode. Then:
//! - mode 0: raw blocks and table size changes (`fibr_fuzz::h2::run_hpack_raw`: table and
//!   list limits from byte 0, then length-prefixed blocks), through a limited and an
//!   unlimited decoder (`check_hpack_decode`);
//! - mode 1: the rest drives `arbitrary` to make blocks of fields (names and values of any
//!   bytes, encoded by the policy or as literals of every kind) with table size changes,
//!   encoded and decoded back (`check_hpack_round_trip`).
#![no_main]

use arbitrary::{Result, Unstructured};
use fibr_fuzz::h2::{check_hpack_round_trip, run_hpack_raw, FieldHow, HpackBlock};
use libfuzzer_sys::fuzz_target;

fn blocks(u: &mut Unstructured<'_>) -> Result<Vec<HpackBlock>> {
    let mut out = Vec::new();
    for _ in 0..u.int_in_range(1..=6)? {
        let set_table = if u.ratio(1, 5)? {
            Some(*u.choose(&[0usize, 1, 33, 64, 100, 256, 4095, 4096, 1 << 20])?)
        } else {
            None
        };
        let mut fields = Vec::new();
        for _ in 0..u.int_in_range(0..=12)? {
            let name: Vec<u8> = if u.ratio(1, 3)? {
                u.choose(&[
                    &b":path"[..],
                    b":method",
                    b":authority",
                    b"cookie",
                    b"authorization",
                    b"content-type",
                    b"date",
                    b"x-a",
                ])?
                .to_vec()
            } else {
                u.arbitrary()?
            };
            let value: Vec<u8> = u.arbitrary()?;
            let how = if u.ratio(1, 4)? {
                FieldHow::Literal {
                    indexing: u.int_in_range(0..=2)?,
                    huffman: u.int_in_range(0..=2)?,
                }
            } else {
                FieldHow::Policy {
                    sensitive: u.ratio(1, 8)?,
                }
            };
            fields.push((name, value, how));
        }
        out.push(HpackBlock { set_table, fields });
    }
    Ok(out)
}

fuzz_target!(|data: &[u8]| {
    match data.first() {
        None => {}
        Some(f) if f & 1 == 0 => run_hpack_raw(data),
        Some(&f) => {
            let mut u = Unstructured::new(&data[1..]);
            if let Ok(b) = blocks(&mut u) {
                let max_list = [usize::MAX, 0, 100, 500][usize::from(f >> 1) % 4];
                check_hpack_round_trip(&b, max_list);
            }
        }
    }
});
