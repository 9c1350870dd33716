//! A record layer between the socket and the handler (TLS is the one there is).
//!
//! The connection reads ciphertext into the round's borrowed buffer and hands it to the
//! layer, which decrypts it and delivers the plaintext to the handler; only a partial
//! record is kept between rounds. What the handler sends is staged as plaintext and sealed
//! into records when the round flushes, so a round's responses leave in as few records as
//! fit (16 KiB each) and in the round's one write, instead of a record per send.
//!
//! The layer itself is a sans-IO machine (`crate::proto::tls::Session`, made a `Layer` by
//! `crate::tls`); this module is its driver on the connection: buffers, the handshake deadline, sealing ahead of the socket.

use super::live::Admission;
use super::output::Output;
use super::{
    Conn, ConnInner, Handler, Io, ReadEnd, F_CLOSING, F_EOF, F_LAYER, F_LAYER_REPLAY,
    F_NEW_HANDLER, F_READ_PENDING,
};
use crate::engine::buf::PooledBuf;
use crate::engine::time::Sleep;
use std::any::Any;
use std::future::Future;
use std::io;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::Instant;

/// Plaintext sealed at most this far ahead of the socket, so a large queued body (or a
/// file) is encrypted as the peer takes it rather than all at once.
const SEAL_AHEAD: usize = 64 * 1024;
/// Plaintext handed to one `seal` call (the layer splits it into records).
const SEAL_PIECE: usize = 64 * 1024;

/// What a layer's `receive` hands the connection, in order.
pub(crate) enum Delivered<'a> {
    /// The handshake finished: the handler's `on_open` is due. With it, what the layer
    /// tells handlers about the connection (`crate::tls::TlsInfo`).
    Opened(Info),
    /// Decrypted application data.
    Data(&'a [u8]),
}

/// What a layer tells handlers about its connection: shared data (one allocation, kept by
/// the connection as it is: an idle connection holds no box around it), handed out as a
/// handler-facing type `T: Shared` (`TlsInfo` wraps the `Arc`).
pub(crate) struct Info(Arc<dyn Any + Send + Sync>);

/// A handler-facing type made from a layer's shared `Info`.
pub(crate) trait Shared: Sized {
    type Inner: Any + Send + Sync;
    fn from_shared(inner: Arc<Self::Inner>) -> Self;
}

impl Info {
    pub(crate) fn new<T: Any + Send + Sync>(shared: Arc<T>) -> Info {
        Info(shared)
    }

    fn get<T: Shared>(&self) -> Option<T> {
        self.0
            .clone()
            .downcast::<T::Inner>()
            .ok()
            .map(T::from_shared)
    }
}

/// The outcome of one `receive`.
#[derive(Debug)]
pub(crate) struct Received {
    /// Bytes of the input used up; the rest (a partial record) is offered again, with more.
    pub consumed: usize,
    /// The peer ended its side cleanly (TLS `close_notify`): an EOF for the handler.
    pub peer_closed: bool,
}

/// A sans-IO record layer (see the module docs).
pub(crate) trait Layer: Send + 'static {
    /// Processes the bytes read (in place). `wire` takes what must be sent back
    /// (handshake messages, alerts, an answer to plain HTTP); `deliver` returns false once
    /// the connection is gone (the rest is decrypted and dropped). An error means the
    /// connection must close after `wire` is written.
    fn receive(
        &mut self,
        input: &mut [u8],
        wire: &mut Vec<u8>,
        deliver: &mut dyn FnMut(Delivered<'_>) -> bool,
    ) -> io::Result<Received>;
    /// At most how many bytes `seal` makes of `plain` bytes.
    fn sealed_len(&self, plain: usize) -> usize;
    /// Seals `plain` into records appended to `wire`. `pending` is the input kept from
    /// the last `receive` (it must be offered again, unchanged).
    fn seal(&mut self, pending: &mut [u8], plain: &[u8], wire: &mut Vec<u8>) -> io::Result<()>;
    /// Appends the end of our side (TLS `close_notify`), once; nothing if it cannot be sent.
    fn close(&mut self, pending: &mut [u8], wire: &mut Vec<u8>);
    /// True once the handshake is done.
    fn is_open(&self) -> bool;
    /// When the handshake must have finished (None once it has, or without a timeout).
    fn deadline(&self) -> Option<Instant>;
    /// The largest record the peer may send, with its header: a kept partial record plus
    /// a whole one must fit the read buffer.
    fn max_record(&self) -> usize;
}

