//! arpc's 16-byte little-endian frame header (WIRE.md §2) and what its bytes mean.

/// Bytes in a header.
pub(crate) const HEADER_LEN: usize = 16;
/// The longest method name either side accepts (the byte could hold 255; arpc stops here).
pub(crate) const MAX_METHOD_LEN: usize = 127;

/// The command in a header's `cmd` byte (bits 0-5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cmd {
    /// A call the other side answers.
    Request = 1,
    /// The answer to a request: same seq, method and async bit.
    Response = 2,
    /// A one-way message.
    Notify = 3,
    /// Keep-alive probe; answered with a pong at once.
    Ping = 4,
    /// Keep-alive answer; ignored.
    Pong = 5,
    /// Stream data; seq is the stream id.
    Stream = 6,
}

impl Cmd {
    /// The command of a `cmd` byte (its stream bits masked off); None for 0 and 7..=63.
    pub(crate) fn from_byte(b: u8) -> Option<Cmd> {
        Some(match b & CMD_MASK {
            1 => Cmd::Request,
            2 => Cmd::Response,
            3 => Cmd::Notify,
            4 => Cmd::Ping,
            5 => Cmd::Pong,
            6 => Cmd::Stream,
            _ => return None,
        })
    }
}

/// The bits of `cmd` that are the command.
pub(crate) const CMD_MASK: u8 = 0x3F;
/// `cmd` bit 7: the stream frame comes from the side that opened the stream.
pub(crate) const STREAM_LOCAL: u8 = 0x80;
/// `cmd` bit 6: the sender sends nothing more on this stream.
pub(crate) const STREAM_EOF: u8 = 0x40;

/// `flag` bit 0: a response that carries an error text.
pub(crate) const FLAG_ERROR: u8 = 0x01;
/// `flag` bit 1: an async call (the response repeats it) or a notify.
pub(crate) const FLAG_ASYNC: u8 = 0x02;

/// One header's fields, as read or to be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    /// Method length plus payload length (the header's 16 bytes not counted).
    pub body_len: u32,
    /// Application bits; arpc writes 0 and never reads them.
    pub reserved: u8,
    /// The whole `cmd` byte, stream bits included.
    pub cmd: u8,
    /// Error and async bits.
    pub flag: u8,
    /// Length of the method name that follows the header.
    pub method_len: u8,
    /// Sequence number, or a stream's id.
    pub seq: u64,
}

impl Header {
    /// Reads the 16 bytes of a header.
    pub(crate) fn decode(b: &[u8; HEADER_LEN]) -> Header {
        Header {
            body_len: body_len(b[..4].try_into().expect("4 bytes")),
            reserved: b[4],
            cmd: b[5],
            flag: b[6],
            method_len: b[7],
            seq: u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
        }
    }

    /// Writes the header's 16 bytes.
    pub(crate) fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0; HEADER_LEN];
        b[..4].copy_from_slice(&self.body_len.to_le_bytes());
        b[4] = self.reserved;
        b[5] = self.cmd;
        b[6] = self.flag;
        b[7] = self.method_len;
        b[8..].copy_from_slice(&self.seq.to_le_bytes());
        b
    }
}

/// The body length in a header's first 4 bytes: enough to check the limit before the rest.
pub(crate) fn body_len(b: [u8; 4]) -> u32 {
    u32::from_le_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum_request_header_matches_wire_md() {
        // WIRE.md §2: request /sum seq=78 body {"a":20,"b":22}.
        let h = Header {
            body_len: 19,
            reserved: 0,
            cmd: Cmd::Request as u8,
            flag: 0,
            method_len: 4,
            seq: 78,
        };
        let want = [0x13, 0, 0, 0, 0, 0x01, 0, 0x04, 0x4e, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(h.encode(), want);
        assert_eq!(Header::decode(&want), h);
    }

    #[test]
    fn command_byte_masks_stream_bits() {
        assert_eq!(
            Cmd::from_byte(0x06 | STREAM_LOCAL | STREAM_EOF),
            Some(Cmd::Stream)
        );
        assert_eq!(Cmd::from_byte(0), None);
        assert_eq!(Cmd::from_byte(7), None);
        assert_eq!(Cmd::from_byte(63), None);
        assert_eq!(Cmd::from_byte(0x40 | 2), Some(Cmd::Response));
    }
}
