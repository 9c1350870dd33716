//! permessage-deflate (RFC 7692): negotiation and the per-message compressor.
//!
//! # The library
//!
//! flate2 on its `zlib-rs` backend (pure Rust), chosen by `benches/ws_deflate.rs`
//! (`taskset -c 1`, on this project's 2-core machine, shared, so a few percent is noise).
//! ns per message, JSON-ish text, level 1; "fresh" makes and drops the state per message
//! (no context takeover, fibr's default), "kept" is context takeover; state is what the
//! allocator holds after a 16 KiB message at 15 window bits:
//!
//! | backend | deflate fresh 64 B / 1 KiB / 16 KiB | kept 1 KiB | inflate fresh 1 KiB / 16 KiB | state deflate + inflate |
//! |---|---|---|---|---|
//! | zlib-rs | 17 400 / 21 000 / 81 000 | 530 | 2 800 / 36 000 | 380 + 48 KB |
//! | zlib-ng (C, cmake) | 7 800 / 10 600 / 86 000 | 460 | 3 400 / 47 000 | 350 + 42 KB |
//! | zlib 1.2.13 (system) | 65 000 / 83 000 / 280 000 | 4 700 | 6 900 / 48 000 | 268 + 40 KB |
//! | miniz_oxide | 120 000 / 93 000 / 220 000 | 7 600 | 11 300 / 69 000 | 319 + 43 KB |
//!
//! zlib-ng makes a fresh deflate state in half the time, but it needs cmake and a C
//! compiler to build and puts C in the path of untrusted input (the inflater); zlib-rs is
//! as fast everywhere else, inflates fastest, and is Rust. miniz_oxide is slowest and has
//! no window-bits API (flate2's `new_with_window_bits` needs a zlib backend), so it could not
//! honour an offer's `server_max_window_bits`. zlib-rs's deflate state has a fixed 249 KB
//! (the hash table and symbol buffers) besides its 4 << bits of window, and its inflater
//! takes 48 KB whatever the window: small windows save little memory with it, which is one
//! more reason to free the state between messages.
//!
//! # Window bits 8
//!
//! RFC 7692 allows windows of 2^8..2^15 bytes, but zlib (and so flate2, with every backend)
//! cannot make a raw deflate stream with an 8-bit window: it asks for 9..=15. What each side
//! does with an 8:
//!
//! - **Compressing** for a peer that allows only 8 bits (an offer's `server_max_window_bits=8`,
//!   a response's `client_max_window_bits=8`): we accept and compress with a 9-bit window. That
//!   is safe for the zlib family only because of how it matches, not because of the window: its
//!   matcher never looks further back than `window - 262` bytes (`MAX_DIST`, room for a
//!   lookahead of one longest match), which is 250 for a 9-bit window, below the 256 an
//!   8-bit inflater can reach. zlib-rs keeps zlib's `max_dist` in every strategy. A test
//!   inflates our 9-bit output with Python's zlib at `wbits=-8`, one output byte per call so
//!   that it checks every distance against the 256-byte window, so a backend that matched
//!   further would be caught. Declining instead would
//!   turn the Autobahn cases that offer 8 (13.3.*, 13.5.*, the first offer of 13.7.*) into
//!   "unimplemented".
//! - **Decompressing** what a peer sent with an 8-bit window: we inflate with 9 bits, which
//!   reads every stream an 8-bit window can make (its distances are all shorter).
//! - **Asking** for 8 (`DeflateConfig::*_max_window_bits = Some(8)`) is sent as 8; values
//!   outside 8..=15 are clamped into it.
//!
//! # Memory
//!
//! A direction without context takeover makes its zlib state for a message and drops it
//! after, so an idle connection holds none (both directions default to no context takeover).
//! With takeover the state lives as long as the connection.

use std::borrow::Cow;
use std::cell::RefCell;

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use super::Role;

