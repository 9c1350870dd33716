//! The app both servers run in the differential tests: the same axum Router, served once by
//! `axum::serve` on hyper+tokio and once by `fibr::serve`.

use axum::Router;

/// Builds the shared app. (Filled in by the differential tests' author.)
pub fn app() -> Router {
    Router::new()
}
