//! The detection, deterministically: whole inputs, every split of them (one byte at a
//! time), ClientHellos cut into records of every size, the limits, and the order of routes.

use super::{detect, Detection, Matcher, Verdict};

const LIMIT: usize = 16 * 1024;

/// A ClientHello body offering `alpn` (no extension when empty), with `pad` bytes of the
/// padding extension (RFC 7685) to make it as long as a test needs.
fn hello_body(alpn: &[&[u8]], pad: usize) -> Vec<u8> {
    let mut body = vec![3, 3];
    body.extend([7u8; 32]); // random
    body.push(4); // a session id
    body.extend([1, 2, 3, 4]);
    body.extend([0, 4, 0x13, 0x01, 0x13, 0x02]); // two cipher suites
    body.extend([1, 0]); // null compression
    let mut exts = Vec::new();
    exts.extend([0, 10, 0, 4, 0, 2, 0, 29]); // supported_groups: x25519
    if !alpn.is_empty() {
        let list: Vec<u8> = alpn
            .iter()
            .flat_map(|n| std::iter::once(n.len() as u8).chain(n.iter().copied()))
            .collect();
        exts.extend([0, 16]);
        exts.extend(((list.len() + 2) as u16).to_be_bytes());
        exts.extend((list.len() as u16).to_be_bytes());
        exts.extend(list);
    }
    if pad > 0 {
        exts.extend([0, 21]);
        exts.extend((pad as u16).to_be_bytes());
        exts.extend(vec![0; pad]);
    }
    body.extend((exts.len() as u16).to_be_bytes());
    body.extend(exts);
    body
}

/// The handshake message around a ClientHello body.
fn handshake(body: &[u8]) -> Vec<u8> {
    let len = (body.len() as u32).to_be_bytes();
    let mut m = vec![1, len[1], len[2], len[3]];
    m.extend(body);
    m
}

/// `message` in handshake records of at most `fragment` bytes each.
fn records(message: &[u8], fragment: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for piece in message.chunks(fragment) {
        out.extend([22, 3, 1]);
        out.extend((piece.len() as u16).to_be_bytes());
        out.extend(piece);
    }
    out
}

fn hello(alpn: &[&[u8]], pad: usize, fragment: usize) -> Vec<u8> {
    records(&handshake(&hello_body(alpn, pad)), fragment)
}

fn check(m: &Matcher, seen: &[u8]) -> Verdict {
    m.check(seen)
}

/// Fed one byte at a time, `m` needs more until `decided_at` bytes, then says `last` (and
/// goes on saying it for every longer prefix).
fn decided_at(m: &Matcher, input: &[u8], at: usize, last: Verdict) {
    for n in 0..at {
        assert_eq!(
            check(m, &input[..n]),
            Verdict::NeedMore,
            "{m:?} at {n} bytes"
        );
    }
    for n in at..=input.len() {
        assert_eq!(check(m, &input[..n]), last, "{m:?} at {n} bytes");
    }
}

