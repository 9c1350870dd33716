//! SOCKS BIND through fibr's proxy, SOCKS5 and SOCKS4, with a raw client (curl and
//! python-socks do not speak BIND): the first reply names the listening port, the named
//! host connects to it, the second reply names that host, and bytes flow both ways.
//! Refusals: a host the rules do not allow, a connection from another host, and no
//! connection within `bind_timeout`.

mod common;

use common::socks::{reply5, socks5, stream};
use fibr::proxy::{ProxyConfig, Rules, Server};
use fibr::{Binding, Config, Engine};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::time::{Duration, Instant};

fn proxy(config: ProxyConfig) -> (Engine, SocketAddr) {
    let engine = Engine::new(
        Config::default().with_workers(1),
        [Binding::tcp("127.0.0.1:0", Server::new(config))],
    )
    .unwrap();
    let addr = engine.binding_addrs(0)[0];
    (engine, addr)
}

/// Rules for the tests: any client, and targets on `host` (any port).
fn allow(host: Ipv4Addr) -> ProxyConfig {
    ProxyConfig::new(
        Rules::new().allow_target_net(std::net::IpAddr::from(host).into(), 0..=u16::MAX),
    )
}

fn bind5(expected: SocketAddrV4) -> Vec<u8> {
    let mut req = vec![5, 2, 0, 1];
    req.extend_from_slice(&expected.ip().octets());
    req.extend_from_slice(&expected.port().to_be_bytes());
    req
}

/// The address in a SOCKS5 IPv4 reply.
fn addr5(r: &[u8; 10]) -> SocketAddr {
    let ip = Ipv4Addr::new(r[4], r[5], r[6], r[7]);
    SocketAddr::from((ip, u16::from_be_bytes([r[8], r[9]])))
}

/// Whether `addr` refuses connections within a second (the loop deregisters and closes a
/// BIND's listening socket on its next turn).
fn closes_soon(addr: SocketAddr) -> bool {
    common::wait_until(Duration::from_secs(1), || {
        TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err()
    })
}

/// Bytes both ways between the client (through the proxy) and the peer.
fn exchange(client: &mut TcpStream, peer: &mut TcpStream) {
    client.write_all(b"from the client").unwrap();
    let mut got = [0u8; 15];
    peer.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"from the client");
    peer.write_all(b"from the peer").unwrap();
    let mut got = [0u8; 13];
    client.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"from the peer");
}

#[test]
fn socks5_bind_takes_the_named_hosts_connection() {
    let (_engine, p) = proxy(allow(Ipv4Addr::LOCALHOST));
    let mut client = socks5(p, &[0]);
    client
        .write_all(&bind5(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)))
        .unwrap();
    let first = reply5(&mut client);
    assert_eq!(first[1], 0, "the first reply grants: {first:?}");
    let listening = addr5(&first);
    assert_eq!(
        listening.ip(),
        p.ip(),
        "listens where the client reached the proxy"
    );
    assert_ne!(listening.port(), 0);

    let mut peer = stream(listening);
    let second = reply5(&mut client);
    assert_eq!(second[1], 0);
    assert_eq!(addr5(&second), peer.local_addr().unwrap(), "names the peer");
    exchange(&mut client, &mut peer);

    // The port took its one connection and is closed.
    assert!(closes_soon(listening), "the BIND port still accepts");
}

#[test]
fn socks4_bind_takes_the_named_hosts_connection() {
    let (_engine, p) = proxy(allow(Ipv4Addr::LOCALHOST));
    let mut client = stream(p);
    client.write_all(&[4, 2, 0, 0, 127, 0, 0, 1, 0]).unwrap();
    let mut first = [0u8; 8];
    client.read_exact(&mut first).unwrap();
    assert_eq!(first[..2], [0, 90]);
    let listening = SocketAddr::from((
        Ipv4Addr::new(first[4], first[5], first[6], first[7]),
        u16::from_be_bytes([first[2], first[3]]),
    ));
    let mut peer = stream(listening);
    let mut second = [0u8; 8];
    client.read_exact(&mut second).unwrap();
    assert_eq!(second[..2], [0, 90]);
    let from = peer.local_addr().unwrap();
    assert_eq!(u16::from_be_bytes([second[2], second[3]]), from.port());
    exchange(&mut client, &mut peer);
}

#[test]
fn socks5_bind_refusals() {
    // A host the rules do not allow: reply 2, and nothing listens.
    let (_engine, p) = proxy(allow(Ipv4Addr::new(127, 0, 0, 2)));
    let mut client = socks5(p, &[0]);
    client
        .write_all(&bind5(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)))
        .unwrap();
    assert_eq!(reply5(&mut client)[1], 2, "not allowed");

    // A connection from another host than the one named: reply 2, the tunnel is not made.
    let mut client = socks5(p, &[0]);
    client
        .write_all(&bind5(SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 2), 0)))
        .unwrap();
    let listening = addr5(&reply5(&mut client));
    let _intruder = stream(listening); // from 127.0.0.1
    assert_eq!(reply5(&mut client)[1], 2, "another host's connection");
    let mut rest = Vec::new();
    assert_eq!(client.read_to_end(&mut rest).unwrap(), 0, "closed");

    // Nobody comes within bind_timeout: reply 6 (TTL expired, SOCKS5's nearest to a
    // timeout), and no sooner.
    let timeout = Duration::from_millis(300);
    let (_engine, p) = proxy(allow(Ipv4Addr::LOCALHOST).with_bind_timeout(timeout));
    let mut client = socks5(p, &[0]);
    let asked = Instant::now();
    client
        .write_all(&bind5(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)))
        .unwrap();
    let listening = addr5(&reply5(&mut client));
    assert_eq!(reply5(&mut client)[1], 6, "timed out");
    assert!(asked.elapsed() >= timeout, "after {:?}", asked.elapsed());
    assert!(closes_soon(listening), "the port outlived its request");
}
