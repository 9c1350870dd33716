//! WebSocket over HTTP/3 (RFC 9220) on fibr's server, against aioquic's HTTP/3 layer: the
//! server advertises SETTINGS_ENABLE_CONNECT_PROTOCOL, an extended CONNECT with
//! `:protocol: websocket` reaches the same `fibr::ws::WebSocketUpgrade` as over HTTP/1.1
//! and HTTP/2, and the WebSocket frames (masked by hand) ride the stream's DATA:
//! messages both ways, ping, the close handshake, permessage-deflate; `:protocol` on a
//! GET is a malformed request (H3_MESSAGE_ERROR). And fibr's own client over HTTP/3
//! (`fibr::client` with `http3_prior_knowledge`) against the same server.

mod common;

use axum::routing::any;
use axum::Router;
use common::h3::{h3_serve_app, https_get, LIMIT};
use common::pki::Pki;
use common::ws_echo::echo;
use fibr::client::Client;
use fibr::ws::{CloseFrame, Config, Connector, DeflateConfig, Message, WebSocketUpgrade};
use std::net::SocketAddr;
use std::sync::Arc;

fn app() -> Router {
    Router::new().route(
        "/ws",
        any(|ws: WebSocketUpgrade| async move {
            ws.deflate(DeflateConfig::default()).on_upgrade(echo)
        }),
    )
}

fn start(pki: &Pki) -> SocketAddr {
    let (addr, serve) = h3_serve_app(pki, app());
    drop(fibr::spawn(async move {
        if let Err(e) = serve.await {
            eprintln!("serve failed: {e}");
        }
    }));
    addr
}

/// argv: server port, CA file.
const PY_WS_H3: &str = r#"
import asyncio, os, struct, sys, zlib
from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import StreamReset

port, ca = int(sys.argv[1]), sys.argv[2]

def frame(opcode, payload, rsv1=False):
    mask = os.urandom(4)
    b0 = 0x80 | (0x40 if rsv1 else 0) | opcode
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", b0, 0x80 | n)
    elif n < 65536:
        head = struct.pack("!BBH", b0, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", b0, 0x80 | 127, n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))

def parse(buf):
    """The complete server frames in buf: [(b0, payload)], and the rest."""
    out = []
    while len(buf) >= 2:
        b0, b1 = buf[0], buf[1]
        assert b1 & 0x80 == 0, "a masked server frame"
        n, at = b1 & 0x7f, 2
        if n == 126:
            if len(buf) < 4: break
            n, at = struct.unpack("!H", buf[2:4])[0], 4
        elif n == 127:
            if len(buf) < 10: break
            n, at = struct.unpack("!Q", buf[2:10])[0], 10
        if len(buf) < at + n: break
        out.append((b0, buf[at:at + n]))
        buf = buf[at + n:]
    return out, buf

class Client(QuicConnectionProtocol):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.h3 = H3Connection(self._quic)
        self.st = {}
        self.changed = asyncio.Event()

    def quic_event_received(self, event):
        if isinstance(event, StreamReset) and event.stream_id in self.st:
            self.st[event.stream_id]["reset"] = event.error_code
        for ev in self.h3.handle_event(event):
            st = self.st.get(getattr(ev, "stream_id", None))
            if st is None:
                continue
            if isinstance(ev, HeadersReceived):
                st["headers"] = dict(ev.headers)
            elif isinstance(ev, DataReceived):
                st["raw"] += ev.data
                frames, st["raw"] = parse(st["raw"])
                st["frames"] += frames
            if getattr(ev, "stream_ended", False):
                st["ended"] = True
        self.changed.set()

    async def until(self, cond, timeout=10):
        async def wait():
            while not cond():
                self.changed.clear()
                await self.changed.wait()
        await asyncio.wait_for(wait(), timeout)

    async def open(self, method, extra=()):
        sid = self._quic.get_next_available_stream_id()
        st = self.st[sid] = {"headers": None, "raw": b"", "frames": [], "ended": False, "reset": None}
        head = [(b":method", method), (b":protocol", b"websocket"), (b":scheme", b"https"),
                (b":authority", b"localhost"), (b":path", b"/ws"),
                (b"sec-websocket-version", b"13")] + list(extra)
        self.h3.send_headers(sid, head)
        self.transmit()
        await self.until(lambda: st["headers"] is not None or st["reset"] is not None)
        return sid, st

    async def message(self, sid, st, data):
        self.h3.send_data(sid, data, end_stream=False)
        self.transmit()
        await self.until(lambda: st["frames"])
        return st["frames"].pop(0)

async def main():
    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name="localhost")
    cfg.load_verify_locations(ca)
    async with connect("127.0.0.1", port, configuration=cfg, create_protocol=Client) as c:
        await c.until(lambda: c.h3.received_settings is not None)
        assert c.h3.received_settings.get(0x08) == 1, c.h3.received_settings
        print("settings", flush=True)

        sid, st = await c.open(b"CONNECT")
        assert st["headers"][b":status"] == b"200", st
        assert b"sec-websocket-extensions" not in st["headers"], st["headers"]
        assert await c.message(sid, st, frame(0x1, b"hello")) == (0x81, b"hello")
        big = bytes(i % 251 for i in range(100000))
        assert await c.message(sid, st, frame(0x2, big)) == (0x82, big)
        assert await c.message(sid, st, frame(0x9, b"p")) == (0x8a, b"p")
        b0, payload = await c.message(sid, st, frame(0x1, b"close"))
        assert (b0, payload) == (0x88, struct.pack("!H", 4000) + b"bye"), (b0, payload)
        c.h3.send_data(sid, frame(0x8, payload[:2]), end_stream=True)
        c.transmit()
        await c.until(lambda: st["ended"])
        print("echo", flush=True)

        sid, st = await c.open(b"CONNECT", [(b"sec-websocket-extensions", b"permessage-deflate")])
        ext = st["headers"].get(b"sec-websocket-extensions", b"")
        assert ext.startswith(b"permessage-deflate"), st["headers"]
        text = b"fibr over h3 " * 100
        z = zlib.compressobj(wbits=-15)
        packed = z.compress(text) + z.flush(zlib.Z_SYNC_FLUSH)
        assert packed.endswith(b"\x00\x00\xff\xff")
        b0, payload = await c.message(sid, st, frame(0x1, packed[:-4], rsv1=True))
        if b0 & 0x40:
            payload = zlib.decompressobj(wbits=-15).decompress(payload + b"\x00\x00\xff\xff")
        assert (b0 & 0x8f, payload) == (0x81, text), (b0, len(payload))
        print("deflate", flush=True)

        sid, st = await c.open(b"GET")
        assert st["reset"] == 0x10e, st
        print("protocol-on-get", flush=True)

