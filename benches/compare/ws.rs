//! The WebSocket scenarios: a load generator of their own (no external tool speaks
//! WebSocket the way wrk speaks HTTP), the idle WebSocket connections, and a check of the
//! servers' `/ws` with tungstenite.
//!
//! The generator opens `CONNS` connections to `GET /ws` (the handshake written and checked by
//! hand, with a fixed key whose accept value is known), then, from one thread pinned to the
//! load CPU, runs an edge-triggered epoll loop: each connection sends one masked message of
//! its scenario's [`Kind`] (64 B text, 16 KiB binary, or 1 KiB of JSON-like text compressed
//! with permessage-deflate), waits for the server's unmasked echo, checks it byte for byte
//! (inflated first when compressed), and sends the next. One message in flight per
//! connection, like `wrk`'s one request. A phase ends at its deadline once the messages in
//! flight have come back; messages/s is the echoes completed over that time.
//!
//! With deflate the client offers `permessage-deflate; client_no_context_takeover;
//! server_no_context_takeover` and requires the server to accept it: without context
//! takeover every message is compressed from a fresh state, so each connection compresses
//! its message once (raw deflate, the `00 00 ff ff` tail stripped, RSV1 set) and sends the
//! same frame every time, and every echo must come back compressed (RSV1) and is inflated
//! from a fresh state.

use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress};

use crate::epoll::{Epoll, EMPTY_EVENT};
use crate::idle::{self, Idle};
use crate::load::{self, Load, Measured};
use crate::proc::RunningServer;
use crate::{Scenario, Settings, IO_TIMEOUT};

/// Connections of a load phase.
pub const CONNS: usize = 100;

/// RFC 6455's sample key and its accept value.
const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
const ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";
/// The client's offer: no context takeover either way (the idle goal's case).
const DEFLATE_OFFER: &str =
    "permessage-deflate; client_no_context_takeover; server_no_context_takeover";
/// What a sync flush ends a deflate stream with, and RFC 7692 strips from a message.
const DEFLATE_TAIL: [u8; 4] = [0, 0, 0xff, 0xff];
const OP_TEXT: u8 = 0x1;
const OP_BINARY: u8 = 0x2;

/// The message every connection of a scenario sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kind {
    /// Text or binary.
    pub opcode: u8,
    /// Payload bytes (before compression).
    pub len: usize,
    /// permessage-deflate negotiated, the message sent compressed, the echo required so.
    pub deflate: bool,
}

pub const TEXT_64: Kind = Kind {
    opcode: OP_TEXT,
    len: 64,
    deflate: false,
};
pub const BINARY_16K: Kind = Kind {
    opcode: OP_BINARY,
    len: 16 << 10,
    deflate: false,
};
/// Past fibr's default threshold (256 B), so its echo is compressed.
pub const DEFLATE_1K: Kind = Kind {
    opcode: OP_TEXT,
    len: 1 << 10,
    deflate: true,
};

impl Kind {
    /// The message of a WebSocket scenario.
    pub fn of(sc: Scenario) -> Kind {
        match sc {
            Scenario::Ws16k => BINARY_16K,
            Scenario::WsDeflate | Scenario::IdleWsDeflate => DEFLATE_1K,
            _ => TEXT_64,
        }
    }

    /// "64 B text", "16 KiB binary", "1 KiB JSON text, permessage-deflate".
    pub fn describe(self) -> String {
        let size = if self.len >= 1024 {
            format!("{} KiB", self.len / 1024)
        } else {
            format!("{} B", self.len)
        };
        match (self.opcode, self.deflate) {
            (OP_BINARY, _) => format!("{size} binary"),
            (_, false) => format!("{size} text"),
            (_, true) => format!("{size} JSON text, permessage-deflate"),
        }
    }

    /// Connection `i`'s payload: its own, so that a mixed-up echo would not match.
    fn payload(self, i: usize) -> Vec<u8> {
        match (self.opcode, self.deflate) {
            (OP_BINARY, _) => {
                // xorshift32: every byte value, nothing to compress.
                let mut x = (i as u32 + 1).wrapping_mul(0x9e37_79b9) | 1;
                (0..self.len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        x as u8
                    })
                    .collect()
            }
            (_, false) => format!("{i:04}-")
                .bytes()
                .chain((0..).map(|j| b'a' + (j % 26) as u8))
                .take(self.len)
                .collect(),
            (_, true) => {
                // Records as a JSON API would send them: compressible as such text is.
                let mut s = String::from("[");
                let mut seq = 0;
                while s.len() < self.len {
                    let _ = write!(
                        s,
                        "{{\"conn\":{i},\"seq\":{seq},\"user\":\"user-{i:04}\",\
                         \"tags\":[\"alpha\",\"beta\"],\"score\":{}.5,\"ok\":true}},",
                        seq * 37 % 100
                    );
                    seq += 1;
                }
                s.truncate(self.len);
                s.into_bytes()
            }
        }
    }
}