#[test]
fn each_protocol_is_told_by_its_first_bytes_whatever_the_reads() {
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04";
    decided_at(&Matcher::h2c(), preface, 24, Verdict::Match);
    decided_at(&Matcher::http1(), b"GET / HTTP/1.1\r\n", 4, Verdict::Match);
    decided_at(
        &Matcher::http1(),
        b"M-SEARCH * HTTP/1.1\r\n",
        9,
        Verdict::Match,
    );
    decided_at(&Matcher::socks5(), &[5, 1, 0], 1, Verdict::Match);
    decided_at(&Matcher::socks4(), &[4, 1, 0, 80], 1, Verdict::Match);
    decided_at(&Matcher::prefix("PING\n"), b"PING\nmore", 5, Verdict::Match);
    decided_at(
        &Matcher::tls(),
        &hello(&[b"h2"], 0, 1 << 14),
        6,
        Verdict::Match,
    );

    // And not by another's.
    decided_at(&Matcher::socks5(), &[4, 1], 1, Verdict::NoMatch);
    decided_at(&Matcher::socks4(), &[5, 1], 1, Verdict::NoMatch);
    decided_at(&Matcher::h2c(), b"GET / HTTP/1.1\r\n", 1, Verdict::NoMatch);
    decided_at(&Matcher::http1(), &[5, 1, 0], 1, Verdict::NoMatch);
    decided_at(&Matcher::http1(), &hello(&[], 0, 100), 1, Verdict::NoMatch);
    decided_at(&Matcher::prefix("PING\n"), b"PINGS", 5, Verdict::NoMatch);
    decided_at(&Matcher::tls(), b"GET / HTTP/1.1\r\n", 1, Verdict::NoMatch);
    // An alert record, a ChangeCipherSpec, SSL 2: not a ClientHello.
    decided_at(
        &Matcher::tls(),
        &[21, 3, 3, 0, 2, 2, 40],
        1,
        Verdict::NoMatch,
    );
    decided_at(&Matcher::tls(), &[20, 3, 3, 0, 1, 1], 1, Verdict::NoMatch);
    decided_at(&Matcher::tls(), &[0x80, 0x2e, 1, 3, 1], 1, Verdict::NoMatch);
    // A handshake record that is not a ClientHello, or is empty, or too long.
    decided_at(
        &Matcher::tls(),
        &[22, 3, 3, 0, 4, 2, 0, 0, 0],
        6,
        Verdict::NoMatch,
    );
    decided_at(&Matcher::tls(), &[22, 3, 1, 0, 0, 1], 5, Verdict::NoMatch);
    decided_at(
        &Matcher::tls(),
        &[22, 3, 1, 0x40, 1, 1],
        5,
        Verdict::NoMatch,
    );
    decided_at(&Matcher::tls(), &[22, 3, 9, 0, 1], 3, Verdict::NoMatch);
}

#[test]
fn http1_is_a_method_token_and_a_space_but_not_the_h2_preface() {
    let http1 = Matcher::http1();
    // The preface starts like a request with method PRI: it is held until told apart.
    decided_at(
        &http1,
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        24,
        Verdict::NoMatch,
    );
    decided_at(&http1, b"PRI / HTTP/1.1\r\n", 5, Verdict::Match);
    decided_at(&http1, b"PRI *", 5, Verdict::NeedMore);
    // A leading space, a control byte, or a method past 32 bytes is not HTTP/1.
    assert_eq!(check(&http1, b" GET /"), Verdict::NoMatch);
    assert_eq!(check(&http1, b"GE\rT /"), Verdict::NoMatch);
    let longest = format!("{} /", "A".repeat(32));
    assert_eq!(check(&http1, longest.as_bytes()), Verdict::Match);
    let too_long = format!("{} /", "A".repeat(33));
    assert_eq!(check(&http1, too_long.as_bytes()), Verdict::NoMatch);
    assert_eq!(check(&http1, &too_long.as_bytes()[..32]), Verdict::NeedMore);
    // A line protocol's word is not a request.
    assert_eq!(check(&http1, b"PING\n"), Verdict::NoMatch);
}

#[test]
fn alpn_routes_wait_for_the_whole_hello_and_read_its_list() {
    let h2 = Matcher::tls_alpn(["h2", "http/1.1"]);
    let other = Matcher::tls_alpn(["x-other"]);
    for (alpn, want_h2, want_other) in [
        (&[b"h2".as_slice(), b"http/1.1"][..], true, false),
        (&[b"http/1.1".as_slice()][..], true, false),
        (&[b"x-other".as_slice()][..], false, true),
        (&[b"h3".as_slice(), b"x-other"][..], false, true),
        (&[][..], false, false),
    ] {
        let input = hello(alpn, 0, 1 << 14);
        let verdict = |yes| {
            if yes {
                Verdict::Match
            } else {
                Verdict::NoMatch
            }
        };
        decided_at(&h2, &input, input.len(), verdict(want_h2));
        decided_at(&other, &input, input.len(), verdict(want_other));
    }
    // A name that only starts like a wanted one is not it.
    let input = hello(&[b"h2c"], 0, 1 << 14);
    assert_eq!(check(&h2, &input), Verdict::NoMatch);
}

