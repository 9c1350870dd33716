//! actix-web 4: the same routes as `examples/bench_server.rs`.
//!
//! `BENCH_WORKERS=1 actix 0` — `HttpServer::workers(N)`: N worker threads, each its own
//! single-threaded runtime, behind actix-server's acceptor thread.

use actix_web::{web, App, HttpResponse, HttpServer};
use std::io;

fn main() -> io::Result<()> {
    let (addr, workers) = fibr_bench_peers::args("actix")?;
    actix_web::rt::System::new().block_on(async move {
        let server = HttpServer::new(|| {
            App::new()
                .route(
                    "/",
                    web::get().to(|| async {
                        HttpResponse::Ok()
                            .content_type("text/plain; charset=utf-8")
                            .body(fibr_bench_peers::HELLO)
                    }),
                )
                .route(
                    "/echo",
                    web::post().to(|body: web::Bytes| async move {
                        HttpResponse::Ok()
                            .content_type("application/octet-stream")
                            .body(body)
                    }),
                )
                .route(
                    "/json",
                    web::get().to(|| async {
                        HttpResponse::Ok()
                            .content_type("application/json")
                            .body(fibr_bench_peers::json_body())
                    }),
                )
        })
        .workers(workers)
        .disable_signals()
        .bind(addr)?;
        let bound = server
            .addrs()
            .first()
            .copied()
            .ok_or_else(|| io::Error::other("actix bound no address"))?;
        eprintln!("actix ({workers} workers) listening on {bound}");
        server.run().await
    })
}
