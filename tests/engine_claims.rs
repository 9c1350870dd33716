//! Claims of the README's "The engine underneath" that no other test checked, on real
//! sockets on 127.0.0.1:
//!
//! - `Conn::set_handler`: a handler that peeks at a connection's first bytes hands the live
//!   connection to another handler, which gets everything that follows (also bytes the
//!   same round reads, and the connection's last callbacks);
//! - `Conn::shutdown_write`: the peer sees EOF after everything queued, and reads go on;
//! - UDP batching: datagrams sent at once (one sendmmsg, more than one recvmmsg batch,
//!   from several peers) all arrive, each on its peer's connection, and every answer of a
//!   round (several per datagram, sent with sendmmsg) comes back in order.
//!
//! Every test runs under a watchdog, bounds every client operation with a timeout and
//! shuts its engine down. Run on both backends (`FIBR_BACKEND=epoll|portable`).

mod common;

use fibr::{Binding, Config, Conn, Engine, Handler};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::{bounded, connect_within, read_to_eof, wait_until};

const LIMIT: Duration = Duration::from_secs(30);
const IO_TIMEOUT: Duration = Duration::from_secs(10);
const SETTLE: Duration = Duration::from_secs(5);

fn addr(engine: &Engine) -> SocketAddr {
    let addrs = engine.binding_addrs(0);
    assert_eq!(addrs.len(), 1, "{addrs:?}");
    addrs[0]
}

// ---------------------------------------------------------------------------------------
// Conn::set_handler
// ---------------------------------------------------------------------------------------

/// What each handler saw, shared with the test.
#[derive(Default)]
struct Seen {
    /// Callbacks the peeking handler got after it had handed the connection over.
    peek_after_handover: AtomicUsize,
    peek_closed: AtomicUsize,
    /// (handler name, error) for each `on_close` of a protocol handler.
    closed: Mutex<Vec<(&'static str, Option<String>)>>,
    eofs: AtomicUsize,
}

/// Echoes every byte through `map` (the "protocol" the peek chose).
struct Mapper {
    name: &'static str,
    map: fn(u8) -> u8,
    seen: Arc<Seen>,
}

impl Handler for Mapper {
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        let out: Vec<u8> = data.iter().map(|&b| (self.map)(b)).collect();
        let _ = conn.send(&out);
    }
    fn on_eof(&self, conn: &Conn) {
        self.seen.eofs.fetch_add(1, Ordering::SeqCst);
        conn.close();
    }
    fn on_close(&self, _conn: &Conn, err: Option<io::Error>) {
        self.seen
            .closed
            .lock()
            .unwrap()
            .push((self.name, err.map(|e| e.to_string())));
    }
}

/// Marks a connection handed over (its context).
struct HandedOver;

/// Reads a first line (`upper` or `lower`), then hands the connection to the `Mapper` it
/// names, passing it the bytes that came after the line; it keeps nothing else. A callback
/// it gets after that is counted (and answered unmapped, so the client sees it too).
struct Peek {
    seen: Arc<Seen>,
}

impl Handler for Peek {
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        if conn.with_context::<HandedOver, _>(|h| h.is_some()) {
            self.seen.peek_after_handover.fetch_add(1, Ordering::SeqCst);
            let _ = conn.send(data);
            return;
        }
        let mut head = conn.take_context::<Vec<u8>>().unwrap_or_default();
        head.extend_from_slice(data);
        let Some(nl) = head.iter().position(|&b| b == b'\n') else {
            assert!(head.len() < 64, "no protocol line");
            conn.set_context(head);
            return;
        };
        let (name, map): (&'static str, fn(u8) -> u8) = match &head[..nl] {
            b"upper" => ("upper", |b: u8| b.to_ascii_uppercase()),
            b"lower" => ("lower", |b: u8| b.to_ascii_lowercase()),
            other => panic!("unknown protocol {:?}", String::from_utf8_lossy(other)),
        };
        let next = Arc::new(Mapper {
            name,
            map,
            seen: self.seen.clone(),
        });
        conn.set_context(HandedOver);
        conn.set_handler(next.clone());
        // The rest of this read is the new handler's too.
        if head.len() > nl + 1 {
            next.on_data(conn, &head[nl + 1..]);
        }
    }
    fn on_eof(&self, conn: &Conn) {
        self.seen.peek_after_handover.fetch_add(1, Ordering::SeqCst);
        conn.close();
    }
    fn on_close(&self, _conn: &Conn, _err: Option<io::Error>) {
        self.seen.peek_closed.fetch_add(1, Ordering::SeqCst);
    }
}

