//! The sans-IO WebSocket machine (RFC 6455): bytes in; messages, bytes to write and errors
//! out. It owns no socket, clock or RNG (the client's masks come from a seeded generator),
//! so it is tested and fuzzed deterministically; `ws/` drives it on a connection.
//!
//! Payload is handled as it arrives: unmasked while copied into the message's buffer, and
//! text validated as UTF-8 across fragments and reads, so a bad fragment fails when it
//! comes in. Only an incomplete header (at most 14 bytes, inline) and the message being
//! assembled are kept between reads; an idle machine holds no heap.

mod close;
pub(crate) mod deflate;
mod frame;
pub(crate) mod keepalive;
mod mask;
mod utf8;

#[cfg(test)]
mod tests;

use bytes::Bytes;
use deflate::{InflateError, PerMessageDeflate};
use frame::{
    Header, MAX_HEADER_LEN, OP_BINARY, OP_CLOSE, OP_CONTINUATION, OP_PING, OP_PONG, OP_TEXT,
};
use std::fmt;
use utf8::Utf8;

/// Which end of the connection the machine is: clients mask, servers require masks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Accepts the upgrade: sends unmasked frames, requires masked ones.
    Server,
    /// Dials: masks every frame it sends.
    Client,
}

/// Bounds on what a peer can make the machine hold.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest frame payload accepted (1009 past it), checked before allocating.
    pub max_frame_size: usize,
    /// Largest message accepted, fragments together (after inflating if compressed).
    pub max_message_size: usize,
    /// Answer Pings by itself.
    pub auto_pong: bool,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_frame_size: 16 << 20,
            max_message_size: 64 << 20,
            auto_pong: true,
        }
    }
}

/// A Close frame's status code and reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloseFrame {
    /// The status code (RFC 6455 §7.4).
    pub code: u16,
    /// Valid UTF-8.
    pub reason: Bytes,
}

/// A whole data message or a control frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// Always valid UTF-8.
    Text(Bytes),
    /// Binary data.
    Binary(Bytes),
    /// A ping (at most 125 bytes).
    Ping(Bytes),
    /// A pong (at most 125 bytes).
    Pong(Bytes),
    /// A close frame, with its code and reason if it has them.
    Close(Option<CloseFrame>),
}

/// Where the closing handshake is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// No Close sent or received: messages flow both ways.
    Open,
    /// Our Close is sent; the peer's is awaited (its data still delivered).
    CloseSent,
    /// The peer's Close came and ours is not sent. `receive` writes the reply at once, so
    /// this is seen only by a machine whose reply could not be written (none today).
    CloseReceived,
    /// Both Closes exchanged, or the connection failed: the driver flushes and closes.
    Closed,
}

