//! HTTP serving of tower services (an axum `Router` unchanged) on fibr's engine: HTTP/1.1,
//! HTTP/2 (h2 over TLS by ALPN, h2c by its preface) and HTTP/3 (feature `http3`).
//!
//! ```no_run
//! # #[cfg(feature = "tokio")]
//! #[tokio::main]
//! async fn main() -> std::io::Result<()> {
//!     let app = axum::Router::new().route("/", axum::routing::get(|| async { "hello" }));
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//!     // Every limit and timeout has a default: change only the ones you need.
//!     let config = fibr::http::ServerConfig::default()
//!         .with_idle_timeout(std::time::Duration::from_secs(30))
//!         .with_max_body_size(16 << 20);
//!     fibr::serve(listener, app).with_config(config).await
//! }
//! # #[cfg(not(feature = "tokio"))]
//! # fn main() {}
//! ```
//!
//! [`serve`] takes fibr's, std's and (feature `tokio`) tokio's TCP and Unix listeners, and
//! what `axum::serve` takes as the app; [`Serve`]'s `with_*` methods add graceful shutdown,
//! TLS, HTTP/3 and a runtime of the server's own. [`Server`] is the same server as a
//! connection [`Handler`](crate::Handler): a [`Binding`](crate::Binding) of an
//! [`Engine`](crate::Engine), or a route of a [`Mux`](crate::mux::Mux).

mod body;
mod config;
pub(crate) mod file;
#[cfg(feature = "http3")]
pub(crate) mod http3;
mod panic;
#[cfg(any(feature = "tunnel", feature = "client"))]
pub(crate) mod pipe;
pub(crate) mod pump;
mod serve;
mod server;
mod service;
#[cfg(feature = "tunnel")]
pub(crate) mod switch;
#[cfg(feature = "tunnel")]
pub mod tunnel;
#[cfg(feature = "hyper")]
mod upgrade;

pub use crate::proto::h2::protocol::Protocol;
pub use body::{BodyError, Incoming};
pub use config::{Http2Config, ServerConfig};
#[cfg(feature = "http3")]
pub use config::{Http3Config, RetryPolicy};
pub use file::FileBody;
pub use serve::{serve, Serve, ServeListener, WithGracefulShutdown};
#[cfg(feature = "http3")]
#[doc(hidden)]
pub use server::Http3Server;
pub use server::Server;
pub use service::{BoxError, ConnInfo, MakeMarker, MakeService, PeerCred, ServiceMarker, UnixPeer};
