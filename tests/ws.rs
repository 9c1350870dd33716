//! fibr's own WebSocket (`fibr::ws`) against peers we did not write, over 127.0.0.1:
//! tungstenite (plain and over rustls: `wss://`, where the socket stays under fibr's TLS),
//! Python's `websockets` (with permessage-deflate), and a hand-written client for what
//! libraries will not send. axum's own extractor keeps working on the same server. Over
//! HTTP/2 (RFC 8441's extended CONNECT), Python's `h2` drives the stream by hand (h2c, and
//! h2 by ALPN on fibr's TLS).

#![cfg(all(feature = "ws", feature = "axum"))]

mod common;

use axum::routing::{any, get};
use axum::Router;
use common::bounded;
use common::ws_echo::echo;
use fibr::net::TcpListener;
use fibr::ws::{close_code, CloseFrame, DeflateConfig, Message, WebSocket, WebSocketUpgrade};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tungstenite::protocol::frame::coding::CloseCode as TCloseCode;
use tungstenite::Message as TMessage;

const LIMIT: Duration = Duration::from_secs(30);

/// axum's own echo, on the same server.
async fn axum_echo(mut socket: axum::extract::ws::WebSocket) {
    while let Some(Ok(msg)) = socket.recv().await {
        if let axum::extract::ws::Message::Text(_) = msg {
            if socket.send(msg).await.is_err() {
                return;
            }
        }
    }
}

fn app() -> Router {
    Router::new()
        // `any`: over HTTP/2 the handshake is a CONNECT.
        .route(
            "/ws",
            any(|ws: WebSocketUpgrade| async move {
                ws.protocols(["chat", "superchat"])
                    .deflate(DeflateConfig::default())
                    .max_message_size(1 << 20)
                    .on_upgrade(echo)
            }),
        )
        .route(
            "/protocol",
            get(|ws: WebSocketUpgrade| async move {
                ws.protocols(["superchat"])
                    .on_upgrade(|mut s: WebSocket| async move {
                        let p = s.protocol().map(|p| p.to_str().unwrap().to_owned());
                        let _ = s.send(Message::text(p.unwrap_or_default())).await;
                    })
            }),
        )
        .route(
            "/axum",
            get(|ws: axum::extract::ws::WebSocketUpgrade| async move { ws.on_upgrade(axum_echo) }),
        )
}

fn start() -> SocketAddr {
    let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let addr = listener.local_addr().unwrap();
    drop(fibr::spawn(async move {
        if let Err(e) = fibr::serve(listener, app()).await {
            eprintln!("serve failed: {e}");
        }
    }));
    addr
}

fn connect(addr: SocketAddr, path: &str) -> tungstenite::WebSocket<TcpStream> {
    let s = common::connect(addr);
    s.set_read_timeout(Some(LIMIT)).unwrap();
    let (ws, res) = tungstenite::client(format!("ws://{addr}{path}"), s).expect("handshake");
    assert_eq!(res.status(), 101);
    ws
}

/// The echo of every message kind, a ping's pong, and the close handshake with the
/// server's code, as tungstenite sees them.
fn exchange<S: Read + Write>(ws: &mut tungstenite::WebSocket<S>) {
    ws.send(TMessage::text("hello")).unwrap();
    assert_eq!(ws.read().unwrap(), TMessage::text("hello"));
    let big = vec![7u8; 300_000];
    ws.send(TMessage::binary(big.clone())).unwrap();
    assert_eq!(ws.read().unwrap(), TMessage::binary(big));
    ws.send(TMessage::Ping(b"p".to_vec().into())).unwrap();
    assert_eq!(ws.read().unwrap(), TMessage::Pong(b"p".to_vec().into()));
    ws.send(TMessage::text("close")).unwrap();
    match ws.read().unwrap() {
        TMessage::Close(Some(f)) => {
            assert_eq!(f.code, TCloseCode::from(4000));
            assert_eq!(f.reason.as_str(), "bye");
        }
        other => panic!("expected the server's close, got {other:?}"),
    }
    match ws.read() {
        Err(tungstenite::Error::ConnectionClosed) => {}
        other => panic!("expected the end of the connection, got {other:?}"),
    }
}

