//! The arpc frame decoder for `fuzz/fuzz_targets/arpc_frames.rs` and its stable fallback
//! in `tests/fuzz_fallback.rs`; the checks live here so both hold it to the same rules.
//!
//! Input layout (`check_input`): byte 0: bit 0 a small body limit (64 bytes); bytes 1-2: a
//! split point; the rest: what the peer sent.

use crate::proto::arpc::{encode_frame, Decoder, Error, Kind, Limits, HEADER_LEN, MAX_METHOD_LEN};

/// One delivered frame, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Got {
    kind: Kind,
    flag: u8,
    seq: u64,
    method: Vec<u8>,
    payload: Vec<u8>,
}

/// What one feeding of the input gave.
#[derive(Debug, PartialEq, Eq)]
struct Run {
    frames: Vec<Got>,
    pongs: Vec<u8>,
    result: Result<(), Error>,
}

fn limits(flags: u8) -> Limits {
    if flags & 1 != 0 {
        Limits { max_body_len: 64 }
    } else {
        Limits::default()
    }
}

fn feed(flags: u8, pieces: &[&[u8]]) -> Run {
    let limits = limits(flags);
    let mut d = Decoder::new(limits);
    let (mut frames, mut pongs, mut result) = (Vec::new(), Vec::new(), Ok(()));
    for p in pieces {
        let before = frames.len();
        let r = d.receive(p, &mut pongs, &mut |f| {
            assert!(
                (1..=MAX_METHOD_LEN).contains(&f.method.len()),
                "method {:?}",
                f.method
            );
            frames.push(Got {
                kind: f.kind,
                flag: f.flag,
                seq: f.seq,
                method: f.method.to_vec(),
                payload: f.payload.to_vec(),
            });
        });
        if result.is_ok() {
            result = r;
        } else {
            assert_eq!(r, Ok(()), "input after an error must be ignored");
            assert_eq!(frames.len(), before, "delivered after an error");
        }
        let bound = HEADER_LEN + limits.max_body_len as usize;
        assert!(d.held_bytes() < bound, "held {} bytes", d.held_bytes());
    }
    assert_eq!(pongs.len() % HEADER_LEN, 0);
    Run {
        frames,
        pongs,
        result,
    }
}

/// The `cmd` byte a delivered frame had.
fn cmd(kind: Kind) -> u8 {
    match kind {
        Kind::Request => 1,
        Kind::Response => 2,
        Kind::Notify => 3,
        Kind::Stream { local, eof } => {
            6 | if local { 0x80 } else { 0 } | if eof { 0x40 } else { 0 }
        }
    }
}

/// What the peer sent, fed whole, in two pieces and byte by byte: no panic, the same
/// frames, pongs and error; memory bounded by the limit; every frame delivered encodes
/// back to bytes that decode to it.
pub fn check_input(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let (split, input) = match rest {
        [a, b, rest @ ..] => (usize::from(u16::from_le_bytes([*a, *b])), rest),
        _ => (0, rest),
    };
    let whole = feed(flags, &[input]);
    let (a, b) = input.split_at(split.min(input.len()));
    assert_eq!(whole, feed(flags, &[a, b]), "split at {split} differs");
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(whole, feed(flags, &bytes), "byte by byte differs");
    let mut again = Vec::new();
    for f in &whole.frames {
        encode_frame(
            &mut again,
            cmd(f.kind),
            f.flag,
            f.seq,
            &f.method,
            &f.payload,
        )
        .expect("a delivered method is valid");
    }
    let back = feed(flags & !1, &[&again]);
    assert_eq!(back.result, Ok(()));
    assert_eq!(back.frames, whole.frames, "re-encoded frames differ");
}