/// What this side asks for / accepts (part of the user's Config).
#[derive(Clone, Debug)]
pub struct DeflateConfig {
    /// Ask that the server not keep its compression context between messages (a server
    /// always honours it when offered, and also applies it on its own when this is set).
    pub server_no_context_takeover: bool,
    /// Ask that the client not keep its compression context between messages (a client
    /// also applies it on its own when this is set).
    pub client_no_context_takeover: bool,
    /// The largest window the server may compress with (None = 15); 8..=15, clamped.
    pub server_max_window_bits: Option<u8>,
    /// The largest window the client may compress with (None = 15); 8..=15, clamped. A
    /// server can only ask this of a client that offered `client_max_window_bits`.
    pub client_max_window_bits: Option<u8>,
    /// zlib's level, 0..=9 (clamped).
    pub level: u32,
    /// Messages shorter than this are sent uncompressed (RSV1 clear).
    pub threshold: usize,
}

impl Default for DeflateConfig {
    /// No context takeover either way: an idle connection should not hold zlib state.
    /// Level 1: zlib-rs's quick strategy (static Huffman codes) costs half of level 3's
    /// time on 16 KiB (81 vs 164 µs fresh) and a tenth per small message with takeover
    /// (0.5 vs 4.8 µs for 1 KiB), for output about a third larger (ratio 0.40 vs 0.29 on
    /// 1 KiB of JSON). Threshold 256: a 64 B message does not shrink at any level (ratio
    /// 1.0) yet costs a fresh state (17 µs), so small messages go out as they are.
    fn default() -> Self {
        DeflateConfig {
            server_no_context_takeover: true,
            client_no_context_takeover: true,
            server_max_window_bits: None,
            client_max_window_bits: None,
            level: DEFAULT_LEVEL,
            threshold: DEFAULT_THRESHOLD,
        }
    }
}

const DEFAULT_LEVEL: u32 = 1;
const DEFAULT_THRESHOLD: usize = 256;

/// The parameters both sides agreed on (window bits are 8..=15 as negotiated; an 8 is
/// compressed and inflated with 9, see the module's doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeflateParams {
    /// The server starts every message with an empty window (no back-references into
    /// earlier messages).
    pub server_no_context_takeover: bool,
    /// The client starts every message with an empty window.
    pub client_no_context_takeover: bool,
    /// LZ77 window bits of what the server compresses.
    pub server_max_window_bits: u8,
    /// LZ77 window bits of what the client compresses.
    pub client_max_window_bits: u8,
}

const NAME: &str = "permessage-deflate";
/// What `Sync` flush ends every message with, and RFC 7692 §7.2.1 strips.
const TAIL: [u8; 4] = [0, 0, 0xff, 0xff];

fn clamp_bits(bits: Option<u8>) -> u8 {
    bits.unwrap_or(15).clamp(8, 15)
}

/// Server: from the client's `Sec-WebSocket-Extensions` header values (all of them, in
/// order), pick the first acceptable permessage-deflate offer and return the agreed params
/// and the response header value. Other extensions are skipped, and so is a permessage-deflate
/// offer that is malformed (unknown or duplicate parameter, bad value), per RFC 7692 §5.
pub fn negotiate_server<'a>(
    offers: impl IntoIterator<Item = &'a str>,
    cfg: &DeflateConfig,
) -> Option<(DeflateParams, String)> {
    let offer = offers
        .into_iter()
        .flat_map(elements)
        .find_map(|e| parse_element(e).ok().flatten())?;
    let ours = clamp_bits(cfg.server_max_window_bits);
    let params = DeflateParams {
        server_no_context_takeover: offer.server_no_context_takeover
            || cfg.server_no_context_takeover,
        // The offer's own client_no_context_takeover is only a hint: unless we answer it,
        // our inflater keeps the context, which is always safe.
        client_no_context_takeover: cfg.client_no_context_takeover,
        server_max_window_bits: offer.server_max_window_bits.map_or(ours, |b| b.min(ours)),
        client_max_window_bits: match offer.client_max_window_bits {
            None => 15,
            Some(b) => b.unwrap_or(15).min(clamp_bits(cfg.client_max_window_bits)),
        },
    };
    let mut response = String::from(NAME);
    if params.server_no_context_takeover {
        response.push_str("; server_no_context_takeover");
    }
    if params.client_no_context_takeover {
        response.push_str("; client_no_context_takeover");
    }
    // An offer's server_max_window_bits is accepted only by answering it (§7.1.2.1); we
    // also answer when we want a smaller window ourselves.
    if offer.server_max_window_bits.is_some() || params.server_max_window_bits < 15 {
        push_bits(
            &mut response,
            "server_max_window_bits",
            params.server_max_window_bits,
        );
    }
    // Only when offered (§7.1.2.2); a value in the offer is echoed so that it binds.
    if let Some(b) = offer.client_max_window_bits {
        if b.is_some() || params.client_max_window_bits < 15 {
            push_bits(
                &mut response,
                "client_max_window_bits",
                params.client_max_window_bits,
            );
        }
    }
    Some((params, response))
}

