//! The end of a round: finished streams forgotten, credit returned to the client's
//! windows, and the deadlines (preface, idle, keep-alive, stalled streams).

use super::*;
use crate::proto::h2::conn::give_back;

impl<B: StreamSink, X> ServerConn<B, X> {
    /// Forgets streams whose response is done: a request body still arriving is stopped
    /// with RST_STREAM(NO_ERROR) once its reader is gone (§8.1).
    pub(super) fn forget_finished(&mut self, out: &mut Vec<u8>) {
        let mut gone = Vec::new();
        for (&id, s) in self.streams.iter_mut() {
            let st = &s.state;
            if st.sending != Sending::Done {
                continue;
            }
            let reader_gone = st.body.as_ref().is_none_or(|b| b.sink.reader_gone());
            if st.remote_closed || reader_gone {
                gone.push((id, !st.remote_closed));
            }
        }
        for (id, reset) in gone {
            if reset {
                self.write_reset(id, ErrorCode::NO_ERROR, out);
            }
            if let Some(s) = self.streams.remove(&id) {
                self.stream_gone(s.state, BodyFailure::Incomplete);
            }
        }
    }

    /// Ends a round: returns the windows the services' reads reopened (in batches of half
    /// a window), handles the deadlines, and says whether to close.
    pub(crate) fn end_round(
        &mut self,
        clock: Clock,
        cfg: &ServerLimits,
        out: &mut Vec<u8>,
    ) -> Actions {
        if !self.core.is_failed() {
            self.return_credit(clock.now, &cfg.http2, out);
            self.forget_finished(out);
        }
        if self.streams.is_empty() && self.streams.capacity() > 0 {
            // An idle connection keeps no stream table (a map never shrinks by itself).
            self.streams = Streams::default();
        }
        let now = clock.now;
        let mut deadline = None;
        let mut at = |t: Instant| deadline = Some(deadline.map_or(t, |d: Instant| d.min(t)));
        let done = Actions {
            close: true,
            deadline: None,
        };
        match self.core.phase {
            Phase::Failed => return done,
            Phase::Away if self.streams.is_empty() => return done,
            Phase::Open if !self.core.got_settings => {
                // The preface and the first SETTINGS are the request head of HTTP/2.
                if let Some(limit) = cfg.header_read_timeout {
                    if now >= self.idle_since + limit {
                        return done;
                    }
                    at(self.idle_since + limit);
                }
            }
            _ => {}
        }
        if self.peer_eof && self.streams.is_empty() {
            return done;
        }
        if self.streams.is_empty() && self.core.phase == Phase::Open {
            if let Some(limit) = cfg.idle_timeout {
                let t = self.idle_since.max(self.last_frame) + limit;
                if now >= t {
                    frame::write_goaway(out, self.last_stream, ErrorCode::NO_ERROR, b"idle");
                    return done;
                }
                at(t);
            }
        }
        self.stream_deadlines(now, cfg, out, &mut at);
        let h2 = &cfg.http2;
        let (interval, timeout) = (h2.keep_alive_interval, h2.keep_alive_timeout);
        if self
            .core
            .keep_alive(now, self.last_frame, interval, timeout, out, &mut at)
        {
            self.fail(ErrorCode::NO_ERROR, "keep-alive PING unanswered", out);
            return done;
        }
        Actions {
            close: false,
            deadline,
        }
    }

    /// Per-stream timeouts: a request body that stalls past `body_read_timeout` fails and
    /// its stream is reset; so is a response that waits past `window_stall_timeout` for a
    /// client that does not open its window (it would hold its memory forever).
    pub(super) fn stream_deadlines(
        &mut self,
        now: Instant,
        cfg: &ServerLimits,
        out: &mut Vec<u8>,
        at: &mut impl FnMut(Instant),
    ) {
        let mut expired = Vec::new();
        for (&id, s) in &self.streams {
            let st = &s.state;
            // Only while the client may send: a window the service has not reopened yet
            // is not the client stalling.
            let body_limit = cfg
                .body_read_timeout
                .filter(|_| st.body.is_some() && st.flow.recv > 0);
            let stall_limit = cfg.http2.window_stall_timeout;
            let due = [
                body_limit.map(|l| (st.progress + l, BodyFailure::TimedOut)),
                st.stalled_since
                    .zip(stall_limit)
                    .map(|(since, l)| (since + l, BodyFailure::Incomplete)),
            ];
            for (t, why) in due.into_iter().flatten() {
                if now >= t {
                    expired.push((id, why));
                    break;
                }
                at(t);
            }
        }
        for (id, why) in expired {
            tracing::debug!(stream = id, ?why, "a stream timed out");
            if let Some(s) = self.streams.remove(&id) {
                self.stream_gone(s.state, why);
            }
            self.write_reset(id, ErrorCode::CANCEL, out);
        }
    }

    /// WINDOW_UPDATEs for what the readers took: a stream's once half its window is
    /// owed, the connection's once half of its own is.
    pub(super) fn return_credit(&mut self, now: Instant, cfg: &Http2Config, out: &mut Vec<u8>) {
        let stream_half = u64::from(cfg.initial_stream_window / 2).max(1);
        for (&id, s) in self.streams.iter_mut() {
            let st = &mut s.state;
            if let Some(body) = st.body.as_mut() {
                let taken = if body.sink.reader_gone() {
                    st.held
                } else {
                    (body.sink.take_consumed() as u64).min(st.held)
                };
                st.held -= taken;
                st.flow.credit += taken;
                self.core.credit += taken;
            }
            if st.remote_closed {
                st.flow.credit = 0;
            } else if give_back(out, id, &mut st.flow.credit, &mut st.flow.recv, stream_half) {
                // The body-read timeout counts from when the client may send again.
                st.progress = now;
            }
        }
        self.core.give_back(cfg.initial_connection_window, out);
    }
}
