//! Who waits on a QUIC connection, and whom each of quinn-proto's events wakes.
//!
//! The connection's driver drains `quinn_proto::Connection::poll` and hands every event
//! here; the streams' and the h3 connection's `poll_*` calls register their wakers here
//! when quinn-proto has nothing for them yet. Kept apart from the driver so the mapping
//! is tested without sockets.

use quinn_proto::{Dir, Event, StreamEvent, StreamId};
use std::collections::HashMap;
use std::task::Waker;

/// The wakers of one QUIC connection's waiters.
#[derive(Default)]
pub(crate) struct Wakers {
    readers: HashMap<StreamId, Waker>,
    writers: HashMap<StreamId, Waker>,
    /// Streams whose finish waits for the peer's acknowledgement: whether it came.
    finishing: HashMap<StreamId, bool>,
    /// Waiting to accept a stream the peer opened: [bidi, uni].
    accept: [Option<Waker>; 2],
    /// Waiting for room to open a stream: [bidi, uni].
    open: [Option<Waker>; 2],
}

fn slot(dir: Dir) -> usize {
    match dir {
        Dir::Bi => 0,
        Dir::Uni => 1,
    }
}

fn set(slot: &mut Option<Waker>, w: &Waker) {
    if !slot.as_ref().is_some_and(|old| old.will_wake(w)) {
        *slot = Some(w.clone());
    }
}

impl Wakers {
    pub fn wait_read(&mut self, id: StreamId, w: &Waker) {
        self.readers.insert(id, w.clone());
    }

    pub fn wait_write(&mut self, id: StreamId, w: &Waker) {
        self.writers.insert(id, w.clone());
    }

    pub fn wait_accept(&mut self, dir: Dir, w: &Waker) {
        set(&mut self.accept[slot(dir)], w);
    }

    pub fn wait_open(&mut self, dir: Dir, w: &Waker) {
        set(&mut self.open[slot(dir)], w);
    }

    /// A stream's receiving handle is gone: nothing waits to read it any more.
    pub fn forget_read(&mut self, id: StreamId) {
        self.readers.remove(&id);
    }

    /// A stream's sending handle is gone.
    pub fn forget_write(&mut self, id: StreamId) {
        self.writers.remove(&id);
        self.finishing.remove(&id);
    }

    /// Whether the peer acknowledged all of a finished stream; until it has, `w` waits
    /// for it (the `Finished` event).
    pub fn finish_acked(&mut self, id: StreamId, w: &Waker) -> bool {
        if self.finishing.get(&id) == Some(&true) {
            self.finishing.remove(&id);
            return true;
        }
        self.finishing.insert(id, false);
        self.writers.insert(id, w.clone());
        false
    }

    /// Wakes whoever `event` concerns. A lost connection wakes everyone (each then sees
    /// the connection's error).
    pub fn on_event(&mut self, event: &Event) {
        match event {
            Event::Stream(StreamEvent::Opened { dir }) => wake(self.accept[slot(*dir)].take()),
            Event::Stream(StreamEvent::Available { dir }) => wake(self.open[slot(*dir)].take()),
            Event::Stream(StreamEvent::Readable { id }) => wake(self.readers.remove(id)),
            Event::Stream(StreamEvent::Writable { id } | StreamEvent::Stopped { id, .. }) => {
                wake(self.writers.remove(id))
            }
            Event::Stream(StreamEvent::Finished { id }) => {
                if let Some(acked) = self.finishing.get_mut(id) {
                    *acked = true;
                    wake(self.writers.remove(id));
                }
            }
            Event::ConnectionLost { .. } => self.wake_all(),
            _ => {}
        }
    }

    pub fn wake_all(&mut self) {
        for (_, w) in self.readers.drain().chain(self.writers.drain()) {
            w.wake();
        }
        for w in self.accept.iter_mut().chain(self.open.iter_mut()) {
            wake(w.take());
        }
    }
}

fn wake(w: Option<Waker>) {
    if let Some(w) = w {
        w.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quinn_proto::{ConnectionError, Side};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    #[derive(Default)]
    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counter() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count::default());
        (c.clone(), Waker::from(c))
    }

    fn n(c: &Count) -> usize {
        c.0.load(Ordering::SeqCst)
    }

    fn id(i: u64) -> StreamId {
        StreamId::new(Side::Client, Dir::Bi, i)
    }

    #[test]
    fn each_event_wakes_only_its_waiter_once() {
        let mut w = Wakers::default();
        let (r0, r0w) = counter();
        let (r1, r1w) = counter();
        let (wr, wrw) = counter();
        let (acc, accw) = counter();
        let (open, openw) = counter();
        w.wait_read(id(0), &r0w);
        w.wait_read(id(1), &r1w);
        w.wait_write(id(0), &wrw);
        w.wait_accept(Dir::Bi, &accw);
        w.wait_open(Dir::Uni, &openw);

        w.on_event(&Event::Stream(StreamEvent::Readable { id: id(1) }));
        assert_eq!((n(&r0), n(&r1), n(&wr)), (0, 1, 0));
        // Woken once: a second event finds no waiter until it registers again.
        w.on_event(&Event::Stream(StreamEvent::Readable { id: id(1) }));
        assert_eq!(n(&r1), 1);

        w.on_event(&Event::Stream(StreamEvent::Opened { dir: Dir::Uni }));
        assert_eq!(n(&acc), 0, "a uni stream does not wake the bidi acceptor");
        w.on_event(&Event::Stream(StreamEvent::Opened { dir: Dir::Bi }));
        assert_eq!(n(&acc), 1);

        w.on_event(&Event::Stream(StreamEvent::Stopped {
            id: id(0),
            error_code: 0u32.into(),
        }));
        assert_eq!((n(&wr), n(&r0)), (1, 0));

        w.on_event(&Event::Stream(StreamEvent::Available { dir: Dir::Uni }));
        assert_eq!(n(&open), 1);
    }

    #[test]
    fn a_lost_connection_wakes_everyone_and_a_forgotten_writer_is_not_woken() {
        let mut w = Wakers::default();
        let (r, rw) = counter();
        let (gone, gonew) = counter();
        let (acc, accw) = counter();
        w.wait_read(id(0), &rw);
        w.wait_write(id(1), &gonew);
        w.forget_write(id(1));
        w.wait_accept(Dir::Uni, &accw);
        w.on_event(&Event::ConnectionLost {
            reason: ConnectionError::TimedOut,
        });
        assert_eq!((n(&r), n(&acc), n(&gone)), (1, 1, 0));
        assert!(w.readers.is_empty() && w.writers.is_empty());
    }

    #[test]
    fn a_finish_waits_for_its_acknowledgement_and_only_its_own() {
        let mut w = Wakers::default();
        let (f, fw) = counter();
        assert!(!w.finish_acked(id(0), &fw));
        // Another stream's acknowledgement, or one nobody waits for, changes nothing.
        w.on_event(&Event::Stream(StreamEvent::Finished { id: id(1) }));
        assert!(
            !w.finishing.contains_key(&id(1)),
            "an unawaited finish is not kept"
        );
        assert_eq!(n(&f), 0);
        w.on_event(&Event::Stream(StreamEvent::Finished { id: id(0) }));
        assert_eq!(n(&f), 1);
        assert!(w.finish_acked(id(0), &fw));
        assert!(w.finishing.is_empty());
        // A writer dropped while waiting leaves nothing behind.
        assert!(!w.finish_acked(id(2), &fw));
        w.forget_write(id(2));
        assert!(w.finishing.is_empty() && w.writers.is_empty());
    }
}