#[test]
fn a_hello_in_many_records_is_joined_at_every_split() {
    let h2 = Matcher::tls_alpn(["h2"]);
    let message = handshake(&hello_body(&[b"x", b"h2"], 300));
    // Fragments of one byte put even the handshake header across four records.
    for fragment in [1, 2, 3, 4, 5, 7, 64, 100, 200, message.len() - 1] {
        let input = records(&message, fragment);
        decided_at(&h2, &input, input.len(), Verdict::Match);
        decided_at(&Matcher::tls(), &input, 6, Verdict::Match);
        let other = Matcher::tls_alpn(["x-other"]);
        assert_eq!(check(&other, &input), Verdict::NoMatch, "{fragment}");
    }
    // A record of another type in the middle of the hello ends it.
    let mut input = records(&message, 100);
    input.splice(105..105, [21, 3, 3, 0, 2, 2, 40]);
    assert_eq!(check(&h2, &input), Verdict::NoMatch);
}

#[test]
fn a_malformed_hello_matches_no_alpn_route() {
    let h2 = Matcher::tls_alpn(["h2"]);
    let body = hello_body(&[b"h2"], 0);
    // Cut short by one byte, with its lengths saying more: the extensions overrun.
    let short = records(&handshake(&body[..body.len() - 1]), 1 << 14);
    assert_eq!(check(&h2, &short), Verdict::NoMatch);
    // Bytes after the extensions.
    let mut long = body.clone();
    long.push(0);
    assert_eq!(
        check(&h2, &records(&handshake(&long), 1 << 14)),
        Verdict::NoMatch
    );
    // An empty ALPN list, and an empty name.
    let mut empty_list = hello_body(&[], 0);
    let exts_at = empty_list.len() - 10;
    empty_list.extend([0, 16, 0, 2, 0, 0]);
    let ext_len = u16::from_be_bytes([empty_list[exts_at], empty_list[exts_at + 1]]) + 6;
    empty_list[exts_at..exts_at + 2].copy_from_slice(&ext_len.to_be_bytes());
    assert_eq!(
        check(&h2, &records(&handshake(&empty_list), 1 << 14)),
        Verdict::NoMatch
    );
    let empty_name = hello(&[b"", b"h2"], 0, 1 << 14);
    assert_eq!(check(&h2, &empty_name), Verdict::NoMatch);
    // A session id longer than 32 bytes.
    let mut bad_id = body.clone();
    bad_id[34] = 33;
    assert_eq!(
        check(&h2, &records(&handshake(&bad_id), 1 << 14)),
        Verdict::NoMatch
    );
}

#[test]
fn a_hello_without_extensions_offers_nothing() {
    let mut body = hello_body(&[], 0);
    body.truncate(2 + 32 + 5 + 6 + 2);
    let input = records(&handshake(&body), 1 << 14);
    assert_eq!(check(&Matcher::tls_alpn(["h2"]), &input), Verdict::NoMatch);
    assert_eq!(check(&Matcher::tls(), &input), Verdict::Match);
}