/// Client: the header value to offer.
pub fn client_offer(cfg: &DeflateConfig) -> String {
    let mut offer = String::from(NAME);
    if cfg.server_no_context_takeover {
        offer.push_str("; server_no_context_takeover");
    }
    if cfg.client_no_context_takeover {
        offer.push_str("; client_no_context_takeover");
    }
    if cfg.server_max_window_bits.is_some() {
        push_bits(
            &mut offer,
            "server_max_window_bits",
            clamp_bits(cfg.server_max_window_bits),
        );
    }
    // Always offered, so that a server may limit our window.
    match cfg.client_max_window_bits {
        Some(_) => push_bits(
            &mut offer,
            "client_max_window_bits",
            clamp_bits(cfg.client_max_window_bits),
        ),
        None => offer.push_str("; client_max_window_bits"),
    }
    offer
}

/// Client: check the server's response (the values of its `Sec-WebSocket-Extensions`, as
/// sent by [`client_offer`] with the same `cfg`): `Ok(None)` if it declined, `Err` if it
/// answered something we did not offer or invalid.
///
/// A response that leaves out `server_no_context_takeover` or `server_max_window_bits`
/// though we asked for them is taken (we inflate with context and a 15-bit window, which
/// reads anything), not failed.
pub fn client_accept<'a>(
    response: impl IntoIterator<Item = &'a str>,
    cfg: &DeflateConfig,
) -> Result<Option<DeflateParams>, &'static str> {
    let mut agreed = None;
    for element in response.into_iter().flat_map(elements) {
        let r = match parse_element(element) {
            Ok(Some(r)) => r,
            Ok(None) => return Err("the server answered an extension that was not offered"),
            Err(()) => return Err("invalid Sec-WebSocket-Extensions in the response"),
        };
        if agreed.is_some() {
            return Err("the server answered permessage-deflate twice");
        }
        let offered_server = cfg.server_max_window_bits.map(|b| b.clamp(8, 15));
        let server_max_window_bits = match r.server_max_window_bits {
            Some(b) if offered_server.is_some_and(|o| b > o) => {
                return Err("server_max_window_bits above the offer")
            }
            Some(b) => b,
            None => 15,
        };
        let ours = clamp_bits(cfg.client_max_window_bits);
        let client_max_window_bits = match r.client_max_window_bits {
            Some(None) => return Err("client_max_window_bits without a value in the response"),
            Some(Some(b)) if b > ours => return Err("client_max_window_bits above the offer"),
            Some(Some(b)) => b,
            None => ours,
        };
        agreed = Some(DeflateParams {
            server_no_context_takeover: r.server_no_context_takeover,
            // Our offer's client_no_context_takeover promised it, answered or not.
            client_no_context_takeover: r.client_no_context_takeover
                || cfg.client_no_context_takeover,
            server_max_window_bits,
            client_max_window_bits,
        });
    }
    Ok(agreed)
}

fn push_bits(s: &mut String, name: &str, bits: u8) {
    s.push_str("; ");
    s.push_str(name);
    s.push('=');
    s.push_str(&bits.to_string());
}

/// The parameters of one permessage-deflate element, as written.
#[derive(Default)]
struct Offer {
    server_no_context_takeover: bool,
    client_no_context_takeover: bool,
    server_max_window_bits: Option<u8>,
    /// `Some(None)`: the parameter without a value.
    client_max_window_bits: Option<Option<u8>>,
}

/// The non-empty elements of one header value (RFC 9110's `#` list: commas outside quoted
/// strings).
fn elements(value: &str) -> impl Iterator<Item = &str> {
    split_unquoted(value, b',').filter(|e| !e.trim_matches(OWS).is_empty())
}

const OWS: [char; 2] = [' ', '\t'];

