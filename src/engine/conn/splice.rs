//! Splicing: two connections joined inside the kernel (Linux, the epoll backend, plain
//! TCP on both sides), the zero-copy path of `crate::proxy::relay`.
//!
//! Each direction has a pipe. The source connection's read round moves what its socket
//! has into the pipe with `splice(2)` instead of reading it into a buffer for `on_data`,
//! and queues those bytes on the destination as a pipe chunk of its output
//! (`output::Chunk::Pipe`); the destination's flush splices them on into its own socket
//! when it is writable. So each connection still owns its descriptor and its readiness:
//! the source only ever reads its socket, the destination only ever writes its own. Bytes
//! in the pipe are the destination's queued output, so they count toward its watermarks,
//! the engine's budget, the write timeout and the relay's buffer, and they leave in order
//! after whatever was queued before.
//!
//! A pipe holds at most its capacity (asked for with `F_SETPIPE_SZ`), and the kernel may
//! fill it sooner (a slot per segment). A source that finds it full waits, reading
//! nothing, until the destination has moved bytes out (`Pipe::drained` wakes it); a
//! destination whose socket would block keeps them queued until it is writable. Either
//! way nothing is buffered in fibr's memory and nothing spins.

use super::{Conn, ConnInner, Kind, ReadEnd, EV_RESUME, F_CLOSING, F_EOF, F_LAYER};
use super::{F_READ_PENDING, F_SPLICE};
use crate::engine::sys::pipe;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

/// Hears of the bytes a spliced connection moved toward its peer (the relay's side,
/// which counts them and holds reads past its buffer, as its `on_data` does).
pub(crate) trait Spliced: Send + Sync + 'static {
    /// `n` bytes read from `conn` are queued on its peer. Runs in `conn`'s round, in
    /// order with its other callbacks.
    fn on_spliced(&self, conn: &Conn, n: usize);
}

/// One direction's pipe: filled by the source's reads, emptied by the destination's
/// flush.
pub(crate) struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    capacity: usize,
    /// Bytes in the pipe now (the source adds before it queues them, the destination
    /// takes away after it wrote them, so this never goes below what is queued).
    held: AtomicUsize,
    /// The source found the pipe full and waits for `drained`.
    waiting: AtomicBool,
    source: Weak<ConnInner>,
}

impl Pipe {
    /// A pipe asked for `size` bytes, whose writer is `source`.
    pub(super) fn new(source: Weak<ConnInner>, size: usize) -> io::Result<Pipe> {
        let (read, write) = pipe::pipe()?;
        let capacity = pipe::set_pipe_size(write.as_raw_fd(), size);
        Ok(Pipe {
            read,
            write,
            capacity,
            held: AtomicUsize::new(0),
            waiting: AtomicBool::new(false),
            source,
        })
    }

    /// Moves up to `len` bytes from the socket `fd` into the pipe; `Ok(0)` is its EOF.
    pub(super) fn splice_in(&self, fd: RawFd, len: usize) -> io::Result<usize> {
        let n = pipe::splice(fd, self.write.as_raw_fd(), len)?;
        // Counted before they are queued, so the destination never takes more than this.
        self.held.fetch_add(n, Ordering::SeqCst);
        Ok(n)
    }

    /// Writes up to `len` of the pipe's bytes (all queued on `fd`'s connection) to `fd`.
    pub(super) fn splice_out(&self, fd: RawFd, len: usize) -> io::Result<usize> {
        match pipe::splice(self.read.as_raw_fd(), fd, len)? {
            0 => Err(io::Error::other("a pipe held fewer bytes than were queued")),
            n => {
                self.drained(n);
                Ok(n)
            }
        }
    }

    /// `n` bytes left the pipe: room for the source, woken if it waits for some.
    fn drained(&self, n: usize) {
        self.held.fetch_sub(n, Ordering::SeqCst);
        if self.waiting.swap(false, Ordering::SeqCst) {
            if let Some(source) = self.source.upgrade() {
                source.notify(EV_RESUME);
            }
        }
    }

    /// The source found the pipe full with `seen` bytes in it: true if room was made since
    /// (try again), else `drained` will wake it. (Either the destination's decrement is
    /// seen here or the flag is seen there: both are SeqCst.)
    fn wait_for_room(&self, seen: usize) -> bool {
        self.waiting.store(true, Ordering::SeqCst);
        if self.held.load(Ordering::SeqCst) < seen {
            self.waiting.store(false, Ordering::SeqCst);
            return true;
        }
        false
    }
}

