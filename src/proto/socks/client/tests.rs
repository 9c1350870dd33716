//! The client machines, fed as a proxy would answer: whole, split at every byte, and
//! arbitrary bytes.

use super::*;
use crate::proto::socks::addr::ATYP_V6;
use crate::proto::socks::MAX_FIELD;
use proptest::prelude::*;

/// Feeds `replies` one byte at a time (as a slow proxy would), collecting what the
/// client writes.
fn run(mut m: Socks5, replies: &[u8]) -> (Vec<u8>, Result<bool, SocksError>) {
    let mut out = Vec::new();
    m.start(&mut out);
    let mut last = Ok(false);
    for b in replies {
        assert!(m.want() >= 1, "the machine wants nothing but is fed");
        last = m.receive(&[*b], &mut out);
        if !matches!(last, Ok(false)) {
            break;
        }
    }
    (out, last)
}

fn target() -> Target {
    Target::Name("example.com".into(), 80)
}

#[test]
fn no_auth_connect_by_name() {
    let m = Socks5::new(&target(), None).unwrap();
    let (out, r) = run(m, &[5, 0, 5, 0, 0, 1, 10, 0, 0, 1, 0x1f, 0x90]);
    assert_eq!(r, Ok(true));
    let mut want = vec![5, 1, 0, 5, 1, 0, 3, 11];
    want.extend_from_slice(b"example.com");
    want.extend_from_slice(&[0, 80]);
    assert_eq!(out, want);
}

#[test]
fn connect_by_address_both_families() {
    let m = Socks5::new(&Target::Addr("10.1.2.3:443".parse().unwrap()), None).unwrap();
    let (out, _) = run(m, &[5, 0]);
    assert_eq!(&out[3..], &[5, 1, 0, 1, 10, 1, 2, 3, 1, 187]);
    let m = Socks5::new(&Target::Addr("[::1]:80".parse().unwrap()), None).unwrap();
    let (out, _) = run(m, &[5, 0]);
    assert_eq!(out[6], ATYP_V6);
    assert_eq!(out.len(), 3 + 4 + 16 + 2);
}

#[test]
fn username_password_accepted() {
    let m = Socks5::new(&target(), Some(("al", "pw"))).unwrap();
    // The reply's bound address is IPv6.
    let mut replies = vec![5, 2, 1, 0, 5, 0, 0, ATYP_V6];
    replies.extend_from_slice(&[0; 16]);
    replies.extend_from_slice(&[0, 80]);
    let (out, r) = run(m, &replies);
    assert_eq!(r, Ok(true));
    assert_eq!(&out[..4], &[5, 2, 0, 2], "both methods offered");
    assert_eq!(&out[4..11], &[1, 2, b'a', b'l', 2, b'p', b'w']);
    assert_eq!(out[11..13], [5, 1]);
}

#[test]
fn refused_password_and_no_method() {
    let m = Socks5::new(&target(), Some(("al", "bad"))).unwrap();
    assert_eq!(run(m, &[5, 2, 1, 1]).1, Err(SocksError::AuthFailed(1)));
    let m = Socks5::new(&target(), None).unwrap();
    assert_eq!(
        run(m, &[5, 0xff]).1,
        Err(SocksError::NoAcceptableMethod {
            offered_password: false
        })
    );
    // Username/password chosen though not offered.
    let m = Socks5::new(&target(), None).unwrap();
    assert!(matches!(run(m, &[5, 2]).1, Err(SocksError::Malformed(_))));
}

#[test]
fn every_failure_reply_is_reported_with_its_code() {
    for code in 1..=0xffu8 {
        let m = Socks5::new(&target(), None).unwrap();
        // Only VER and REP: the rest never comes.
        assert_eq!(run(m, &[5, 0, 5, code]).1, Err(SocksError::Reply(code)));
    }
}

#[test]
fn truncated_and_garbage_replies() {
    for cut in 0..12 {
        let reply = [5, 0, 5, 0, 0, 1, 10, 0, 0, 1, 0, 80];
        let mut m = Socks5::new(&target(), None).unwrap();
        let mut out = Vec::new();
        m.start(&mut out);
        for b in &reply[..cut] {
            assert_eq!(m.receive(&[*b], &mut out), Ok(false));
        }
        assert_eq!(m.receive(&[], &mut out), Err(SocksError::Truncated));
    }
    let m = Socks5::new(&target(), None).unwrap();
    assert!(matches!(
        run(m, b"HTTP/1.1 400").1,
        Err(SocksError::Malformed(_))
    ));
    let m = Socks5::new(&target(), None).unwrap();
    assert!(matches!(
        run(m, &[5, 0, 5, 0, 0, 9, 0]).1,
        Err(SocksError::Malformed(_))
    ));
    let m = Socks5::new(&target(), None).unwrap();
    assert!(matches!(run(m, &[4, 0]).1, Err(SocksError::Malformed(_))));
}

#[test]
fn never_asks_for_more_than_the_reply() {
    let mut m = Socks5::new(&target(), None).unwrap();
    let mut out = Vec::new();
    m.start(&mut out);
    assert_eq!(m.want(), 2);
    m.receive(&[5, 0], &mut out).unwrap();
    assert_eq!(m.want(), REPLY_HEAD);
    m.receive(&[5, 0, 0, 3, 4], &mut out).unwrap();
    // The bound name's 4 bytes and the port: exactly the rest.
    assert_eq!(m.want(), 4 + 2);
    assert_eq!(m.receive(b"host\x00\x50", &mut out), Ok(true));
}

