//! The SOCKS machines, byte by byte: every message, every refusal, and arbitrary input.

use super::*;
use crate::proto::socks::Target;
use crate::proto::tunnel::Credentials;
use proptest::prelude::*;
use std::net::Ipv6Addr;
use v4::MAX_STRING;

fn creds(user: &str, password: &str) -> Credentials {
    Credentials {
        user: user.into(),
        password: password.into(),
    }
}

fn v4(s: &str) -> Target {
    Target::Addr(s.parse().unwrap())
}

/// Feeds `input` one byte at a time (every split point), as well as whole.
fn feed_split(m: &mut dyn ServerHandshake, input: &[u8], out: &mut Vec<u8>) -> Step {
    let mut step = Step::More;
    for (i, b) in input.iter().enumerate() {
        step = m.receive(std::slice::from_ref(b), out);
        if i + 1 < input.len() {
            assert_eq!(step, Step::More, "step before the last byte ({i})");
        }
    }
    step
}

#[test]
fn socks5_no_auth_connect_ipv4() {
    let mut m = Socks5::new(false);
    let mut out = Vec::new();
    let step = m.receive(
        &[5, 2, 0, 2, 5, 1, 0, 1, 10, 0, 0, 1, 0, 80, b'x'],
        &mut out,
    );
    assert_eq!(step, Step::Connect(v4("10.0.0.1:80"), Auth::None));
    assert_eq!(out, [5, 0]);
    assert_eq!(m.take_rest(), b"x");
    out.clear();
    m.connected("127.0.0.1:4000".parse().unwrap(), &mut out);
    assert_eq!(out, [5, 0, 0, 1, 127, 0, 0, 1, 0x0f, 0xa0]);
}

#[test]
fn socks5_split_at_every_byte() {
    let mut m = Socks5::new(false);
    let mut out = Vec::new();
    assert_eq!(feed_split(&mut m, &[5, 1, 0], &mut out), Step::More);
    assert_eq!(out, [5, 0]);
    let req = [
        5, 1, 0, 3, 11, b'e', b'x', b'a', b'm', b'p', b'l', b'e', b'.', b'c', b'o', b'm', 1, 187,
    ];
    let step = feed_split(&mut m, &req, &mut out);
    assert_eq!(
        step,
        Step::Connect(Target::Name("example.com".into(), 443), Auth::None)
    );
}

#[test]
fn socks5_ipv6_and_bound_ipv6() {
    let mut m = Socks5::new(false);
    let mut out = Vec::new();
    let mut req = vec![5, 1, 0, 5, 1, 0, 4];
    req.extend_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
    req.extend_from_slice(&[0x1f, 0x90]);
    let step = m.receive(&req, &mut out);
    assert_eq!(step, Step::Connect(v4("[2001:db8::1]:8080"), Auth::None));
    out.clear();
    m.connected("[::1]:1".parse().unwrap(), &mut out);
    assert_eq!(out.len(), 22);
    assert_eq!(&out[..4], [5, 0, 0, 4]);
}

#[test]
fn socks5_username_password() {
    let mut m = Socks5::new(true);
    let mut out = Vec::new();
    // No username/password offered: no acceptable method.
    assert_eq!(Socks5::new(true).receive(&[5, 1, 0], &mut out), Step::Close);
    assert_eq!(out, [5, 0xff]);
    out.clear();
    let step = m.receive(
        &[
            5, 2, 0, 2, 1, 5, b'a', b'l', b'i', b'c', b'e', 2, b'p', b'w',
        ],
        &mut out,
    );
    assert_eq!(step, Step::Authenticate(creds("alice", "pw")));
    assert_eq!(out, [5, 2]);
    out.clear();
    assert_eq!(m.authenticated(true, &mut out), Step::More);
    assert_eq!(out, [1, 0]);
    let step = m.receive(&[5, 1, 0, 1, 1, 2, 3, 4, 0, 1], &mut out);
    assert_eq!(step, Step::Connect(v4("1.2.3.4:1"), Auth::Verified));
}

