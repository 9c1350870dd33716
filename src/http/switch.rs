//! Protocols a service switches to on fibr's own loops (feature `ws`).
//!
//! An upgrade request that fibr answers itself carries an [`OnSwitch`] in its extensions.
//! A service that claims it and answers `101 Switching Protocols` gets the connection once
//! the `101` is written: the new protocol's driver takes its rounds from then on, so the
//! connection stays on fibr's loops (and under its TLS, if any).

use crate::engine::conn::Conn;
use std::sync::{Arc, Mutex};

/// What takes the connection after the `101`.
pub(crate) type SwitchFn = Box<dyn FnOnce(Switched) + Send>;

/// The way from an upgrade request to its connection (a request extension).
#[derive(Clone, Default)]
pub(crate) struct OnSwitch(Arc<Mutex<Option<SwitchFn>>>);

impl OnSwitch {
    /// Takes the connection if the answer is a `101` (a later claim replaces this one).
    pub(crate) fn claim(&self, f: SwitchFn) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
    }

    /// The claim, once the `101` is written.
    pub(crate) fn take(&self) -> Option<SwitchFn> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// A connection that switched protocols.
pub(crate) struct Switched {
    pub conn: Conn,
    /// Bytes that came after the upgrade request: the new protocol's first.
    pub read: Vec<u8>,
    /// Whether this runs in the connection's round (the bytes can be handled now); if
    /// not, the connection is not registered yet and its `on_open` comes first. (A
    /// tunnel queues the bytes either way.)
    #[cfg_attr(not(feature = "ws"), allow(dead_code))]
    pub in_round: bool,
}

/// An extended CONNECT's stream (RFC 8441), for the protocol that takes it (a request
/// extension): the request body is the tunnel's input, moved here so that the service's
/// own body is empty. It is the same channel: the machine still counts what is read.
#[derive(Clone)]
pub(crate) struct Tunnel(Arc<Mutex<Option<crate::http::Incoming>>>);

impl Tunnel {
    pub(crate) fn new(input: crate::http::Incoming) -> Tunnel {
        Tunnel(Arc::new(Mutex::new(Some(input))))
    }

    /// The tunnel's input, for the one that takes it.
    pub(crate) fn take(&self) -> Option<crate::http::Incoming> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}