#[cfg(feature = "tls")]
#[test]
fn rustls_client_hellos_are_read_in_one_piece_and_byte_by_byte() {
    use crate::tls::rustls;
    use std::sync::Arc;
    for (alpn, route) in [
        (vec![b"h2".to_vec(), b"http/1.1".to_vec()], Some(0)),
        (vec![b"http/1.1".to_vec()], Some(0)),
        (vec![b"x-other".to_vec()], Some(1)),
        (vec![], Some(2)),
    ] {
        let mut config = rustls::ClientConfig::builder_with_provider(crate::tls::crypto_provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        config.alpn_protocols = alpn;
        let name = "example.com".try_into().unwrap();
        let mut client = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
        let mut input = Vec::new();
        client.write_tls(&mut input).unwrap();
        let matchers = [
            Matcher::tls_alpn(["h2", "http/1.1"]),
            Matcher::tls_alpn(["x-other"]),
            Matcher::tls(),
            Matcher::http1(),
        ];
        for n in 0..input.len() {
            assert_eq!(
                detect(&matchers, &input[..n], LIMIT, false),
                Detection::NeedMore,
                "{n} of {}",
                input.len()
            );
        }
        let want = route.map_or(Detection::NoMatch, Detection::Matched);
        assert_eq!(detect(&matchers, &input, LIMIT, false), want);
    }
}

#[test]
fn the_first_route_to_match_wins_once_those_before_it_said_no() {
    let ping = Matcher::prefix("PING\n");
    let matchers = [
        Matcher::http1(),
        Matcher::h2c(),
        ping.clone(),
        Matcher::socks5(),
    ];
    let d = |seen: &[u8]| detect(&matchers, seen, LIMIT, false);
    assert_eq!(d(b""), Detection::NeedMore);
    assert_eq!(d(b"GET / HTTP/1.1\r\n"), Detection::Matched(0));
    assert_eq!(
        d(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
        Detection::Matched(1)
    );
    // `PRI *` could be the preface: the routes after http1 wait for it to be told apart.
    assert_eq!(d(b"PRI * HTTP/2"), Detection::NeedMore);
    // `PING` could be an HTTP method until the newline says otherwise.
    assert_eq!(d(b"PING"), Detection::NeedMore);
    assert_eq!(d(b"PING\n"), Detection::Matched(2));
    assert_eq!(d(&[5, 1, 0]), Detection::Matched(3));
    assert_eq!(d(&[4, 1, 0]), Detection::NoMatch);
    assert_eq!(d(b"\r\n"), Detection::NoMatch);

    // A route that needs more holds back a later one that has matched.
    let matchers = [Matcher::prefix("PINGPONG"), Matcher::prefix("PING")];
    assert_eq!(
        detect(&matchers, b"PINGPO", LIMIT, false),
        Detection::NeedMore
    );
    assert_eq!(
        detect(&matchers, b"PINGPI", LIMIT, false),
        Detection::Matched(1)
    );
    // ... until the bytes are all there will be.
    assert_eq!(
        detect(&matchers, b"PINGPO", LIMIT, true),
        Detection::Matched(1)
    );
}

#[test]
fn waiting_ends_at_the_peek_limit_and_when_the_client_stops() {
    let matchers = [Matcher::tls_alpn(["h2"]), Matcher::prefix("PING")];
    // A hello longer than the limit cannot be read: at the limit it is no match.
    let big = hello(&[b"h2"], 1000, 1 << 14);
    let limit = 600;
    assert_eq!(
        detect(&matchers, &big[..limit - 1], limit, false),
        Detection::NeedMore
    );
    assert_eq!(
        detect(&matchers, &big[..limit], limit, false),
        Detection::NoMatch
    );
    assert_eq!(detect(&matchers, &big, limit, false), Detection::NoMatch);
    assert_eq!(
        detect(&matchers, &big, big.len(), false),
        Detection::Matched(0)
    );
    // A limit of exactly a hello's length is enough for it.
    let fits = hello(&[b"h2"], 0, 1 << 14);
    assert_eq!(
        detect(&matchers, &fits, fits.len(), false),
        Detection::Matched(0)
    );
    // The client sent all it will (EOF, the timeout): needing more is no.
    assert_eq!(detect(&matchers, b"PI", LIMIT, true), Detection::NoMatch);
    assert_eq!(detect(&matchers, b"", LIMIT, true), Detection::NoMatch);
    assert_eq!(
        detect(&matchers, b"PING", LIMIT, true),
        Detection::Matched(1)
    );
    assert_eq!(detect(&[], b"anything", LIMIT, false), Detection::NoMatch);
}

#[test]
fn a_custom_matcher_sees_what_the_limit_allows() {
    // A line protocol: a line of digits is it, anything else is not.
    let digits = Matcher::custom(|seen| {
        for &b in seen {
            match b {
                b'\n' => return Verdict::Match,
                b'0'..=b'9' => {}
                _ => return Verdict::NoMatch,
            }
        }
        Verdict::NeedMore
    });
    decided_at(&digits, b"12345\nrest", 6, Verdict::Match);
    decided_at(&digits, b"12a", 3, Verdict::NoMatch);
    let matchers = [digits];
    let long = [b'1'; 100];
    assert_eq!(detect(&matchers, &long, 100, false), Detection::NoMatch);
    assert_eq!(detect(&matchers, &long, 101, false), Detection::NeedMore);
}
