//! actix-web 4: the same routes as `examples/bench_server.rs`, and its WebSocket echo at
//! `/ws` with `actix-ws` (every text or binary message sent back; pings answered).
//!
//! `BENCH_WORKERS=1 actix 0` — `HttpServer::workers(N)`: N worker threads, each its own
//! single-threaded runtime, behind actix-server's acceptor thread.

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use actix_ws::Message;
use std::io;

/// The WebSocket echo: a task per connection, as actix-ws has it.
async fn ws(req: HttpRequest, body: web::Payload) -> actix_web::Result<HttpResponse> {
    let (response, mut session, mut stream) = actix_ws::handle(&req, body)?;
    actix_web::rt::spawn(async move {
        while let Some(Ok(msg)) = stream.recv().await {
            let sent = match msg {
                Message::Text(t) => session.text(t).await,
                Message::Binary(b) => session.binary(b).await,
                Message::Ping(p) => session.pong(&p).await,
                Message::Close(_) => break,
                _ => Ok(()),
            };
            if sent.is_err() {
                return;
            }
        }
        let _ = session.close(None).await;
    });
    Ok(response)
}

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
                .route("/ws", web::get().to(ws))
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
