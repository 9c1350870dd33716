use super::*;
use proptest::prelude::*;

fn params(snct: bool, cnct: bool, sbits: u8, cbits: u8) -> DeflateParams {
    DeflateParams {
        server_no_context_takeover: snct,
        client_no_context_takeover: cnct,
        server_max_window_bits: sbits,
        client_max_window_bits: cbits,
    }
}

/// A server and a client agreed on `p`.
fn pair(p: &DeflateParams, level: u32) -> (PerMessageDeflate, PerMessageDeflate) {
    (
        PerMessageDeflate::new(Role::Server, p, level),
        PerMessageDeflate::new(Role::Client, p, level),
    )
}

fn compress(d: &mut PerMessageDeflate, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    d.compress(payload, &mut out).unwrap();
    out
}

fn decompress(d: &mut PerMessageDeflate, input: &[u8]) -> Result<Vec<u8>, InflateError> {
    let mut out = Vec::new();
    d.decompress(input, usize::MAX, &mut out).map(|()| out)
}

/// Deterministic bytes: text-like with repeats when `text`, noise otherwise.
fn sample(len: usize, seed: u64, text: bool) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let words: [&[u8]; 6] = [
        b"{\"id\":",
        b"\"name\":",
        b"true,",
        b"null ",
        b"websocket ",
        b"42,",
    ];
    let mut v = Vec::with_capacity(len + 16);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if text {
            v.extend_from_slice(words[(x % 6) as usize]);
            v.push(b'a' + (x >> 8) as u8 % 26);
        } else {
            v.extend_from_slice(&x.to_le_bytes());
        }
    }
    v.truncate(len);
    v
}

// RFC 7692 §7.2.3's examples.

const HELLO: &[u8] = &[0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00];
const HELLO_AGAIN: &[u8] = &[0xf2, 0x00, 0x11, 0x00, 0x00];

#[test]
fn rfc_hello_compresses_byte_exact_at_each_level() {
    for level in [1, 6, 9] {
        let (mut server, _) = pair(&params(true, true, 15, 15), level);
        assert_eq!(compress(&mut server, b"Hello"), HELLO, "level {level}");
    }
}

#[test]
fn rfc_shared_window_second_hello() {
    for level in [6, 9] {
        let (mut server, _) = pair(&params(false, false, 15, 15), level);
        assert_eq!(compress(&mut server, b"Hello"), HELLO);
        assert_eq!(
            compress(&mut server, b"Hello"),
            HELLO_AGAIN,
            "level {level}"
        );
    }
    let (_, mut client) = pair(&params(false, false, 15, 15), 1);
    assert_eq!(decompress(&mut client, HELLO).unwrap(), b"Hello");
    assert_eq!(decompress(&mut client, HELLO_AGAIN).unwrap(), b"Hello");
    // Level 1 (zlib-rs's quick strategy) codes the match in another, equally short way.
    let (mut server, mut client) = pair(&params(false, false, 15, 15), 1);
    assert_eq!(compress(&mut server, b"Hello"), HELLO);
    let again = compress(&mut server, b"Hello");
    assert!(again.len() <= HELLO_AGAIN.len(), "{again:02x?}");
    assert_eq!(decompress(&mut client, HELLO).unwrap(), b"Hello");
    assert_eq!(decompress(&mut client, &again).unwrap(), b"Hello");
}

#[test]
fn rfc_examples_decompress() {
    let examples: [&[u8]; 4] = [
        HELLO,
        // §7.2.3.3: a stored block.
        &[
            0x00, 0x05, 0x00, 0xfa, 0xff, 0x48, 0x65, 0x6c, 0x6c, 0x6f, 0x00,
        ],
        // §7.2.3.4: BFINAL set.
        &[0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00],
        // §7.2.3.5: two blocks in one message.
        &[
            0xf2, 0x48, 0x05, 0x00, 0x00, 0x00, 0xff, 0xff, 0xca, 0xc9, 0xc9, 0x07, 0x00,
        ],
    ];
    for takeover in [false, true] {
        let (_, mut client) = pair(&params(!takeover, !takeover, 15, 15), 1);
        for e in examples {
            assert_eq!(decompress(&mut client, e).unwrap(), b"Hello", "{e:02x?}");
        }
    }
}

