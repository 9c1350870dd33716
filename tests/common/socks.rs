//! A raw SOCKS client for the proxy tests: each message written and read by hand.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection to `p` with the tests' read and write timeouts.
pub fn stream(p: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(p).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    s
}

/// A SOCKS5 connection past its greeting, offering `methods` (the first is expected).
pub fn socks5(p: SocketAddr, methods: &[u8]) -> TcpStream {
    let mut s = stream(p);
    let mut greeting = vec![5, methods.len() as u8];
    greeting.extend_from_slice(methods);
    s.write_all(&greeting).unwrap();
    let mut r = [0u8; 2];
    s.read_exact(&mut r).unwrap();
    assert_eq!(r, [5, methods[0]]);
    s
}

pub fn connect5(t: SocketAddr) -> Vec<u8> {
    let SocketAddr::V4(t) = t else { unreachable!() };
    let mut req = vec![5, 1, 0, 1];
    req.extend_from_slice(&t.ip().octets());
    req.extend_from_slice(&t.port().to_be_bytes());
    req
}

/// A SOCKS5 reply with an IPv4 bound address.
pub fn reply5(s: &mut TcpStream) -> [u8; 10] {
    let mut r = [0u8; 10];
    s.read_exact(&mut r).unwrap();
    assert_eq!(r[0], 5);
    r
}
