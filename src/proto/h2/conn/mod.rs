//! The HTTP/2 connection core both roles share (RFC 9113 §4-§6): the frame loop with the
//! preface, the first SETTINGS and header blocks (HEADERS + CONTINUATION), SETTINGS both
//! ways, flow control both ways, PING, RST_STREAM and WINDOW_UPDATE bookkeeping, and the
//! GOAWAY of a connection error. What differs between client and server (who opens
//! streams, what a header block means, what a stream holds) is a [`Role`], implemented
//! by `client` and `server`, which the core calls back.

mod flow;
mod recv;

pub(crate) use flow::{give_back, send_data, StreamFlow};
pub(crate) use recv::{receive, Role};

use super::frame::{self, ErrorCode, Settings, MAX_WINDOW};
use super::hpack::{Decoder, Encoder};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::time::{Duration, Instant};

/// A role's stream table, keyed by stream id.
pub(crate) type Streams<S> = HashMap<u32, S, BuildHasherDefault<StreamIdHasher>>;

/// Which end of the connection a machine is: the client writes the preface, the server
/// reads it (§3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Client,
    Server,
}

/// Where the connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Open,
    /// A GOAWAY went one way or the other (the client received one, the server sent one):
    /// no new streams; those in flight finish.
    Away,
    /// A connection error or the end: nothing more is read or sent.
    Failed,
}

/// Our own settings, as the core enforces them on what the peer sends. Not kept per
/// connection: each role derives them from its config when the core asks ([`Role::local`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Local {
    pub max_frame_size: u32,
    pub max_header_list_size: u32,
    pub header_table_size: u32,
    /// Frames that do no work the peer may send, less what its streams earn.
    pub max_idle_frames: u32,
    /// Reset streams whose late frames are ignored (0: none remembered).
    pub resets_remembered: u32,
}

/// What the send side needs of the connection, apart from the streams.
pub(crate) struct SendHalf {
    pub encoder: Encoder,
    /// What we may still send on the connection.
    pub window: i64,
    /// The peer's SETTINGS.
    pub peer: Settings,
    /// Streams we reset lately, whose late frames are ignored.
    pub resets: RecentResets,
}

/// A header block (HEADERS + CONTINUATION) still arriving.
struct Block {
    stream: u32,
    end_stream: bool,
    /// Whether it is trailers: decided when the HEADERS came, since the stream may end
    /// before the block does.
    trailers: bool,
    bytes: Vec<u8>,
}

/// One connection's state common to both roles.
pub(crate) struct Core {
    side: Side,
    pub phase: Phase,
    /// The client's preface is still (partly) to come.
    awaiting_preface: bool,
    /// The peer's first frame (its SETTINGS) came.
    pub got_settings: bool,
    /// Our SETTINGS await the peer's ACK (the client times it from when it sent them).
    pub settings_unacked: bool,
    /// Our keep-alive PING awaits its ACK, since then.
    pub ping_sent: Option<Instant>,
    /// An incomplete frame kept across reads (no capacity when idle).
    kept: Vec<u8>,
    block: Option<Box<Block>>,
    pub decoder: Decoder,
    pub send: SendHalf,
    /// What the peer may still send on the connection.
    pub recv_window: i64,
    /// Connection-level bytes taken or discarded, not yet returned.
    pub credit: u64,
    /// Frames that did no work, against `max_idle_frames` plus what streams earn.
    pub idle_frames: u64,
}

impl Core {
    /// A connection whose SETTINGS (and the connection window beyond the default) go into
    /// `out` at once, as §3.4 allows; a client's preface goes before them.
    pub(crate) fn new(
        side: Side,
        local: &Local,
        settings: &[(u16, u32)],
        connection_window: u32,
        out: &mut Vec<u8>,
    ) -> Core {
        if side == Side::Client {
            out.extend_from_slice(frame::PREFACE);
        }
        frame::write_settings(out, settings);
        let default = i64::from(Settings::default().initial_window_size);
        let conn_window = i64::from(connection_window.min(MAX_WINDOW));
        if conn_window > default {
            frame::write_window_update(out, 0, (conn_window - default) as u32);
        }
        Core {
            side,
            phase: Phase::Open,
            awaiting_preface: side == Side::Server,
            got_settings: false,
            settings_unacked: true,
            ping_sent: None,
            kept: Vec::new(),
            block: None,
            // Our SETTINGS_HEADER_TABLE_SIZE holds only once the peer has ACKed it.
            decoder: Decoder::new(frame::DEFAULT_HEADER_TABLE_SIZE as usize),
            send: SendHalf {
                encoder: Encoder::new(),
                window: default,
                peer: Settings::default(),
                resets: RecentResets::new(local.resets_remembered),
            },
            recv_window: conn_window.max(default),
            credit: 0,
            idle_frames: 0,
        }
    }

    /// Whether the connection has failed (nothing more is read or sent).
    pub(crate) fn is_failed(&self) -> bool {
        self.phase == Phase::Failed
    }

