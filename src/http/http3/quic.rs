//! `h3::quic`'s traits over quinn-proto's streams: every call locks the connection's
//! state, asks the machine, registers a waker in [`Wakers`](super::wakers::Wakers) when
//! the machine has nothing yet, and wakes the connection's driver when it changed
//! something that needs sending.

use super::driver::{ConnShared, ConnState, Protocols, QuicConn};
use crate::proto::h3::{swap_marker, take_protocol, First};
use bytes::{Buf, Bytes};
use h3::quic::{self, ConnectionErrorIncoming, StreamErrorIncoming, WriteBuf};
use quinn_proto::{
    ConnectionError, Dir, FinishError, ReadError, ReadableError, StreamId, VarInt, WriteError,
};
use std::sync::{Arc, MutexGuard};
use std::task::{Context, Poll};

/// H3_NO_ERROR: how a dropped, unfinished receiving side is stopped.
const H3_NO_ERROR: u32 = 0x100;

fn conn_error(e: &ConnectionError) -> ConnectionErrorIncoming {
    match e {
        ConnectionError::ApplicationClosed(close) => ConnectionErrorIncoming::ApplicationClose {
            error_code: close.error_code.into_inner(),
        },
        ConnectionError::TimedOut => ConnectionErrorIncoming::Timeout,
        other => ConnectionErrorIncoming::Undefined(Arc::new(other.clone())),
    }
}

fn stream_conn_error(e: &ConnectionError) -> StreamErrorIncoming {
    StreamErrorIncoming::ConnectionErrorIncoming {
        connection_error: conn_error(e),
    }
}

fn h3_id(id: StreamId) -> quic::StreamId {
    quic::StreamId::try_from(u64::from(id)).expect("a QUIC stream id is a varint")
}

fn varint(code: u64) -> VarInt {
    VarInt::from_u64(code).unwrap_or(VarInt::MAX)
}

impl ConnShared {
    fn lock(&self) -> MutexGuard<'_, ConnState> {
        self.state.lock().unwrap()
    }
}

impl QuicConn {
    fn poll_accept(
        &self,
        dir: Dir,
        cx: &mut Context<'_>,
    ) -> Poll<Result<StreamId, ConnectionErrorIncoming>> {
        let mut st = self.0.lock();
        if let Some(id) = st.conn.streams().accept(dir) {
            // Accepting may raise the peer's stream limit (MAX_STREAMS).
            st.kick_to_send();
            return Poll::Ready(Ok(id));
        }
        if let Some(e) = &st.error {
            return Poll::Ready(Err(conn_error(e)));
        }
        st.wakers.wait_accept(dir, cx.waker());
        Poll::Pending
    }

    fn poll_open(
        &self,
        dir: Dir,
        cx: &mut Context<'_>,
    ) -> Poll<Result<StreamId, StreamErrorIncoming>> {
        let mut st = self.0.lock();
        if let Some(e) = &st.error {
            return Poll::Ready(Err(stream_conn_error(e)));
        }
        if let Some(id) = st.conn.streams().open(dir) {
            return Poll::Ready(Ok(id));
        }
        st.wakers.wait_open(dir, cx.waker());
        Poll::Pending
    }
}

impl QuicConn {
    /// From now on, h3's request streams carry RFC 9220's `:protocol`, which h3 cannot:
    /// a server's (accepted) streams have it taken out of their first frame (up to `max`
    /// bytes) for [`QuicConn::take_protocol`]; a client's (opened) streams have their
    /// first frame's `proto::h3::PROTOCOL_MARKER` field made `:protocol`.
    pub(crate) fn carry_protocols(&self, max: usize) {
        let mut st = self.0.lock();
        if st.protocols.is_none() {
            st.protocols = Some(Box::new(Protocols {
                max,
                taken: Vec::new(),
            }));
        }
    }

    /// The `:protocol` taken out of request stream `id`'s first frame, if any.
    pub(crate) fn take_protocol(&self, id: u64) -> Option<Vec<u8>> {
        let mut st = self.0.lock();
        let taken = &mut st.protocols.as_mut()?.taken;
        let at = taken.iter().position(|(s, _)| u64::from(*s) == id)?;
        Some(taken.swap_remove(at).1)
    }
}