/// Splits at each `sep` outside a quoted-string (where a backslash escapes the next byte).
fn split_unquoted(s: &str, sep: u8) -> impl Iterator<Item = &str> {
    let mut rest = Some(s);
    std::iter::from_fn(move || {
        let s = rest?;
        let (mut quoted, mut escaped) = (false, false);
        for (i, &c) in s.as_bytes().iter().enumerate() {
            if escaped {
                escaped = false;
            } else if quoted {
                match c {
                    b'\\' => escaped = true,
                    b'"' => quoted = false,
                    _ => {}
                }
            } else if c == b'"' {
                quoted = true;
            } else if c == sep {
                // `sep` is ASCII, so `i` is a char boundary.
                rest = Some(&s[i + 1..]);
                return Some(&s[..i]);
            }
        }
        rest = None;
        Some(s)
    })
}

/// One extension element (RFC 6455 §9.1: `token *( ";" token [ "=" (token | quoted-string) ] )`):
/// `Ok(None)` if it names another extension, `Err` if it breaks the grammar or is a
/// permessage-deflate element with an unknown, duplicate or invalid parameter.
fn parse_element(element: &str) -> Result<Option<Offer>, ()> {
    let mut parts = split_unquoted(element, b';');
    let name = parts.next().unwrap_or("").trim_matches(OWS);
    if !is_token(name) {
        return Err(());
    }
    let ours = name.eq_ignore_ascii_case(NAME);
    let mut offer = Offer::default();
    for part in parts {
        let (key, value) = match part.split_once('=') {
            Some((k, v)) => (k.trim_matches(OWS), Some(param_value(v.trim_matches(OWS))?)),
            None => (part.trim_matches(OWS), None),
        };
        if !is_token(key) {
            return Err(());
        }
        if !ours {
            continue;
        }
        let key = key.to_ascii_lowercase();
        match (key.as_str(), value) {
            ("server_no_context_takeover", None) if !offer.server_no_context_takeover => {
                offer.server_no_context_takeover = true
            }
            ("client_no_context_takeover", None) if !offer.client_no_context_takeover => {
                offer.client_no_context_takeover = true
            }
            ("server_max_window_bits", Some(v)) if offer.server_max_window_bits.is_none() => {
                offer.server_max_window_bits = Some(window_bits(&v)?)
            }
            ("client_max_window_bits", v) if offer.client_max_window_bits.is_none() => {
                offer.client_max_window_bits = Some(v.map(|v| window_bits(&v)).transpose()?)
            }
            _ => return Err(()),
        }
    }
    Ok(ours.then_some(offer))
}

/// A parameter's value: a token, or a quoted-string whose content is one (RFC 6455 §9.1).
fn param_value(v: &str) -> Result<Cow<'_, str>, ()> {
    let value = match v.strip_prefix('"') {
        None => Cow::Borrowed(v),
        Some(rest) => {
            let inner = rest.strip_suffix('"').ok_or(())?;
            if inner.contains('\\') {
                let mut out = String::with_capacity(inner.len());
                let mut chars = inner.chars();
                while let Some(c) = chars.next() {
                    out.push(if c == '\\' {
                        chars.next().ok_or(())?
                    } else {
                        c
                    });
                }
                Cow::Owned(out)
            } else {
                Cow::Borrowed(inner)
            }
        }
    };
    if is_token(&value) {
        Ok(value)
    } else {
        Err(())
    }
}

/// RFC 7692 §7.1.2: a decimal integer from 8 to 15 without leading zeroes.
fn window_bits(v: &str) -> Result<u8, ()> {
    if v.starts_with('0') || v.len() > 2 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(());
    }
    match v.parse() {
        Ok(b @ 8..=15) => Ok(b),
        _ => Err(()),
    }
}

/// RFC 9110 §5.6.2.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// One role's compressor (for what it sends) and decompressor (for what it receives).
pub struct PerMessageDeflate {
    tx: Option<Compress>,
    rx: Option<Decompress>,
    level: Compression,
    /// zlib's window bits (9..=15) for each direction.
    tx_bits: u8,
    rx_bits: u8,
    tx_takeover: bool,
    rx_takeover: bool,
}

