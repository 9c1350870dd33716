//! [`RecycledFuture`]: a boxed future whose memory is kept by the thread that drops it,
//! for the next future of the same layout made there.
//!
//! glibc serves blocks up to ~1 KiB from per-thread caches; a larger future (a gateway
//! request's, ~2.2 KiB) goes through its general bins on every request, and its free
//! costs as much again (callgrind, a proxied keep-alive GET: 880 instructions fewer with
//! the block kept, 32,068 -> 31,188). A thread has as many such futures alive as
//! requests waiting on their upstreams, so it keeps up to [`KEEP`] freed blocks.

use std::alloc::{self, Layout};
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll};

/// Freed blocks kept per thread: at ~2.2 KiB each, at most ~140 KiB a thread, and only as
/// many as were once alive together.
const KEEP: usize = 64;

/// Blocks freed on this thread, with their layouts (the newest last).
struct Spare(Vec<(Layout, NonNull<u8>)>);

impl Drop for Spare {
    fn drop(&mut self) {
        for (layout, block) in self.0.drain(..) {
            // SAFETY: every kept block came from `alloc::alloc` with this layout, and
            // nothing points into it any more (its future was dropped before it was kept).
            unsafe { alloc::dealloc(block.as_ptr(), layout) }
        }
    }
}

thread_local! {
    static SPARE: RefCell<Spare> = const { RefCell::new(Spare(Vec::new())) };
}

/// A future in a block of its own, like `Pin<Box<dyn Future + Send>>`, whose block goes
/// to the dropping thread's spares instead of back to the allocator.
pub(crate) struct RecycledFuture<T> {
    /// Written in `new`, dropped in `drop`, never moved in between (so pinned).
    future: NonNull<dyn Future<Output = T> + Send>,
}

// SAFETY: the future it owns is `Send` (`new` requires it), and its block is memory of the
// global allocator, which any thread may free or keep.
unsafe impl<T> Send for RecycledFuture<T> {}

impl<T> RecycledFuture<T> {
    pub(crate) fn new<F>(future: F) -> RecycledFuture<T>
    where
        F: Future<Output = T> + Send + 'static,
    {
        let layout = Layout::new::<F>();
        let block: NonNull<F> = if layout.size() == 0 {
            NonNull::dangling()
        } else {
            take_block(layout)
                .unwrap_or_else(|| {
                    // SAFETY: the layout's size is not zero.
                    let p = unsafe { alloc::alloc(layout) };
                    NonNull::new(p).unwrap_or_else(|| alloc::handle_alloc_error(layout))
                })
                .cast()
        };
        // SAFETY: the block is valid for writes of `F` and aligned for it (a kept block
        // has exactly `F`'s layout; a zero-sized `F` needs only the dangling, aligned
        // pointer), and it holds nothing to drop.
        unsafe { block.as_ptr().write(future) };
        RecycledFuture { future: block }
    }
}

impl<T> Future for RecycledFuture<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        // SAFETY: the future stays where `new` wrote it until `drop`: it is pinned there
        // whatever happens to this handle (which is only a pointer, and `Unpin`), and
        // `&mut self` makes this the one reference to it.
        let future = unsafe { Pin::new_unchecked(&mut *self.get_mut().future.as_ptr()) };
        future.poll(cx)
    }
}

impl<T> Drop for RecycledFuture<T> {
    fn drop(&mut self) {
        let future = self.future.as_ptr();
        // SAFETY: the future was written by `new` and is dropped only here, once; its
        // layout is read before it is dropped.
        let layout = unsafe { Layout::for_value(&*future) };
        // SAFETY: as above; nothing uses the future after this.
        unsafe { std::ptr::drop_in_place(future) };
        if layout.size() > 0 {
            give_block(layout, self.future.cast());
        }
    }
}

