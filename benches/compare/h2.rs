//! The HTTP/2 scenarios (issue 13): h2load over h2c (prior knowledge) and over TLS (ALPN
//! `h2`), checked strictly, and the idle h2c connections with a minimal HTTP/2 client of
//! this bench's own.
//!
//! Each load phase is `h2load -c100 -mM -D SECS` with its per-request log (p99), warmed up
//! with the same load first. h2load's output must say that it spoke HTTP/2 (`Application
//! protocol: h2c`, or `h2` over TLS) and that every request finished with a 2xx: `0 failed,
//! 0 errored, 0 timeout`, done = succeeded = 2xx. Anything else fails the phase: a server
//! that resets streams or stalls under load must not show up as a fast one.
//!
//! The client (blocking std sockets, frames written and parsed by hand): the connection
//! preface and an empty SETTINGS, then a GET / on stream 1 (HPACK: `:method GET`, `:scheme
//! http`, `:path /` from the static table, `:authority bench` a literal) with END_STREAM;
//! it ACKs the server's SETTINGS (and answers PINGs) while it reads the response: the
//! HEADERS must carry `:status 200` and the DATA `hello`. An idle connection is left so:
//! the bench then keeps only the socket, the server holds an open HTTP/2 connection with
//! no stream.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use crate::grpc;
use crate::idle::{self, Idle};
use crate::load::{self, Load, Measured, TempFile};
use crate::proc::RunningServer;
use crate::{Scenario, Settings};

/// Connections h2load opens.
pub const CONNS: usize = 100;

/// The h2load command line for `sc` on `url`, running `d`, with `extra` arguments (the
/// gRPC scenario's message and headers); with a per-request log for the measured phase.
fn command(
    sc: Scenario,
    url: &str,
    d: std::time::Duration,
    log: Option<&std::path::Path>,
    extra: &[String],
) -> Vec<String> {
    let secs = d.as_secs().max(1).to_string();
    let mut a: Vec<String> = [
        "h2load".to_string(),
        "-c".into(),
        CONNS.to_string(),
        format!("-m{}", streams(sc)),
        "-D".into(),
        secs,
    ]
    .into();
    a.extend_from_slice(extra);
    if let Some(l) = log {
        a.push(format!("--log-file={}", l.display()));
    }
    a.push(url.to_string());
    a
}

/// Streams in flight per connection.
pub fn streams(sc: Scenario) -> usize {
    match sc {
        Scenario::H2cM1 => 1,
        Scenario::H2cM10 | Scenario::H2TlsM10 | Scenario::Grpc => 10,
        _ => unreachable!("{} is not an HTTP/2 load", sc.key()),
    }
}

/// h2load's output, checked: every request done, succeeded and answered 2xx, over the
/// protocol `sc` speaks. (requests, measuring time).
fn check_output(sc: Scenario, text: &str) -> Result<(u64, std::time::Duration), String> {
    let want = if sc.tls() { "h2" } else { "h2c" };
    let proto = text
        .lines()
        .find_map(|l| l.strip_prefix("Application protocol:"))
        .map(str::trim);
    if proto != Some(want) {
        return Err(format!(
            "h2load spoke {proto:?}, not {want}:\n{}",
            tail(text)
        ));
    }
    let (ok, wall, _) = load::parse_h2load(text)?;
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("requests: "))
        .ok_or_else(|| format!("no request counts in h2load's output:\n{}", tail(text)))?;
    let count = |name: &str| -> Option<u64> {
        line.split(',')
            .find_map(|p| p.trim().strip_suffix(name)?.trim().parse().ok())
    };
    let two_xx = text
        .lines()
        .find_map(|l| l.strip_prefix("status codes: "))
        .and_then(|l| {
            l.split(',')
                .next()?
                .trim()
                .strip_suffix("2xx")?
                .trim()
                .parse()
                .ok()
        });
    let (done, failed, errored, timeout) = (
        count("done"),
        count("failed"),
        count("errored"),
        count("timeout"),
    );
    if failed != Some(0) || errored != Some(0) || timeout != Some(0) || done != Some(ok) {
        return Err(format!("h2load: {line}\n{}", tail(text)));
    }
    if two_xx != Some(ok) {
        return Err(format!(
            "h2load: {ok} succeeded but {two_xx:?} answered 2xx:\n{}",
            tail(text)
        ));
    }
    if ok == 0 {
        return Err(format!("h2load: no request completed:\n{}", tail(text)));
    }
    Ok((ok, wall))
}

