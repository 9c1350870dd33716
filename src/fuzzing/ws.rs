//! The WebSocket machine for `fuzz/fuzz_targets/ws_frames.rs` and its stable fallback in
//! `tests/fuzz_fallback.rs`; the checks live here so both hold it to the same rules.
//!
//! Input layout (`check_input`): byte 0: bit 0 role (0 server, 1 client), bit 1
//! permessage-deflate, bit 2 small limits, bit 3 no auto-pong, bit 4 mode (0: the rest is
//! what the peer sent, `check_frames`; 1: the rest describes messages, `check_round_trip`);
//! bytes 1-2: a split point.

pub use crate::proto::ws::deflate::{DeflateParams, PerMessageDeflate};
pub use crate::proto::ws::{CloseFrame, Error, Limits, Machine, Message, Role, State};

/// Limits small enough for a fuzzer to cross.
pub fn small_limits() -> Limits {
    Limits {
        max_frame_size: 300,
        max_message_size: 1000,
        auto_pong: true,
    }
}

/// permessage-deflate with context takeover both ways and full windows.
pub fn deflate(role: Role) -> PerMessageDeflate {
    let params = DeflateParams {
        server_no_context_takeover: true,
        client_no_context_takeover: true,
        server_max_window_bits: 15,
        client_max_window_bits: 15,
    };
    PerMessageDeflate::new(role, &params, 6)
}

/// A machine as byte 0 of a fuzz input asks.
pub fn machine(flags: u8, seed: u64) -> Machine {
    let role = if flags & 1 == 0 {
        Role::Server
    } else {
        Role::Client
    };
    let mut limits = if flags & 4 != 0 {
        small_limits()
    } else {
        Limits::default()
    };
    limits.auto_pong = flags & 8 == 0;
    let deflate = (flags & 2 != 0).then(|| deflate(role));
    Machine::new(role, limits, deflate, seed)
}

/// Runs one fuzz input (layout above).
pub fn check_input(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let (split, rest) = match rest {
        [a, b, rest @ ..] => (usize::from(u16::from_le_bytes([*a, *b])), rest),
        _ => (0, rest),
    };
    if flags & 16 == 0 {
        check_frames(flags, rest, split);
    } else {
        check_round_trip(flags, rest, split);
    }
}

/// What one feeding of the input gave.
#[derive(Debug, PartialEq)]
struct Run {
    delivered: Vec<Message>,
    result: Result<(), Error>,
    state: State,
    /// What the machine wrote, read back, Pongs left out (their number depends on reads).
    wrote: Vec<Message>,
    #[allow(dead_code)]
    pongs: usize,
}

/// Reads back what a machine of `role` wrote (as its peer would) and keeps any Pongs apart.
fn read_back(role: Role, out: &[u8]) -> (Vec<Message>, usize) {
    let peer = match role {
        Role::Server => Role::Client,
        Role::Client => Role::Server,
    };
    let limits = Limits {
        auto_pong: false,
        ..Limits::default()
    };
    let mut m = Machine::new(peer, limits, None, 1);
    let mut got = Vec::new();
    let r = m.receive(out, &mut Vec::new(), &mut |msg| got.push(msg));
    assert_eq!(
        r,
        Ok(()),
        "the machine wrote frames its peer refuses: {out:?}"
    );
    let pongs = got.iter().filter(|m| matches!(m, Message::Pong(_))).count();
    got.retain(|m| !matches!(m, Message::Pong(_)));
    (got, pongs)
}

fn feed(flags: u8, pieces: &[&[u8]]) -> Run {
    let mut m = machine(flags, 7);
    let role = if flags & 1 == 0 {
        Role::Server
    } else {
        Role::Client
    };
    let (mut delivered, mut out) = (Vec::new(), Vec::new());
    let mut result = Ok(());
    let bound = {
        let l = if flags & 4 != 0 {
            small_limits()
        } else {
            Limits::default()
        };
        2 * l.max_message_size + l.max_frame_size
    };
    for p in pieces {
        let before = delivered.len();
        let r = m.receive(p, &mut out, &mut |msg| delivered.push(msg));
        if result.is_ok() {
            result = r;
        } else {
            assert_eq!(r, Ok(()), "input after an error must be ignored");
            assert_eq!(delivered.len(), before, "delivered after an error");
        }
        assert!(m.held_bytes() <= bound, "held {} bytes", m.held_bytes());
    }
    for msg in &delivered {
        if let Message::Text(t) = msg {
            assert!(std::str::from_utf8(t).is_ok(), "delivered text not UTF-8");
        }
    }
    let closes = delivered
        .iter()
        .filter(|m| matches!(m, Message::Close(_)))
        .count();
    assert!(closes <= 1, "delivered after a Close");
    if closes == 1 {
        assert!(matches!(delivered.last(), Some(Message::Close(_))));
    }
    let (wrote, pongs) = read_back(role, &out);
    if flags & 8 != 0 {
        assert_eq!(pongs, 0, "auto_pong off, yet a Pong");
    }
    let pings = delivered
        .iter()
        .filter(|m| matches!(m, Message::Ping(_)))
        .count();
    assert!(pongs <= pings, "{pongs} Pongs for {pings} Pings");
    if let Err(e) = &result {
        assert_eq!(m.state(), State::Closed);
        let want = Message::Close(Some(CloseFrame {
            code: e.close_code(),
            reason: bytes::Bytes::new(),
        }));
        assert_eq!(wrote.last(), Some(&want), "no Close for {e:?}");
    }
    if m.state() == State::Open {
        assert!(wrote.is_empty(), "wrote {wrote:?} while open");
    }
    Run {
        delivered,
        result,
        state: m.state(),
        wrote,
        pongs,
    }
}

