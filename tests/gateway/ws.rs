//! WebSocket through the gateway: Python's `websockets` in front, axum's WebSocket echo
//! behind (on axum::serve and on fibr).

use super::common::{bounded, require_python, start};
use super::{axum_upstream_of, curl, gateway, http, url, LIMIT};
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::routing::get;
use axum::Router;
use fibr::gateway::Config;
use fibr::http::ServerConfig;
use std::net::SocketAddr;
use std::process::Command;

/// Echoes every message until the client closes.
fn echo_app() -> Router {
    Router::new().route(
        "/ws",
        get(|ws: WebSocketUpgrade| async move {
            ws.on_upgrade(|mut socket: WebSocket| async move {
                while let Some(Ok(msg)) = socket.recv().await {
                    // A Close is answered by axum itself, on the next receive.
                    if matches!(msg, Message::Close(_)) {
                        continue;
                    }
                    if socket.send(msg).await.is_err() {
                        break;
                    }
                }
            })
        }),
    )
}

/// Python's `websockets` against `url`, twice: text and binary messages (larger than a
/// tunnel's buffer), and a clean close (1000: the close handshake went both ways).
fn python_echo(url: &str) {
    require_python("websockets");
    let script = r#"
import asyncio, sys, websockets
async def main(url):
    for _ in range(2):
        async with websockets.connect(url, max_size=None) as ws:
            for msg in ("hello", "fibr " * 20000, bytes(range(256)) * 1000):
                await ws.send(msg)
                assert await ws.recv() == msg
        assert ws.close_code == 1000, ws.close_code
    print("ok")
asyncio.run(main(sys.argv[1]))
"#;
    let out = Command::new("timeout")
        .args(["30", "python3", "-c", script, url])
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stdout.starts_with(b"ok"),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn ws_url(addr: SocketAddr) -> String {
    format!("ws://{addr}/ws")
}

#[test]
fn websocket_passes_through_to_axum_serve_and_to_fibr() {
    bounded(LIMIT, || {
        let (axum_up, _rt) = axum_upstream_of(echo_app());
        python_echo(&ws_url(axum_up));
        let gw = gateway(vec![http(axum_up)], Config::default());
        python_echo(&ws_url(gw));
        let fibr_up = start(echo_app(), ServerConfig::default());
        let gw = gateway(vec![http(fibr_up)], Config::default());
        python_echo(&ws_url(gw));
    });
}

#[test]
fn a_refused_upgrade_comes_back_as_the_upstreams_answer() {
    bounded(LIMIT, || {
        let (axum_up, _rt) = axum_upstream_of(echo_app());
        let gw = gateway(vec![http(axum_up)], Config::default());
        let upgrade = [
            "-H",
            "Connection: Upgrade",
            "-H",
            "Upgrade: websocket",
            "-H",
            "Sec-WebSocket-Version: 13",
            "-H",
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        ];
        let mut args = upgrade.to_vec();
        let missing = url(gw, "/missing");
        args.push(&missing);
        let r = curl(&args);
        assert_eq!(r.status, 404, "{r:?}");
        // Upgrades can be turned off: the request then goes as a plain one (no Upgrade).
        let gw = gateway(vec![http(axum_up)], Config::default().with_upgrades(false));
        let mut args = upgrade.to_vec();
        let ws = url(gw, "/ws");
        args.push(&ws);
        let r = curl(&args);
        assert_ne!(r.status, 101, "{r:?}");
    });
}