/// The servers' `/ws` echoes text and binary messages and closes cleanly, as a WebSocket
/// client library sees it.
pub fn check_ws(addr: SocketAddr) -> Result<(), String> {
    use tungstenite::Message;
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(IO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let (mut ws, resp) = tungstenite::client(format!("ws://{addr}/ws"), s)
        .map_err(|e| format!("GET /ws: the WebSocket handshake failed: {e}"))?;
    if resp.status() != 101 {
        return Err(format!("GET /ws answered {}", resp.status()));
    }
    let bad = |what: &str, got: &dyn std::fmt::Debug| format!("/ws: {what}: got {got:?}");
    ws.send(Message::text("hello"))
        .map_err(|e| format!("/ws: send: {e}"))?;
    match ws.read() {
        Ok(Message::Text(t)) if t.as_str() == "hello" => {}
        other => return Err(bad("the text echo", &other)),
    }
    ws.send(Message::binary(vec![1u8, 2, 3]))
        .map_err(|e| format!("/ws: send: {e}"))?;
    match ws.read() {
        Ok(Message::Binary(b)) if b.as_ref() == [1u8, 2, 3] => {}
        other => return Err(bad("the binary echo", &other)),
    }
    ws.close(None).map_err(|e| format!("/ws: close: {e}"))?;
    loop {
        match ws.read() {
            Ok(Message::Close(_)) => continue,
            Err(tungstenite::Error::ConnectionClosed) => return Ok(()),
            other => return Err(bad("the close handshake", &other)),
        }
    }
}

/// One run: the connections opened, a warm-up phase, then the measured one.
pub fn ws_run(srv: &RunningServer, set: &Settings, cpu: usize, kind: Kind) -> Result<Load, String> {
    let idle_rss_kib = srv.status()?.rss_kib;
    let mut gen = Generator::open(srv.addr, 0, CONNS, kind)?;
    let warm = gen.drive(set.warmup)?;
    if warm.requests == 0 {
        return Err("no message came back during the warm-up".into());
    }
    srv.check_alive()?;
    let (s, m) = load::measure(srv, cpu, || gen.drive(set.phase))?;
    drop(gen);
    if m.requests == 0 {
        return Err("no message came back".into());
    }
    Ok(Load::from_parts(s, m, idle_rss_kib))
}

/// The server answers a compressed message with a compressed echo (before a deflate
/// scenario, and so before its idle baseline: the empty server has compressed once too).
pub fn check_deflate(addr: SocketAddr) -> Result<(), String> {
    Generator::open(addr, 0, 1, DEFLATE_1K)?
        .drive(Duration::ZERO)
        .map(drop)
        .map_err(|e| format!("/ws with permessage-deflate: {e}"))
}

/// Idle WebSocket connections: each upgraded and one `kind` message echoed, then held; the
/// server's RSS per connection as `idle.rs` measures it.
pub fn idle_run(srv: &RunningServer, n: usize, kind: Kind) -> Result<Idle, String> {
    idle::idle_run_with(srv, n, |conns, upto| {
        while conns.len() < upto {
            let batch = (upto - conns.len()).min(idle::BATCH);
            let mut gen = Generator::open(srv.addr, conns.len(), batch, kind)?;
            gen.drive(Duration::ZERO)?;
            conns.extend(gen.conns.into_iter().map(|c| c.stream));
        }
        Ok(())
    })
}

/// A connection after its handshake.
struct Conn {
    stream: TcpStream,
    /// The masked (and compressed) frame it sends, and the payload its echo must carry.
    frame: Vec<u8>,
    payload: Vec<u8>,
    /// Received bytes not yet making a whole frame; the fragments of a message so far.
    rx: Vec<u8>,
    fragments: Option<Vec<u8>>,
    /// How much of `frame` is written (`frame.len()`: all).
    wrote: usize,
    in_flight: bool,
    sent_at: Instant,
}

struct Generator {
    conns: Vec<Conn>,
    epoll: Epoll,
    kind: Kind,
    /// Reset for every compressed echo (the server keeps no context either).
    inflater: Decompress,
    inflated: Vec<u8>,
}

impl Generator {
    /// `n` connections, numbered from `first` (their payloads differ).
    fn open(addr: SocketAddr, first: usize, n: usize, kind: Kind) -> Result<Generator, String> {
        let epoll = Epoll::new().map_err(|e| format!("epoll_create1: {e}"))?;
        let mut conns = Vec::with_capacity(n);
        for k in 0..n {
            let i = first + k;
            let stream =
                handshake(addr, kind).map_err(|e| format!("WebSocket connection {i}: {e}"))?;
            stream.set_nonblocking(true).map_err(|e| e.to_string())?;
            epoll
                .add(stream.as_raw_fd(), k as u64)
                .map_err(|e| format!("epoll_ctl: {e}"))?;
            let payload = kind.payload(i);
            let mask = (0x9e37_79b9u32.wrapping_mul(i as u32 + 1)).to_be_bytes();
            let frame = if kind.deflate {
                client_frame(0x80 | 0x40 | kind.opcode, &deflate(&payload)?, mask)
            } else {
                client_frame(0x80 | kind.opcode, &payload, mask)
            };
            conns.push(Conn {
                stream,
                frame,
                payload,
                rx: Vec::new(),
                fragments: None,
                wrote: 0,
                in_flight: false,
                sent_at: Instant::now(),
            });
        }
        Ok(Generator {
            conns,
            epoll,
            kind,
            inflater: Decompress::new(false),
            inflated: Vec::new(),
        })
    }

    /// Echoes messages on every connection for `d`, then until the ones in flight are back
    /// (`Duration::ZERO`: one message each).
    fn drive(&mut self, d: Duration) -> Result<Measured, String> {
        let start = Instant::now();
        let deadline = start + d;
        let mut latencies: Vec<u32> = Vec::with_capacity(if d.is_zero() {
            self.conns.len()
        } else {
            1 << 20
        });
        let mut in_flight = 0;
        for i in 0..self.conns.len() {
            self.send(i)?;
            in_flight += 1;
        }
        let mut events = vec![EMPTY_EVENT; 256];
        let mut buf = vec![0u8; 64 * 1024];
        while in_flight > 0 {
            let now = Instant::now();
            let stopping = now >= deadline;
            if now >= deadline + IO_TIMEOUT {
                return Err(format!(
                    "{in_flight} messages did not come back within {} s",
                    IO_TIMEOUT.as_secs()
                ));
            }
            let wait = if stopping {
                100
            } else {
                (deadline - now).as_millis().clamp(1, 100) as i32
            };
            let n = self
                .epoll
                .wait(&mut events, wait)
                .map_err(|e| format!("epoll_wait: {e}"))?;
            for ev in &events[..n] {
                let i = ev.u64 as usize;
                // Writable: the rest of a frame the socket did not take at once.
                if self.conns[i].wrote < self.conns[i].frame.len() {
                    self.flush(i)?;
                }
                // Readable (edge-triggered: until it would block).
                loop {
                    let c = &mut self.conns[i];
                    let got = match c.stream.read(&mut buf) {
                        Ok(0) => return Err(format!("connection {i}: the server closed it")),
                        Ok(k) => k,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(format!("connection {i}: read: {e}")),
                    };
                    c.rx.extend_from_slice(&buf[..got]);
                    let echoed = self
                        .take_echo(i)
                        .map_err(|e| format!("connection {i}: {e}"))?;
                    if echoed {
                        let c = &mut self.conns[i];
                        c.in_flight = false;
                        in_flight -= 1;
                        let us = c.sent_at.elapsed().as_micros();
                        latencies.push(us.min(u32::MAX as u128) as u32);
                        if Instant::now() < deadline {
                            self.send(i)?;
                            in_flight += 1;
                        }
                    }
                }
            }
        }
        let wall = start.elapsed();
        Ok(Measured {
            requests: latencies.len() as u64,
            wall,
            p99_us: p99(&mut latencies),
            errors: 0,
        })
    }

    /// Takes the whole frames at the front of connection `i`'s received bytes; true when
    /// they completed its echo, which is then checked: one text or binary message (in
    /// fragments or not) of the kind sent, unmasked, with exactly the payload sent.
    fn take_echo(&mut self, i: usize) -> Result<bool, String> {
        let kind = self.kind;
        let c = &mut self.conns[i];
        loop {
            let Some((head, len)) = frame_head(&c.rx) else {
                return Ok(false);
            };
            if c.rx.len() < head + len {
                return Ok(false);
            }
            let (b0, b1) = (c.rx[0], c.rx[1]);
            let (fin, rsv1, opcode) = (b0 & 0x80 != 0, b0 & 0x40 != 0, b0 & 0x0f);
            let body = &c.rx[head..head + len];
            if !c.in_flight {
                return Err(format!(
                    "a frame (opcode {opcode:#x}, {len} bytes) with no message in flight"
                ));
            }
            if b0 & 0x30 != 0 || b1 & 0x80 != 0 {
                return Err(format!(
                    "a frame with RSV2/RSV3 or a mask: {b0:#04x} {b1:#04x}"
                ));
            }
            let first = c.fragments.is_none();
            let (want_op, want_rsv1) = if first {
                (kind.opcode, kind.deflate)
            } else {
                (0, false)
            };
            if opcode != want_op || rsv1 != want_rsv1 {
                let what = if opcode == 0x8 && len >= 2 {
                    format!(
                        " (a close, code {})",
                        u16::from_be_bytes([body[0], body[1]])
                    )
                } else {
                    String::new()
                };
                return Err(format!(
                    "a frame with opcode {opcode:#x}, RSV1 {rsv1}{what}; expected opcode \
                     {want_op:#x}, RSV1 {want_rsv1}"
                ));
            }
            let done = if fin && first {
                check_echo(body, c, kind, &mut self.inflater, &mut self.inflated)?;
                true
            } else {
                c.fragments
                    .get_or_insert_with(Vec::new)
                    .extend_from_slice(body);
                if fin {
                    let whole = c.fragments.take().unwrap_or_default();
                    check_echo(&whole, c, kind, &mut self.inflater, &mut self.inflated)?;
                }
                fin
            };
            c.rx.drain(..head + len);
            if done {
                if !c.rx.is_empty() {
                    return Err(format!("{} bytes after the echo", c.rx.len()));
                }
                return Ok(true);
            }
        }
    }

    /// Starts connection `i`'s next message.
    fn send(&mut self, i: usize) -> Result<(), String> {
        let c = &mut self.conns[i];
        c.in_flight = true;
        c.wrote = 0;
        c.sent_at = Instant::now();
        self.flush(i)
    }

    fn flush(&mut self, i: usize) -> Result<(), String> {
        let c = &mut self.conns[i];
        while c.wrote < c.frame.len() {
            match c.stream.write(&c.frame[c.wrote..]) {
                Ok(0) => return Err(format!("connection {i}: write returned 0")),
                Ok(k) => c.wrote += k,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("connection {i}: write: {e}")),
            }
        }
        Ok(())
    }
}

