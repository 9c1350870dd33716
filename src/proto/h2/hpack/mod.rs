//! HPACK (RFC 7541): header compression for HTTP/2.
//!
//! `Decoder` turns a complete header block into fields, `Encoder` turns response, request and
//! trailer heads into header blocks. Each side keeps one dynamic table (`table`), sized to what
//! it holds; nothing else lives between blocks.

mod encoder;
mod huffman;
mod table;
#[cfg(test)]
mod tests;

pub(crate) use encoder::Encoder;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use encoder::{Huffman, Indexing};

use table::{Table, ENTRY_OVERHEAD, STATIC};

/// Why a header block could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DecodeError {
    /// The header list is larger than the caller's limit (RFC 9113 §6.5.2): a stream error;
    /// the block was still decoded to the end, so the dynamic table is in sync.
    ListTooLarge,
    /// Index 0 in an indexed field (§6.1).
    ZeroIndex,
    /// An index past the static and dynamic tables (§2.3.3).
    IndexOutOfRange,
    /// An integer with more than 5 continuation bytes or beyond `u32` (§5.1).
    IntegerOverflow,
    /// The block ends inside a representation, an integer or a string.
    Truncated,
    /// A Huffman string contains EOS (§5.2).
    HuffmanEos,
    /// A Huffman string ends with more than 7 bits of padding (§5.2).
    HuffmanPaddingTooLong,
    /// A Huffman string's padding is not the 1-bits of EOS's prefix (§5.2).
    HuffmanPaddingNotOnes,
    /// A dynamic table size update above our SETTINGS_HEADER_TABLE_SIZE (§6.3).
    TableSizeTooLarge,
    /// A dynamic table size update after a field of the block (§4.2).
    SizeUpdateNotAtStart,
    /// We lowered our table size below the one in use and the block does not start with the
    /// size update that must follow (§4.2).
    SizeUpdateMissing,
}

impl DecodeError {
    /// Every error but `ListTooLarge` leaves the dynamic table out of step with the peer's:
    /// a connection error of type COMPRESSION_ERROR (RFC 9113 §4.3).
    pub(crate) fn is_connection_error(&self) -> bool {
        *self != DecodeError::ListTooLarge
    }
}

/// The RFC 9113 §6.5.2 size of a field in a header list.
fn field_size(name: &[u8], value: &[u8]) -> usize {
    name.len() + value.len() + ENTRY_OVERHEAD
}

/// Decodes header blocks from one peer (one per connection).
#[derive(Debug)]
pub(crate) struct Decoder {
    table: Table,
    /// Our SETTINGS_HEADER_TABLE_SIZE: the most a size update may ask for.
    max_allowed: u32,
    /// Set when our limit drops below the table's size: the next block must start with a
    /// size update (§4.2).
    update_required: bool,
}

impl Decoder {
    /// `max_table_size`: the SETTINGS_HEADER_TABLE_SIZE in force, which is also the table's
    /// starting size. The protocol starts at 4096, so a side that advertises less should
    /// start with `new(4096)` and call `set_max_table_size` when the peer acknowledges.
    pub(crate) fn new(max_table_size: usize) -> Decoder {
        Decoder {
            table: Table::new(max_table_size),
            max_allowed: max_table_size.min(table::MAX_TABLE_SIZE) as u32,
            update_required: false,
        }
    }

    /// A new SETTINGS_HEADER_TABLE_SIZE, once the peer has acknowledged it (RFC 9113 §4.3.1:
    /// until then the peer may still use the old one).
    pub(crate) fn set_max_table_size(&mut self, n: usize) {
        self.max_allowed = n.min(table::MAX_TABLE_SIZE) as u32;
        if (self.max_allowed as usize) < self.table.max_size() {
            self.update_required = true;
        }
    }

    /// Decodes one complete header block (the caller joins HEADERS + CONTINUATION fragments),
    /// calling `on_field(name, value)` for each field in order. Past `max_list_size` (the sum
    /// of name + value + 32 over the fields) it stops calling `on_field` but decodes the rest,
    /// so the dynamic table stays in sync, and returns `Err(ListTooLarge)`. Every other error
    /// is a connection error.
    ///
    /// Work is linear in the block; memory is bounded by it too: Huffman strings decode into
    /// a stack buffer, or a `Vec` made for this call when longer.
    pub(crate) fn decode(
        &mut self,
        block: &[u8],
        max_list_size: usize,
        mut on_field: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), DecodeError> {
        let mut src = block;
        let mut name_buf = Scratch::new();
        let mut value_buf = Scratch::new();
        let mut list_size = 0usize;
        let mut fields_started = false;
        let mut deliver = |name: &[u8], value: &[u8]| {
            list_size = list_size.saturating_add(field_size(name, value));
            if list_size <= max_list_size {
                on_field(name, value);
            }
        };
        while let Some((&first, rest)) = src.split_first() {
            src = rest;
            if first & 0xe0 == 0x20 {
                // §6.3 dynamic table size update.
                if fields_started {
                    return Err(DecodeError::SizeUpdateNotAtStart);
                }
                let size = decode_int(first, 5, &mut src)?;
                if size > self.max_allowed as usize {
                    return Err(DecodeError::TableSizeTooLarge);
                }
                self.table.set_max_size(size);
                self.update_required = false;
                continue;
            }
            if self.update_required {
                return Err(DecodeError::SizeUpdateMissing);
            }
            fields_started = true;
            if first & 0x80 != 0 {
                // §6.1 indexed field.
                let index = decode_int(first, 7, &mut src)?;
                let (name, value) = self.field(index)?;
                deliver(name, value);
            } else if first & 0x40 != 0 {
                // §6.2.1 literal with incremental indexing. The name is copied out of the
                // dynamic table, as inserting may evict the entry it came from.
                let index = decode_int(first, 6, &mut src)?;
                let name = match index {
                    0 => read_string(&mut src, &mut name_buf)?,
                    1..=61 => STATIC[index - 1].0,
                    _ => name_buf.copy(self.field(index)?.0),
                };
                let value = read_string(&mut src, &mut value_buf)?;
                deliver(name, value);
                self.table.insert(name, value);
            } else {
                // §6.2.2 without indexing (0000), §6.2.3 never indexed (0001): the same to a
                // decoder; the never-indexed flag matters to intermediaries, which we are not.
                let index = decode_int(first, 4, &mut src)?;
                let name = match index {
                    0 => read_string(&mut src, &mut name_buf)?,
                    _ => self.field(index)?.0,
                };
                let value = read_string(&mut src, &mut value_buf)?;
                deliver(name, value);
            }
        }
        if list_size > max_list_size {
            return Err(DecodeError::ListTooLarge);
        }
        Ok(())
    }

