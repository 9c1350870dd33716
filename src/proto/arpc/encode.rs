//! Writing frames: a head (header and method, on the stack) to send before a payload the
//! caller already holds, or a whole frame into a buffer (a broadcast, encoded once).

use super::header::{Header, HEADER_LEN, MAX_METHOD_LEN};
use std::fmt;

/// Why a frame cannot be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MethodError {
    /// The method is empty or longer than 127 bytes: the peer would drop the frame.
    BadMethod(usize),
    /// Method and payload together do not fit the 32-bit length.
    TooLong,
}

impl fmt::Display for MethodError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MethodError::BadMethod(n) => {
                write!(f, "arpc method names are 1 to 127 bytes long, not {n}")
            }
            MethodError::TooLong => f.write_str("arpc frame body over 4 GiB"),
        }
    }
}

impl std::error::Error for MethodError {}

/// Checks a method name as arpc does before sending or registering it.
pub(crate) fn check_method(method: &[u8]) -> Result<(), MethodError> {
    if method.is_empty() || method.len() > MAX_METHOD_LEN {
        return Err(MethodError::BadMethod(method.len()));
    }
    Ok(())
}

/// A frame's header and method name, to be sent ahead of its payload.
pub(crate) struct Head {
    buf: [u8; HEADER_LEN + MAX_METHOD_LEN],
    len: usize,
}

impl Head {
    /// The head of a frame of command byte `cmd` (stream bits included) whose payload is
    /// `payload_len` bytes.
    pub(crate) fn new(
        cmd: u8,
        flag: u8,
        seq: u64,
        method: &[u8],
        payload_len: usize,
    ) -> Result<Head, MethodError> {
        check_method(method)?;
        let body_len =
            u32::try_from(method.len() + payload_len).map_err(|_| MethodError::TooLong)?;
        let header = Header {
            body_len,
            reserved: 0,
            cmd,
            flag,
            method_len: method.len() as u8,
            seq,
        };
        let mut buf = [0; HEADER_LEN + MAX_METHOD_LEN];
        buf[..HEADER_LEN].copy_from_slice(&header.encode());
        buf[HEADER_LEN..HEADER_LEN + method.len()].copy_from_slice(method);
        Ok(Head {
            buf,
            len: HEADER_LEN + method.len(),
        })
    }

    /// The bytes to send before the payload.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// Appends a whole frame to `out`.
pub(crate) fn encode_frame(
    out: &mut Vec<u8>,
    cmd: u8,
    flag: u8,
    seq: u64,
    method: &[u8],
    payload: &[u8],
) -> Result<(), MethodError> {
    let head = Head::new(cmd, flag, seq, method, payload.len())?;
    out.reserve(head.len + payload.len());
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(payload);
    Ok(())
}
