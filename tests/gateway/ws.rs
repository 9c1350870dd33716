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
use std::time::Duration;

/// Echoes every message until the client closes.
pub(super) fn echo_app() -> Router {
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
pub(super) fn python_echo(url: &str) {
    python_echo_over(url, None);
}

/// [`python_echo`], trusting the CA in the PEM file `ca` (for `wss://`); the answer's
/// `Via` and `Sec-WebSocket-Extensions` (`-` for none).
pub(super) fn python_echo_over(url: &str, ca: Option<&std::path::Path>) -> (String, String) {
    require_python("websockets");
    let script = r#"
import asyncio, ssl, sys, websockets
async def main(url, ca):
    tls = ssl.create_default_context(cafile=ca) if ca else None
    for _ in range(2):
        async with websockets.connect(url, max_size=None, ssl=tls) as ws:
            for msg in ("hello", "fibr " * 20000, bytes(range(256)) * 1000):
                await ws.send(msg)
                assert await ws.recv() == msg
        assert ws.close_code == 1000, ws.close_code
    h = ws.response.headers
    print("ok", h.get("via", "-"), h.get("sec-websocket-extensions", "-"), sep="|")
asyncio.run(main(sys.argv[1], sys.argv[2]))
"#;
    let ca = ca.map_or(String::new(), |p| p.display().to_string());
    let out = Command::new("timeout")
        .args(["30", "python3", "-c", script, url, &ca])
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stdout.starts_with(b"ok"),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8_lossy(&out.stdout);
    let mut seen = line.trim().split('|').skip(1).map(str::to_owned);
    (
        seen.next().unwrap_or_default(),
        seen.next().unwrap_or_default(),
    )
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

/// curl's arguments for a WebSocket upgrade request.
pub(super) const UPGRADE: [&str; 8] = [
    "-H",
    "Connection: Upgrade",
    "-H",
    "Upgrade: websocket",
    "-H",
    "Sec-WebSocket-Version: 13",
    "-H",
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
];

#[test]
fn a_refused_upgrade_comes_back_as_the_upstreams_answer() {
    bounded(LIMIT, || {
        let (axum_up, _rt) = axum_upstream_of(echo_app());
        let gw = gateway(vec![http(axum_up)], Config::default());
        let upgrade = UPGRADE;
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

/// fibr's WebSocket echo, with permessage-deflate, over HTTP/1.1 (`GET`) and HTTP/2 and
/// HTTP/3 (extended `CONNECT`).
#[cfg(feature = "ws")]
pub(super) fn fibr_ws_app() -> Router {
    use fibr::ws::{DeflateConfig, Message, WebSocketUpgrade};
    Router::new().route(
        "/ws",
        axum::routing::any(|ws: WebSocketUpgrade| async move {
            ws.deflate(DeflateConfig::default())
                .on_upgrade(|mut socket| async move {
                    while let Some(Ok(msg)) = socket.recv().await {
                        let echo = matches!(msg, Message::Text(_) | Message::Binary(_));
                        if echo && socket.send(msg).await.is_err() {
                            return;
                        }
                    }
                })
        }),
    )
}

/// RFC 8441: fibr's WebSocket client over h2c sends an extended CONNECT to the gateway,
/// which opens the WebSocket upstream over HTTP/1.1 (fibr::ws with permessage-deflate,
/// axum's without) and joins the two.
#[cfg(feature = "ws")]
#[test]
fn websocket_over_h2_extended_connect_to_http1_upstreams() {
    bounded(LIMIT, || {
        let fibr_up = start(fibr_ws_app(), ServerConfig::default());
        let (axum_up, _rt) = axum_upstream_of(echo_app());
        for (upstream, deflate) in [(fibr_up, true), (axum_up, false)] {
            let gw = gateway(vec![http(upstream)], Config::default());
            let client = fibr::client::Client::builder()
                .http2_prior_knowledge()
                .build();
            let res = fibr_echo(&client, &format!("ws://{gw}/ws"));
            let agreed = res.headers().contains_key("sec-websocket-extensions");
            assert_eq!(agreed, deflate, "{:?}", res.headers());
        }
    });
}

/// fibr's WebSocket client (offering permessage-deflate) on a stream of `client`'s HTTP/2
/// or HTTP/3 connection to `url`: a text message and a binary one larger than a stream's
/// windows (flow control both ways) echoed byte for byte, and a clean close. The
/// answer's head.
#[cfg(feature = "ws")]
pub(super) fn fibr_echo<C: fibr::client::Connector>(
    client: &fibr::client::Client<C>,
    url: &str,
) -> http::Response<()> {
    use fibr::ws::{Connector, DeflateConfig, Message};
    let (client, url) = (client.clone(), url.to_owned());
    fibr::run(async move {
        let connector = Connector::new().config(fibr::ws::Config {
            deflate: Some(DeflateConfig::default()),
            ..fibr::ws::Config::default()
        });
        let (mut ws, res) = connector
            .connect_over_http2(&client, &url)
            .await
            .expect("a WebSocket over HTTP/2 or HTTP/3 through the gateway");
        assert_eq!(res.status(), 200);
        let text = "fibr ".repeat(10_000);
        ws.send(Message::text(text.clone())).await.unwrap();
        assert_eq!(ws.recv().await.unwrap().unwrap(), Message::text(text));
        let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        ws.send(Message::binary(big.clone())).await.unwrap();
        assert_eq!(ws.recv().await.unwrap().unwrap(), Message::binary(big));
        ws.close(None).await.unwrap();
        while let Some(m) = ws.recv().await {
            m.expect("a clean close");
        }
        res
    })
}

/// A tunnel where nothing moves for the tunnel's idle timeout is closed; one that keeps
/// talking is not.
#[test]
fn an_idle_tunnel_is_closed() {
    bounded(LIMIT, || {
        require_python("websockets");
        let (axum_up, _rt) = axum_upstream_of(echo_app());
        let config = Config::default().with_tunnel_idle_timeout(Duration::from_millis(800));
        let gw = gateway(vec![http(axum_up)], config);
        let script = r#"
import asyncio, sys, websockets
async def main(url):
    async with websockets.connect(url, ping_interval=None) as ws:
        for _ in range(6):
            await asyncio.sleep(0.3)
            await ws.send("still here")
            assert await ws.recv() == "still here"
        await asyncio.sleep(2)
        try:
            await asyncio.wait_for(ws.recv(), 5)
        except websockets.ConnectionClosed:
            print("closed")
            return
    print("open")
asyncio.run(main(sys.argv[1]))
"#;
        let out = Command::new("timeout")
            .args(["30", "python3", "-c", script, &ws_url(gw)])
            .output()
            .unwrap();
        assert!(
            out.status.success() && out.stdout.starts_with(b"closed"),
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    });
}