    /// The room kept for an incomplete frame (none when idle).
    #[cfg(test)]
    pub(crate) fn kept_capacity(&self) -> usize {
        self.kept.capacity()
    }

    /// A frame that did no work: true once there were too many (a flood, to be closed
    /// with ENHANCE_YOUR_CALM).
    fn idle_frame(&mut self, local: &Local) -> bool {
        self.idle_frames += 1;
        self.idle_frames > u64::from(local.max_idle_frames)
    }

    /// Enters the failed state: GOAWAY with `last_stream`, `code` and `why` (a live peer
    /// learns why); false if it had already failed.
    pub(crate) fn goaway(
        &mut self,
        last_stream: u32,
        code: ErrorCode,
        why: &'static str,
        out: &mut Vec<u8>,
    ) -> bool {
        if self.phase == Phase::Failed {
            return false;
        }
        tracing::debug!(?code, why, "closing the HTTP/2 connection");
        frame::write_goaway(out, last_stream, code, why.as_bytes());
        self.stop();
        true
    }

    /// Nothing more is read or sent.
    pub(crate) fn stop(&mut self) {
        self.phase = Phase::Failed;
        self.block = None;
        self.kept = Vec::new();
    }

    /// Applies the peer's SETTINGS: the encoder's table, and §6.9.2's shift of every
    /// stream's send window by the change of the initial window. An error is the
    /// connection's.
    pub(crate) fn apply_settings<'a>(
        &mut self,
        params: frame::SettingsParams<'_>,
        windows: impl Iterator<Item = &'a mut StreamFlow>,
    ) -> Result<(), (ErrorCode, &'static str)> {
        let before = self.send.peer;
        if let Err(e) = self.send.peer.apply(params) {
            return Err((e.code(), e.reason()));
        }
        let peer = self.send.peer;
        if peer.header_table_size != before.header_table_size {
            self.send
                .encoder
                .set_max_table_size(peer.header_table_size as usize);
        }
        let delta = i64::from(peer.initial_window_size) - i64::from(before.initial_window_size);
        if delta != 0 {
            for s in windows {
                s.send += delta;
                if s.send > i64::from(MAX_WINDOW) {
                    let why = "SETTINGS_INITIAL_WINDOW_SIZE overflows a stream's window";
                    return Err((ErrorCode::FLOW_CONTROL_ERROR, why));
                }
            }
        }
        Ok(())
    }

    /// The connection's WINDOW_UPDATE for what was taken, once half the window is owed.
    pub(crate) fn give_back(&mut self, connection_window: u32, out: &mut Vec<u8>) {
        let half = u64::from(connection_window.min(MAX_WINDOW) / 2).max(1);
        give_back(out, 0, &mut self.credit, &mut self.recv_window, half);
    }

    /// The keep-alive PING: due `interval` after `last_read`, it fails the connection once
    /// unanswered for `timeout`. Returns whether it went unanswered; otherwise `at` is
    /// told when to look again.
    pub(crate) fn keep_alive(
        &mut self,
        now: Instant,
        last_read: Instant,
        interval: Option<Duration>,
        timeout: Duration,
        out: &mut Vec<u8>,
        at: &mut impl FnMut(Instant),
    ) -> bool {
        if let Some(sent) = self.ping_sent {
            let t = sent + timeout;
            if now >= t {
                return true;
            }
            at(t);
        } else if let Some(interval) = interval {
            let t = last_read + interval;
            if now >= t {
                frame::write_ping(out, false, frame::KEEP_ALIVE_PING);
                self.ping_sent = Some(now);
                at(now + timeout);
            } else {
                at(t);
            }
        }
        false
    }
}

/// The ids of the last streams we sent RST_STREAM on (`Local::resets_remembered` of
/// them): frames the peer sent before it saw the reset are ignored, not answered with
/// another RST_STREAM (RFC 9113 §5.1, "closed"). No memory until the first reset.
pub(crate) struct RecentResets {
    ids: Vec<u32>,
    /// Where the next id goes once `ids` is full (the oldest).
    next: usize,
    limit: usize,
}

impl RecentResets {
    fn new(limit: u32) -> RecentResets {
        RecentResets {
            ids: Vec::new(),
            next: 0,
            limit: limit as usize,
        }
    }

    pub(crate) fn record(&mut self, stream: u32) {
        if self.limit == 0 || self.contains(stream) {
            return;
        }
        if self.ids.len() < self.limit {
            self.ids.push(stream);
        } else {
            self.ids[self.next] = stream;
            self.next = (self.next + 1) % self.limit;
        }
    }

    pub(crate) fn contains(&self, stream: u32) -> bool {
        self.ids.contains(&stream)
    }
}

/// Hashes a stream id (a unique odd number) with one multiplication: no SipHash per frame.
#[derive(Default)]
pub(crate) struct StreamIdHasher(u64);

impl Hasher for StreamIdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u32(&mut self, id: u32) {
        // Streams are opened by the client alone (no push), so ids are odd: drop the
        // constant bit, then multiply by an odd constant (a bijection on the low bits,
        // which pick the bucket; the high bits, the tag, mix all).
        self.0 = u64::from(id >> 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}
