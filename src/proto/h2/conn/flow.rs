//! Flow control both ways (RFC 9113 §5.2, §6.9): a stream's two windows and the credit
//! that reopens the peer's, DATA written within ours.

use crate::proto::h2::frame::{self, MAX_WINDOW};
use bytes::Buf;

/// One stream's flow-control state.
#[derive(Debug)]
pub(crate) struct StreamFlow {
    /// What we may still send on this stream (the peer's window for it).
    pub send: i64,
    /// What the peer may still send on it.
    pub recv: i64,
    /// Bytes taken by the reader (or discarded), not yet returned with a WINDOW_UPDATE.
    pub credit: u64,
}

impl StreamFlow {
    pub(crate) fn new(send: u32, recv: u32) -> StreamFlow {
        StreamFlow {
            send: i64::from(send),
            recv: i64::from(recv),
            credit: 0,
        }
    }
}

/// A WINDOW_UPDATE for `stream` (0: the connection) once `credit` reaches `half`; returns
/// whether one went out.
pub(crate) fn give_back(
    out: &mut Vec<u8>,
    stream: u32,
    credit: &mut u64,
    recv: &mut i64,
    half: u64,
) -> bool {
    if *credit < half {
        return false;
    }
    let inc = (*credit).min(u64::from(MAX_WINDOW)) as u32;
    frame::write_window_update(out, stream, inc);
    *recv += i64::from(inc);
    *credit -= u64::from(inc);
    true
}

/// What [`send_data`] did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sent {
    /// Some DATA went out.
    pub progressed: bool,
    /// All of the data went (and END_STREAM if asked); otherwise the rest waits for a
    /// WINDOW_UPDATE.
    pub all: bool,
}

/// Writes as much of `data` on `stream` as the connection's window `conn` and the
/// stream's `window` allow, in frames of at most `max_frame` bytes; `end_stream` marks
/// the last DATA once all of it is out. Both windows shrink by what went.
pub(crate) fn send_data(
    out: &mut Vec<u8>,
    stream: u32,
    data: &mut impl Buf,
    end_stream: bool,
    (conn, window): (&mut i64, &mut i64),
    max_frame: u32,
) -> Sent {
    let mut progressed = false;
    loop {
        let remaining = data.remaining();
        if remaining == 0 {
            if end_stream {
                frame::write_data_head(out, stream, 0, true);
            }
            return Sent {
                progressed,
                all: true,
            };
        }
        let open = (*window).min(*conn).max(0) as usize;
        let n = remaining.min(open).min(max_frame as usize);
        if n == 0 {
            return Sent {
                progressed,
                all: false,
            };
        }
        progressed = true;
        let last = end_stream && n == remaining;
        frame::write_data_head(out, stream, n, last);
        let mut left = n;
        while left > 0 {
            let chunk = data.chunk();
            let k = chunk.len().min(left);
            out.extend_from_slice(&chunk[..k]);
            data.advance(k);
            left -= k;
        }
        *conn -= n as i64;
        *window -= n as i64;
        if last {
            return Sent {
                progressed,
                all: true,
            };
        }
    }
}