impl<B: Buf> quic::Connection<B> for QuicConn {
    type RecvStream = RecvStream;
    type OpenStreams = QuicConn;

    fn poll_accept_recv(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<RecvStream, ConnectionErrorIncoming>> {
        self.poll_accept(Dir::Uni, cx)
            .map_ok(|id| RecvStream::new(&self.0, id))
    }

    fn poll_accept_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<BidiStream<B>, ConnectionErrorIncoming>> {
        self.poll_accept(Dir::Bi, cx).map_ok(|id| {
            let mut stream = BidiStream::new(&self.0, id);
            if let Some(p) = &self.0.lock().protocols {
                stream.recv.first = Some(Box::new(FirstFrame {
                    buf: Vec::new(),
                    max: p.max,
                }));
            }
            stream
        })
    }

    fn opener(&self) -> QuicConn {
        self.clone()
    }
}

impl<B: Buf> quic::OpenStreams<B> for QuicConn {
    type BidiStream = BidiStream<B>;
    type SendStream = SendStream<B>;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<BidiStream<B>, StreamErrorIncoming>> {
        self.poll_open(Dir::Bi, cx).map_ok(|id| {
            let mut stream = BidiStream::new(&self.0, id);
            stream.send.first = self.0.lock().protocols.is_some();
            stream
        })
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<SendStream<B>, StreamErrorIncoming>> {
        self.poll_open(Dir::Uni, cx)
            .map_ok(|id| SendStream::new(&self.0, id))
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        let mut st = self.0.lock();
        st.conn.close(
            std::time::Instant::now(),
            varint(code.value()),
            Bytes::copy_from_slice(reason),
        );
        st.kick_to_send();
    }
}

/// Writes `buf` into stream `id` as far as its flow control allows.
fn write_buf(
    conn: &ConnShared,
    id: StreamId,
    buf: &mut impl Buf,
    cx: &mut Context<'_>,
) -> Poll<Result<(), StreamErrorIncoming>> {
    let mut st = conn.lock();
    if let Some(e) = &st.error {
        return Poll::Ready(Err(stream_conn_error(e)));
    }
    while buf.has_remaining() {
        match st.conn.send_stream(id).write(buf.chunk()) {
            Ok(n) if n > 0 => {
                buf.advance(n);
                st.kick_to_send();
            }
            Ok(_) | Err(WriteError::Blocked) => {
                st.wakers.wait_write(id, cx.waker());
                return Poll::Pending;
            }
            Err(WriteError::Stopped(code)) => {
                return Poll::Ready(Err(StreamErrorIncoming::StreamTerminated {
                    error_code: code.into_inner(),
                }))
            }
            Err(WriteError::ClosedStream) => {
                return Poll::Ready(Err(StreamErrorIncoming::Unknown(
                    "write on a closed stream".into(),
                )))
            }
        }
    }
    Poll::Ready(Ok(()))
}

/// The sending side of a stream; holds the one frame h3 hands over at a time.
pub(crate) struct SendStream<B: Buf> {
    conn: Arc<ConnShared>,
    id: StreamId,
    pending: Option<WriteBuf<B>>,
    /// A first frame rewritten ([`swap_marker`]), written in place of `pending`.
    head: Option<Bytes>,
    /// A client's request stream whose first frame may carry a `:protocol` marker.
    first: bool,
    /// Finished or reset: nothing more to send (and no reset when dropped).
    done: bool,
}

impl<B: Buf> SendStream<B> {
    fn new(conn: &Arc<ConnShared>, id: StreamId) -> SendStream<B> {
        SendStream {
            conn: conn.clone(),
            id,
            pending: None,
            head: None,
            first: false,
            done: false,
        }
    }
}

impl<B: Buf> quic::SendStream<B> for SendStream<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        if let Some(head) = self.head.as_mut() {
            std::task::ready!(write_buf(&self.conn, self.id, head, cx))?;
            self.head = None;
        }
        let Some(buf) = self.pending.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        std::task::ready!(write_buf(&self.conn, self.id, buf, cx))?;
        self.pending = None;
        Poll::Ready(Ok(()))
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        if self.pending.is_some() || self.head.is_some() {
            return Err(StreamErrorIncoming::Unknown(
                "send_data before the last frame was written".into(),
            ));
        }
        let mut data = data.into();
        if std::mem::take(&mut self.first) {
            let frame = data.copy_to_bytes(data.remaining());
            self.head = Some(swap_marker(&frame).map_or(frame, Bytes::from));
            return Ok(());
        }
        self.pending = Some(data);
        Ok(())
    }

