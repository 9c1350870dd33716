//! Every way a block can be refused, one test each, and the edges that must still pass.

use super::*;

/// A literal without indexing, name "a", whose value is `value` (already a string literal:
/// its length byte first).
fn with_value(value: &[u8]) -> Vec<u8> {
    let mut block = vec![0x00, 0x01, b'a'];
    block.extend_from_slice(value);
    block
}

fn decode_err(block: &[u8]) -> DecodeError {
    decode(&mut Decoder::new(4096), block).unwrap_err()
}

#[test]
fn zero_index() {
    assert_eq!(decode_err(&[0x80]), DecodeError::ZeroIndex);
}

#[test]
fn index_out_of_range() {
    // 62 with an empty dynamic table, as a field and as a name.
    assert_eq!(decode_err(&[0xbe]), DecodeError::IndexOutOfRange);
    assert_eq!(decode_err(&[0x7e, 0x00]), DecodeError::IndexOutOfRange);
    assert_eq!(
        decode_err(&[0x0f, 0x2f, 0x00]),
        DecodeError::IndexOutOfRange
    );
    // 62 is fine once there is an entry, 63 is not.
    let mut dec = Decoder::new(4096);
    decode(&mut dec, &[0x40, 0x01, b'x', 0x01, b'y']).unwrap();
    assert_eq!(decode(&mut dec, &[0xbe]), Ok(fields(&[("x", "y")])));
    assert_eq!(decode(&mut dec, &[0xbf]), Err(DecodeError::IndexOutOfRange));
}

#[test]
fn integer_beyond_u32() {
    // One past u32::MAX, as an index.
    let mut block = Vec::new();
    encode_int(u32::MAX as usize + 1, 7, 0x80, &mut block);
    assert_eq!(decode_err(&block), DecodeError::IntegerOverflow);
    // u32::MAX itself decodes (and is then out of range).
    let mut block = Vec::new();
    encode_int(u32::MAX as usize, 7, 0x80, &mut block);
    assert_eq!(decode_err(&block), DecodeError::IndexOutOfRange);
}

#[test]
fn integer_with_too_many_continuation_bytes() {
    // Six continuation bytes, even if they only add zeros.
    let block = [0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00];
    assert_eq!(decode_err(&block), DecodeError::IntegerOverflow);
    // Five are fine.
    let block = [0xff, 0x80, 0x80, 0x80, 0x80, 0x00];
    assert_eq!(decode_err(&block), DecodeError::IndexOutOfRange);
}

#[test]
fn truncated_integer() {
    assert_eq!(decode_err(&[0xff]), DecodeError::Truncated);
    assert_eq!(decode_err(&[0xff, 0x80]), DecodeError::Truncated);
}

#[test]
fn truncated_string() {
    // A value shorter than its length, a missing value, a missing name length.
    assert_eq!(decode_err(&[0x40, 0x05, b'a']), DecodeError::Truncated);
    assert_eq!(decode_err(&[0x40, 0x01, b'a']), DecodeError::Truncated);
    assert_eq!(decode_err(&[0x40]), DecodeError::Truncated);
    assert_eq!(decode_err(&[0x44]), DecodeError::Truncated);
    // A length past any block.
    let mut block = vec![0x04];
    encode_int(u32::MAX as usize, 7, 0, &mut block);
    assert_eq!(decode_err(&block), DecodeError::Truncated);
}

#[test]
fn huffman_eos_in_string() {
    // EOS (30 1-bits) followed by 2 bits of padding.
    let block = with_value(&[0x84, 0xff, 0xff, 0xff, 0xff]);
    assert_eq!(decode_err(&block), DecodeError::HuffmanEos);
    // EOS after a symbol: 'a' (00011) then EOS then padding.
    let block = with_value(&[0x85, 0x1f, 0xff, 0xff, 0xff, 0xff]);
    assert_eq!(decode_err(&block), DecodeError::HuffmanEos);
}

#[test]
fn huffman_padding_longer_than_7_bits() {
    // 'a' (00011) then 11 1-bits.
    let block = with_value(&[0x82, 0x1f, 0xff]);
    assert_eq!(decode_err(&block), DecodeError::HuffmanPaddingTooLong);
    // A whole byte of padding on its own.
    let block = with_value(&[0x81, 0xff]);
    assert_eq!(decode_err(&block), DecodeError::HuffmanPaddingTooLong);
    // 7 bits are fine: '0' (00000) is 5 bits, 3 of padding; "00" then 6.
    let block = with_value(&[0x81, 0x07]);
    assert_eq!(
        decode(&mut Decoder::new(4096), &block),
        Ok(fields(&[("a", "0")]))
    );
}

#[test]
fn huffman_padding_not_ones() {
    // 'a' (00011) then 000.
    let block = with_value(&[0x81, 0x18]);
    assert_eq!(decode_err(&block), DecodeError::HuffmanPaddingNotOnes);
    // 'a' then 110.
    let block = with_value(&[0x81, 0x1e]);
    assert_eq!(decode_err(&block), DecodeError::HuffmanPaddingNotOnes);
}

