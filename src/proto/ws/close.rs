//! Close frames (RFC 6455 §5.5.1, §7.4): status codes and the payload's shape.

use super::{CloseFrame, Error};
use bytes::Bytes;

/// A code a Close frame may carry: the registered ones that mean something on the wire
/// (1000-1003, 1007-1011) and the application's (3000-4999). 1004-1006 and 1015 are never
/// sent; the rest is unassigned, and 1012-1014 are refused too, as Autobahn (7.9.*) wants.
pub(crate) fn is_valid_code(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1011 | 3000..=4999)
}

/// Reads a received Close payload: empty, or a valid code and a UTF-8 reason.
pub(crate) fn parse(payload: &[u8]) -> Result<Option<CloseFrame>, Error> {
    match payload {
        [] => Ok(None),
        [_] => Err(Error::Protocol("close payload of one byte")),
        [hi, lo, reason @ ..] => {
            let code = u16::from_be_bytes([*hi, *lo]);
            if !is_valid_code(code) {
                return Err(Error::Protocol("invalid close code"));
            }
            if std::str::from_utf8(reason).is_err() {
                return Err(Error::InvalidUtf8);
            }
            Ok(Some(CloseFrame {
                code,
                reason: Bytes::copy_from_slice(reason),
            }))
        }
    }
}
