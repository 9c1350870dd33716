//! HTTP/2 (RFC 9113) for the round model, built in the sans-IO shape of `h1/`: the frame
//! codec (`frame`), HPACK (`hpack`, RFC 7541), and the connection machine on top of them.
//!
//! Issue 13 is being built here piece by piece; until the connection machine and its
//! driver use the codecs, only their tests do.
#![allow(dead_code)]

pub(crate) mod config;
pub(crate) mod frame;
pub(crate) mod hpack;
pub(crate) mod client;
pub(crate) mod server;
