//! UDP segmentation offloads over real sockets on 127.0.0.1: a GSO burst (UDP_SEGMENT)
//! sent to a UDP binding reaches `on_data` as the datagrams it was cut into, whether the
//! binding's socket reads it coalesced (UDP_GRO) or not; `Conn::send_segments` reaches a
//! plain socket as separate datagrams of the right sizes, with GSO and without
//! (`Config::udp_gso` off), and `Conn::max_segments` tells which. The same holds for a
//! binding whose handler takes the datagrams itself (`Handler::datagrams`): GRO reads
//! reach its `DatagramHandler` split, `UdpSender::send_segments_to` sends as
//! `send_segments` does, and it keeps no connection per peer.
//!
//! Run on both backends: `cargo test --test udp_offload` and
//! `FIBR_BACKEND=portable cargo test --test udp_offload`.

use fibr::{Binding, Config, Conn, DatagramHandler, Engine, Handler, UdpSender};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// `len` bytes that depend on the datagram's `index` and each byte's position, so a
/// datagram cut at the wrong place or delivered out of order is told apart.
fn payload(index: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (index * 31 + i * 7 + 1) as u8).collect()
}

/// `count` datagrams of `size` bytes, the last of `last` bytes.
fn burst(count: usize, size: usize, last: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|k| payload(k, if k + 1 == count { last } else { size }))
        .collect()
}

/// Where the probe answers: the peer's connection, or (taking datagrams itself) the
/// socket, to the sender's address.
trait Reply {
    fn send(&self, data: &[u8]) -> io::Result<()>;
    fn send_segments(&self, data: &[u8], size: usize) -> io::Result<()>;
    fn max_segments(&self) -> usize;
}

impl Reply for Conn {
    fn send(&self, data: &[u8]) -> io::Result<()> {
        Conn::send(self, data)
    }
    fn send_segments(&self, data: &[u8], size: usize) -> io::Result<()> {
        Conn::send_segments(self, data, size)
    }
    fn max_segments(&self) -> usize {
        Conn::max_segments(self)
    }
}

impl Reply for (&UdpSender, SocketAddr) {
    fn send(&self, data: &[u8]) -> io::Result<()> {
        self.0.send_to(self.1, data)
    }
    fn send_segments(&self, data: &[u8], size: usize) -> io::Result<()> {
        self.0.send_segments_to(self.1, data, size)
    }
    fn max_segments(&self) -> usize {
        self.0.max_segments()
    }
}

/// Records the datagrams it gets; on "segments N SIZE LAST" answers "max=K" (its
/// `max_segments`) and then that burst with one `send_segments`; on "bad" answers how
/// `send_segments` refuses what it must. With `direct`, it takes the binding's datagrams
/// itself (`Handler::datagrams`), and counts the sockets closed under it.
struct Probe {
    got: Got,
    direct: bool,
    sockets_closed: Arc<AtomicUsize>,
}

impl Probe {
    fn take(&self, reply: &dyn Reply, data: &[u8]) {
        if let Some(args) = data.strip_prefix(b"segments ") {
            let args: Vec<usize> = std::str::from_utf8(args)
                .unwrap()
                .split(' ')
                .map(|a| a.parse().unwrap())
                .collect();
            let (count, size, last) = (args[0], args[1], args[2]);
            reply
                .send(format!("max={}", reply.max_segments()).as_bytes())
                .unwrap();
            reply
                .send_segments(&burst(count, size, last).concat(), size)
                .unwrap();
        } else if data == b"bad" {
            let zero = reply.send_segments(b"abc", 0).map_err(|e| e.kind());
            let huge = reply.send_segments(b"abc", 70_000).map_err(|e| e.kind());
            let empty = reply.send_segments(b"", 100).map_err(|e| e.kind());
            reply
                .send(format!("{zero:?} {huge:?} {empty:?}").as_bytes())
                .unwrap();
        } else {
            self.got.lock().unwrap().push(data.to_vec());
        }
    }
}

impl Handler for Probe {
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        assert!(
            !self.direct,
            "on_data on a binding whose handler takes datagrams"
        );
        self.take(conn, data)
    }

    fn datagrams(&self) -> Option<&dyn DatagramHandler> {
        self.direct.then_some(self as &dyn DatagramHandler)
    }
}

