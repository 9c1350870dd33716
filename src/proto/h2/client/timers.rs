//! The client machine's deadlines: keep-alive PINGs (hyper's `http2_keep_alive_*`
//! options, decided as the server machine decides its own in `server/round.rs`) and the
//! server's ACK of our SETTINGS.

use super::*;

impl ClientConn {
    /// Handles what is due at `now`: the connection fails (every stream with
    /// [`Why::TimedOut`], a GOAWAY into `out`) once our SETTINGS or a keep-alive PING went
    /// unanswered for their timeout; a PING goes out when nothing came from the server
    /// for the keep-alive interval (while streams are open, or always with
    /// `keep_alive_while_idle`). Returns the next instant something is due, for the
    /// driver's timer.
    pub(crate) fn poll_timers(
        &mut self,
        now: Instant,
        out: &mut Vec<u8>,
        ev: &mut Vec<Event>,
    ) -> Option<Instant> {
        if self.core.is_failed() {
            return None;
        }
        let mut next = None;
        let mut at = |t: Instant| next = Some(next.map_or(t, |n: Instant| n.min(t)));
        if self.core.settings_unacked {
            let t = self.settings_sent + self.cfg.settings_timeout;
            if now >= t {
                let why = "the server did not acknowledge our SETTINGS in time";
                self.close_with(ErrorCode::SETTINGS_TIMEOUT, why, Why::TimedOut, out, ev);
                return None;
            }
            at(t);
        }
        let cfg = &self.cfg;
        let interval = cfg
            .keep_alive_interval
            .filter(|_| cfg.keep_alive_while_idle || !self.streams.is_empty());
        let timeout = cfg.keep_alive_timeout;
        if self
            .core
            .keep_alive(now, self.last_read, interval, timeout, out, &mut at)
        {
            let why = "the server did not answer a keep-alive PING in time";
            self.close_with(ErrorCode::NO_ERROR, why, Why::TimedOut, out, ev);
            return None;
        }
        next
    }
}
