#!/usr/bin/env bash
# Soak test: examples/hello (release) under a mixed load for DURATION seconds.
#
#   benches/soak.sh [DURATION]        # default 60 (CI runs 60; the issue asks for 600 once)
#
# The server is pinned on core 0, the load on core 1 (when there are two cores):
#   - wrk: keep-alive GET / (50 connections)
#   - h2load --h1 -m16: pipelined GET /json (8 connections, 16 in flight each)
#   - churn: ab (no keep-alive: one new connection per request) in a loop
#   - slow clients (python): heads trickled byte by byte, bodies trickled, /sse read
#     slowly, keep-alive reuse
# Every 5 s: the server's RSS and open descriptors. Fails (exit 1) if, after the warm-up,
# RSS goes more than 10% over its warm-up peak, if descriptors are left open once the load
# stops, if any response is not 2xx, or if a client saw errors. Prints a summary.
set -uo pipefail

DURATION=${1:-${DURATION:-60}}
INTERVAL=5
WARMUP=$((DURATION / 4 < 15 ? DURATION / 4 : 15))
[ "$WARMUP" -lt 5 ] && WARMUP=5
cd "$(dirname "$0")/.."

for tool in wrk h2load ab python3 taskset; do
  command -v "$tool" >/dev/null || { echo "soak: $tool is required" >&2; exit 2; }
done

if [ "$(nproc)" -ge 2 ]; then SERVER_CPU=0; LOAD_CPU=1; else SERVER_CPU=0; LOAD_CPU=0; fi

echo "== building examples/hello (release)"
cargo build --release --example hello >/dev/null 2>&1 || { cargo build --release --example hello; exit 2; }
BIN=target/release/examples/hello