#[test]
fn empty_messages() {
    let (mut server, mut client) = pair(&params(false, false, 15, 15), 1);
    // First in a stream, and after another message (where zlib's flush makes no bytes).
    for m in [&b""[..], b"x", b""] {
        let c = compress(&mut server, m);
        assert!(!c.is_empty());
        assert_eq!(decompress(&mut client, &c).unwrap(), m);
    }
    // §7.2.3.6: the single 0x00 byte, and an empty payload with RSV1 set.
    assert_eq!(decompress(&mut client, &[0x00]).unwrap(), b"");
    assert_eq!(decompress(&mut client, &[]).unwrap(), b"");
    // The stream goes on.
    let c = compress(&mut server, b"after");
    assert_eq!(decompress(&mut client, &c).unwrap(), b"after");
}

#[test]
fn round_trips_every_window_level_and_takeover() {
    let messages: Vec<Vec<u8>> = [0, 1, 100, 5000, 70_000]
        .iter()
        .enumerate()
        .flat_map(|(i, &n)| [sample(n, i as u64, true), sample(n, i as u64, false)])
        .collect();
    for bits in [8, 9, 12, 15] {
        for level in [0, 1, 6, 9] {
            for takeover in [false, true] {
                let p = params(!takeover, !takeover, bits, bits);
                let (mut server, mut client) = pair(&p, level);
                for m in &messages {
                    let c = compress(&mut server, m);
                    assert_eq!(&decompress(&mut client, &c).unwrap(), m, "{bits} {level}");
                    let c = compress(&mut client, m);
                    assert_eq!(&decompress(&mut server, &c).unwrap(), m, "{bits} {level}");
                }
            }
        }
    }
}

#[test]
fn each_direction_follows_its_own_params() {
    // The server keeps its context, the client does not.
    let (mut server, mut client) = pair(&params(false, true, 15, 15), 1);
    let m = sample(2000, 7, true);
    for _ in 0..3 {
        let c = compress(&mut server, &m);
        assert_eq!(decompress(&mut client, &c).unwrap(), m);
        let c = compress(&mut client, &m);
        assert_eq!(decompress(&mut server, &c).unwrap(), m);
    }
    // Server: its compressor and (the client's direction) no inflater; client: the reverse.
    assert_eq!(server.held_bytes(), deflate_state_bytes(15));
    assert_eq!(client.held_bytes(), INFLATE_STATE_BYTES);
}

#[test]
fn context_takeover_shrinks_a_repeat_and_no_takeover_frees_state() {
    let m = sample(3000, 3, true);
    let (mut server, mut client) = pair(&params(false, false, 15, 15), 1);
    assert_eq!(server.held_bytes(), 0, "made lazily");
    let first = compress(&mut server, &m);
    let second = compress(&mut server, &m);
    assert!(
        second.len() * 4 < first.len(),
        "{} vs {}",
        second.len(),
        first.len()
    );
    assert_eq!(decompress(&mut client, &first).unwrap(), m);
    assert_eq!(decompress(&mut client, &second).unwrap(), m);
    assert!(server.held_bytes() > 0 && client.held_bytes() > 0);

    let (mut server, mut client) = pair(&params(true, true, 15, 15), 1);
    let first = compress(&mut server, &m);
    assert_eq!(server.held_bytes(), 0);
    assert_eq!(compress(&mut server, &m), first);
    assert_eq!(decompress(&mut client, &first).unwrap(), m);
    assert_eq!(client.held_bytes(), 0);
    // A message that needs the previous one's window fails on a fresh inflater.
    let (mut kept, _) = pair(&params(false, false, 15, 15), 1);
    compress(&mut kept, &m);
    let needs_history = compress(&mut kept, &m);
    assert_eq!(
        decompress(&mut client, &needs_history),
        Err(InflateError::Corrupt)
    );
}

#[test]
fn smaller_windows_hold_less() {
    let m = sample(4000, 1, true);
    let mut held = Vec::new();
    for bits in [9, 12, 15] {
        let (mut server, mut client) = pair(&params(false, false, bits, bits), 1);
        let c = compress(&mut server, &m);
        decompress(&mut client, &c).unwrap();
        held.push(server.held_bytes() + client.held_bytes());
    }
    assert!(held[0] < held[1] && held[1] < held[2], "{held:?}");
}

