//! Who waits on a QUIC connection, and whom each of quinn-proto's events wakes.
//!
//! The connection's driver drains `quinn_proto::Connection::poll` and hands every event
//! here; the streams' and the h3 connection's `poll_*` calls register their wakers here
//! when quinn-proto has nothing for them yet. Kept apart from the driver so the mapping
//! is tested without sockets.

use quinn_proto::{Dir, Event, StreamEvent, StreamId};
use std::task::Waker;

/// The wakers of one QUIC connection's waiters.
///
/// The streams' waiters are one short list searched in order, not hash maps: a connection
/// has a few streams waiting (an idle one: h3's control and QPACK streams), a hash map
/// keeps its capacity after a burst, and hashing a stream ID costs more than a scan of a
/// few entries. The list's capacity is given back when it is mostly empty.
#[derive(Default)]
pub(crate) struct Wakers {
    streams: Vec<Waiter>,
    /// Waiting to accept a stream the peer opened: [bidi, uni].
    accept: [Option<Waker>; 2],
    /// Waiting for room to open a stream: [bidi, uni].
    open: [Option<Waker>; 2],
}

/// Who waits on one side of a stream.
struct Waiter {
    id: StreamId,
    /// Reading, or writing (a finish waits on the writing side too).
    read: bool,
    waker: Option<Waker>,
    finish: Finish,
}

/// Where a stream's finish is: waiting for the peer's acknowledgement of all its data.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Finish {
    None,
    Awaiting,
    Acked,
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
        let i = self.entry(id, true);
        set(&mut self.streams[i].waker, w);
    }

    pub fn wait_write(&mut self, id: StreamId, w: &Waker) {
        let i = self.entry(id, false);
        set(&mut self.streams[i].waker, w);
    }

    pub fn wait_accept(&mut self, dir: Dir, w: &Waker) {
        set(&mut self.accept[slot(dir)], w);
    }

    pub fn wait_open(&mut self, dir: Dir, w: &Waker) {
        set(&mut self.open[slot(dir)], w);
    }

    /// A stream's receiving handle is gone: nothing waits to read it any more.
    pub fn forget_read(&mut self, id: StreamId) {
        self.remove(id, true);
    }

    /// A stream's sending handle is gone.
    pub fn forget_write(&mut self, id: StreamId) {
        self.remove(id, false);
    }

    /// Whether the peer acknowledged all of a finished stream; until it has, `w` waits
    /// for it (the `Finished` event).
    pub fn finish_acked(&mut self, id: StreamId, w: &Waker) -> bool {
        let i = self.entry(id, false);
        if self.streams[i].finish == Finish::Acked {
            self.remove_at(i);
            return true;
        }
        let waiter = &mut self.streams[i];
        waiter.finish = Finish::Awaiting;
        set(&mut waiter.waker, w);
        false
    }

    /// Wakes whoever `event` concerns. A lost connection wakes everyone (each then sees
    /// the connection's error).
    pub fn on_event(&mut self, event: &Event) {
        match event {
            Event::Stream(StreamEvent::Opened { dir }) => wake(self.accept[slot(*dir)].take()),
            Event::Stream(StreamEvent::Available { dir }) => wake(self.open[slot(*dir)].take()),
            Event::Stream(StreamEvent::Readable { id }) => {
                if let Some(i) = self.find(*id, true) {
                    wake(self.remove_at(i).waker);
                }
            }
            Event::Stream(StreamEvent::Writable { id } | StreamEvent::Stopped { id, .. }) => {
                if let Some(i) = self.find(*id, false) {
                    // A finish waiting for its acknowledgement keeps its place.
                    match self.streams[i].finish {
                        Finish::None => wake(self.remove_at(i).waker),
                        _ => wake(self.streams[i].waker.take()),
                    }
                }
            }
            Event::Stream(StreamEvent::Finished { id }) => {
                if let Some(i) = self.find(*id, false) {
                    let waiter = &mut self.streams[i];
                    if waiter.finish == Finish::Awaiting {
                        waiter.finish = Finish::Acked;
                        wake(waiter.waker.take());
                    }
                }
            }
            Event::ConnectionLost { .. } => self.wake_all(),
            _ => {}
        }
    }

    pub fn wake_all(&mut self) {
        for waiter in &mut self.streams {
            wake(waiter.waker.take());
        }
        self.streams.retain(|w| w.finish != Finish::None);
        self.shrink();
        for w in self.accept.iter_mut().chain(self.open.iter_mut()) {
            wake(w.take());
        }
    }

    fn find(&self, id: StreamId, read: bool) -> Option<usize> {
        self.streams
            .iter()
            .position(|w| w.id == id && w.read == read)
    }

    /// The waiter for `id`'s reading or writing side, made if there is none.
    fn entry(&mut self, id: StreamId, read: bool) -> usize {
        self.find(id, read).unwrap_or_else(|| {
            self.streams.push(Waiter {
                id,
                read,
                waker: None,
                finish: Finish::None,
            });
            self.streams.len() - 1
        })
    }

    fn remove(&mut self, id: StreamId, read: bool) {
        if let Some(i) = self.find(id, read) {
            self.remove_at(i);
        }
    }

    fn remove_at(&mut self, i: usize) -> Waiter {
        let waiter = self.streams.swap_remove(i);
        self.shrink();
        waiter
    }

    /// Gives back most of the list's capacity once it is mostly empty (after a burst of
    /// streams), so an idle connection keeps room for a few waiters only.
    fn shrink(&mut self) {
        if self.streams.capacity() > 8 && self.streams.len() < self.streams.capacity() / 4 {
            self.streams.shrink_to(self.streams.len() * 2);
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
    use crate::test_support::{counting_waker as counter, Count};
    use quinn_proto::{ConnectionError, Side};

    fn n(c: &Count) -> usize {
        c.wakes()
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
        assert!(w.streams.is_empty());
    }

    #[test]
    fn a_finish_waits_for_its_acknowledgement_and_only_its_own() {
        let mut w = Wakers::default();
        let (f, fw) = counter();
        assert!(!w.finish_acked(id(0), &fw));
        // Another stream's acknowledgement, or one nobody waits for, changes nothing.
        w.on_event(&Event::Stream(StreamEvent::Finished { id: id(1) }));
        assert!(
            w.find(id(1), false).is_none(),
            "an unawaited finish is not kept"
        );
        assert_eq!(n(&f), 0);
        w.on_event(&Event::Stream(StreamEvent::Finished { id: id(0) }));
        assert_eq!(n(&f), 1);
        assert!(w.finish_acked(id(0), &fw));
        assert!(w.streams.is_empty());
        // A writer dropped while waiting leaves nothing behind.
        assert!(!w.finish_acked(id(2), &fw));
        w.forget_write(id(2));
        assert!(w.streams.is_empty());
    }

    #[test]
    fn a_burst_of_waiters_gives_its_room_back() {
        let mut w = Wakers::default();
        let (c, cw) = counter();
        for i in 0..100 {
            w.wait_read(id(i), &cw);
            w.wait_write(id(i), &cw);
        }
        // The same waiter again is one entry, not two.
        w.wait_read(id(7), &cw);
        assert_eq!(w.streams.len(), 200);
        for i in 0..100 {
            w.on_event(&Event::Stream(StreamEvent::Readable { id: id(i) }));
            w.forget_write(id(i));
        }
        assert_eq!(n(&c), 100);
        assert!(w.streams.is_empty());
        assert!(
            w.streams.capacity() <= 8,
            "an emptied list keeps {} slots",
            w.streams.capacity()
        );
    }
}