/// h2load's summary (its progress lines left out).
fn tail(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with("progress:"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One HTTP/2 load run: warm-up, then the measured phase. The gRPC scenario posts its
/// message to the unary method, and checks each phase's answers and the server's
/// (`compare/grpc.rs`).
pub fn load_run(
    srv: &RunningServer,
    sc: Scenario,
    set: &Settings,
    cpu: usize,
) -> Result<Load, String> {
    let scheme = if sc.tls() { "https" } else { "http" };
    let message = (sc == Scenario::Grpc)
        .then(grpc::write_message)
        .transpose()?;
    let (path, extra) = match &message {
        Some(m) => (grpc::PATH, grpc::h2load_args(&m.0)),
        None => ("/", Vec::new()),
    };
    let url = format!("{scheme}://{}{path}", srv.addr);
    let checked = |text: &str| -> Result<(u64, std::time::Duration), String> {
        let (ok, wall) = check_output(sc, text)?;
        if message.is_some() {
            grpc::check_traffic(text, ok, (CONNS * streams(sc)) as u64)?;
            grpc::probe(srv.addr)?;
        }
        Ok((ok, wall))
    };
    let idle_rss_kib = srv.status()?.rss_kib;
    let warm = load::run_tool(cpu, &command(sc, &url, set.warmup, None, &extra))?;
    checked(&warm).map_err(|e| format!("warm-up: {e}"))?;
    srv.check_alive()?;
    let log = TempFile::new(&format!("{}.log", sc.key()));
    let _ = std::fs::remove_file(&log.0);
    let args = command(sc, &url, set.phase, Some(&log.0), &extra);
    let (sampled, text) = load::measure(srv, cpu, || load::run_tool(cpu, &args))?;
    let (requests, wall) = checked(&text)?;
    let p99_us = load::h2load_log_p99(&log.0)?;
    let m = Measured {
        requests,
        wall,
        p99_us,
        errors: 0,
    };
    Ok(Load::from_parts(sampled, m, idle_rss_kib))
}

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const CONTINUATION: u8 = 9;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY_FLAG: u8 = 0x20;

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = payload.len() as u32;
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
}

/// A GET of `path` on `stream`, END_STREAM: the HPACK block by hand.
fn get(out: &mut Vec<u8>, stream: u32, path: &str) {
    // :method GET (2), :scheme http (6); :path / (4) or a literal without indexing with
    // the name :path; :authority as a literal without indexing (name 1).
    let mut block = vec![0x82, 0x86];
    if path == "/" {
        block.push(0x84);
    } else {
        block.extend_from_slice(&[0x04, path.len() as u8]);
        block.extend_from_slice(path.as_bytes());
    }
    block.extend_from_slice(&[0x01, 5]);
    block.extend_from_slice(b"bench");
    frame(out, HEADERS, END_STREAM | END_HEADERS, stream, &block);
}

/// The connection's opening: preface, an empty SETTINGS, GET / on stream 1.
fn opening() -> Vec<u8> {
    let mut out = PREFACE.to_vec();
    frame(&mut out, SETTINGS, 0, 0, &[]);
    get(&mut out, 1, "/");
    out
}

/// The `:status` a response header block starts with (`:status` is the first field of
/// every response; hyper and fibr send it from the static table, a literal is read too).
fn status(block: &[u8]) -> Result<u16, String> {
    let bad = || format!("cannot read :status from the header block {block:02x?}");
    let first = *block.first().ok_or_else(bad)?;
    // Indexed: 8..=14 are :status 200 204 206 304 400 404 500.
    let indexed = [200, 204, 206, 304, 400, 404, 500];
    if first & 0x80 != 0 {
        let i = (first & 0x7f) as usize;
        return indexed.get(i.wrapping_sub(8)).copied().ok_or_else(bad);
    }
    // A literal whose name is one of the :status entries (with or without indexing).
    let name = if first & 0xc0 == 0x40 {
        first & 0x3f
    } else if first & 0xf0 == 0x00 || first & 0xf0 == 0x10 {
        first & 0x0f
    } else {
        return Err(bad());
    };
    if !(8..=14).contains(&name) {
        return Err(bad());
    }
    let len_byte = *block.get(1).ok_or_else(bad)?;
    let len = (len_byte & 0x7f) as usize;
    let value = block.get(2..2 + len).ok_or_else(bad)?;
    let text = if len_byte & 0x80 != 0 {
        // Huffman: three digits, each 5 bits for 0 1 2, 6 bits for 3..9; only "200" is
        // expected here.
        match value {
            [0x10, 0x01] => "200".to_string(),
            _ => return Err(bad()),
        }
    } else {
        String::from_utf8_lossy(value).into_owned()
    };
    text.parse().map_err(|_| bad())
}

/// Reads frames until stream `stream`'s response has ended; returns its status and body.
/// ACKs the server's SETTINGS and answers its PINGs on the way.
fn read_response(
    s: &mut (impl Read + Write),
    buf: &mut Vec<u8>,
    stream: u32,
) -> Result<(u16, Vec<u8>), String> {
    let mut status_code = None;
    let mut body = Vec::new();
    let mut block = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        // One whole frame at the front of `buf`.
        while buf.len() < 9 || buf.len() < 9 + frame_len(buf) {
            let n = s.read(&mut chunk).map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err(format!(
                    "closed before the response ended (status {status_code:?}, {} body bytes)",
                    body.len()
                ));
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let len = frame_len(buf);
        let (kind, flags) = (buf[3], buf[4]);
        let id = u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & 0x7fff_ffff;
        let payload: Vec<u8> = buf[9..9 + len].to_vec();
        buf.drain(..9 + len);
        match kind {
            SETTINGS if flags & ACK == 0 => {
                let mut ack = Vec::new();
                frame(&mut ack, SETTINGS, ACK, 0, &[]);
                s.write_all(&ack)
                    .map_err(|e| format!("SETTINGS ACK: {e}"))?;
            }
            PING if flags & ACK == 0 => {
                let mut pong = Vec::new();
                frame(&mut pong, PING, ACK, 0, &payload);
                s.write_all(&pong).map_err(|e| format!("PING ACK: {e}"))?;
            }
            GOAWAY => {
                let code = payload
                    .get(4..8)
                    .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
                return Err(format!("GOAWAY with error code {code:?}"));
            }
            RST_STREAM if id == stream => {
                return Err(format!("RST_STREAM on stream {stream}: {payload:02x?}"));
            }
            HEADERS | CONTINUATION if id == stream => {
                let mut p = &payload[..];
                if kind == HEADERS {
                    if flags & PADDED != 0 {
                        let pad = *p.first().ok_or("empty padded HEADERS")? as usize;
                        p = p.get(1..p.len().saturating_sub(pad)).ok_or("bad padding")?;
                    }
                    if flags & PRIORITY_FLAG != 0 {
                        p = p.get(5..).ok_or("short HEADERS")?;
                    }
                }
                block.extend_from_slice(p);
                if flags & END_HEADERS != 0 {
                    if status_code.is_none() {
                        status_code = Some(status(&block)?);
                    }
                    block.clear();
                }
                if kind == HEADERS && flags & END_STREAM != 0 {
                    break;
                }
            }
            DATA if id == stream => {
                let mut p = &payload[..];
                if flags & PADDED != 0 {
                    let pad = *p.first().ok_or("empty padded DATA")? as usize;
                    p = p.get(1..p.len().saturating_sub(pad)).ok_or("bad padding")?;
                }
                body.extend_from_slice(p);
                if flags & END_STREAM != 0 {
                    break;
                }
            }
            // WINDOW_UPDATE, SETTINGS ACK, PRIORITY, other streams' frames...
            _ => {}
        }
    }
    let status_code = status_code.ok_or("the response ended without a header block")?;
    Ok((status_code, body))
}

fn frame_len(buf: &[u8]) -> usize {
    (buf[0] as usize) << 16 | (buf[1] as usize) << 8 | buf[2] as usize
}

fn read_hello(s: &mut TcpStream, buf: &mut Vec<u8>) -> Result<(), String> {
    let (st, body) = read_response(s, buf, 1)?;
    if st != 200 || body != b"hello" {
        return Err(format!(
            "GET / over h2c answered {st} {:?}",
            String::from_utf8_lossy(&body)
        ));
    }
    Ok(())
}

/// The server speaks h2c by prior knowledge: GET / and GET /json on one connection.
pub fn check_h2c(addr: SocketAddr) -> Result<(), String> {
    let mut s = idle::connect(addr)?;
    s.write_all(&opening())
        .map_err(|e| format!("h2c: write: {e}"))?;
    let mut buf = Vec::new();
    read_hello(&mut s, &mut buf).map_err(|e| format!("h2c: {e}"))?;
    let mut req = Vec::new();
    get(&mut req, 3, "/json");
    s.write_all(&req).map_err(|e| format!("h2c: write: {e}"))?;
    let (st, body) = read_response(&mut s, &mut buf, 3).map_err(|e| format!("h2c: {e}"))?;
    let text = String::from_utf8_lossy(&body);
    if st != 200 || !text.contains("\"message\":\"hello\"") {
        return Err(format!("GET /json over h2c answered {st} {text:?}"));
    }
    Ok(())
}

/// The idle scenario over h2c: `idle::idle_run_with` with connections that have each
/// opened HTTP/2 and had one GET / answered.
pub fn idle_run(srv: &RunningServer, n: usize) -> Result<Idle, String> {
    idle::idle_run_with(srv, n, |conns, upto| open_idle(srv.addr, conns, upto))
}

/// Opens h2c connections until `conns` holds `upto`, a batch at a time: the batch's
/// connects, then each one's opening (preface, SETTINGS, GET /) written, then each
/// response read (the server's SETTINGS ACKed on the way).
fn open_idle(addr: SocketAddr, conns: &mut Vec<TcpStream>, upto: usize) -> Result<(), String> {
    let open = opening();
    while conns.len() < upto {
        let start = conns.len();
        let end = (start + idle::BATCH).min(upto);
        for i in start..end {
            conns.push(
                idle::connect_retrying(addr)
                    .map_err(|e| format!("idle h2c connection {i}: {e}"))?,
            );
        }
        for (i, s) in conns.iter_mut().enumerate().take(end).skip(start) {
            s.write_all(&open)
                .map_err(|e| format!("idle h2c connection {i}: write: {e}"))?;
        }
        let mut buf = Vec::with_capacity(256);
        for (i, s) in conns.iter_mut().enumerate().take(end).skip(start) {
            buf.clear();
            read_hello(s, &mut buf).map_err(|e| format!("idle h2c connection {i}: {e}"))?;
        }
    }
    Ok(())
}