impl DatagramHandler for Probe {
    fn on_datagram(&self, socket: &UdpSender, from: SocketAddr, datagram: &[u8]) {
        self.take(&(socket, from), datagram)
    }

    fn on_socket_closed(&self, _: &UdpSender) {
        self.sockets_closed.fetch_add(1, Ordering::SeqCst);
    }
}

/// What the probe got, in order.
type Got = Arc<Mutex<Vec<Vec<u8>>>>;

/// An engine with a probe on a UDP binding: the engine, the binding's address, what the
/// probe got, and how many sockets closed under it.
fn start_probe(config: Config, direct: bool) -> (Engine, SocketAddr, Got, Arc<AtomicUsize>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let sockets_closed = Arc::new(AtomicUsize::new(0));
    let probe = Probe {
        got: got.clone(),
        direct,
        sockets_closed: sockets_closed.clone(),
    };
    let engine =
        Engine::new(config, [Binding::udp("127.0.0.1:0", probe)]).expect("start the engine");
    let addrs = engine.binding_addrs(0);
    (engine, addrs[0], got, sockets_closed)
}

/// A plain socket connected to `server`, with room for a few hundred datagrams.
fn client(server: SocketAddr) -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.connect(server).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    set_int(&s, libc::SOL_SOCKET, libc::SO_RCVBUF, 4 << 20).unwrap();
    s
}

fn set_int(s: &UdpSocket, level: i32, name: i32, value: i32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: passes a valid c_int option value of the right size on an open socket.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            name,
            (&value as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sends `data` as datagrams of `size` bytes in one sendmsg with UDP_SEGMENT (GSO).
#[cfg(target_os = "linux")]
fn gso_send(s: &UdpSocket, data: &[u8], size: u16) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    #[repr(C, align(8))]
    struct Ctrl([u8; 64]);
    let mut ctrl = Ctrl([0; 64]);
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut _,
        iov_len: data.len(),
    };
    // SAFETY: an all-zero msghdr is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctrl.0.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is arithmetic.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(2) } as _;
    // SAFETY: the control buffer is aligned and holds CMSG_SPACE(2) bytes, room for one
    // header and its u16; msg points at live data for the sendmsg call.
    let r = unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_UDP;
        (*c).cmsg_type = libc::UDP_SEGMENT;
        (*c).cmsg_len = libc::CMSG_LEN(2) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), size);
        libc::sendmsg(s.as_raw_fd(), &msg, 0)
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Sends the burst as one GSO send where this kernel has it, else datagram by datagram.
fn send_burst(s: &UdpSocket, parts: &[Vec<u8>]) {
    #[cfg(target_os = "linux")]
    match gso_send(s, &parts.concat(), parts[0].len() as u16) {
        Ok(_) => return,
        Err(e) => eprintln!("no GSO send here ({e}): datagram by datagram"),
    }
    for p in parts {
        s.send(p).unwrap();
    }
}

