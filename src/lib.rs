//! fibr: an event-loop network runtime.
//!
//! Event loops wait for readiness; a pool of worker threads does the work. A connection is
//! a task that one worker at a time runs in rounds: read until a short read into a
//! borrowed buffer, hand the bytes to the handler, write everything the round produced in
//! one vectored write. See `ARCHITECTURE.md` in the repository for the layers, a request's
//! path through them, and the rule every protocol follows (a sans-IO machine plus a thin
//! driver).
//!
//! ```no_run
//! use fibr::{Binding, Config, Conn, Engine, Handler};
//!
//! struct Echo;
//! impl Handler for Echo {
//!     fn on_data(&self, c: &Conn, data: &[u8]) {
//!         let _ = c.send(data);
//!     }
//! }
//!
//! let engine = Engine::new(Config::default(), [Binding::tcp("127.0.0.1:9000", Echo)])?;
//! engine.run()?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Most applications serve a tower service instead, an axum `Router` say, with [`serve`]:
//! `axum::serve(listener, app)` becomes `fibr::serve(listener, app)` ([`http`] has the
//! rest). The other modules: [`net`] (async sockets), [`time`] (timers), [`mux`] (several
//! protocols on one port), [`prefork`] (worker processes, Linux), and behind features of
//! their names: [`tls`] (TLS on rustls), [`ws`] (WebSocket), [`client`] (an HTTP client;
//! with it [`gateway`], a reverse proxy as a tower service), [`proxy`] (SOCKS and HTTP
//! proxies), [`arpc`] (Go's arpc protocol, both roles), [`rt`] (hyper's runtime traits;
//! feature `hyper`); and [`fs`] (static files as a tower service).

#![warn(missing_docs)]
// Some docs link to items of features that are off in a smaller build (`mux` to
// `tls::TlsServer`, `client` to its HTTP/3 options); the all-features doc build, which CI
// runs with `-D warnings`, checks every link.
#![cfg_attr(
    not(all(feature = "axum", feature = "http3")),
    allow(rustdoc::broken_intra_doc_links)
)]

/// Chainable `with_*` setters for a `#[non_exhaustive]` config struct's public fields, so
/// such a config is built as `Config::default().with_workers(2)` outside the crate (a
/// struct literal is not allowed there). Each setter is `set` (takes the field's type),
/// `opt` (an `Option` field: takes the value or `None`) or `into` (takes what converts).
macro_rules! config_setters {
    ($ty:ident { $($kind:ident $setter:ident => $field:ident: $t:ty),* $(,)? }) => {
        impl $ty {
            $(config_setters!(@$kind $setter $field $t);)*
        }
    };
    (@set $setter:ident $field:ident $t:ty) => {
        #[doc = concat!("Sets [`", stringify!($field), "`](field@Self::", stringify!($field), ").")]
        #[must_use]
        pub fn $setter(mut self, value: $t) -> Self {
            self.$field = value;
            self
        }
    };
    (@opt $setter:ident $field:ident $t:ty) => {
        #[doc = concat!("Sets [`", stringify!($field), "`](field@Self::", stringify!($field), ") (a value, or `None`).")]
        #[must_use]
        pub fn $setter(mut self, value: impl Into<Option<$t>>) -> Self {
            self.$field = value.into();
            self
        }
    };
    (@into $setter:ident $field:ident $t:ty) => {
        #[doc = concat!("Sets [`", stringify!($field), "`](field@Self::", stringify!($field), ").")]
        #[must_use]
        pub fn $setter(mut self, value: impl Into<$t>) -> Self {
            self.$field = value.into();
            self
        }
    };
}

#[cfg(feature = "arpc")]
pub mod arpc;
#[cfg(feature = "client")]
pub mod client;
mod dial;
mod engine;
pub mod fs;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
#[cfg(feature = "client")]
pub mod gateway;
pub mod http;
pub mod mux;
#[cfg(target_os = "linux")]
pub mod prefork;
mod proto;
#[cfg(feature = "proxy")]
pub mod proxy;
#[cfg(feature = "hyper")]
pub mod rt;
#[cfg(test)]
mod test_support;
#[cfg(feature = "tls")]
pub mod tls;
#[cfg(feature = "ws")]
pub mod ws;

/// Body types: [`Incoming`](body::Incoming) is the request body services receive.
///
/// ```
/// use fibr::body::{BodyError, Incoming};
/// use http_body_util::BodyExt;
///
/// /// Answers with the length of the request's body.
/// async fn count(req: http::Request<Incoming>) -> Result<http::Response<String>, BodyError> {
///     let body = req.into_body().collect().await?.to_bytes();
///     Ok(http::Response::new(format!("{} bytes\n", body.len())))
/// }
///
/// # async fn demo(listener: fibr::net::TcpListener) -> std::io::Result<()> {
/// fibr::serve(listener, tower::service_fn(count)).await
/// # }
/// ```
///
/// The stream ends in a [`BodyError`](body::BodyError) when the connection closes
/// mid-body, the chunked framing is bad, the body outgrows `max_body_size`, or no bytes
/// come for `body_read_timeout` (both [`ServerConfig`](http::ServerConfig)'s).
pub mod body {
    pub use crate::http::{BodyError, Incoming};
}

pub mod net {
    //! Async sockets on fibr's loops, shaped like tokio's: [`TcpListener`], [`TcpStream`],
    //! [`UdpSocket`], [`UnixListener`], [`UnixStream`]; and [`socks`], dialing through a SOCKS
    //! proxy.
    //!
    //! ```
    //! use fibr::net::{TcpListener, TcpStream};
    //!
    //! fibr::run(async {
    //!     let listener = TcpListener::bind("127.0.0.1:0").await?;
    //!     let addr = listener.local_addr()?;
    //!     // An echo server: a task per connection.
    //!     fibr::spawn(async move {
    //!         while let Ok((stream, _peer)) = listener.accept().await {
    //!             fibr::spawn(async move {
    //!                 let mut buf = [0; 4096];
    //!                 loop {
    //!                     match stream.read(&mut buf).await {
    //!                         Ok(0) | Err(_) => break,
    //!                         Ok(n) if stream.write_all(&buf[..n]).await.is_err() => break,
    //!                         Ok(_) => {}
    //!                     }
    //!                 }
    //!             });
    //!         }
    //!     });
    //!
    //!     let client = TcpStream::connect(addr).await?;
    //!     client.write_all(b"ping").await?;
    //!     let mut reply = [0; 4];
    //!     client.read_exact(&mut reply).await?;
    //!     assert_eq!(&reply, b"ping");
    //!     Ok::<(), std::io::Error>(())
    //! })?;
    //! # Ok::<(), std::io::Error>(())
    //! ```
    //!
    //! Their methods take `&self`, so one task can read while another writes. They work from
    //! fibr's tasks, from [`fibr::run`](crate::run), and from any other executor (the loops
    //! drive their readiness). The TCP and Unix streams (and references to them) implement
    //! tokio's `AsyncRead` and `AsyncWrite` with feature `tokio`, and hyper's `Read` and
    //! `Write` with feature `hyper`. Names resolve off the loops and workers ([`lookup_host`]).

    pub use crate::dial::socks;
    pub use crate::engine::net::*;
}

pub use engine::bind::{Binding, Engine};
pub use engine::buf::PooledBuf;
pub use engine::conn::{Conn, DatagramHandler, Handler, UdpSender};
pub use engine::exec::{JoinError, JoinHandle};
pub use engine::runtime::{run, spawn, yield_now, Config};
pub use engine::sys::Backend;
pub use engine::time;
pub use http::serve;
