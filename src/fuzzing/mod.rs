//! The fuzz harnesses (feature `fuzzing`): thin wrappers around the sans-IO machines for
//! the fuzz targets (`fuzz/`, which turns the feature on) and their stable fallbacks
//! (`tests/fuzz_fallback.rs`, `h2_fuzz_fallback.rs`, `tls_fuzz_fallback.rs`, which
//! require it). Not part of the API: it may change or vanish at any release, and a normal
//! build leaves it out. The WebSocket checks are built for the library's own tests too.

#[cfg(all(feature = "arpc", feature = "fuzzing"))]
pub mod arpc;
#[cfg(feature = "fuzzing")]
mod h1;
#[cfg(feature = "fuzzing")]
mod h2;
#[cfg(all(feature = "tls", feature = "fuzzing"))]
pub mod tls;
#[cfg(feature = "ws")]
pub mod ws;

/// HTTP/1's codec (request and response heads, chunked bodies, the server machine with an
/// echo service) and HTTP/2's (frames, HPACK, the server machine).
#[cfg(feature = "fuzzing")]
pub mod http {
    pub use super::h1::*;
    pub use super::h2::*;
}