#[test]
fn socks5_wrong_password_is_refused() {
    let mut m = Socks5::new(true);
    let mut out = Vec::new();
    let step = m.receive(
        &[5, 1, 2, 1, 1, b'u', 1, b'p', 5, 1, 0, 1, 1, 2, 3, 4, 0, 1],
        &mut out,
    );
    assert_eq!(step, Step::Authenticate(creds("u", "p")));
    out.clear();
    assert_eq!(m.authenticated(false, &mut out), Step::Close);
    assert_eq!(out, [1, 1]);
    // The request that followed is never parsed.
    assert_eq!(m.receive(&[0], &mut out), Step::More);
}

#[test]
fn socks5_bad_subnegotiation_version() {
    let mut m = Socks5::new(true);
    let mut out = Vec::new();
    assert_eq!(
        m.receive(&[5, 1, 2, 9, 1, b'u', 1, b'p'], &mut out),
        Step::Close
    );
    assert_eq!(out, [5, 2, 1, 1]);
}

#[test]
fn socks5_unsupported_command_and_address_type() {
    for (req, code) in [
        (&[5u8, 9, 0, 1, 1, 2, 3, 4, 0, 1][..], 7),
        (&[5, 4, 0, 1, 1, 2, 3, 4, 0, 1], 7),
        (&[5, 1, 0, 2, 1, 2, 3, 4, 0, 1], 8),
        (&[5, 1, 0, 0, 1, 2, 3, 4, 0, 1], 8),
        (&[5, 1, 0, 3, 0, 0, 1], 1),             // an empty name
        (&[5, 1, 0, 3, 2, b'a', b' ', 0, 1], 1), // not a host name
    ] {
        let mut m = Socks5::new(false);
        let mut out = Vec::new();
        assert_eq!(m.receive(&[5, 1, 0], &mut out), Step::More);
        out.clear();
        assert_eq!(m.receive(req, &mut out), Step::Close, "{req:?}");
        assert_eq!(out.len(), 10, "{req:?}");
        assert_eq!(&out[..3], [5, code, 0], "{req:?}");
    }
}

#[test]
fn socks5_udp_associate_names_the_clients_udp_address() {
    let mut m = Socks5::new(false);
    let mut out = Vec::new();
    let req = [5, 1, 0, 5, 3, 0, 1, 127, 0, 0, 1, 0x1f, 0x90];
    assert_eq!(
        feed_split(&mut m, &req, &mut out),
        Step::Associate(v4("127.0.0.1:8080"), Auth::None)
    );
    assert_eq!(
        out,
        [5, 0],
        "only the method choice before the association's reply"
    );
    out.clear();
    m.connected("127.0.0.1:4000".parse().unwrap(), &mut out);
    assert_eq!(out, [5, 0, 0, 1, 127, 0, 0, 1, 0x0f, 0xa0]);
}

#[test]
fn socks5_bind_is_answered_twice() {
    let mut m = Socks5::new(false);
    let mut out = Vec::new();
    let req = [5, 1, 0, 5, 2, 0, 1, 10, 1, 2, 3, 0, 21];
    assert_eq!(
        feed_split(&mut m, &req, &mut out),
        Step::Bind(v4("10.1.2.3:21"), Auth::None)
    );
    out.clear();
    // The listening address, then the peer that connected to it.
    m.connected("127.0.0.1:4000".parse().unwrap(), &mut out);
    m.connected("10.1.2.3:20".parse().unwrap(), &mut out);
    assert_eq!(
        out,
        [5, 0, 0, 1, 127, 0, 0, 1, 0x0f, 0xa0, 5, 0, 0, 1, 10, 1, 2, 3, 0, 20]
    );
}

#[test]
fn socks5_bad_version_in_request_closes_without_reply() {
    let mut m = Socks5::new(false);
    let mut out = Vec::new();
    m.receive(&[5, 1, 0], &mut out);
    out.clear();
    assert_eq!(
        m.receive(&[4, 1, 0, 1, 1, 2, 3, 4, 0, 1], &mut out),
        Step::Close
    );
    assert!(out.is_empty());
    let mut g = Socks5::new(false);
    assert_eq!(g.receive(&[6, 1, 0], &mut out), Step::Close);
}

