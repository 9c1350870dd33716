//! HTTP/1.1 serving of tower services (an axum `Router` unchanged) on fibr's engine.

mod body;
mod config;
mod file;
pub(crate) mod h1;
mod serve;
mod server;
mod service;

pub use body::{BodyError, Incoming};
pub use config::Config;
pub use file::FileBody;
pub use serve::{serve, Serve, ServeListener, WithGracefulShutdown};
pub use server::Server;
pub use service::{BoxError, ConnInfo, MakeMarker, MakeService, ServiceMarker};
