//! `Conn`'s public API: what handlers, tasks and other threads do with a connection
//! (send, close, hold and resume reads, contexts, addresses); the round in `mod.rs` acts
//! on it.

use super::*;

impl Conn {
    /// Sends `data`; sends leave in the order they were made. Inside this connection's
    /// round (its callbacks but `on_drained`, which runs after the round's write) it joins
    /// the round's single write. Elsewhere (a task, another thread, another connection's
    /// callback, `on_drained`), if nothing is queued on a plain stream (no TLS or other
    /// layer; opened, not closing or half closed), it is written now, before `send`
    /// returns, as far as the socket takes it; anything else (the rest, a layered or UDP
    /// connection, output already queued) is queued and written by the connection's next
    /// round. Either way the watermarks and `on_drained` are kept by the connection's
    /// rounds, so [`Conn::wake_when_drained`] works the same after either.
    pub fn send(&self, data: &[u8]) -> io::Result<()> {
        self.send_vectored(&[IoSlice::new(data)])
    }

    /// Sends several buffers as one (gathered into one write, as [`Conn::send`] says).
    pub fn send_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<()> {
        let udp = self.inner.kind == Kind::Udp;
        self.inner.enqueue(|io| {
            if udp {
                for b in bufs {
                    io.out.push_datagram(b);
                }
            } else {
                io.sink().push_bytes(bufs);
            }
        })
    }

