//! The encoder and its policy: what to index, what to Huffman-code.

use super::table::{static_lookup, Table, ENTRY_OVERHEAD};
use super::{encode_int, huffman};

/// The most dynamic table the encoder uses, whatever the peer allows: the RFC's default, and
/// what a server's repeating response fields (content-type, server, vary, ...) need.
const ENCODER_TABLE_CAP: usize = 4096;
const _: () = assert!(ENCODER_TABLE_CAP <= u16::MAX as usize);

/// How a literal field is represented (RFC 7541 §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Indexing {
    /// §6.2.1: added to the dynamic table.
    Incremental,
    /// §6.2.2: not added.
    Without,
    /// §6.2.3: not added, and intermediaries must not add it either (sensitive values).
    Never,
}

/// Whether string literals are Huffman-coded (§5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Huffman {
    #[cfg(any(test, feature = "fuzzing"))]
    Always,
    #[cfg(any(test, feature = "fuzzing"))]
    Never,
    /// When that is shorter (the policy of `encode_field`).
    IfShorter,
}

/// Encodes header blocks for one peer (one per connection).
///
/// The policy (`encode_field`), in order:
/// - a field in the static table is sent as its index (`:status: 200`, `:method: GET`, ...);
///   names are looked up with a `match` on the bytes, not a scan;
/// - sensitive fields (`authorization`, `proxy-authorization`, `cookie` values under 20 bytes,
///   which are easy to guess, and anything marked `HeaderValue::set_sensitive`) are sent
///   never-indexed, so no compression state reveals them (§7.1);
/// - fields whose values change per message (`date`, `content-length`, `:path`, `etag`,
///   `last-modified`, `set-cookie`, ...) are sent without indexing: indexing them would only
///   evict the entries that do repeat;
/// - everything else is indexed, so a value that repeats across messages (content-type,
///   server, vary, `:authority`, user-agent, ...) costs one byte from the second time on,
///   unless the field is bigger than half the table, where it would evict too much;
/// - each string is Huffman-coded when that is shorter.
#[derive(Debug)]
pub(crate) struct Encoder {
    table: Table,
    /// The peer's SETTINGS_HEADER_TABLE_SIZE changes since the last block, capped at
    /// `ENCODER_TABLE_CAP`: (smallest, last).
    pending: Option<(u16, u16)>,
}

impl Encoder {
    /// The peer's table starts at 4096 (RFC 9113 §6.5.2).
    pub(crate) fn new() -> Encoder {
        Encoder {
            table: Table::new(ENCODER_TABLE_CAP),
            pending: None,
        }
    }

    /// The peer's SETTINGS_HEADER_TABLE_SIZE: the encoder uses at most this (and at most 4096),
    /// and signals the change at the start of the next block (§4.2).
    pub(crate) fn set_max_table_size(&mut self, n: usize) {
        let n = n.min(ENCODER_TABLE_CAP) as u16;
        self.pending = Some(match self.pending {
            Some((smallest, _)) => (smallest.min(n), n),
            None => (n, n),
        });
    }

    /// One response head: `:status`, then the fields.
    pub(crate) fn encode_response(
        &mut self,
        status: http::StatusCode,
        headers: &http::HeaderMap,
        out: &mut Vec<u8>,
    ) {
        self.begin_block(out);
        self.encode_field(b":status", status.as_str().as_bytes(), false, out);
        self.encode_fields(headers, out);
    }

    /// One request head: `:method`, `:scheme`, `:authority` (if any), `:path`, then the
    /// fields (for tests: the client writes its own, leaving out connection fields).
    #[cfg(test)]
    pub(crate) fn encode_request(
        &mut self,
        method: &http::Method,
        scheme: &str,
        authority: Option<&str>,
        path: &str,
        headers: &http::HeaderMap,
        out: &mut Vec<u8>,
    ) {
        self.begin_block(out);
        self.encode_field(b":method", method.as_str().as_bytes(), false, out);
        self.encode_field(b":scheme", scheme.as_bytes(), false, out);
        if let Some(authority) = authority {
            self.encode_field(b":authority", authority.as_bytes(), false, out);
        }
        self.encode_field(b":path", path.as_bytes(), false, out);
        self.encode_fields(headers, out);
    }

    /// A trailer block (fields only).
    pub(crate) fn encode_trailers(&mut self, headers: &http::HeaderMap, out: &mut Vec<u8>) {
        self.begin_block(out);
        self.encode_fields(headers, out);
    }

    /// The fields of `headers`, for a block built by hand: `begin_block`, then `encode_field`
    /// for the pseudo-headers (e.g. `:protocol` for extended CONNECT), then this.
    pub(crate) fn encode_fields(&mut self, headers: &http::HeaderMap, out: &mut Vec<u8>) {
        for (name, value) in headers {
            let sensitive = value.is_sensitive();
            self.encode_field(name.as_str().as_bytes(), value.as_bytes(), sensitive, out);
        }
    }