#[test]
fn tungstenite_talks_to_fibrs_websocket() {
    let addr = start();
    bounded(LIMIT, move || exchange(&mut connect(addr, "/ws")));
}

#[test]
fn the_first_subprotocol_the_client_offers_that_the_server_speaks_is_chosen() {
    let addr = start();
    bounded(LIMIT, move || {
        let s = common::connect(addr);
        let mut req = tungstenite::client::IntoClientRequest::into_client_request(format!(
            "ws://{addr}/protocol"
        ))
        .unwrap();
        req.headers_mut()
            .insert("sec-websocket-protocol", "chat, superchat".parse().unwrap());
        let (mut ws, res) = tungstenite::client(req, s).unwrap();
        assert_eq!(res.headers()["sec-websocket-protocol"], "superchat");
        assert_eq!(ws.read().unwrap(), TMessage::text("superchat"));
    });
}

#[test]
fn axums_own_extractor_still_works_beside_fibrs() {
    let addr = start();
    bounded(LIMIT, move || {
        let mut ws = connect(addr, "/axum");
        ws.send(TMessage::text("via hyper")).unwrap();
        assert_eq!(ws.read().unwrap(), TMessage::text("via hyper"));
    });
}

#[test]
fn a_message_over_the_limit_is_closed_with_1009() {
    let addr = start();
    bounded(LIMIT, move || {
        let mut ws = connect(addr, "/ws");
        ws.send(TMessage::binary(vec![0u8; 1 << 20])).unwrap();
        assert_eq!(ws.read().unwrap().len(), 1 << 20, "at the limit: echoed");
        ws.send(TMessage::binary(vec![0u8; (1 << 20) + 1])).unwrap();
        match ws.read() {
            Ok(TMessage::Close(Some(f))) => assert_eq!(f.code, TCloseCode::Size),
            other => panic!("expected a close with 1009, got {other:?}"),
        }
    });
}

#[test]
fn an_unmasked_client_frame_is_a_protocol_error() {
    let addr = start();
    bounded(LIMIT, move || {
        let mut s = common::connect(addr);
        s.set_read_timeout(Some(LIMIT)).unwrap();
        s.write_all(
            b"GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
              Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n\
              \x81\x02hi",
        )
        .unwrap();
        let (got, _) = common::read_to_eof(&mut s);
        let head_end = common::find(&got, b"\r\n\r\n").expect("a response head") + 4;
        let head = String::from_utf8_lossy(&got[..head_end]);
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        assert!(head.contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "{head}");
        let close = &got[head_end..];
        assert_eq!(
            &close[..2],
            [0x88, 0x02],
            "one unmasked close frame: {close:?}"
        );
        assert_eq!(
            u16::from_be_bytes([close[2], close[3]]),
            close_code::PROTOCOL
        );
    });
}

