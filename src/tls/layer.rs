//! The TLS machine (`crate::proto::tls::Session`) as the engine's record layer: its events
//! become the connection's, and what the handshake negotiated becomes a [`TlsInfo`].

use super::TlsInfo;
use crate::engine::conn::{Delivered, Layer, Received};
use crate::proto::tls::{self, Event, Role, Session};
use std::io;
use std::time::Instant;

impl<R: Role> Layer for Session<R> {
    fn receive(
        &mut self,
        input: &mut [u8],
        wire: &mut Vec<u8>,
        deliver: &mut dyn FnMut(Delivered<'_>) -> bool,
    ) -> io::Result<Received> {
        let done = Session::receive(self, input, wire, &mut |event| match event {
            Event::Opened(state) => deliver(Delivered::Opened(TlsInfo::of(state))),
            Event::Data(plain) => deliver(Delivered::Data(plain)),
        })?;
        Ok(Received {
            consumed: done.consumed,
            peer_closed: done.peer_closed,
        })
    }

    fn sealed_len(&self, plain: usize) -> usize {
        tls::sealed_len(plain)
    }

    fn seal(&mut self, pending: &mut [u8], plain: &[u8], wire: &mut Vec<u8>) -> io::Result<()> {
        Session::seal(self, pending, plain, wire)
    }

    fn close(&mut self, pending: &mut [u8], wire: &mut Vec<u8>) {
        Session::close(self, pending, wire)
    }

    fn is_open(&self) -> bool {
        Session::is_open(self)
    }

    fn deadline(&self) -> Option<Instant> {
        Session::deadline(self)
    }

    fn max_record(&self) -> usize {
        tls::MAX_RECORD
    }
}
