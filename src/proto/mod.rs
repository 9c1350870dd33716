//! The protocol machines, sans-IO: bytes and time in; messages, bytes to write and
//! deadlines out. Nothing here owns a socket, a thread, a clock or a task (the layer check,
//! `scripts/layers`, keeps `engine` out), so each is tested deterministically and its
//! parsers fuzzed. Their drivers, which join them to connections, are the modules above:
//! `http` (the server), `client`, `ws`, `arpc`, `tls` (TLS's record layer), `mux`, `dial`, `proxy`.

#[cfg(feature = "arpc")]
pub(crate) mod arpc;
pub(crate) mod date;
pub(crate) mod detect;
pub(crate) mod h1;
pub(crate) mod h2;
#[cfg(feature = "http3")]
pub(crate) mod h3;
pub(crate) mod header_maps;
pub(crate) mod shared;
pub(crate) mod socks;
#[cfg(feature = "tls")]
pub(crate) mod tls;
pub(crate) mod tunnel;
#[cfg(feature = "ws")]
pub(crate) mod ws;