#[test]
fn size_update_over_the_max() {
    let mut block = Vec::new();
    encode_int(4097, 5, 0x20, &mut block);
    assert_eq!(decode_err(&block), DecodeError::TableSizeTooLarge);
    // Our limit, not the table's current size, is the bound.
    let mut dec = Decoder::new(4096);
    decode(&mut dec, &[0x20]).unwrap();
    assert_eq!(dec.table().max_size(), 0);
    let mut block = Vec::new();
    encode_int(4096, 5, 0x20, &mut block);
    decode(&mut dec, &block).unwrap();
    assert_eq!(dec.table().max_size(), 4096);
}

#[test]
fn size_update_after_a_field() {
    assert_eq!(decode_err(&[0x82, 0x20]), DecodeError::SizeUpdateNotAtStart);
    // Several at the start are fine (§4.2: the smallest, then the final size).
    let mut block = vec![0x20];
    encode_int(4096, 5, 0x20, &mut block);
    block.push(0x82);
    assert_eq!(
        decode(&mut Decoder::new(4096), &block),
        Ok(fields(&[(":method", "GET")]))
    );
}

#[test]
fn size_update_missing_after_we_lowered_the_limit() {
    let mut dec = Decoder::new(4096);
    dec.set_max_table_size(1024);
    assert_eq!(
        decode(&mut dec, &[0x82]),
        Err(DecodeError::SizeUpdateMissing)
    );
    let mut block = Vec::new();
    encode_int(1024, 5, 0x20, &mut block);
    block.push(0x82);
    assert_eq!(decode(&mut dec, &block), Ok(fields(&[(":method", "GET")])));
    assert_eq!(decode(&mut dec, &[0x82]), Ok(fields(&[(":method", "GET")])));
    // Raising the limit asks for nothing: the peer may keep its size.
    dec.set_max_table_size(8192);
    assert_eq!(decode(&mut dec, &[0x82]), Ok(fields(&[(":method", "GET")])));
}

#[test]
fn list_size_at_and_over_the_limit() {
    // ":method: GET" (7 + 3 + 32 = 42), then "x: y" added to the table (1 + 1 + 32 = 34).
    let block = [0x82, 0x40, 0x01, b'x', 0x01, b'y'];
    let mut dec = Decoder::new(4096);
    let mut got = Vec::new();
    let at = dec.decode(&block, 76, |n, v| got.push((n.to_vec(), v.to_vec())));
    assert_eq!(at, Ok(()));
    assert_eq!(got, fields(&[(":method", "GET"), ("x", "y")]));

    let mut dec = Decoder::new(4096);
    let mut got = Vec::new();
    let over = dec.decode(&block, 75, |n, v| got.push((n.to_vec(), v.to_vec())));
    assert_eq!(over, Err(DecodeError::ListTooLarge));
    assert!(!DecodeError::ListTooLarge.is_connection_error());
    assert_eq!(
        got,
        fields(&[(":method", "GET")]),
        "no field past the limit"
    );
    // The entry added inside the refused block is there for the next one.
    assert_eq!(decode(&mut dec, &[0xbe]), Ok(fields(&[("x", "y")])));
}

#[test]
fn list_too_large_gives_way_to_a_connection_error() {
    let block = [0x82, 0x82, 0x80];
    let mut dec = Decoder::new(4096);
    assert_eq!(
        dec.decode(&block, 50, |_, _| {}),
        Err(DecodeError::ZeroIndex)
    );
    assert!(DecodeError::ZeroIndex.is_connection_error());
}

#[test]
fn entry_larger_than_the_table_empties_it() {
    let mut dec = Decoder::new(64);
    decode(&mut dec, &[0x40, 0x01, b'x', 0x01, b'y']).unwrap();
    assert_eq!(dec.table().len(), 1);
    // 32 + 1 + 40 > 64: delivered, not added, and the table is empty.
    let mut block = vec![0x40, 0x01, b'z', 40];
    block.extend_from_slice(&[b'v'; 40]);
    let got = decode(&mut dec, &block).unwrap();
    assert_eq!(got[0].1.len(), 40);
    assert_eq!(dec.table().len(), 0);
    assert_eq!(dec.table().size(), 0);
}

#[test]
fn new_entry_may_name_the_entry_it_evicts() {
    // §4.4: "ab: cd" (36) fills a 64-byte table; "ab: ef" named by index 62 evicts it.
    let mut dec = Decoder::new(64);
    decode(&mut dec, &[0x40, 0x02, b'a', b'b', 0x02, b'c', b'd']).unwrap();
    let got = decode(&mut dec, &[0x7e, 0x02, b'e', b'f']).unwrap();
    assert_eq!(got, fields(&[("ab", "ef")]));
    assert_table(dec.table(), &[("ab", "ef")], 36);
}

#[test]
fn size_update_evicts() {
    let mut dec = Decoder::new(4096);
    decode(&mut dec, &hex(C3[0].block)).unwrap();
    decode(&mut dec, &hex(C3[1].block)).unwrap();
    assert_eq!(dec.table().size(), 110);
    // Down to 100: the oldest (":authority", 57) goes.
    let mut block = Vec::new();
    encode_int(100, 5, 0x20, &mut block);
    decode(&mut dec, &block).unwrap();
    assert_table(dec.table(), &[NO_CACHE], 53);
    decode(&mut dec, &[0x20]).unwrap();
    assert_table(dec.table(), &[], 0);
    assert_eq!(
        dec.table().heap_bytes(),
        0,
        "a table set to 0 gives its memory back"
    );
}
