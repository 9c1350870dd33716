//! Keep-alive pings, as a machine of their own: whether the peer was heard since the last
//! deadline goes in, what to do at the deadline and how long to wait for the next comes
//! out. No clock inside: the driver sleeps for the returned duration and calls
//! [`KeepAlive::on_deadline`] when it passes.
//!
//! Hearing is a flag the receive path sets (no clock read per round), so silence is
//! noticed between one and two intervals after the last bytes came.

use std::time::Duration;

/// When a silent peer is pinged, and how long it has to answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeepAliveConfig {
    /// A ping is sent once nothing was heard from the peer for this long.
    pub interval: Duration,
    /// After the ping, the peer has this long to send anything (its pong, or any frame)
    /// before the connection is closed as dead.
    pub timeout: Duration,
}

/// What the driver does at a deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The peer was heard: nothing to send.
    Wait,
    /// The peer was silent for an interval: send a ping.
    Ping,
    /// The peer did not answer the ping in time: close the connection.
    Fail,
}

/// A connection's keep-alive state.
#[derive(Debug)]
pub struct KeepAlive {
    config: KeepAliveConfig,
    heard: bool,
    /// A ping was sent and nothing came since.
    awaiting: bool,
}

impl KeepAlive {
    pub fn new(config: KeepAliveConfig) -> KeepAlive {
        KeepAlive {
            config,
            heard: false,
            awaiting: false,
        }
    }

    /// How long to wait for the first deadline, from the start of the connection.
    pub fn first_wait(&self) -> Duration {
        self.config.interval
    }

    /// Bytes came from the peer.
    pub fn heard(&mut self) {
        self.heard = true;
    }

    /// The deadline passed: what to do, and how long until the next one.
    pub fn on_deadline(&mut self) -> (Action, Duration) {
        if std::mem::take(&mut self.heard) {
            self.awaiting = false;
            (Action::Wait, self.config.interval)
        } else if self.awaiting {
            (Action::Fail, self.config.timeout)
        } else {
            self.awaiting = true;
            (Action::Ping, self.config.timeout)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keepalive() -> KeepAlive {
        KeepAlive::new(KeepAliveConfig {
            interval: Duration::from_secs(30),
            timeout: Duration::from_secs(10),
        })
    }

    #[test]
    fn a_peer_heard_in_every_interval_is_never_pinged() {
        let mut k = keepalive();
        assert_eq!(k.first_wait(), Duration::from_secs(30));
        for _ in 0..5 {
            k.heard();
            assert_eq!(k.on_deadline(), (Action::Wait, Duration::from_secs(30)));
        }
    }

    #[test]
    fn a_silent_peer_is_pinged_then_failed_after_the_timeout() {
        let mut k = keepalive();
        assert_eq!(k.on_deadline(), (Action::Ping, Duration::from_secs(10)));
        assert_eq!(k.on_deadline().0, Action::Fail);
    }

    #[test]
    fn an_answer_within_the_timeout_starts_a_new_interval() {
        let mut k = keepalive();
        k.heard();
        assert_eq!(k.on_deadline().0, Action::Wait);
        assert_eq!(k.on_deadline(), (Action::Ping, Duration::from_secs(10)));
        k.heard(); // the pong
        assert_eq!(k.on_deadline(), (Action::Wait, Duration::from_secs(30)));
        // Silent again: a new ping, not a failure for the old one.
        assert_eq!(k.on_deadline().0, Action::Ping);
        assert_eq!(k.on_deadline().0, Action::Fail);
    }
}