/// Why the connection fails (receiving) or a message cannot be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The peer broke RFC 6455's framing rules (1002).
    Protocol(&'static str),
    /// A text message or close reason that is not UTF-8 (1007).
    InvalidUtf8,
    /// A frame over `max_frame_size` or a message over `max_message_size` (1009).
    TooBig,
    /// A compressed message that does not inflate (1007).
    BadCompressed,
    /// `send` after our Close.
    Closed,
    /// `send` of a control frame over 125 bytes, or of a close code peers refuse.
    InvalidControl(&'static str),
    /// The compressor failed on `send`.
    Deflate,
}

impl Error {
    /// The status code of the Close frame that fails the connection for this error.
    pub fn close_code(&self) -> u16 {
        match self {
            Error::Protocol(_) => 1002,
            Error::InvalidUtf8 | Error::BadCompressed => 1007,
            Error::TooBig => 1009,
            // Send-side errors: nothing went wrong on the wire.
            Error::Closed | Error::InvalidControl(_) | Error::Deflate => 1011,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Protocol(what) => write!(f, "websocket protocol error: {what}"),
            Error::InvalidUtf8 => f.write_str("websocket text is not valid UTF-8"),
            Error::TooBig => f.write_str("websocket frame or message over the limit"),
            Error::BadCompressed => f.write_str("websocket compressed message is corrupt"),
            Error::Closed => f.write_str("websocket already closed"),
            Error::InvalidControl(what) => write!(f, "websocket control frame: {what}"),
            Error::Deflate => f.write_str("websocket compression failed"),
        }
    }
}

impl std::error::Error for Error {}

/// The frame whose payload is being read.
#[derive(Clone, Copy, Debug)]
struct Frame {
    opcode: u8,
    fin: bool,
    mask: Option<[u8; 4]>,
    /// Payload bytes read so far (the mask's phase, the control buffer's fill).
    offset: usize,
    remaining: usize,
}

/// The data message being assembled.
struct Assembly {
    text: bool,
    compressed: bool,
    buf: Vec<u8>,
    utf8: Utf8,
}

const MAX_CONTROL: usize = 125;

/// One side of a WebSocket connection, without IO.
pub struct Machine {
    role: Role,
    /// `Limits`' fields, kept apart so that `auto_pong` packs with the other small fields
    /// (every idle socket carries a machine).
    max_frame_size: usize,
    max_message_size: usize,
    auto_pong: bool,
    /// Boxed: most connections never negotiate it, and an idle one should not carry its
    /// room.
    deflate: Option<Box<PerMessageDeflate>>,
    rng: u64,
    state: State,
    /// Failed: input is ignored from now on.
    failed: bool,
    head: [u8; MAX_HEADER_LEN],
    head_len: u8,
    frame: Option<Frame>,
    msg: Option<Assembly>,
    /// The control frame being read (≤ 125 bytes). On the heap only while one is read: it
    /// becomes the delivered message's `Bytes` without a copy, and an idle machine keeps
    /// no room for it.
    control: Vec<u8>,
}

impl fmt::Debug for Machine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Machine")
            .field("role", &self.role)
            .field("state", &self.state)
            .field("failed", &self.failed)
            .field("deflate", &self.deflate.is_some())
            .finish_non_exhaustive()
    }
}

impl Machine {
    /// `deflate`: the negotiated permessage-deflate, if any. `mask_seed`: seeds the
    /// client's mask generator (a small xorshift; the machine has no RNG of its own).
    pub fn new(
        role: Role,
        limits: Limits,
        deflate: Option<PerMessageDeflate>,
        mask_seed: u64,
    ) -> Machine {
        Machine {
            role,
            max_frame_size: limits.max_frame_size,
            max_message_size: limits.max_message_size,
            auto_pong: limits.auto_pong,
            deflate: deflate.map(Box::new),
            // xorshift never leaves 0.
            rng: if mask_seed == 0 {
                0x9E37_79B9_7F4A_7C15
            } else {
                mask_seed
            },
            state: State::Open,
            failed: false,
            head: [0; MAX_HEADER_LEN],
            head_len: 0,
            frame: None,
            msg: None,
            control: Vec::new(),
        }
    }

    /// Which end this machine is.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Where the closing handshake is; `Closed` once failed too, though `send` still
    /// works then: the driver sends the application's answers to the messages before the
    /// error ahead of the Close.
    pub fn state(&self) -> State {
        if self.failed {
            State::Closed
        } else {
            self.state
        }
    }

    /// Heap held now (the message being assembled, deflate state): 0 between messages
    /// (without context takeover), whatever came before.
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn held_bytes(&self) -> usize {
        self.msg.as_ref().map_or(0, |m| m.buf.capacity())
            + self.control.capacity()
            + self.deflate.as_ref().map_or(0, |d| d.held_bytes())
    }

    /// Takes bytes read from the peer, split anywhere. Calls `deliver` for every complete
    /// data message and every control frame, in order, and writes into `out` what the
    /// protocol owes by itself: a Pong for every Ping (if `auto_pong`), the Close reply. On
    /// bad input returns the error having written a Close with its code; after an error or
    /// once closed, input is ignored (and the driver ends the connection once the
    /// application had its turn).
    pub fn receive(
        &mut self,
        data: &[u8],
        out: &mut Vec<u8>,
        deliver: &mut dyn FnMut(Message),
    ) -> Result<(), Error> {
        if self.failed || self.state == State::Closed {
            return Ok(());
        }
        match self.receive_frames(data, out, deliver) {
            Ok(()) => Ok(()),
            Err(e) => {
                if matches!(self.state, State::Open | State::CloseReceived) {
                    let code = e.close_code().to_be_bytes();
                    self.write_frame(OP_CLOSE, &code, out);
                }
                // The state stays: the driver may still send the application's answers
                // to the messages before the error, ahead of the Close in `out`.
                self.failed = true;
                self.frame = None;
                self.msg = None;
                self.control = Vec::new();
                Err(e)
            }
        }
    }