#[test]
fn names_and_credentials_at_the_limit() {
    let at = "a".repeat(MAX_FIELD);
    assert!(Socks5::new(&Target::Name(at.clone(), 1), None).is_ok());
    let over = Target::Name("a".repeat(MAX_FIELD + 1), 1);
    assert!(matches!(
        Socks5::new(&over, None),
        Err(SocksError::InvalidField(_))
    ));
    assert!(matches!(
        Socks5::new(&Target::Name(String::new(), 1), None),
        Err(SocksError::InvalidField(_))
    ));
    assert!(Socks5::new(&target(), Some((&at, &at))).is_ok());
    let long = "a".repeat(MAX_FIELD + 1);
    assert!(Socks5::new(&target(), Some((&long, "p"))).is_err());
    assert!(Socks5::new(&target(), Some(("u", &long))).is_err());
}

fn reply4(m: &mut Socks4, bytes: &[u8]) -> Result<bool, SocksError> {
    let mut out = Vec::new();
    m.receive(bytes, &mut out)
}

#[test]
fn socks4_by_address_and_4a_by_name() {
    let mut m = Socks4::new(&Target::Addr("10.0.0.2:80".parse().unwrap()), "me").unwrap();
    let mut out = Vec::new();
    m.start(&mut out);
    assert_eq!(out, [4, 1, 0, 80, 10, 0, 0, 2, b'm', b'e', 0]);
    assert_eq!(m.want(), 8);
    assert_eq!(reply4(&mut m, &[0, 90, 0, 0]), Ok(false));
    assert_eq!(m.want(), 4);
    assert_eq!(reply4(&mut m, &[0, 0, 0, 0]), Ok(true));

    let mut m = Socks4::new(&Target::Name("h.example".into(), 443), "").unwrap();
    let mut out = Vec::new();
    m.start(&mut out);
    let mut want = vec![4, 1, 1, 187, 0, 0, 0, 1, 0];
    want.extend_from_slice(b"h.example\0");
    assert_eq!(out, want);
}

#[test]
fn rejections_truncation_and_garbage() {
    let t = Target::Name("h".into(), 1);
    for code in [91, 92, 93, 0] {
        let mut m = Socks4::new(&t, "").unwrap();
        assert_eq!(
            reply4(&mut m, &[0, code, 0, 0, 0, 0, 0, 0]),
            Err(SocksError::Rejected4(code))
        );
    }
    let mut m = Socks4::new(&t, "").unwrap();
    assert_eq!(reply4(&mut m, &[0, 90, 0]), Ok(false));
    assert_eq!(reply4(&mut m, &[]), Err(SocksError::Truncated));
    let mut m = Socks4::new(&t, "").unwrap();
    assert!(matches!(
        reply4(&mut m, b"HTTP/1.0"),
        Err(SocksError::Malformed(_))
    ));
}

#[test]
fn what_socks4_cannot_carry_is_refused_before_sending() {
    let v6 = Target::Addr("[::1]:80".parse().unwrap());
    assert_eq!(Socks4::new(&v6, "").err(), Some(SocksError::Ipv6OverSocks4));
    assert!(Socks4::new(&Target::Name("a".repeat(MAX_FIELD), 1), "").is_ok());
    let long = Target::Name("a".repeat(MAX_FIELD + 1), 1);
    assert!(matches!(
        Socks4::new(&long, ""),
        Err(SocksError::InvalidField(_))
    ));
    let t = Target::Name("h".into(), 1);
    assert!(Socks4::new(&t, &"u".repeat(MAX_FIELD)).is_ok());
    assert!(Socks4::new(&t, &"u".repeat(MAX_FIELD + 1)).is_err());
    assert!(Socks4::new(&t, "a\0b").is_err());
    assert!(Socks4::new(&Target::Name("a\0b".into(), 1), "").is_err());
}

/// Feeds `replies` as the driver would (at most `want` bytes a time, `split` bounding
/// each read): the outcome, and the bytes taken.
fn drive_bytes<H: ClientHandshake<Error = SocksError>>(
    mut m: H,
    replies: &[u8],
    split: usize,
) -> (Result<bool, SocksError>, usize) {
    let mut out = Vec::new();
    m.start(&mut out);
    let mut at = 0;
    loop {
        let want = m.want();
        assert!(want >= 1, "a handshake in progress wants a byte");
        let n = want.min(split).min(replies.len() - at);
        let r = m.receive(&replies[at..at + n], &mut out);
        at += n;
        if !matches!(r, Ok(false)) {
            return (r, at);
        }
    }
}

proptest! {
    /// Whatever a proxy sends: no panic, the same outcome however it is split (a
    /// failure may be seen sooner with smaller reads), and a handshake that opens has
    /// taken nothing past its last reply.
    #[test]
    fn any_reply_bytes_any_split(
        replies in proptest::collection::vec(any::<u8>(), 0..64),
        split in 1usize..8,
        password in any::<bool>(),
    ) {
        let t = Target::Name("h.test".into(), 80);
        let auth = password.then_some(("u", "p"));
        let whole = drive_bytes(Socks5::new(&t, auth).unwrap(), &replies, usize::MAX);
        let split5 = drive_bytes(Socks5::new(&t, auth).unwrap(), &replies, split);
        prop_assert_eq!(&whole.0, &split5.0);
        if whole.0 == Ok(true) {
            prop_assert_eq!(whole.1, split5.1);
        }
        let whole = drive_bytes(Socks4::new(&t, "").unwrap(), &replies, usize::MAX);
        let split4 = drive_bytes(Socks4::new(&t, "").unwrap(), &replies, split);
        prop_assert_eq!(&whole.0, &split4.0);
        if whole.0 == Ok(true) {
            prop_assert_eq!((whole.1, split4.1), (8, 8));
        }
    }
}