    /// UDP: sends `data` as consecutive datagrams of `segment_size` bytes each (the last
    /// may be shorter), e.g. a QUIC transmit whose `segment_size` is set. They are queued
    /// like [`Conn::send`]'s, in order, and leave in the round's send batch as GSO sends
    /// (one `UDP_SEGMENT` entry of up to [`Conn::max_segments`] datagrams and 64 KiB each)
    /// where the socket can, else as separate datagrams: the peer gets the same datagrams
    /// either way. Empty `data` sends nothing.
    ///
    /// Errors: `InvalidInput` if `segment_size` is 0 or larger than a UDP datagram can be
    /// (65,507 bytes); `Unsupported` on a stream connection; `NotConnected` once closed.
    pub fn send_segments(&self, data: &[u8], segment_size: usize) -> io::Result<()> {
        if self.inner.kind != Kind::Udp {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "send_segments on a stream connection",
            ));
        }
        crate::engine::sys::udp::check_segment_size(segment_size)?;
        if data.is_empty() {
            return Ok(());
        }
        self.inner
            .enqueue(|io| io.out.push_segments(data, segment_size))
    }

    /// How many datagrams one send of [`Conn::send_segments`] carries in a single GSO send
    /// (a QUIC driver's `max_datagrams` for `poll_transmit`): 64 on a UDP peer whose socket
    /// has segmentation offload (Linux, [`Config::udp_gso`](crate::Config::udp_gso)), 1
    /// without it (then each segment is its own datagram in the batch) and on stream
    /// connections. It drops to 1 for good if the kernel refuses a GSO send.
    pub fn max_segments(&self) -> usize {
        self.inner
            .udp
            .as_ref()
            .map_or(1, |link| link.max_segments())
    }

    /// Sends `len` bytes of `file` starting at `offset`, with sendfile(2) where available.
    pub fn send_file(&self, file: &File, offset: u64, len: u64) -> io::Result<()> {
        if self.inner.kind == Kind::Udp {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "send_file on a UDP peer",
            ));
        }
        let file = file.try_clone()?;
        self.inner
            .enqueue(|io| io.sink().push_file(file, offset, len))
    }

    /// Closes the connection once its queued output is written.
    pub fn close(&self) {
        self.inner.set(F_CLOSING);
        self.inner.notify(EV_CLOSE);
    }

    /// Half close: no more output after what is queued (the peer sees EOF once it is
    /// written); reads go on. Sends after this fail with `BrokenPipe`.
    pub fn shutdown_write(&self) {
        self.inner.set(F_WR_SHUT | F_SHUT_WR);
        self.inner.notify(EV_FLUSH);
    }

    /// Stops reading from this connection (flow control) until [`Conn::resume_reads`].
    pub fn hold_reads(&self) {
        self.inner.set(F_HELD);
    }

    /// Resumes reading after [`Conn::hold_reads`].
    pub fn resume_reads(&self) {
        self.inner.clear(F_HELD);
        self.inner.notify(EV_RESUME);
    }

    /// True while reads are paused for any reason: held by [`Conn::hold_reads`], or
    /// backpressure (the output queue past its watermark or the engine's budget).
    pub fn reads_paused(&self) -> bool {
        self.inner.flag(F_HELD | F_PAUSED)
    }

    /// True if reads are held by [`Conn::hold_reads`].
    pub fn reads_held(&self) -> bool {
        self.inner.flag(F_HELD)
    }

    /// Bytes of output queued and not yet written.
    pub fn queued_bytes(&self) -> usize {
        self.inner.io.lock().unwrap().queued()
    }

    /// Asks for `on_drained` once the output queue is at or below the low watermark (even
    /// if it never reached the high one): for producers that pause on their own bound.
    pub fn wake_when_drained(&self) {
        self.inner.set(F_OVER_HIGH);
        self.inner.notify(EV_FLUSH);
    }

    /// Hands the socket to another owner: reads stop now, and once everything queued has
    /// been written (so no byte of ours follows the new owner's), `handoff` gets the
    /// socket (a duplicate descriptor) and this connection closes; its handler's
    /// `on_close` runs as usual. Bytes not yet read stay in the socket for the new owner.
    /// If the connection fails first, `handoff` is dropped uncalled.
    #[cfg(feature = "hyper")]
    pub(crate) fn detach(&self, handoff: Box<Handoff>) {
        self.hold_reads();
        // A lingering close would shut the socket down under its new owner.
        self.inner.set(F_DETACHED);
        self.inner.io.lock().unwrap().after_output = Some(Box::new(AfterOutput::Handoff(handoff)));
        self.close();
    }

    /// True if both handles refer to the same connection.
    pub fn same(&self, other: &Conn) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// True if the peer has sent bytes this connection has not handled yet: unread in
    /// the socket, or a partial record its layer (TLS) keeps.
    pub(crate) fn input_waiting(&self) -> bool {
        self.inner.input_waiting()
    }

    /// True until the connection is closed.
    pub fn is_open(&self) -> bool {
        self.inner.io.lock().unwrap().open
    }

    /// The peer's address (None for Unix sockets).
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.inner.peer
    }

    /// The local address (None for Unix sockets).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.inner.local
    }

    /// The raw descriptor (the shared socket for UDP peers).
    pub fn as_raw_fd(&self) -> RawFd {
        self.inner.fd
    }

    /// Stores per-connection user data, replacing what was there.
    pub fn set_context<T: Any + Send>(&self, value: T) {
        *self.inner.context() = Some(Box::new(value));
    }

    /// Runs `f` on the per-connection user data of type `T` (None if absent or of
    /// another type).
    pub fn with_context<T: Any + Send, R>(&self, f: impl FnOnce(Option<&mut T>) -> R) -> R {
        let mut ctx = self.inner.context();
        f(ctx.as_mut().and_then(|b| b.downcast_mut::<T>()))
    }

    /// Removes and returns the user data if it is a `T`.
    pub fn take_context<T: Any + Send>(&self) -> Option<T> {
        let mut ctx = self.inner.context();
        match ctx.take()?.downcast::<T>() {
            Ok(b) => Some(*b),
            Err(other) => {
                *ctx = Some(other);
                None
            }
        }
    }

    /// Replaces the connection's handler; the next callback goes to the new one (also
    /// within the round that called this: the rest of its reads, its EOF).
    pub fn set_handler(&self, handler: impl Handler) {
        self.set_shared_handler(Arc::new(handler));
    }

    /// [`set_handler`](Self::set_handler) with a handler already in an `Arc`: one
    /// stateless handler shared by many connections costs none of them an allocation.
    pub fn set_shared_handler(&self, handler: Arc<dyn Handler>) {
        *self.inner.handler.lock().unwrap() = handler;
        self.inner.set(F_NEW_HANDLER);
    }

    /// The handler the next callback goes to (the last one set).
    pub(crate) fn handler(&self) -> Arc<dyn Handler> {
        self.inner.handler.lock().unwrap().clone()
    }

    /// True once a record layer (TLS) sits between the socket and the handler.
    pub(crate) fn has_layer(&self) -> bool {
        self.inner.flag(F_LAYER)
    }

    /// A waker that schedules this connection's `on_wake` (for futures a handler polls).
    pub fn waker(&self) -> Waker {
        Waker::from(self.inner.clone())
    }
}