thread_local! {
    /// A spare compressor and decompressor per thread, reset between messages. Making a
    /// zlib state costs more than compressing a small message (about 20 µs, mostly
    /// clearing its tables: `benches/ws_deflate.rs`), so a direction without context
    /// takeover borrows these for one message and gives them back reset, instead of
    /// making and freeing its own; an idle connection still holds none.
    static SPARE: RefCell<Spare> = const { RefCell::new(Spare { tx: None, rx: None }) };
}

struct Spare {
    tx: Option<(u32, u8, Compress)>,
    rx: Option<(u8, Decompress)>,
}

/// Why a message could not be inflated.
#[derive(Debug, PartialEq, Eq)]
pub enum InflateError {
    /// It inflates to more than the limit.
    TooBig,
    /// It is not valid deflate data.
    Corrupt,
}

impl PerMessageDeflate {
    /// The server's compressor follows the server_* params and its decompressor the
    /// client_* ones; the client's the reverse. zlib state is made lazily, and freed after
    /// each message in a direction that has no context takeover.
    pub fn new(role: Role, params: &DeflateParams, level: u32) -> Self {
        let server = (
            params.server_max_window_bits,
            !params.server_no_context_takeover,
        );
        let client = (
            params.client_max_window_bits,
            !params.client_no_context_takeover,
        );
        let (tx, rx) = match role {
            Role::Server => (server, client),
            Role::Client => (client, server),
        };
        PerMessageDeflate {
            tx: None,
            rx: None,
            level: Compression::new(level.min(9)),
            tx_bits: tx.0.clamp(9, 15),
            rx_bits: rx.0.clamp(9, 15),
            tx_takeover: tx.1,
            rx_takeover: rx.1,
        }
    }

    /// Appends `payload` compressed as one message, without the trailing 00 00 ff ff
    /// (RFC 7692 §7.2.1).
    pub fn compress(&mut self, payload: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
        let start = out.len();
        let result = self.deflate(payload, out);
        if !self.tx_takeover {
            if let (Some(mut c), true) = (self.tx.take(), result.is_ok()) {
                c.reset();
                let key = (self.level.level(), self.tx_bits);
                SPARE.with(|s| s.borrow_mut().tx = Some((key.0, key.1, c)));
            }
        } else if result.is_err() {
            self.tx = None;
        }
        if result.is_err() {
            out.truncate(start);
        }
        result
    }

    fn deflate(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
        let (level, bits) = (self.level, self.tx_bits);
        if self.tx.is_none() && !self.tx_takeover {
            self.tx = SPARE.with(|s| {
                let mut s = s.borrow_mut();
                match s.tx.take() {
                    Some((l, b, c)) if (l, b) == (level.level(), bits) => Some(c),
                    other => {
                        s.tx = other;
                        None
                    }
                }
            });
        }
        let c = self
            .tx
            .get_or_insert_with(|| Compress::new_with_window_bits(level, false, bits));
        let start = out.len();
        // Enough for nearly every message in one call: deflate's worst case is about 5
        // bytes per 16 KiB stored block, plus the flush.
        out.reserve(input.len() + input.len() / 1024 + 64);
        loop {
            if out.len() == out.capacity() {
                out.reserve(64 + input.len());
            }
            let before = c.total_in();
            c.compress_vec(input, out, FlushCompress::Sync)
                .map_err(std::io::Error::other)?;
            // At most `input.len()`, so it fits in usize.
            input = &input[(c.total_in() - before) as usize..];
            // Sync flush is done when deflate returns with input used up and room to spare.
            if input.is_empty() && out.len() < out.capacity() {
                break;
            }
        }
        if out.len() == start {
            // An empty message after a flush makes no bytes; RFC 7692 §7.2.3.6 sends it as
            // one 00 (an empty stored block's header once the tail is put back).
            out.push(0);
            return Ok(());
        }
        if !out[start..].ends_with(&TAIL) {
            return Err(std::io::Error::other(
                "deflate's sync flush did not end in 00 00 ff ff",
            ));
        }
        out.truncate(out.len() - TAIL.len());
        Ok(())
    }

