//! Async sockets (`fibr::net`) on real 127.0.0.1 / Unix sockets: TCP echo (large, both
//! ways at once, many connections), `from_std`, refused connects, EOF, UDP, Unix streams,
//! timeouts on reads, and interop with `std::net` peers.
//!
//! Every test body runs under a watchdog (`bounded`), and std sockets get read/write
//! timeouts, so a hang fails the test instead of stalling the suite.

mod common;

use fibr::net::{TcpListener, TcpStream, UdpSocket, UnixListener, UnixStream};
use fibr::time::{self, timeout};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use common::{bounded, step, try_connect, TempPath};

const LIMIT: Duration = Duration::from_secs(10);

/// A deterministic, position-dependent byte pattern (so reordering or loss shows).
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(7) as u8 ^ seed)
        .collect()
}

/// A connected pair of TCP streams on 127.0.0.1: (client, accepted server side).
async fn tcp_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accept = fibr::spawn(async move { listener.accept().await.map(|(s, _)| s) });
    let c = step("connect", TcpStream::connect(addr)).await.unwrap();
    let s = step("accept", accept).await.unwrap().unwrap();
    (c, s)
}

/// Echoes everything read until end of stream, then shuts down its write half.
/// Returns the number of bytes echoed.
async fn echo_tcp(s: TcpStream) -> io::Result<usize> {
    let mut buf = vec![0u8; 16 * 1024];
    let mut total = 0;
    loop {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            s.shutdown().await?;
            return Ok(total);
        }
        s.write_all(&buf[..n]).await?;
        total += n;
    }
}

/// Reads until end of stream.
async fn read_to_end_tcp(s: &TcpStream) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn tcp_echo_one_mib_both_ways_concurrently() {
    const LEN: usize = 1 << 20;
    bounded(LIMIT, || {
        fibr::run(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            assert_eq!(addr.ip(), std::net::Ipv4Addr::LOCALHOST);
            assert_ne!(addr.port(), 0);

            let server = fibr::spawn(async move {
                let (s, peer) = listener.accept().await?;
                assert_eq!(s.peer_addr()?, peer);
                // The server echoes in one task; the client writes and reads concurrently
                // in two (see also `tcp_server_split_reader_and_writer_tasks`).
                echo_tcp(s).await
            });

            let client = Arc::new(step("connect", TcpStream::connect(addr)).await.unwrap());
            assert_eq!(client.peer_addr().unwrap(), addr);
            let data = Arc::new(pattern(LEN, 0x5a));

            let (w, d) = (client.clone(), data.clone());
            let writer = fibr::spawn(async move {
                // Uneven chunks so writes do not line up with reads.
                for chunk in d.chunks(7919) {
                    w.write_all(chunk).await?;
                }
                w.shutdown().await?;
                io::Result::Ok(())
            });
            let r = client.clone();
            let reader = fibr::spawn(async move { read_to_end_tcp(&r).await });

            let (wr, rd) = step("echo 1 MiB", async { (writer.await, reader.await) }).await;
            wr.unwrap().unwrap();
            let got = rd.unwrap().unwrap();
            assert_eq!(got.len(), LEN);
            assert!(got == *data, "echoed bytes differ");
            let echoed = step("server", server).await.unwrap().unwrap();
            assert_eq!(echoed, LEN);
        });
    });
}

#[test]
fn tcp_server_split_reader_and_writer_tasks() {
    // Both sides split: the server reads in one task and writes in another, sharing an
    // Arc<TcpStream>; the client does the same. Data flows both ways at once, with no echo
    // dependency between the directions.
    const LEN: usize = 1 << 20;
    bounded(LIMIT, || {
        fibr::run(async {
            let (client, server) = tcp_pair().await;
            let (client, server) = (Arc::new(client), Arc::new(server));

            let mut hs = Vec::new();
            for (me, seed) in [(client.clone(), 1u8), (server.clone(), 2u8)] {
                let w = me.clone();
                hs.push(fibr::spawn(async move {
                    w.write_all(&pattern(LEN, seed)).await?;
                    w.shutdown().await?;
                    io::Result::Ok(Vec::new())
                }));
                hs.push(fibr::spawn(async move { read_to_end_tcp(&me).await }));
            }
            let mut outs = Vec::new();
            for h in hs {
                outs.push(step("split transfer", h).await.unwrap().unwrap());
            }
            // outs: [client write, client read, server write, server read]
            assert!(outs[1] == pattern(LEN, 2), "client got the wrong bytes");
            assert!(outs[3] == pattern(LEN, 1), "server got the wrong bytes");
        });
    });
}