    fn receive_frames(
        &mut self,
        data: &[u8],
        out: &mut Vec<u8>,
        deliver: &mut dyn FnMut(Message),
    ) -> Result<(), Error> {
        let mut pos = 0;
        while pos < data.len() && self.state != State::Closed {
            let Some(mut f) = self.frame else {
                let Some((h, used)) = self.read_header(&data[pos..]) else {
                    return Ok(());
                };
                pos += used;
                self.start_frame(h)?;
                if self.frame.is_some_and(|f| f.remaining == 0) {
                    self.end_frame(out, deliver)?;
                }
                continue;
            };
            let n = f.remaining.min(data.len() - pos);
            let chunk = &data[pos..pos + n];
            pos += n;
            if f.opcode & 0x8 != 0 {
                self.control.extend_from_slice(chunk);
                let dst = &mut self.control[f.offset..];
                if let Some(m) = f.mask {
                    mask::apply(dst, m, f.offset);
                }
            } else if let Some(msg) = self.msg.as_mut() {
                let start = msg.buf.len();
                msg.buf.extend_from_slice(chunk);
                let new = &mut msg.buf[start..];
                if let Some(m) = f.mask {
                    mask::apply(new, m, f.offset);
                }
                if msg.text && !msg.compressed {
                    msg.utf8.feed(new).map_err(|_| Error::InvalidUtf8)?;
                }
            }
            f.offset += n;
            f.remaining -= n;
            self.frame = Some(f);
            if f.remaining == 0 {
                self.end_frame(out, deliver)?;
            }
        }
        Ok(())
    }

    /// The header at the start of `data` (completing one kept from the last read) and the
    /// bytes of `data` it used; `None` with what there was kept when it is incomplete.
    fn read_header(&mut self, data: &[u8]) -> Option<(Header, usize)> {
        if self.head_len == 0 {
            if let Some(h) = frame::parse(data) {
                return Some(h);
            }
            // Incomplete, so shorter than the longest header.
            self.head[..data.len()].copy_from_slice(data);
            self.head_len = data.len() as u8;
            return None;
        }
        let mut used = 0;
        loop {
            let have = usize::from(self.head_len);
            let need = if have < 2 {
                2
            } else {
                frame::header_len(self.head[1])
            };
            if have >= need {
                break;
            }
            let take = (need - have).min(data.len() - used);
            if take == 0 {
                return None;
            }
            self.head[have..have + take].copy_from_slice(&data[used..used + take]);
            self.head_len += take as u8;
            used += take;
        }
        let (h, _) = frame::parse(&self.head[..usize::from(self.head_len)])?;
        self.head_len = 0;
        Some((h, used))
    }