#[test]
fn zip_bomb_stops_at_max() {
    let bomb_len = 1 << 20;
    let (mut server, _) = pair(&params(true, true, 15, 15), 9);
    let bomb = compress(&mut server, &vec![0u8; bomb_len]);
    assert!(bomb.len() < 2000, "{}", bomb.len());
    let (_, mut client) = pair(&params(true, true, 15, 15), 9);
    let mut out = Vec::new();
    client.decompress(&bomb, bomb_len, &mut out).unwrap();
    assert_eq!(out.len(), bomb_len);
    assert!(out.iter().all(|&b| b == 0));
    for max in [bomb_len - 1, 1000, 1, 0] {
        let mut out = Vec::new();
        assert_eq!(
            client.decompress(&bomb, max, &mut out),
            Err(InflateError::TooBig)
        );
        assert!(out.is_empty());
        assert!(out.capacity() <= max, "{} > {max}", out.capacity());
    }
    assert_eq!(client.held_bytes(), 0);
    // `max` counts what this message adds, not what `out` held before.
    let mut out = b"prefix".to_vec();
    client.decompress(&bomb, bomb_len, &mut out).unwrap();
    assert_eq!(out.len(), 6 + bomb_len);
}

#[test]
fn corrupt_input_is_an_error_and_the_next_message_is_fine() {
    let (mut server, mut client) = pair(&params(false, false, 15, 15), 1);
    // A reserved block type (11), and a distance before the stream's start.
    for bad in [&[0x07u8, 0x00][..], &[0xff; 16], HELLO_AGAIN] {
        let mut out = b"kept".to_vec();
        assert_eq!(
            client.decompress(bad, 1 << 20, &mut out),
            Err(InflateError::Corrupt)
        );
        assert_eq!(out, b"kept");
        assert_eq!(client.held_bytes(), 0);
    }
    let c = compress(&mut server, b"fine");
    assert_eq!(decompress(&mut client, &c).unwrap(), b"fine");
}

// Negotiation.

fn cfg() -> DeflateConfig {
    DeflateConfig::default()
}

fn server(offers: &[&str], cfg: &DeflateConfig) -> Option<(DeflateParams, String)> {
    negotiate_server(offers.iter().copied(), cfg)
}

#[test]
fn autobahn_13_offers_are_accepted() {
    // What the Autobahn testsuite's client offers in cases 12.* and 13.1..13.7.
    let base = "permessage-deflate; client_no_context_takeover; client_max_window_bits";
    let cases = [
        (base.to_string(), None),
        (format!("{base}; server_no_context_takeover"), None),
        (format!("{base}; server_max_window_bits=8"), Some(8)),
        (format!("{base}; server_max_window_bits=15"), Some(15)),
        (
            format!("{base}; server_no_context_takeover; server_max_window_bits=8"),
            Some(8),
        ),
        (
            format!("{base}; server_no_context_takeover; server_max_window_bits=15"),
            Some(15),
        ),
        (
            format!(
                "{base}; server_no_context_takeover; server_max_window_bits=8, \
                 {base}; server_no_context_takeover, {base}"
            ),
            Some(8),
        ),
    ];
    for (offer, bits) in cases {
        let (p, response) = server(&[&offer], &cfg()).unwrap();
        let mut expect =
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
                .to_string();
        if let Some(b) = bits {
            expect.push_str(&format!("; server_max_window_bits={b}"));
        }
        assert_eq!(response, expect, "{offer}");
        assert_eq!(p, params(true, true, bits.unwrap_or(15), 15));
    }
}