#[test]
fn tcp_listener_from_std() {
    bounded(LIMIT, || {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = std_listener.local_addr().unwrap();
        fibr::run(async move {
            let listener = TcpListener::from_std(std_listener).unwrap();
            assert_eq!(listener.local_addr().unwrap(), addr);
            let server = fibr::spawn(async move {
                let (s, _) = listener.accept().await?;
                echo_tcp(s).await
            });
            let c = step("connect", TcpStream::connect(addr)).await.unwrap();
            c.write_all(b"from std").await.unwrap();
            c.shutdown().await.unwrap();
            let got = step("read", read_to_end_tcp(&c)).await.unwrap();
            assert_eq!(got, b"from std");
            assert_eq!(step("server", server).await.unwrap().unwrap(), 8);
        });
    });
}

#[test]
fn every_address_form_resolves_and_connects() {
    bounded(LIMIT, || {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = std_listener.local_addr().unwrap().port();
        fibr::run(async move {
            let listener = TcpListener::from_std(std_listener).unwrap();
            let accepted = fibr::spawn(async move {
                for _ in 0..5 {
                    listener.accept().await?;
                }
                io::Result::Ok(())
            });
            let name = format!("localhost:{port}");
            // A host name (resolved on a resolver thread), a string literal, a (host, port)
            // pair, an (ip, port) pair and a socket address.
            step("name", TcpStream::connect(name.as_str()))
                .await
                .unwrap();
            step("String", TcpStream::connect(format!("127.0.0.1:{port}")))
                .await
                .unwrap();
            step("(host, port)", TcpStream::connect(("localhost", port)))
                .await
                .unwrap();
            let ip: std::net::IpAddr = "127.0.0.1".parse().unwrap();
            step("(ip, port)", TcpStream::connect((ip, port)))
                .await
                .unwrap();
            let sa = std::net::SocketAddr::new(ip, port);
            step("SocketAddr", TcpStream::connect(&sa)).await.unwrap();
            step("accepted", accepted).await.unwrap().unwrap();

            let found: Vec<_> = step("lookup_host", fibr::net::lookup_host(name.as_str()))
                .await
                .unwrap()
                .collect();
            assert!(
                found
                    .iter()
                    .all(|a| a.port() == port && a.ip().is_loopback()),
                "{found:?}"
            );
            assert!(!found.is_empty());
            // Errors are errors, not hangs: no port, a name that cannot exist.
            assert!(step("no port", fibr::net::lookup_host("localhost"))
                .await
                .is_err());
            assert!(step(
                "bad name",
                fibr::net::lookup_host("no-such-host.invalid:80")
            )
            .await
            .is_err());
        });
    });
}

#[test]
fn connect_to_a_closed_port_is_refused_not_a_hang() {
    bounded(LIMIT, || {
        // A port that was just free: bind, note it, close.
        let addr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        fibr::run(async move {
            for _ in 0..3 {
                let t0 = Instant::now();
                let r = step("connect to a closed port", TcpStream::connect(addr)).await;
                let e = match r {
                    Ok(_) => panic!("connected to a closed port {addr}"),
                    Err(e) => e,
                };
                assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e:?}");
                assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
            }
        });
    });
}

