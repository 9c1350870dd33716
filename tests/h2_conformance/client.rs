//! A raw HTTP/2 client for the conformance suite: frames written byte by byte (valid or
//! not), a frame reader that joins and decodes response header blocks, a minimal HPACK
//! encoder (literals without indexing, no Huffman: enough to send any field list, invalid
//! ones included), and h2spec-like expectations, each bounded by [`EXPECT`].


#![allow(dead_code)] // a toolkit: not every helper or constant is used by a case
use fibr::http::fuzzing::HpackDecoder;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long one expectation waits (h2spec's default timeout is 2 s too).
pub const EXPECT: Duration = Duration::from_secs(2);

pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// Frame types (§6).
pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PRIORITY: u8 = 0x2;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

// Flags.
pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY_FLAG: u8 = 0x20;

// Error codes (§7).
pub const NO_ERROR: u32 = 0x0;
pub const PROTOCOL_ERROR: u32 = 0x1;
pub const INTERNAL_ERROR: u32 = 0x2;
pub const FLOW_CONTROL_ERROR: u32 = 0x3;
pub const SETTINGS_TIMEOUT: u32 = 0x4;
pub const STREAM_CLOSED: u32 = 0x5;
pub const FRAME_SIZE_ERROR: u32 = 0x6;
pub const REFUSED_STREAM: u32 = 0x7;
pub const CANCEL: u32 = 0x8;
pub const COMPRESSION_ERROR: u32 = 0x9;
pub const ENHANCE_YOUR_CALM: u32 = 0xb;

// SETTINGS parameters (§6.5.2).
pub const HEADER_TABLE_SIZE: u16 = 0x1;
pub const ENABLE_PUSH: u16 = 0x2;
pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const MAX_FRAME_SIZE: u16 = 0x5;
pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;

pub fn code_name(code: u32) -> String {
    const NAMES: [&str; 14] = [
        "NO_ERROR",
        "PROTOCOL_ERROR",
        "INTERNAL_ERROR",
        "FLOW_CONTROL_ERROR",
        "SETTINGS_TIMEOUT",
        "STREAM_CLOSED",
        "FRAME_SIZE_ERROR",
        "REFUSED_STREAM",
        "CANCEL",
        "COMPRESSION_ERROR",
        "CONNECT_ERROR",
        "ENHANCE_YOUR_CALM",
        "INADEQUATE_SECURITY",
        "HTTP_1_1_REQUIRED",
    ];
    match NAMES.get(code as usize) {
        Some(n) => (*n).to_string(),
        None => format!("0x{code:x}"),
    }
}

fn codes_name(codes: &[u32]) -> String {
    codes.iter().map(|&c| code_name(c)).collect::<Vec<_>>().join(" or ")
}

// ---------------------------------------------------------------------------------------
// Writing frames
// ---------------------------------------------------------------------------------------

/// A frame with an arbitrary length field and the whole 32-bit stream word (reserved bit
/// included): for frames that lie about themselves.
pub fn raw_frame(len: u32, kind: u8, flags: u8, stream_word: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(9 + payload.len());
    f.extend_from_slice(&len.to_be_bytes()[1..]);
    f.push(kind);
    f.push(flags);
    f.extend_from_slice(&stream_word.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A frame whose length field is its payload's length.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    raw_frame(payload.len() as u32, kind, flags, stream, payload)
}

pub fn data(stream: u32, body: &[u8], end_stream: bool) -> Vec<u8> {
    frame(DATA, if end_stream { END_STREAM } else { 0 }, stream, body)
}

/// A padded DATA frame: pad length byte, body, `pad` zero bytes.
pub fn data_padded(stream: u32, body: &[u8], pad: u8, end_stream: bool) -> Vec<u8> {
    let mut p = vec![pad];
    p.extend_from_slice(body);
    p.extend(std::iter::repeat_n(0, pad as usize));
    let flags = PADDED | if end_stream { END_STREAM } else { 0 };
    frame(DATA, flags, stream, &p)
}

pub fn headers(stream: u32, block: &[u8], end_stream: bool, end_headers: bool) -> Vec<u8> {
    let flags = if end_stream { END_STREAM } else { 0 } | if end_headers { END_HEADERS } else { 0 };
    frame(HEADERS, flags, stream, block)
}

pub fn continuation(stream: u32, block: &[u8], end_headers: bool) -> Vec<u8> {
    frame(CONTINUATION, if end_headers { END_HEADERS } else { 0 }, stream, block)
}

pub fn priority_payload(dependency: u32, exclusive: bool, weight: u8) -> Vec<u8> {
    let word = dependency | if exclusive { 0x8000_0000 } else { 0 };
    let mut p = word.to_be_bytes().to_vec();
    p.push(weight);
    p
}

pub fn priority(stream: u32, dependency: u32, exclusive: bool, weight: u8) -> Vec<u8> {
    frame(PRIORITY, 0, stream, &priority_payload(dependency, exclusive, weight))
}

pub fn rst_stream(stream: u32, code: u32) -> Vec<u8> {
    frame(RST_STREAM, 0, stream, &code.to_be_bytes())
}

pub fn settings(params: &[(u16, u32)]) -> Vec<u8> {
    let mut p = Vec::new();
    for &(id, v) in params {
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&v.to_be_bytes());
    }
    frame(SETTINGS, 0, 0, &p)
}

pub fn settings_ack() -> Vec<u8> {
    frame(SETTINGS, ACK, 0, &[])
}

pub fn ping(ack: bool, payload: [u8; 8]) -> Vec<u8> {
    frame(PING, if ack { ACK } else { 0 }, 0, &payload)
}

pub fn goaway(last_stream: u32, code: u32, debug: &[u8]) -> Vec<u8> {
    let mut p = last_stream.to_be_bytes().to_vec();
    p.extend_from_slice(&code.to_be_bytes());
    p.extend_from_slice(debug);
    frame(GOAWAY, 0, 0, &p)
}

pub fn window_update(stream: u32, increment: u32) -> Vec<u8> {
    frame(WINDOW_UPDATE, 0, stream, &increment.to_be_bytes())
}

// ---------------------------------------------------------------------------------------
// A minimal HPACK encoder (RFC 7541)
// ---------------------------------------------------------------------------------------

/// An integer with an `n`-bit prefix (§5.1); `flags` are the bits above the prefix.
pub fn hpack_int(flags: u8, n: u32, value: u64) -> Vec<u8> {
    let max = (1u64 << n) - 1;
    if value < max {
        return vec![flags | value as u8];
    }
    let mut out = vec![flags | max as u8];
    let mut v = value - max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
    out
}

/// A string literal without Huffman (§5.2).
pub fn hpack_str(s: &[u8]) -> Vec<u8> {
    let mut out = hpack_int(0, 7, s.len() as u64);
    out.extend_from_slice(s);
    out
}

/// A literal field without indexing, new name (§6.2.2).
pub fn lit(name: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = vec![0x00];
    out.extend(hpack_str(name));
    out.extend(hpack_str(value));
    out
}

/// A literal field with incremental indexing, new name (§6.2.1).
pub fn lit_indexed(name: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = vec![0x40];
    out.extend(hpack_str(name));
    out.extend(hpack_str(value));
    out
}

/// A literal field never indexed, new name (§6.2.3).
pub fn lit_never(name: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = vec![0x10];
    out.extend(hpack_str(name));
    out.extend(hpack_str(value));
    out
}

/// An indexed field (§6.1).
pub fn indexed(index: u64) -> Vec<u8> {
    hpack_int(0x80, 7, index)
}

/// A dynamic table size update (§6.3).
pub fn size_update(size: u64) -> Vec<u8> {
    hpack_int(0x20, 5, size)
}

/// Huffman codes (RFC 7541 Appendix B) of the lowercase letters, as (code, bits).
const HUFFMAN_LOWER: [(u32, u32); 26] = [
    (0x3, 5),   // a 00011
    (0x23, 6),  // b 100011
    (0x4, 5),   // c 00100
    (0x24, 6),  // d 100100
    (0x5, 5),   // e 00101
    (0x25, 6),  // f 100101
    (0x26, 6),  // g 100110
    (0x27, 6),  // h 100111
    (0x6, 5),   // i 00110
    (0x74, 7),  // j 1110100
    (0x75, 7),  // k 1110101
    (0x28, 6),  // l 101000
    (0x29, 6),  // m 101001
    (0x2a, 6),  // n 101010
    (0x7, 5),   // o 00111
    (0x2b, 6),  // p 101011
    (0x76, 7),  // q 1110110
    (0x2c, 6),  // r 101100
    (0x8, 5),   // s 01000
    (0x9, 5),   // t 01001
    (0x2d, 6),  // u 101101
    (0x77, 7),  // v 1110111
    (0x78, 7),  // w 1111000
    (0x79, 7),  // x 1111001
    (0x7a, 7),  // y 1111010
    (0x7b, 7),  // z 1111011
];

/// The Huffman coding of a lowercase ASCII string, padded with 1-bits (§5.2).
pub fn huffman_lower(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u64, 0u32);
    for b in s.bytes() {
        let (code, len) = HUFFMAN_LOWER[(b - b'a') as usize];
        acc = (acc << len) | u64::from(code);
        bits += len;
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    if bits > 0 {
        out.push(((acc << (8 - bits)) as u8) | (0xff >> bits));
    }
    out
}

/// A Huffman string literal from already coded bytes (§5.2, H = 1).
pub fn hpack_huffman_str(coded: &[u8]) -> Vec<u8> {
    let mut out = hpack_int(0x80, 7, coded.len() as u64);
    out.extend_from_slice(coded);
    out
}

/// A header list as owned pairs, easy to edit.
pub type Fields = Vec<(String, String)>;

/// A request's pseudo-headers (h2spec's common headers).
pub fn req(method: &str, path: &str) -> Fields {
    vec![
        (":method".into(), method.into()),
        (":scheme".into(), "http".into()),
        (":path".into(), path.into()),
        (":authority".into(), "127.0.0.1".into()),
    ]
}

pub fn get() -> Fields {
    req("GET", "/")
}

pub fn post(len: Option<usize>) -> Fields {
    let mut f = req("POST", "/");
    if let Some(n) = len {
        f.push(("content-length".into(), n.to_string()));
    }
    f
}

/// The header block of `fields`, each a literal without indexing.
pub fn block(fields: &Fields) -> Vec<u8> {
    let mut out = Vec::new();
    for (n, v) in fields {
        out.extend(lit(n.as_bytes(), v.as_bytes()));
    }
    out
}

// ---------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// The error code of a RST_STREAM or GOAWAY.
    pub fn code(&self) -> u32 {
        let at = if self.kind == GOAWAY { 4 } else { 0 };
        be32(self.payload.get(at..at + 4).unwrap_or(&[0xff; 4]))
    }

    pub fn describe(&self) -> String {
        let p = &self.payload;
        match self.kind {
            DATA => format!(
                "DATA(stream {}, {} bytes{})",
                self.stream,
                p.len(),
                if self.has(END_STREAM) { ", END_STREAM" } else { "" }
            ),
            RST_STREAM => format!("RST_STREAM(stream {}, {})", self.stream, code_name(self.code())),
            SETTINGS if self.has(ACK) => "SETTINGS(ACK)".into(),
            SETTINGS => format!("SETTINGS({} params)", p.len() / 6),
            PING => format!("PING({}{:?})", if self.has(ACK) { "ACK, " } else { "" }, p),
            GOAWAY => format!(
                "GOAWAY({}, last {}, {:?})",
                code_name(self.code()),
                be32(p.get(..4).unwrap_or(&[0; 4])),
                String::from_utf8_lossy(p.get(8..).unwrap_or_default())
            ),
            WINDOW_UPDATE => format!(
                "WINDOW_UPDATE(stream {}, {})",
                self.stream,
                be32(p.get(..4).unwrap_or(&[0; 4]))
            ),
            k => format!("frame type {k} (stream {}, {} bytes)", self.stream, p.len()),
        }
    }
}

