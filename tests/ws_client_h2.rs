//! fibr's WebSocket client over HTTP/2 (RFC 8441's extended CONNECT through
//! `fibr::client`), against fibr's server over 127.0.0.1: h2c by prior knowledge, and h2
//! by ALPN on TLS; sockets share one connection; a server that does not allow extended
//! CONNECT, and one that speaks only HTTP/1.1, are refused with a clear error.

#![cfg(all(feature = "ws", feature = "axum", feature = "client"))]

mod common;

use axum::routing::any;
use axum::Router;
use common::ws_echo::echo;
use fibr::client::Client;
use fibr::net::TcpListener;
use fibr::ws::{
    CloseFrame, Config, Connector, DeflateConfig, Message, WebSocket, WebSocketUpgrade,
};
use std::net::SocketAddr;
use std::sync::Arc;

fn app() -> Router {
    Router::new().route(
        "/ws",
        any(|ws: WebSocketUpgrade| async move {
            ws.protocols(["chat"])
                .deflate(DeflateConfig::default())
                .on_upgrade(echo)
        }),
    )
}

fn serve(
    cfg: fibr::http::ServerConfig,
    tls: Option<Arc<fibr::tls::rustls::ServerConfig>>,
) -> SocketAddr {
    let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let addr = listener.local_addr().unwrap();
    drop(fibr::spawn(async move {
        let serve = fibr::serve(listener, app()).with_config(cfg);
        let _ = match tls {
            Some(tls) => serve.with_tls(tls).await,
            None => serve.await,
        };
    }));
    addr
}

fn connector() -> Connector {
    Connector::new().protocols(["chat"]).config(Config {
        deflate: Some(DeflateConfig::default()),
        ..Config::default()
    })
}

/// Every message kind and the close handshake on a socket over HTTP/2.
async fn exchange(ws: &mut WebSocket) -> Result<(), fibr::ws::Error> {
    assert_eq!(ws.protocol().map(|p| p.to_str().unwrap()), Some("chat"));
    let text = "fibr ".repeat(10_000);
    ws.send(Message::text(text.clone())).await?;
    assert_eq!(ws.recv().await.unwrap()?, Message::text(text));
    // Larger than a stream's initial window: the flow control of both directions.
    let big = vec![9u8; 300_000];
    ws.send(Message::binary(big.clone())).await?;
    assert_eq!(ws.recv().await.unwrap()?, Message::binary(big));
    ws.send(Message::Ping("x".into())).await?;
    assert_eq!(ws.recv().await.unwrap()?, Message::Pong("x".into()));
    ws.send(Message::text("close")).await?;
    assert_eq!(
        ws.recv().await.unwrap()?,
        Message::Close(Some(CloseFrame {
            code: 4000,
            reason: "bye".into()
        }))
    );
    assert!(ws.recv().await.is_none(), "the stream ends after the close");
    Ok(())
}

#[test]
fn over_h2c_with_prior_knowledge_and_two_sockets_on_one_connection() {
    let addr = serve(Default::default(), None);
    let client = Client::builder().http2_prior_knowledge().build();
    fibr::run(async move {
        let url = format!("ws://{addr}/ws");
        let (mut a, res) = connector().connect_over_http2(&client, &url).await?;
        assert_eq!(res.status(), 200);
        assert!(res.headers()["sec-websocket-extensions"]
            .to_str()
            .unwrap()
            .starts_with("permessage-deflate"));
        let (mut b, _) = connector().connect_over_http2(&client, &url).await?;
        assert_eq!(
            client.idle_connections(),
            1,
            "both sockets on one HTTP/2 connection"
        );
        b.send(Message::text("on b")).await?;
        exchange(&mut a).await?;
        assert_eq!(b.recv().await.unwrap()?, Message::text("on b"));
        exchange(&mut b).await
    })
    .expect("the exchanges over h2c");
}

#[cfg(feature = "tls")]
#[test]
fn over_h2_on_tls_by_alpn() {
    let pki = common::pki::Pki::new();
    let leaf = pki.server(&["localhost"]);
    let addr = serve(Default::default(), Some(Arc::new(pki.server_config(&leaf))));
    let client = Client::builder()
        .tls_config(Arc::new(pki.client_config()))
        .build_https();
    fibr::run(async move {
        let url = format!("wss://localhost:{}/ws", addr.port());
        let (mut ws, res) = connector().connect_over_http2(&client, &url).await?;
        assert_eq!(res.version(), http::Version::HTTP_2);
        exchange(&mut ws).await
    })
    .expect("the exchange over h2 on TLS");
}

#[test]
fn a_server_without_extended_connect_is_refused() {
    let mut cfg = fibr::http::ServerConfig::default();
    cfg.http2.extended_connect = false;
    let addr = serve(cfg, None);
    let client = Client::builder().http2_prior_knowledge().build();
    let err = fibr::run(async move {
        connector()
            .connect_over_http2(&client, &format!("ws://{addr}/ws"))
            .await
            .err()
            .expect("no extended CONNECT")
    });
    assert!(
        err.to_string().contains("SETTINGS_ENABLE_CONNECT_PROTOCOL"),
        "{err}"
    );
}

#[test]
fn a_client_that_speaks_http1_to_the_server_is_refused() {
    let addr = serve(Default::default(), None);
    let client = Client::new();
    let err = fibr::run(async move {
        connector()
            .connect_over_http2(&client, &format!("ws://{addr}/ws"))
            .await
            .err()
            .expect("not over HTTP/1.1")
    });
    assert!(err.to_string().contains("needs HTTP/2"), "{err}");
}
