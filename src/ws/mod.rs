//! WebSocket (RFC 6455, with permessage-deflate, RFC 7692) on fibr's loops.

#[doc(hidden)]
pub mod fuzzing;
pub(crate) mod proto;
