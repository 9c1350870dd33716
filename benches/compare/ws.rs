//! The WebSocket echo scenario: a load generator of its own (no external tool speaks
//! WebSocket the way wrk speaks HTTP), and a check of the servers' `/ws` with tungstenite.
//!
//! The generator opens `CONNS` connections to `GET /ws` (the handshake written and checked by
//! hand, with a fixed key whose accept value is known), then, from one thread pinned to the
//! load CPU, runs an edge-triggered epoll loop: each connection sends one masked 64-byte text
//! frame, waits for the server's unmasked echo, checks it byte for byte, and sends the next.
//! One message in flight per connection, like `wrk`'s one request. A phase ends at its
//! deadline once the messages in flight have come back; messages/s is the echoes completed
//! over that time.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::load::{self, Load, Measured};
use crate::proc::RunningServer;
use crate::{Settings, IO_TIMEOUT};

/// Connections, and the text payload of every message.
pub const CONNS: usize = 100;
pub const PAYLOAD: usize = 64;

/// RFC 6455's sample key and its accept value.
const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
const ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

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
pub fn ws_run(srv: &RunningServer, set: &Settings, cpu: usize) -> Result<Load, String> {
    let idle_rss_kib = srv.status()?.rss_kib;
    let mut gen = Generator::open(srv.addr, CONNS)?;
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

/// A connection after its handshake.
struct Conn {
    stream: TcpStream,
    /// The masked frame it sends, and the frame it expects back.
    frame: Vec<u8>,
    expect: Vec<u8>,
    /// How much of `expect` has arrived; of `frame` is written (`frame.len()`: all).
    got: usize,
    wrote: usize,
    in_flight: bool,
    sent_at: Instant,
}

struct Generator {
    conns: Vec<Conn>,
    epoll: Epoll,
}

impl Generator {
    fn open(addr: SocketAddr, n: usize) -> Result<Generator, String> {
        let epoll = Epoll::new().map_err(|e| format!("epoll_create1: {e}"))?;
        let mut conns = Vec::with_capacity(n);
        for i in 0..n {
            let stream = handshake(addr).map_err(|e| format!("WebSocket connection {i}: {e}"))?;
            stream.set_nonblocking(true).map_err(|e| e.to_string())?;
            epoll
                .add(stream.as_raw_fd(), i as u64)
                .map_err(|e| format!("epoll_ctl: {e}"))?;
            // A payload of its own per connection: a mixed-up echo would not match.
            let payload: Vec<u8> = format!("{i:04}-")
                .bytes()
                .chain((0..).map(|j| b'a' + (j % 26) as u8))
                .take(PAYLOAD)
                .collect();
            let mask = (0x9e37_79b9u32.wrapping_mul(i as u32 + 1)).to_be_bytes();
            let mut frame = vec![0x81, 0x80 | PAYLOAD as u8];
            frame.extend_from_slice(&mask);
            frame.extend(payload.iter().enumerate().map(|(j, b)| b ^ mask[j % 4]));
            let mut expect = vec![0x81, PAYLOAD as u8];
            expect.extend_from_slice(&payload);
            conns.push(Conn {
                stream,
                frame,
                expect,
                got: 0,
                wrote: 0,
                in_flight: false,
                sent_at: Instant::now(),
            });
        }
        Ok(Generator { conns, epoll })
    }

    /// Echoes messages on every connection for `d`, then until the ones in flight are back.
    fn drive(&mut self, d: Duration) -> Result<Measured, String> {
        let start = Instant::now();
        let deadline = start + d;
        let mut latencies: Vec<u32> = Vec::with_capacity(1 << 20);
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
                    for &b in &buf[..got] {
                        if !c.in_flight || b != c.expect[c.got] {
                            return Err(format!(
                                "connection {i}: byte {} of the echo is {b:#04x}, expected {}",
                                c.got,
                                if c.in_flight {
                                    format!("{:#04x}", c.expect[c.got])
                                } else {
                                    "nothing (no message in flight)".into()
                                }
                            ));
                        }
                        c.got += 1;
                        if c.got == c.expect.len() {
                            c.got = 0;
                            c.in_flight = false;
                            in_flight -= 1;
                            let us = c.sent_at.elapsed().as_micros();
                            latencies.push(us.min(u32::MAX as u128) as u32);
                        }
                    }
                    if !self.conns[i].in_flight && Instant::now() < deadline {
                        self.send(i)?;
                        in_flight += 1;
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

    /// Starts connection `i`'s next message.
    fn send(&mut self, i: usize) -> Result<(), String> {
        let c = &mut self.conns[i];
        c.in_flight = true;
        c.got = 0;
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

/// The 99th percentile, µs (NaN for none).
fn p99(v: &mut [u32]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len()) - 1;
    let (_, p, _) = v.select_nth_unstable(i);
    *p as f64
}

/// A blocking connect and the upgrade, checked; the socket, with no bytes left unread.
fn handshake(addr: SocketAddr) -> Result<TcpStream, String> {
    let mut s =
        TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(|e| format!("connect: {e}"))?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(IO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(IO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let req = format!(
        "GET /ws HTTP/1.1\r\nhost: {addr}\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\
         sec-websocket-key: {KEY}\r\nsec-websocket-version: 13\r\n\r\n"
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
    let accept = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("sec-websocket-accept")
            .then(|| v.trim().to_string())
    });
    if status != "101" || accept.as_deref() != Some(ACCEPT) {
        return Err(format!("the upgrade was answered {head:?}"));
    }
    Ok(s)
}

const EMPTY_EVENT: libc::epoll_event = libc::epoll_event { events: 0, u64: 0 };

/// An epoll instance, closed when dropped.
struct Epoll(i32);

impl Epoll {
    fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 takes flags only.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Epoll(fd))
    }

    /// Registers `fd` edge-triggered for reads and writes, with `key` as its data.
    fn add(&self, fd: i32, key: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLET | libc::EPOLLRDHUP) as u32,
            u64: key,
        };
        // SAFETY: both descriptors are open, and `ev` is a valid event for the call to read.
        if unsafe { libc::epoll_ctl(self.0, libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits up to `ms` for events; how many were written to `out`.
    fn wait(&self, out: &mut [libc::epoll_event], ms: i32) -> io::Result<usize> {
        loop {
            // SAFETY: `out` is writable for `out.len()` events.
            let n = unsafe { libc::epoll_wait(self.0, out.as_mut_ptr(), out.len() as i32, ms) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        // SAFETY: the descriptor is this value's own and is closed once.
        unsafe { libc::close(self.0) };
    }
}