    /// Writes the size updates owed since the last block (§4.2, §6.3): the smallest size the
    /// peer allowed, if we were using more, then the final one. Every `encode_*` but
    /// `encode_field` starts with it; a block built from `encode_field` calls must too.
    pub(crate) fn begin_block(&mut self, out: &mut Vec<u8>) {
        let Some((smallest, last)) = self.pending.take() else {
            return;
        };
        let (smallest, last) = (usize::from(smallest), usize::from(last));
        if smallest < self.table.max_size() {
            encode_int(smallest, 5, 0x20, out);
            self.table.set_max_size(smallest);
        }
        if last != self.table.max_size() {
            encode_int(last, 5, 0x20, out);
            self.table.set_max_size(last);
        }
    }

    /// One field, by the policy in the type's documentation; `sensitive` forces never-indexed.
    pub(crate) fn encode_field(
        &mut self,
        name: &[u8],
        value: &[u8],
        sensitive: bool,
        out: &mut Vec<u8>,
    ) {
        let mut indexing = indexing_for(name, value, sensitive);
        let in_static = static_lookup(name, value);
        if indexing != Indexing::Never {
            if let Some((index, true)) = in_static {
                return self.encode_indexed(index, out);
            }
        }
        let mut name_index = in_static.map(|(index, _)| index);
        // The dynamic table only holds fields this policy indexed: search it for those, or for
        // a name the static table lacks.
        if indexing == Indexing::Incremental || name_index.is_none() {
            match self.table.find(name, value) {
                Some((i, true)) if indexing == Indexing::Incremental => {
                    return self.encode_indexed(62 + i, out);
                }
                Some((i, _)) if name_index.is_none() => name_index = Some(62 + i),
                _ => {}
            }
        }
        if indexing == Indexing::Incremental
            && name.len() + value.len() + ENTRY_OVERHEAD > self.table.max_size() / 2
        {
            indexing = Indexing::Without;
        }
        self.encode_literal(name, name_index, value, indexing, Huffman::IfShorter, out);
    }

    /// §6.1: the field at HPACK index `index`.
    pub(crate) fn encode_indexed(&mut self, index: usize, out: &mut Vec<u8>) {
        encode_int(index, 7, 0x80, out);
    }

    /// §6.2: a literal field, its name by `name_index` (static or dynamic) if given, else as
    /// a literal; with `Indexing::Incremental` it is added to the table, as the peer will.
    pub(crate) fn encode_literal(
        &mut self,
        name: &[u8],
        name_index: Option<usize>,
        value: &[u8],
        indexing: Indexing,
        huffman: Huffman,
        out: &mut Vec<u8>,
    ) {
        let (flags, prefix) = match indexing {
            Indexing::Incremental => (0x40, 6),
            Indexing::Without => (0x00, 4),
            Indexing::Never => (0x10, 4),
        };
        match name_index {
            Some(index) => encode_int(index, prefix, flags, out),
            None => {
                out.push(flags);
                encode_string(name, huffman, out);
            }
        }
        encode_string(value, huffman, out);
        if indexing == Indexing::Incremental {
            self.table.insert(name, value);
        }
    }

    #[cfg(test)]
    pub(super) fn table(&self) -> &Table {
        &self.table
    }
}

/// The indexing policy of `Encoder` (see there for why).
fn indexing_for(name: &[u8], value: &[u8], sensitive: bool) -> Indexing {
    if sensitive {
        return Indexing::Never;
    }
    match name {
        b"authorization" | b"proxy-authorization" => Indexing::Never,
        b"cookie" if value.len() < 20 => Indexing::Never,
        b":path"
        | b"age"
        | b"content-length"
        | b"content-md5"
        | b"content-range"
        | b"date"
        | b"etag"
        | b"expires"
        | b"if-modified-since"
        | b"if-none-match"
        | b"if-range"
        | b"if-unmodified-since"
        | b"last-modified"
        | b"location"
        | b"range"
        | b"referer"
        | b"set-cookie"
        | b"x-request-id"
        | b"x-correlation-id"
        | b"request-id"
        | b"traceparent"
        | b"tracestate" => Indexing::Without,
        _ => Indexing::Incremental,
    }
}

/// §5.2: a string literal with the H bit.
fn encode_string(s: &[u8], huffman: Huffman, out: &mut Vec<u8>) {
    let coded = match huffman {
        #[cfg(any(test, feature = "fuzzing"))]
        Huffman::Never => None,
        #[cfg(any(test, feature = "fuzzing"))]
        Huffman::Always => Some(huffman::encoded_len(s)),
        Huffman::IfShorter => Some(huffman::encoded_len(s)).filter(|&n| n < s.len()),
    };
    match coded {
        Some(len) => {
            encode_int(len, 7, 0x80, out);
            out.reserve(len);
            huffman::encode(s, out);
        }
        None => {
            encode_int(s.len(), 7, 0x00, out);
            out.extend_from_slice(s);
        }
    }
}