    /// Judges a header and gets ready for its payload (the message's buffer sized for it).
    fn start_frame(&mut self, h: Header) -> Result<(), Error> {
        if h.rsv2 || h.rsv3 {
            return Err(Error::Protocol("reserved bit set"));
        }
        if !matches!(
            h.opcode,
            OP_CONTINUATION | OP_TEXT | OP_BINARY | OP_CLOSE | OP_PING | OP_PONG
        ) {
            return Err(Error::Protocol("reserved opcode"));
        }
        match (self.role, h.mask.is_some()) {
            (Role::Server, false) => return Err(Error::Protocol("unmasked client frame")),
            (Role::Client, true) => return Err(Error::Protocol("masked server frame")),
            _ => {}
        }
        if h.len >> 63 != 0 {
            return Err(Error::Protocol("frame length with the top bit set"));
        }
        let control = h.opcode & 0x8 != 0;
        if control {
            if !h.fin {
                return Err(Error::Protocol("fragmented control frame"));
            }
            if h.len > MAX_CONTROL as u64 {
                return Err(Error::Protocol("control frame over 125 bytes"));
            }
            if h.rsv1 {
                return Err(Error::Protocol("RSV1 on a control frame"));
            }
        } else if h.opcode == OP_CONTINUATION {
            if self.msg.is_none() {
                return Err(Error::Protocol("continuation without a message"));
            }
            if h.rsv1 {
                return Err(Error::Protocol("RSV1 on a continuation frame"));
            }
        } else {
            if self.msg.is_some() {
                return Err(Error::Protocol("new message inside a fragmented one"));
            }
            if h.rsv1 && self.deflate.is_none() {
                return Err(Error::Protocol("RSV1 without permessage-deflate"));
            }
        }
        let len = match usize::try_from(h.len) {
            Ok(l) if l <= self.max_frame_size => l,
            _ => return Err(Error::TooBig),
        };
        if control {
            self.control = Vec::with_capacity(len);
        } else {
            let have = self.msg.as_ref().map_or(0, |m| m.buf.len());
            if have.saturating_add(len) > self.max_message_size {
                return Err(Error::TooBig);
            }
            match self.msg.as_mut() {
                Some(m) => m.buf.reserve(len),
                None => {
                    self.msg = Some(Assembly {
                        text: h.opcode == OP_TEXT,
                        compressed: h.rsv1,
                        // Exact when the message is this one frame.
                        buf: Vec::with_capacity(len),
                        utf8: Utf8::default(),
                    })
                }
            }
        }
        self.frame = Some(Frame {
            opcode: h.opcode,
            fin: h.fin,
            mask: h.mask,
            offset: 0,
            remaining: len,
        });
        Ok(())
    }

    /// A frame's payload is in: deliver the message it ends, or act on the control frame.
    fn end_frame(
        &mut self,
        out: &mut Vec<u8>,
        deliver: &mut dyn FnMut(Message),
    ) -> Result<(), Error> {
        let Some(f) = self.frame.take() else {
            return Ok(());
        };
        if f.opcode & 0x8 != 0 {
            return self.control_frame(f.opcode, out, deliver);
        }
        if !f.fin {
            return Ok(());
        }
        let Some(msg) = self.msg.take() else {
            return Ok(());
        };
        let payload = if msg.compressed {
            let d = self.deflate.as_mut().ok_or(Error::BadCompressed)?;
            let mut plain = Vec::new();
            d.decompress(&msg.buf, self.max_message_size, &mut plain)
                .map_err(|e| match e {
                    InflateError::TooBig => Error::TooBig,
                    InflateError::Corrupt => Error::BadCompressed,
                })?;
            if plain.len() > self.max_message_size {
                return Err(Error::TooBig);
            }
            if msg.text && std::str::from_utf8(&plain).is_err() {
                return Err(Error::InvalidUtf8);
            }
            plain
        } else {
            if msg.text && !msg.utf8.is_complete() {
                return Err(Error::InvalidUtf8);
            }
            msg.buf
        };
        let payload = Bytes::from(payload);
        deliver(if msg.text {
            Message::Text(payload)
        } else {
            Message::Binary(payload)
        });
        Ok(())
    }

    fn control_frame(
        &mut self,
        opcode: u8,
        out: &mut Vec<u8>,
        deliver: &mut dyn FnMut(Message),
    ) -> Result<(), Error> {
        let payload = Bytes::from(std::mem::take(&mut self.control));
        match opcode {
            OP_PING => {
                if self.auto_pong && self.state == State::Open {
                    // Every Ping gets its Pong (Autobahn 2.10 wants them all); a flood
                    // is bounded by the connection's output, whose backlog holds reads.
                    self.write_frame(OP_PONG, &payload, out);
                }
                deliver(Message::Ping(payload));
            }
            OP_PONG => deliver(Message::Pong(payload)),
            _ => {
                let frame = close::parse(&payload)?;
                let reply = frame.as_ref().map(|f| f.code.to_be_bytes());
                // A message cut by the Close is dropped, and its buffer freed.
                self.msg = None;
                deliver(Message::Close(frame));
                if self.state == State::Open {
                    self.write_frame(OP_CLOSE, reply.as_ref().map_or(&[][..], |c| c), out);
                }
                self.state = State::Closed;
            }
        }
        Ok(())
    }

