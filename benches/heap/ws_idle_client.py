#!/usr/bin/env python3
"""Holds N idle WebSocket connections to ws://127.0.0.1:PORT/ws, each after one echo.

Usage: ws_idle_client.py PORT N [HOLD_SECONDS] [DEFLATE 0|1] [READY_FILE]

As benches/compare/ws.rs opens them for idle-ws (a 64 B text echo) and idle-wsdeflate
(permessage-deflate offered without context takeover, one compressed 1 KiB echo).
READY_FILE is written once all are open. See README.md.
"""
import os, socket, struct, sys, time, zlib

port, n = int(sys.argv[1]), int(sys.argv[2])
hold = float(sys.argv[3]) if len(sys.argv) > 3 else 1e9
deflate = len(sys.argv) > 4 and sys.argv[4] == "1"
ready = sys.argv[5] if len(sys.argv) > 5 else None
ext = ("sec-websocket-extensions: permessage-deflate; client_no_context_takeover; "
       "server_no_context_takeover\r\n") if deflate else ""
REQ = ("GET /ws HTTP/1.1\r\nhost: bench\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
       "sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n"
       + ext + "\r\n").encode()

def frame(i):
    if deflate:
        p = (('{"conn":%d,"seq":1,"user":"user-%04d","ok":true},' % (i, i)) * 40)[:1024].encode()
        c = zlib.compressobj(1, zlib.DEFLATED, -15)
        body = (c.compress(p) + c.flush(zlib.Z_SYNC_FLUSH))[:-4]
        b0 = 0xC1
    else:
        body = (b"%04d-" % i + b"x" * 64)[:64]
        b0 = 0x81
    mask = os.urandom(4)
    n = len(body)
    head = bytes([b0]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n))
    return head + mask + bytes(b ^ mask[j % 4] for j, b in enumerate(body))

conns = []
t0 = time.time()
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(REQ)
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        d = s.recv(1)
        if not d:
            raise SystemExit("closed in handshake")
        head += d
    assert b" 101 " in head, head
    s.sendall(frame(i))
    got = s.recv(65536)
    assert got, "no echo"
    conns.append(s)
print(f"{n} open in {time.time() - t0:.1f}s", flush=True)
if ready:
    open(ready, "w").write("1")
time.sleep(hold)
