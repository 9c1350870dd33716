//! The sans-IO WebSocket machine: bytes in; messages, bytes to write and errors out.

// Until the machine that uses it lands (its branch brings its own mod.rs).
#[allow(dead_code)]
pub(crate) mod deflate;

/// Which end of the connection this is.
#[allow(dead_code)] // until the machine lands
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Server,
    Client,
}
