//! CONNECT tunnel helpers (feature `tunnel` with `axum`): an axum app whose fallback
//! tunnels every CONNECT to the TCP origin it names (`fibr::http::tunnel`), and local
//! origins that echo, half-close first, or reset.

use axum::Router;
use fibr::http::tunnel::{self, UpgradeBody};
use http::{Request, Response, StatusCode};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The authority whose tunnel does not read for [`HOLD`], then counts what it reads and
/// answers the count: its peer must stop at the stream's window meanwhile.
pub const HOLD_AUTHORITY: &str = "hold.invalid:1";
pub const HOLD: Duration = Duration::from_secs(2);
/// The authority whose tunnel writes `x`, ends its side, and is dropped a little later,
/// unread: the server stops the peer's side of the stream too.
pub const DROP_AUTHORITY: &str = "drop.invalid:1";

fn status(code: StatusCode) -> Response<UpgradeBody> {
    let mut res = Response::new(UpgradeBody::default());
    *res.status_mut() = code;
    res
}

/// Tunnels a CONNECT to its target over TCP: `502` if the target refuses, the stream
/// reset (CONNECT_ERROR) if the target resets.
pub async fn connect_handler(mut req: Request<axum::body::Body>) -> Response<UpgradeBody> {
    let Ok(connect) = tunnel::accept(&mut req) else {
        return status(StatusCode::METHOD_NOT_ALLOWED);
    };
    let Some(target) = connect.authority().map(|a| a.to_string()) else {
        return status(StatusCode::BAD_REQUEST);
    };
    if target == HOLD_AUTHORITY {
        return connect.on_open(|mut t| async move {
            fibr::time::sleep(HOLD).await;
            let mut n = 0usize;
            let mut buf = vec![0u8; 16 * 1024];
            while let Ok(k @ 1..) = t.read(&mut buf).await {
                n += k;
            }
            let _ = t.write_all(n.to_string().as_bytes()).await;
        });
    }
    if target == DROP_AUTHORITY {
        return connect.on_open(|mut t| async move {
            let _ = t.write_all(b"x").await;
            let _ = t.shutdown().await;
            // Long after the response's end was acknowledged.
            fibr::time::sleep(Duration::from_millis(300)).await;
        });
    }
    let origin = match fibr::net::TcpStream::connect(target.as_str()).await {
        Ok(s) => s,
        Err(_) => return status(StatusCode::BAD_GATEWAY),
    };
    connect.on_open(|mut t| async move {
        let mut origin = origin;
        if tokio::io::copy_bidirectional(&mut t, &mut origin)
            .await
            .is_err()
        {
            t.abort();
        }
    })
}

pub fn tunnel_app() -> Router {
    Router::new().fallback(connect_handler)
}

/// What the origins saw.
#[derive(Default)]
pub struct Seen {
    /// Bytes the half-closing origin read after its own half-close.
    pub after_half_close: Vec<u8>,
    /// Connections the echo origin saw end.
    pub echo_ended: usize,
}

/// Local TCP origins, each on its own port, each connection on its own thread.
pub struct Origins {
    /// Echoes; at the client's EOF, half-closes.
    pub echo: SocketAddr,
    /// Writes `bye`, half-closes at once, then keeps reading until EOF (into `seen`).
    pub greet: SocketAddr,
    /// Reads a little, then resets the connection (SO_LINGER 0).
    pub rst: SocketAddr,
    /// A port nothing listens on.
    pub closed: SocketAddr,
    pub seen: Arc<Mutex<Seen>>,
}

fn serve(f: impl Fn(TcpStream) + Send + Sync + 'static) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let f = Arc::new(f);
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let f = f.clone();
            std::thread::spawn(move || f(s));
        }
    });
    addr
}

