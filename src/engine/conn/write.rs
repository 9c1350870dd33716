//! A connection's write side: queueing sends, writing at once when the socket takes them,
//! flushing in the round, the output budget and the stall watch.

use super::{
    stall, ConnInner, Io, Kind, EV_FLUSH, F_CLOSING, F_CONNECTING, F_LAYER, F_OPENED, F_OVER_HIGH,
    F_PAUSED, F_SHUT_WR, F_WR_SHUT,
};
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Waker;

impl ConnInner {
    /// Err once `shutdown_write` was called: a send then would follow our FIN, and the
    /// socket's EPIPE would close a connection that is still reading.
    pub(super) fn check_write_open(&self) -> io::Result<()> {
        if self.flag(F_WR_SHUT) {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the connection's write side is shut down (shutdown_write)",
            ));
        }
        Ok(())
    }

    /// Queues output with `push` unless the connection is closed or its write side shut.
    /// Inside a round it joins the round's write. Elsewhere, onto an empty queue of a plain
    /// open stream, it is written at once under the I/O lock (which keeps rounds out, so
    /// the order holds; see `write_at_once`); otherwise, or when that leaves the round
    /// anything to do, the connection's task runs a round, which keeps the watermarks,
    /// `on_drained`, the write timeout and closing in one place.
    pub(super) fn enqueue(self: &Arc<Self>, push: impl FnOnce(&mut Io)) -> io::Result<()> {
        let mut io = self.io.lock().unwrap();
        if !io.open || self.flag(F_CLOSING) {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the connection is closed",
            ));
        }
        self.check_write_open()?;
        let before = io.queued();
        push(&mut io);
        if io.in_round {
            self.account(before, io.queued());
            return Ok(());
        }
        let round = before != 0 || !self.write_at_once(&mut io);
        self.account(before, io.queued());
        drop(io);
        if round {
            self.notify(EV_FLUSH);
        }
        Ok(())
    }

    /// Output sent outside a round onto an empty queue: written now if the connection is
    /// a plain stream that a round would simply flush (open and past `on_open`, not
    /// connecting, no record layer, not closing, half closed or handing its socket over).
    /// True if that left the round nothing to do, so none is needed: the queue is empty
    /// and no flag asks for what only a round does (`on_drained` owed, reads paused,
    /// a close or half close). Anything else, a short write or an error included, is
    /// left to the round the caller then notifies, as if this had not run: its flush
    /// writes the rest (or meets the error again and closes), and it alone clears
    /// `F_OVER_HIGH` and calls `on_drained`, so that wake-up comes once, from the
    /// connection's task, in order with its other callbacks.
    pub(super) fn write_at_once(&self, io: &mut Io) -> bool {
        let flags = self.flags.load(Ordering::Acquire);
        if self.kind == Kind::Udp
            || flags & F_OPENED == 0
            || flags & (F_CONNECTING | F_LAYER | F_CLOSING | F_SHUT_WR) != 0
            || io.layer.is_some()
            || io.after_output.is_some()
            || io.stall.is_some()
            || io.fd.is_none()
        {
            return false;
        }
        if io.out.write_to(self.fd).is_err() || io.out.queued() > 0 {
            return false;
        }
        // Read after the write: a flag set meanwhile by a call that notified on its own
        // costs at most a round that finds nothing to do.
        self.flags.load(Ordering::Acquire) & (F_OVER_HIGH | F_PAUSED | F_CLOSING | F_SHUT_WR) == 0
    }

    /// Keeps the write timeout's clock: armed while output is queued, restarted by progress.
    pub(super) fn watch_stall(self: &Arc<Self>, io: &mut Io, progressed: bool) {
        let Some(timeout) = self.rt.config.write_timeout else {
            return;
        };
        if io.queued() == 0 {
            io.stall = None;
        } else if let Some(stall) = io.stall.as_mut() {
            if progressed {
                stall.progressed();
            }
        } else {
            let waker = Waker::from(self.clone());
            io.stall = Some(Box::new(stall::Stall::start(timeout, &waker)));
        }
    }

    /// True if queued output made no progress for `Config::write_timeout`.
    pub(super) fn write_stalled(self: &Arc<Self>) -> bool {
        let Some(timeout) = self.rt.config.write_timeout else {
            return false;
        };
        let mut io = self.io.lock().unwrap();
        let Some(stall) = io.stall.as_mut() else {
            return false;
        };
        stall.expired(timeout, || Waker::from(self.clone()))
    }

    /// True when the queued output is past the high watermark or the engine-wide budget.
    pub(super) fn output_over_limit(&self) -> bool {
        let cfg = &self.rt.config;
        let queued = self.io.lock().unwrap().queued();
        queued > cfg.write_high_watermark
            || cfg.max_pending_bytes.is_some_and(|max| {
                queued > 0 && self.rt.pending_bytes.load(Ordering::Relaxed) > max
            })
    }

    /// Writes queued output now; keeps the rest queued. Only `WouldBlock` leaves data behind.
    pub(super) fn flush(&self, io: &mut Io) -> io::Result<()> {
        match self.kind {
            Kind::Udp => {
                if let Some(link) = &self.udp {
                    link.send_all(&mut io.out);
                }
                Ok(())
            }
            _ => match io.layer.as_deref_mut() {
                Some(layer) => {
                    let closing = self.flag(F_CLOSING | F_SHUT_WR);
                    layer.flush(&mut io.out, self.fd, closing)
                }
                None => io.out.write_to(self.fd),
            },
        }
    }

    pub(super) fn account(&self, before: usize, after: usize) {
        if after > before {
            self.rt
                .pending_bytes
                .fetch_add(after - before, Ordering::Relaxed);
        } else if before > after {
            self.rt
                .pending_bytes
                .fetch_sub(before - after, Ordering::Relaxed);
        }
    }
}