/// Where a spliced connection's reads go (lives in `Io` until the connection closes).
pub(super) struct Link {
    pipe: Arc<Pipe>,
    peer: Conn,
    sink: Arc<dyn Spliced>,
}

/// Joins `a` and `b` by splicing (see the module docs): from now on each one's reads
/// move into a pipe toward the other, and `sinks` (for `a`, then `b`) hear of each move.
/// False, with nothing changed, unless both are plain TCP connections (no layer) on the
/// epoll backend and the two pipes (four descriptors) could be made, each asked for
/// `pipe_size` bytes.
pub(crate) fn splice_pair(
    a: &Conn,
    b: &Conn,
    pipe_size: usize,
    sinks: [Arc<dyn Spliced>; 2],
) -> bool {
    let plain = |c: &Conn| {
        c.inner.kind == Kind::Tcp && !c.inner.flag(F_LAYER) && !c.inner.lp.poller.needs_rearm()
    };
    if !plain(a) || !plain(b) {
        return false;
    }
    let new = |source: &Conn| Pipe::new(Arc::downgrade(&source.inner), pipe_size);
    let pipes = match (new(a), new(b)) {
        (Ok(ab), Ok(ba)) => [ab, ba],
        (Err(e), _) | (_, Err(e)) => {
            tracing::debug!(error = %e, "no pipe for splicing: the relay copies");
            return false;
        }
    };
    let [sink_a, sink_b] = sinks;
    let [ab, ba] = pipes;
    for (conn, peer, pipe, sink) in [(a, b, ab, sink_a), (b, a, ba, sink_b)] {
        let mut io = conn.inner.io.lock().unwrap();
        // A closed connection dropped its link already: it must not get one (a cycle).
        if io.open {
            io.splice = Some(Arc::new(Link {
                pipe: Arc::new(pipe),
                peer: peer.clone(),
                sink,
            }));
            conn.inner.set(F_SPLICE);
        }
    }
    true
}

impl ConnInner {
    /// True once this connection's reads are spliced.
    pub(super) fn spliced(&self) -> bool {
        self.flag(F_SPLICE)
    }

    /// A spliced connection's reads: moves what the socket has into the pipe toward the
    /// peer until the socket is drained, reads must stop, or the pipe is full.
    pub(super) fn splice_round(&self, conn: &Conn) -> ReadEnd {
        let Some(link) = self.io.lock().unwrap().splice.clone() else {
            return ReadEnd::Open;
        };
        let pipe = &link.pipe;
        loop {
            if self.reads_blocked() {
                if !self.flag(F_EOF | F_CLOSING) {
                    self.set(F_READ_PENDING);
                }
                return ReadEnd::Open;
            }
            let held = pipe.held.load(Ordering::SeqCst);
            let room = pipe.capacity.saturating_sub(held);
            // Never a zero length: splice's 0 is the socket's EOF.
            let moved = if room == 0 {
                Err(io::ErrorKind::WouldBlock.into())
            } else {
                pipe.splice_in(self.fd, room)
            };
            match moved {
                Ok(0) => {
                    self.clear(F_READ_PENDING);
                    self.set(F_EOF);
                    return ReadEnd::Eof;
                }
                Ok(n) => {
                    let queued = link.peer.inner.enqueue(|io| io.out.push_pipe(pipe, n));
                    if queued.is_err() {
                        // The peer takes no more, as when a copying relay's send fails.
                        conn.close();
                        return ReadEnd::Open;
                    }
                    if !self.call(conn, "on_spliced", || link.sink.on_spliced(conn, n)) {
                        return ReadEnd::Closed;
                    }
                    if self.output_over_limit() {
                        self.set(F_READ_PENDING);
                        return ReadEnd::Open;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // The socket is drained, or the pipe is full: only the socket can say.
                    let full =
                        room == 0 || (held > 0 && pipe::unread(self.fd).is_ok_and(|n| n > 0));
                    if full && pipe.wait_for_room(held) {
                        continue;
                    }
                    self.clear(F_READ_PENDING);
                    return ReadEnd::Open;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return ReadEnd::Error(e),
            }
        }
    }
}