/// Each configuration with the probe in both roles: a connection per peer, and taking the
/// binding's datagrams itself.
fn modes<const N: usize>(
    configs: [(&'static str, Config); N],
) -> impl Iterator<Item = (String, Config, bool)> {
    configs.into_iter().flat_map(|(name, config)| {
        [false, true].map(|direct| {
            let role = if direct {
                "datagram handler"
            } else {
                "per peer"
            };
            (format!("{name}, {role}"), config.clone(), direct)
        })
    })
}

fn wait_for(got: &Mutex<Vec<Vec<u8>>>, count: usize) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + IO_TIMEOUT;
    loop {
        let now = got.lock().unwrap().clone();
        if now.len() >= count || Instant::now() > deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn check_datagrams(got: &[Vec<u8>], want: &[Vec<u8>], what: &str) {
    let sizes = |v: &[Vec<u8>]| v.iter().map(|d| d.len()).collect::<Vec<_>>();
    assert_eq!(sizes(got), sizes(want), "{what}: datagram sizes");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(g == w, "{what}: datagram {k} differs");
    }
}

fn recv_one(s: &UdpSocket, buf: &mut [u8]) -> Vec<u8> {
    let n = s.recv(buf).expect("a datagram from the server");
    buf[..n].to_vec()
}

#[test]
fn a_gso_burst_reaches_on_data_as_its_datagrams() {
    for (name, config, direct) in modes([
        ("default", Config::default()),
        ("udp_gro off", Config::default().with_udp_gro(false)),
    ]) {
        let (engine, server, got, _) = start_probe(config, direct);
        let c = client(server);
        let mut want = Vec::new();
        // Equal segments with a short last one, equal ones only, and a lone datagram.
        for (count, size, last) in [(21, 1200, 77), (8, 1000, 1000), (40, 1, 1), (1, 500, 500)] {
            let parts = burst(count, size, last);
            send_burst(&c, &parts);
            want.extend(parts);
        }
        c.send(b"plain").unwrap();
        want.push(b"plain".to_vec());
        let seen = wait_for(&got, want.len());
        check_datagrams(&seen, &want, &name);
        engine.shutdown(Duration::from_secs(1));
    }
}

#[test]
fn send_segments_reaches_a_plain_socket_as_separate_datagrams() {
    for (name, config, direct) in modes([
        ("default", Config::default()),
        ("udp_gso off", Config::default().with_udp_gso(false)),
    ]) {
        let gso = cfg!(target_os = "linux") && config.udp_gso;
        let (engine, server, _, _) = start_probe(config, direct);
        let c = client(server);
        let mut buf = vec![0u8; 65_536];
        // One GSO send; three (54 + 54 + 42 segments of 1200 bytes, each under 64 KiB);
        // three (64 + 64 + 22: the segment cap); big segments; one datagram.
        for (count, size, last) in [
            (10, 1000, 1000),
            (150, 1200, 33),
            (150, 100, 100),
            (3, 20_000, 5),
            (1, 500, 200),
        ] {
            c.send(format!("segments {count} {size} {last}").as_bytes())
                .unwrap();
            let max = recv_one(&c, &mut buf);
            let max = String::from_utf8(max).unwrap();
            assert_eq!(max, format!("max={}", if gso { 64 } else { 1 }), "{name}");
            let got: Vec<Vec<u8>> = (0..count).map(|_| recv_one(&c, &mut buf)).collect();
            check_datagrams(
                &got,
                &burst(count, size, last),
                &format!("{name}, {count} x {size}"),
            );
        }
        // Refusals, and nothing sent for them.
        c.send(b"bad").unwrap();
        assert_eq!(
            String::from_utf8(recv_one(&c, &mut buf)).unwrap(),
            "Err(InvalidInput) Err(InvalidInput) Ok(())"
        );
        c.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        assert!(
            c.recv(&mut buf).is_err(),
            "{name}: a refused send sent something"
        );
        engine.shutdown(Duration::from_secs(1));
    }
}

#[test]
fn a_datagram_handler_answers_every_peer_from_one_socket_with_no_connections() {
    let (engine, server, got, sockets_closed) = start_probe(Config::default(), true);
    let peers: Vec<UdpSocket> = (0..20).map(|_| client(server)).collect();
    let mut buf = vec![0u8; 65_536];
    for (i, c) in peers.iter().enumerate() {
        c.send(format!("peer {i}").as_bytes()).unwrap();
        // Each answer reaches the peer that asked, from the binding's own address.
        c.send(format!("segments 3 {} 7", 100 + i).as_bytes())
            .unwrap();
        recv_one(c, &mut buf);
        let answer: Vec<Vec<u8>> = (0..3).map(|_| recv_one(c, &mut buf)).collect();
        check_datagrams(&answer, &burst(3, 100 + i, 7), &format!("peer {i}"));
    }
    let seen = wait_for(&got, peers.len());
    let mut seen: Vec<String> = seen
        .into_iter()
        .map(|d| String::from_utf8(d).unwrap())
        .collect();
    seen.sort();
    let mut want: Vec<String> = (0..peers.len()).map(|i| format!("peer {i}")).collect();
    want.sort();
    assert_eq!(seen, want);
    assert_eq!(
        engine.connections(),
        0,
        "a datagram handler's peers are not connections"
    );
    assert_eq!(sockets_closed.load(Ordering::SeqCst), 0);
    // Removing the binding tells the handler its socket is gone.
    assert!(engine.remove_binding(0));
    let deadline = Instant::now() + IO_TIMEOUT;
    while sockets_closed.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(sockets_closed.load(Ordering::SeqCst), 1);
    engine.shutdown(Duration::from_secs(1));
}