impl Origins {
    pub fn start() -> Origins {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let s = seen.clone();
        let echo = serve(move |mut c| {
            let mut buf = [0u8; 16 * 1024];
            while let Ok(n @ 1..) = c.read(&mut buf) {
                if c.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            let _ = c.shutdown(std::net::Shutdown::Write);
            s.lock().unwrap().echo_ended += 1;
        });
        let s = seen.clone();
        let greet = serve(move |mut c| {
            let _ = c.write_all(b"bye");
            let _ = c.shutdown(std::net::Shutdown::Write);
            let mut rest = Vec::new();
            let _ = c.read_to_end(&mut rest);
            s.lock().unwrap().after_half_close.extend_from_slice(&rest);
        });
        let rst = serve(|mut c| {
            let mut buf = [0u8; 4];
            let _ = c.read(&mut buf);
            reset(c);
        });
        let closed = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        Origins {
            echo,
            greet,
            rst,
            closed,
            seen,
        }
    }

    /// The origins' ports, as the Python peers take them.
    pub fn args(&self) -> Vec<String> {
        [self.echo, self.greet, self.rst, self.closed]
            .iter()
            .map(|a| a.port().to_string())
            .collect()
    }
}

/// Closes `c` with a RST (SO_LINGER 0).
pub fn reset(c: TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket descriptor and a `linger` of the size passed.
    unsafe {
        libc::setsockopt(
            c.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(c);
}

/// The h2 client: argv = server port, the echo, greet, rst and closed origins' ports, the
/// holding authority (`-`: no such step), and a CA file for TLS with ALPN h2 (`-`: h2c with
/// prior knowledge).
pub const PY_H2_CONNECT: &str = r#"
import socket, ssl, sys, time
import h2.connection, h2.config, h2.events

port, echo, greet, rst, closed = (int(a) for a in sys.argv[1:6])
hold, ca = sys.argv[6], sys.argv[7]
s = socket.create_connection(("127.0.0.1", port))
if ca != "-":
    ctx = ssl.create_default_context(cafile=ca)
    ctx.set_alpn_protocols(["h2"])
    s = ctx.wrap_socket(s, server_hostname="localhost")
    assert s.selected_alpn_protocol() == "h2", s.selected_alpn_protocol()
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
c.initiate_connection()
s.sendall(c.data_to_send())
state = {}

def pump(until, timeout=10.0, fail=True):
    deadline = time.time() + timeout
    while not until():
        left = deadline - time.time()
        if left <= 0:
            if fail:
                raise SystemExit("timed out; state: %r" % {k: (v["status"], len(v["data"]), v["ended"], v["reset"]) for k, v in state.items()})
            return
        s.settimeout(left)
        try:
            d = s.recv(65536)
        except socket.timeout:
            continue
        if not d:
            raise SystemExit("the server closed the connection")
        for ev in c.receive_data(d):
            st = state.get(getattr(ev, "stream_id", None))
            if st is None:
                continue
            if isinstance(ev, h2.events.ResponseReceived):
                st["status"] = dict(ev.headers)[":status"]
            elif isinstance(ev, h2.events.DataReceived):
                st["data"] += ev.data
                c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                st["ended"] = True
            elif isinstance(ev, h2.events.StreamReset):
                st["reset"] = ev.error_code
        s.sendall(c.data_to_send())

def connect(authority):
    sid = c.get_next_available_stream_id()
    state[sid] = {"status": None, "data": b"", "ended": False, "reset": None}
    c.send_headers(sid, [(":method", "CONNECT"), (":authority", authority)])
    s.sendall(c.data_to_send())
    pump(lambda: state[sid]["status"] is not None or state[sid]["reset"] is not None)
    return sid, state[sid]

def send(sid, data, end=False):
    while data:
        n = min(len(data), c.local_flow_control_window(sid), c.max_outbound_frame_size)
        if n == 0:
            pump(lambda: c.local_flow_control_window(sid) > 0)
            continue
        c.send_data(sid, data[:n])
        data = data[n:]
        s.sendall(c.data_to_send())
    if end:
        c.end_stream(sid)
        s.sendall(c.data_to_send())

origin = lambda p: "127.0.0.1:%d" % p

# Bytes both ways, then the client half-closes: the origin sees EOF and half-closes too.
sid, st = connect(origin(echo))
assert st["status"] == "200", st
send(sid, b"hello")
pump(lambda: st["data"] == b"hello")
big = bytes(i % 251 for i in range(300000))
send(sid, big)
pump(lambda: len(st["data"]) >= 5 + len(big))
assert st["data"] == b"hello" + big, len(st["data"])
send(sid, b"", end=True)
pump(lambda: st["ended"])
print("echo")

# The origin half-closes first; the client still sends after the END_STREAM it got.
sid, st = connect(origin(greet))
pump(lambda: st["ended"])
assert st["data"] == b"bye", st["data"]
send(sid, b"late data", end=True)
print("half-close")

# The client resets a tunnel: the handler's read fails and the origin's connection ends.
sid, st = connect(origin(echo))
send(sid, b"x")
pump(lambda: st["data"] == b"x")
c.reset_stream(sid, 8)
s.sendall(c.data_to_send())
print("reset")

# The origin resets: the stream is reset with CONNECT_ERROR (0xa).
sid, st = connect(origin(rst))
assert st["status"] == "200", st
send(sid, b"boom")
pump(lambda: st["reset"] is not None or st["ended"])
assert st["reset"] == 10, st
print("connect-error")

# Nothing listens: the handler answers 502.
sid, st = connect(origin(closed))
assert st["status"] == "502", st
print("refused")

if hold == "-":
    sys.exit(0)

# A tunnel that does not read: the client stops at the stream's window, and goes on
# once the handler reads.
sid, st = connect(hold)
total = 1 << 20
window = c.local_flow_control_window(sid)
c.send_data(sid, b"w" * min(window, c.max_outbound_frame_size))
s.sendall(c.data_to_send())
sent = min(window, c.max_outbound_frame_size)
while c.local_flow_control_window(sid) > 0:
    n = min(c.local_flow_control_window(sid), c.max_outbound_frame_size)
    c.send_data(sid, b"w" * n)
    sent += n
    s.sendall(c.data_to_send())
pump(lambda: False, timeout=0.7, fail=False)
assert c.local_flow_control_window(sid) == 0, c.local_flow_control_window(sid)
assert sent == window, (sent, window)
send(sid, b"w" * (total - sent), end=True)
pump(lambda: st["ended"])
assert st["data"] == str(total).encode(), st["data"]
print("flow-control", window)
"#;

/// The aioquic client: argv = server port, CA file, the echo, greet, rst and closed
/// origins' ports, the holding authority (`-`: no such step).
pub const PY_H3_CONNECT: &str = r#"
import asyncio, sys
from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import StopSendingReceived, StreamReset

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
        if isinstance(event, StopSendingReceived) and event.stream_id in self.st:
            self.st[event.stream_id]["stopped"] = event.error_code
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
        st = self.st[sid] = {"status": None, "data": b"", "ended": False, "reset": None, "stopped": None}
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

        if hold == b"-":
            return
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

        # A tunnel dropped unread while the client sends nothing: the server stops the
        # client's side (STOP_SENDING, H3_NO_ERROR) instead of waiting on it.
        sid, st = await c.tunnel(b"drop.invalid:1")
        await c.until(lambda: st["ended"] and st["stopped"] is not None)
        assert st["data"] == b"x" and st["stopped"] == 0x100, st
        print("dropped", flush=True)

asyncio.run(main())
"#;
