//! The engine: everything below the protocols. From the bottom: the pollers and raw
//! socket calls (`sys`), pooled buffers (`buf`), the worker pool and tasks (`exec`), the
//! event loops (`reactor`), the runtime that owns loops and workers (`runtime`), the
//! connection task and its rounds (`conn`), the async socket types (`net`), timers
//! (`time`), and the `Engine` that binds listeners (`bind`). Nothing here knows a protocol.

pub(crate) mod bind;
pub(crate) mod buf;
pub(crate) mod conn;
pub(crate) mod exec;
pub mod net;
pub(crate) mod reactor;
pub(crate) mod runtime;
pub(crate) mod sync_notify;
pub(crate) mod sys;
pub mod time;