#[test]
fn server_answers_each_param() {
    let keep = DeflateConfig {
        server_no_context_takeover: false,
        client_no_context_takeover: false,
        ..cfg()
    };
    let pmd = "permessage-deflate";
    assert_eq!(
        server(&[pmd], &keep).unwrap(),
        (params(false, false, 15, 15), pmd.into())
    );
    assert_eq!(
        server(&["permessage-deflate; server_no_context_takeover"], &keep).unwrap(),
        (
            params(true, false, 15, 15),
            "permessage-deflate; server_no_context_takeover".into()
        )
    );
    // The client's own client_no_context_takeover is a hint: unanswered, our inflater keeps
    // its context.
    assert_eq!(
        server(&["permessage-deflate; client_no_context_takeover"], &keep).unwrap(),
        (params(false, false, 15, 15), pmd.into())
    );
    assert_eq!(
        server(&["permessage-deflate; server_max_window_bits=10"], &keep).unwrap(),
        (
            params(false, false, 10, 15),
            "permessage-deflate; server_max_window_bits=10".into()
        )
    );
    // Our own limit applies to our window, offered or not; the smaller one wins.
    let small = DeflateConfig {
        server_max_window_bits: Some(12),
        client_max_window_bits: Some(11),
        ..keep.clone()
    };
    assert_eq!(
        server(&[pmd], &small).unwrap(),
        (
            params(false, false, 12, 15),
            "permessage-deflate; server_max_window_bits=12".into()
        )
    );
    assert_eq!(
        server(&["permessage-deflate; server_max_window_bits=10"], &small)
            .unwrap()
            .1,
        "permessage-deflate; server_max_window_bits=10"
    );
    // client_max_window_bits: answered only when offered; a value in the offer is echoed.
    assert_eq!(
        server(&["permessage-deflate; client_max_window_bits"], &small).unwrap(),
        (
            params(false, false, 12, 11),
            "permessage-deflate; server_max_window_bits=12; client_max_window_bits=11".into()
        )
    );
    assert_eq!(
        server(&["permessage-deflate; client_max_window_bits=13"], &keep).unwrap(),
        (
            params(false, false, 15, 13),
            "permessage-deflate; client_max_window_bits=13".into()
        )
    );
    assert_eq!(
        server(&["permessage-deflate; client_max_window_bits=9"], &small)
            .unwrap()
            .0,
        params(false, false, 12, 9)
    );
    assert_eq!(
        server(&["permessage-deflate; client_max_window_bits"], &keep)
            .unwrap()
            .1,
        pmd
    );
}

#[test]
fn server_declines_bad_offers_and_falls_back() {
    let bad = [
        "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
        "permessage-deflate; client_max_window_bits; client_max_window_bits=10",
        "permessage-deflate; server_max_window_bits=10; server_max_window_bits=10",
        "permessage-deflate; unknown",
        "permessage-deflate; unknown=1",
        "permessage-deflate; server_no_context_takeover=true",
        "permessage-deflate; client_no_context_takeover=\"\"",
        "permessage-deflate; server_max_window_bits",
        "permessage-deflate; server_max_window_bits=7",
        "permessage-deflate; server_max_window_bits=16",
        "permessage-deflate; server_max_window_bits=08",
        "permessage-deflate; server_max_window_bits=+9",
        "permessage-deflate; server_max_window_bits=ten",
        "permessage-deflate; server_max_window_bits=",
        "permessage-deflate; client_max_window_bits=1000000000000000000000",
        "permessage-deflate; server_max_window_bits=\"10",
        "permessage-deflate; server_max_window_bits=\" 10\"",
        "permessage-deflate; server_max_window_bits=1 0",
        "permessage-deflate;",
        "permessage-deflate; ; server_no_context_takeover",
        "permessage-deflate x",
        "permessage-deflate; server_no_context_takeover\u{e9}",
    ];
    for b in bad {
        assert_eq!(server(&[b], &cfg()), None, "{b}");
        let (p, _) = server(&[b, "permessage-deflate; server_max_window_bits=9"], &cfg())
            .unwrap_or_else(|| panic!("no fallback after {b}"));
        assert_eq!(p.server_max_window_bits, 9, "{b}");
    }
    // Several offers in one value, after other extensions.
    let (p, _) = server(
        &[
            "x-foo; a=1, x-bar",
            "permessage-deflate; bad, permessage-deflate; server_max_window_bits=11",
        ],
        &cfg(),
    )
    .unwrap();
    assert_eq!(p.server_max_window_bits, 11);
    assert_eq!(server(&[], &cfg()), None);
    assert_eq!(server(&["x-foo, , x-bar; a"], &cfg()), None);
}

#[test]
fn quoted_values_and_whitespace() {
    for offer in [
        "permessage-deflate; server_max_window_bits=\"10\"",
        "permessage-deflate; server_max_window_bits=\"1\\0\"",
        "  permessage-deflate ;\tserver_max_window_bits = 10  ",
        "PerMessage-Deflate; Server_Max_Window_Bits=10",
        // A comma inside a quoted-string does not split the list.
        "x-foo; a=\"b,permessage-deflate; server_max_window_bits=9\", permessage-deflate; server_max_window_bits=10",
    ] {
        let (p, _) = server(&[offer], &cfg()).unwrap_or_else(|| panic!("{offer}"));
        assert_eq!(p.server_max_window_bits, 10, "{offer}");
    }
}