    /// Encodes `msg` into `out` as one frame (masked for a client, compressed when deflate
    /// was negotiated and it is data). A Close moves to `CloseSent` (`Closed` if the peer's
    /// came first); anything after our Close is `Error::Closed`.
    pub fn send(&mut self, msg: &Message, out: &mut Vec<u8>) -> Result<(), Error> {
        if matches!(self.state, State::CloseSent | State::Closed) {
            return Err(Error::Closed);
        }
        match msg {
            Message::Text(b) => {
                debug_assert!(std::str::from_utf8(b).is_ok(), "Message::Text not UTF-8");
                self.send_data(OP_TEXT, b, out)
            }
            Message::Binary(b) => self.send_data(OP_BINARY, b, out),
            Message::Ping(b) | Message::Pong(b) => {
                if b.len() > MAX_CONTROL {
                    return Err(Error::InvalidControl("payload over 125 bytes"));
                }
                let op = if matches!(msg, Message::Ping(_)) {
                    OP_PING
                } else {
                    OP_PONG
                };
                self.write_frame(op, b, out);
                Ok(())
            }
            Message::Close(frame) => {
                let mut payload = [0u8; MAX_CONTROL];
                let mut len = 0;
                if let Some(f) = frame {
                    if !close::is_valid_code(f.code) {
                        return Err(Error::InvalidControl("close code peers refuse"));
                    }
                    if f.reason.len() > MAX_CONTROL - 2 {
                        return Err(Error::InvalidControl("payload over 125 bytes"));
                    }
                    payload[..2].copy_from_slice(&f.code.to_be_bytes());
                    payload[2..2 + f.reason.len()].copy_from_slice(&f.reason);
                    len = 2 + f.reason.len();
                }
                self.write_frame(OP_CLOSE, &payload[..len], out);
                self.state = if self.state == State::CloseReceived {
                    State::Closed
                } else {
                    State::CloseSent
                };
                Ok(())
            }
        }
    }

    fn send_data(&mut self, opcode: u8, payload: &[u8], out: &mut Vec<u8>) -> Result<(), Error> {
        let Some(d) = self.deflate.as_mut() else {
            self.write_frame(opcode, payload, out);
            return Ok(());
        };
        // Compressed straight into `out`, then the header put in front of it.
        let start = out.len();
        if d.compress(payload, out).is_err() {
            out.truncate(start);
            return Err(Error::Deflate);
        }
        let mask = self.next_mask();
        let mut head = [0u8; MAX_HEADER_LEN];
        let n = frame::encode_header(&mut head, true, true, opcode, out.len() - start, mask);
        if let Some(m) = mask {
            mask::apply(&mut out[start..], m, 0);
        }
        out.splice(start..start, head[..n].iter().copied());
        Ok(())
    }

    /// Writes one whole frame, masked for a client.
    fn write_frame(&mut self, opcode: u8, payload: &[u8], out: &mut Vec<u8>) {
        let mask = self.next_mask();
        let mut head = [0u8; MAX_HEADER_LEN];
        let n = frame::encode_header(&mut head, true, false, opcode, payload.len(), mask);
        out.reserve(n + payload.len());
        out.extend_from_slice(&head[..n]);
        let start = out.len();
        out.extend_from_slice(payload);
        if let Some(m) = mask {
            mask::apply(&mut out[start..], m, 0);
        }
    }

    /// The next mask for a client's frame (xorshift64), none for a server's.
    fn next_mask(&mut self) -> Option<[u8; 4]> {
        if self.role == Role::Server {
            return None;
        }
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        Some(((x >> 32) as u32).to_be_bytes())
    }
}
