//! An emptied request queue kept per thread for the next connection that needs one. An
//! idle keep-alive connection keeps no queue (its slots are large), so without this each
//! keep-alive request would allocate a queue and free it again. The queue's slots hold
//! the driver's per-request state (a type parameter), so the spare is kept behind
//! `dyn Any`, its box kept with it: taking and giving allocate nothing.

use std::any::Any;
use std::cell::RefCell;
use std::collections::VecDeque;

/// A queue grown past this many requests (a deep pipeline's) is freed, not kept.
const MAX_KEPT: usize = 16;

thread_local! {
    static SPARE: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

/// An empty queue: the thread's spare if it has one of this type.
pub(super) fn take<T: 'static>() -> VecDeque<T> {
    SPARE
        .try_with(|spare| {
            let mut spare = spare.try_borrow_mut().ok()?;
            let kept = spare.as_mut()?.downcast_mut::<VecDeque<T>>()?;
            Some(std::mem::take(kept))
        })
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Keeps `queue` (empty) as the thread's spare, unless one is kept already or it is large.
pub(super) fn give<T: 'static>(queue: VecDeque<T>) {
    debug_assert!(queue.is_empty());
    if queue.capacity() == 0 || queue.capacity() > MAX_KEPT {
        return;
    }
    // During the thread's teardown the queue is simply dropped.
    let _ = SPARE.try_with(|spare| {
        let Ok(mut spare) = spare.try_borrow_mut() else {
            return;
        };
        match spare.as_mut().and_then(|b| b.downcast_mut::<VecDeque<T>>()) {
            Some(kept) if kept.capacity() == 0 => *kept = queue,
            Some(_) => {}
            // The first on this thread, or one of another driver's type: this one now.
            None => *spare = Some(Box::new(queue)),
        }
    });
}

#[cfg(test)]
mod tests {
    use super::{give, take, MAX_KEPT};

    #[test]
    fn a_given_queue_comes_back_empty_with_its_room() {
        let mut q: std::collections::VecDeque<String> = take();
        q.push_back("a request".into());
        q.push_back("another".into());
        let room = q.capacity();
        let first = q.as_slices().0.as_ptr();
        q.clear();
        give(q);
        let again: std::collections::VecDeque<String> = take();
        assert!(again.is_empty());
        assert_eq!(
            (again.capacity(), again.as_slices().0.as_ptr()),
            (room, first)
        );
        // Another type never gets it; once taken, the next take has none to give.
        give(again);
        assert_eq!(take::<u64>().capacity(), 0);
        assert_eq!(take::<String>().capacity(), room);
        assert_eq!(take::<String>().capacity(), 0);
        // Another type's queue takes the place.
        let mut other: std::collections::VecDeque<u64> = take();
        other.push_back(1);
        other.clear();
        give(other);
        assert_eq!(take::<String>().capacity(), 0);
        assert!(take::<u64>().capacity() > 0);
        // A large one is not kept.
        let mut big: std::collections::VecDeque<String> = take();
        big.reserve(MAX_KEPT + 1);
        give(big);
        assert_eq!(take::<String>().capacity(), 0);
    }
}
