//! UTF-8 validated as it arrives, so a bad text fragment fails when it comes in.

/// Validator state between chunks: the start of a code point cut at a chunk boundary.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Utf8 {
    carry: [u8; 4],
    len: u8,
}

/// The invalid byte sequence is certain.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Invalid;

impl Utf8 {
    /// Validates the next bytes of the text; fails as soon as no continuation could fix it.
    pub(crate) fn feed(&mut self, mut data: &[u8]) -> Result<(), Invalid> {
        if self.len > 0 {
            let have = usize::from(self.len);
            let width = match self.carry[0] {
                0xC0..=0xDF => 2,
                0xE0..=0xEF => 3,
                _ => 4,
            };
            let take = (width - have).min(data.len());
            self.carry[have..have + take].copy_from_slice(&data[..take]);
            self.len += take as u8;
            data = &data[take..];
            match std::str::from_utf8(&self.carry[..usize::from(self.len)]) {
                Ok(_) => self.len = 0,
                Err(e) if e.error_len().is_some() => return Err(Invalid),
                // Still a valid prefix and `data` used up.
                Err(_) => return Ok(()),
            }
        }
        match std::str::from_utf8(data) {
            Ok(_) => Ok(()),
            Err(e) if e.error_len().is_some() => Err(Invalid),
            Err(e) => {
                // A valid prefix of one code point (at most 3 bytes) ends the chunk.
                let rest = &data[e.valid_up_to()..];
                self.carry[..rest.len()].copy_from_slice(rest);
                self.len = rest.len() as u8;
                Ok(())
            }
        }
    }

    /// No code point left open: the text may end here.
    pub(crate) fn is_complete(&self) -> bool {
        self.len == 0
    }
}