fn read_exactly(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    s.read_exact(&mut v).expect("read the echo");
    v
}

/// A connection's first bytes pick its handler; the new handler gets the rest of that
/// read, every later read and the connection's EOF and close; the peeking handler gets
/// nothing more.
#[test]
fn set_handler_hands_a_live_connection_over_after_a_peek() {
    bounded(LIMIT, || {
        let seen = Arc::new(Seen::default());
        let engine = Engine::new(
            Config::default(),
            [Binding::tcp("127.0.0.1:0", Peek { seen: seen.clone() })],
        )
        .unwrap();
        let addr = addr(&engine);

        // The line split over two writes, the first data in the line's write.
        let mut up = connect_within(addr, IO_TIMEOUT);
        up.write_all(b"up").unwrap();
        thread::sleep(Duration::from_millis(50));
        up.write_all(b"per\nMixed Case").unwrap();
        assert_eq!(read_exactly(&mut up, 10), b"MIXED CASE");
        let mut low = connect_within(addr, IO_TIMEOUT);
        low.write_all(b"lower\n").unwrap();
        low.write_all(b"Other Conn").unwrap();
        assert_eq!(read_exactly(&mut low, 10), b"other conn");
        for _ in 0..3 {
            up.write_all(b"again, Later").unwrap();
            assert_eq!(read_exactly(&mut up, 12), b"AGAIN, LATER");
        }

        up.shutdown(Shutdown::Write).unwrap();
        let (rest, err) = read_to_eof(&mut up);
        assert!(rest.is_empty() && err.is_none(), "{rest:?} {err:?}");
        drop(low);
        assert!(wait_until(SETTLE, || engine.connections() == 0));
        assert_eq!(seen.peek_after_handover.load(Ordering::SeqCst), 0);
        assert_eq!(seen.peek_closed.load(Ordering::SeqCst), 0);
        assert_eq!(seen.eofs.load(Ordering::SeqCst), 2);
        let mut closed = seen.closed.lock().unwrap().clone();
        closed.sort();
        assert_eq!(closed, [("lower", None), ("upper", None)]);
        engine.shutdown(Duration::from_secs(1));
    });
}

/// The line and 256 KiB behind it in one write, read 4 KiB at a time: the reads after the
/// one that found the line run in the same round, and they too reach the new handler.
#[test]
fn set_handler_applies_within_the_round_that_called_it() {
    bounded(LIMIT, || {
        let seen = Arc::new(Seen::default());
        let config = Config::default().with_read_buffer_size(4096);
        let engine = Engine::new(
            config,
            [Binding::tcp("127.0.0.1:0", Peek { seen: seen.clone() })],
        )
        .unwrap();
        let mut s = connect_within(addr(&engine), IO_TIMEOUT);
        let body: Vec<u8> = (0..256 * 1024).map(|i| b"abcdefgh"[i % 8]).collect();
        let mut msg = b"upper\n".to_vec();
        msg.extend_from_slice(&body);
        let mut w = s.try_clone().unwrap();
        let writer = thread::spawn(move || {
            w.write_all(&msg).unwrap();
            w.shutdown(Shutdown::Write).unwrap();
        });
        let (got, err) = read_to_eof(&mut s);
        writer.join().unwrap();
        assert!(err.is_none(), "{err:?}");
        assert_eq!(got.len(), body.len());
        let lower = got.iter().filter(|b| b.is_ascii_lowercase()).count();
        assert_eq!(
            lower,
            0,
            "{lower} bytes after the handover went to the old handler ({} of its callbacks)",
            seen.peek_after_handover.load(Ordering::SeqCst)
        );
        assert_eq!(got, body.to_ascii_uppercase());
        assert!(wait_until(SETTLE, || engine.connections() == 0));
        assert_eq!(seen.peek_after_handover.load(Ordering::SeqCst), 0);
        assert_eq!(seen.peek_closed.load(Ordering::SeqCst), 0);
        assert_eq!(*seen.closed.lock().unwrap(), [("upper", None)]);
        engine.shutdown(Duration::from_secs(1));
    });
}