#[test]
fn socks5_longest_name() {
    let mut m = Socks5::new(false);
    let mut out = Vec::new();
    m.receive(&[5, 1, 0], &mut out);
    let mut req = vec![5, 1, 0, 3, 255];
    req.extend(std::iter::repeat_n(b'a', 255));
    req.extend_from_slice(&[0, 80]);
    let step = m.receive(&req, &mut out);
    assert_eq!(
        step,
        Step::Connect(Target::Name("a".repeat(255), 80), Auth::None)
    );
}

#[test]
fn socks5_truncated_input_waits() {
    for input in [
        &[5u8][..],
        &[5, 3, 0, 1],
        &[5, 1, 0, 5, 1, 0, 1, 1, 2],
        &[5, 1, 0, 5, 1, 0, 3, 9, b'a'],
    ] {
        let mut out = Vec::new();
        assert_eq!(
            Socks5::new(false).receive(input, &mut out),
            Step::More,
            "{input:?}"
        );
    }
}

#[test]
fn socks5_failure_codes() {
    for (why, code) in [
        (Failure::General, 1),
        (Failure::NotAllowed, 2),
        (Failure::AuthRequired, 2),
        (Failure::NetworkUnreachable, 3),
        (Failure::HostUnreachable, 4),
        (Failure::Refused, 5),
        (Failure::TimedOut, 6),
    ] {
        let mut out = Vec::new();
        Socks5::new(false).failed(why, &mut out);
        assert_eq!(out, [5, code, 0, 1, 0, 0, 0, 0, 0, 0], "{why:?}");
    }
}

#[test]
fn socks4_connect() {
    let mut m = Socks4::new();
    let mut out = Vec::new();
    let step = feed_split(&mut m, &[4, 1, 0, 80, 10, 1, 2, 3, b'm', b'e', 0], &mut out);
    assert_eq!(step, Step::Connect(v4("10.1.2.3:80"), Auth::None));
    assert!(out.is_empty());
    m.connected("127.0.0.1:9".parse().unwrap(), &mut out);
    assert_eq!(out, [0, 90, 0, 9, 127, 0, 0, 1]);
    out.clear();
    Socks4::new().failed(Failure::Refused, &mut out);
    assert_eq!(out, [0, 91, 0, 0, 0, 0, 0, 0]);
}

#[test]
fn socks4a_names() {
    let mut m = Socks4::new();
    let mut out = Vec::new();
    let mut req = vec![4, 1, 1, 187, 0, 0, 0, 1, 0];
    req.extend_from_slice(b"example.com\0rest");
    let step = m.receive(&req, &mut out);
    assert_eq!(
        step,
        Step::Connect(Target::Name("example.com".into(), 443), Auth::None)
    );
    assert_eq!(m.take_rest(), b"rest");
    // 0.0.0.0 is an address, not 4a's marker.
    let step = Socks4::new().receive(&[4, 1, 0, 1, 0, 0, 0, 0, 0], &mut out);
    assert_eq!(step, Step::Connect(v4("0.0.0.0:1"), Auth::None));
}

#[test]
fn socks4_string_limits() {
    // A user id or name of MAX_STRING - 1 bytes plus its NUL is taken; one more is not.
    let longest = |user: usize, name: Option<usize>| {
        let ip = if name.is_some() {
            [0, 0, 0, 1]
        } else {
            [1, 2, 3, 4]
        };
        let mut req = vec![4, 1, 0, 80];
        req.extend_from_slice(&ip);
        req.extend(std::iter::repeat_n(b'u', user));
        req.push(0);
        if let Some(n) = name {
            req.extend(std::iter::repeat_n(b'h', n));
            req.push(0);
        }
        req
    };
    let mut out = Vec::new();
    let ok = Socks4::new().receive(&longest(MAX_STRING - 1, None), &mut out);
    assert!(matches!(ok, Step::Connect(..)));
    let ok = Socks4::new().receive(&longest(0, Some(MAX_STRING - 1)), &mut out);
    assert!(matches!(ok, Step::Connect(Target::Name(..), _)));
    for req in [longest(MAX_STRING, None), longest(0, Some(MAX_STRING))] {
        let mut out = Vec::new();
        assert_eq!(Socks4::new().receive(&req, &mut out), Step::Close);
        assert_eq!(out, [0, 91, 0, 0, 0, 0, 0, 0]);
    }
    // Unterminated and long: refused before the NUL would come.
    let mut req = vec![4, 1, 0, 80, 1, 2, 3, 4];
    req.extend(std::iter::repeat_n(b'u', MAX_STRING));
    assert_eq!(Socks4::new().receive(&req, &mut out), Step::Close);
}

