//! The properties the HTTP/2 fuzz targets check (`h2_frames`, `hpack_decode`,
//! `h2_server_conn`), shared with the stable fallback (`tests/h2_fuzz_fallback.rs` includes
//! this file with `#[path]`). Plain inputs only (no `arbitrary` here): the targets and the
//! fallback each build them their own way.
//!
//! Every check panics (with the offending input in the message) when a rule breaks.

use fibr::fuzzing::http::{
    h2_parse_frame, h2_parse_frames, h2_serve_pieces, h2_write_frame, h2_write_header_block,
    H2Config, H2Conn, H2Frame, H2FrameError, H2Summary, H2Written, HpackDecoder, HpackEncoder,
    H2_HEAD_LEN, H2_MAX_MAX_FRAME_SIZE, H2_PREFACE,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

fn show(data: &[u8]) -> String {
    const MAX: usize = 256;
    let mut s = String::new();
    for b in &data[..data.len().min(MAX)] {
        s.push_str(&format!("{b:02x}"));
    }
    if data.len() > MAX {
        s.push_str(&format!("... ({} bytes)", data.len()));
    }
    s
}

// ---------------------------------------------------------------------------------------
// Memory: a counting allocator (per thread), for binaries that install it
// ---------------------------------------------------------------------------------------

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

fn count(delta: isize) {
    let _ = LIVE.try_with(|l| l.set(l.get() + delta));
}

/// The system allocator, counting this thread's live heap bytes. A binary that installs it
/// (`#[global_allocator] static A: Counting = Counting;`) calls `counting_installed`, and
/// the server-conn check then bounds the machine's memory.
pub struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            count(l.size() as isize);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(l);
        if !p.is_null() {
            count(l.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l);
        count(-(l.size() as isize));
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = System.realloc(p, l, new);
        if !q.is_null() {
            count(new as isize - l.size() as isize);
        }
        q
    }
}

/// Says that `Counting` is this binary's allocator (on this thread).
pub fn counting_installed() {
    COUNTING.with(|c| c.set(true));
}

pub fn live_bytes() -> Option<isize> {
    COUNTING.with(|c| c.get()).then(|| LIVE.with(|l| l.get()))
}

// ---------------------------------------------------------------------------------------
// Frames
// ---------------------------------------------------------------------------------------

/// The max frame sizes every frame check runs with (the given one is added).
const FRAME_SIZES: [u32; 3] = [16_384, 100, H2_MAX_MAX_FRAME_SIZE];

fn head_of(data: &[u8]) -> Option<(u32, usize)> {
    let h: &[u8; 9] = data.first_chunk()?;
    let len = u32::from_be_bytes([0, h[0], h[1], h[2]]);
    Some((len, H2_HEAD_LEN + len as usize))
}

/// `parse` on arbitrary bytes, with `max_frame_size` and the sizes in `FRAME_SIZES`:
/// - no panic; `consumed` is the frame's length (head + payload) and within the input;
/// - incomplete only while the head or the payload is not all in, and never once the head
///   shows a length over `max_frame_size` (nothing buffers a frame refused anyway);
/// - an error the head shows (`parse` of the 9 bytes alone fails) is the same error with
///   any payload; any other error, and every frame, needs the whole frame: all shorter
///   prefixes are incomplete, and the frame's bytes alone, or with any bytes after them,
///   parse the same (prefix stability);
/// - a parsed frame written back by the frame writers parses to itself (when a writer can
///   write it: no padding, no HEADERS priority);
/// - the input read as a stream of frames (`h2_parse_frames`): each item is what `parse`
///   gives at its offset, and every prefix of the input reads as a prefix of the items.
pub fn check_frames(data: &[u8], max_frame_size: u32) {
    for mfs in std::iter::once(max_frame_size).chain(FRAME_SIZES) {
        check_one_frame(data, mfs);
        check_frame_stream(data, mfs);
    }
}

fn check_one_frame(data: &[u8], mfs: u32) {
    let ctx = || format!("max_frame_size {mfs}: {}", show(data));
    let r = h2_parse_frame(data, mfs);
    let Some((len, frame_len)) = head_of(data) else {
        assert_eq!(r, Ok(None), "incomplete head; {}", ctx());
        return;
    };
    let head_alone = h2_parse_frame(&data[..H2_HEAD_LEN], mfs);
    if len > mfs {
        assert!(
            matches!(head_alone, Err(H2FrameError::Connection { code: 6, .. })),
            "a length over max_frame_size is not refused from the head: {head_alone:?}; {}",
            ctx()
        );
    }
    if let Err(e) = &head_alone {
        if len > 0 || !matches!(e, H2FrameError::Stream { .. }) {
            // The head alone already refused it: any payload gives the same.
            assert_eq!(
                &r,
                &head_alone,
                "head error changed by the payload; {}",
                ctx()
            );
            assert!(
                matches!(e, H2FrameError::Connection { .. }),
                "a stream error before the payload: {e:?}; {}",
                ctx()
            );
            return;
        }
    }
    if data.len() < frame_len {
        assert_eq!(r, Ok(None), "incomplete frame; {}", ctx());
        return;
    }
    // The whole frame is in: the frame alone and any longer buffer say the same.
    let alone = h2_parse_frame(&data[..frame_len], mfs);
    assert_eq!(r, alone, "the frame alone parses differently; {}", ctx());
    let mut longer = data[..frame_len].to_vec();
    longer.extend_from_slice(&[0xff; 9]);
    assert_eq!(
        r,
        h2_parse_frame(&longer, mfs),
        "more bytes after it; {}",
        ctx()
    );
    // Shorter prefixes (sampled on long frames): incomplete.
    let step = (frame_len / 64).max(1);
    for k in (H2_HEAD_LEN..frame_len)
        .step_by(step)
        .chain(frame_len.saturating_sub(2).max(H2_HEAD_LEN)..frame_len)
    {
        assert_eq!(
            h2_parse_frame(&data[..k], mfs),
            Ok(None),
            "prefix of {k} bytes not incomplete; {}",
            ctx()
        );
    }
    match &r {
        Ok(Some((f, n))) => {
            assert_eq!(*n, frame_len, "consumed; {}", ctx());
            check_rewrite(f, &ctx);
        }
        Err(H2FrameError::Stream { consumed, .. }) => {
            assert_eq!(*consumed, frame_len, "a stream error's consumed; {}", ctx());
        }
        Err(H2FrameError::Connection { .. }) => {}
        Ok(None) => panic!("a whole frame is incomplete; {}", ctx()),
    }
}

