//! The static table (RFC 7541 Appendix A) and the dynamic table (§2.3.2, §4).

use std::collections::VecDeque;

/// RFC 7541 Appendix A; index `i` of the RFC is `STATIC[i - 1]`.
pub(super) const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// The static entry for `name` (and `value`, if it matches too): `(RFC index, value matched)`.
///
/// A `match` on the bytes, which the compiler turns into a switch on the length and a few
/// compares, instead of scanning 61 entries for every field of every response.
pub(super) fn static_lookup(name: &[u8], value: &[u8]) -> Option<(usize, bool)> {
    let index = match name {
        b":authority" => 1,
        b":method" => match value {
            b"GET" => return Some((2, true)),
            b"POST" => return Some((3, true)),
            _ => return Some((2, false)),
        },
        b":path" => match value {
            b"/" => return Some((4, true)),
            b"/index.html" => return Some((5, true)),
            _ => return Some((4, false)),
        },
        b":scheme" => match value {
            b"http" => return Some((6, true)),
            b"https" => return Some((7, true)),
            _ => return Some((6, false)),
        },
        b":status" => match value {
            b"200" => return Some((8, true)),
            b"204" => return Some((9, true)),
            b"206" => return Some((10, true)),
            b"304" => return Some((11, true)),
            b"400" => return Some((12, true)),
            b"404" => return Some((13, true)),
            b"500" => return Some((14, true)),
            _ => return Some((8, false)),
        },
        b"accept-charset" => 15,
        b"accept-encoding" => return Some((16, value == b"gzip, deflate")),
        b"accept-language" => 17,
        b"accept-ranges" => 18,
        b"accept" => 19,
        b"access-control-allow-origin" => 20,
        b"age" => 21,
        b"allow" => 22,
        b"authorization" => 23,
        b"cache-control" => 24,
        b"content-disposition" => 25,
        b"content-encoding" => 26,
        b"content-language" => 27,
        b"content-length" => 28,
        b"content-location" => 29,
        b"content-range" => 30,
        b"content-type" => 31,
        b"cookie" => 32,
        b"date" => 33,
        b"etag" => 34,
        b"expect" => 35,
        b"expires" => 36,
        b"from" => 37,
        b"host" => 38,
        b"if-match" => 39,
        b"if-modified-since" => 40,
        b"if-none-match" => 41,
        b"if-range" => 42,
        b"if-unmodified-since" => 43,
        b"last-modified" => 44,
        b"link" => 45,
        b"location" => 46,
        b"max-forwards" => 47,
        b"proxy-authenticate" => 48,
        b"proxy-authorization" => 49,
        b"range" => 50,
        b"referer" => 51,
        b"refresh" => 52,
        b"retry-after" => 53,
        b"server" => 54,
        b"set-cookie" => 55,
        b"strict-transport-security" => 56,
        b"transfer-encoding" => 57,
        b"user-agent" => 58,
        b"vary" => 59,
        b"via" => 60,
        b"www-authenticate" => 61,
        _ => return None,
    };
    // The names with values in the table returned above; these entries have an empty one.
    Some((index, value.is_empty()))
}

/// The overhead RFC 7541 §4.1 counts per entry on top of its name and value.
pub(super) const ENTRY_OVERHEAD: usize = 32;

/// Table sizes beyond this are treated as this: no peer needs 16 MiB of header table, and it
/// keeps the offsets below in `u32`.
pub(super) const MAX_TABLE_SIZE: usize = 1 << 24;

/// The dynamic table: FIFO, newest entry first in the index space (§2.3.3).
///
/// Memory follows the contents: the names and values sit back to back in one `Vec<u8>`
/// (oldest first; evicting only moves the front of `entries`, and the dead bytes before the
/// oldest entry are dropped when the `Vec` would otherwise have to grow), plus 12 bytes per
/// entry in `entries`. Nothing is allocated until the first insertion, and the byte buffer
/// never grows beyond the table's maximum size.
#[derive(Debug)]
pub(super) struct Table {
    bytes: Vec<u8>,
    entries: VecDeque<Entry>,
    /// The sum of the entries' sizes (name + value + 32). Both fit in `u32` (`MAX_TABLE_SIZE`).
    size: u32,
    max_size: u32,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Where the name starts in `bytes`; the value follows it.
    off: u32,
    name_len: u32,
    value_len: u32,
}