/// A whole echo's payload (compressed with `kind.deflate`) against what `c` sent.
fn check_echo(
    body: &[u8],
    c: &Conn,
    kind: Kind,
    inflater: &mut Decompress,
    inflated: &mut Vec<u8>,
) -> Result<(), String> {
    let got = if kind.deflate {
        inflate(inflater, body, inflated, c.payload.len())?;
        &inflated[..]
    } else {
        body
    };
    if got == c.payload {
        return Ok(());
    }
    let at = got
        .iter()
        .zip(&c.payload)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(c.payload.len()));
    Err(format!(
        "the echo ({} bytes) differs from the {} bytes sent at byte {at}",
        got.len(),
        c.payload.len()
    ))
}

/// A client frame: `b0` (FIN, RSV1, opcode), the length, the mask, the masked payload.
fn client_frame(b0: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    let mut f = vec![b0];
    match payload.len() {
        n if n < 126 => f.push(0x80 | n as u8),
        n if n <= 0xffff => {
            f.push(0x80 | 126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(0x80 | 127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    f.extend_from_slice(&mask);
    f.extend(payload.iter().enumerate().map(|(j, b)| b ^ mask[j % 4]));
    f
}

/// A frame's header length and payload length, once the header is all in `rx`.
fn frame_head(rx: &[u8]) -> Option<(usize, usize)> {
    let b1 = *rx.get(1)?;
    let mask = if b1 & 0x80 != 0 { 4 } else { 0 };
    let (head, len) = match b1 & 0x7f {
        126 => (
            4,
            u16::from_be_bytes(rx.get(2..4)?.try_into().ok()?) as usize,
        ),
        127 => (
            10,
            u64::from_be_bytes(rx.get(2..10)?.try_into().ok()?) as usize,
        ),
        n => (2, n as usize),
    };
    Some((head + mask, len))
}

/// A message compressed as permessage-deflate sends it: raw deflate from a fresh state,
/// sync-flushed, the tail stripped.
fn deflate(payload: &[u8]) -> Result<Vec<u8>, String> {
    let mut c = Compress::new(Compression::fast(), false);
    let mut out = Vec::with_capacity(payload.len() + 64);
    c.compress_vec(payload, &mut out, FlushCompress::Sync)
        .map_err(|e| format!("deflate: {e}"))?;
    if c.total_in() != payload.len() as u64 || !out.ends_with(&DEFLATE_TAIL) {
        return Err("deflate: the message did not compress in one call".into());
    }
    out.truncate(out.len() - DEFLATE_TAIL.len());
    Ok(out)
}

/// Inflates a compressed message (its tail put back) from a fresh state into `out`; more
/// than `max` bytes is an error.
fn inflate(d: &mut Decompress, data: &[u8], out: &mut Vec<u8>, max: usize) -> Result<(), String> {
    d.reset(false);
    out.clear();
    out.reserve(max + 1);
    for input in [data, &DEFLATE_TAIL[..]] {
        let start = d.total_in();
        while ((d.total_in() - start) as usize) < input.len() {
            if out.len() > max {
                return Err(format!(
                    "the echo inflates to more than the {max} bytes sent"
                ));
            }
            let before = (d.total_in(), out.len());
            d.decompress_vec(
                &input[(d.total_in() - start) as usize..],
                out,
                FlushDecompress::Sync,
            )
            .map_err(|e| format!("inflating the echo: {e}"))?;
            if (d.total_in(), out.len()) == before {
                return Err("inflating the echo: no progress".into());
            }
        }
    }
    Ok(())
}

/// The 99th percentile, µs (NaN for none).
fn p99(v: &mut [u32]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len()) - 1;
    let (_, p, _) = v.select_nth_unstable(i);
    *p as f64
}

/// A blocking connect and the upgrade (offering deflate for `kind.deflate`), checked; the
/// socket, with no bytes left unread.
fn handshake(addr: SocketAddr, kind: Kind) -> Result<TcpStream, String> {
    let mut s =
        TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(|e| format!("connect: {e}"))?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(IO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(IO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let offer = if kind.deflate {
        format!("sec-websocket-extensions: {DEFLATE_OFFER}\r\n")
    } else {
        String::new()
    };
    let req = format!(
        "GET /ws HTTP/1.1\r\nhost: {addr}\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\
         sec-websocket-key: {KEY}\r\nsec-websocket-version: 13\r\n{offer}\r\n"
    );
    s.write_all(req.as_bytes())
        .map_err(|e| format!("write: {e}"))?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    // Byte by byte: nothing past the head may be consumed (the server sends nothing more
    // before the first message anyway).
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 16 * 1024 {
            return Err("handshake response head too long".into());
        }
        match s.read(&mut byte) {
            Ok(0) => {
                return Err(format!(
                    "closed during the handshake after {:?}",
                    String::from_utf8_lossy(&head)
                ))
            }
            Ok(_) => head.push(byte[0]),
            Err(e) => return Err(format!("read: {e}")),
        }
    }
    let head = String::from_utf8_lossy(&head);
    let status = head.split_whitespace().nth(1).unwrap_or("");
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    if status != "101" || header("sec-websocket-accept").as_deref() != Some(ACCEPT) {
        return Err(format!("the upgrade was answered {head:?}"));
    }
    // Deflate when offered, accepted without server context takeover (the echo is
    // inflated from a fresh state); none when not offered.
    let ext = header("sec-websocket-extensions");
    let agreed = ext.as_deref().is_some_and(|e| {
        let params: Vec<&str> = e.split(';').map(str::trim).collect();
        params[0] == "permessage-deflate" && params.contains(&"server_no_context_takeover")
    });
    if kind.deflate != agreed || (!kind.deflate && ext.is_some()) {
        return Err(format!(
            "offered {}, the server answered sec-websocket-extensions {ext:?}",
            if kind.deflate {
                DEFLATE_OFFER
            } else {
                "no extension"
            }
        ));
    }
    Ok(s)
}
