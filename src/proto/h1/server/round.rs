//! The end of a round in the server machine: the timeouts that expired, whether to read
//! or close, and the next deadline.

use super::respond::error_response;
use super::{Actions, BodyFailure, BodySink, Clock, Continue, Limits, Reading, ServerConn};
use http::{StatusCode, Version};
use std::time::Instant;

impl<B: BodySink, X: 'static> ServerConn<B, X> {
    /// After the round's writes: the timeouts that expired (a 408 goes into `out`), what
    /// to do with reads, whether to close, and the next deadline. `reads_paused`: the
    /// connection holds reads for its output backlog (then the client is waiting on us,
    /// not we on it).
    pub(crate) fn end_round(
        &mut self,
        clock: Clock,
        limits: &Limits,
        reads_paused: bool,
        out: &mut Vec<u8>,
    ) -> Actions {
        self.drop_long_unread_body(limits);
        if self.queue.is_empty() {
            // An idle keep-alive connection keeps no queue (its slots are large): the
            // thread keeps it for the next connection's request.
            super::spare_queue::give(std::mem::take(&mut self.queue));
        }
        let deadline = match self.deadline(limits, reads_paused) {
            Some((at, kind)) if clock.now >= at => {
                self.timed_out(kind, clock, out);
                None
            }
            Some((at, _)) => Some(at),
            None => None,
        };
        Actions {
            read: self.wants_read(limits),
            close: self.should_close(),
            deadline,
            parse_kept: self.held_back && !self.kept.is_empty() && self.can_parse_kept(limits),
        }
    }

    /// A body nobody reads is discarded as it arrives, up to `max_drain_bytes` after its
    /// response: past that, closing beats reading it all.
    fn drop_long_unread_body(&mut self, limits: &Limits) {
        if !self.queue.is_empty() {
            return;
        }
        let Reading::Body(b) = &self.reading else {
            return;
        };
        if !b.sink.reader_gone() {
            return;
        }
        let left = b.decoder.remaining().unwrap_or(b.received);
        if left > limits.max_drain_bytes {
            self.end_body(Err(BodyFailure::Incomplete));
        }
    }

    fn wants_read(&self, limits: &Limits) -> bool {
        match &self.reading {
            Reading::Head { .. } => !self.parked && self.queue.len() < limits.max_pipelined,
            Reading::Body(b) => b.sink.has_room(),
            Reading::UpgradeWaits | Reading::Upgraded { .. } | Reading::Switching => false,
            Reading::Stopped => true,
        }
    }

    /// Whether kept bytes wait on something that no longer holds them back.
    fn can_parse_kept(&self, limits: &Limits) -> bool {
        match &self.reading {
            Reading::Head { .. } => !self.parked && self.queue.len() < limits.max_pipelined,
            Reading::Body(b) => b.sink.has_room(),
            Reading::UpgradeWaits => self.queue.is_empty(),
            Reading::Upgraded { .. } | Reading::Switching | Reading::Stopped => false,
        }
    }

    fn should_close(&self) -> bool {
        if !self.queue.is_empty() {
            return false;
        }
        match &self.reading {
            Reading::Stopped | Reading::Switching => true,
            // A body the client was never told to send will not come.
            Reading::Body(b) => b.last && b.cont == Continue::Owed,
            _ => false,
        }
    }

    /// The deadline that applies now, if any.
    fn deadline(&mut self, limits: &Limits, reads_paused: bool) -> Option<(Instant, Timeout)> {
        let busy = !self.queue.is_empty() || !matches!(self.reading, Reading::Head { .. });
        if let Reading::Head { started } = &mut self.reading {
            if busy || reads_paused {
                // A partial head behind requests in progress waits on us, not on the
                // client: its clock starts when we read again.
                *started = None;
            }
        }
        match &self.reading {
            Reading::Head {
                started: Some(started),
            } => limits
                .header_read_timeout
                .map(|t| (*started + t, Timeout::Head)),
            Reading::Head { started: None } if !busy => {
                let idle = limits.idle_timeout.map(|t| self.idle_since + t);
                // Draining, a first request not begun has only the grace.
                let grace = self
                    .first_request_grace
                    .then(|| self.idle_since + limits.drain_first_request_grace);
                idle.into_iter()
                    .chain(grace)
                    .min()
                    .map(|at| (at, Timeout::Idle))
            }
            Reading::Body(b) if b.cont != Continue::Owed && !reads_paused && b.sink.has_room() => {
                limits
                    .body_read_timeout
                    .map(|t| (b.progress + t, Timeout::Body))
            }
            _ => None,
        }
    }

    fn timed_out(&mut self, kind: Timeout, clock: Clock, out: &mut Vec<u8>) {
        match kind {
            Timeout::Head => {
                tracing::debug!("request head not received in time");
                self.kept = Vec::new();
                error_response(
                    StatusCode::REQUEST_TIMEOUT,
                    Version::HTTP_11,
                    false,
                    &(clock.date)(),
                    out,
                );
                self.reading = Reading::Stopped;
            }
            Timeout::Body => {
                // The service sees the failure and answers; then the connection closes.
                tracing::debug!("request body stalled");
                self.end_body(Err(BodyFailure::TimedOut));
            }
            Timeout::Idle => self.reading = Reading::Stopped,
        }
    }
}

/// Which timeout a deadline stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timeout {
    Head,
    Body,
    Idle,
}
