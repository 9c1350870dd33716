//! The frame header (RFC 6455 §5.2): parsed straight from the input, written in one piece.

pub(crate) const OP_CONTINUATION: u8 = 0x0;
pub(crate) const OP_TEXT: u8 = 0x1;
pub(crate) const OP_BINARY: u8 = 0x2;
pub(crate) const OP_CLOSE: u8 = 0x8;
pub(crate) const OP_PING: u8 = 0x9;
pub(crate) const OP_PONG: u8 = 0xA;

/// The longest header: 2 bytes, a 64-bit length and a mask.
pub(crate) const MAX_HEADER_LEN: usize = 14;

/// A frame's header as on the wire; the machine judges it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub fin: bool,
    pub rsv1: bool,
    pub rsv2: bool,
    pub rsv3: bool,
    pub opcode: u8,
    pub mask: Option<[u8; 4]>,
    /// As sent: the top bit may be set (an error the machine reports).
    pub len: u64,
}

/// The header's length, known from its second byte.
pub(crate) fn header_len(b1: u8) -> usize {
    let ext = match b1 & 0x7f {
        126 => 2,
        127 => 8,
        _ => 0,
    };
    2 + ext + if b1 & 0x80 != 0 { 4 } else { 0 }
}

/// Parses the header at the start of `b`: `None` while incomplete, else it and its length.
pub(crate) fn parse(b: &[u8]) -> Option<(Header, usize)> {
    let (&b0, &b1) = (b.first()?, b.get(1)?);
    let n = header_len(b1);
    let b = b.get(..n)?;
    let (len, at) = match b1 & 0x7f {
        126 => (u64::from(u16::from_be_bytes([b[2], b[3]])), 4),
        127 => {
            let mut l = [0; 8];
            l.copy_from_slice(&b[2..10]);
            (u64::from_be_bytes(l), 10)
        }
        l => (u64::from(l), 2),
    };
    let mask = (b1 & 0x80 != 0).then(|| [b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let h = Header {
        fin: b0 & 0x80 != 0,
        rsv1: b0 & 0x40 != 0,
        rsv2: b0 & 0x20 != 0,
        rsv3: b0 & 0x10 != 0,
        opcode: b0 & 0x0f,
        mask,
        len,
    };
    Some((h, n))
}

/// Writes a header into `buf` with the shortest length encoding; returns its length.
pub(crate) fn encode_header(
    buf: &mut [u8; MAX_HEADER_LEN],
    fin: bool,
    rsv1: bool,
    opcode: u8,
    len: usize,
    mask: Option<[u8; 4]>,
) -> usize {
    buf[0] = (u8::from(fin) << 7) | (u8::from(rsv1) << 6) | (opcode & 0x0f);
    let m = if mask.is_some() { 0x80 } else { 0 };
    let mut n = if len < 126 {
        buf[1] = m | len as u8;
        2
    } else if let Ok(l) = u16::try_from(len) {
        buf[1] = m | 126;
        buf[2..4].copy_from_slice(&l.to_be_bytes());
        4
    } else {
        buf[1] = m | 127;
        buf[2..10].copy_from_slice(&(len as u64).to_be_bytes());
        10
    };
    if let Some(k) = mask {
        buf[n..n + 4].copy_from_slice(&k);
        n += 4;
    }
    n
}
