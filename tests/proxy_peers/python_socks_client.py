"""A client of fibr's proxy through python-socks (an implementation fibr did not write).

usage: python_socks_client.py TARGET_HOST TARGET_PORT PROXY_URL[,rdns] ...

For each proxy URL (socks5://, socks4://, http://, with user:password@ when given; a
",rdns" suffix lets the proxy resolve the target's name: SOCKS5 with a name, SOCKS4a),
opens a tunnel to the target, sends `GET / HTTP/1.1` and prints one line: `ok STATUS
BODY_LENGTH`, or `refused CODE` when the proxy refused (python-socks's ProxyError and its
reply code), or `error TEXT`.
"""
import sys

from python_socks import ProxyError
from python_socks.sync import Proxy


def fetch(url, host, port):
    rdns = url.endswith(",rdns")
    url = url.removesuffix(",rdns")
    try:
        sock = Proxy.from_url(url, rdns=rdns).connect(host, port, timeout=10)
    except ProxyError as e:
        return f"refused {e.error_code}"
    except Exception as e:  # noqa: BLE001 - every failure is reported, not raised
        return f"error {type(e).__name__}: {e}"
    with sock:
        sock.settimeout(10)
        sock.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = head.split(b" ", 2)[1].decode() if head.startswith(b"HTTP/1.1 ") else "?"
    return f"ok {status} {len(body)}"


def main():
    host, port, urls = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    for url in urls:
        print(fetch(url, host, port), flush=True)


main()