    /// The field at HPACK index `index` (1-based: static, then dynamic newest first).
    fn field(&self, index: usize) -> Result<(&[u8], &[u8]), DecodeError> {
        match index {
            0 => Err(DecodeError::ZeroIndex),
            1..=61 => Ok(STATIC[index - 1]),
            _ => self
                .table
                .get(index - 62)
                .ok_or(DecodeError::IndexOutOfRange),
        }
    }

    #[cfg(test)]
    fn table(&self) -> &Table {
        &self.table
    }
}

/// Where one decoded string lives for the length of a `decode` call.
struct Scratch {
    stack: [u8; 256],
    heap: Vec<u8>,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            stack: [0; 256],
            heap: Vec::new(),
        }
    }

    /// Room for `len` bytes.
    fn room(&mut self, len: usize) -> &mut [u8] {
        if len <= self.stack.len() {
            &mut self.stack[..len]
        } else {
            self.heap.clear();
            self.heap.resize(len, 0);
            &mut self.heap[..]
        }
    }

    fn copy(&mut self, src: &[u8]) -> &[u8] {
        let room = self.room(src.len());
        room.copy_from_slice(src);
        room
    }
}

/// §5.1: an integer whose `prefix` low bits are in `first`, continuing in `src` (QPACK's
/// integers are the same, RFC 9204 §4.1.1).
pub(crate) fn decode_int(first: u8, prefix: u8, src: &mut &[u8]) -> Result<usize, DecodeError> {
    let max_prefix = ((1u16 << prefix) - 1) as u8;
    let mut value = u64::from(first & max_prefix);
    if value < u64::from(max_prefix) {
        return Ok(value as usize);
    }
    let mut shift = 0;
    loop {
        let Some((&byte, rest)) = src.split_first() else {
            return Err(DecodeError::Truncated);
        };
        *src = rest;
        value += u64::from(byte & 0x7f) << shift;
        if value > u64::from(u32::MAX) {
            return Err(DecodeError::IntegerOverflow);
        }
        if byte & 0x80 == 0 {
            return usize::try_from(value).map_err(|_| DecodeError::IntegerOverflow);
        }
        shift += 7;
        // 5 continuation bytes carry 35 bits: anything longer only adds zeros or overflows.
        if shift > 28 {
            return Err(DecodeError::IntegerOverflow);
        }
    }
}

/// §5.2's Huffman code, decoded (QPACK's strings use the same code).
#[cfg(feature = "http3")]
pub(crate) fn huffman_decode(src: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let mut out = vec![0; huffman::max_decoded_len(src.len())];
    let n = huffman::decode(src, &mut out)?;
    out.truncate(n);
    Ok(out)
}

/// §5.2's Huffman code, for tests that build Huffman-coded fields by hand.
#[cfg(test)]
pub(crate) fn huffman_encode(src: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    huffman::encode(src, &mut out);
    out
}

/// §5.2: a string literal, borrowed from the block or decoded into `buf`.
fn read_string<'s, 'b: 's>(
    src: &mut &'b [u8],
    buf: &'s mut Scratch,
) -> Result<&'s [u8], DecodeError> {
    let Some((&first, rest)) = src.split_first() else {
        return Err(DecodeError::Truncated);
    };
    *src = rest;
    let len = decode_int(first, 7, src)?;
    if len > src.len() {
        return Err(DecodeError::Truncated);
    }
    let (raw, rest) = src.split_at(len);
    *src = rest;
    if first & 0x80 == 0 {
        return Ok(raw);
    }
    let room = buf.room(huffman::max_decoded_len(raw.len()));
    let n = huffman::decode(raw, room)?;
    Ok(&room[..n])
}

/// §5.1: appends `value` with `prefix` bits in a first byte that carries `flags` above them.
pub(crate) fn encode_int(value: usize, prefix: u8, flags: u8, out: &mut Vec<u8>) {
    let max_prefix = (1usize << prefix) - 1;
    if value < max_prefix {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max_prefix as u8);
    let mut rest = value - max_prefix;
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}
