//! Header maps kept on each thread for reuse: a response's map, once its head is written,
//! becomes the map of the next head parsed on that thread.
//!
//! Every request and response head needs a `HeaderMap`, and a new one costs two
//! allocations (its index table and its entries), two frees when dropped, and a drop of
//! each entry either way. A written response's map is cleared instead (its values dropped,
//! its table kept) and handed to the next parse: actix-web pools its heads the same way.
//! Only the map is kept, not a request's data: `clear` drops every value before a map is
//! kept, so no header of one exchange can reach another.

use http::header::MaxSizeReached;
use http::HeaderMap;
use std::cell::RefCell;

/// Maps kept per thread: as many as the heads a worker has in flight at once (a
/// pipelined group, an h2 connection's burst, a gateway's requests waiting on their
/// upstreams: each is parsed long before its response is written). A thread keeps only
/// what it once had in use together, and at most ~1.3 KB a map (12 entries) usually,
/// ~2.6 KB at `MAX_KEPT_CAPACITY`: at most ~330 KB a thread.
const KEEP: usize = 128;

/// A map that grew beyond this many entries (a large head) is freed, not kept.
const MAX_KEPT_CAPACITY: usize = 24;

thread_local! {
    static SPARE: RefCell<Vec<HeaderMap>> = const { RefCell::new(Vec::new()) };
}

/// An empty map with room for `capacity` entries: a kept one if this thread has one.
pub(crate) fn take(capacity: usize) -> Result<HeaderMap, MaxSizeReached> {
    match SPARE.try_with(|s| s.borrow_mut().pop()).ok().flatten() {
        Some(mut map) => {
            debug_assert!(map.is_empty());
            // `try_reserve` takes the additional count: the map is empty.
            map.try_reserve(capacity)?;
            Ok(map)
        }
        None => HeaderMap::try_with_capacity(capacity),
    }
}

/// Gives back a map whose head is done with: cleared and kept for [`take`], or dropped.
pub(crate) fn give(mut map: HeaderMap) {
    if map.capacity() == 0 || map.capacity() > MAX_KEPT_CAPACITY {
        return;
    }
    map.clear();
    // During a thread's teardown the map is simply dropped.
    let _ = SPARE.try_with(|s| {
        if let Ok(mut spare) = s.try_borrow_mut() {
            if spare.len() < KEEP {
                spare.push(map);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::{give, take, KEEP};
    use http::header::{HeaderValue, CONTENT_TYPE, HOST};

    #[test]
    fn a_given_map_comes_back_empty_with_its_room() {
        let mut map = take(4).unwrap();
        map.insert(HOST, HeaderValue::from_static("example.com"));
        map.append(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        map.append(CONTENT_TYPE, HeaderValue::from_static("text/html"));
        let room = map.capacity();
        give(map);
        let again = take(2).unwrap();
        assert!(again.is_empty(), "a kept map held a header: {again:?}");
        assert_eq!(again.get(CONTENT_TYPE), None);
        assert_eq!(again.capacity(), room);
        // A larger ask than the kept room grows it.
        give(again);
        assert!(take(200).unwrap().capacity() >= 200);
    }

    #[test]
    fn a_thread_keeps_a_bounded_number_of_maps() {
        let maps: Vec<_> = (0..KEEP + 10).map(|_| take(8).unwrap()).collect();
        for m in maps {
            give(m);
        }
        let kept = super::SPARE.with(|s| s.borrow().len());
        assert_eq!(kept, KEEP);
        // A map grown past the bound is not kept.
        super::SPARE.with(|s| s.borrow_mut().clear());
        give(take(1000).unwrap());
        assert_eq!(super::SPARE.with(|s| s.borrow().len()), 0);
    }
}