/// A parsed frame written back parses to itself.
fn check_rewrite(f: &H2Frame, ctx: &dyn Fn() -> String) {
    let mut out = Vec::new();
    if !h2_write_frame(f, &mut out) {
        return;
    }
    match h2_parse_frame(&out, H2_MAX_MAX_FRAME_SIZE) {
        Ok(Some((g, n))) => {
            assert_eq!(&g, f, "rewritten {}; {}", show(&out), ctx());
            assert_eq!(n, out.len(), "{}", ctx());
        }
        other => panic!("rewritten {} parses as {other:?}; {}", show(&out), ctx()),
    }
}

fn check_frame_stream(data: &[u8], mfs: u32) {
    let ctx = || format!("max_frame_size {mfs}: {}", show(data));
    let all = h2_parse_frames(data, mfs);
    assert!(all.consumed <= data.len(), "{}", ctx());
    // Each item is what `parse` says at its offset.
    let mut pos = 0;
    for item in &all.items {
        let r = h2_parse_frame(&data[pos..], mfs);
        match (item, r) {
            (Ok(f), Ok(Some((g, n)))) => {
                assert_eq!(f, &g, "{}", ctx());
                pos += n;
            }
            (Err(e @ H2FrameError::Stream { consumed, .. }), Err(g)) => {
                assert_eq!(e, &g, "{}", ctx());
                pos += consumed;
            }
            (Err(e), Err(g)) => assert_eq!(e, &g, "{}", ctx()),
            (item, r) => panic!("item {item:?} vs parse {r:?} at {pos}; {}", ctx()),
        }
    }
    if !matches!(all.items.last(), Some(Err(H2FrameError::Connection { .. }))) {
        assert_eq!(pos, all.consumed, "{}", ctx());
        assert_eq!(
            h2_parse_frame(&data[pos..], mfs),
            Ok(None),
            "stopped before a complete frame; {}",
            ctx()
        );
    }
    // Prefix stability of the stream: a prefix reads as a prefix of the items.
    let step = (data.len() / 16).max(1);
    for k in (0..data.len()).step_by(step) {
        let some = h2_parse_frames(&data[..k], mfs);
        assert!(
            some.items.len() <= all.items.len() && some.items[..] == all.items[..some.items.len()],
            "prefix of {k} bytes reads {:?}, the whole {:?}; {}",
            some.items,
            all.items,
            ctx()
        );
    }
}

/// Whether the writers' output of `f` must parse (the checks a frame codec makes without
/// stream state, RFC 9113 §6), as an independent list.
pub fn frame_is_valid(f: &H2Frame) -> bool {
    match f {
        H2Frame::Data { stream, .. }
        | H2Frame::Headers { stream, .. }
        | H2Frame::RstStream { stream, .. }
        | H2Frame::Continuation { stream, .. } => *stream != 0,
        H2Frame::Priority { stream, priority } => *stream != 0 && priority.dependency != *stream,
        H2Frame::PushPromise {
            stream, promised, ..
        } => *stream != 0 && *promised != 0,
        H2Frame::WindowUpdate { increment, .. } => *increment != 0,
        H2Frame::Settings { .. } | H2Frame::Ping { .. } | H2Frame::GoAway { .. } => true,
        H2Frame::Unknown { .. } => true,
    }
}

/// Clears what the wire cannot carry (the reserved bit of ids and increments) and makes the
/// frame one a writer writes (`flow_len` = the data's, HEADERS whole, ACK without params).
pub fn normalize_frame(f: &mut H2Frame) {
    const M: u32 = (1 << 31) - 1;
    match f {
        H2Frame::Data {
            stream,
            data,
            flow_len,
            ..
        } => {
            *stream &= M;
            *flow_len = data.len() as u32;
        }
        H2Frame::Headers {
            stream,
            end_headers,
            priority,
            ..
        } => {
            *stream &= M;
            *end_headers = true;
            *priority = None;
        }
        H2Frame::Priority { stream, priority } => {
            *stream &= M;
            priority.dependency &= M;
        }
        H2Frame::RstStream { stream, .. } | H2Frame::Continuation { stream, .. } => *stream &= M,
        H2Frame::Settings { ack, params } => {
            if *ack {
                params.clear();
            }
        }
        H2Frame::PushPromise {
            stream, promised, ..
        } => {
            *stream &= M;
            *promised &= M;
        }
        H2Frame::GoAway { last_stream, .. } => *last_stream &= M,
        H2Frame::WindowUpdate { stream, increment } => {
            *stream &= M;
            *increment &= M;
        }
        H2Frame::Ping { .. } | H2Frame::Unknown { .. } => {}
    }
}

