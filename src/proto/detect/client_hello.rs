//! Reading a TLS ClientHello far enough to route on it (RFC 8446 §4.1.2, §5.1; ALPN is
//! RFC 7301): a pure function over the bytes seen so far.
//!
//! The hello may be split into several handshake records (and those across TCP segments),
//! so the records' payloads are joined first: borrowed when the hello fits in its first
//! record (what clients send), copied once otherwise, and only once the whole hello is there.

use super::Verdict;
use std::borrow::Cow;

const RECORD_HEADER: usize = 5;
const CONTENT_HANDSHAKE: u8 = 22;
const HANDSHAKE_CLIENT_HELLO: u8 = 1;
const HANDSHAKE_HEADER: usize = 4;
/// The largest plaintext record (RFC 8446 §5.1).
const MAX_RECORD: usize = 1 << 14;
const EXTENSION_ALPN: u16 = 16;

/// Whether `seen` starts with a TLS ClientHello: a handshake record whose first message
/// is a ClientHello (six bytes tell).
pub(super) fn starts(seen: &[u8]) -> Verdict {
    if let Err(v) = record_header(seen, 0) {
        return v;
    }
    match seen.get(RECORD_HEADER) {
        None => Verdict::NeedMore,
        Some(&HANDSHAKE_CLIENT_HELLO) => Verdict::Match,
        Some(_) => Verdict::NoMatch,
    }
}

/// Whether a complete ClientHello offers, by ALPN, a protocol `wanted` accepts: `NeedMore`
/// until the whole hello is seen, `NoMatch` for a hello without such a protocol (or
/// without ALPN) and for anything that is not a well-formed ClientHello.
pub(super) fn offers(seen: &[u8], mut wanted: impl FnMut(&[u8]) -> bool) -> Verdict {
    let hello = starts(seen);
    if hello != Verdict::Match {
        return hello;
    }
    let header = match handshake_bytes(seen, HANDSHAKE_HEADER) {
        Ok(h) => h,
        Err(v) => return v,
    };
    let len = u32::from_be_bytes([0, header[1], header[2], header[3]]) as usize;
    let message = match handshake_bytes(seen, HANDSHAKE_HEADER + len) {
        Ok(m) => m,
        Err(v) => return v,
    };
    let mut found = false;
    let well_formed = each_alpn(&message[HANDSHAKE_HEADER..], |name| {
        found = found || wanted(name);
    });
    match well_formed {
        Some(()) if found => Verdict::Match,
        _ => Verdict::NoMatch,
    }
}

/// The record header at `at`: its payload length, or what the bytes so far say
/// (`NeedMore` while what is there could still be one).
fn record_header(seen: &[u8], at: usize) -> Result<usize, Verdict> {
    let h = &seen[at.min(seen.len())..];
    let got = h.len().min(RECORD_HEADER);
    // Content type, then the legacy version's major byte (3) and minor byte (0 to 4).
    let fits = [
        h.first().is_none_or(|&t| t == CONTENT_HANDSHAKE),
        h.get(1).is_none_or(|&v| v == 3),
        h.get(2).is_none_or(|&v| v <= 4),
    ];
    if fits.contains(&false) {
        return Err(Verdict::NoMatch);
    }
    if got < RECORD_HEADER {
        return Err(Verdict::NeedMore);
    }
    let len = u16::from_be_bytes([h[3], h[4]]) as usize;
    if len == 0 || len > MAX_RECORD {
        return Err(Verdict::NoMatch);
    }
    Ok(len)
}

/// The first `want` bytes of the handshake stream carried by the records in `seen`.
fn handshake_bytes(seen: &[u8], want: usize) -> Result<Cow<'_, [u8]>, Verdict> {
    let first = record_header(seen, 0)?;
    if first >= want {
        let end = RECORD_HEADER + want;
        return match seen.get(RECORD_HEADER..end) {
            Some(bytes) => Ok(Cow::Borrowed(bytes)),
            None => Err(Verdict::NeedMore),
        };
    }
    // Count first, copy once: a hello still arriving costs a walk over record headers.
    let mut at = 0;
    let mut have = 0;
    while have < want {
        let len = record_header(seen, at)?;
        let payload = &seen[(at + RECORD_HEADER).min(seen.len())..];
        have += len.min(payload.len());
        if payload.len() < len && have < want {
            return Err(Verdict::NeedMore);
        }
        at += RECORD_HEADER + len;
    }
    let mut joined = Vec::with_capacity(want);
    let mut at = 0;
    while joined.len() < want {
        let len = u16::from_be_bytes([seen[at + 3], seen[at + 4]]) as usize;
        let start = at + RECORD_HEADER;
        let take = len.min(want - joined.len());
        joined.extend_from_slice(&seen[start..start + take]);
        at = start + len;
    }
    Ok(Cow::Owned(joined))
}

/// Calls `name` with each protocol a ClientHello body offers by ALPN; None if the body is
/// malformed.
fn each_alpn(body: &[u8], mut name: impl FnMut(&[u8])) -> Option<()> {
    let mut r = Reader(body);
    r.take(2 + 32)?; // legacy_version, random
    let session_id = r.u8()? as usize;
    if session_id > 32 {
        return None;
    }
    r.take(session_id)?;
    let suites = r.u16()? as usize;
    if suites == 0 || suites % 2 != 0 {
        return None;
    }
    r.take(suites)?;
    let compression = r.u8()? as usize;
    r.take(compression)?;
    if r.0.is_empty() {
        // No extensions at all (allowed before TLS 1.3).
        return Some(());
    }
    let ext_len = r.u16()? as usize;
    let mut exts = Reader(r.take(ext_len)?);
    if !r.0.is_empty() {
        return None;
    }
    while !exts.0.is_empty() {
        let kind = exts.u16()?;
        let len = exts.u16()? as usize;
        let data = exts.take(len)?;
        if kind != EXTENSION_ALPN {
            continue;
        }
        let mut list = Reader(data);
        let list_len = list.u16()? as usize;
        let mut list = Reader(list.take(list_len)?);
        if list_len == 0 {
            return None;
        }
        while !list.0.is_empty() {
            let n = list.u8()? as usize;
            if n == 0 {
                return None;
            }
            name(list.take(n)?);
        }
    }
    Some(())
}

/// A cursor over a byte string, each read checked against its end.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
}
