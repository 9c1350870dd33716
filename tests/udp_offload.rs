//! UDP segmentation offloads over real sockets on 127.0.0.1: a GSO burst (UDP_SEGMENT)
//! sent to a UDP binding reaches `on_data` as the datagrams it was cut into, whether the
//! binding's socket reads it coalesced (UDP_GRO) or not; `Conn::send_segments` reaches a
//! plain socket as separate datagrams of the right sizes, with GSO and without
//! (`Config::udp_gso` off), and `Conn::max_segments` tells which.
//!
//! Run on both backends: `cargo test --test udp_offload` and
//! `FIBR_BACKEND=portable cargo test --test udp_offload`.

use fibr::{Binding, Config, Conn, Engine, Handler};
use std::io;
use std::net::{SocketAddr, UdpSocket};
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

/// Records the datagrams it gets; on "segments N SIZE LAST" answers "max=K" (its
/// `max_segments`) and then that burst with one `send_segments`; on "bad" answers how
/// `send_segments` refuses what it must.
struct Probe {
    got: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Handler for Probe {
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        if let Some(args) = data.strip_prefix(b"segments ") {
            let args: Vec<usize> = std::str::from_utf8(args)
                .unwrap()
                .split(' ')
                .map(|a| a.parse().unwrap())
                .collect();
            let (count, size, last) = (args[0], args[1], args[2]);
            conn.send(format!("max={}", conn.max_segments()).as_bytes())
                .unwrap();
            conn.send_segments(&burst(count, size, last).concat(), size)
                .unwrap();
        } else if data == b"bad" {
            let zero = conn.send_segments(b"abc", 0).map_err(|e| e.kind());
            let huge = conn.send_segments(b"abc", 70_000).map_err(|e| e.kind());
            let empty = conn.send_segments(b"", 100).map_err(|e| e.kind());
            conn.send(format!("{zero:?} {huge:?} {empty:?}").as_bytes())
                .unwrap();
        } else {
            self.got.lock().unwrap().push(data.to_vec());
        }
    }
}

fn start(config: Config) -> (Engine, SocketAddr, Arc<Mutex<Vec<Vec<u8>>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let engine = Engine::new(
        config,
        [Binding::udp("127.0.0.1:0", Probe { got: got.clone() })],
    )
    .expect("start the engine");
    let addrs = engine.binding_addrs(0);
    (engine, addrs[0], got)
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
    for (name, config) in [
        ("default", Config::default()),
        ("udp_gro off", Config::default().with_udp_gro(false)),
    ] {
        let (engine, server, got) = start(config);
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
        check_datagrams(&seen, &want, name);
        engine.shutdown(Duration::from_secs(1));
    }
}

#[test]
fn send_segments_reaches_a_plain_socket_as_separate_datagrams() {
    for (name, config, gso) in [
        ("default", Config::default(), cfg!(target_os = "linux")),
        ("udp_gso off", Config::default().with_udp_gso(false), false),
    ] {
        let (engine, server, _) = start(config);
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
