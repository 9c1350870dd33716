//! HTTP/3's `:protocol` (extended CONNECT, RFC 9220) in a request's first HEADERS frame,
//! which the `h3` crate (0.0.8) cannot carry: it parses `:protocol` into its own enum of
//! `webtransport` and `connect-udp`, and rejects any other value (`websocket`) as a
//! malformed request. So the server's driver takes the field line out of the frame
//! before h3 reads it and hands the value to the request beside h3 ([`take_protocol`]);
//! the client's driver turns a marker field the request carried through h3 into
//! `:protocol` in the frame h3 wrote ([`swap_marker`]). Remove when h3 knows `websocket`
//! (hyperium/h3#236).
//!
//! Only QPACK without the dynamic table is understood (fibr's h3 allows none): a field
//! section that refers to it, like any frame this does not follow, passes unchanged.

use crate::proto::h2::hpack::{decode_int, encode_int, huffman_decode};
use std::ops::Range;

const HEADERS: u64 = 0x01;
const NAME: &[u8] = b":protocol";

/// The field a client's extended CONNECT carries through h3 in place of `:protocol`
/// (never sent: [`swap_marker`] takes it out).
pub(crate) const PROTOCOL_MARKER: &str = "fibr-h3-protocol";

/// What the start of a request stream holds.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum First {
    /// The first frame is not complete yet.
    More,
    /// Nothing to take: hand the bytes to h3 as they are.
    Pass,
    /// The first `consumed` bytes ended in a HEADERS frame with a `:protocol`: `frame` is
    /// them without it.
    Taken {
        frame: Vec<u8>,
        protocol: Vec<u8>,
        consumed: usize,
    },
}

/// RFC 9000 §16: a variable-length integer, `None` if `src` ends first.
fn varint(src: &mut &[u8]) -> Option<u64> {
    let (&first, _) = src.split_first()?;
    let len = 1usize << (first >> 6);
    if src.len() < len {
        return None;
    }
    let mut v = u64::from(first & 0x3f);
    for &b in &src[1..len] {
        v = (v << 8) | u64::from(b);
    }
    *src = &src[len..];
    Some(v)
}

fn put_varint(v: u64, out: &mut Vec<u8>) {
    match v {
        0..0x40 => out.push(v as u8),
        0x40..0x4000 => out.extend_from_slice(&(v as u16 | 0x4000).to_be_bytes()),
        0x4000..0x4000_0000 => out.extend_from_slice(&(v as u32 | 0x8000_0000).to_be_bytes()),
        _ => out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes()),
    }
}

/// RFC 9114 §7.2.8: the reserved frame types, which a peer may send anywhere (grease).
fn reserved(ty: u64) -> bool {
    ty >= 0x21 && (ty - 0x21) % 0x1f == 0
}

/// Looks for `:protocol` in the first HEADERS frame of `buf` (a request stream's first
/// bytes; reserved frames before it are kept as they are); frames past `max` bytes pass
/// (h3 answers a head that large itself).
pub(crate) fn take_protocol(buf: &[u8], max: usize) -> First {
    let mut src = buf;
    loop {
        let start = buf.len() - src.len();
        if start > max {
            return First::Pass;
        }
        let (Some(ty), Some(len)) = (varint(&mut src), varint(&mut src)) else {
            return First::More;
        };
        let Ok(len) = usize::try_from(len) else {
            return First::Pass;
        };
        if len > max || (ty != HEADERS && !reserved(ty)) {
            return First::Pass;
        }
        if src.len() < len {
            return First::More;
        }
        let (payload, rest) = src.split_at(len);
        src = rest;
        if ty != HEADERS {
            continue;
        }
        let Some((line, protocol)) = find(payload, NAME) else {
            return First::Pass;
        };
        let mut block = payload[..line.start].to_vec();
        block.extend_from_slice(&payload[line.end..]);
        let mut frame = buf[..start].to_vec();
        put_varint(HEADERS, &mut frame);
        put_varint(block.len() as u64, &mut frame);
        frame.extend_from_slice(&block);
        return First::Taken {
            frame,
            protocol,
            consumed: buf.len() - src.len(),
        };
    }
}

/// A string literal whose length has `prefix` bits of its first byte and whose Huffman
/// flag is `huffman`: its decoded bytes.
fn string(first: u8, prefix: u8, huffman: u8, src: &mut &[u8]) -> Option<Vec<u8>> {
    let len = decode_int(first, prefix, src).ok()?;
    if len > src.len() {
        return None;
    }
    let (raw, rest) = src.split_at(len);
    *src = rest;
    if first & huffman == 0 {
        return Some(raw.to_vec());
    }
    huffman_decode(raw).ok()
}

/// The byte range of the field line with the literal name `wanted` in an encoded field
/// section (RFC 9204 §4.5), and its value.
fn find(payload: &[u8], wanted: &[u8]) -> Option<(Range<usize>, Vec<u8>)> {
    let mut src = payload;
    let next = |src: &mut &[u8]| -> Option<u8> {
        let (&b, rest) = src.split_first()?;
        *src = rest;
        Some(b)
    };
    // The prefix: a Required Insert Count of 0 (no dynamic table), then the base.
    let ric = next(&mut src)?;
    if decode_int(ric, 8, &mut src).ok()? != 0 {
        return None;
    }
    let base = next(&mut src)?;
    decode_int(base, 7, &mut src).ok()?;
    while !src.is_empty() {
        let start = payload.len() - src.len();
        let b = next(&mut src)?;
        if b & 0x80 != 0 {
            // An indexed field line (static: the dynamic table is empty).
            decode_int(b, 6, &mut src).ok()?;
        } else if b & 0x40 != 0 {
            // A literal with a name reference.
            decode_int(b, 4, &mut src).ok()?;
            let v = next(&mut src)?;
            string(v, 7, 0x80, &mut src)?;
        } else if b & 0x20 != 0 {
            // A literal with a literal name.
            let name = string(b, 3, 0x08, &mut src)?;
            let v = next(&mut src)?;
            let value = string(v, 7, 0x80, &mut src)?;
            if name == wanted {
                return Some((start..payload.len() - src.len(), value));
            }
        } else {
            // Post-base references: the dynamic table.
            return None;
        }
    }
    None
}

/// `frame` (h3's first HEADERS frame of a request) with its [`PROTOCOL_MARKER`] field
/// line taken out and its value put first as `:protocol`; `None` if it has none.
pub(crate) fn swap_marker(frame: &[u8]) -> Option<Vec<u8>> {
    let mut src = frame;
    let ty = varint(&mut src)?;
    let len = usize::try_from(varint(&mut src)?).ok()?;
    if ty != HEADERS || src.len() != len {
        return None;
    }
    let (line, protocol) = find(src, PROTOCOL_MARKER.as_bytes())?;
    // The prefix: two bytes when nothing refers to the dynamic table.
    let (prefix, lines) = src[..line.start].split_at_checked(2)?;
    if prefix != [0, 0] {
        return None;
    }
    let mut block = prefix.to_vec();
    encode_int(NAME.len(), 3, 0x20, &mut block);
    block.extend_from_slice(NAME);
    encode_int(protocol.len(), 7, 0, &mut block);
    block.extend_from_slice(&protocol);
    block.extend_from_slice(lines);
    block.extend_from_slice(&src[line.end..]);
    let mut out = Vec::with_capacity(block.len() + 9);
    put_varint(HEADERS, &mut out);
    put_varint(block.len() as u64, &mut out);
    out.extend_from_slice(&block);
    Some(out)
}

#[cfg(test)]
mod tests;
