//! The idle-connections scenario and the blocking client the bench checks servers with.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::Duration;

use crate::proc::RunningServer;
use crate::IO_TIMEOUT;

/// Idle connections opened before their requests are sent (under the listen backlog).
pub const BATCH: usize = 500;
/// The request each idle connection sends.
pub const IDLE_REQUEST: &[u8] = b"GET / HTTP/1.1\r\nhost: bench\r\n\r\n";
/// Wait after the last idle connection's response before reading VmRSS.
const SETTLE: Duration = Duration::from_secs(1);

/// One idle-connections run.
#[derive(Clone, Debug, Default)]
pub struct Idle {
    /// VmRSS of the server that has answered one request.
    pub empty_kib: u64,
    /// With half the connections open.
    pub half_kib: u64,
    /// With all of them open and settled.
    pub loaded_kib: u64,
    /// VmHWM at the end.
    pub peak_kib: u64,
    pub threads: u64,
    pub n: usize,
}

impl Idle {
    /// RSS per connection above the empty server, bytes.
    pub fn per_conn(&self) -> f64 {
        (self.loaded_kib as f64 - self.empty_kib as f64) * 1024.0 / self.n.max(1) as f64
    }
    /// The slope over the second half of the connections, bytes.
    pub fn marginal(&self) -> f64 {
        (self.loaded_kib as f64 - self.half_kib as f64) * 1024.0
            / (self.n - self.n / 2).max(1) as f64
    }
}

pub fn idle_run(srv: &RunningServer, n: usize) -> Result<Idle, String> {
    idle_run_with(srv, n, |conns, upto| open_idle(srv.addr, conns, upto))
}

/// The idle run with the connections opened by `open(conns, upto)`, which must leave
/// `upto` of them in `conns`, each having had one request answered (over TLS: only the
/// socket is kept, see `compare/tls.rs`).
pub fn idle_run_with(
    srv: &RunningServer,
    n: usize,
    mut open: impl FnMut(&mut Vec<TcpStream>, usize) -> Result<(), String>,
) -> Result<Idle, String> {
    let mut conns = Vec::with_capacity(n);
    sample_idle(srv, n, 1, |upto| open(&mut conns, upto))
}

/// The server's memory around `open(upto)`, which must leave `upto` connections open
/// (held by the caller, or by a load generator process: HTTP/3): empty, with half of `n`,
/// with all of them settled. The server must then hold `fds_per_conn` descriptors more per
/// connection (TCP: one; QUIC: none, its connections share the UDP socket).
pub fn sample_idle(
    srv: &RunningServer,
    n: usize,
    fds_per_conn: usize,
    mut open: impl FnMut(usize) -> Result<(), String>,
) -> Result<Idle, String> {
    // The empty server has answered requests (check_routes): one-time set-up is not per
    // connection.
    thread::sleep(Duration::from_millis(300));
    let empty = srv.status()?;
    let fds_empty = srv.fds()?;
    open(n / 2)?;
    thread::sleep(Duration::from_millis(200));
    let half = srv.status()?;
    open(n)?;
    thread::sleep(SETTLE);
    let loaded = srv.status()?;
    let fds = srv.fds()?;
    if fds < fds_empty + n * fds_per_conn {
        return Err(format!(
            "the server holds {} descriptors more than empty, expected at least {}",
            fds.saturating_sub(fds_empty),
            n * fds_per_conn
        ));
    }
    Ok(Idle {
        empty_kib: empty.rss_kib,
        half_kib: half.rss_kib,
        loaded_kib: loaded.rss_kib,
        peak_kib: loaded.hwm_kib,
        threads: loaded.threads,
        n,
    })
}

/// Opens connections until `conns` holds `upto`: a batch of connects, then one GET / on
/// each, then each response read and checked.
fn open_idle(addr: SocketAddr, conns: &mut Vec<TcpStream>, upto: usize) -> Result<(), String> {
    while conns.len() < upto {
        let start = conns.len();
        let end = (start + BATCH).min(upto);
        for i in start..end {
            conns.push(connect_retrying(addr).map_err(|e| format!("idle connection {i}: {e}"))?);
        }
        for (i, s) in conns.iter_mut().enumerate().take(end).skip(start) {
            s.write_all(IDLE_REQUEST)
                .map_err(|e| format!("idle connection {i}: write: {e}"))?;
        }
        for (i, s) in conns.iter_mut().enumerate().take(end).skip(start) {
            read_hello(s).map_err(|e| format!("idle connection {i}: {e}"))?;
        }
    }
    Ok(())
}

