//! CONNECT tunnels over HTTP/3 (RFC 9114 §4.4) in a handler (`fibr::http::tunnel`),
//! against aioquic's HTTP/3 layer: the same axum app as `tests/tunnel.rs` pipes each
//! tunnel to a local TCP origin. Bytes both ways, half-close each way, a reset from the
//! client, a reset from the origin (H3_CONNECT_ERROR), a refused target, and QUIC flow
//! control holding a client whose tunnel does not read.

mod common;

use common::h3::{h3_serve_app, https_get, LIMIT};
use common::pki::Pki;
use common::tunnel::{tunnel_app, Origins, HOLD_AUTHORITY};
use std::net::SocketAddr;
use std::time::Duration;

/// argv: server port, CA file, the echo, greet, rst and closed origins' ports, the
/// holding authority.
const PY_H3_CONNECT: &str = r#"
import asyncio, sys
from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import StreamReset

port, ca = int(sys.argv[1]), sys.argv[2]
echo, greet, rst, closed = (int(a) for a in sys.argv[3:7])
hold = sys.argv[7].encode()

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
                st["status"] = dict(ev.headers)[b":status"]
            elif isinstance(ev, DataReceived):
                st["data"] += ev.data
            if getattr(ev, "stream_ended", False):
                st["ended"] = True
        self.changed.set()

    async def until(self, cond, timeout=10):
        async def wait():
            while not cond():
                self.changed.clear()
                await self.changed.wait()
        await asyncio.wait_for(wait(), timeout)

    async def tunnel(self, authority):
        sid = self._quic.get_next_available_stream_id()
        st = self.st[sid] = {"status": None, "data": b"", "ended": False, "reset": None}
        self.h3.send_headers(sid, [(b":method", b"CONNECT"), (b":authority", authority)])
        self.transmit()
        await self.until(lambda: st["status"] is not None or st["reset"] is not None)
        return sid, st

    def send(self, sid, data, end=False):
        self.h3.send_data(sid, data, end_stream=end)
        self.transmit()

async def main():
    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name="localhost")
    cfg.load_verify_locations(ca)
    origin = lambda p: b"127.0.0.1:%d" % p
    async with connect("127.0.0.1", port, configuration=cfg, create_protocol=Client) as c:
        sid, st = await c.tunnel(origin(echo))
        assert st["status"] == b"200", st
        c.send(sid, b"hello")
        await c.until(lambda: st["data"] == b"hello")
        big = bytes(i % 251 for i in range(300000))
        c.send(sid, big)
        await c.until(lambda: len(st["data"]) >= 5 + len(big))
        assert st["data"] == b"hello" + big, len(st["data"])
        c.send(sid, b"", end=True)
        await c.until(lambda: st["ended"])
        print("echo", flush=True)

        sid, st = await c.tunnel(origin(greet))
        await c.until(lambda: st["ended"])
        assert st["data"] == b"bye", st
        c.send(sid, b"late data", end=True)
        await asyncio.sleep(0.2)
        print("half-close", flush=True)

        sid, st = await c.tunnel(origin(echo))
        c.send(sid, b"x")
        await c.until(lambda: st["data"] == b"x")
        c._quic.reset_stream(sid, 0x10c)
        c.transmit()
        print("reset", flush=True)

        sid, st = await c.tunnel(origin(rst))
        assert st["status"] == b"200", st
        c.send(sid, b"boom")
        await c.until(lambda: st["reset"] is not None or st["ended"])
        assert st["reset"] == 0x10f, st
        print("connect-error", flush=True)

        sid, st = await c.tunnel(origin(closed))
        assert st["status"] == b"502", st
        print("refused", flush=True)

        # QUIC's flow control: the tunnel does not read, so the peer stops short of all
        # that is queued, at the stream's window; once it reads, all of it arrives.
        sid, st = await c.tunnel(hold)
        total = 8 << 20
        c.send(sid, b"w" * total)
        await asyncio.sleep(0.7)
        stream = c._quic._streams[sid]
        sent, window = stream.sender.highest_offset, stream.max_stream_data_remote
        assert sent < total and sent == window, (sent, window)
        c.send(sid, b"", end=True)
        await c.until(lambda: st["ended"], timeout=20)
        assert st["data"] == str(total).encode(), st
        print("flow-control", flush=True)

asyncio.run(main())
"#;

fn start(pki: &Pki) -> SocketAddr {
    let (addr, serve) = h3_serve_app(pki, tunnel_app());
    drop(fibr::spawn(async move {
        if let Err(e) = serve.await {
            eprintln!("serve failed: {e}");
        }
    }));
    addr
}

#[test]
fn aioquic_connects_through_a_handler_tunnel() {
    common::bounded(LIMIT * 2, || {
        common::require_python("aioquic");
        let pki = Pki::new();
        let origins = Origins::start();
        let addr = start(&pki);
        assert!(https_get(&pki, addr).starts_with("HTTP/1.1"));
        let out = std::process::Command::new("timeout")
            .args(["40", "python3", "-c", PY_H3_CONNECT])
            .arg(addr.port().to_string())
            .arg(pki.ca_pem.path())
            .args(origins.args())
            .arg(HOLD_AUTHORITY)
            .output()
            .expect("python3");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(
            lines,
            [
                "echo",
                "half-close",
                "reset",
                "connect-error",
                "refused",
                "flow-control"
            ]
        );
        assert!(common::wait_until(Duration::from_secs(5), || {
            let seen = origins.seen.lock().unwrap();
            seen.after_half_close == b"late data" && seen.echo_ended == 2
        }));
    });
}