    /// Appends the message whose compressed payload (all fragments concatenated) is
    /// `input`; fails with TooBig as soon as the output would pass `max` bytes (nothing
    /// past `max` is allocated), Corrupt on bad data. An empty `input` is the empty message.
    pub fn decompress(
        &mut self,
        input: &[u8],
        max: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), InflateError> {
        if input.is_empty() {
            return Ok(());
        }
        let start = out.len();
        let bits = self.rx_bits;
        if self.rx.is_none() && !self.rx_takeover {
            self.rx = SPARE.with(|s| {
                let mut s = s.borrow_mut();
                match s.rx.take() {
                    Some((b, d)) if b == bits => Some(d),
                    other => {
                        s.rx = other;
                        None
                    }
                }
            });
        }
        let d = self
            .rx
            .get_or_insert_with(|| Decompress::new_with_window_bits(false, bits));
        let mut result = inflate(d, input, start, max, out);
        if result == Ok(Inflated::More) {
            result = inflate(d, &TAIL, start, max, out);
        }
        // A final block (BFINAL) ends the stream: the next message starts a new one.
        if result != Ok(Inflated::More) || !self.rx_takeover {
            if let Some(mut d) = self.rx.take().filter(|_| !self.rx_takeover) {
                d.reset(false);
                SPARE.with(|s| s.borrow_mut().rx = Some((bits, d)));
            }
        }
        if result.is_err() {
            out.truncate(start);
        }
        result.map(drop)
    }

    /// Bytes of zlib state held now (measured sizes for the window bits; 0 when freed).
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn held_bytes(&self) -> usize {
        let tx = self
            .tx
            .as_ref()
            .map_or(0, |_| deflate_state_bytes(self.tx_bits));
        let rx = self.rx.as_ref().map_or(0, |_| INFLATE_STATE_BYTES);
        tx + rx
    }
}

/// zlib-rs's deflate state, as `benches/ws_deflate.rs` measures it: the window and its
/// chain (4 << bits) and a fixed part (hash table, symbol and pending buffers).
#[cfg(any(test, feature = "fuzzing"))]
fn deflate_state_bytes(bits: u8) -> usize {
    (4 << bits) + 248_960
}

/// zlib-rs's inflate state, measured likewise: the same for every window size.
#[cfg(any(test, feature = "fuzzing"))]
const INFLATE_STATE_BYTES: usize = 47_552;

#[derive(Debug, PartialEq, Eq)]
enum Inflated {
    /// The stream goes on (the usual end of a message).
    More,
    /// A final block ended the stream; what follows it is ignored.
    End,
}

/// Feeds `input` to `d`, appending to `out`, whose part from `start` may grow to `max`.
fn inflate(
    d: &mut Decompress,
    mut input: &[u8],
    start: usize,
    max: usize,
    out: &mut Vec<u8>,
) -> Result<Inflated, InflateError> {
    const CHUNK: usize = 16 * 1024;
    let mut probe = [0u8; 1];
    loop {
        let produced = out.len() - start;
        let room = max.saturating_sub(produced);
        let at = out.len();
        // With no room left, a one-byte buffer on the stack tells whether anything more
        // would come out.
        let buf: &mut [u8] = if room == 0 {
            &mut probe
        } else {
            // Doubling (capped at the room) keeps a large message to few resizes; exact, so
            // that the vector never grows past `max`.
            let want = room.min(CHUNK.max(produced));
            out.reserve_exact(want);
            out.resize(at + want, 0);
            &mut out[at..]
        };
        let space = buf.len();
        let (in0, out0) = (d.total_in(), d.total_out());
        let status = d.decompress(input, buf, FlushDecompress::Sync);
        let used = (d.total_in() - in0) as usize;
        let written = (d.total_out() - out0) as usize;
        if room > 0 {
            out.truncate(at + written);
        }
        let status = status.map_err(|_| InflateError::Corrupt)?;
        if room == 0 && written > 0 {
            return Err(InflateError::TooBig);
        }
        input = &input[used..];
        if status == Status::StreamEnd {
            return Ok(Inflated::End);
        }
        if input.is_empty() && written < space {
            return Ok(Inflated::More);
        }
        if used == 0 && written == 0 {
            // Space and input, yet no progress: zlib would only do that on bad data.
            return Err(InflateError::Corrupt);
        }
    }
}

#[cfg(test)]
mod tests;
