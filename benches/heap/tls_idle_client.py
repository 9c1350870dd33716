#!/usr/bin/env python3
"""Holds N idle TLS connections to a server, each after one `GET /` answered `hello`.

Usage: tls_idle_client.py PORT N [HOLD_SECONDS] [BATCH] [READY_FILE]

As benches/compare/tls.rs opens them: a batch's ClientHellos are all sent first (BATCH
handshakes in flight, default 500), then each handshake is finished and its request
answered; TLS 1.3, ALPN http/1.1, no SNI (the IP address), no resumption, no
certificate check. READY_FILE is written once all are open. See README.md.
"""
import socket
import ssl
import sys
import time

port, n = int(sys.argv[1]), int(sys.argv[2])
hold = float(sys.argv[3]) if len(sys.argv) > 3 else 1e9
batch_size = int(sys.argv[4]) if len(sys.argv) > 4 else 500
ready = sys.argv[5] if len(sys.argv) > 5 else None

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.set_alpn_protocols(["http/1.1"])
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
REQ = b"GET / HTTP/1.1\r\nhost: bench\r\n\r\n"

conns = []
t0 = time.time()
while len(conns) < n:
    batch = []
    for _ in range(min(batch_size, n - len(conns))):
        s = socket.create_connection(("127.0.0.1", port))
        t = ctx.wrap_socket(s, do_handshake_on_connect=False)
        t.setblocking(False)
        try:
            t.do_handshake()  # sends the ClientHello
        except ssl.SSLWantReadError:
            pass
        batch.append(t)
    for t in batch:
        t.setblocking(True)
        t.do_handshake()
        t.sendall(REQ)
        data = b""
        while not data.endswith(b"hello"):
            d = t.recv(4096)
            if not d:
                raise SystemExit("the server closed a connection")
            data += d
    conns.extend(batch)
print(f"{n} open in {time.time() - t0:.1f}s", flush=True)
if ready:
    open(ready, "w").write("1")
time.sleep(hold)
