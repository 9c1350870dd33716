//! hyper's runtime traits on fibr (feature `hyper`): an [`Executor`] and a [`Timer`], so
//! hyper's own connections (`hyper::server::conn::{http1, http2}`,
//! `hyper::client::conn::{http1, http2}`) run on fibr's loops and workers with no tokio
//! runtime. fibr's streams (`fibr::net::TcpStream`, `UnixStream`, and shared references to
//! them) implement `hyper::rt::{Read, Write}`, and [`crate::engine::time::Sleep`] implements
//! `hyper::rt::Sleep`.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use hyper::server::conn::http2;
//! let listener = fibr::net::TcpListener::bind("127.0.0.1:0").await?;
//! loop {
//!     let (stream, _) = listener.accept().await?;
//!     fibr::spawn(async move {
//!         let svc = hyper::service::service_fn(|_req| async {
//!             Ok::<_, std::convert::Infallible>(hyper::Response::new(String::from("hi")))
//!         });
//!         let _ = http2::Builder::new(fibr::rt::Executor)
//!             .timer(fibr::rt::Timer)
//!             .serve_connection(stream, svc)
//!             .await;
//!     });
//! }
//! # }
//! ```

use crate::engine::time::Sleep;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

/// Spawns hyper's background futures (an HTTP/2 connection's per-stream tasks, a client
/// connection's driver) with [`crate::engine::runtime::spawn`], on the current fibr runtime (the default
/// one outside a runtime). Spawned tasks are detached.
#[derive(Clone, Copy, Debug, Default)]
pub struct Executor;

impl<F> hyper::rt::Executor<F> for Executor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        drop(crate::engine::runtime::spawn(fut));
    }
}

/// hyper's timer on fibr's loop timers ([`crate::engine::time::sleep_until`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Timer;

impl hyper::rt::Sleep for Sleep {}

impl hyper::rt::Timer for Timer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(crate::engine::time::sleep(duration))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(crate::engine::time::sleep_until(deadline))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: Instant) {
        // A fibr sleep is moved in place; any other kind is replaced.
        match sleep.as_mut().downcast_mut_pin::<Sleep>() {
            Some(s) => s.get_mut().reset(new_deadline),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

#[cfg(test)]
mod tests {
    fn assert_send_sync<T: Send + Sync + Unpin + 'static>() {}

    #[test]
    fn sleep_is_send_sync() {
        assert_send_sync::<crate::engine::time::Sleep>();
    }
}