/// What the peer sent, fed whole, in two pieces and byte by byte: no panic, the same
/// messages, error, state and frames written (Pongs aside: at most one per Ping), text
/// always UTF-8, memory bounded by the limits, a Close with the error's code on failure.
pub fn check_frames(flags: u8, input: &[u8], split: usize) {
    let whole = feed(flags, &[input]);
    let at = split.min(input.len());
    let (a, b) = input.split_at(at);
    let two = feed(flags, &[a, b]);
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    let one = feed(flags, &bytes);
    let key = |r: &Run| {
        (
            r.delivered.clone(),
            r.result.clone(),
            r.state,
            r.wrote.clone(),
        )
    };
    assert_eq!(key(&whole), key(&two), "split at {at} differs");
    assert_eq!(key(&whole), key(&one), "byte by byte differs");
}

/// Messages described by `input` (kind, length, bytes), sent by a client, received by a
/// server (in the given split and byte by byte), sent back, received by the client, then
/// the closing handshake: everything arrives as sent, and both ends end `Closed`.
pub fn check_round_trip(flags: u8, input: &[u8], split: usize) {
    let mut msgs = Vec::new();
    let mut rest = input;
    while let [kind, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (body, tail) = tail.split_at(n);
        rest = tail;
        let b = bytes::Bytes::copy_from_slice(body);
        msgs.push(match kind % 4 {
            0 => Message::Text(String::from_utf8_lossy(body).into_owned().into()),
            1 => Message::Binary(b),
            2 => Message::Ping(b.slice(..b.len().min(125))),
            _ => Message::Pong(b.slice(..b.len().min(125))),
        });
    }
    let deflate = flags & 2 != 0;
    let limits = Limits {
        auto_pong: false,
        ..Limits::default()
    };
    let make = |role| {
        Machine::new(
            role,
            limits.clone(),
            deflate.then(|| self::deflate(role)),
            99,
        )
    };
    let (mut client, mut server) = (make(Role::Client), make(Role::Server));
    let mut wire = Vec::new();
    for m in &msgs {
        client.send(m, &mut wire).expect("send");
    }
    // The server side twice: split in two, and byte by byte.
    let at = split.min(wire.len());
    for pieces in [
        vec![&wire[..at], &wire[at..]],
        wire.chunks(1).collect::<Vec<_>>(),
    ] {
        let mut s = make(Role::Server);
        let mut got = Vec::new();
        for p in pieces {
            s.receive(p, &mut Vec::new(), &mut |m| got.push(m))
                .expect("server receive");
        }
        assert_eq!(got, msgs);
        assert_eq!(s.held_bytes(), 0, "server holds bytes between messages");
    }
    let mut got = Vec::new();
    server
        .receive(&wire, &mut Vec::new(), &mut |m| got.push(m))
        .expect("server receive");
    let mut back = Vec::new();
    for m in &got {
        server.send(m, &mut back).expect("server send");
    }
    let mut echoed = Vec::new();
    client
        .receive(&back, &mut Vec::new(), &mut |m| echoed.push(m))
        .expect("client receive");
    assert_eq!(echoed, msgs);
    // Closing: client first.
    let mut c = Vec::new();
    let close = Message::Close(Some(CloseFrame {
        code: 1000,
        reason: "bye".into(),
    }));
    client.send(&close, &mut c).expect("close");
    assert_eq!(client.state(), State::CloseSent);
    let mut reply = Vec::new();
    let mut seen = Vec::new();
    server
        .receive(&c, &mut reply, &mut |m| seen.push(m))
        .expect("server close");
    assert_eq!(seen, vec![close]);
    assert_eq!(server.state(), State::Closed);
    let mut seen = Vec::new();
    client
        .receive(&reply, &mut Vec::new(), &mut |m| seen.push(m))
        .expect("client close");
    assert_eq!(client.state(), State::Closed);
    assert!(matches!(&seen[..], [Message::Close(Some(f))] if f.code == 1000));
}