#[test]
fn a_request_that_is_not_an_upgrade_is_rejected_as_axum_does() {
    let addr = start();
    bounded(LIMIT, move || {
        let mut s = common::connect(addr);
        s.write_all(b"GET /ws HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let (got, _) = common::read_to_eof(&mut s);
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 400"), "{text}");
        assert!(
            text.contains("Connection header did not include 'upgrade'"),
            "{text}"
        );
    });
}

/// Python's `websockets` client, with and without permessage-deflate: a compressible
/// message must come back intact, and the extension must have been agreed.
#[test]
fn python_websockets_with_and_without_deflate() {
    common::require_python("websockets");
    let addr = start();
    let script = r#"
import asyncio, sys, websockets
async def main(url):
    for comp in (None, "deflate"):
        async with websockets.connect(url, compression=comp, max_size=None) as ws:
            ext = ws.response.headers.get("Sec-WebSocket-Extensions")
            assert (ext is not None) == (comp is not None), ext
            text = "fibr " * 20000
            await ws.send(text)
            assert await ws.recv() == text
            await ws.send(bytes(range(256)) * 100)
            assert await ws.recv() == bytes(range(256)) * 100
        assert ws.close_code == 1000, ws.close_code
    print("ok")
asyncio.run(main(sys.argv[1]))
"#;
    let out = Command::new("timeout")
        .args(["30", "python3", "-c", script, &format!("ws://{addr}/ws")])
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stdout.starts_with(b"ok"),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[cfg(feature = "tls")]
#[test]
fn wss_stays_under_fibrs_tls() {
    use common::pki::Pki;
    use fibr::tls::rustls;
    let pki = Pki::new();
    let leaf = pki.server(&["localhost"]);
    let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let addr = listener.local_addr().unwrap();
    let tls = Arc::new(pki.server_config(&leaf));
    drop(fibr::spawn(async move {
        let _ = fibr::serve(listener, app()).with_tls(tls).await;
    }));
    let client = Arc::new(pki.client_config());
    bounded(LIMIT, move || {
        let tcp = common::connect(addr);
        tcp.set_read_timeout(Some(LIMIT)).unwrap();
        let conn = rustls::ClientConnection::new(
            client,
            rustls::pki_types::ServerName::try_from("localhost").unwrap(),
        )
        .unwrap();
        let stream = rustls::StreamOwned::new(conn, tcp);
        let (mut ws, res) =
            tungstenite::client("wss://localhost/ws", stream).expect("handshake over TLS");
        assert_eq!(res.status(), 101);
        exchange(&mut ws);
    });
}

/// fibr's client against fibr's server: every message kind, the subprotocol, an extra
/// header the server sees, deflate agreed, and the close handshake.
#[test]
fn fibrs_client_talks_to_fibrs_server() {
    use fibr::ws::{Config, Connector};
    let addr = start();
    let got = fibr::run(async move {
        let connector = Connector::new().protocols(["superchat"]).config(Config {
            deflate: Some(DeflateConfig::default()),
            ..Config::default()
        });
        let (mut ws, res) = connector.connect(&format!("ws://{addr}/ws")).await?;
        assert_eq!(res.status(), 101);
        assert_eq!(res.headers()["sec-websocket-protocol"], "superchat");
        assert!(res.headers()["sec-websocket-extensions"]
            .to_str()
            .unwrap()
            .starts_with("permessage-deflate"));
        let text = "fibr ".repeat(10_000);
        ws.send(Message::text(text.clone())).await?;
        assert_eq!(ws.recv().await.unwrap()?, Message::text(text));
        ws.send(Message::binary(vec![9u8; 70_000])).await?;
        assert_eq!(
            ws.recv().await.unwrap()?,
            Message::binary(vec![9u8; 70_000])
        );
        ws.send(Message::Ping("x".into())).await?;
        assert_eq!(ws.recv().await.unwrap()?, Message::Pong("x".into()));
        ws.send(Message::text("close")).await?;
        let close = ws.recv().await.unwrap()?;
        let end = ws.recv().await;
        Ok::<_, fibr::ws::Error>((close, end.is_none()))
    })
    .expect("the exchange");
    assert_eq!(
        got,
        (
            Message::Close(Some(CloseFrame {
                code: 4000,
                reason: "bye".into()
            })),
            true
        )
    );
}

#[test]
fn the_client_refuses_a_server_that_does_not_switch() {
    let addr = start();
    let err = fibr::run(fibr::ws::connect(&format!("ws://{addr}/nowhere")))
        .err()
        .expect("a 404 is not a WebSocket");
    assert!(err.to_string().contains("404"), "{err}");
}

/// fibr's client against Python's `websockets` server, with permessage-deflate.
#[test]
fn fibrs_client_talks_to_python_websockets() {
    use fibr::ws::{Config, Connector};
    common::require_python("websockets");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script = r#"
import asyncio, sys, websockets
async def echo(ws):
    async for m in ws:
        await ws.send(m)
async def main(port):
    async with websockets.serve(echo, "127.0.0.1", port, compression="deflate"):
        print("ready", flush=True)
        await asyncio.sleep(30)
asyncio.run(main(int(sys.argv[1])))
"#;
    let mut server = Command::new("python3")
        .args(["-c", script, &port.to_string()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = [0u8; 5];
    server
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut ready)
        .unwrap();
    let result = fibr::run(async move {
        let connector = Connector::new().config(Config {
            deflate: Some(DeflateConfig::default()),
            ..Config::default()
        });
        let (mut ws, res) = connector
            .connect(&format!("ws://127.0.0.1:{port}/"))
            .await?;
        let ext = res.headers()["sec-websocket-extensions"].clone();
        for i in 0..20 {
            let text = format!("message {i} ").repeat(500);
            ws.send(Message::text(text.clone())).await?;
            assert_eq!(ws.recv().await.unwrap()?, Message::text(text));
        }
        ws.close(None).await?;
        Ok::<_, fibr::ws::Error>(ext)
    });
    let _ = server.kill();
    let _ = server.wait();
    let ext = result.expect("the exchange");
    assert!(
        ext.to_str().unwrap().starts_with("permessage-deflate"),
        "{ext:?}"
    );
}

#[cfg(feature = "tls")]
#[test]
fn fibrs_client_over_wss() {
    use common::pki::Pki;
    use fibr::ws::Connector;
    let pki = Pki::new();
    let leaf = pki.server(&["localhost"]);
    let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let port = listener.local_addr().unwrap().port();
    let tls = Arc::new(pki.server_config(&leaf));
    drop(fibr::spawn(async move {
        let _ = fibr::serve(listener, app()).with_tls(tls).await;
    }));
    let client = Arc::new(pki.client_config());
    let echoed = fibr::run(async move {
        let connector = Connector::new().tls_config(client);
        let (mut ws, _) = connector
            .connect(&format!("wss://localhost:{port}/ws"))
            .await?;
        ws.send(Message::text("over tls")).await?;
        ws.recv().await.unwrap()
    })
    .expect("the exchange over TLS");
    assert_eq!(echoed, Message::text("over tls"));
}

/// A server whose `/flood` sends 64 messages of 1 MiB as fast as `send` lets it, counting
/// those sent, and whose `/sink` takes nothing for a second, then counts what it gets.
fn limits_app(sent: Arc<AtomicUsize>, got: Arc<AtomicUsize>) -> Router {
    Router::new()
        .route(
            "/flood",
            any(move |ws: WebSocketUpgrade| async move {
                ws.write_buffer_size(1 << 20)
                    .on_upgrade(move |mut s: WebSocket| async move {
                        for _ in 0..64 {
                            if s.send(Message::binary(vec![1u8; 1 << 20])).await.is_err() {
                                return;
                            }
                            sent.fetch_add(1, Ordering::SeqCst);
                        }
                        while s.recv().await.is_some() {}
                    })
            }),
        )
        .route(
            "/sink",
            any(move |ws: WebSocketUpgrade| async move {
                ws.read_buffer_size(1 << 20)
                    .on_upgrade(move |mut s: WebSocket| async move {
                        fibr::time::sleep(Duration::from_secs(1)).await;
                        while let Some(Ok(m)) = s.recv().await {
                            if let Message::Binary(b) = m {
                                got.fetch_add(b.len(), Ordering::SeqCst);
                            }
                        }
                    })
            }),
        )
}

fn start_limits() -> (SocketAddr, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let (sent, got) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let addr = listener.local_addr().unwrap();
    let app = limits_app(sent.clone(), got.clone());
    // Wide HTTP/2 windows, so that only the WebSocket's own bounds hold a stream back.
    let mut cfg = fibr::http::ServerConfig::default();
    cfg.http2.initial_stream_window = 16 << 20;
    cfg.http2.initial_connection_window = 64 << 20;
    drop(fibr::spawn(async move {
        let _ = fibr::serve(listener, app).with_config(cfg).await;
    }));
    (addr, sent, got)
}

/// Every one of the flood's 64 sends returns once the peer has read them all. A send's
/// bytes may reach the peer before the send returns (one made outside the connection's
/// round, as the application's turn in `on_drained` is, is written at once), so the count
/// may trail the peer's last read by a moment: it is waited for, briefly.
fn all_sends_returned(sent: &AtomicUsize) {
    common::wait_until(Duration::from_secs(2), || sent.load(Ordering::SeqCst) == 64);
    assert_eq!(sent.load(Ordering::SeqCst), 64, "all of them, once read");
}

#[test]
fn send_waits_while_the_peer_does_not_read() {
    let (addr, sent, _) = start_limits();
    bounded(LIMIT, move || {
        let mut ws = connect(addr, "/flood");
        std::thread::sleep(Duration::from_millis(500));
        // The write bound (1 MiB) and the sockets' buffers hold a few messages, not 64.
        let early = sent.load(Ordering::SeqCst);
        assert!(early < 32, "{early} MiB sent to a peer that read nothing");
        for i in 0..64 {
            match ws.read().unwrap() {
                TMessage::Binary(b) => assert_eq!(b.len(), 1 << 20, "message {i}"),
                other => panic!("message {i}: {other:?}"),
            }
        }
        all_sends_returned(&sent);
    });
}

#[test]
fn reads_pause_while_the_application_takes_nothing() {
    let (addr, _, got) = start_limits();
    bounded(LIMIT, move || {
        let mut ws = connect(addr, "/sink");
        ws.get_mut()
            .set_write_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let started = std::time::Instant::now();
        let mut written = 0usize;
        // Frames of 1 MiB until the socket stops taking them (the server holds its reads
        // once 1 MiB of messages waits for the application).
        while written < 64 << 20 && started.elapsed() < Duration::from_millis(700) {
            match ws.send(TMessage::binary(vec![2u8; 1 << 20])) {
                Ok(()) => written += 1 << 20,
                Err(_) => break,
            }
        }
        assert!(
            written < 32 << 20,
            "{} MiB taken while the application read nothing",
            written >> 20
        );
        // Once the application reads again, every message the socket took arrives.
        assert!(
            common::wait_until(Duration::from_secs(10), || got.load(Ordering::SeqCst)
                >= written),
            "{} of {written} bytes arrived",
            got.load(Ordering::SeqCst)
        );
    });
}

/// RFC 8441 by hand with Python's `h2`: the server's SETTINGS_ENABLE_CONNECT_PROTOCOL, a
/// CONNECT with `:protocol: websocket` to `argv[3]` (over TLS with ALPN `h2` when `argv[4]`
/// names the CA to trust), and helpers to send masked frames and
/// read DATA (acknowledged, so the windows reopen). Prints what it saw, one line each.
const PY_H2_WS: &str = r#"
import sys, socket, struct, os, time
import h2.connection, h2.config, h2.events, h2.settings
port, validate, path = int(sys.argv[1]), sys.argv[2] == "validate", sys.argv[3]
ca = sys.argv[4] if len(sys.argv) > 4 else None
s = socket.create_connection(("127.0.0.1", port)); s.settimeout(10)
if ca:
    import ssl
    ctx = ssl.create_default_context(cafile=ca); ctx.set_alpn_protocols(["h2", "http/1.1"])
    s = ctx.wrap_socket(s, server_hostname="localhost")
    print("alpn", s.selected_alpn_protocol())
c = h2.connection.H2Connection(h2.config.H2Configuration(
    client_side=True, header_encoding="utf-8", validate_outbound_headers=validate))
c.initiate_connection(); s.sendall(c.data_to_send())
def pump():
    data = s.recv(65536)
    if not data:
        raise EOFError
    evs = c.receive_data(data)
    s.sendall(c.data_to_send())
    return evs
def send(opcode, payload):
    mask = os.urandom(4)
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    c.send_data(1, bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + body)
    s.sendall(c.data_to_send())
settings = None
while settings is None:
    for e in pump():
        if isinstance(e, h2.events.RemoteSettingsChanged):
            settings = e.changed_settings
seen = settings.get(h2.settings.SettingCodes.ENABLE_CONNECT_PROTOCOL)
print("enable_connect_protocol", seen.new_value if seen else None)
c.send_headers(1, [(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "https" if ca else "http"),
    (":path", path), (":authority", "127.0.0.1:%d" % port), ("sec-websocket-version", "13")])
s.sendall(c.data_to_send())
data, ended, status = bytearray(), False, None
def until(cond):
    global data, ended, status
    while not cond():
        for e in pump():
            if isinstance(e, h2.events.ResponseReceived):
                h = dict(e.headers)
                status = h[":status"]
                print("status", status, "sec-websocket-accept" in h)
            elif isinstance(e, h2.events.DataReceived):
                data += e.data
                c.acknowledge_received_data(e.flow_controlled_length, 1)
                s.sendall(c.data_to_send())
            elif isinstance(e, h2.events.StreamEnded):
                ended = True
            elif isinstance(e, h2.events.StreamReset) and not ended:
                # After END_STREAM, RST_STREAM(NO_ERROR) only stops our sending (§8.1).
                print("reset", e.error_code.name)
                sys.exit(0)
"#;

/// An echo and the close handshake, after [`PY_H2_WS`].
const PY_H2_ECHO: &str = r#"
send(1, b"hello")
until(lambda: len(data) >= 7)
print("echo", data[:7].hex()); data = data[7:]
send(8, struct.pack("!H", 1000))
until(lambda: ended)
print("close", data.hex(), "end_stream", ended)
"#;

/// After [`PY_H2_WS`]: reads nothing for a while (the windows close), then all of
/// `/flood`'s 64 binary messages of 1 MiB (a 10-byte frame header each).
const PY_H2_DRAIN: &str = r#"
until(lambda: status)
time.sleep(1.5)
until(lambda: len(data) >= 64 * ((1 << 20) + 10))
print("read", len(data))
"#;
/// After [`PY_H2_WS`]: binary messages of 1 MiB (mask 0, for speed) as fast as the
/// windows let them out, for 0.7 s (or 64 MiB); then how many KiB went.
const PY_H2_FLOOD: &str = r#"
until(lambda: status)
msg = bytes([0x82, 0xff]) + struct.pack("!Q", 1 << 20) + bytes(4) + b"\x02" * (1 << 20)
pending, sent, start = b"", 0, time.time()
s.settimeout(0.05)
while time.time() - start < 0.7 and sent < 64 << 20:
    if not pending:
        pending = msg
    n = min(c.local_flow_control_window(1), c.max_outbound_frame_size, len(pending))
    if n > 0:
        c.send_data(1, pending[:n]); pending = pending[n:]; sent += n
        s.sendall(c.data_to_send())
    else:
        try:
            pump()
        except socket.timeout:
            pass
print("sent", sent >> 10)
"#;

fn start_h2(extended_connect: bool) -> SocketAddr {
    let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let addr = listener.local_addr().unwrap();
    let mut cfg = fibr::http::ServerConfig::default();
    cfg.http2.extended_connect = extended_connect;
    drop(fibr::spawn(async move {
        if let Err(e) = fibr::serve(listener, app()).with_config(cfg).await {
            eprintln!("serve failed: {e}");
        }
    }));
    addr
}

fn py_h2_ws(addr: SocketAddr, validate: bool, path: &str, tail: &str) -> String {
    py_h2_ws_with(addr, validate, path, tail, None)
}

/// [`py_h2_ws`], over TLS trusting the CA at `ca` when given.
fn py_h2_ws_with(
    addr: SocketAddr,
    validate: bool,
    path: &str,
    tail: &str,
    ca: Option<&std::path::Path>,
) -> String {
    common::require_python("h2");
    let script = format!("{PY_H2_WS}{tail}");
    let out = Command::new("timeout")
        .args(["30", "python3", "-c", &script, &addr.port().to_string()])
        .args([if validate { "validate" } else { "raw" }, path])
        .args(ca)
        .output()
        .expect("python3");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "python h2 failed: {stderr}\n{stdout}");
    stdout
}

#[test]
fn a_websocket_over_h2c_with_extended_connect() {
    let addr = start_h2(true);
    bounded(LIMIT, move || {
        assert_eq!(
            py_h2_ws(addr, true, "/ws", PY_H2_ECHO),
            "enable_connect_protocol 1\n\
             status 200 False\n\
             echo 810568656c6c6f\n\
             close 880203e8 end_stream True\n"
        );
    });
}

/// `wss://` over HTTP/2: ALPN picks h2 on fibr's TLS, and the extended CONNECT works there
/// as over h2c.
#[cfg(feature = "tls")]
#[test]
fn a_websocket_over_h2_on_tls_by_alpn() {
    let pki = common::pki::Pki::new();
    let leaf = pki.server(&["localhost"]);
    let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let addr = listener.local_addr().unwrap();
    let tls = Arc::new(pki.server_config(&leaf));
    drop(fibr::spawn(async move {
        let _ = fibr::serve(listener, app()).with_tls(tls).await;
    }));
    bounded(LIMIT, move || {
        assert_eq!(
            py_h2_ws_with(addr, true, "/ws", PY_H2_ECHO, Some(pki.ca_pem.path())),
            "alpn h2\n\
             enable_connect_protocol 1\n\
             status 200 False\n\
             echo 810568656c6c6f\n\
             close 880203e8 end_stream True\n"
        );
    });
}

#[test]
fn protocol_is_refused_without_extended_connect() {
    let addr = start_h2(false);
    bounded(LIMIT, move || {
        // Not advertised: `:protocol` is an unknown pseudo-header, the request malformed
        // (RFC 9113 §8.1.1): the stream is reset and nothing is dispatched.
        let out = py_h2_ws(addr, false, "/ws", PY_H2_ECHO);
        assert!(
            out.starts_with("enable_connect_protocol None\nreset PROTOCOL_ERROR\n"),
            "{out}"
        );
    });
}

#[test]
fn over_h2_send_waits_while_the_peer_does_not_read() {
    let (addr, sent, _) = start_limits();
    bounded(LIMIT, move || {
        let client = std::thread::spawn(move || py_h2_ws(addr, true, "/flood", PY_H2_DRAIN));
        std::thread::sleep(Duration::from_millis(1000));
        // The sockets' buffers and the write bound (1 MiB) hold a message or two.
        let early = sent.load(Ordering::SeqCst);
        assert!(early < 4, "{early} MiB sent to a peer that read nothing");
        let out = client.join().unwrap();
        assert_eq!(
            out,
            format!(
                "enable_connect_protocol 1\nstatus 200 False\nread {}\n",
                64 * ((1 << 20) + 10)
            )
        );
        all_sends_returned(&sent);
    });
}

#[test]
fn over_h2_reads_pause_while_the_application_takes_nothing() {
    let (addr, _, got) = start_limits();
    bounded(LIMIT, move || {
        let out = py_h2_ws(addr, true, "/sink", PY_H2_FLOOD);
        let kib: usize = out
            .strip_prefix("enable_connect_protocol 1\nstatus 200 False\nsent ")
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("{out}"));
        // Held reads stop crediting the stream's window: the 1 MiB read bound and the
        // 16 MiB window, not the 64 MiB that 0.7 s of sending carries unheld.
        assert!(
            kib < 32 << 10,
            "{kib} KiB taken while the application read nothing"
        );
    });
    let _ = got;
}
