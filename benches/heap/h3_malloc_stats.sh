#!/bin/bash
# glibc's view of idle HTTP/3 connections: per connection, the RSS, the bytes malloc has
# in use (what was asked for, plus its chunk headers and rounding) and the bytes free
# inside its heaps (holes left between live chunks), from malloc_stats() called in the
# server with gdb before and after N more connections, and then where the free bytes are
# (malloc_info(): free chunks by size, the largest totals first; see README.md).
#
# usage: benches/heap/h3_malloc_stats.sh fibr|quinn N CERT KEY
# needs: gdb; the release builds of README.md (bench_server, h3_load, h3_quinn).
set -eu
kind=$1 n=$2 cert=$3 key=$4
cd "$(dirname "$0")/../.."
log=$(mktemp)
port=$((20000 + RANDOM % 10000))
export BENCH_TLS_CERT=$cert BENCH_TLS_KEY=$key BENCH_HTTP3=1 BENCH_WORKERS=1
case $kind in
fibr) taskset -c 0 target/release/examples/bench_server fibr $port >/dev/null 2>"$log" & ;;
quinn) taskset -c 0 target/release/h3_quinn $port >/dev/null 2>"$log" & ;;
*) echo "fibr or quinn" >&2; exit 2 ;;
esac
server=$!
trap 'kill $server 2>/dev/null; kill $CLIENT_PID 2>/dev/null; rm -f "$log"' EXIT
sleep 1
coproc CLIENT { taskset -c 1 target/release/h3_load idle 127.0.0.1:$port; }
snapshot() {
    echo "open $1" >&"${CLIENT[1]}"
    read -r -t 300 _ <&"${CLIENT[0]}"
    sleep 1
    awk '/VmRSS/{print $2 * 1024}' /proc/$server/status
    gdb -q -batch -p $server -ex 'call (void)malloc_stats()' >/dev/null 2>&1
}
rss0=$(snapshot 10)
rss1=$(snapshot $((n + 10)))
gdb -q -batch -p $server -ex 'call (int)malloc_info(0, (void*)stderr)' >/dev/null 2>&1
python3 - "$log" "$n" "$rss0" "$rss1" <<'PY'
import re, sys
log, n, rss0, rss1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
totals = re.findall(r"Total \(incl\. mmap\):\s*system bytes\s*=\s*(\d+)\s*in use bytes\s*=\s*(\d+)",
                    open(log).read())
(sys0, use0), (sys1, use1) = [(int(a), int(b)) for a, b in totals[:2]]
print(f"per connection: RSS {(rss1 - rss0) / n:.0f} B, malloc in use {(use1 - use0) / n:.0f} B, "
      f"free in malloc's heaps {((sys1 - use1) - (sys0 - use0)) / n:.0f} B")
sizes = re.findall(r'<size from="(\d+)" to="(\d+)" total="(\d+)" count="(\d+)"/>', open(log).read())
print("free chunks at the end, largest totals first (bytes from-to: total, count):")
for lo, hi, total, count in sorted(sizes, key=lambda x: -int(x[2]))[:10]:
    print(f"  {lo}-{hi}: {total}, {count}")
PY