impl Entry {
    fn size(&self) -> usize {
        self.name_len as usize + self.value_len as usize + ENTRY_OVERHEAD
    }
}

impl Table {
    pub(super) fn new(max_size: usize) -> Table {
        Table {
            bytes: Vec::new(),
            entries: VecDeque::new(),
            size: 0,
            max_size: max_size.min(MAX_TABLE_SIZE) as u32,
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    pub(super) fn size(&self) -> usize {
        self.size as usize
    }

    pub(super) fn max_size(&self) -> usize {
        self.max_size as usize
    }

    /// Entry `i`, 0 being the newest (HPACK index `62 + i`).
    pub(super) fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        let back = self.entries.len().checked_sub(1)?.checked_sub(i)?;
        let e = self.entries[back];
        let name = e.off as usize;
        let value = name + e.name_len as usize;
        Some((
            &self.bytes[name..value],
            &self.bytes[value..value + e.value_len as usize],
        ))
    }

    /// The newest entry equal to `(name, value)`, else the newest with that name:
    /// `(i, value matched)` as in `get`.
    pub(super) fn find(&self, name: &[u8], value: &[u8]) -> Option<(usize, bool)> {
        let mut by_name = None;
        for (i, e) in self.entries.iter().rev().enumerate() {
            if e.name_len as usize != name.len() {
                continue;
            }
            let start = e.off as usize;
            let mid = start + name.len();
            if &self.bytes[start..mid] != name {
                continue;
            }
            if &self.bytes[mid..mid + e.value_len as usize] == value {
                return Some((i, true));
            }
            by_name.get_or_insert(i);
        }
        by_name.map(|i| (i, false))
    }

    /// Adds an entry, evicting the oldest ones to make room (§4.4); an entry larger than the
    /// whole table empties it and is not added.
    pub(super) fn insert(&mut self, name: &[u8], value: &[u8]) {
        let need = name.len() + value.len();
        let max_size = self.max_size as usize;
        if need + ENTRY_OVERHEAD > max_size {
            self.evict_to(0);
            return;
        }
        self.evict_to(max_size - need - ENTRY_OVERHEAD);
        if self.bytes.len() + need > self.bytes.capacity() {
            self.compact();
            let len = self.bytes.len();
            if len + need > self.bytes.capacity() {
                // Grow geometrically, but never past what the table can hold.
                let want = (self.bytes.capacity() * 2)
                    .max(len + need)
                    .min(max_size.max(len + need));
                self.bytes.reserve_exact(want - len);
            }
        }
        let off = self.bytes.len() as u32;
        self.bytes.extend_from_slice(name);
        self.bytes.extend_from_slice(value);
        self.entries.push_back(Entry {
            off,
            name_len: name.len() as u32,
            value_len: value.len() as u32,
        });
        self.size += (need + ENTRY_OVERHEAD) as u32;
    }

    /// A new maximum size (§4.3): evicts down to it, and gives back memory it no longer needs.
    pub(super) fn set_max_size(&mut self, max_size: usize) {
        let max_size = max_size.min(MAX_TABLE_SIZE);
        self.max_size = max_size as u32;
        self.evict_to(max_size);
        if self.bytes.capacity() > max_size {
            self.compact();
            self.bytes.shrink_to(max_size);
            self.entries.shrink_to(max_size / ENTRY_OVERHEAD);
        }
    }

    fn evict_to(&mut self, limit: usize) {
        while self.size as usize > limit {
            let Some(e) = self.entries.pop_front() else {
                break;
            };
            self.size -= e.size() as u32;
        }
        if self.entries.is_empty() {
            self.bytes.clear();
        }
    }

    /// Drops the evicted bytes before the oldest entry.
    fn compact(&mut self) {
        let Some(head) = self.entries.front().map(|e| e.off) else {
            self.bytes.clear();
            return;
        };
        if head == 0 {
            return;
        }
        self.bytes.drain(..head as usize);
        for e in &mut self.entries {
            e.off -= head;
        }
    }

    /// Heap bytes held (for the memory figures in the tests).
    #[cfg(test)]
    pub(super) fn heap_bytes(&self) -> usize {
        self.bytes.capacity() + self.entries.capacity() * std::mem::size_of::<Entry>()
    }
}
