//! `fibr::serve(..).await` inside a current-thread tokio runtime (`#[tokio::main(flavor =
//! "current_thread")]`), with handlers that use tokio. Its own test binary (see
//! tokio_multi_thread.rs).

mod tokio_common;

#[tokio::test(flavor = "current_thread")]
async fn serve_inside_tokio_current_thread() {
    tokio_common::serve_and_check().await;
}