    /// Done once the peer acknowledged every byte: the request's task (and a graceful
    /// shutdown, which waits for those) lasts until the response has really arrived.
    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        if self.pending.is_some() || self.head.is_some() {
            std::task::ready!(self.poll_ready(cx))?;
        }
        let mut st = self.conn.lock();
        if !self.done {
            self.done = true;
            let res = st.conn.send_stream(self.id).finish();
            st.kick_to_send();
            match res {
                Ok(()) => {}
                Err(FinishError::Stopped(code)) => {
                    return Poll::Ready(Err(StreamErrorIncoming::StreamTerminated {
                        error_code: code.into_inner(),
                    }))
                }
                Err(FinishError::ClosedStream) => {
                    return Poll::Ready(Err(match &st.error {
                        Some(e) => stream_conn_error(e),
                        None => StreamErrorIncoming::Unknown("finish on a closed stream".into()),
                    }))
                }
            }
        }
        if let Some(e) = &st.error {
            return Poll::Ready(Err(stream_conn_error(e)));
        }
        if st.wakers.finish_acked(self.id, cx.waker()) {
            return Poll::Ready(Ok(()));
        }
        // Stopped by the peer after the finish: it wants no more, which is done too.
        match st.conn.send_stream(self.id).stopped() {
            Ok(Some(_)) | Err(_) => {
                st.wakers.forget_write(self.id);
                Poll::Ready(Ok(()))
            }
            Ok(None) => Poll::Pending,
        }
    }

    fn reset(&mut self, reset_code: u64) {
        let mut st = self.conn.lock();
        self.done = true;
        let _ = st.conn.send_stream(self.id).reset(varint(reset_code));
        st.kick_to_send();
    }

    fn send_id(&self) -> quic::StreamId {
        h3_id(self.id)
    }
}

impl<B: Buf> Drop for SendStream<B> {
    fn drop(&mut self) {
        let mut st = self.conn.lock();
        st.wakers.forget_write(self.id);
        if !self.done {
            // Left unfinished: the peer must not wait for more.
            let _ = st
                .conn
                .send_stream(self.id)
                .reset(VarInt::from_u32(H3_NO_ERROR));
            st.kick_to_send();
        }
    }
}

/// The receiving side of a stream.
pub(crate) struct RecvStream {
    conn: Arc<ConnShared>,
    id: StreamId,
    done: bool,
    /// A server's request stream whose first frame is still to be looked into.
    first: Option<Box<FirstFrame>>,
}

/// The start of a request stream, kept until its first frame is whole.
struct FirstFrame {
    buf: Vec<u8>,
    max: usize,
}

impl RecvStream {
    fn new(conn: &Arc<ConnShared>, id: StreamId) -> RecvStream {
        RecvStream {
            conn: conn.clone(),
            id,
            done: false,
            first: None,
        }
    }

    /// Reads until the first frame is whole, takes its `:protocol` out if it has one,
    /// and hands h3 the rest.
    fn poll_first(
        &mut self,
        mut first: Box<FirstFrame>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        loop {
            let chunk = match self.poll_chunk(cx) {
                Poll::Ready(Ok(Some(chunk))) => chunk,
                Poll::Pending => {
                    self.first = Some(first);
                    return Poll::Pending;
                }
                Poll::Ready(Ok(None)) if !first.buf.is_empty() => {
                    return Poll::Ready(Ok(Some(first.buf.into())));
                }
                end => return end,
            };
            // Most first frames come whole in one chunk and pass without a copy.
            let seen = if first.buf.is_empty() {
                &chunk[..]
            } else {
                first.buf.extend_from_slice(&chunk);
                &first.buf[..]
            };
            match take_protocol(seen, first.max) {
                First::More => {
                    if first.buf.is_empty() {
                        first.buf = chunk.to_vec();
                    }
                }
                First::Pass if first.buf.is_empty() => return Poll::Ready(Ok(Some(chunk))),
                First::Pass => return Poll::Ready(Ok(Some(first.buf.into()))),
                First::Taken {
                    mut frame,
                    protocol,
                    consumed,
                } => {
                    frame.extend_from_slice(&seen[consumed..]);
                    let mut st = self.conn.lock();
                    if let Some(p) = st.protocols.as_mut() {
                        p.taken.push((self.id, protocol));
                    }
                    return Poll::Ready(Ok(Some(frame.into())));
                }
            }
        }
    }

    fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        let mut st = self.conn.lock();
        if let Some(e) = &st.error {
            return Poll::Ready(Err(stream_conn_error(e)));
        }
        let mut stream = st.conn.recv_stream(self.id);
        let mut chunks = match stream.read(true) {
            Ok(chunks) => chunks,
            Err(ReadableError::ClosedStream) => {
                self.done = true;
                return Poll::Ready(Ok(None));
            }
            Err(ReadableError::IllegalOrderedRead) => {
                return Poll::Ready(Err(StreamErrorIncoming::Unknown(
                    "ordered read after an unordered one".into(),
                )))
            }
        };
        let res = match chunks.next(usize::MAX) {
            Ok(Some(chunk)) => Poll::Ready(Ok(Some(chunk.bytes))),
            Ok(None) => Poll::Ready(Ok(None)),
            Err(ReadError::Blocked) => Poll::Pending,
            Err(ReadError::Reset(code)) => {
                Poll::Ready(Err(StreamErrorIncoming::StreamTerminated {
                    error_code: code.into_inner(),
                }))
            }
        };
        // Reading may reopen the peer's flow-control window.
        if chunks.finalize().should_transmit() {
            st.kick_to_send();
        }
        match &res {
            Poll::Pending => st.wakers.wait_read(self.id, cx.waker()),
            Poll::Ready(Ok(Some(_))) => {}
            Poll::Ready(_) => self.done = true,
        }
        res
    }
}

impl quic::RecvStream for RecvStream {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        match self.first.take() {
            Some(first) => self.poll_first(first, cx),
            None => self.poll_chunk(cx),
        }
    }

    fn stop_sending(&mut self, error_code: u64) {
        let mut st = self.conn.lock();
        self.done = true;
        let _ = st.conn.recv_stream(self.id).stop(varint(error_code));
        st.kick_to_send();
    }

    fn recv_id(&self) -> quic::StreamId {
        h3_id(self.id)
    }
}

impl Drop for RecvStream {
    fn drop(&mut self) {
        let mut st = self.conn.lock();
        st.wakers.forget_read(self.id);
        if !self.done {
            // Unread data would otherwise keep arriving up to the stream's window.
            let _ = st
                .conn
                .recv_stream(self.id)
                .stop(VarInt::from_u32(H3_NO_ERROR));
            st.kick_to_send();
        }
    }
}

/// Both sides of a request stream.
pub(crate) struct BidiStream<B: Buf> {
    send: SendStream<B>,
    recv: RecvStream,
}

impl<B: Buf> BidiStream<B> {
    fn new(conn: &Arc<ConnShared>, id: StreamId) -> BidiStream<B> {
        BidiStream {
            send: SendStream::new(conn, id),
            recv: RecvStream::new(conn, id),
        }
    }
}

impl<B: Buf> quic::SendStream<B> for BidiStream<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_ready(cx)
    }
    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        self.send.send_data(data)
    }
    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_finish(cx)
    }
    fn reset(&mut self, reset_code: u64) {
        self.send.reset(reset_code)
    }
    fn send_id(&self) -> quic::StreamId {
        self.send.send_id()
    }
}

impl<B: Buf> quic::RecvStream for BidiStream<B> {
    type Buf = Bytes;
    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        self.recv.poll_data(cx)
    }
    fn stop_sending(&mut self, error_code: u64) {
        self.recv.stop_sending(error_code)
    }
    fn recv_id(&self) -> quic::StreamId {
        self.recv.recv_id()
    }
}

impl<B: Buf> quic::BidiStream<B> for BidiStream<B> {
    type SendStream = SendStream<B>;
    type RecvStream = RecvStream;
    fn split(self) -> (SendStream<B>, RecvStream) {
        (self.send, self.recv)
    }
}
