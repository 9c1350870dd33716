//! permessage-deflate (RFC 7692): negotiation and the per-message compressor.
//!
//! TEMPORARY stand-in (ws-proto branch) with the agreed API so the machine compiles and its
//! tests run; the real implementation replaces this file at merge. It compresses every
//! message afresh (no context takeover either way), which any decompressor reads.

use super::Role;
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeflateParams {
    pub server_no_context_takeover: bool,
    pub client_no_context_takeover: bool,
    pub server_max_window_bits: u8,
    pub client_max_window_bits: u8,
}

pub struct PerMessageDeflate {
    level: u32,
}

impl PerMessageDeflate {
    pub fn new(_role: Role, _params: &DeflateParams, level: u32) -> Self {
        PerMessageDeflate { level }
    }

    /// Appends `payload` compressed as one message (without the trailing 00 00 ff ff).
    pub fn compress(&mut self, payload: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
        let mut c = Compress::new(Compression::new(self.level), false);
        let start = out.len();
        out.reserve(payload.len() / 2 + 64);
        loop {
            let consumed = c.total_in() as usize;
            c.compress_vec(&payload[consumed..], out, FlushCompress::Sync)
                .map_err(std::io::Error::other)?;
            if c.total_in() as usize == payload.len() && out.len() < out.capacity() {
                break;
            }
            out.reserve(out.len().max(64));
        }
        if out.len() >= start + 4 && out.ends_with(&[0, 0, 0xff, 0xff]) {
            out.truncate(out.len() - 4);
        }
        Ok(())
    }

    /// Appends the message whose compressed payload is `input`; fails past `max` bytes.
    pub fn decompress(
        &mut self,
        input: &[u8],
        max: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), InflateError> {
        let mut d = Decompress::new(false);
        let start = out.len();
        let mut data = input.to_vec();
        data.extend_from_slice(&[0, 0, 0xff, 0xff]);
        loop {
            let consumed = d.total_in() as usize;
            if out.len() == out.capacity() {
                out.reserve(out.len().max(256));
            }
            let before = (d.total_in(), d.total_out());
            let st = d
                .decompress_vec(&data[consumed..], out, FlushDecompress::Sync)
                .map_err(|_| InflateError::Corrupt)?;
            if out.len() - start > max {
                return Err(InflateError::TooBig);
            }
            if d.total_in() as usize == data.len() && out.len() < out.capacity() {
                return Ok(());
            }
            if st == Status::StreamEnd {
                return Ok(());
            }
            if (d.total_in(), d.total_out()) == before && out.len() < out.capacity() {
                return Err(InflateError::Corrupt);
            }
        }
    }

    pub fn held_bytes(&self) -> usize {
        0
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum InflateError {
    TooBig,
    Corrupt,
}
