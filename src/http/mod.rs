//! HTTP/1.1 serving of tower services (an axum `Router` unchanged) on fibr's engine.

mod body;
mod config;
mod file;
pub(crate) mod h1;
pub(crate) mod h2;
#[cfg(feature = "http3")]
pub(crate) mod http3;
mod panic;
mod protocol;
mod serve;
mod server;
mod server_h2;
mod service;
#[cfg(feature = "ws")]
pub(crate) mod switch;
#[cfg(feature = "hyper")]
mod upgrade;

pub use body::{BodyError, Incoming};
pub use config::{Http2Config, ServerConfig};
#[cfg(feature = "http3")]
pub use config::{Http3Config, RetryPolicy};
pub use file::FileBody;
pub use protocol::Protocol;
pub use serve::{serve, Serve, ServeListener, WithGracefulShutdown};
#[cfg(feature = "http3")]
#[doc(hidden)]
pub use server::Http3Server;
pub use server::Server;
pub use service::{BoxError, ConnInfo, MakeMarker, MakeService, PeerCred, ServiceMarker, UnixPeer};

#[doc(hidden)]
pub mod fuzzing;