#[test]
fn client_offer_says_what_the_config_asks() {
    assert_eq!(
        client_offer(&cfg()),
        "permessage-deflate; server_no_context_takeover; client_no_context_takeover; client_max_window_bits"
    );
    let c = DeflateConfig {
        server_no_context_takeover: false,
        client_no_context_takeover: false,
        server_max_window_bits: Some(20),
        client_max_window_bits: Some(3),
        ..cfg()
    };
    assert_eq!(
        client_offer(&c),
        "permessage-deflate; server_max_window_bits=15; client_max_window_bits=8"
    );
}

fn client(response: &[&str], cfg: &DeflateConfig) -> Result<Option<DeflateParams>, &'static str> {
    client_accept(response.iter().copied(), cfg)
}

#[test]
fn client_accepts_what_it_offered() {
    assert_eq!(client(&[], &cfg()), Ok(None));
    assert_eq!(
        client(
            &["permessage-deflate; server_no_context_takeover; client_no_context_takeover"],
            &cfg()
        ),
        Ok(Some(params(true, true, 15, 15)))
    );
    let keep = DeflateConfig {
        server_no_context_takeover: false,
        client_no_context_takeover: false,
        ..cfg()
    };
    // A server may add either no_context_takeover, limit its own window unasked, and limit
    // ours (we always offer client_max_window_bits).
    assert_eq!(
        client(
            &["permessage-deflate; client_no_context_takeover; server_max_window_bits=9; client_max_window_bits=8"],
            &keep
        ),
        Ok(Some(params(false, true, 9, 8)))
    );
    // Left out though asked for: taken, inflating with context and 15 bits.
    let ask = DeflateConfig {
        server_max_window_bits: Some(10),
        ..cfg()
    };
    assert_eq!(
        client(&["permessage-deflate"], &ask),
        Ok(Some(params(false, true, 15, 15)))
    );
    let ours = DeflateConfig {
        client_max_window_bits: Some(10),
        ..keep.clone()
    };
    assert_eq!(
        client(&["permessage-deflate"], &ours),
        Ok(Some(params(false, false, 15, 10)))
    );
    assert_eq!(
        client(&["permessage-deflate; client_max_window_bits=9"], &ours),
        Ok(Some(params(false, false, 15, 9)))
    );
}

#[test]
fn client_rejects_what_it_did_not_offer() {
    let ask = DeflateConfig {
        server_max_window_bits: Some(10),
        client_max_window_bits: Some(10),
        ..cfg()
    };
    for bad in [
        "x-foo",
        "permessage-deflate, x-foo",
        "permessage-deflate, permessage-deflate",
        "permessage-deflate; unknown",
        "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
        "permessage-deflate; server_max_window_bits=11",
        "permessage-deflate; client_max_window_bits=11",
        "permessage-deflate; client_max_window_bits",
        "permessage-deflate; server_max_window_bits=7",
        "permessage-deflate; server_max_window_bits=\"10",
        "x-foo; a=\"",
    ] {
        assert!(client(&[bad], &ask).is_err(), "{bad}");
    }
    assert!(client(&["permessage-deflate", "permessage-deflate"], &cfg()).is_err());
}

#[test]
fn server_and_client_agree() {
    let configs = [
        cfg(),
        DeflateConfig {
            server_no_context_takeover: false,
            client_no_context_takeover: false,
            ..cfg()
        },
        DeflateConfig {
            server_max_window_bits: Some(8),
            client_max_window_bits: Some(9),
            ..cfg()
        },
        DeflateConfig {
            server_max_window_bits: Some(11),
            client_max_window_bits: Some(8),
            ..cfg()
        },
    ];
    for c in &configs {
        let (p, response) = negotiate_server([client_offer(c).as_str()], c).unwrap();
        assert_eq!(
            client_accept([response.as_str()], c),
            Ok(Some(p.clone())),
            "{c:?}"
        );
        let (mut server, mut client) = pair(&p, 1);
        let m = sample(10_000, 5, true);
        let x = compress(&mut server, &m);
        assert_eq!(decompress(&mut client, &x).unwrap(), m);
        let x = compress(&mut client, &m);
        assert_eq!(decompress(&mut server, &x).unwrap(), m);
    }
}