/// Reads one response and checks it is `200 hello`.
pub fn read_hello(s: &mut impl Read) -> Result<(), String> {
    let (status, body) = read_response(s)?;
    if status != 200 || body != b"hello" {
        return Err(format!(
            "answered {status} {:?}",
            String::from_utf8_lossy(&body)
        ));
    }
    Ok(())
}

/// `connect`, tried again (on a new local port) when refused. After the churn scenario's
/// hundreds of thousands of connections, a connect now and then meets a stale socket of the
/// kernel's on the same port pair and is reset; a dead server fails every try.
pub fn connect_retrying(addr: SocketAddr) -> Result<TcpStream, String> {
    let mut tries = 0;
    loop {
        match connect(addr) {
            Err(e) if e.contains("refused") && tries < 3 => {
                tries += 1;
                thread::sleep(Duration::from_millis(50));
            }
            r => return r,
        }
    }
}

pub fn connect(addr: SocketAddr) -> Result<TcpStream, String> {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(|e| format!("connect: {e}"))?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(IO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(IO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    Ok(s)
}

/// Sends one HTTP/1.1 request; returns the response's status and body.
fn request(
    s: &mut (impl Read + Write),
    method: &str,
    path: &str,
    body: &[u8],
) -> Result<(u16, Vec<u8>), String> {
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nhost: bench\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    s.write_all(&req).map_err(|e| format!("write: {e}"))?;
    read_response(s)
}

/// Reads one response with a content-length body (what every server here sends).
fn read_response(s: &mut impl Read) -> Result<(u16, Vec<u8>), String> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 64 * 1024 {
            return Err("response head too long".into());
        }
        let n = s.read(&mut chunk).map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err(format!(
                "closed mid-response after {:?}",
                String::from_utf8_lossy(&buf)
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line in {head:?}"))?;
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .ok_or_else(|| format!("no content-length in {head:?}"))?;
    let mut body = buf[head_end..].to_vec();
    while body.len() < len {
        let n = s.read(&mut chunk).map_err(|e| format!("read body: {e}"))?;
        if n == 0 {
            return Err("closed mid-body".into());
        }
        body.extend_from_slice(&chunk[..n]);
    }
    if body.len() > len {
        return Err(format!("{} bytes after the response", body.len() - len));
    }
    Ok((status, body))
}

/// Each route answers what it should, on one keep-alive connection (for the floor, which
/// answers everything alike, only GET /); and an HTTP/1.0 request without keep-alive, as
/// `ab` sends in the churn scenario, is answered and its connection closed.
pub fn check_routes(addr: SocketAddr, real: bool) -> Result<(), String> {
    check_routes_on(|| connect(addr), real)
}

/// [`check_routes`] on the connections `connect` makes (over TLS: `compare/tls.rs`).
pub fn check_routes_on<S: Read + Write>(
    connect: impl Fn() -> Result<S, String>,
    real: bool,
) -> Result<(), String> {
    let mut s = connect()?;
    let (st, body) = request(&mut s, "GET", "/", b"")?;
    if st != 200 || body != b"hello" {
        return Err(format!(
            "GET / answered {st} {:?}",
            String::from_utf8_lossy(&body)
        ));
    }
    if real {
        let payload: Vec<u8> = (0..1024u32).map(|i| b'a' + (i % 26) as u8).collect();
        let (st, body) = request(&mut s, "POST", "/echo", &payload)?;
        if st != 200 || body != payload {
            return Err(format!(
                "POST /echo answered {st} with {} bytes",
                body.len()
            ));
        }
        let (st, body) = request(&mut s, "GET", "/json", b"")?;
        let text = String::from_utf8_lossy(&body);
        if st != 200 || !text.contains("\"message\":\"hello\"") {
            return Err(format!("GET /json answered {st} {text:?}"));
        }
    }
    let mut s = connect()?;
    s.write_all(b"GET / HTTP/1.0\r\nhost: bench\r\n\r\n")
        .map_err(|e| format!("HTTP/1.0 write: {e}"))?;
    let mut all = Vec::new();
    read_to_close(&mut s, &mut all)
        .map_err(|e| format!("HTTP/1.0 request: the connection was not closed: {e}"))?;
    if !all.starts_with(b"HTTP/1.") || !all.ends_with(b"hello") {
        return Err(format!(
            "HTTP/1.0 GET / answered {:?}",
            String::from_utf8_lossy(&all)
        ));
    }
    Ok(())
}

/// Reads until the peer closes. Over TLS, a close without a `close_notify` alert (rustls
/// reports it as `UnexpectedEof`) counts as closed too: the response was delimited by its
/// content-length, as `ab` reads it.
fn read_to_close(s: &mut impl Read, all: &mut Vec<u8>) -> std::io::Result<()> {
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => all.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
