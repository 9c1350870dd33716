//! The floor: a minimal single-threaded, edge-triggered epoll responder that answers every
//! request head with one fixed `200 hello` response. No framework and not a real server (no
//! routing, no validation, no timeouts, no Date header): it shows the least CPU a request can
//! cost on this kernel, which is what the bench compares the real servers with.
//!
//! `floor 0`. Pipelined heads are counted (`\r\n\r\n`) and answered in one write per read
//! burst; a body is skipped by its `Content-Length`; an HTTP/1.0 request without
//! `keep-alive` is answered and the connection closed (the churn scenario's `ab`).
//! `BENCH_WORKERS` is accepted and ignored: the floor has one thread.

use std::io;
use std::os::raw::c_int;

const RESPONSE: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: 5\r\n\r\nhello";
/// Bytes read per `read(2)`.
const READ_BUF: usize = 64 * 1024;
/// A head longer than this closes the connection.
const MAX_HEAD: usize = 16 * 1024;
const LISTENER: u64 = u64::MAX;

/// Per-connection state; an idle connection has no heap allocation.
#[derive(Default)]
struct Conn {
    open: bool,
    /// Body bytes still to skip.
    skip: u64,
    /// The start of a head that a read split.
    head: Vec<u8>,
    /// Output the socket did not take yet.
    out: Vec<u8>,
    /// Close once `out` is written (HTTP/1.0 without keep-alive).
    close_after: bool,
}