// ---------------------------------------------------------------------------------------
// Conn::shutdown_write
// ---------------------------------------------------------------------------------------

/// On "go\n": sends `BIG` bytes and "END", then shuts its write side. Records everything it
/// reads after that, its EOF and its close.
struct HalfCloser {
    after: Arc<Mutex<Vec<u8>>>,
    shut: Arc<AtomicBool>,
    eof: Arc<AtomicBool>,
    closed: Arc<Mutex<Option<Option<String>>>>,
}

const BIG: usize = 8 << 20;

impl Handler for HalfCloser {
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        if self.shut.load(Ordering::SeqCst) {
            self.after.lock().unwrap().extend_from_slice(data);
            // Output after the half close is refused, and costs the connection nothing.
            let e = conn.send(b"too late").unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
            return;
        }
        assert_eq!(data, b"go\n");
        let big: Vec<u8> = (0..BIG).map(|i| (i % 251) as u8).collect();
        conn.send(&big).unwrap();
        conn.send(b"END").unwrap();
        conn.shutdown_write();
        self.shut.store(true, Ordering::SeqCst);
    }
    fn on_eof(&self, conn: &Conn) {
        self.eof.store(true, Ordering::SeqCst);
        conn.close();
    }
    fn on_close(&self, _conn: &Conn, err: Option<io::Error>) {
        *self.closed.lock().unwrap() = Some(err.map(|e| e.to_string()));
    }
}

/// The peer reads everything queued (8 MiB, more than the socket takes at once) and then
/// EOF; the connection still reads what the peer sends afterwards, and its EOF.
#[test]
fn shutdown_write_sends_eof_after_the_queue_and_reads_go_on() {
    bounded(LIMIT, || {
        let h = HalfCloser {
            after: Arc::default(),
            shut: Arc::default(),
            eof: Arc::default(),
            closed: Arc::default(),
        };
        let (after, eof, closed) = (h.after.clone(), h.eof.clone(), h.closed.clone());
        let engine = Engine::new(Config::default(), [Binding::tcp("127.0.0.1:0", h)]).unwrap();
        let mut s = connect_within(addr(&engine), IO_TIMEOUT);
        s.write_all(b"go\n").unwrap();
        let (got, err) = read_to_eof(&mut s);
        assert!(err.is_none(), "expected EOF, got {err:?}");
        assert_eq!(got.len(), BIG + 3, "bytes before EOF");
        assert!(got[..BIG]
            .iter()
            .enumerate()
            .all(|(i, &b)| b == (i % 251) as u8));
        assert_eq!(&got[BIG..], b"END");
        // Our side still writes, and the server still reads.
        assert!(engine.connections() == 1 && closed.lock().unwrap().is_none());
        s.write_all(b"still reading").unwrap();
        assert!(
            wait_until(SETTLE, || *after.lock().unwrap() == b"still reading"),
            "read after the half close: {:?}",
            String::from_utf8_lossy(&after.lock().unwrap())
        );
        assert!(!eof.load(Ordering::SeqCst));
        s.shutdown(Shutdown::Write).unwrap();
        assert!(wait_until(SETTLE, || closed.lock().unwrap().is_some()));
        assert!(eof.load(Ordering::SeqCst));
        assert_eq!(*closed.lock().unwrap(), Some(None), "closed with an error");
        let (tail, err) = read_to_eof(&mut s);
        assert!(tail.is_empty() && err.is_none(), "{tail:?} {err:?}");
        assert!(wait_until(SETTLE, || engine.connections() == 0));
        engine.shutdown(Duration::from_secs(1));
    });
}

// ---------------------------------------------------------------------------------------
// UDP batching
// ---------------------------------------------------------------------------------------

/// Answers each datagram with `REPLIES` datagrams `"{d}/{k}"`; counts peers opened.
struct Fanout {
    opened: Arc<AtomicUsize>,
    received: Arc<AtomicUsize>,
}