/// Frames written one after the other by the writers (each normalized first) read back as
/// themselves, in order (with the largest max frame size); a frame the rules refuse
/// (`frame_is_valid`) is refused, and nothing after it is read. A HEADERS goes through
/// the server's header block writer with `max_frame_size`: HEADERS then CONTINUATIONs of
/// at most that size, END_STREAM on the first, END_HEADERS on the last, joined back to the
/// block.
pub fn check_frames_round_trip(frames: &[H2Frame], max_frame_size: u32) {
    let mut out = Vec::new();
    let mut expect: Vec<H2Frame> = Vec::new();
    for f in frames {
        let mut f = f.clone();
        normalize_frame(&mut f);
        if let H2Frame::Headers {
            stream,
            end_stream,
            fragment,
            ..
        } = &f
        {
            check_header_block(*stream, fragment, *end_stream, max_frame_size);
        }
        if !h2_write_frame(&f, &mut out) {
            continue;
        }
        let valid = frame_is_valid(&f);
        expect.push(f);
        if !valid {
            break;
        }
    }
    let ctx = || format!("{frames:?}: {}", show(&out));
    let got = h2_parse_frames(&out, H2_MAX_MAX_FRAME_SIZE);
    assert_eq!(got.items.len(), expect.len(), "{}", ctx());
    for (item, f) in got.items.iter().zip(&expect) {
        if frame_is_valid(f) {
            assert_eq!(item.as_ref(), Ok(f), "{}", ctx());
        } else {
            assert!(
                item.is_err(),
                "an invalid frame {f:?} parsed as {item:?}; {}",
                ctx()
            );
            return;
        }
    }
    assert_eq!(got.consumed, out.len(), "{}", ctx());
}

/// The server's header block writer: see `check_frames_round_trip`.
pub fn check_header_block(stream: u32, block: &[u8], end_stream: bool, max_frame_size: u32) {
    let stream = (stream & ((1 << 31) - 1)).max(1);
    let mut out = vec![0xaa; 3];
    h2_write_header_block(&mut out, stream, block, end_stream, max_frame_size);
    assert_eq!(&out[..3], &[0xaa; 3]);
    let out = &out[3..];
    let max = max_frame_size.clamp(1, H2_MAX_MAX_FRAME_SIZE);
    let ctx = || format!("stream {stream} max {max} block {}", show(block));
    let got = h2_parse_frames(out, H2_MAX_MAX_FRAME_SIZE);
    assert_eq!(got.consumed, out.len(), "{}", ctx());
    let want = block.len().div_ceil(max as usize).max(1);
    assert_eq!(got.items.len(), want, "frames; {}", ctx());
    let mut joined = Vec::new();
    for (i, item) in got.items.iter().enumerate() {
        let last = i + 1 == want;
        match item {
            Ok(H2Frame::Headers {
                stream: s,
                end_stream: es,
                end_headers,
                priority: None,
                fragment,
            }) if i == 0 => {
                assert_eq!(
                    (*s, *es, *end_headers),
                    (stream, end_stream, last),
                    "{}",
                    ctx()
                );
                assert!(fragment.len() <= max as usize, "{}", ctx());
                joined.extend_from_slice(fragment);
            }
            Ok(H2Frame::Continuation {
                stream: s,
                end_headers,
                fragment,
            }) if i > 0 => {
                assert_eq!((*s, *end_headers), (stream, last), "{}", ctx());
                assert!(fragment.len() <= max as usize, "{}", ctx());
                joined.extend_from_slice(fragment);
            }
            other => panic!("frame {i} is {other:?}; {}", ctx()),
        }
    }
    assert_eq!(joined, block, "{}", ctx());
}

/// A frame built by hand with the fields no writer sets (padding, HEADERS priority, any
/// flags and stream id): parses to its content, padding stripped, `flow_len` the whole
/// payload; or is refused for the rule it breaks.
#[derive(Debug, Clone)]
pub struct RawFrame {
    /// 0 DATA, 1 HEADERS, 5 PUSH_PROMISE (others: as given, no padding).
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub pad: Option<u8>,
    /// HEADERS' priority fields (dependency word, weight), when its PRIORITY flag is set.
    pub priority: (u32, u8),
    /// PUSH_PROMISE's promised id.
    pub promised: u32,
    pub body: Vec<u8>,
}

