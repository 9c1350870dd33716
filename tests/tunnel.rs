//! CONNECT tunnels in a handler (`fibr::http::tunnel`) against a peer we did not write:
//! Python's `h2` sends plain CONNECTs (RFC 9113 §8.5) over h2c with prior knowledge to an
//! axum app whose fallback pipes each tunnel to a local TCP origin. Bytes both ways,
//! half-close each way, a reset from the client, a reset from the origin (CONNECT_ERROR),
//! a refused target, and flow control: a tunnel that does not read stops the client at
//! the stream's window. HTTP/1.1 CONNECT reaches the same handler.

mod common;

use common::tunnel::{tunnel_app, Origins, HOLD_AUTHORITY};
use common::{bounded, start};
use fibr::http::ServerConfig;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// The h2 client: argv = server port, then the echo, greet, rst and closed origins' ports.
const PY_H2_CONNECT: &str = r#"
import socket, sys, time
import h2.connection, h2.config, h2.events

port, echo, greet, rst, closed = (int(a) for a in sys.argv[1:6])
hold = sys.argv[6]
s = socket.create_connection(("127.0.0.1", port))
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

fn run(cmd: &mut Command) -> (bool, String, String) {
    let out = cmd.stdin(Stdio::null()).output().expect("run a peer");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn python_h2_connects_through_a_handler_tunnel() {
    bounded(LIMIT, || {
        common::require_python("h2");
        let origins = Origins::start();
        let addr = start(tunnel_app(), ServerConfig::default());
        let (ok, out, err) = run(Command::new("timeout")
            .args(["40", "python3", "-c", PY_H2_CONNECT])
            .arg(addr.port().to_string())
            .args(origins.args())
            .arg(HOLD_AUTHORITY));
        assert!(ok, "python h2 failed: {err}\n{out}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines,
            [
                "echo",
                "half-close",
                "reset",
                "connect-error",
                "refused",
                "flow-control 65536"
            ]
        );
        // The greeting origin read what came after its own half-close; the reset
        // tunnel's origin connection ended, as did the first.
        assert!(common::wait_until(Duration::from_secs(5), || {
            let seen = origins.seen.lock().unwrap();
            seen.after_half_close == b"late data" && seen.echo_ended == 2
        }));
    });
}

/// HTTP/1.1 CONNECT reaches the same handler: the connection becomes the tunnel once the
/// `200` is written (handed back from hyper on a plain connection).
#[test]
fn http1_connect_through_a_handler_tunnel() {
    bounded(LIMIT, || {
        let origins = Origins::start();
        let addr = start(tunnel_app(), ServerConfig::default());
        let mut s = common::connect(addr);
        let target = origins.echo;
        write!(
            s,
            "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\nearly"
        )
        .unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            s.read_exact(&mut b).unwrap();
            head.push(b[0]);
        }
        let head = String::from_utf8(head).unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        s.write_all(b" and late").unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let (back, err) = common::read_to_eof(&mut s);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(back, b"early and late");
    });
}