#[test]
fn read_returns_zero_at_eof_after_peer_shutdown() {
    bounded(LIMIT, || {
        fibr::run(async {
            let (c, s) = tcp_pair().await;

            c.write_all(b"last words").await.unwrap();
            c.shutdown().await.unwrap();
            let mut buf = [0u8; 10];
            step("read_exact", s.read_exact(&mut buf)).await.unwrap();
            assert_eq!(&buf, b"last words");
            let mut more = [0u8; 64];
            assert_eq!(step("read at eof", s.read(&mut more)).await.unwrap(), 0);
            // EOF is sticky.
            assert_eq!(
                step("read at eof again", s.read(&mut more)).await.unwrap(),
                0
            );
            // read_exact at EOF is UnexpectedEof.
            let e = step("read_exact at eof", s.read_exact(&mut more))
                .await
                .unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);

            // The other direction is still open: the server can answer the half-closed client.
            s.write_all(b"ack").await.unwrap();
            s.shutdown_std(Shutdown::Write).unwrap();
            let got = step("client read", read_to_end_tcp(&c)).await.unwrap();
            assert_eq!(got, b"ack");

            // EOF while a read is already pending (the wake-up comes from the loop).
            let (c, s) = tcp_pair().await;
            let s = Arc::new(s);
            let s2 = s.clone();
            let pending_read = fibr::spawn(async move {
                let mut b = [0u8; 16];
                s2.read(&mut b).await
            });
            time::sleep(Duration::from_millis(30)).await;
            assert!(!pending_read.is_finished());
            drop(c); // close: the server sees EOF
            assert_eq!(
                step("pending read", pending_read).await.unwrap().unwrap(),
                0
            );
        });
    });
}

/// A FIN that comes while no task reads (after a short read drained the socket) is seen
/// by the next single poll, on both backends: the client's check of a pooled connection at
/// checkout is such a poll.
#[test]
fn a_fin_while_nobody_reads_is_seen_by_the_next_poll() {
    bounded(LIMIT, || {
        fibr::run(async {
            let (c, s) = tcp_pair().await;
            c.write_all(b"hi").await.unwrap();
            let mut buf = [0u8; 64];
            assert_eq!(step("short read", s.read(&mut buf)).await.unwrap(), 2);
            drop(c);
            time::sleep(Duration::from_millis(50)).await;
            let once = std::future::poll_fn(|cx| {
                let mut b = [0u8; 64];
                std::task::Poll::Ready(s.poll_read(cx, &mut b))
            })
            .await;
            assert!(
                matches!(once, std::task::Poll::Ready(Ok(0))),
                "the peer's close went unseen: {once:?}"
            );
        });
    });
}

#[test]
fn udp_send_to_recv_from_and_connected_send_recv() {
    bounded(LIMIT, || {
        fibr::run(async {
            let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
            assert_ne!(aa, ba);

            // Unconnected: send_to / recv_from, both directions.
            assert_eq!(a.send_to(b"ping", ba).await.unwrap(), 4);
            let mut buf = [0u8; 1500];
            let (n, from) = step("recv_from", b.recv_from(&mut buf)).await.unwrap();
            assert_eq!((&buf[..n], from), (&b"ping"[..], aa));
            assert_eq!(b.send_to(b"pong!", from).await.unwrap(), 5);
            let (n, from) = step("recv_from", a.recv_from(&mut buf)).await.unwrap();
            assert_eq!((&buf[..n], from), (&b"pong!"[..], ba));

            // A recv that waits for a datagram sent later (woken by the loop).
            let b = Arc::new(b);
            let b2 = b.clone();
            let waiting = fibr::spawn(async move {
                let mut buf = [0u8; 64];
                let (n, from) = b2.recv_from(&mut buf).await?;
                io::Result::Ok((buf[..n].to_vec(), from))
            });
            time::sleep(Duration::from_millis(20)).await;
            a.send_to(b"late", ba).await.unwrap();
            let (got, from) = step("pending recv_from", waiting).await.unwrap().unwrap();
            assert_eq!((got.as_slice(), from), (&b"late"[..], aa));

            // Connected: send / recv.
            a.connect(ba).await.unwrap();
            b.connect(aa).await.unwrap();
            for i in 0..10u8 {
                let msg = [i; 100];
                assert_eq!(a.send(&msg).await.unwrap(), 100);
                let n = step("recv", b.recv(&mut buf)).await.unwrap();
                assert_eq!(&buf[..n], &msg[..]);
                assert_eq!(
                    b.send(&msg[..(i as usize + 1)]).await.unwrap(),
                    i as usize + 1
                );
                let n = step("recv", a.recv(&mut buf)).await.unwrap();
                assert_eq!(&buf[..n], &msg[..(i as usize + 1)]);
            }

            // A connected socket filters other senders.
            let c = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            c.send_to(b"intruder", ba).await.unwrap();
            a.send(b"friend").await.unwrap();
            let n = step("filtered recv", b.recv(&mut buf)).await.unwrap();
            assert_eq!(&buf[..n], b"friend");
        });
    });
}