pub fn check_raw_frame(r: &RawFrame) {
    let padded = r.pad.is_some() && matches!(r.kind, 0 | 1 | 5);
    let with_priority = r.kind == 1 && r.flags & 0x20 != 0;
    let flags = (r.flags & !0x08) | if padded { 0x08 } else { 0 };
    let mut payload = Vec::new();
    if padded {
        payload.push(r.pad.unwrap());
    }
    if with_priority {
        payload.extend_from_slice(&r.priority.0.to_be_bytes());
        payload.push(r.priority.1);
    }
    if r.kind == 5 {
        payload.extend_from_slice(&r.promised.to_be_bytes());
    }
    payload.extend_from_slice(&r.body);
    if padded {
        payload.resize(payload.len() + usize::from(r.pad.unwrap()), 0);
    }
    let mut bytes = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    bytes.push(r.kind);
    bytes.push(flags);
    bytes.extend_from_slice(&r.stream.to_be_bytes());
    bytes.extend_from_slice(&payload);
    check_frames(&bytes, 16_384);
    let ctx = || format!("{r:?}: {}", show(&bytes));
    let stream = r.stream & ((1 << 31) - 1);
    let got = h2_parse_frame(&bytes, H2_MAX_MAX_FRAME_SIZE);
    match r.kind {
        0 | 1 | 5 if stream == 0 => assert!(got.is_err(), "{}", ctx()),
        0 => assert_eq!(
            got,
            Ok(Some((
                H2Frame::Data {
                    stream,
                    end_stream: flags & 1 != 0,
                    data: r.body.clone(),
                    flow_len: payload.len() as u32,
                },
                bytes.len()
            ))),
            "{}",
            ctx()
        ),
        1 => {
            let dep = r.priority.0 & ((1 << 31) - 1);
            if with_priority && dep == stream {
                assert!(got.is_err(), "{}", ctx());
                return;
            }
            let priority = with_priority.then_some(fibr::fuzzing::http::H2Priority {
                dependency: dep,
                exclusive: r.priority.0 >> 31 == 1,
                weight: r.priority.1,
            });
            assert_eq!(
                got,
                Ok(Some((
                    H2Frame::Headers {
                        stream,
                        end_stream: flags & 1 != 0,
                        end_headers: flags & 4 != 0,
                        priority,
                        fragment: r.body.clone(),
                    },
                    bytes.len()
                ))),
                "{}",
                ctx()
            );
        }
        5 => {
            let promised = r.promised & ((1 << 31) - 1);
            if promised == 0 {
                assert!(got.is_err(), "{}", ctx());
                return;
            }
            assert_eq!(
                got,
                Ok(Some((
                    H2Frame::PushPromise {
                        stream,
                        promised,
                        end_headers: flags & 4 != 0,
                        fragment: r.body.clone(),
                    },
                    bytes.len()
                ))),
                "{}",
                ctx()
            );
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------
// HPACK
// ---------------------------------------------------------------------------------------

/// One step of a decoder's life: a header block, or a new SETTINGS_HEADER_TABLE_SIZE.
#[derive(Debug, Clone)]
pub enum HpackOp {
    Block(Vec<u8>),
    SetMaxTable(usize),
}

fn list_size(fields: &[(Vec<u8>, Vec<u8>)]) -> usize {
    fields.iter().map(|(n, v)| n.len() + v.len() + 32).sum()
}

/// §5.1 with a 5-bit prefix, as the decoder reads a size update (None: truncated or over
/// u32).
fn size_update(block: &[u8]) -> Option<(usize, usize)> {
    let first = *block.first()?;
    let mut value = u64::from(first & 0x1f);
    if value < 0x1f {
        return Some((value as usize, 1));
    }
    let mut shift = 0;
    for (i, &b) in block[1..].iter().enumerate() {
        value += u64::from(b & 0x7f) << shift;
        if value > u64::from(u32::MAX) {
            return None;
        }
        if b & 0x80 == 0 {
            return Some((value as usize, i + 2));
        }
        shift += 7;
        if shift > 28 {
            return None;
        }
    }
    None
}

/// The dynamic table as the decoder sees it, read with indexed fields (which change
/// nothing): entries newest first. `None` while the next block must start with a size
/// update (a probe would be refused for that).
pub fn probe_table(dec: &mut HpackDecoder) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut entries = Vec::new();
    for i in 62usize.. {
        let mut block = Vec::new();
        if i < 127 {
            block.push(0x80 | i as u8);
        } else {
            block.push(0xff);
            let mut rest = i - 127;
            while rest >= 0x80 {
                block.push(0x80 | (rest & 0x7f) as u8);
                rest >>= 7;
            }
            block.push(rest as u8);
        }
        match dec.decode(&block, usize::MAX) {
            Ok(mut f) if f.len() == 1 => entries.push(f.pop().unwrap()),
            Err(e) if e == "IndexOutOfRange" => return Some(entries),
            Err(e) if e == "SizeUpdateMissing" => return None,
            other => panic!("probing entry {i} gives {other:?}"),
        }
    }
    unreachable!()
}

/// Arbitrary blocks (and table size changes) through two decoders, one limited to
/// `max_list` and one not:
/// - no panic;
/// - the unlimited decoder's result decides the limited one's: the same fields when the
///   list fits `max_list`, `ListTooLarge` when it does not, the same error otherwise;
/// - `ListTooLarge` keeps the table in sync: both tables stay equal after every block, so
///   a following block decodes the same on both;
/// - the table stays within its size: its entries (read back with indexed fields) add up
///   to at most the size in force (the last size update taken, within the SETTINGS
///   value), each entry is `name + value + 32`.
pub fn check_hpack_decode(ops: &[HpackOp], max_table: usize, max_list: usize) {
    let mut limited = HpackDecoder::new(max_table);
    let mut free = HpackDecoder::new(max_table);
    let mut allowed = max_table.min(1 << 24);
    let mut in_force = allowed;
    for (i, op) in ops.iter().enumerate() {
        let ctx = || format!("op {i} of {ops:?} (max_table {max_table}, max_list {max_list})");
        let block = match op {
            HpackOp::SetMaxTable(n) => {
                limited.set_max_table_size(*n);
                free.set_max_table_size(*n);
                allowed = (*n).min(1 << 24);
                continue;
            }
            HpackOp::Block(b) => b,
        };
        let a = limited.decode(block, max_list);
        let b = free.decode(block, usize::MAX);
        match &b {
            Ok(fields) if list_size(fields) <= max_list => assert_eq!(&a, &b, "{}", ctx()),
            Ok(_) => assert_eq!(
                a.as_ref().map_err(|e| e.as_str()).err(),
                Some("ListTooLarge"),
                "{}",
                ctx()
            ),
            Err(e) => {
                assert_ne!(e, "ListTooLarge", "{}", ctx());
                assert_eq!(&a, &b, "{}", ctx());
            }
        }
        // The size updates at the block's start that the decoder took.
        let mut rest = &block[..];
        while rest.first().is_some_and(|b| b & 0xe0 == 0x20) {
            match size_update(rest) {
                Some((size, n)) if size <= allowed => {
                    in_force = size;
                    rest = &rest[n..];
                }
                _ => break,
            }
        }
        let ta = probe_table(&mut limited);
        let tb = probe_table(&mut free);
        assert_eq!(ta, tb, "the tables differ; {}", ctx());
        if let Some(t) = ta {
            let size = list_size(&t);
            assert!(
                size <= in_force,
                "table of {size} bytes over its size {in_force}; {}",
                ctx()
            );
        }
    }
}

/// How one field of a generated block is encoded.
#[derive(Debug, Clone, Copy)]
pub enum FieldHow {
    /// The encoder's policy (`encode_field`).
    Policy { sensitive: bool },
    /// A literal with a literal name (`encode_literal`: indexing 0-2, Huffman 0-2).
    Literal { indexing: u8, huffman: u8 },
}

/// One generated block: a table size change before it (told to both sides, as SETTINGS
/// and its ACK would), then its fields.
#[derive(Debug, Clone)]
pub struct HpackBlock {
    pub set_table: Option<usize>,
    pub fields: Vec<(Vec<u8>, Vec<u8>, FieldHow)>,
}

/// Encode → decode round trips: several blocks on one encoder/decoder pair, with table
/// size changes, give back every block's fields exactly (names and values as bytes, in
/// order); a third decoder limited to `max_list` gets the same fields or `ListTooLarge`
/// (when the list is larger), and its table stays the same as the unlimited one's.
pub fn check_hpack_round_trip(blocks: &[HpackBlock], max_list: usize) {
    let mut enc = HpackEncoder::new();
    let mut dec = HpackDecoder::new(4096);
    let mut limited = HpackDecoder::new(4096);
    for (i, b) in blocks.iter().enumerate() {
        if let Some(n) = b.set_table {
            enc.set_max_table_size(n);
            dec.set_max_table_size(n);
            limited.set_max_table_size(n);
        }
        let mut out = Vec::new();
        enc.begin_block(&mut out);
        for (name, value, how) in &b.fields {
            match *how {
                FieldHow::Policy { sensitive } => {
                    enc.encode_field(name, value, sensitive, &mut out)
                }
                FieldHow::Literal { indexing, huffman } => {
                    enc.encode_literal(name, value, indexing, huffman, &mut out)
                }
            }
        }
        let ctx = || format!("block {i} of {blocks:?}: {}", show(&out));
        let want: Vec<(Vec<u8>, Vec<u8>)> = b
            .fields
            .iter()
            .map(|(n, v, _)| (n.clone(), v.clone()))
            .collect();
        let got = dec.decode(&out, usize::MAX);
        assert_eq!(got.as_ref(), Ok(&want), "{}", ctx());
        let lim = limited.decode(&out, max_list);
        if list_size(&want) <= max_list {
            assert_eq!(lim.as_ref(), Ok(&want), "{}", ctx());
        } else {
            assert_eq!(
                lim.as_ref().map_err(|e| e.as_str()).err(),
                Some("ListTooLarge"),
                "{}",
                ctx()
            );
        }
        assert_eq!(
            probe_table(&mut dec),
            probe_table(&mut limited),
            "tables out of step; {}",
            ctx()
        );
    }
}

// ---------------------------------------------------------------------------------------
// The server's connection machine
// ---------------------------------------------------------------------------------------

/// A preface and an empty SETTINGS: what `check_server_conn` puts before its input.
pub fn client_opening() -> Vec<u8> {
    let mut v = H2_PREFACE.to_vec();
    v.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    v
}

/// Small limits, so that short inputs reach them; windows too large to be returned
/// within an input (so that nothing depends on where reads end), answers only at the end.
pub fn split_config() -> H2Config {
    H2Config {
        max_concurrent_streams: 4,
        initial_stream_window: 1 << 30,
        initial_connection_window: 1 << 30,
        max_frame_size: 16_384,
        max_header_list_size: 2048,
        header_table_size: 4096,
        max_resets: 8,
        max_idle_frames: 64,
        answer_each_round: false,
        read_bodies: true,
        record: true,
    }
}

/// Small windows, answers every round, bodies read (or not): the flow-control paths.
pub fn live_config(read_bodies: bool) -> H2Config {
    H2Config {
        max_concurrent_streams: 3,
        initial_stream_window: 100,
        initial_connection_window: 250,
        max_frame_size: 16_384,
        max_header_list_size: 1024,
        header_table_size: 4096,
        max_resets: 4,
        max_idle_frames: 32,
        answer_each_round: true,
        read_bodies,
        record: true,
    }
}

/// A summary with the frames grouped by stream (the service answers streams in the order
/// of a `HashMap`, which is not the same from run to run): the connection's frames in
/// order, then each stream's frames in order.
fn canonical(s: &H2Summary) -> (Vec<H2Written>, Vec<(u32, Vec<H2Written>)>) {
    let conn: Vec<H2Written> = s.frames.iter().filter(|w| w.stream == 0).copied().collect();
    let mut by: std::collections::BTreeMap<u32, Vec<H2Written>> = Default::default();
    for w in s.frames.iter().filter(|w| w.stream != 0) {
        by.entry(w.stream).or_default().push(*w);
    }
    (conn, by.into_iter().collect())
}

/// What must hold of any one run:
/// - the server's output reads back as frames, its header blocks decode;
/// - never more streams open than `max_concurrent_streams`; dispatched streams are odd
///   and increasing;
/// - after a GOAWAY with an error code nothing more is written; every code sent is one
///   RFC 9113 defines; a failed connection closes.
fn check_run(s: &H2Summary, cfg: &H2Config, ctx: &dyn Fn() -> String) {
    assert_eq!(s.bad_output, None, "{}", ctx());
    assert!(
        s.most_open <= cfg.max_concurrent_streams as usize,
        "{} streams open, max {}; {}",
        s.most_open,
        cfg.max_concurrent_streams,
        ctx()
    );
    let mut last = 0;
    for r in &s.requests {
        assert!(r.stream % 2 == 1 && r.stream > last, "{r:?}; {}", ctx());
        last = r.stream;
    }
    if let Some(at) = s
        .frames
        .iter()
        .position(|w| w.kind == 7 && w.code != Some(0))
    {
        assert_eq!(at + 1, s.frames.len(), "frames after GOAWAY; {}", ctx());
        assert!(s.failed && s.closed, "{}", ctx());
    }
    for w in &s.frames {
        if w.kind == 3 || w.kind == 7 {
            assert!(w.code.unwrap() <= 0xd, "{w:?}; {}", ctx());
        }
    }
    if s.failed {
        assert!(s.closed, "failed but not closed; {}", ctx());
    }
}

/// The server machine on `opening` (`client_opening()`, or empty to fuzz the preface too)
/// then `data`:
/// - no panic; `check_run` holds, with the split config and the live ones;
/// - the same summary (requests with their bodies, frames per stream, close) whether the
///   input comes in one read, in two at `split`, or byte by byte (the first 2048 bytes),
///   with the split config (where nothing but the reads differs);
/// - bounded memory (when the counting allocator is installed): between reads the
///   machine holds at most an incomplete frame (max frame size + 9), a header block
///   being received, its HPACK tables and its open streams, whatever the input.
pub fn check_server_conn(opening: &[u8], data: &[u8], split: usize) {
    let mut input = opening.to_vec();
    input.extend_from_slice(data);
    let input = &input[..];
    let ctx = || format!("split {split}: {}", show(input));

    let cfg = split_config();
    let whole = h2_serve_pieces(&[input], &cfg);
    check_run(&whole, &cfg, &ctx);
    let at = split % (input.len() + 1);
    let halves = h2_serve_pieces(&[&input[..at], &input[at..]], &cfg);
    assert_same(&whole, &halves, &format!("split at {at}"), input);
    let head = &input[..input.len().min(2048)];
    let one = if head.len() == input.len() {
        whole.clone()
    } else {
        h2_serve_pieces(&[head], &cfg)
    };
    let bytes: Vec<&[u8]> = head.chunks(1).collect();
    let by_byte = h2_serve_pieces(&bytes, &cfg);
    assert_same(&one, &by_byte, "byte-by-byte reads", head);

    for read in [true, false] {
        let cfg = live_config(read);
        let s = h2_serve_pieces(&[&input[..at], &input[at..]], &cfg);
        check_run(&s, &cfg, &ctx);
        let s = h2_serve_pieces(&bytes, &cfg);
        check_run(&s, &cfg, &ctx);
    }
    check_memory(input, split);
}

fn assert_same(a: &H2Summary, b: &H2Summary, how: &str, input: &[u8]) {
    let same = a.requests == b.requests
        && a.closed == b.closed
        && a.failed == b.failed
        && canonical(a) == canonical(b);
    assert!(
        same,
        "{how} changed the summary:\n{a:#?}\nvs\n{b:#?}\ninput {}",
        show(input)
    );
}

/// See `check_server_conn`. Reads of `split` bytes (at least 1), with answers every round
/// and bodies not read (so that windows stay closed).
fn check_memory(input: &[u8], split: usize) {
    let Some(base) = live_bytes() else {
        return;
    };
    for cfg in [live_config(false), split_config()] {
        let cfg = H2Config {
            record: false,
            ..cfg
        };
        let base = live_bytes().unwrap_or(base);
        let mut c = H2Conn::new(&cfg);
        let frame = cfg.max_frame_size as isize + H2_HEAD_LEN as isize;
        // kept (amortized growth: twice), a block being received (twice), the decoder's,
        // encoder's and the summary's client-side HPACK tables (with 12 bytes per entry),
        // each open stream's state, and what a machine always has.
        let bound = 2 * frame
            + 2 * cfg.max_header_list_size as isize
            + 3 * (2 * 4096 + 4096 / 32 * 12)
            + cfg.max_concurrent_streams as isize * 1024
            + 16 * 1024;
        let step = (split % 97).max(1);
        for piece in input.chunks(step) {
            c.receive(piece);
            let held = live_bytes().unwrap() - base;
            assert!(
                held <= bound,
                "the machine holds {held} bytes (bound {bound}) after reads of {step}: {}",
                show(input)
            );
        }
    }
}

/// One frame of a generated client stream.
#[derive(Debug, Clone)]
pub enum ClientFrame {
    /// A request (or trailers, on a stream with a body still open): `stream` picks the
    /// stream (`pick_stream`), `fields` come after the pseudo-headers `pseudo` asks for
    /// (bits: method, scheme, path, authority, a bad one, regular field first); the block
    /// is split into HEADERS + CONTINUATION at `split_at` if given, padded by `pad`.
    Headers {
        stream: u8,
        method: u8,
        pseudo: u8,
        fields: Vec<(Vec<u8>, Vec<u8>)>,
        content_length: Option<u64>,
        end_stream: bool,
        split_at: Option<u16>,
        pad: Option<u8>,
        priority: Option<(u32, u8)>,
    },
    Data {
        stream: u8,
        len: u16,
        end_stream: bool,
        pad: Option<u8>,
    },
    Settings(Vec<(u16, u32)>),
    SettingsAck,
    WindowUpdate {
        stream: u8,
        increment: u32,
    },
    Reset {
        stream: u8,
        code: u32,
    },
    Ping {
        ack: bool,
        data: [u8; 8],
    },
    Priority {
        stream: u8,
        dependency: u32,
        weight: u8,
    },
    Continuation {
        stream: u8,
        fragment: Vec<u8>,
        end_headers: bool,
    },
    GoAway {
        last_stream: u32,
        code: u32,
    },
    /// Any frame: type, flags, stream, payload.
    Raw {
        kind: u8,
        flags: u8,
        stream: u8,
        payload: Vec<u8>,
    },
}

/// A stream id from a selector: mostly the next new one or one already opened, sometimes
/// 0, an even id or a large one.
fn pick_stream(sel: u8, opened: &[u32], next: &mut u32) -> u32 {
    match sel % 16 {
        0..=5 => {
            let id = *next;
            *next += 2;
            id
        }
        6..=12 if !opened.is_empty() => opened[(sel as usize / 16) % opened.len()],
        6..=12 => 1,
        13 => 0,
        14 => 2 * u32::from(sel),
        _ => (1 << 31) - 1 - 2 * u32::from(sel / 16),
    }
}

fn raw(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

fn padded(pad: Option<u8>, fixed: &[u8], body: &[u8]) -> (Vec<u8>, u8) {
    let mut p = Vec::new();
    if let Some(n) = pad {
        p.push(n);
    }
    p.extend_from_slice(fixed);
    p.extend_from_slice(body);
    if let Some(n) = pad {
        p.resize(p.len() + usize::from(n), 0);
    }
    (p, if pad.is_some() { 0x08 } else { 0 })
}

/// The bytes a client with its own HPACK encoder sends for `frames` (after the opening).
pub fn client_bytes(frames: &[ClientFrame]) -> Vec<u8> {
    const METHODS: [&str; 6] = ["GET", "POST", "HEAD", "PUT", "CONNECT", "OPTIONS"];
    let mut enc = HpackEncoder::new();
    let mut out = Vec::new();
    let mut opened = Vec::new();
    let mut next = 1;
    for f in frames {
        match f {
            ClientFrame::Headers {
                stream,
                method,
                pseudo,
                fields,
                content_length,
                end_stream,
                split_at,
                pad,
                priority,
            } => {
                let id = pick_stream(*stream, &opened, &mut next);
                opened.push(id);
                let mut block = Vec::new();
                enc.begin_block(&mut block);
                let mut regular = Vec::new();
                for (n, v) in fields.iter().take(16) {
                    regular.push((n.to_ascii_lowercase(), v.clone()));
                }
                if pseudo & 0x20 != 0 {
                    if let Some((n, v)) = regular.first() {
                        enc.encode_field(n, v, false, &mut block);
                    }
                }
                let m = METHODS[*method as usize % METHODS.len()];
                if pseudo & 1 == 0 {
                    enc.encode_field(b":method", m.as_bytes(), false, &mut block);
                }
                if pseudo & 2 == 0 {
                    enc.encode_field(b":scheme", b"https", false, &mut block);
                }
                if pseudo & 4 == 0 {
                    let path = format!("/p{}", id % 1000);
                    enc.encode_field(b":path", path.as_bytes(), false, &mut block);
                }
                if pseudo & 8 != 0 {
                    enc.encode_field(b":authority", b"fuzz.example", false, &mut block);
                }
                if pseudo & 0x10 != 0 {
                    enc.encode_field(b":status", b"200", false, &mut block);
                }
                if let Some(n) = content_length {
                    let v = (n % 300).to_string();
                    enc.encode_field(b"content-length", v.as_bytes(), false, &mut block);
                }
                for (n, v) in &regular {
                    enc.encode_field(n, v, false, &mut block);
                }
                let cut = split_at.map_or(block.len(), |s| usize::from(s) % (block.len() + 1));
                let (first, rest) = block.split_at(cut);
                let prio = priority.map(|(d, w)| {
                    let mut p = d.to_be_bytes().to_vec();
                    p.push(w);
                    p
                });
                let (payload, pflag) = padded(*pad, prio.as_deref().unwrap_or(&[]), first);
                let flags = pflag
                    | if *end_stream { 1 } else { 0 }
                    | if rest.is_empty() { 4 } else { 0 }
                    | if prio.is_some() { 0x20 } else { 0 };
                raw(&mut out, 1, flags, id, &payload);
                if !rest.is_empty() {
                    let mid = rest.len() / 2;
                    raw(&mut out, 9, 0, id, &rest[..mid]);
                    raw(&mut out, 9, 4, id, &rest[mid..]);
                }
            }
            ClientFrame::Data {
                stream,
                len,
                end_stream,
                pad,
            } => {
                let id = pick_stream(*stream, &opened, &mut next);
                let body: Vec<u8> = (0..*len % 400).map(|i| b'a' + (i % 26) as u8).collect();
                let (payload, pflag) = padded(*pad, &[], &body);
                raw(&mut out, 0, pflag | u8::from(*end_stream), id, &payload);
            }
            ClientFrame::Settings(params) => {
                let mut p = Vec::new();
                for (id, v) in params.iter().take(8) {
                    p.extend_from_slice(&id.to_be_bytes());
                    p.extend_from_slice(&v.to_be_bytes());
                }
                raw(&mut out, 4, 0, 0, &p);
            }
            ClientFrame::SettingsAck => raw(&mut out, 4, 1, 0, &[]),
            ClientFrame::WindowUpdate { stream, increment } => {
                let id = if *stream % 3 == 0 {
                    0
                } else {
                    pick_stream(*stream, &opened, &mut next)
                };
                raw(&mut out, 8, 0, id, &increment.to_be_bytes());
            }
            ClientFrame::Reset { stream, code } => {
                let id = pick_stream(*stream, &opened, &mut next);
                raw(&mut out, 3, 0, id, &code.to_be_bytes());
            }
            ClientFrame::Ping { ack, data } => raw(&mut out, 6, u8::from(*ack), 0, data),
            ClientFrame::Priority {
                stream,
                dependency,
                weight,
            } => {
                let id = pick_stream(*stream, &opened, &mut next);
                let mut p = dependency.to_be_bytes().to_vec();
                p.push(*weight);
                raw(&mut out, 2, 0, id, &p);
            }
            ClientFrame::Continuation {
                stream,
                fragment,
                end_headers,
            } => {
                let id = pick_stream(*stream, &opened, &mut next);
                raw(&mut out, 9, if *end_headers { 4 } else { 0 }, id, fragment);
            }
            ClientFrame::GoAway { last_stream, code } => {
                let mut p = last_stream.to_be_bytes().to_vec();
                p.extend_from_slice(&code.to_be_bytes());
                raw(&mut out, 7, 0, 0, &p);
            }
            ClientFrame::Raw {
                kind,
                flags,
                stream,
                payload,
            } => {
                let id = pick_stream(*stream, &opened, &mut next);
                raw(&mut out, *kind, *flags, id, payload);
            }
        }
    }
    out
}

/// `check_server_conn` on what a client sends for `frames`.
pub fn check_server_frames(frames: &[ClientFrame], split: usize) {
    let bytes = client_bytes(frames);
    check_server_conn(&client_opening(), &bytes, split);
}

// ---------------------------------------------------------------------------------------
// The raw-bytes modes of the targets (also how the seeds are replayed)
// ---------------------------------------------------------------------------------------

/// `h2_frames`, bit 0 of byte 0 clear: bits 1-2 pick the max frame size (16384, 0, 100,
/// 2^24-1); the rest is the input (`check_frames`).
pub fn run_frames_raw(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mfs = [16_384, 0, 100, H2_MAX_MAX_FRAME_SIZE][usize::from(flags >> 1) % 4];
    check_frames(rest, mfs);
}

/// `hpack_decode`, bit 0 of byte 0 clear: bits 1-2 pick the table size (4096, 0, 64, 256),
/// bits 3-4 the list limit (none, 0, 40, 200); the rest is a sequence of ops, each a length
/// byte and that many bytes of block, or 0xff and a u16 (big endian): a new table size
/// (`check_hpack_decode`).
pub fn run_hpack_raw(data: &[u8]) {
    let Some((&flags, mut rest)) = data.split_first() else {
        return;
    };
    let table = [4096, 0, 64, 256][usize::from(flags >> 1) % 4];
    let list = [usize::MAX, 0, 40, 200][usize::from(flags >> 3) % 4];
    let mut ops = Vec::new();
    while let Some((&len, r)) = rest.split_first() {
        if len == 0xff {
            let n = r.get(..2).map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
            ops.push(HpackOp::SetMaxTable(usize::from(n)));
            rest = r.get(2..).unwrap_or_default();
            continue;
        }
        let n = usize::from(len).min(r.len());
        ops.push(HpackOp::Block(r[..n].to_vec()));
        rest = &r[n..];
    }
    check_hpack_decode(&ops, table, list);
}

/// `h2_server_conn`, bit 0 of byte 0 clear: bit 1 set means the input brings its own
/// preface (else `client_opening()` goes first); bytes 1-2 are the split point (u16, little
/// endian); the rest is what the client sends (`check_server_conn`).
pub fn run_server_raw(data: &[u8]) {
    if data.len() < 3 {
        return;
    }
    let split = usize::from(u16::from_le_bytes([data[1], data[2]]));
    let opening = if data[0] & 2 != 0 {
        Vec::new()
    } else {
        client_opening()
    };
    check_server_conn(&opening, &data[3..], split);
}