WORK=$(mktemp -d /tmp/fibr-soak.XXXXXX)
SERVER_PID=
LOAD_PIDS=()
cleanup() {
  for p in "${LOAD_PIDS[@]}"; do kill "$p" 2>/dev/null; done
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

PORT=0 taskset -c "$SERVER_CPU" "$BIN" 2>"$WORK/server.log" &
SERVER_PID=$!
for _ in $(seq 100); do
  ADDR=$(grep -o 'http://[0-9.:]*' "$WORK/server.log" | head -1 | sed 's|http://||')
  [ -n "$ADDR" ] && break
  sleep 0.05
done
[ -n "${ADDR:-}" ] || { echo "soak: the server did not start"; cat "$WORK/server.log"; exit 2; }
URL="http://$ADDR"
curl -sf "$URL/" >/dev/null || { echo "soak: GET / failed"; exit 2; }

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$SERVER_PID/status"; }
fds() { ls "/proc/$SERVER_PID/fd" | wc -l; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$SERVER_PID/stat"; }

IDLE_FDS=$(fds)
IDLE_RSS=$(rss_kb)
echo "== soak: $URL for ${DURATION}s (warm-up ${WARMUP}s); server on core $SERVER_CPU, load on core $LOAD_CPU"
echo "   idle server: RSS ${IDLE_RSS} KiB, ${IDLE_FDS} fds"

# --- slow clients --------------------------------------------------------------------
cat >"$WORK/slow.py" <<'PY'
import json, socket, sys, threading, time

host, port = sys.argv[1].rsplit(":", 1)
port, duration = int(port), float(sys.argv[2])
deadline = time.time() + duration
stats = {"ok": 0, "non2xx": 0, "errors": 0, "kinds": {}}
lock = threading.Lock()

def note(kind, status=None, err=None):
    with lock:
        if err is not None:
            stats["errors"] += 1
            stats["kinds"][kind + ": " + type(err).__name__] = stats["kinds"].get(kind + ": " + type(err).__name__, 0) + 1
        elif 200 <= status < 300:
            stats["ok"] += 1
        else:
            stats["non2xx"] += 1
            stats["kinds"][kind + ": " + str(status)] = stats["kinds"].get(kind + ": " + str(status), 0) + 1

def connect():
    s = socket.create_connection((host, port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s

def read_response(f, slow=False):
    line = f.readline()
    if not line:
        raise EOFError("closed before a response")
    status = int(line.split()[1])
    length, chunked = None, False
    while True:
        h = f.readline()
        if h in (b"\r\n", b""):
            break
        k, _, v = h.decode("latin-1").partition(":")
        k = k.strip().lower()
        if k == "content-length":
            length = int(v)
        elif k == "transfer-encoding" and "chunked" in v.lower():
            chunked = True
    body = b""
    if chunked:
        while True:
            size = int(f.readline().split(b";")[0], 16)
            if size == 0:
                while f.readline() not in (b"\r\n", b""):
                    pass
                break
            while size:
                piece = f.read(min(size, 16 if slow else size))
                if not piece:
                    raise EOFError("closed in a body")
                body += piece
                size -= len(piece)
                if slow:
                    time.sleep(0.02)
            f.readline()
    elif length is not None:
        body = f.read(length)
    return status, body

def trickle_head():
    # A complete head, one byte every 10 ms, then keep-alive reuse.
    s = connect()
    f = s.makefile("rb")
    req = b"GET /users/7 HTTP/1.1\r\nHost: soak\r\nUser-Agent: slow\r\n\r\n"
    for b in req:
        s.sendall(bytes([b]))
        time.sleep(0.01)
    st, body = read_response(f)
    note("trickle-head", st)
    for _ in range(5):
        s.sendall(b"GET / HTTP/1.1\r\nHost: soak\r\n\r\n")
        st, _ = read_response(f)
        note("keep-alive", st)
    s.close()

def trickle_body():
    s = connect()
    f = s.makefile("rb")
    body = bytes(range(256)) * 16
    s.sendall(b"POST /echo HTTP/1.1\r\nHost: soak\r\nContent-Length: %d\r\n\r\n" % len(body))
    for i in range(0, len(body), 256):
        s.sendall(body[i:i + 256])
        time.sleep(0.02)
    st, got = read_response(f)
    note("trickle-body", st if got == body else 599)
    s.close()

def slow_sse():
    s = connect()
    f = s.makefile("rb")
    s.sendall(b"GET /sse HTTP/1.1\r\nHost: soak\r\n\r\n")
    st, body = read_response(f, slow=True)
    note("slow-sse", st if body.count(b"data: tick") == 5 else 598)
    s.close()

def worker(fn):
    while time.time() < deadline:
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - every failure is counted
            note(fn.__name__, err=e)
            time.sleep(0.1)

threads = [threading.Thread(target=worker, args=(fn,)) for fn in (trickle_head, trickle_head, trickle_body, trickle_body, slow_sse, slow_sse)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(stats))
PY

# --- load ----------------------------------------------------------------------------
taskset -c "$LOAD_CPU" wrk -t1 -c50 -d"${DURATION}s" --latency "$URL/" >"$WORK/wrk.out" 2>&1 &
LOAD_PIDS+=($!)
taskset -c "$LOAD_CPU" h2load --h1 -m16 -c8 -t1 -D "$DURATION" "$URL/json" >"$WORK/h2load.out" 2>&1 &
LOAD_PIDS+=($!)
# Each run is started only while the duration lasts and is always waited for, never cut
# short: every run started must end with exit status 0 and its report (ab.N.rc holds the
# status; a run without one did not end).
(
  end=$((SECONDS + DURATION))
  i=0
  while [ $SECONDS -lt $end ]; do
    taskset -c "$LOAD_CPU" ab -q -n 500 -c 4 "$URL/users/$i" >"$WORK/ab.$i.out" 2>&1
    echo $? >"$WORK/ab.$i.rc"
    i=$((i + 1))
  done
) &
LOAD_PIDS+=($!)
taskset -c "$LOAD_CPU" python3 "$WORK/slow.py" "$ADDR" "$DURATION" >"$WORK/slow.out" 2>&1 &
LOAD_PIDS+=($!)

# --- sampling ------------------------------------------------------------------------
T0=$SECONDS
CPU0=$(cpu_ticks)
WARM_PEAK=0
AFTER_PEAK=0
SAMPLES=()
printf '   %6s %10s %6s\n' "t(s)" "RSS(KiB)" "fds"
while [ $((SECONDS - T0)) -lt "$DURATION" ]; do
  sleep "$INTERVAL"
  t=$((SECONDS - T0))
  [ "$t" -gt "$DURATION" ] && break
  r=$(rss_kb); n=$(fds)
  [ -z "$r" ] && { echo "soak: the server died"; exit 1; }
  printf '   %6d %10d %6d\n' "$t" "$r" "$n"
  SAMPLES+=("$t:$r:$n")
  if [ "$t" -le "$WARMUP" ]; then
    [ "$r" -gt "$WARM_PEAK" ] && WARM_PEAK=$r
  else
    [ "$r" -gt "$AFTER_PEAK" ] && AFTER_PEAK=$r
  fi
done
CPU1=$(cpu_ticks)
for p in "${LOAD_PIDS[@]}"; do wait "$p"; done
LOAD_PIDS=()
LOADED_FOR=$((SECONDS - T0))

# Descriptors: back to the idle count once every client is gone.
FINAL_FDS=$(fds)
for _ in $(seq 50); do
  [ "$FINAL_FDS" -le "$IDLE_FDS" ] && break
  sleep 0.2
  FINAL_FDS=$(fds)
done
FINAL_RSS=$(rss_kb)

# --- results -------------------------------------------------------------------------
fail=()
num() { grep -oE "$1" "$2" | grep -oE '[0-9]+' | head -1; }

WRK_REQS=$(grep -oE '[0-9]+ requests in' "$WORK/wrk.out" | grep -oE '^[0-9]+')
WRK_RPS=$(grep -oE 'Requests/sec: *[0-9.]+' "$WORK/wrk.out" | grep -oE '[0-9.]+$')
WRK_NON2XX=$(num 'Non-2xx or 3xx responses: *[0-9]+' "$WORK/wrk.out"); WRK_NON2XX=${WRK_NON2XX:-0}
WRK_SOCKERR=$(grep -oE 'Socket errors:.*' "$WORK/wrk.out")
WRK_P99=$(grep -E '^ +99%' "$WORK/wrk.out" | awk '{print $2}')
[ -n "$WRK_REQS" ] || fail+=("wrk did not report: $(tail -3 "$WORK/wrk.out")")
[ "$WRK_NON2XX" -eq 0 ] || fail+=("wrk: $WRK_NON2XX non-2xx responses")
[ -z "$WRK_SOCKERR" ] || fail+=("wrk: $WRK_SOCKERR")

H2_LINE=$(grep -E '^requests:' "$WORK/h2load.out")
H2_CODES=$(grep -E '^status codes:' "$WORK/h2load.out")
H2_RPS=$(grep -oE 'finished in [^,]*, [0-9.]+ req/s' "$WORK/h2load.out" | grep -oE '[0-9.]+ req/s')
H2_OK=$(echo "$H2_LINE" | grep -oE '[0-9]+ succeeded' | grep -oE '[0-9]+')
H2_FAILED=$(echo "$H2_LINE" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+')
H2_ERRORED=$(echo "$H2_LINE" | grep -oE '[0-9]+ errored' | grep -oE '[0-9]+')
H2_NON2XX=$(echo "$H2_CODES" | grep -oE '[0-9]+ (3xx|4xx|5xx)' | awk '{s += $1} END {print s + 0}')
[ -n "$H2_OK" ] || fail+=("h2load did not report: $(tail -3 "$WORK/h2load.out")")
[ "${H2_FAILED:-1}" -eq 0 ] && [ "${H2_ERRORED:-1}" -eq 0 ] || fail+=("h2load: $H2_LINE")
[ "$H2_NON2XX" -eq 0 ] || fail+=("h2load: $H2_CODES")

AB_STARTED=0; AB_RUNS=0; AB_OK=0; AB_FAILED=0; AB_NON2XX=0; AB_BROKEN=()
for f in "$WORK"/ab.*.out; do
  [ -e "$f" ] || continue
  AB_STARTED=$((AB_STARTED + 1))
  rc=$(cat "${f%.out}.rc" 2>/dev/null)
  c=$(num 'Complete requests: *[0-9]+' "$f")
  if [ "$rc" != 0 ] || [ -z "$c" ]; then
    # No run is cut short (see the loop above): a run that failed (a connection reset or
    # refused, a timeout) or did not report is an error, wherever it came in the loop.
    AB_BROKEN+=("$(basename "$f" .out) (exit ${rc:-none}): $(tr '\r\n' '  ' <"$f" | grep -oE '[^ ].{0,160}$')")
    continue
  fi
  AB_RUNS=$((AB_RUNS + 1)); AB_OK=$((AB_OK + c))
  AB_FAILED=$((AB_FAILED + $(num 'Failed requests: *[0-9]+' "$f")))
  n=$(num 'Non-2xx responses: *[0-9]+' "$f"); AB_NON2XX=$((AB_NON2XX + ${n:-0}))
done
[ "$AB_RUNS" -gt 0 ] || fail+=("ab never completed a run")
[ ${#AB_BROKEN[@]} -eq 0 ] || fail+=("ab: ${#AB_BROKEN[@]} of $AB_STARTED runs failed, first: ${AB_BROKEN[0]}")
[ "$AB_FAILED" -eq 0 ] || fail+=("ab: $AB_FAILED failed requests")
[ "$AB_NON2XX" -eq 0 ] || fail+=("ab: $AB_NON2XX non-2xx responses")

SLOW=$(tail -1 "$WORK/slow.out")
SLOW_OK=$(echo "$SLOW" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ok"])' 2>/dev/null)
SLOW_BAD=$(echo "$SLOW" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["non2xx"] + d["errors"])' 2>/dev/null)
[ -n "$SLOW_OK" ] || fail+=("slow clients did not report: $(tail -3 "$WORK/slow.out")")
[ "${SLOW_BAD:-1}" -eq 0 ] || fail+=("slow clients: $SLOW")

LIMIT=$((WARM_PEAK * 110 / 100))
[ "$AFTER_PEAK" -le "$LIMIT" ] || fail+=("RSS grew after warm-up: peak ${AFTER_PEAK} KiB > ${LIMIT} KiB (warm-up peak ${WARM_PEAK} KiB + 10%)")
[ "$FINAL_FDS" -le "$IDLE_FDS" ] || fail+=("fds: ${IDLE_FDS} idle before the load, ${FINAL_FDS} after it")
kill -0 "$SERVER_PID" 2>/dev/null || fail+=("the server died")

HZ=$(getconf CLK_TCK)
CPU_PCT=$(( (CPU1 - CPU0) * 100 / HZ / (LOADED_FOR > 0 ? LOADED_FOR : 1) ))

echo "== summary (${DURATION}s)"
echo "   wrk keep-alive GET /:        ${WRK_REQS:-?} requests, ${WRK_RPS:-?} req/s, p99 ${WRK_P99:-?}, non-2xx ${WRK_NON2XX}"
echo "   h2load --h1 -m16 GET /json:  ${H2_OK:-?} succeeded, ${H2_RPS:-?}; $H2_CODES"
echo "   ab churn (new connections):  ${AB_OK} requests in ${AB_RUNS} of ${AB_STARTED} runs, ${#AB_BROKEN[@]} runs failed, failed requests ${AB_FAILED}, non-2xx ${AB_NON2XX}"
echo "   slow clients:                $SLOW"
echo "   server CPU:                  ${CPU_PCT}% of a core"
echo "   RSS: idle ${IDLE_RSS} KiB, warm-up peak ${WARM_PEAK} KiB, peak after warm-up ${AFTER_PEAK} KiB (limit ${LIMIT}), after the load ${FINAL_RSS} KiB"
echo "   fds: idle ${IDLE_FDS}, after the load ${FINAL_FDS}"
if [ ${#fail[@]} -gt 0 ]; then
  echo "== FAIL"
  printf '   - %s\n' "${fail[@]}"
  exit 1
fi
echo "== PASS"