fn check(r: c_int) -> io::Result<c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn find_head_end(b: &[u8]) -> Option<usize> {
    b.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

fn contains_ignore_case(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

/// What one head asks of the floor: (body bytes to skip, close after answering).
fn parse_head(head: &[u8]) -> (u64, bool) {
    let line_end = head.iter().position(|&b| b == b'\r').unwrap_or(head.len());
    let line = &head[..line_end];
    let close = line.ends_with(b"HTTP/1.0") && contains_ignore_case(head, b"keep-alive").is_none();
    if line.starts_with(b"GET ") || line.starts_with(b"HEAD ") {
        return (0, close);
    }
    let skip = contains_ignore_case(head, b"\ncontent-length:")
        .map(|i| {
            head[i + 16..]
                .iter()
                .skip_while(|b| **b == b' ' || **b == b'\t')
                .take_while(|b| b.is_ascii_digit())
                .fold(0u64, |n, d| {
                    n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
                })
        })
        .unwrap_or(0);
    (skip, close)
}

impl Conn {
    /// Consumes bytes read; returns the number of complete heads, or None on a bad head.
    fn feed(&mut self, mut data: &[u8]) -> Option<usize> {
        let mut heads = 0;
        while !data.is_empty() {
            if self.close_after {
                // Nothing after a closing request is answered.
                return Some(heads);
            }
            if self.skip > 0 {
                let k = (self.skip.min(data.len() as u64)) as usize;
                self.skip -= k as u64;
                data = &data[k..];
                continue;
            }
            if self.head.is_empty() {
                match find_head_end(data) {
                    Some(end) => {
                        (self.skip, self.close_after) = parse_head(&data[..end]);
                        heads += 1;
                        data = &data[end..];
                    }
                    None => {
                        self.head.extend_from_slice(data);
                        break;
                    }
                }
            } else {
                let old = self.head.len();
                self.head.extend_from_slice(data);
                match find_head_end(&self.head[old.saturating_sub(3)..]) {
                    Some(end) => {
                        let end = old.saturating_sub(3) + end;
                        (self.skip, self.close_after) = parse_head(&self.head[..end]);
                        heads += 1;
                        let used = end - old;
                        self.head = Vec::new();
                        data = &data[used..];
                    }
                    None => break,
                }
            }
        }
        if self.head.len() > MAX_HEAD {
            return None;
        }
        Some(heads)
    }
}

struct Floor {
    ep: c_int,
    listener: c_int,
    conns: Vec<Conn>,
    buf: Vec<u8>,
}

impl Floor {
    fn add(&mut self, fd: c_int, events: u32) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events,
            u64: if fd == self.listener {
                LISTENER
            } else {
                fd as u64
            },
        };
        // SAFETY: `ev` is a valid epoll_event; the descriptors are ours.
        check(unsafe { libc::epoll_ctl(self.ep, libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
        Ok(())
    }

    fn close(&mut self, fd: c_int) {
        if let Some(c) = self.conns.get_mut(fd as usize) {
            *c = Conn::default();
        }
        // SAFETY: `fd` is an open connection of ours; closing removes it from the epoll set.
        unsafe { libc::close(fd) };
    }

    fn accept_all(&mut self) {
        loop {
            // SAFETY: null address pointers are allowed; the listener is ours.
            let fd = unsafe {
                libc::accept4(
                    self.listener,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                )
            };
            if fd < 0 {
                // EAGAIN: all taken. EMFILE and the like: drop it for now (edge-triggered,
                // so the next connection wakes the listener again).
                return;
            }
            let i = fd as usize;
            if self.conns.len() <= i {
                self.conns.resize_with(i + 1, Conn::default);
            }
            self.conns[i] = Conn {
                open: true,
                ..Conn::default()
            };
            let events = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32;
            if self.add(fd, events).is_err() {
                self.close(fd);
            }
        }
    }

    /// Writes what is pending; Ok(true) when all of it left.
    fn flush(&mut self, fd: c_int) -> io::Result<bool> {
        let c = &mut self.conns[fd as usize];
        let mut done = 0;
        while done < c.out.len() {
            // SAFETY: the slice is valid for its length; `fd` is an open socket.
            let n = unsafe { libc::write(fd, c.out[done..].as_ptr().cast(), c.out.len() - done) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::WouldBlock {
                    break;
                }
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            done += n as usize;
        }
        c.out.drain(..done);
        if c.out.is_empty() {
            // An idle connection keeps no buffer.
            c.out = Vec::new();
            return Ok(true);
        }
        Ok(false)
    }

    fn ready(&mut self, fd: c_int, events: u32) {
        if !self.conns.get(fd as usize).is_some_and(|c| c.open) {
            return;
        }
        let mut heads = 0;
        let mut eof = events & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0;
        if events & (libc::EPOLLIN | libc::EPOLLRDHUP) as u32 != 0 {
            loop {
                // SAFETY: `buf` has READ_BUF writable bytes; `fd` is an open socket.
                let n = unsafe { libc::read(fd, self.buf.as_mut_ptr().cast(), READ_BUF) };
                if n > 0 {
                    let data = &self.buf[..n as usize];
                    match self.conns[fd as usize].feed(data) {
                        Some(h) => heads += h,
                        None => {
                            eof = true;
                            break;
                        }
                    }
                    continue;
                }
                if n == 0 {
                    eof = true;
                    break;
                }
                match io::Error::last_os_error().kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => break,
                    _ => {
                        eof = true;
                        break;
                    }
                }
            }
        }
        let c = &mut self.conns[fd as usize];
        for _ in 0..heads {
            c.out.extend_from_slice(RESPONSE);
        }
        let close_after = c.close_after;
        let flushed = match self.flush(fd) {
            Ok(all) => all,
            Err(_) => {
                self.close(fd);
                return;
            }
        };
        if (eof || close_after) && flushed {
            self.close(fd);
        }
    }

    fn run(&mut self) -> io::Result<()> {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
        loop {
            // SAFETY: `events` has room for its length in entries.
            let n = unsafe {
                libc::epoll_wait(self.ep, events.as_mut_ptr(), events.len() as c_int, -1)
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            for ev in &events[..n as usize] {
                let (token, flags) = (ev.u64, ev.events);
                if token == LISTENER {
                    self.accept_all();
                } else {
                    self.ready(token as c_int, flags);
                }
            }
        }
    }
}

fn main() -> io::Result<()> {
    let (addr, _workers) = fibr_bench_peers::args("floor")?;
    let std::net::SocketAddr::V4(v4) = addr else {
        unreachable!("args() binds 127.0.0.1")
    };
    // SAFETY: plain socket calls on descriptors this function owns; the structs passed are
    // valid for the sizes given.
    let listener = unsafe {
        let fd = check(libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        ))?;
        let one: c_int = 1;
        check(libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const c_int).cast(),
            std::mem::size_of::<c_int>() as libc::socklen_t,
        ))?;
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: v4.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*v4.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        check(libc::bind(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ))?;
        check(libc::listen(fd, 4096))?;
        fd
    };
    // SAFETY: as above.
    let bound = unsafe {
        let mut sa: libc::sockaddr_in = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        check(libc::getsockname(
            listener,
            (&mut sa as *mut libc::sockaddr_in).cast(),
            &mut len,
        ))?;
        std::net::SocketAddr::from((
            u32::from_be(sa.sin_addr.s_addr).to_be_bytes(),
            u16::from_be(sa.sin_port),
        ))
    };
    // SAFETY: no preconditions.
    let ep = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
    let mut floor = Floor {
        ep,
        listener,
        conns: Vec::new(),
        buf: vec![0; READ_BUF],
    };
    floor.add(listener, (libc::EPOLLIN | libc::EPOLLET) as u32)?;
    eprintln!("floor (1 thread) listening on {bound}");
    floor.run()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_pipelined_heads_across_reads_and_skips_bodies() {
        let mut c = Conn::default();
        let two = b"GET / HTTP/1.1\r\nhost: x\r\n\r\nGET / HTTP/1.1\r\nhost: x\r\n\r\n";
        assert_eq!(c.feed(two), Some(2));
        // A head split after "\r\n\r" and one split mid-line.
        assert_eq!(c.feed(b"GET / HTTP/1.1\r\nhost: x\r\n\r"), Some(0));
        assert_eq!(c.feed(b"\nGET / HT"), Some(1));
        assert_eq!(c.feed(b"TP/1.1\r\n\r\n"), Some(1));
        // A POST body (with "\r\n\r\n" inside it) is skipped, even split.
        let post = b"POST /echo HTTP/1.1\r\nContent-Length: 10\r\n\r\nab\r\n\r\ncd";
        assert_eq!(c.feed(post), Some(1));
        assert_eq!(c.skip, 2);
        assert_eq!(c.feed(b"cdGET / HTTP/1.1\r\n\r\n"), Some(1));
        assert!(!c.close_after);
        assert_eq!(
            c.feed(b"GET / HTTP/1.0\r\n\r\nGET / HTTP/1.0\r\n\r\n"),
            Some(1)
        );
        assert!(c.close_after);
        let mut k = Conn::default();
        assert_eq!(
            k.feed(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"),
            Some(1)
        );
        assert!(!k.close_after);
    }
}