/// A kept block of exactly `layout`, if this thread has one.
fn take_block(layout: Layout) -> Option<NonNull<u8>> {
    SPARE
        .try_with(|s| {
            let mut s = s.try_borrow_mut().ok()?;
            let i = s.0.iter().rposition(|(l, _)| *l == layout)?;
            Some(s.0.swap_remove(i).1)
        })
        .ok()
        .flatten()
}

/// Keeps `block` (of `layout`, its future dropped) on this thread, the oldest kept block
/// freed if there are [`KEEP`] already; freed at once during the thread's teardown.
fn give_block(layout: Layout, block: NonNull<u8>) {
    let kept = SPARE.try_with(|s| {
        let Ok(mut s) = s.try_borrow_mut() else {
            return false;
        };
        if s.0.len() == KEEP {
            let (old_layout, old) = s.0.remove(0);
            // SAFETY: a kept block, from `alloc::alloc` with its layout, unused.
            unsafe { alloc::dealloc(old.as_ptr(), old_layout) };
        }
        s.0.push((layout, block));
        true
    });
    if kept != Ok(true) {
        // SAFETY: the block came from `alloc::alloc` with `layout` (not zero-sized: the
        // caller checked), and its future was dropped.
        unsafe { alloc::dealloc(block.as_ptr(), layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::{RecycledFuture, KEEP, SPARE};
    use std::future::Future;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};

    /// A future that answers its number on the second poll and counts its drops.
    struct Counted {
        n: usize,
        polled: bool,
        room: [u8; 2048],
        drops: Arc<AtomicUsize>,
    }

    impl Future for Counted {
        type Output = usize;
        fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
            if !self.polled {
                self.polled = true;
                let i = self.n % 2048;
                self.room[i] = 1;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Poll::Ready(self.n + usize::from(self.room[self.n % 2048]))
        }
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn counted(n: usize, drops: &Arc<AtomicUsize>) -> RecycledFuture<usize> {
        RecycledFuture::new(Counted {
            n,
            polled: false,
            room: [0; 2048],
            drops: drops.clone(),
        })
    }

    fn run(mut f: RecycledFuture<usize>) -> usize {
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            if let Poll::Ready(v) = std::pin::Pin::new(&mut f).poll(&mut cx) {
                return v;
            }
        }
    }

    fn kept() -> usize {
        SPARE.with(|s| s.borrow().0.len())
    }

    #[test]
    fn futures_run_drop_once_and_their_blocks_are_reused() {
        let drops = Arc::new(AtomicUsize::new(0));
        let before = kept();
        let f = counted(7, &drops);
        let block = f.future.cast::<u8>();
        assert_eq!(run(f), 8);
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        assert_eq!(kept(), before + 1);
        // The next future of that layout takes the block; another layout does not.
        let small = RecycledFuture::new(async { 3usize });
        let g = counted(1, &drops);
        assert_eq!(g.future.cast::<u8>(), block);
        assert_eq!(run(small) + run(g), 3 + 2);
        // Dropped unpolled, and dropped on another thread: each once, nothing lost.
        drop(counted(2, &drops));
        let h = counted(3, &drops);
        std::thread::spawn(move || drop(h)).join().unwrap();
        assert_eq!(drops.load(Ordering::Relaxed), 4);
        // A zero-sized future needs no block.
        let mut unit = RecycledFuture::new(Now);
        let mut cx = Context::from_waker(Waker::noop());
        assert!(std::pin::Pin::new(&mut unit).poll(&mut cx).is_ready());
    }

    /// A zero-sized future, ready at once.
    struct Now;

    impl Future for Now {
        type Output = ();
        fn poll(self: std::pin::Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
            Poll::Ready(())
        }
    }

    #[test]
    fn a_thread_keeps_a_bounded_number_of_blocks() {
        let drops = Arc::new(AtomicUsize::new(0));
        let many: Vec<_> = (0..KEEP + 10).map(|n| counted(n, &drops)).collect();
        drop(many);
        assert_eq!(drops.load(Ordering::Relaxed), KEEP + 10);
        assert!(kept() <= KEEP);
    }
}