/// A connection's layer and what it stages (lives in `Io`).
pub(super) struct LayerIo {
    /// Taken out while the layer delivers plaintext (the handler's sends then lock `Io`).
    layer: Option<Box<dyn Layer>>,
    /// Plaintext (and file ranges) sent since the last flush, not yet sealed.
    plain: Output,
    /// A partial record carried to the next round (empty, unallocated, when none).
    kept: Box<[u8]>,
    /// The handshake deadline's timer (dropped once the handshake is done; boxed, so an
    /// open connection does not keep its room).
    timer: Option<Box<Sleep>>,
    /// No more records: the layer failed (an alert went out) or sent its close.
    done: bool,
    /// What the layer said about the connection when it opened.
    info: Option<Info>,
}

impl LayerIo {
    pub(super) fn new(layer: Box<dyn Layer>) -> LayerIo {
        LayerIo {
            layer: Some(layer),
            plain: Output::default(),
            kept: Box::default(),
            timer: None,
            done: false,
            info: None,
        }
    }

    /// Where the handler's sends go: plaintext, sealed at flush.
    pub(super) fn plain(&mut self) -> &mut Output {
        &mut self.plain
    }

    pub(super) fn queued(&self) -> usize {
        self.plain.queued()
    }

    /// Seals staged plaintext ahead of the socket and writes, until everything is out or
    /// the socket is full. `closing`: our side ends after it (a `close_notify` follows).
    pub(super) fn flush(&mut self, out: &mut Output, fd: RawFd, closing: bool) -> io::Result<()> {
        let LayerIo {
            layer,
            plain,
            kept,
            done,
            ..
        } = self;
        loop {
            match layer.as_mut() {
                Some(layer) if !*done => {
                    let mut scratch = Vec::new();
                    while out.queued() < SEAL_AHEAD && plain.queued() > 0 {
                        plain.take_front(SEAL_PIECE, &mut scratch, |piece| {
                            let reserve = layer.sealed_len(piece.len());
                            out.append_with(reserve, |wire| layer.seal(kept, piece, wire))
                        })?;
                    }
                    if closing && plain.queued() == 0 {
                        out.append_with(64, |wire| layer.close(kept, wire));
                        *done = true;
                    }
                }
                // Nothing more can be sealed: what is staged can never be sent.
                _ => plain.clear(),
            }
            out.write_to(fd)?;
            if plain.queued() == 0 {
                // An idle connection keeps no staging memory (the queue's capacity).
                plain.clear();
                return Ok(());
            }
            if out.queued() > 0 {
                return Ok(());
            }
        }
    }
}

impl ConnInner {
    /// Puts `layer` between the socket and the handler; `next` becomes the handler, and
    /// its `on_open` runs once the layer's handshake is done.
    pub(crate) fn start_layer(self: &Arc<Self>, layer: Box<dyn Layer>, next: Arc<dyn Handler>) {
        let deadline = layer.deadline();
        let mut lio = LayerIo::new(layer);
        if let Some(at) = deadline {
            let mut timer = crate::engine::time::sleep_until(at);
            let waker = self.waker();
            // Registers the timer; a due one is seen by `handshake_expired`.
            let _ = Pin::new(&mut timer).poll(&mut Context::from_waker(&waker));
            lio.timer = Some(Box::new(timer));
        }
        self.io.lock().unwrap().layer = Some(Box::new(lio));
        // A drain that counts this connection watches it through its handshake.
        if let Some(admission) = self
            .context()
            .as_mut()
            .and_then(|c| c.downcast_mut::<Admission>())
        {
            admission.watch(Arc::downgrade(self));
        }
        *self.handler.lock().unwrap() = next;
        self.set(F_NEW_HANDLER | F_LAYER);
    }

