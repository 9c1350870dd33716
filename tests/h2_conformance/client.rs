//! A raw HTTP/2 client for the conformance suite: a frame reader that joins and decodes
//! response header blocks (fibr's own HPACK decoder through `fuzzing::HpackDecoder`), and
//! h2spec-like expectations, each bounded by [`EXPECT`]. The frames it writes come from
//! [`super::wire`], re-exported here.

#![allow(dead_code)] // a toolkit: not every helper is used by a case

pub use super::wire::*;
use fibr::fuzzing::http::HpackDecoder;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long one expectation waits (h2spec's default timeout is 2 s too).
pub const EXPECT: Duration = Duration::from_secs(2);

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
                if self.has(END_STREAM) {
                    ", END_STREAM"
                } else {
                    ""
                }
            ),
            RST_STREAM => format!(
                "RST_STREAM(stream {}, {})",
                self.stream,
                code_name(self.code())
            ),
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
    /// A complete, decoded header block (`block`: as it came).
    Headers {
        stream: u32,
        end_stream: bool,
        fields: Fields,
        block: Vec<u8>,
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
    /// The payload length of each DATA frame.
    pub frames: Vec<usize>,
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
    /// The encoded header block [`Conn::expect_headers`] returned last.
    pub last_block: Vec<u8>,
    /// The connection window the server gave us: 65535 plus the WINDOW_UPDATEs on stream
    /// 0 seen during the handshake.
    pub conn_window: i64,
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
            decoder: HpackDecoder::new(4096),
            partial: None,
            closed: None,
            seen: Vec::new(),
            server_settings: Vec::new(),
            last_block: Vec::new(),
            conn_window: 65535,
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
                Ev::Frame(f) if f.kind == WINDOW_UPDATE && f.stream == 0 => {
                    c.conn_window += i64::from(be32(&f.payload) & 0x7fff_ffff);
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
        self.server_settings
            .iter()
            .rev()
            .find(|p| p.0 == id)
            .map(|p| p.1)
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
                    return Err(Ev::Bad(format!(
                        "{n} bytes of a partial frame, then closed"
                    )));
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
        match self.decoder.decode(block, usize::MAX) {
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
                    block: block.to_vec(),
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
                    self.seen.push(format!(
                        "{} bytes {shown:?}..., closed ({how})",
                        bytes.len()
                    ));
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
                    return Err(format!(
                        "expected the connection to close, got: {}",
                        self.trace()
                    ))
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
                    block,
                } if s == stream => {
                    self.last_block = block;
                    return Ok((fields, end_stream));
                }
                Ev::Frame(f)
                    if f.kind == GOAWAY || (f.kind == RST_STREAM && f.stream == stream) =>
                {
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
                Ev::Frame(f)
                    if f.kind == GOAWAY || (f.kind == RST_STREAM && f.stream == stream) =>
                {
                    break
                }
                Ev::Frame(_) | Ev::Headers { .. } => {}
                _ => break,
            }
        }
        Err(format!(
            "expected DATA on stream {stream}, got: {}",
            self.trace()
        ))
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
            frames: Vec::new(),
            trailers: None,
        };
        let deadline = Instant::now() + EXPECT;
        while !ended {
            match self.next(deadline) {
                Ev::Frame(f) if f.kind == DATA && f.stream == stream => {
                    ended = f.has(END_STREAM);
                    resp.frames.push(f.payload.len());
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
                    ..
                } if s == stream => {
                    ended = end_stream;
                    resp.trailers = Some(fields);
                }
                Ev::Frame(f)
                    if f.kind == GOAWAY || (f.kind == RST_STREAM && f.stream == stream) =>
                {
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

    /// Whole responses on several streams, in whatever order they interleave: each
    /// stream's (status, body).
    pub fn expect_responses(&mut self, streams: &[u32]) -> R<Vec<(String, Vec<u8>)>> {
        let mut got: Vec<(String, Vec<u8>, bool)> =
            vec![(String::new(), Vec::new(), false); streams.len()];
        let deadline = Instant::now() + EXPECT;
        while got.iter().any(|g| !g.2) {
            let ev = self.next(deadline);
            let (stream, end) = match &ev {
                Ev::Headers {
                    stream, end_stream, ..
                } => (*stream, *end_stream),
                Ev::Frame(f) if f.kind == DATA => (f.stream, f.has(END_STREAM)),
                Ev::Frame(f) if f.kind == GOAWAY || f.kind == RST_STREAM => {
                    return Err(format!("responses did not end: {}", self.trace()))
                }
                Ev::Frame(_) => continue,
                _ => return Err(format!("responses did not end: {}", self.trace())),
            };
            let Some(i) = streams.iter().position(|&s| s == stream) else {
                continue;
            };
            match ev {
                Ev::Headers { fields, .. } if got[i].0.is_empty() => {
                    got[i].0 = fields
                        .into_iter()
                        .find(|f| f.0 == ":status")
                        .map(|f| f.1)
                        .unwrap_or_default();
                }
                Ev::Frame(f) => got[i].1.extend_from_slice(&f.payload),
                _ => {}
            }
            got[i].2 |= end;
        }
        Ok(got.into_iter().map(|g| (g.0, g.1)).collect())
    }

    /// A whole response with `status` (and `body`, if given).
    pub fn expect_status(&mut self, stream: u32, status: &str, body: Option<&[u8]>) -> R<Resp> {
        let r = self.expect_response(stream)?;
        if r.status != status {
            return Err(format!(
                "expected :status {status}, got {}: {}",
                r.status,
                self.trace()
            ));
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