#[test]
fn udp_many_datagrams_to_a_std_peer() {
    bounded(LIMIT, || {
        let std_peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        std_peer
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let peer_addr = std_peer.local_addr().unwrap();
        // The std peer echoes 100 datagrams.
        let echo = thread::spawn(move || {
            let mut buf = [0u8; 2048];
            for _ in 0..100 {
                let (n, from) = std_peer.recv_from(&mut buf)?;
                std_peer.send_to(&buf[..n], from)?;
            }
            io::Result::Ok(())
        });
        fibr::run(async move {
            let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let mut buf = [0u8; 2048];
            for i in 0..100usize {
                let msg = pattern(1 + i * 13, i as u8);
                s.send_to(&msg, peer_addr).await.unwrap();
                let (n, from) = step("recv echo", s.recv_from(&mut buf)).await.unwrap();
                assert_eq!(from, peer_addr);
                assert_eq!(&buf[..n], &msg[..]);
            }
        });
        echo.join().unwrap().unwrap();
    });
}

#[test]
fn unix_stream_echo() {
    bounded(LIMIT, || {
        let sock = TempPath::sock("net-echo");
        let path = sock.to_path_buf();
        fibr::run(async move {
            let listener = UnixListener::bind(&path).unwrap();
            let server = fibr::spawn(async move {
                let mut total = 0;
                for _ in 0..2 {
                    let s = listener.accept().await?;
                    let mut buf = vec![0u8; 8192];
                    loop {
                        let n = s.read(&mut buf).await?;
                        if n == 0 {
                            s.shutdown().await?;
                            break;
                        }
                        s.write_all(&buf[..n]).await?;
                        total += n;
                    }
                }
                io::Result::Ok(total)
            });
            let mut expected = 0;
            for (len, seed) in [(13usize, 1u8), (300_000, 2)] {
                let c = Arc::new(
                    step("unix connect", UnixStream::connect(&path))
                        .await
                        .unwrap(),
                );
                let data = pattern(len, seed);
                let w = c.clone();
                let d = data.clone();
                let writer = fibr::spawn(async move {
                    w.write_all(&d).await?;
                    w.shutdown().await
                });
                let mut got = Vec::new();
                let mut buf = vec![0u8; 32 * 1024];
                loop {
                    let n = step("unix read", c.read(&mut buf)).await.unwrap();
                    if n == 0 {
                        break;
                    }
                    got.extend_from_slice(&buf[..n]);
                }
                step("unix writer", writer).await.unwrap().unwrap();
                assert!(got == data, "unix echo of {len} bytes differs");
                expected += len;
            }
            assert_eq!(
                step("unix server", server).await.unwrap().unwrap(),
                expected
            );
        });
    });
}

#[test]
fn unix_connect_to_a_missing_path_fails() {
    bounded(LIMIT, || {
        let sock = TempPath::sock("net-missing");
        let path = sock.to_path_buf();
        fibr::run(async move {
            let r = step("connect", UnixStream::connect(&path)).await;
            assert!(r.is_err(), "connected to a path with no listener");
        });
    });
}

