//! actix-web 4: the same routes as `examples/bench_server.rs`, and its WebSocket echo at
//! `/ws` with `actix-ws` (every text or binary message sent back; pings answered).
//!
//! `BENCH_WORKERS=1 actix 0` — `HttpServer::workers(N)`: N worker threads, each its own
//! single-threaded runtime, behind actix-server's acceptor thread.
//!
//! With `BENCH_TLS_CERT` and `BENCH_TLS_KEY` set: HTTPS on the port instead, actix-web's
//! own rustls 0.23 support (`bind_rustls_0_23`: actix-tls's acceptor, tokio-rustls
//! underneath) with the config `fibr_bench_peers::tls_config::from_env` builds (ring provider).

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use actix_ws::Message;
use std::io;
use std::time::Duration;

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
        // fibr's idle timeout (actix-web's default is 5 s): the idle scenarios' connections
        // stay open however long opening the last of them takes (10,000 TLS handshakes take
        // longer than 5 s on a busy machine).
        .keep_alive(Duration::from_secs(60))
        .disable_signals();
        let (server, how) = match fibr_bench_peers::tls_config::from_env()? {
            Some(mut config) => {
                // actix-web puts `http/1.1` in the config's ALPN list itself.
                config.alpn_protocols.clear();
                (server.bind_rustls_0_23(addr, config)?, ", rustls")
            }
            None => (server.bind(addr)?, ""),
        };
        let bound = server
            .addrs()
            .first()
            .copied()
            .ok_or_else(|| io::Error::other("actix bound no address"))?;
        eprintln!("actix ({workers} workers{how}) listening on {bound}");
        server.run().await
    })
}
