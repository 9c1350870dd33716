//! A size-classed buffer pool.
//!
//! A connection borrows a read buffer (and, when it writes, an output buffer) at the start
//! of a round and returns both at its end, so an idle connection holds none. Free buffers
//! are cached per thread, so borrowing and returning take no lock; each class keeps a
//! bounded number of buffers per thread and frees the rest.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};

/// Buffer sizes handed out; a request is rounded up to the next class.
const CLASSES: [usize; 4] = [4 << 10, 16 << 10, 64 << 10, 256 << 10];
/// Free buffers kept per class and thread.
const KEEP_PER_CLASS: usize = 16;

type FreeLists = [Vec<Vec<u8>>; CLASSES.len()];

thread_local! {
    /// Full-length buffers for reading into.
    static FREE_READ: RefCell<FreeLists> = const { RefCell::new([const { Vec::new() }; CLASSES.len()]) };
    /// Buffers for appending output; kept apart so neither kind pays to re-initialize.
    static FREE_APPEND: RefCell<FreeLists> = const { RefCell::new([const { Vec::new() }; CLASSES.len()]) };
}

fn class_of(size: usize) -> Option<usize> {
    CLASSES.iter().position(|&c| c >= size)
}

/// A buffer borrowed from the pool; it goes back when dropped.
pub struct PooledBuf {
    vec: Vec<u8>,
    append: bool,
}

impl PooledBuf {
    /// A buffer of at least `size` bytes, whose length is its full class size. Its contents
    /// are whatever its last user left (initialized, never meaningful).
    pub fn take(size: usize) -> PooledBuf {
        let vec = match class_of(size) {
            Some(c) => FREE_READ
                .with(|f| f.borrow_mut()[c].pop())
                .unwrap_or_else(|| vec![0; CLASSES[c]]),
            None => vec![0; size],
        };
        PooledBuf { vec, append: false }
    }

    /// An empty buffer (length 0) with at least `size` bytes of capacity, for appending.
    pub fn take_empty(size: usize) -> PooledBuf {
        let vec = match class_of(size) {
            Some(c) => FREE_APPEND
                .with(|f| f.borrow_mut()[c].pop())
                .unwrap_or_else(|| Vec::with_capacity(CLASSES[c])),
            None => Vec::with_capacity(size),
        };
        PooledBuf { vec, append: true }
    }

    /// Bytes that can be appended without growing (`take_empty`).
    pub fn spare(&self) -> usize {
        self.vec.capacity() - self.vec.len()
    }

    /// The underlying vector, for appending output (`take_empty`).
    pub fn vec_mut(&mut self) -> &mut Vec<u8> {
        &mut self.vec
    }
}

impl Deref for PooledBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.vec
    }
}

impl DerefMut for PooledBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.vec
    }
}

impl Drop for PooledBuf {
    fn drop(&mut self) {
        let mut vec = std::mem::take(&mut self.vec);
        let cap = vec.capacity();
        if let Some(c) = CLASSES.iter().position(|&s| s == cap) {
            let lists = if self.append {
                vec.clear();
                &FREE_APPEND
            } else {
                &FREE_READ
            };
            let _ = lists.try_with(|f| {
                let mut f = f.borrow_mut();
                if f[c].len() < KEEP_PER_CLASS {
                    f[c].push(vec);
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_round_up_and_recycle() {
        let b = PooledBuf::take(100);
        assert_eq!(b.len(), 4096);
        let p = b.as_ptr();
        drop(b);
        let b2 = PooledBuf::take(4000);
        assert_eq!(b2.as_ptr(), p, "the freed buffer is reused");
        let big = PooledBuf::take(1 << 20);
        assert_eq!(big.len(), 1 << 20);
        let mut e = PooledBuf::take_empty(10);
        assert!(e.is_empty());
        e.vec_mut().extend_from_slice(b"abc");
        assert_eq!(&*e, b"abc");
    }
}