#[test]
fn two_hundred_concurrent_tcp_connections_each_echoing() {
    const CONNS: usize = 200;
    const LEN: usize = 8 * 1024;
    bounded(LIMIT, || {
        let t0 = Instant::now();
        fibr::run(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let served = Arc::new(AtomicUsize::new(0));
            let sv = served.clone();
            let server = fibr::spawn(async move {
                let mut conns = Vec::new();
                for _ in 0..CONNS {
                    let (s, _) = listener.accept().await?;
                    let sv = sv.clone();
                    conns.push(fibr::spawn(async move {
                        let n = echo_tcp(s).await?;
                        sv.fetch_add(1, Ordering::SeqCst);
                        io::Result::Ok(n)
                    }));
                }
                let mut total = 0;
                for c in conns {
                    total += c.await.unwrap()?;
                }
                io::Result::Ok(total)
            });
            let clients: Vec<_> = (0..CONNS)
                .map(|i| {
                    fibr::spawn(async move {
                        let c = Arc::new(TcpStream::connect(addr).await?);
                        let data = pattern(LEN, i as u8);
                        let w = c.clone();
                        let d = data.clone();
                        let writer = fibr::spawn(async move {
                            w.write_all(&d).await?;
                            w.shutdown().await
                        });
                        let got = read_to_end_tcp(&c).await?;
                        writer.await.unwrap()?;
                        io::Result::Ok(got == data)
                    })
                })
                .collect();
            let mut ok = 0;
            for (i, c) in clients.into_iter().enumerate() {
                match step("client", c).await.unwrap() {
                    Ok(true) => ok += 1,
                    Ok(false) => panic!("client {i}: echoed bytes differ"),
                    Err(e) => panic!("client {i}: {e}"),
                }
            }
            assert_eq!(ok, CONNS);
            let total = step("server", server).await.unwrap().unwrap();
            assert_eq!(total, CONNS * LEN);
            assert_eq!(served.load(Ordering::SeqCst), CONNS);
        });
        eprintln!("{CONNS} concurrent echo connections in {:?}", t0.elapsed());
    });
}

#[test]
fn a_timed_out_read_leaves_the_stream_usable() {
    bounded(LIMIT, || {
        fibr::run(async {
            let (c, s) = tcp_pair().await;

            let mut buf = [0u8; 64];
            for _ in 0..3 {
                let t0 = Instant::now();
                let r = timeout(Duration::from_millis(50), c.read(&mut buf)).await;
                assert!(r.is_err(), "a read with nothing to read completed: {r:?}");
                let el = t0.elapsed();
                assert!(
                    el >= Duration::from_millis(50) && el < Duration::from_millis(500),
                    "{el:?}"
                );
            }

            // Data sent now reaches a fresh read (the abandoned read's waker is stale).
            s.write_all(b"hello").await.unwrap();
            let n = step("read after timeout", c.read(&mut buf)).await.unwrap();
            assert_eq!(&buf[..n], b"hello");

            // Data sent while a new read is pending, from a spawned task later on.
            let s = Arc::new(s);
            let s2 = s.clone();
            let later = fibr::spawn(async move {
                time::sleep(Duration::from_millis(30)).await;
                s2.write_all(b"later").await
            });
            let n = step("pending read after timeout", c.read(&mut buf))
                .await
                .unwrap();
            assert_eq!(&buf[..n], b"later");
            later.await.unwrap().unwrap();

            // And the other direction works too.
            c.write_all(b"back").await.unwrap();
            let mut b4 = [0u8; 4];
            step("server read", s.read_exact(&mut b4)).await.unwrap();
            assert_eq!(&b4, b"back");
        });
    });
}

#[test]
fn fibr_server_with_a_std_client_thread() {
    bounded(LIMIT, || {
        let (addr_tx, addr_rx) = mpsc::channel::<SocketAddr>();
        let client = thread::spawn(move || -> io::Result<Vec<u8>> {
            let addr = addr_rx.recv_timeout(Duration::from_secs(5)).unwrap();
            let mut s = try_connect(addr)?;
            let data = pattern(200_000, 9);
            let mut w = s.try_clone()?;
            let writer = thread::spawn(move || -> io::Result<()> {
                w.write_all(&data)?;
                w.shutdown(Shutdown::Write)
            });
            let mut got = Vec::new();
            s.read_to_end(&mut got)?;
            writer.join().unwrap()?;
            Ok(got)
        });
        let served = fibr::run(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            let (s, peer) = step("accept", listener.accept()).await.unwrap();
            assert!(peer.ip().is_loopback());
            step("echo", echo_tcp(s)).await.unwrap()
        });
        let got = client.join().unwrap().unwrap();
        assert_eq!(served, 200_000);
        assert!(got == pattern(200_000, 9), "std client got the wrong bytes");
    });
}