proptest! {
    #[test]
    fn negotiation_never_panics(a in ".{0,80}", b in "[ -~]{0,80}") {
        let _ = negotiate_server([a.as_str(), b.as_str()], &cfg());
        let _ = client_accept([a.as_str(), b.as_str()], &cfg());
    }

    #[test]
    fn inflating_anything_stays_bounded(input in proptest::collection::vec(any::<u8>(), 0..300), max in 0usize..4096) {
        let (_, mut client) = pair(&params(false, false, 9, 9), 1);
        let mut out = Vec::new();
        let _ = client.decompress(&input, max, &mut out);
        prop_assert!(out.len() <= max);
    }
}

// Interop with another zlib: Python's, when python3 is here.

/// Runs `script` with `input` on stdin and returns its stdout, or None without python3.
fn python(script: &str, input: &[u8]) -> Option<Vec<u8>> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = match Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(_) => {
            eprintln!("python3 is not here: interop not checked");
            return None;
        }
    };
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "python failed");
    Some(out.stdout)
}

/// Length-prefixed frames, so several messages cross one pipe.
fn frames(messages: &[Vec<u8>]) -> Vec<u8> {
    let mut v = Vec::new();
    for m in messages {
        v.extend_from_slice(&(m.len() as u32).to_be_bytes());
        v.extend_from_slice(m);
    }
    v
}

fn unframe(mut v: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while v.len() >= 4 {
        let n = u32::from_be_bytes(v[..4].try_into().unwrap()) as usize;
        out.push(v[4..4 + n].to_vec());
        v = &v[4 + n..];
    }
    out
}

const PY_FRAMES: &str = "
import sys, zlib, struct
def frames(data):
    out = []
    while data:
        (n,) = struct.unpack('>I', data[:4]); out.append(data[4:4 + n]); data = data[4 + n:]
    return out
def emit(ms):
    sys.stdout.buffer.write(b''.join(struct.pack('>I', len(m)) + m for m in ms))
";

/// Messages whose repeats sit 280 bytes apart: a window of 9 bits could reach them, one of
/// 8 bits cannot.
fn far_repeats(seed: u64) -> Vec<u8> {
    sample(280, seed, false).repeat(20)
}

#[test]
fn python_inflates_what_we_deflate_even_with_8_bits() {
    for (bits, takeover) in [(15, false), (15, true), (9, true), (8, false), (8, true)] {
        let messages: Vec<Vec<u8>> = (0..4)
            .flat_map(|i| [far_repeats(i), sample(3000, i, true), far_repeats(i)])
            .collect();
        let (mut server, _) = pair(&params(!takeover, true, bits, 15), 6);
        let compressed: Vec<Vec<u8>> = messages.iter().map(|m| compress(&mut server, m)).collect();
        let script = format!(
            "{PY_FRAMES}
# One byte out per call: zlib then checks every distance against the window it was given
# (with a larger output buffer, it lets a match reach into that buffer).
def inflate(d, data):
    out = []
    while True:
        o = d.decompress(data, 1)
        data = d.unconsumed_tail
        if not o and not data:
            return b''.join(out)
        out.append(o)
d = None
out = []
for m in frames(sys.stdin.buffer.read()):
    if d is None or {fresh}:
        d = zlib.decompressobj(-{bits})
    out.append(inflate(d, m + b'\\x00\\x00\\xff\\xff'))
emit(out)
",
            fresh = if takeover { "False" } else { "True" },
        );
        let Some(out) = python(&script, &frames(&compressed)) else {
            return;
        };
        assert_eq!(unframe(&out), messages, "{bits} bits, takeover {takeover}");
    }
}

#[test]
fn we_inflate_what_python_deflates() {
    for takeover in [false, true] {
        let messages: Vec<Vec<u8>> = (0..4)
            .flat_map(|i| [sample(5000, i, true), far_repeats(i)])
            .collect();
        let script = format!(
            "{PY_FRAMES}
c = None
out = []
for m in frames(sys.stdin.buffer.read()):
    if c is None or {fresh}:
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
    z = c.compress(m) + c.flush(zlib.Z_SYNC_FLUSH)
    assert z.endswith(b'\\x00\\x00\\xff\\xff')
    out.append(z[:-4])
emit(out)
",
            fresh = if takeover { "False" } else { "True" },
        );
        let Some(out) = python(&script, &frames(&messages)) else {
            return;
        };
        let (_, mut client) = pair(&params(!takeover, true, 15, 15), 1);
        for (c, m) in unframe(&out).iter().zip(&messages) {
            assert_eq!(&decompress(&mut client, c).unwrap(), m);
        }
        assert_eq!(unframe(&out).len(), messages.len());
    }
}
