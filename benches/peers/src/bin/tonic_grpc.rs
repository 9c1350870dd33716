//! tonic's own server (`tonic::transport::Server`: hyper's h2 on tokio) serving the gRPC
//! example's `fibr.example.Echo` (`examples/grpc/echo.rs`, included as it is), the peer of
//! the compare bench's gRPC scenario; `bench_server fibr` with `BENCH_GRPC=1` serves the
//! same service with `fibr::serve`.
//!
//! `BENCH_WORKERS=1 tonic_grpc 0`: a tokio multi-thread runtime with that many workers (as
//! `bench_server axum` runs), the service in a `tonic::service::Routes` of its own (as
//! fibr's side has it), tonic's default server settings.

#[path = "../../../../examples/grpc/codec.rs"]
mod codec;
#[path = "../../../../examples/grpc/echo.rs"]
mod echo;

use std::io;
use std::time::Duration;

/// `ServerStream`'s pacing (`echo.rs` asks its includer for a timer).
async fn sleep(d: Duration) {
    tokio::time::sleep(d).await
}

fn main() -> io::Result<()> {
    let (addr, workers) = fibr_bench_peers::args("tonic_grpc")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("bench-tonic")
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        eprintln!(
            "tonic ({workers} workers) listening on {}",
            listener.local_addr()?
        );
        tonic::transport::Server::builder()
            .add_routes(tonic::service::Routes::new(echo::Echo))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
            .map_err(io::Error::other)
    })
}
