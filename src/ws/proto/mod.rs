//! The sans-IO WebSocket machine: bytes in; messages, bytes to write and errors out.

pub(crate) mod deflate;
