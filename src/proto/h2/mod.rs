//! HTTP/2 (RFC 9113) for the round model, built in the sans-IO shape of `h1/`: the frame
//! codec (`frame`), HPACK (`hpack`, RFC 7541), and the connection machines on top of them
//! (`server`; `client`, for `fibr::client`), both on one connection core (`conn`).

#[cfg(feature = "client")]
pub(crate) mod client;
pub(crate) mod config;
mod conn;
pub(crate) mod fields;
pub(crate) mod frame;
pub(crate) mod hpack;
#[cfg(all(test, feature = "client"))]
pub(crate) mod pair_tests;
pub(crate) mod protocol;
pub(crate) mod server;
