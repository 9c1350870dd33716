//! `fibr::serve(..).await` inside a multi-thread tokio runtime, with handlers that use tokio
//! (feature `tokio`): timers, spawn + JoinHandle, fs, net. Its own test binary, so fibr's
//! default runtime attaches to this test's tokio runtime.

mod tokio_common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_inside_tokio_multi_thread() {
    tokio_common::serve_and_check().await;
}