const REPLIES: usize = 3;

impl Handler for Fanout {
    fn on_open(&self, _conn: &Conn) {
        self.opened.fetch_add(1, Ordering::SeqCst);
    }
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        self.received.fetch_add(1, Ordering::SeqCst);
        for k in 0..REPLIES {
            let mut d = data.to_vec();
            d.extend_from_slice(format!("/{k}").as_bytes());
            conn.send(&d).unwrap();
        }
    }
}

/// Sends every datagram in one sendmmsg call (all of them queued on the server's socket
/// before it can read more than a few); returns how many the kernel took.
fn send_at_once(s: &UdpSocket, datagrams: &[Vec<u8>]) -> usize {
    use std::os::fd::AsRawFd;
    let mut iovs: Vec<libc::iovec> = datagrams
        .iter()
        .map(|d| libc::iovec {
            iov_base: d.as_ptr() as *mut libc::c_void,
            iov_len: d.len(),
        })
        .collect();
    let mut msgs: Vec<libc::mmsghdr> = iovs
        .iter_mut()
        .map(|iov| {
            // SAFETY: an all-zero mmsghdr is valid plain data (no name: the socket is connected).
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_iov = iov;
            m.msg_hdr.msg_iovlen = 1;
            m
        })
        .collect();
    // SAFETY: every header points at an iovec and a buffer that live through the call.
    let n = unsafe {
        libc::sendmmsg(
            s.as_raw_fd(),
            msgs.as_mut_ptr(),
            msgs.len() as libc::c_uint,
            0,
        )
    };
    assert!(n >= 0, "sendmmsg: {}", io::Error::last_os_error());
    n as usize
}

/// Three peers each send 40 datagrams in one call (more than the 16 a recvmmsg batch
/// takes, so batches hold several datagrams and several peers): every datagram reaches its
/// peer's connection once, and its three answers (queued in one round, sent in one
/// sendmmsg) all come back, in order.
#[test]
fn udp_datagrams_sent_at_once_are_all_received_and_answered_in_order() {
    bounded(LIMIT, || {
        let opened = Arc::new(AtomicUsize::new(0));
        let received = Arc::new(AtomicUsize::new(0));
        let engine = Engine::new(
            Config::default(),
            [Binding::udp(
                "127.0.0.1:0",
                Fanout {
                    opened: opened.clone(),
                    received: received.clone(),
                },
            )],
        )
        .unwrap();
        let server = addr(&engine);
        const PEERS: usize = 3;
        const EACH: usize = 40;
        let clients: Vec<UdpSocket> = (0..PEERS)
            .map(|_| {
                let s = UdpSocket::bind("127.0.0.1:0").unwrap();
                s.connect(server).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                s
            })
            .collect();
        let sent: Vec<Vec<Vec<u8>>> = (0..PEERS)
            .map(|p| {
                (0..EACH)
                    .map(|i| format!("peer {p} datagram {i:02}").into_bytes())
                    .collect()
            })
            .collect();
        for (c, datagrams) in clients.iter().zip(&sent) {
            assert_eq!(send_at_once(c, datagrams), EACH);
        }
        for (p, (c, datagrams)) in clients.iter().zip(&sent).enumerate() {
            let mut buf = [0u8; 256];
            for d in datagrams {
                for k in 0..REPLIES {
                    let n = c.recv(&mut buf).unwrap_or_else(|e| {
                        panic!(
                            "peer {p}: no answer {k} to {:?}: {e} ({} datagrams received in all)",
                            String::from_utf8_lossy(d),
                            received.load(Ordering::SeqCst)
                        )
                    });
                    let want = format!("{}/{k}", String::from_utf8_lossy(d));
                    assert_eq!(String::from_utf8_lossy(&buf[..n]), want, "peer {p}");
                }
            }
        }
        assert_eq!(received.load(Ordering::SeqCst), PEERS * EACH);
        assert_eq!(
            opened.load(Ordering::SeqCst),
            PEERS,
            "one connection per peer"
        );
        assert_eq!(engine.connections(), PEERS);
        engine.shutdown(Duration::from_secs(1));
    });
}
