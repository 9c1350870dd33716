//! The Huffman code of RFC 7541 Appendix B: encoding from the code table, and decoding with a
//! 4-bit state machine (as nghttp2 does) that the compiler builds from the same table.

use super::DecodeError;

/// The code length of every symbol (0..=255, then EOS = 256), as listed in Appendix B.
///
/// The code is canonical (within one length, codes count up in symbol order, and each length
/// starts where the previous one ended, shifted left), so the lengths alone determine it;
/// `codes()` rebuilds the codes and the tests compare some of them with the RFC.
#[rustfmt::skip]
const LENGTHS: [u8; 257] = [
    // 0..=31: control bytes
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
    // ' ' ! " # $ % & ' ( ) * + , - . /
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
    // 0 1 2 3 4 5 6 7 8 9 : ; < = > ?
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
    // @ A B C D E F G H I J K L M N O
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    // P Q R S T U V W X Y Z [ \ ] ^ _
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
    // ` a b c d e f g h i j k l m n o
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
    // p q r s t u v w x y z { | } ~ DEL
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
    // 128..=255
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
    // EOS
    30,
];

const EOS: usize = 256;

/// `(code, length)` of every symbol, the code right-aligned.
pub(super) const CODES: [(u32, u8); 257] = codes();

const fn codes() -> [(u32, u8); 257] {
    let mut out = [(0u32, 0u8); 257];
    let mut code: u32 = 0;
    let mut len = 1;
    while len <= 30 {
        let mut sym = 0;
        while sym < 257 {
            if LENGTHS[sym] == len {
                out[sym] = (code, len);
                code += 1;
            }
            sym += 1;
        }
        if len < 30 {
            code <<= 1;
        }
        len += 1;
    }
    // A complete prefix code (Kraft sum exactly 1) ends with the all-ones 30-bit EOS.
    assert!(
        code == 1 << 30,
        "the Huffman code lengths do not form a complete code"
    );
    out
}

/// The number of bytes `src` takes Huffman-coded (the last byte padded).
pub(super) fn encoded_len(src: &[u8]) -> usize {
    let bits: usize = src.iter().map(|&b| CODES[b as usize].1 as usize).sum();
    bits.div_ceil(8)
}

/// Appends `src` Huffman-coded, padded with the most significant bits of EOS (1-bits).
pub(super) fn encode(src: &[u8], out: &mut Vec<u8>) {
    // At most 7 pending bits plus one 30-bit code: fits in a u64.
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    for &b in src {
        let (code, len) = CODES[b as usize];
        acc = (acc << len) | u64::from(code);
        bits += u32::from(len);
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
        acc &= (1 << bits) - 1;
    }
    if bits > 0 {
        out.push(((acc << (8 - bits)) as u8) | (0xff >> bits));
    }
}

/// The most bytes `len` Huffman-coded bytes can decode to (the shortest code is 5 bits).
pub(super) fn max_decoded_len(len: usize) -> usize {
    len.saturating_mul(8) / 5
}

/// Decodes `src` into `dst`, which must hold `max_decoded_len(src.len())` bytes; returns the
/// decoded length. Rejects EOS inside the string and padding that is longer than 7 bits or not
/// all 1-bits (RFC 7541 §5.2).
pub(super) fn decode(src: &[u8], dst: &mut [u8]) -> Result<usize, DecodeError> {
    let mut state = 0usize;
    let mut flags = ACCEPT;
    let mut n = 0;
    for &byte in src {
        for nibble in [byte >> 4, byte & 0x0f] {
            let step = DECODE[state][nibble as usize];
            if step.flags & FAIL != 0 {
                return Err(DecodeError::HuffmanEos);
            }
            if step.flags & EMIT != 0 {
                dst[n] = step.sym;
                n += 1;
            }
            state = step.next as usize;
            flags = step.flags;
        }
    }
    if flags & ACCEPT != 0 {
        Ok(n)
    } else if flags & ONES != 0 {
        Err(DecodeError::HuffmanPaddingTooLong)
    } else {
        Err(DecodeError::HuffmanPaddingNotOnes)
    }
}

/// One transition of the decoding machine: from a state (an inner node of the code tree, 0 =
/// the root) on 4 input bits.
#[derive(Clone, Copy)]
struct Step {
    next: u8,
    flags: u8,
    sym: u8,
}

/// These 4 bits completed a symbol (`sym`); at most one fits, as the shortest code is 5 bits.
const EMIT: u8 = 1;
/// These 4 bits completed EOS: an error inside a string.
const FAIL: u8 = 2;
/// The string may end here: the bits since the last symbol are at most 7 1-bits.
const ACCEPT: u8 = 4;
/// The bits since the last symbol are 8 or more 1-bits (a prefix of EOS): too much padding.
const ONES: u8 = 8;

/// 256 states x 16 nibbles x 3 bytes = 12 KiB of read-only data, built at compile time.
static DECODE: [[Step; 16]; 256] = decode_table();

/// A child in the tree: an inner node's number, or `LEAF | symbol`. 0 = not built yet (the
/// root is nobody's child).
const LEAF: u16 = 0x8000;

/// The code tree: 257 leaves need exactly 256 inner nodes, so a state fits in a `u8`.
const fn tree() -> [[u16; 2]; 256] {
    let mut tree = [[0u16; 2]; 256];
    let mut used = 1;
    let mut sym = 0;
    while sym < 257 {
        let (code, len) = CODES[sym];
        let mut node = 0;
        let mut depth = len as u32;
        while depth > 1 {
            depth -= 1;
            let bit = ((code >> depth) & 1) as usize;
            if tree[node][bit] == 0 {
                assert!(used < 256, "more inner nodes than a complete code has");
                tree[node][bit] = used as u16;
                used += 1;
            }
            assert!(tree[node][bit] & LEAF == 0, "not a prefix code");
            node = tree[node][bit] as usize;
        }
        let bit = (code & 1) as usize;
        assert!(tree[node][bit] == 0, "not a prefix code");
        tree[node][bit] = LEAF | sym as u16;
        sym += 1;
    }
    assert!(used == 256, "not a complete code");
    tree
}

const fn decode_table() -> [[Step; 16]; 256] {
    let tree = tree();
    // ones[node] = 1 + depth for the nodes on the all-ones path from the root (EOS's path), else 0.
    let mut ones = [0u8; 256];
    let mut node = 0;
    let mut depth = 0;
    loop {
        ones[node] = depth + 1;
        let child = tree[node][1];
        if child & LEAF != 0 {
            break;
        }
        node = child as usize;
        depth += 1;
    }
    let mut table = [[Step {
        next: 0,
        flags: 0,
        sym: 0,
    }; 16]; 256];
    let mut state = 0;
    while state < 256 {
        let mut nibble = 0;
        while nibble < 16 {
            let mut node = state;
            let mut flags = 0;
            let mut sym = 0;
            let mut bit = 4;
            while bit > 0 {
                bit -= 1;
                let child = tree[node][(nibble >> bit) & 1];
                if child & LEAF == 0 {
                    node = child as usize;
                } else if (child & !LEAF) as usize == EOS {
                    flags = FAIL;
                    node = 0;
                    break;
                } else {
                    flags |= EMIT;
                    sym = (child & !LEAF) as u8;
                    node = 0;
                }
            }
            if flags & FAIL == 0 && ones[node] != 0 {
                flags |= if ones[node] <= 8 { ACCEPT } else { ONES };
            }
            table[state][nibble] = Step {
                next: node as u8,
                flags,
                sym,
            };
            nibble += 1;
        }
        state += 1;
    }
    table
}