#[test]
fn fibr_client_with_a_std_server_thread() {
    bounded(LIMIT, || {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        // A std echo server for one connection.
        let server = thread::spawn(move || -> io::Result<usize> {
            let (mut s, _) = listener.accept()?;
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            s.set_write_timeout(Some(Duration::from_secs(5)))?;
            let mut buf = [0u8; 8192];
            let mut total = 0;
            loop {
                let n = s.read(&mut buf)?;
                if n == 0 {
                    s.shutdown(Shutdown::Write)?;
                    return Ok(total);
                }
                s.write_all(&buf[..n])?;
                total += n;
            }
        });
        let got = fibr::run(async move {
            let c = Arc::new(step("connect", TcpStream::connect(addr)).await.unwrap());
            assert_eq!(c.peer_addr().unwrap(), addr);
            c.set_nodelay(true).unwrap();
            let w = c.clone();
            let writer = fibr::spawn(async move {
                w.write_all(&pattern(300_000, 4)).await?;
                w.shutdown().await
            });
            let got = step("read echo", read_to_end_tcp(&c)).await.unwrap();
            step("writer", writer).await.unwrap().unwrap();
            got
        });
        assert_eq!(server.join().unwrap().unwrap(), 300_000);
        assert!(
            got == pattern(300_000, 4),
            "fibr client got the wrong bytes"
        );
    });
}

/// A reader and a blocked writer on one stream: a readable event must not leave the writer
/// stranded. (With a one-shot poller, an event disarms every direction; the writer's
/// interest must be re-armed even if the reader, once woken, never blocks again.)
#[test]
fn a_read_event_does_not_strand_a_blocked_writer() {
    bounded(LIMIT, || {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = std_listener.local_addr().unwrap();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        // The std peer: sends one byte when told, then drains everything.
        let peer = thread::spawn(move || -> io::Result<usize> {
            let (mut s, _) = std_listener.accept()?;
            s.set_read_timeout(Some(Duration::from_secs(8)))?;
            go_rx.recv_timeout(Duration::from_secs(8)).unwrap();
            s.write_all(b"!")?;
            thread::sleep(Duration::from_millis(50));
            go_rx.recv_timeout(Duration::from_secs(8)).unwrap();
            let mut total = 0;
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match s.read(&mut buf)? {
                    0 => return Ok(total),
                    n => total += n,
                }
            }
        });
        const LEN: usize = 16 << 20;
        fibr::run(async move {
            let c = Arc::new(step("connect", TcpStream::connect(addr)).await.unwrap());
            let w = c.clone();
            let written = Arc::new(AtomicUsize::new(0));
            let wr = written.clone();
            let writer = fibr::spawn(async move {
                // Far more than the socket buffers hold while the peer does not read.
                let chunk = vec![7u8; 256 * 1024];
                while wr.load(Ordering::SeqCst) < LEN {
                    w.write_all(&chunk).await?;
                    wr.fetch_add(chunk.len(), Ordering::SeqCst);
                }
                w.shutdown().await
            });
            let r = c.clone();
            let reader = fibr::spawn(async move {
                let mut b = [0u8; 16];
                // One read, then this task is done: it never blocks on the stream again.
                r.read(&mut b).await
            });
            // Let the writer fill the buffers and block, with the reader blocked too.
            time::sleep(Duration::from_millis(100)).await;
            assert!(
                written.load(Ordering::SeqCst) < LEN,
                "the writer never blocked"
            );
            go_tx.send(()).unwrap(); // the readable event
            assert_eq!(step("reader", reader).await.unwrap().unwrap(), 1);
            go_tx.send(()).unwrap(); // the peer now drains: the writer must resume
            step("blocked writer after a read event", writer)
                .await
                .unwrap()
                .unwrap();
        });
        assert_eq!(peer.join().unwrap().unwrap(), LEN);
    });
}
