#!/bin/bash
# Syscalls of a bench server over N keep-alive HTTPS requests (10 connections, one request
# in flight on each), counted by strace -c after a 200-request warm-up (the handshakes are
# not counted). See README.md.
#
#   benches/syscalls/strace_keepalive.sh fibr|axum N CERT KEY [OUT]
set -eu
which=$1 n=$2 cert=$3 key=$4 out=${5:-/tmp/strace-$1.txt}
port=39555
bin=$(dirname "$0")/../../target/release/examples/bench_server
BENCH_TLS_CERT=$cert BENCH_TLS_KEY=$key taskset -c 0 "$bin" "$which" $port 2>/dev/null &
srv=$!
sleep 1.5
h2load --h1 -c10 -m1 -n 200 "https://127.0.0.1:$port/" >/dev/null
strace -f -c -S calls -o "$out" -p $srv 2>/dev/null &
st=$!
sleep 1
taskset -c 1 h2load --h1 -c10 -m1 -n "$n" "https://127.0.0.1:$port/" | grep -E "^requests:"
sleep 0.5
kill -INT $st
wait $st || true
kill $srv
wait $srv 2>/dev/null || true
cat "$out"