#[test]
fn socks4_bind() {
    let mut m = Socks4::new();
    let mut out = Vec::new();
    let step = feed_split(&mut m, &[4, 2, 0, 21, 10, 1, 2, 3, 0], &mut out);
    assert_eq!(step, Step::Bind(v4("10.1.2.3:21"), Auth::None));
    m.connected("127.0.0.1:9".parse().unwrap(), &mut out);
    m.connected("10.1.2.3:20".parse().unwrap(), &mut out);
    assert_eq!(out, [0, 90, 0, 9, 127, 0, 0, 1, 0, 90, 0, 20, 10, 1, 2, 3]);
}

#[test]
fn socks4_bad_command_and_name() {
    let mut out = Vec::new();
    assert_eq!(
        Socks4::new().receive(&[4, 3, 0, 80, 1, 2, 3, 4, 0], &mut out),
        Step::Close
    );
    assert_eq!(out, [0, 91, 0, 0, 0, 0, 0, 0]);
    out.clear();
    assert_eq!(
        Socks4::new().receive(&[4, 1, 0, 80, 0, 0, 0, 1, 0, 0], &mut out),
        Step::Close
    );
    assert_eq!(out, [0, 91, 0, 0, 0, 0, 0, 0]);
    // Truncated: waits.
    assert_eq!(
        Socks4::new().receive(&[4, 1, 0, 80, 1, 2, 3], &mut out),
        Step::More
    );
    assert_eq!(
        Socks4::new().receive(&[4, 1, 0, 80, 1, 2, 3, 4, b'u'], &mut out),
        Step::More
    );
}

/// Every input the driver could feed, split anyhow: no panic, output bounded, and the
/// machine keeps no more than one message's worth.
fn arbitrary(require_auth: bool, chunks: Vec<Vec<u8>>, v5: bool) {
    let mut m: Box<dyn ServerHandshake> = if v5 {
        Box::new(Socks5::new(require_auth))
    } else {
        Box::new(Socks4::new())
    };
    let mut out = Vec::new();
    for chunk in chunks {
        let mut step = m.receive(&chunk, &mut out);
        while let Step::Authenticate(_) = step {
            step = m.authenticated(chunk.len() % 2 == 0, &mut out);
        }
        match step {
            Step::Close => return,
            Step::Connect(..) => {
                m.connected("127.0.0.1:1".parse().unwrap(), &mut out);
                m.failed(Failure::General, &mut out);
                let _ = m.take_rest();
                return;
            }
            _ => {}
        }
        assert!(out.len() < 64);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn socks5_never_panics(auth: bool, chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..8)) {
        arbitrary(auth, chunks, true);
    }

    #[test]
    fn socks5_shaped_input_never_panics(auth: bool, ver in 4u8..7, cmd in 0u8..4, atyp in 0u8..6, tail in prop::collection::vec(any::<u8>(), 0..300)) {
        let mut first = vec![5, 2, 0, 2, 1, 1, b'u', 1, b'p', ver, cmd, 0, atyp];
        first.extend(tail);
        arbitrary(auth, vec![first], true);
    }

    #[test]
    fn socks4_never_panics(chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..8)) {
        let mut chunks = chunks;
        chunks.insert(0, vec![4, 1]);
        arbitrary(false, chunks, false);
    }
}
