//! Telling protocols apart by their first bytes: the sans-IO part of the mux. Bytes in,
//! a [`Detection`] out; no connection, timer or buffer of its own.

mod client_hello;
use std::fmt;
use std::sync::Arc;

/// What one [`Matcher`] says about the bytes a client has sent so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// These bytes are this protocol.
    Match,
    /// They are not (and no later byte can change that).
    NoMatch,
    /// They could be: it takes more bytes to tell.
    NeedMore,
}

/// What the matchers, in order, make of the bytes seen so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detection {
    /// The matcher at this index matched, and every one before it said no.
    Matched(usize),
    /// No matcher can match.
    NoMatch,
    /// A matcher could still match, and none before it has: wait for more bytes.
    NeedMore,
}

/// A test over a client's first bytes: one of the protocols fibr knows, a prefix, or a
/// function of the user's.
#[derive(Clone)]
pub struct Matcher(Kind);

#[derive(Clone)]
enum Kind {
    /// A TLS ClientHello; with names, one that offers one of them by ALPN.
    Tls(Option<Arc<[Box<[u8]>]>>),
    Http1,
    H2c,
    Socks5,
    Socks4,
    Prefix(Box<[u8]>),
    Custom(Arc<CustomFn>),
}

/// A user's test (see [`Matcher::custom`]).
type CustomFn = dyn Fn(&[u8]) -> Verdict + Send + Sync;

/// The HTTP/2 connection preface (RFC 9113 §3.4), which h2c with prior knowledge opens with.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The longest method [`Matcher::http1`] waits for (the longest registered one has 17).
const MAX_METHOD_LEN: usize = 32;

impl Matcher {
    /// A TLS ClientHello (a handshake record opening with one: six bytes tell).
    pub fn tls() -> Matcher {
        Matcher(Kind::Tls(None))
    }

    /// A TLS ClientHello that offers at least one of `protocols` by ALPN (`"h2"`,
    /// `"http/1.1"`, ...). It waits for the whole hello, which may span several records
    /// and reads; a hello without ALPN does not match (a later [`Matcher::tls`] takes it).
    pub fn tls_alpn<P: AsRef<[u8]>>(protocols: impl IntoIterator<Item = P>) -> Matcher {
        let names: Vec<Box<[u8]>> = protocols.into_iter().map(|p| p.as_ref().into()).collect();
        Matcher(Kind::Tls(Some(names.into())))
    }

    /// An HTTP/1 request: a method token (at most 32 bytes) and a space,
    /// but not the HTTP/2 preface (`PRI * HTTP/2.0`, see [`Matcher::h2c`]).
    pub fn http1() -> Matcher {
        Matcher(Kind::Http1)
    }

    /// The HTTP/2 connection preface, all 24 bytes (h2c with prior knowledge).
    pub fn h2c() -> Matcher {
        Matcher(Kind::H2c)
    }

    /// A SOCKS5 greeting: its first byte is 5.
    pub fn socks5() -> Matcher {
        Matcher(Kind::Socks5)
    }

    /// A SOCKS4 or SOCKS4a request: its first byte is 4.
    pub fn socks4() -> Matcher {
        Matcher(Kind::Socks4)
    }

    /// Bytes that start with `prefix`.
    pub fn prefix(prefix: impl AsRef<[u8]>) -> Matcher {
        Matcher(Kind::Prefix(prefix.as_ref().into()))
    }

    /// A test of the user's over the bytes seen so far (at most `MuxConfig::max_peek`).
    /// It must be a pure function of them: it is asked again, from the first byte, each
    /// time more arrive, and it must not say `NeedMore` for ever (the peek limit then
    /// counts as a no).
    pub fn custom(f: impl Fn(&[u8]) -> Verdict + Send + Sync + 'static) -> Matcher {
        Matcher(Kind::Custom(Arc::new(f)))
    }

    /// What this matcher says about `seen`, the bytes a client has sent so far.
    pub fn check(&self, seen: &[u8]) -> Verdict {
        match &self.0 {
            Kind::Tls(None) => client_hello::starts(seen),
            Kind::Tls(Some(names)) => {
                client_hello::offers(seen, |offered| names.iter().any(|n| **n == *offered))
            }
            Kind::Http1 => http1(seen),
            Kind::H2c => prefix(seen, H2_PREFACE),
            Kind::Socks5 => prefix(seen, &[5]),
            Kind::Socks4 => prefix(seen, &[4]),
            Kind::Prefix(p) => prefix(seen, p),
            Kind::Custom(f) => f(seen),
        }
    }
}

impl fmt::Debug for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Kind::Tls(None) => f.write_str("Tls"),
            Kind::Tls(Some(names)) => f
                .debug_tuple("TlsAlpn")
                .field(
                    &names
                        .iter()
                        .map(|n| String::from_utf8_lossy(n))
                        .collect::<Vec<_>>(),
                )
                .finish(),
            Kind::Http1 => f.write_str("Http1"),
            Kind::H2c => f.write_str("H2c"),
            Kind::Socks5 => f.write_str("Socks5"),
            Kind::Socks4 => f.write_str("Socks4"),
            Kind::Prefix(p) => f
                .debug_tuple("Prefix")
                .field(&String::from_utf8_lossy(p))
                .finish(),
            Kind::Custom(_) => f.write_str("Custom"),
        }
    }
}

/// Asks `matchers` in order about `seen`: the first to match wins, provided every one
/// before it said no (one that needs more bytes holds the decision, so that the order is
/// the priority). `max_peek` bounds what is looked at: past it, and once `ended` (the
/// client sent all it will before we decide: EOF, or the peek timeout), waiting for more
/// counts as no match.
pub fn detect(matchers: &[Matcher], seen: &[u8], max_peek: usize, ended: bool) -> Detection {
    let view = &seen[..seen.len().min(max_peek)];
    for (i, m) in matchers.iter().enumerate() {
        match m.check(view) {
            Verdict::Match => return Detection::Matched(i),
            Verdict::NoMatch => {}
            Verdict::NeedMore if ended || view.len() >= max_peek => {}
            Verdict::NeedMore => return Detection::NeedMore,
        }
    }
    Detection::NoMatch
}

/// `seen` starts with `p`, or could.
fn prefix(seen: &[u8], p: &[u8]) -> Verdict {
    if seen.starts_with(p) {
        Verdict::Match
    } else if p.starts_with(seen) {
        Verdict::NeedMore
    } else {
        Verdict::NoMatch
    }
}

/// A method token (RFC 9110 §5.6.2) and a space, and not the HTTP/2 preface.
fn http1(seen: &[u8]) -> Verdict {
    match prefix(seen, H2_PREFACE) {
        Verdict::Match => return Verdict::NoMatch,
        // `PRI ` may yet be the preface: wait until it is told apart.
        Verdict::NeedMore if seen.len() >= 4 => return Verdict::NeedMore,
        _ => {}
    }
    for (i, &b) in seen.iter().enumerate() {
        match b {
            b' ' if i > 0 => return Verdict::Match,
            _ if i >= MAX_METHOD_LEN || !is_tchar(b) => return Verdict::NoMatch,
            _ => {}
        }
    }
    Verdict::NeedMore
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}