    /// Gives the layer just started the bytes that were read before it (the first bytes a
    /// mux looked at): the next read round runs them through it before reading more.
    pub(crate) fn replay_into_layer(self: &Arc<Self>, parts: &[&[u8]]) {
        if let Some(lio) = self.io.lock().unwrap().layer.as_deref_mut() {
            lio.kept = parts.concat().into_boxed_slice();
        }
        self.set(F_LAYER_REPLAY | F_READ_PENDING);
        self.notify(super::EV_RESUME);
    }

    fn waker(self: &Arc<Self>) -> Waker {
        Waker::from(self.clone())
    }

    /// True if the layer's handshake ran past its deadline.
    pub(super) fn handshake_expired(&self) -> bool {
        if !self.flag(F_LAYER) {
            return false;
        }
        let mut io = self.io.lock().unwrap();
        let Some(lio) = io.layer.as_deref_mut() else {
            return false;
        };
        let Some(timer) = lio.timer.as_ref() else {
            return false;
        };
        if lio.layer.as_ref().is_some_and(|l| l.is_open()) {
            lio.timer = None;
            return false;
        }
        timer.is_elapsed()
    }

    /// Closes the connection if its layer is still in its handshake (a graceful drain:
    /// no request can be in flight on it yet).
    pub(crate) fn close_in_handshake(self: &Arc<Self>) {
        if self.layer_opening() {
            Conn {
                inner: self.clone(),
            }
            .close();
        }
    }

    /// See `Conn::input_waiting`.
    pub(super) fn input_waiting(&self) -> bool {
        let io = self.io.lock().unwrap();
        let kept = io.layer.as_deref().is_some_and(|l| !l.kept.is_empty());
        kept || io.fd.is_some() && crate::engine::sys::socket::has_input(self.fd)
    }

    /// True while a layer is still in its handshake (the handler has not been opened).
    pub(super) fn layer_opening(&self) -> bool {
        if !self.flag(F_LAYER) {
            return false;
        }
        let io = self.io.lock().unwrap();
        io.layer
            .as_deref()
            .is_some_and(|l| l.layer.as_ref().is_some_and(|l| !l.is_open()))
    }

    /// The layer's information for handlers, if it has any of type `T`.
    pub(crate) fn layer_info<T: Shared>(&self) -> Option<T> {
        let io = self.io.lock().unwrap();
        io.layer.as_deref()?.info.as_ref()?.get::<T>()
    }

    /// The read buffer for a layered round: large enough for a whole record after the
    /// partial one kept from the last round, which is copied in front (`.1` bytes).
    pub(super) fn layer_input(&self) -> Option<(PooledBuf, usize)> {
        let mut io = self.io.lock().unwrap();
        let lio = io.layer.as_deref_mut()?;
        let max = lio.layer.as_ref().map_or(0, |l| l.max_record());
        let mut buf = PooledBuf::take(self.rt.config.read_buffer_size.max(max + lio.kept.len()));
        let kept = std::mem::take(&mut lio.kept);
        buf[..kept.len()].copy_from_slice(&kept);
        Some((buf, kept.len()))
    }

    /// Keeps a partial record for the next round.
    pub(super) fn keep_layer_input(&self, partial: &[u8]) {
        if let Some(lio) = self.io.lock().unwrap().layer.as_deref_mut() {
            lio.kept = partial.into();
        }
    }