asyncio.run(main())
"#;

#[test]
fn aioquic_speaks_websocket_over_http3() {
    common::bounded(LIMIT * 2, || {
        common::require_python("aioquic");
        let pki = Pki::new();
        let addr = start(&pki);
        assert!(https_get(&pki, addr).starts_with("HTTP/1.1"));
        let args = [
            addr.port().to_string(),
            pki.ca_pem.path().display().to_string(),
        ];
        assert_eq!(
            common::python_lines(PY_WS_H3, &args),
            ["settings", "echo", "deflate", "protocol-on-get"]
        );
    });
}

#[test]
fn fibr_client_speaks_websocket_over_http3_to_fibr() {
    common::bounded(LIMIT, || {
        let pki = Pki::new();
        let addr = start(&pki);
        assert!(https_get(&pki, addr).starts_with("HTTP/1.1"));
        let client = Client::builder()
            .tls_config(Arc::new(pki.client_config()))
            .http3_prior_knowledge()
            .build_https();
        let connector = Connector::new().config(Config {
            deflate: Some(DeflateConfig::default()),
            ..Config::default()
        });
        let url = format!("wss://localhost:{}/ws", addr.port());
        fibr::run(async move {
            let (mut a, res) = connector.connect_over_http2(&client, &url).await?;
            assert_eq!(res.version(), http::Version::HTTP_3);
            let deflate = res.headers().get("sec-websocket-extensions");
            assert!(
                deflate.is_some_and(|v| v.as_bytes().starts_with(b"permessage-deflate")),
                "{deflate:?}"
            );
            // A second socket on the same connection.
            let (mut b, _) = connector.connect_over_http2(&client, &url).await?;
            let text = "fibr ".repeat(10_000);
            a.send(Message::text(text.clone())).await?;
            b.send(Message::text("b")).await?;
            assert_eq!(a.recv().await.unwrap()?, Message::text(text));
            assert_eq!(b.recv().await.unwrap()?, Message::text("b"));
            // Larger than a stream's windows, both ways.
            let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
            a.send(Message::binary(big.clone())).await?;
            assert_eq!(a.recv().await.unwrap()?, Message::binary(big));
            a.send(Message::Ping("x".into())).await?;
            assert_eq!(a.recv().await.unwrap()?, Message::Pong("x".into()));
            a.send(Message::text("close")).await?;
            assert_eq!(
                a.recv().await.unwrap()?,
                Message::Close(Some(CloseFrame {
                    code: 4000,
                    reason: "bye".into()
                }))
            );
            assert!(a.recv().await.is_none(), "the stream ends after the close");
            Ok::<_, fibr::ws::Error>(())
        })
        .expect("WebSocket over HTTP/3");
    });
}