pub fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// What the server did next.
#[derive(Debug)]
pub enum Ev {
    /// Any frame but HEADERS/CONTINUATION.
    Frame(Frame),
    /// A complete, decoded header block.
    Headers {
        stream: u32,
        end_stream: bool,
        fields: Fields,
    },
    /// EOF or a reset: how.
    Closed(String),
    Timeout,
    /// The server sent something this client cannot parse.
    Bad(String),
}

/// A response read by [`Conn::expect_response`].
#[derive(Debug)]
pub struct Resp {
    pub status: String,
    pub fields: Fields,
    pub body: Vec<u8>,
    pub trailers: Option<Fields>,
}

pub struct Conn {
    sock: TcpStream,
    buf: Vec<u8>,
    decoder: HpackDecoder,
    /// A header block whose CONTINUATION frames are still to come.
    partial: Option<(u32, bool, Vec<u8>)>,
    closed: Option<String>,
    /// What arrived, for error messages.
    seen: Vec<String>,
    /// The server's SETTINGS.
    pub server_settings: Vec<(u16, u32)>,
}

pub type R<T = ()> = Result<T, String>;

thread_local! {
    /// The traces of the connections a case used (taken by the runner, for `-v` output).
    pub static TRACES: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Drop for Conn {
    fn drop(&mut self) {
        let t = self.trace();
        TRACES.with(|v| v.borrow_mut().push(t));
    }
}

impl Conn {
    /// A TCP connection, nothing sent.
    pub fn connect(addr: SocketAddr) -> R<Conn> {
        let sock = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
        sock.set_nodelay(true).ok();
        Ok(Conn {
            sock,
            buf: Vec::new(),
            decoder: HpackDecoder::new(),
            partial: None,
            closed: None,
            seen: Vec::new(),
            server_settings: Vec::new(),
        })
    }

    /// Preface + empty SETTINGS, the server's SETTINGS ACKed, ours ACKed (h2spec's
    /// handshake).
    pub fn handshake(addr: SocketAddr) -> R<Conn> {
        Conn::handshake_with(addr, &[])
    }

    pub fn handshake_with(addr: SocketAddr, params: &[(u16, u32)]) -> R<Conn> {
        let mut c = Conn::connect(addr)?;
        let mut first = PREFACE.to_vec();
        first.extend(settings(params));
        c.send(&first);
        let deadline = Instant::now() + EXPECT;
        let (mut got_settings, mut got_ack) = (false, false);
        while !(got_settings && got_ack) {
            match c.next(deadline) {
                Ev::Frame(f) if f.kind == SETTINGS && f.has(ACK) => got_ack = true,
                Ev::Frame(f) if f.kind == SETTINGS => {
                    for p in f.payload.chunks_exact(6) {
                        c.server_settings
                            .push((u16::from_be_bytes([p[0], p[1]]), be32(&p[2..])));
                    }
                    c.send(&settings_ack());
                    got_settings = true;
                }
                Ev::Frame(_) => {}
                other => return Err(format!("handshake: {}", c.failure(other))),
            }
        }
        c.seen.clear();
        Ok(c)
    }

    /// The server's value for a SETTINGS parameter.
    pub fn server_setting(&self, id: u16) -> Option<u32> {
        self.server_settings.iter().rev().find(|p| p.0 == id).map(|p| p.1)
    }

    /// Writes bytes; a failed write (the server closed) is remembered, not fatal.
    pub fn send(&mut self, bytes: &[u8]) {
        if let Err(e) = self.sock.write_all(bytes) {
            self.seen.push(format!("(write failed: {e})"));
        }
    }

    /// HEADERS (END_HEADERS) with `fields` on `stream`.
    pub fn send_headers(&mut self, stream: u32, fields: &Fields, end_stream: bool) {
        self.send(&headers(stream, &block(fields), end_stream, true));
    }

    /// A GET on `stream`, ended with its headers.
    pub fn send_get(&mut self, stream: u32) {
        self.send_headers(stream, &get(), true);
    }

    fn fill(&mut self, deadline: Instant) -> Result<(), Ev> {
        if let Some(how) = &self.closed {
            return Err(Ev::Closed(how.clone()));
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(Ev::Timeout);
        }
        self.sock
            .set_read_timeout(Some((deadline - now).max(Duration::from_millis(1))))
            .ok();
        let mut tmp = [0u8; 16 * 1024];
        match self.sock.read(&mut tmp) {
            Ok(0) => {
                self.closed = Some("EOF".into());
                Err(Ev::Closed("EOF".into()))
            }
            Ok(n) => {
                self.buf.extend_from_slice(&tmp[..n]);
                Ok(())
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                Err(Ev::Timeout)
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => Ok(()),
            Err(e) => {
                let how = format!("{e}");
                self.closed = Some(how.clone());
                Err(Ev::Closed(how))
            }
        }
    }

    /// The next raw frame.
    pub fn read_frame(&mut self, deadline: Instant) -> Result<Frame, Ev> {
        loop {
            if self.buf.len() >= 9 {
                let len = be32(&[0, self.buf[0], self.buf[1], self.buf[2]]) as usize;
                if len > (1 << 24) {
                    return Err(Ev::Bad("frame length over 2^24".into()));
                }
                if self.buf.len() >= 9 + len {
                    let f = Frame {
                        kind: self.buf[3],
                        flags: self.buf[4],
                        stream: be32(&self.buf[5..9]) & 0x7fff_ffff,
                        payload: self.buf[9..9 + len].to_vec(),
                    };
                    self.buf.drain(..9 + len);
                    return Ok(f);
                }
            }
            if let Err(ev) = self.fill(deadline) {
                if matches!(ev, Ev::Closed(_)) && !self.buf.is_empty() {
                    let n = self.buf.len();
                    self.buf.clear();
                    return Err(Ev::Bad(format!("{n} bytes of a partial frame, then closed")));
                }
                return Err(ev);
            }
        }
    }

    /// The next event: header blocks joined and decoded.
    pub fn next(&mut self, deadline: Instant) -> Ev {
        loop {
            let f = match self.read_frame(deadline) {
                Ok(f) => f,
                Err(ev) => {
                    match &ev {
                        Ev::Closed(how) => self.seen.push(format!("closed ({how})")),
                        Ev::Bad(why) => self.seen.push(format!("unparsable: {why}")),
                        _ => {}
                    }
                    return ev;
                }
            };
            match f.kind {
                HEADERS => {
                    let mut p = &f.payload[..];
                    let mut pad = 0;
                    if f.has(PADDED) {
                        let Some((&n, rest)) = p.split_first() else {
                            return Ev::Bad("padded HEADERS without pad length".into());
                        };
                        pad = n as usize;
                        p = rest;
                    }
                    if f.has(PRIORITY_FLAG) {
                        p = p.get(5..).unwrap_or_default();
                    }
                    let Some(frag) = p.get(..p.len().saturating_sub(pad)) else {
                        return Ev::Bad("bad HEADERS padding".into());
                    };
                    let frag = frag.to_vec();
                    if f.has(END_HEADERS) {
                        return self.decoded(f.stream, f.has(END_STREAM), &frag);
                    }
                    self.partial = Some((f.stream, f.has(END_STREAM), frag));
                }
                CONTINUATION => {
                    let Some((stream, end_stream, mut frag)) = self.partial.take() else {
                        return Ev::Bad("CONTINUATION without HEADERS".into());
                    };
                    frag.extend_from_slice(&f.payload);
                    if f.has(END_HEADERS) {
                        return self.decoded(stream, end_stream, &frag);
                    }
                    self.partial = Some((stream, end_stream, frag));
                }
                _ => {
                    self.seen.push(f.describe());
                    return Ev::Frame(f);
                }
            }
        }
    }

    fn decoded(&mut self, stream: u32, end_stream: bool, block: &[u8]) -> Ev {
        match self.decoder.decode(block) {
            Ok(fields) => {
                let fields: Fields = fields
                    .into_iter()
                    .map(|(n, v)| {
                        (
                            String::from_utf8_lossy(&n).into_owned(),
                            String::from_utf8_lossy(&v).into_owned(),
                        )
                    })
                    .collect();
                let status = fields
                    .iter()
                    .find(|f| f.0 == ":status")
                    .map_or("-", |f| f.1.as_str());
                self.seen.push(format!(
                    "HEADERS(stream {stream}, :status {status}{})",
                    if end_stream { ", END_STREAM" } else { "" }
                ));
                Ev::Headers {
                    stream,
                    end_stream,
                    fields,
                }
            }
            Err(e) => Ev::Bad(format!("undecodable response header block: {e}")),
        }
    }

    /// What arrived so far, for a failure message.
    pub fn trace(&self) -> String {
        if self.seen.is_empty() {
            "nothing".into()
        } else {
            self.seen.join(", ")
        }
    }

    fn failure(&self, ev: Ev) -> String {
        let how = match ev {
            Ev::Timeout => format!("timeout after {EXPECT:?}"),
            Ev::Closed(how) => format!("connection closed ({how})"),
            Ev::Bad(why) => why,
            Ev::Frame(f) => f.describe(),
            Ev::Headers { stream, .. } => format!("HEADERS on stream {stream}"),
        };
        format!("{how}; got: {}", self.trace())
    }

    // -----------------------------------------------------------------------------------
    // Expectations (h2spec's Verify*)
    // -----------------------------------------------------------------------------------

    /// A connection error: GOAWAY with one of `codes`, or the connection closed.
    pub fn expect_connection_error(&mut self, codes: &[u32]) -> R {
        let deadline = Instant::now() + EXPECT;
        loop {
            match self.next(deadline) {
                Ev::Frame(f) if f.kind == GOAWAY => {
                    if codes.contains(&f.code()) {
                        return Ok(());
                    }
                    return Err(format!(
                        "expected GOAWAY({}), got: {}",
                        codes_name(codes),
                        self.trace()
                    ));
                }
                Ev::Closed(_) => return Ok(()),
                Ev::Timeout => {
                    return Err(format!(
                        "expected GOAWAY({}), got (within {EXPECT:?}): {}",
                        codes_name(codes),
                        self.trace()
                    ))
                }
                Ev::Bad(why) => return Err(why),
                _ => {}
            }
        }
    }

    /// A GOAWAY frame with one of `codes` (not just a close); returns it.
    pub fn expect_goaway(&mut self, codes: &[u32]) -> R<Frame> {
        let deadline = Instant::now() + EXPECT;
        loop {
            match self.next(deadline) {
                Ev::Frame(f) if f.kind == GOAWAY && codes.contains(&f.code()) => return Ok(f),
                Ev::Frame(f) if f.kind == GOAWAY => break,
                Ev::Frame(_) | Ev::Headers { .. } => {}
                _ => break,
            }
        }
        Err(format!(
            "expected GOAWAY({}), got: {}",
            codes_name(codes),
            self.trace()
        ))
    }

    /// A stream error as h2spec accepts it: RST_STREAM on `stream` with one of `codes`,
    /// or a connection error with one of them (GOAWAY, or the connection closed).
    pub fn expect_stream_error(&mut self, stream: u32, codes: &[u32]) -> R {
        let deadline = Instant::now() + EXPECT;
        loop {
            match self.next(deadline) {
                Ev::Frame(f) if f.kind == RST_STREAM && f.stream == stream => {
                    if codes.contains(&f.code()) {
                        return Ok(());
                    }
                    break;
                }
                Ev::Frame(f) if f.kind == GOAWAY => {
                    if codes.contains(&f.code()) {
                        return Ok(());
                    }
                    break;
                }
                Ev::Closed(_) => return Ok(()),
                Ev::Timeout | Ev::Bad(_) => break,
                _ => {}
            }
        }
        Err(format!(
            "expected RST_STREAM or GOAWAY ({}) for stream {stream}, got: {}",
            codes_name(codes),
            self.trace()
        ))
    }

    /// RST_STREAM on `stream` with one of `codes`, the connection staying up.
    pub fn expect_rst_stream(&mut self, stream: u32, codes: &[u32]) -> R {
        let deadline = Instant::now() + EXPECT;
        loop {
            match self.next(deadline) {
                Ev::Frame(f) if f.kind == RST_STREAM && f.stream == stream => {
                    if codes.contains(&f.code()) {
                        return Ok(());
                    }
                    break;
                }
                Ev::Frame(f) if f.kind == GOAWAY => break,
                Ev::Frame(_) | Ev::Headers { .. } => {}
                _ => break,
            }
        }
        Err(format!(
            "expected RST_STREAM(stream {stream}, {}), got: {}",
            codes_name(codes),
            self.trace()
        ))
    }

    /// Everything the server sends until it closes (for peers that are not speaking
    /// HTTP/2 yet: an invalid preface may get an HTTP/1 answer or none).
    pub fn read_until_close(&mut self) -> R<Vec<u8>> {
        let deadline = Instant::now() + EXPECT;
        loop {
            match self.fill(deadline) {
                Ok(()) => {}
                Err(Ev::Closed(how)) => {
                    let bytes = std::mem::take(&mut self.buf);
                    let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(60)]).into_owned();
                    self.seen.push(format!("{} bytes {shown:?}..., closed ({how})", bytes.len()));
                    return Ok(bytes);
                }
                Err(_) => {
                    return Err(format!(
                        "expected the connection to close, got {} bytes and no close",
                        self.buf.len()
                    ))
                }
            }
        }
    }

    /// The connection closes (frames before it are ignored).
    pub fn expect_close(&mut self) -> R {
        let deadline = Instant::now() + EXPECT;
        loop {
            match self.next(deadline) {
                Ev::Closed(_) => return Ok(()),
                Ev::Timeout => {
                    return Err(format!("expected the connection to close, got: {}", self.trace()))
                }
                _ => {}
            }
        }
    }

    /// A PING ACK with `payload`; any other PING ACK, GOAWAY or a close fails.
    pub fn expect_ping_ack(&mut self, payload: [u8; 8]) -> R {
        let deadline = Instant::now() + EXPECT;
        loop {
            match self.next(deadline) {
                Ev::Frame(f) if f.kind == PING && f.has(ACK) => {
                    if f.payload == payload {
                        return Ok(());
                    }
                    break;
                }
                Ev::Frame(f) if f.kind == GOAWAY => break,
                Ev::Frame(_) | Ev::Headers { .. } => {}
                _ => break,
            }
        }
        Err(format!(
            "expected PING(ACK, {payload:?}), got: {}",
            self.trace()
        ))
    }

    /// The connection still works: a PING is answered.
    pub fn expect_alive(&mut self) -> R {
        let payload = *b"h2alive!";
        self.send(&ping(false, payload));
        self.expect_ping_ack(payload)
    }

    pub fn expect_settings_ack(&mut self) -> R {
        let deadline = Instant::now() + EXPECT;
        loop {
            match self.next(deadline) {
                Ev::Frame(f) if f.kind == SETTINGS && f.has(ACK) => return Ok(()),
                Ev::Frame(f) if f.kind == GOAWAY => break,
                Ev::Frame(_) | Ev::Headers { .. } => {}
                _ => break,
            }
        }
        Err(format!("expected SETTINGS(ACK), got: {}", self.trace()))
    }

    /// The response head on `stream`: its fields and whether it ended the stream.
    pub fn expect_headers(&mut self, stream: u32) -> R<(Fields, bool)> {
        let deadline = Instant::now() + EXPECT;
        loop {
            match self.next(deadline) {
                Ev::Headers {
                    stream: s,
                    end_stream,
                    fields,
                } if s == stream => return Ok((fields, end_stream)),
                Ev::Frame(f) if f.kind == GOAWAY || (f.kind == RST_STREAM && f.stream == stream) => {
                    break
                }
                Ev::Frame(_) | Ev::Headers { .. } => {}
                _ => break,
            }
        }
        Err(format!(
            "expected a response HEADERS on stream {stream}, got: {}",
            self.trace()
        ))
    }

    /// The next DATA frame on `stream`.
    pub fn expect_data(&mut self, stream: u32) -> R<Frame> {
        let deadline = Instant::now() + EXPECT;
        loop {
            match self.next(deadline) {
                Ev::Frame(f) if f.kind == DATA && f.stream == stream => return Ok(f),
                Ev::Frame(f) if f.kind == GOAWAY || (f.kind == RST_STREAM && f.stream == stream) => {
                    break
                }
                Ev::Frame(_) | Ev::Headers { .. } => {}
                _ => break,
            }
        }
        Err(format!("expected DATA on stream {stream}, got: {}", self.trace()))
    }

    /// A whole response on `stream` (head, DATA, trailers) up to END_STREAM.
    pub fn expect_response(&mut self, stream: u32) -> R<Resp> {
        let (fields, mut ended) = self.expect_headers(stream)?;
        let status = fields
            .iter()
            .find(|f| f.0 == ":status")
            .map(|f| f.1.clone())
            .ok_or_else(|| format!("a response without :status: {fields:?}"))?;
        let mut resp = Resp {
            status,
            fields,
            body: Vec::new(),
            trailers: None,
        };
        let deadline = Instant::now() + EXPECT;
        while !ended {
            match self.next(deadline) {
                Ev::Frame(f) if f.kind == DATA && f.stream == stream => {
                    ended = f.has(END_STREAM);
                    let mut p = &f.payload[..];
                    if f.has(PADDED) {
                        let pad = p[0] as usize;
                        p = &p[1..p.len() - pad];
                    }
                    resp.body.extend_from_slice(p);
                }
                Ev::Headers {
                    stream: s,
                    end_stream,
                    fields,
                } if s == stream => {
                    ended = end_stream;
                    resp.trailers = Some(fields);
                }
                Ev::Frame(f) if f.kind == GOAWAY || (f.kind == RST_STREAM && f.stream == stream) => {
                    return Err(format!(
                        "the response on stream {stream} did not end: {}",
                        self.trace()
                    ))
                }
                Ev::Frame(_) | Ev::Headers { .. } => {}
                other => {
                    return Err(format!(
                        "the response on stream {stream} did not end: {}",
                        self.failure(other)
                    ))
                }
            }
        }
        Ok(resp)
    }

    /// A whole response with `status` (and `body`, if given).
    pub fn expect_status(&mut self, stream: u32, status: &str, body: Option<&[u8]>) -> R<Resp> {
        let r = self.expect_response(stream)?;
        if r.status != status {
            return Err(format!("expected :status {status}, got {}: {}", r.status, self.trace()));
        }
        if let Some(b) = body {
            if r.body != b {
                return Err(format!(
                    "expected body {:?}, got {:?}",
                    String::from_utf8_lossy(b),
                    String::from_utf8_lossy(&r.body)
                ));
            }
        }
        Ok(r)
    }
}
