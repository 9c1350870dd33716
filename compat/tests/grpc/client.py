"""grpcio against fibr (run by compat/tests/grpc.rs: python_grpcio_client).

Usage: client.py HOST:PORT

Prints `watch: SERVING` once its Health/Watch of fibr.test.Echo got the current status;
the test then sets NOT_SERVING, which this script must see (`watch: NOT_SERVING`). Prints
`ok` last when every check passed; a failed check raises (exit status 1).
"""

import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

ECHO = "fibr.test.Echo"
TIMEOUT = 20


def say(line):
    print(line, flush=True)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def main(target):
    channel = grpc.insecure_channel(target)
    grpc.channel_ready_future(channel).result(timeout=TIMEOUT)

    # Health/Check: the server, a service, an unknown service (NOT_FOUND).
    health = health_pb2_grpc.HealthStub(channel)
    serving = health_pb2.HealthCheckResponse.SERVING
    r = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=TIMEOUT)
    check(r.status == serving, f"server status {r}")
    r = health.Check(health_pb2.HealthCheckRequest(service=ECHO), timeout=TIMEOUT)
    check(r.status == serving, f"{ECHO} status {r}")
    try:
        health.Check(health_pb2.HealthCheckRequest(service="no.Such"), timeout=TIMEOUT)
        raise AssertionError("an unknown service was found")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.NOT_FOUND, f"unknown service: {e}")
    say("check: ok")

    # Echo on raw bytes (no serializers).
    unary = channel.unary_unary(f"/{ECHO}/Unary")
    resp, call = unary.with_call(
        b"hello", metadata=[("x-echo-meta", "from python")], timeout=TIMEOUT
    )
    check(resp == b"hello", f"unary {resp!r}")
    initial = dict(call.initial_metadata())
    check(initial.get("x-echo-meta") == "from python", f"metadata {initial}")
    check(call.code() == grpc.StatusCode.OK, f"code {call.code()}")

    big = bytes(i % 251 for i in range(4 << 20))
    check(unary(big, timeout=TIMEOUT) == big, "the 4 MiB echo differs")

    resp, call = unary.with_call(
        b"z" * 100_000, compression=grpc.Compression.Gzip, timeout=TIMEOUT
    )
    check(resp == b"z" * 100_000, "gzip echo")
    initial = dict(call.initial_metadata())
    check(initial.get("x-req-encoding") == "gzip", f"gzip request {initial}")

    try:
        unary(b"x", metadata=[("x-fail-code", "7")], timeout=TIMEOUT)
        raise AssertionError("no error")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.PERMISSION_DENIED, f"status {e}")
        check(e.details() == "failed on request", f"message {e.details()!r}")
        trailing = dict(e.trailing_metadata())
        check(trailing.get("x-detail") == "it failed", f"trailers {trailing}")

    try:
        unary(b"x", metadata=[("x-sleep-ms", "3000")], timeout=0.3)
        raise AssertionError("no deadline")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, f"deadline {e}")
    say("unary: ok")

    stream = channel.unary_stream(f"/{ECHO}/ServerStream")
    got = list(stream(b"5", timeout=TIMEOUT))
    check(got == [f"msg {i}".encode() for i in range(5)], f"server stream {got}")
    call = stream(b"2", metadata=[("x-fail-code", "10")], timeout=TIMEOUT)
    got = []
    try:
        for m in call:
            got.append(m)
        raise AssertionError("no error after the stream")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.ABORTED, f"stream status {e}")
        trailing = dict(e.trailing_metadata())
        check(trailing.get("x-detail") == "it failed", f"stream trailers {trailing}")
    check(got == [b"msg 0", b"msg 1"], f"before the error {got}")
    call = stream(b"forever", metadata=[("x-sleep-ms", "5")], timeout=TIMEOUT)
    check(next(call) == b"msg 0", "forever")
    call.cancel()

    collect = channel.stream_unary(f"/{ECHO}/ClientStream")
    got = collect(iter([b"a", b"bc", b"", b"def"]), timeout=TIMEOUT)
    check(got == b"abcdef", f"client stream {got!r}")

    bidi = channel.stream_stream(f"/{ECHO}/Bidi")
    got = list(bidi(iter([b"1", b"2", b"3"]), timeout=TIMEOUT))
    check(got == [b"echo: 1", b"echo: 2", b"echo: 3"], f"bidi {got}")
    say("streams: ok")

    # Health/Watch: the current status, then the change the test makes.
    watch = health.Watch(health_pb2.HealthCheckRequest(service=ECHO), timeout=TIMEOUT)
    first = next(watch)
    check(first.status == serving, f"watch first {first}")
    say("watch: SERVING")
    second = next(watch)
    check(
        second.status == health_pb2.HealthCheckResponse.NOT_SERVING,
        f"watch update {second}",
    )
    say("watch: NOT_SERVING")
    watch.cancel()

    channel.close()
    say("ok")


if __name__ == "__main__":
    main(sys.argv[1])
