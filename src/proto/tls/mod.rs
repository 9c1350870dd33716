//! TLS as a sans-IO machine over rustls's unbuffered API, both roles: ciphertext in
//! (processed in place in the caller's buffer), plaintext and the bytes to send back out,
//! plus the handshake deadline. No socket, thread or clock: the time comes in at creation.
//! Its driver is `crate::tls`, which makes it the engine's record layer (and what the
//! handshake negotiated a `TlsInfo`); the client's `TlsStream` drives it the same way.

use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::server::{ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{
    ConnectionState, EncodeError, EncryptError, InsufficientSizeError, UnbufferedStatus,
};
use rustls::CommonState;
use std::io;
use std::time::{Duration, Instant};

/// The largest TLS record a peer may send: a 5-byte header and up to 2^14 + 2048 bytes
/// (RFC 5246 6.2.3; TLS 1.3 allows less).
pub(crate) const MAX_RECORD: usize = 5 + (1 << 14) + 2048;
/// A TLS record's content type for a handshake message: a ClientHello starts with it.
const HANDSHAKE_RECORD: u8 = 0x16;

/// What the plain-HTTP answer says (nginx answers the same mistake with a 400 too).
const PLAIN_HTTP_ANSWER: &[u8] = b"HTTP/1.1 400 Bad Request\r\n\
content-type: text/plain\r\n\
content-length: 48\r\n\
connection: close\r\n\r\n\
The plain HTTP request was sent to an HTTPS port";

/// The two ends of rustls's unbuffered API, seen the same way.
pub(crate) trait Role: Send + 'static {
    type Data;
    fn process<'c, 'i>(&'c mut self, input: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data>;
    fn common(&self) -> &CommonState;
}

impl Role for UnbufferedServerConnection {
    type Data = ServerConnectionData;
    fn process<'c, 'i>(&'c mut self, input: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data> {
        self.process_tls_records(input)
    }
    fn common(&self) -> &CommonState {
        self
    }
}

impl Role for UnbufferedClientConnection {
    type Data = ClientConnectionData;
    fn process<'c, 'i>(&'c mut self, input: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data> {
        self.process_tls_records(input)
    }
    fn common(&self) -> &CommonState {
        self
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Before the first byte: plain HTTP is told apart here.
    New,
    Handshaking,
    Open,
    /// An error or our close: no more records either way.
    Done,
}

/// What [`Session::receive`] hands on, in order.
pub(crate) enum Event<'a> {
    /// The handshake finished (before any application data); what it negotiated.
    Opened(&'a CommonState),
    /// Decrypted application data.
    Data(&'a [u8]),
}

/// What one [`Session::receive`] did with its input.
#[derive(Debug)]
pub(crate) struct Received {
    /// Bytes of the input used up; the rest (a partial record) is offered again, with more.
    pub consumed: usize,
    /// The peer ended its side cleanly (`close_notify`).
    pub peer_closed: bool,
}

/// One TLS connection (either role).
pub(crate) struct Session<R> {
    conn: R,
    phase: Phase,
    deadline: Option<Instant>,
    /// Answer a plain HTTP request with a 400 instead of an alert (HTTP servers).
    answer_plain_http: bool,
}

impl<R: Role> Session<R> {
    /// A session that must finish its handshake within `timeout` of `now`.
    pub(crate) fn new(conn: R, now: Instant, timeout: Option<Duration>) -> Session<R> {
        Session {
            conn,
            phase: Phase::New,
            deadline: timeout.map(|t| now + t),
            answer_plain_http: false,
        }
    }

    /// Answers a request in plain HTTP with a 400 (what an HTTPS port of an HTTP server
    /// should do) instead of a TLS alert the client cannot read.
    pub(crate) fn answer_plain_http(mut self, yes: bool) -> Self {
        self.answer_plain_http = yes;
        self
    }

    /// Processes the bytes read (in place). `wire` takes what must be sent back
    /// (handshake messages, alerts, an answer to plain HTTP); `deliver` returns false once
    /// the connection is gone (the rest is decrypted and dropped). An error means the
    /// connection must close after `wire` is written.
    pub(crate) fn receive(
        &mut self,
        input: &mut [u8],
        wire: &mut Vec<u8>,
        deliver: &mut dyn FnMut(Event<'_>) -> bool,
    ) -> io::Result<Received> {
        if self.phase == Phase::Done {
            return Ok(Received {
                consumed: input.len(),
                peer_closed: false,
            });
        }
        if self.phase == Phase::New && !input.is_empty() {
            if input[0] != HANDSHAKE_RECORD {
                return Err(self.not_tls(input, wire));
            }
            self.phase = Phase::Handshaking;
        }
        let mut at = 0;
        let mut alive = true;
        let mut peer_closed = false;
        loop {
            let UnbufferedStatus { discard, state } = self.conn.process(&mut input[at..]);
            let mut stop = false;
            match state {
                Err(e) => {
                    self.phase = Phase::Done;
                    self.send_alerts(wire);
                    return Err(tls_error(e));
                }
                Ok(ConnectionState::ReadTraffic(mut records)) => {
                    // Application data can only follow a finished handshake; `Opened` goes
                    // first, so the records wait for the next call (nothing is popped).
                    if self.phase == Phase::Open {
                        while let Some(record) = records.next_record() {
                            let record = record.map_err(tls_error)?;
                            if alive {
                                alive = deliver(Event::Data(record.payload));
                            }
                        }
                    }
                }
                Ok(ConnectionState::EncodeTlsData(mut encode)) => {
                    encode_into(wire, HANDSHAKE_HINT, |buf| encode.encode(buf))?
                }
                Ok(ConnectionState::TransmitTlsData(transmit)) => transmit.done(),
                Ok(ConnectionState::PeerClosed) => peer_closed = true,
                Ok(ConnectionState::Closed) => stop = true,
                Ok(ConnectionState::BlockedHandshake | ConnectionState::WriteTraffic(_)) => {
                    stop = true
                }
                Ok(other) => {
                    // Early data among them: `TlsServer` turns it off in its config.
                    self.phase = Phase::Done;
                    return Err(io::Error::other(format!("TLS: unexpected state {other:?}")));
                }
            }
            at += discard;
            if self.phase == Phase::Handshaking && !self.conn.common().is_handshaking() {
                self.phase = Phase::Open;
                if alive {
                    alive = deliver(Event::Opened(self.conn.common()));
                }
                continue;
            }
            if stop {
                return Ok(Received {
                    consumed: at,
                    peer_closed,
                });
            }
        }
    }

    /// The first bytes are not a TLS record. A request in plain HTTP gets a readable
    /// answer where asked; anything else gets the alert rustls would send.
    fn not_tls(&mut self, input: &[u8], wire: &mut Vec<u8>) -> io::Error {
        self.phase = Phase::Done;
        let looks_like_http = input
            .iter()
            .take(8)
            .take_while(|b| **b != b' ')
            .all(|b| b.is_ascii_uppercase())
            && input.iter().take(9).any(|b| *b == b' ');
        if looks_like_http && self.answer_plain_http {
            wire.extend_from_slice(PLAIN_HTTP_ANSWER);
            return io::Error::new(
                io::ErrorKind::InvalidData,
                "a plain HTTP request on a TLS port",
            );
        }
        // rustls refuses it the same way, with the alert it owes.
        let mut copy = input.to_vec();
        let e = match self.conn.process(&mut copy).state {
            Err(e) => tls_error(e),
            Ok(_) => io::Error::new(io::ErrorKind::InvalidData, "not a TLS record"),
        };
        self.send_alerts(wire);
        e
    }

    /// After an error: what rustls still owes the peer (its alert), and nothing more.
    /// Only while it has records queued: another call would parse the bad input again.
    fn send_alerts(&mut self, wire: &mut Vec<u8>) {
        while self.conn.common().wants_write() {
            // Queued records come out before any input is looked at.
            match self.conn.process(&mut []).state {
                Ok(ConnectionState::EncodeTlsData(mut encode)) => {
                    if encode_into(wire, HANDSHAKE_HINT, |buf| encode.encode(buf)).is_err() {
                        return;
                    }
                }
                _ => return,
            }
        }
    }

    /// Seals `plain` into records appended to `wire`. `pending`: the input kept since the
    /// last `receive` (a partial record). rustls must be shown it again: a partial
    /// handshake message is tracked by its place in it.
    pub(crate) fn seal(
        &mut self,
        pending: &mut [u8],
        plain: &[u8],
        wire: &mut Vec<u8>,
    ) -> io::Result<()> {
        if self.phase != Phase::Open {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "TLS: application data before the handshake finished or after the close",
            ));
        }
        loop {
            match self.conn.process(pending).state {
                Ok(ConnectionState::WriteTraffic(mut traffic)) => {
                    return encode_into(wire, sealed_len(plain.len()), |buf| {
                        traffic.encrypt(plain, buf)
                    });
                }
                Ok(ConnectionState::EncodeTlsData(mut encode)) => {
                    encode_into(wire, HANDSHAKE_HINT, |buf| encode.encode(buf))?
                }
                Ok(ConnectionState::TransmitTlsData(transmit)) => transmit.done(),
                Ok(ConnectionState::PeerClosed) => {}
                Ok(other) => {
                    return Err(io::Error::new(
                        io::ErrorKind::NotConnected,
                        format!("TLS: cannot send in state {other:?}"),
                    ))
                }
                Err(e) => {
                    self.phase = Phase::Done;
                    return Err(tls_error(e));
                }
            }
        }
    }

    /// Appends the end of our side (`close_notify`), once; nothing if it cannot be sent.
    pub(crate) fn close(&mut self, pending: &mut [u8], wire: &mut Vec<u8>) {
        if self.phase != Phase::Open {
            self.phase = Phase::Done;
            return;
        }
        self.phase = Phase::Done;
        for _ in 0..4 {
            match self.conn.process(pending).state {
                Ok(ConnectionState::WriteTraffic(mut traffic)) => {
                    let _ = encode_into(wire, 64, |buf| traffic.queue_close_notify(buf));
                    return;
                }
                Ok(ConnectionState::EncodeTlsData(mut encode)) => {
                    if encode_into(wire, HANDSHAKE_HINT, |buf| encode.encode(buf)).is_err() {
                        return;
                    }
                }
                Ok(ConnectionState::TransmitTlsData(transmit)) => transmit.done(),
                Ok(ConnectionState::PeerClosed) => {}
                _ => return,
            }
        }
    }

    /// True once the handshake is done (and until the close).
    pub(crate) fn is_open(&self) -> bool {
        self.phase == Phase::Open
    }

    /// When the handshake must have finished (None once it has, or without a timeout).
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline.filter(|_| !self.is_open())
    }
}

/// Room first offered for a handshake message (a certificate chain asks for more).
const HANDSHAKE_HINT: usize = 1024;

/// An upper bound on the records `len` plaintext bytes become: per 16 KiB record a
/// header, an explicit nonce (TLS 1.2) or a content type (1.3), and a 16-byte tag.
pub(crate) fn sealed_len(len: usize) -> usize {
    len + (len / (1 << 14) + 1) * 32
}

/// The sizes rustls reports when a buffer is too small.
trait TooSmall {
    fn required(&self) -> Option<usize>;
}

impl TooSmall for EncodeError {
    fn required(&self) -> Option<usize> {
        match self {
            EncodeError::InsufficientSize(InsufficientSizeError { required_size }) => {
                Some(*required_size)
            }
            EncodeError::AlreadyEncoded => None,
        }
    }
}

impl TooSmall for EncryptError {
    fn required(&self) -> Option<usize> {
        match self {
            EncryptError::InsufficientSize(InsufficientSizeError { required_size }) => {
                Some(*required_size)
            }
            EncryptError::EncryptExhausted => None,
        }
    }
}

/// Appends what `write` puts into a slice to `wire`: it is offered `hint` bytes (grown to
/// what rustls asks for when that is too little) and the bytes it wrote are kept.
fn encode_into<E: TooSmall + std::fmt::Display>(
    wire: &mut Vec<u8>,
    hint: usize,
    mut write: impl FnMut(&mut [u8]) -> Result<usize, E>,
) -> io::Result<()> {
    let start = wire.len();
    // The room is zeroed before rustls writes into it: ask for what is needed, no more.
    let mut room = hint;
    loop {
        wire.resize(start + room, 0);
        match write(&mut wire[start..]) {
            Ok(n) => {
                wire.truncate(start + n);
                return Ok(());
            }
            Err(e) => {
                wire.truncate(start);
                match e.required() {
                    Some(need) if need > room => room = need,
                    _ => return Err(io::Error::other(format!("TLS: {e}"))),
                }
            }
        }
    }
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))
}