    /// Runs the layer over `buf[..*filled]` (ciphertext: the handler gets `on_open` at the
    /// end of the handshake, then `on_data` with plaintext) and moves what it left (a
    /// partial record) to the front. `Some(end)` ends the round's reads.
    pub(super) fn read_through_layer(
        &self,
        conn: &Conn,
        handler: &mut Arc<dyn Handler>,
        buf: &mut [u8],
        filled: &mut usize,
    ) -> Option<ReadEnd> {
        match self.through_layer(conn, handler, &mut buf[..*filled]) {
            Through::Gone => Some(ReadEnd::Closed),
            Through::Failed => {
                *filled = 0;
                Some(ReadEnd::Open)
            }
            Through::Used {
                consumed,
                peer_closed,
            } => {
                buf.copy_within(consumed..*filled, 0);
                *filled -= consumed;
                if peer_closed {
                    self.set(F_EOF);
                    return Some(ReadEnd::Eof);
                }
                None
            }
        }
    }

    /// One pass of the layer over the bytes read so far.
    fn through_layer(
        &self,
        conn: &Conn,
        handler: &mut Arc<dyn Handler>,
        input: &mut [u8],
    ) -> Through {
        let Some(mut layer) = self
            .io
            .lock()
            .unwrap()
            .layer
            .as_deref_mut()
            .and_then(|l| l.layer.take())
        else {
            return Through::Failed;
        };
        let mut wire = Vec::new();
        let mut alive = true;
        let res = layer.receive(input, &mut wire, &mut |d| {
            if !alive {
                return false;
            }
            self.refresh(handler);
            alive = match d {
                Delivered::Opened(info) => {
                    if let Some(lio) = self.io.lock().unwrap().layer.as_deref_mut() {
                        lio.info = Some(info);
                    }
                    self.call(conn, "on_open", || handler.on_open(conn))
                }
                Delivered::Data(plain) => {
                    self.call(conn, "on_data", || handler.on_data(conn, plain))
                }
            };
            alive
        });
        let mut io = self.io.lock().unwrap();
        if !io.open {
            return Through::Gone;
        }
        let before = io.queued();
        if !wire.is_empty() {
            io.out.push_owned(wire);
        }
        let after = io.queued();
        self.account(before, after);
        let lio = io
            .layer
            .as_deref_mut()
            .expect("a layered connection keeps its LayerIo");
        if layer.is_open() {
            lio.timer = None;
        }
        lio.layer = Some(layer);
        match res {
            Ok(r) => Through::Used {
                consumed: r.consumed,
                peer_closed: r.peer_closed,
            },
            Err(e) => {
                // The alert (or the answer to plain HTTP) goes out, then the connection closes.
                tracing::debug!(error = %e, peer = ?self.peer, "TLS failed");
                lio.done = true;
                lio.plain.clear();
                drop(io);
                self.set(F_CLOSING);
                Through::Failed
            }
        }
    }
}

enum Through {
    Used {
        consumed: usize,
        peer_closed: bool,
    },
    /// The layer failed: what it wrote is queued and the connection closes after it.
    Failed,
    /// The connection closed during a callback.
    Gone,
}

impl Io {
    /// Output not yet written: queued wire bytes plus plaintext waiting to be sealed.
    pub(super) fn queued(&self) -> usize {
        let plain = self.layer.as_deref().map_or(0, LayerIo::queued);
        self.out.queued().saturating_add(plain)
    }

    /// Where a send goes: the layer's plaintext stage, or straight to the output.
    pub(super) fn sink(&mut self) -> &mut Output {
        match self.layer.as_deref_mut() {
            Some(l) => l.plain(),
            None => &mut self.out,
        }
    }
}

#[cfg(test)]
mod tests {
    /// An open TLS connection keeps its `LayerIo` for its whole life: at most 104 bytes is
    /// glibc's 112-byte chunk (it was 121, a 144-byte chunk, with the timer inline).
    #[test]
    fn an_open_layer_keeps_a_small_stage() {
        assert!(
            std::mem::size_of::<super::LayerIo>() <= 104,
            "{}",
            std::mem::size_of::<super::LayerIo>()
        );
    }
}
