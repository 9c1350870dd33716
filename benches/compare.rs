//! fibr against the servers users would pick instead, under the same load, on the same
//! machine, with a report: `cargo bench --bench compare`.
//!
//! ```sh
//! cargo bench --bench compare                      # 5 s phases, 3 runs, 10,000 idle connections
//! cargo bench --bench compare -- --quick           # 1 s phases, 1 run, 1,000 idle connections
//! cargo bench --bench compare -- --runs 7          # 7 runs per cell (medians of 7)
//! cargo bench --bench compare -- --only pipelined  # one scenario (or a list: a,b): plain echo
//!                                                  # pipelined churn idle c10k rate50 rate80
//!                                                  # ws ws16k wsdeflate
//!                                                  # idle-ws idle-wsdeflate tls-plain
//!                                                  # tls-pipelined tls-churn tls-idle h2c-m1
//!                                                  # h2c-m10 h2-tls-m10 h2-idle grpc
//!                                                  # h3-c1 h3-c10 h3-download h3-idle
//!                                                  # client executor proxy files
//!                                                  # gateway arpc
//! cargo bench --bench compare -- --servers fibr,axum,floor   # a subset of the servers
//! cargo bench --bench compare -- --update-readme   # then rewrite README.md's section
//! cargo bench --bench compare -- --from-json --update-readme # report the last results again
//!                                                  # (with --quick etc.: the partial ones)
//! ```
//!
//! Servers, each serving `GET /` → `hello`, `POST /echo` → the body, `GET /json`:
//!
//! - **fibr**: `examples/bench_server.rs fibr`, the axum `Router` on `fibr::serve` (one
//!   event loop, `BENCH_WORKERS` workers);
//! - **axum::serve**: `examples/bench_server.rs axum`, the same `Router` on hyper + tokio (a
//!   multi-thread runtime with `BENCH_WORKERS` workers);
//! - **hyper**: `benches/peers` `hyper_plain`, hyper 1's `http1` connections on the same
//!   runtime, routes matched by hand (axum's routing cost, separated);
//! - **actix-web**: `benches/peers` `actix`, actix-web 4 with `BENCH_WORKERS` workers;
//! - **tonic**: `benches/peers` `tonic_grpc`, tonic's own server, in the gRPC scenario
//!   alone (below);
//! - **floor**: `benches/peers` `floor`, a single-threaded edge-triggered epoll loop that
//!   answers every request head with one fixed response. Not a server: the least CPU a
//!   request can cost here, the limit fibr's CPU per request is measured against. (It does
//!   not echo: POST /echo gets the fixed `hello` too.)
//!
//! The WebSocket scenarios (issue 14) run on the servers that speak it, each echoing every
//! text and binary message at `GET /ws`:
//!
//! - **fibr::ws**: `bench_server fibr-ws`, fibr with `/ws` on fibr's own WebSocket
//!   (`fibr::ws::WebSocketUpgrade`, permessage-deflate on with `DeflateConfig::default()`: no
//!   context takeover); it takes part in the WebSocket scenarios only (elsewhere it is fibr);
//! - **fibr** and **axum::serve**: the same axum handler on axum's own `WebSocketUpgrade`
//!   (tungstenite; on fibr, handed to hyper on fibr's background tokio runtime);
//! - **actix-web**: `actix-ws`.
//!
//! Only fibr::ws negotiates permessage-deflate, so the deflate scenarios run on it alone.
//!
//! The HTTPS scenarios (issue 12) run on the servers with TLS of their own, started with
//! `BENCH_TLS_CERT` and `BENCH_TLS_KEY` naming PEM files this bench writes once per run
//! (`compare/tls.rs`: rcgen makes a CA and an ECDSA P-256 certificate it signs for
//! `127.0.0.1`). All three are on rustls 0.23 with the ring provider and the same
//! `ServerConfig` (TLS 1.2 and 1.3, ALPN `http/1.1`, stateless session tickets):
//!
//! - **fibr**: `bench_server fibr`, `fibr::serve(listener, app).with_tls(config)`;
//! - **axum** (the axum::serve column, and the ratios' base as everywhere):
//!   `bench_server axum`, the same `Router` as axum-server serves rustls: an accept loop,
//!   tokio-rustls's `TlsAcceptor`, hyper-util's `auto` connection builder (`axum::serve`'s);
//! - **actix-web**: `benches/peers` `actix`, actix-web's `rustls-0_23` feature
//!   (`bind_rustls_0_23`).
//!
//! The HTTP/2 scenarios (issue 13) run on the servers that speak HTTP/2 with the same
//! `Router`:
//!
//! - **fibr**: `bench_server fibr` as it is: `fibr::serve` answers h2c by prior knowledge
//!   beside HTTP/1.1 on the same port, and h2 over TLS when ALPN picks it;
//! - **axum::serve**: `bench_server axum` as it is: hyper-util's `auto` builder, which
//!   `axum::serve` uses, sniffs the HTTP/2 preface and hands the connection to hyper's h2
//!   (over TLS: the same builder on tokio-rustls, as above).
//!
//! The gRPC scenario (issue 13) serves the gRPC example's `fibr.example.Echo`
//! (`examples/grpc/echo.rs`, a hand-written tonic service over raw bytes), the same file
//! included by both servers, each in a `tonic::service::Routes` of its own:
//!
//! - **fibr**: `bench_server fibr` with `BENCH_GRPC=1`: `fibr::serve(listener, routes)`;
//! - **tonic** (the ratios' base in this scenario): `benches/peers` `tonic_grpc`:
//!   `tonic::transport::Server::builder().add_routes(routes)` on a tokio multi-thread
//!   runtime, hyper's h2 underneath.
//!
//! Over TLS, both get the HTTPS scenarios' `ServerConfig` with ALPN `h2`, `http/1.1`
//! (`BENCH_TLS_ALPN`, read by `support/tls_config.rs`; the list `with_tls` fills in for a
//! config without one). hyper (`benches/peers` builds it with `http1` alone) and the floor
//! do not take part; nor does actix-web: it serves h2c with `bind_auto_h2c` behind its
//! `http2` feature, which `benches/peers` does not enable.
//!
//! The HTTP/3 scenarios (issue 15) run on the servers that speak it, with the HTTPS
//! scenarios' certificate and `ServerConfig` (ALPN `h3` set by each) and the same QUIC
//! limits (30 s idle timeout, 100 concurrent requests per connection, migration off):
//!
//! - **fibr**: `bench_server fibr` with `BENCH_HTTP3=1`:
//!   `fibr::serve(listener, app).with_tls(config).with_http3()`, UDP on the TCP port;
//! - **quinn + h3-quinn** (the ratios' base in these scenarios): `benches/peers` `h3_quinn`,
//!   the way users serve HTTP/3 today: the same axum `Router` behind h3 0.0.8 on quinn
//!   0.11 and h3-quinn 0.0.10, on a tokio multi-thread runtime (a task per connection and
//!   per request; the request body streamed into axum's `Body`, the response's frames to
//!   h3).
//!
//! `BENCH_WORKERS` defaults to 1: the same worker count for all. Each server runs pinned to
//! the first CPU this process may use (`taskset -c`); the load generator, and this process,
//! to the second.
//!
//! Scenarios, each on a freshly started server, after a warm-up with the same load:
//!
//! - **plain**: `wrk -t1 -c100 --latency` GET / (keep-alive, one request in flight per
//!   connection);
//! - **echo**: the same with a Lua script: POST /echo with a 1 KiB body;
//! - **pipelined**: `h2load --h1 -c100 -m16 -D` GET / (16 requests in flight per
//!   connection, HTTP/1.1 pipelining); p99 from h2load's per-request log;
//! - **churn**: `ab -c50 -t` GET / without `-k`: HTTP/1.0 without keep-alive, one new TCP
//!   connection per request (checked: the kernel's `ActiveOpens` counter must grow by at
//!   least the requests completed);
//! - **idle**: 10,000 keep-alive connections opened by this process, one GET / each with its
//!   response read; the server's RSS per connection above the empty server (which has
//!   answered one request);
//! - **c10k** (issue 31, the seed library's headline shape): 10,000 keep-alive connections
//!   (`--quick` too), each POSTing a 1 KiB body of its own to `/echo` and sending the next as
//!   soon as the echo is read, from this bench's own generator (`compare/h1load.rs`: one
//!   thread, epoll; every response must be 200 with the body sent, or `hello` from the
//!   floor); requests/s, CPU per request, peak RSS and p50/p99/p99.9 latency; fibr,
//!   axum::serve, actix-web and the floor (not hyper);
//! - **rate50**, **rate80** (issue 31): `GET /` over 100 keep-alive connections at a fixed
//!   rate, 50 % and 80 % of axum::serve's saturated requests/s on this machine (the plain
//!   scenario's axum::serve figure when plain ran before them, else a plain phase run on
//!   axum::serve for it), open loop with coordinated omission corrected (`compare/h1load.rs`:
//!   request j is scheduled at t0 + j / rate on connection j mod 100, sent when due and its
//!   connection free, its latency counted from the scheduled time); p50/p99/p99.9/max;
//! - **ws**: 100 WebSocket connections to `/ws`, each sending a 64-byte text message and
//!   waiting for its echo before the next (a load generator of this bench's own,
//!   `compare/ws.rs`: one thread, epoll; no external tool speaks WebSocket; every echo
//!   checked byte for byte); messages/s and server CPU per message;
//! - **ws16k**: the same with a 16 KiB binary message;
//! - **wsdeflate**: the same with 1 KiB of JSON-like text and permessage-deflate offered
//!   without context takeover either way (`client_no_context_takeover;
//!   server_no_context_takeover`): the client sends it compressed and inflates every echo,
//!   which must come back compressed;
//! - **idle-ws**: 10,000 WebSocket connections, each upgraded and one 64-byte message echoed,
//!   then held; the server's RSS per connection above the empty server (which has echoed
//!   messages already), as in idle;
//! - **idle-wsdeflate**: the same with deflate negotiated and one compressed 1 KiB echo each;
//! - **tls-plain**: `wrk -t1 -c100 --latency https://…/` (wrk speaks TLS through OpenSSL:
//!   TLS 1.3, its 100 handshakes at the start, then keep-alive);
//! - **tls-pipelined**: `h2load --h1 -c100 -m16 -D https://…/` (ALPN `http/1.1`, 16
//!   requests in flight per connection);
//! - **tls-churn**: `ab -c50 -t -f TLS1.3 https://…/` without `-k`: a new TCP connection
//!   and a full TLS 1.3 handshake per request (ab keeps no session to resume; checked with
//!   `ActiveOpens` as in churn). ab rather than h2load: h2load has no mode that reconnects
//!   per request for a time (`-n N -c N` opens all N connections at once, bounded by a
//!   count; `-r`/`-C` paces connections at a set rate instead of saturating the server),
//!   while ab's 50 connections, each replaced as soon as it is answered, are a steady churn
//!   bounded by time, the same load as churn with the handshake added. ab's client side of
//!   the handshake costs about what the server's does, so ab is the bottleneck here:
//!   server CPU per request is the figure;
//! - **tls-idle**: idle with TLS: 10,000 connections opened by this process with rustls's
//!   client, each a full handshake (TLS 1.3) and one GET / with its response read; then the
//!   bench keeps only each socket (no client session state), and the server's RSS per
//!   connection above the empty server is taken as in idle;
//! - **h2c-m1**: `h2load -c100 -m1 -D` `http://…/` (h2c by prior knowledge; one stream in
//!   flight per connection); p99 from h2load's per-request log; the phase fails unless
//!   h2load spoke h2c and every request was answered 2xx (`0 failed, 0 errored, 0 timeout`);
//! - **h2c-m10**: the same with `-m10`, ten streams in flight per connection;
//! - **h2-tls-m10**: `h2load -c100 -m10 -D https://…/`, h2 chosen by ALPN (checked: h2load
//!   must report `h2`);
//! - **grpc**: `h2load -c100 -m10 -D` posting one length-prefixed 64-byte gRPC message
//!   (`-d FILE -H 'content-type: application/grpc' -H 'te: trailers'`) to
//!   `/fibr.example.Echo/Unary` over h2c, checked as h2c-m10 is and more (`compare/grpc.rs`:
//!   h2load's DATA bytes are one echoed message per call, and a probe with hyper's HTTP/2
//!   client before and after each phase reads `grpc-status: 0` from `Unary`'s trailers and
//!   12 from an unknown method's);
//! - **h2-idle**: idle over h2c: 10,000 connections opened by this process
//!   (`compare/h2.rs`'s client: the preface, an empty SETTINGS and GET / on stream 1, the
//!   server's SETTINGS ACKed and the response read), then kept open with no stream; the
//!   server's RSS per connection above the empty server, as in idle;
//! - **h3-c1**, **h3-c10**: `benches/peers` `h3_load load` (quinn + h3's client on a
//!   current-thread tokio runtime, not fibr's h3 code; a UDP socket per connection): 100
//!   QUIC connections with 1 or 10 `GET /` in flight on each; the measured run includes
//!   its 100 handshakes, as wrk's over TLS does; any failed stream or non-200 fails the
//!   phase (`compare/h3.rs`);
//! - **h3-download**: `h3_load download`: `GET /bytes/10485760` (10 MiB, streamed in 64 KiB
//!   chunks by both servers) one after another on one connection, every byte counted;
//!   server CPU per MiB (the GSO/GRO case: quinn sends and receives batches of datagrams
//!   as one);
//! - **h3-idle**: 1,000 QUIC connections held by `h3_load idle` (always 1,000, `--quick` or
//!   not: it holds a UDP socket per connection), each a full handshake and one `GET /`
//!   answered, then silent; the server's RSS per connection above the empty server, as
//!   in idle;
//! - **client**: `benches/client.rs` as it is (`cargo bench --bench client --features
//!   client -- --json FILE`): fibr::client against hyper-util's legacy client on tokio
//!   (multi-thread and current-thread runtimes), hyper's own client connection on
//!   fibr::net and a hand-written HTTP/1 client on fibr::net, fetching GET / from fibr's
//!   bench server with 50 requests in flight; client CPU per request and requests/s,
//!   ratios to hyper-util on the multi-thread runtime;
//! - **executor**: `benches/executor.rs` as it is (`cargo bench --bench executor -- --json
//!   FILE`): fibr's worker pool against tokio's multi-thread runtime, ns per task or
//!   hand-off in four micro-benchmarks, ratios to tokio;
//! - **proxy**: `benches/proxy.rs` as it is (`cargo bench --bench proxy --features proxy
//!   -- --json FILE`, issue 16): `examples/proxy.rs` against a tokio proxy written the usual
//!   way (`copy_bidirectional`): 1 GiB down an HTTP CONNECT and a SOCKS5 tunnel, 64-byte
//!   ping-pong over 100 tunnels, and idle tunnels' memory; ratios to tokio. These three run
//!   on both CPUs (they pin their own threads) after the server scenarios, with their own
//!   repetitions (3, 5 and 3; `--quick`: 1, 3 and 1).
//! - **files**, **gateway**, **arpc**: `benches/files.rs`, `benches/gateway.rs` and
//!   `benches/arpc.rs` as they are (`cargo bench --bench NAME [--features F] -- --json
//!   FILE`, issues 30 and 32; `compare/side.rs`): fibr beside peers other than axum, each a
//!   table of its own: `fibr::fs::ServeDir` against nginx and tower-http's `ServeDir`
//!   (1 KiB keep-alive GETs, 100 MiB downloads), `fibr::gateway` against nginx's
//!   `proxy_pass` and axum's reverse proxy on hyper-util (proxied GETs, idle client
//!   connections), `fibr::arpc` against Go's arpc (async `/echo` calls, idle connections).
//!
//! Figures: requests/s (the load generator's count over its measuring time), **server CPU
//! time per request** (utime + stime from `/proc/PID/stat`, all threads, over the tool's run,
//! divided by the requests completed: the robust figure when the load generator, on the
//! other core, is the bottleneck), p99 latency (c10k and the fixed rates: p50 and p99.9 too,
//! and at a fixed rate the largest), the server's and the load generator's CPU %
//! (100 % = one core), peak RSS (VmHWM) and, for idle, RSS. Each scenario runs `runs` times
//! (servers rotated within a run); the report gives the median with min–max, and ratios to
//! axum::serve (gRPC: tonic; HTTP/3: quinn + h3-quinn). A phase during which other processes took more than 20 % of either CPU is
//! run once more on a fresh server, and the quieter attempt kept; the "other load" row shows
//! what was left.
//!
//! Output: a Markdown table on stdout, `benches/results/compare.json` and `compare.svg`
//! (`compare-partial.*` for `--quick`, `--only` or `--servers` runs, so a smoke run does not
//! replace the full results), and with `--update-readme` README.md's text between
//! `<!-- compare:begin -->` and `<!-- compare:end -->`.
//!
//! The bench builds what it runs (`cargo build --release --example bench_server --features
//! axum,tokio,tls,ws,http3`, `cargo build --release -p fibr-bench-peers`, and `cargo bench --no-run`
//! of the client and executor benches) unless given `--no-build`. It needs `wrk`,
//! `h2load` (apt package nghttp2-client), `ab` (apache2-utils) and `taskset` (util-linux),
//! the first three built with TLS (Debian's are).
//! Servers are killed on every path, and die with this process.

#[path = "support/skip.rs"]
mod common_skip;
#[path = "support/epoll.rs"]
mod epoll;
#[path = "support/os.rs"]
mod os_support;
#[path = "support/server.rs"]
mod server_support;

#[path = "compare/grpc.rs"]
mod grpc;
#[path = "compare/h1load.rs"]
mod h1load;
#[path = "compare/h2.rs"]
mod h2;
#[path = "compare/h3.rs"]
mod h3;
#[path = "compare/idle.rs"]
mod idle;
#[path = "compare/load.rs"]
mod load;
#[path = "compare/micro.rs"]
mod micro;
#[path = "compare/proc.rs"]
mod proc;
#[path = "compare/report.rs"]
mod report;
#[path = "compare/scenario.rs"]
mod scenario;
#[path = "compare/servers.rs"]
mod servers;
#[path = "compare/side.rs"]
mod side;
#[path = "compare/tls.rs"]
mod tls;
#[path = "compare/ws.rs"]
mod ws;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use proc::RunningServer;
pub use scenario::{Scenario, Settings, FULL, QUICK};
pub use servers::{server, Program, Server, BASE, H2_ALPN, SERVERS};

/// Bound on every client socket operation and on server start-up.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// A load phase during which other processes took more than this share of the server's or
/// the load generator's CPU is run again, up to `NOISY_RETRIES` times.
const NOISY_PCT: f64 = 20.0;
const NOISY_RETRIES: usize = 1;

struct Opts {
    quick: bool,
    /// Runs per cell instead of the mode's (3, or 1 with `--quick`).
    runs: Option<usize>,
    build: bool,
    update_readme: bool,
    from_json: bool,
    scenarios: Vec<Scenario>,
    servers: Vec<&'static Server>,
    /// The arguments that change what is measured (for the report's command line).
    measured_args: Vec<String>,
}

impl Opts {
    fn parse() -> Result<Opts, String> {
        let mut o = Opts {
            quick: false,
            runs: None,
            build: true,
            update_readme: false,
            from_json: false,
            scenarios: Scenario::ALL.to_vec(),
            servers: SERVERS.iter().collect(),
            measured_args: Vec::new(),
        };
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            match a.as_str() {
                // cargo bench passes --bench; a filter may follow it too.
                "--bench" => {}
                "--quick" => {
                    o.quick = true;
                    o.measured_args.push(a);
                }
                "--runs" => {
                    let v = args.next().ok_or("--runs takes a number")?;
                    match v.parse() {
                        Ok(n) if n > 0 => o.runs = Some(n),
                        _ => return Err(format!("--runs takes a positive number, not {v:?}")),
                    }
                    o.measured_args.extend([a, v]);
                }
                "--no-build" => o.build = false,
                "--update-readme" => o.update_readme = true,
                "--from-json" => o.from_json = true,
                "--only" => {
                    let v = args.next().ok_or("--only takes a scenario name")?;
                    let mut picked = Vec::new();
                    for name in v.split(',') {
                        picked.push(Scenario::from_key(name).ok_or_else(|| {
                            format!(
                                "unknown scenario {name:?}; one of: {}",
                                Scenario::ALL.map(|s| s.key()).join(", ")
                            )
                        })?);
                    }
                    o.scenarios = Scenario::ALL
                        .into_iter()
                        .filter(|s| picked.contains(s))
                        .collect();
                    o.measured_args.extend([a, v]);
                }
                "--servers" => {
                    let v = args.next().ok_or("--servers takes a list of servers")?;
                    let mut picked = Vec::new();
                    for name in v.split(',') {
                        picked.push(server(name).ok_or_else(|| {
                            format!(
                                "unknown server {name:?}; some of: {}",
                                SERVERS.map(|s| s.key).join(",")
                            )
                        })?);
                    }
                    o.servers = SERVERS
                        .iter()
                        .filter(|s| picked.iter().any(|p| p.key == s.key))
                        .collect();
                    o.measured_args.extend([a, v]);
                }
                other => {
                    return Err(format!(
                        "unknown argument {other:?}; use --quick, --only NAME, --servers A,B, \
                         --update-readme, --from-json, --no-build"
                    ))
                }
            }
        }
        Ok(o)
    }

    /// A run that is not the full one writes `compare-partial.*`.
    fn partial(&self) -> bool {
        self.quick
            || self.scenarios.len() != Scenario::ALL.len()
            || self.servers.len() != SERVERS.len()
    }
}

fn main() -> ExitCode {
    common_skip::bench_main("compare bench", bench)
}

fn results_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/results")
}

fn bench() -> Result<(), String> {
    let opts = Opts::parse()?;
    let dir = results_dir();
    let stem = if opts.partial() {
        "compare-partial"
    } else {
        "compare"
    };
    if opts.from_json {
        let path = dir.join(format!("{stem}.json"));
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        let rep =
            report::Report::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        return output(&rep, &dir, stem, opts.update_readme);
    }
    let mut set = if opts.quick { QUICK } else { FULL };
    if let Some(runs) = opts.runs {
        set.runs = runs;
    }
    let scenarios = &opts.scenarios;
    let on_servers = scenarios.iter().any(|s| s.on_servers());
    let mut tools = vec![("taskset", "util-linux")];
    let plain = |sc: Scenario| scenarios.iter().any(|s| s.plain() == sc);
    // The fixed-rate scenarios' base is measured with wrk when plain does not run.
    if plain(Scenario::Plain)
        || plain(Scenario::Echo)
        || scenarios.iter().any(|s| s.rate().is_some())
    {
        tools.push(("wrk", "wrk"));
    }
    if plain(Scenario::Pipelined)
        || scenarios
            .iter()
            .any(|s| (s.h2() && !s.idle()) || *s == Scenario::Grpc)
    {
        tools.push(("h2load", "nghttp2-client"));
    }
    if plain(Scenario::Churn) {
        tools.push(("ab", "apache2-utils"));
    }
    for (tool, package) in tools {
        os_support::which(tool, &format!("install it: apt-get install {package}"))?;
    }
    let bins = if on_servers {
        Some(Binaries::find(opts.build)?)
    } else {
        None
    };
    // The client, executor and proxy benches get every CPU this process was given.
    let all_cpus = proc::allowed_cpus()?;
    let (server_cpu, client_cpu) = proc::pick_cpus()?;
    // Servers and load generators inherit the raised limit. c10k's connections are this
    // process's and the server's.
    let conns = if scenarios.contains(&Scenario::C10k) {
        set.idle_conns.max(h1load::C10K_CONNS)
    } else {
        set.idle_conns
    };
    let nofile = os_support::raise_nofile(conns as u64 + 512).map_err(|e| {
        if conns > set.idle_conns {
            format!("{e} (c10k opens {conns} connections, --quick or not)")
        } else {
            e
        }
    })?;
    os_support::pin_to(client_cpu)
        .map_err(|e| format!("pinning this process to CPU {client_cpu}: {e}"))?;
    let workers = std::env::var("BENCH_WORKERS").unwrap_or_else(|_| "1".into());
    let backend = std::env::var("FIBR_BACKEND").unwrap_or_else(|_| "epoll (default)".into());
    let lua = load::write_lua()?;
    // One certificate for the run's HTTPS scenarios.
    let tls = if scenarios.iter().any(|s| s.tls()) {
        Some(tls::Tls::new()?)
    } else {
        None
    };
    let mut rep = report::Report::new(&set, &opts.measured_args, &workers, &backend);
    rep.cpus = (server_cpu, client_cpu);
    println!(
        "compare bench: {} s phases, {} run(s), {} idle connections, {workers} worker(s) per \
         server, fibr backend {backend}, servers on CPU {server_cpu}, load on CPU {client_cpu}, \
         RLIMIT_NOFILE {nofile}",
        set.phase.as_secs(),
        set.runs,
        set.idle_conns
    );
    for sc in scenarios {
        for s in opts.servers.iter().filter(|s| s.runs(*sc)) {
            rep.cells.push(report::Cell::new(*sc, s.key));
        }
    }
    for run in 0..set.runs {
        for &sc in scenarios.iter().filter(|s| s.on_servers()) {
            let Some(bins) = &bins else { break };
            // The rate the fixed-rate scenarios take their shares of: found once, before the
            // first of them, and the same for every run and server.
            if sc.rate().is_some() && rep.rate_base.is_none() {
                let base = rate_base(&rep, bins, &set, (server_cpu, client_cpu), &workers, &lua.0)
                    .map_err(|e| format!("{}: axum::serve's saturated rate: {e}", sc.key()))?;
                eprintln!(
                    "  fixed-rate scenarios: shares of {:.0} requests/s ({})",
                    base.rps, base.from
                );
                rep.rate_base = Some(base);
            }
            // Rotate the servers' order from run to run, so drift does not favour one.
            let servers: Vec<&Server> = opts
                .servers
                .iter()
                .copied()
                .filter(|s| s.runs(sc))
                .collect();
            let n = servers.len();
            for i in 0..n {
                let s = servers[(i + run) % n];
                let ctx = |e: String| format!("{} / {} run {}: {e}", sc.key(), s.key, run + 1);
                let bin = bins.path(s);
                // A TLS scenario's server serves HTTPS; its routes are checked over TLS.
                let tls = tls.as_ref().filter(|_| sc.tls());
                let mut env: Vec<(&str, &str)> = tls.map_or(Vec::new(), |t| t.env().to_vec());
                if sc.h2() && sc.tls() {
                    // ALPN offers h2 as well (the HTTP/1 HTTPS scenarios' config offers
                    // http/1.1 alone).
                    env.push(("BENCH_TLS_ALPN", H2_ALPN));
                }
                if sc == Scenario::Grpc {
                    env.push(("BENCH_GRPC", "1"));
                }
                if sc.h3() {
                    env.push(("BENCH_HTTP3", "1"));
                }
                let start = || -> Result<RunningServer, String> {
                    let srv = RunningServer::start(&bin, s, server_cpu, &workers, &env)?;
                    match tls {
                        Some(_) if sc.h3() => {
                            h3::check_routes(&bins.h3_load(), srv.addr, client_cpu)?
                        }
                        Some(tls) => tls.check_routes(srv.addr, s.real)?,
                        None if sc == Scenario::Grpc => grpc::probe(srv.addr)?,
                        None => idle::check_routes(srv.addr, s.real)?,
                    }
                    if sc.h2() && !sc.tls() {
                        h2::check_h2c(srv.addr)?;
                    }
                    if sc.ws() {
                        ws::check_ws(srv.addr)?;
                    }
                    if sc.deflate() {
                        ws::check_deflate(srv.addr)?;
                    }
                    Ok(srv)
                };
                if sc.idle() {
                    let srv = start().map_err(ctx)?;
                    let r = match tls {
                        Some(_) if sc.h3() => {
                            h3::idle_run(&srv, h3::idle_conns(&set), client_cpu, &bins.h3_load())
                        }
                        Some(tls) => tls.idle_run(&srv, set.idle_conns),
                        None if sc == Scenario::H2Idle => h2::idle_run(&srv, set.idle_conns),
                        None if sc.ws() => ws::idle_run(&srv, set.idle_conns, ws::Kind::of(sc)),
                        None => idle::idle_run(&srv, set.idle_conns),
                    };
                    let r = r
                        .map_err(|e| match srv.check_alive() {
                            Ok(()) => e,
                            Err(dead) => format!("{e} ({dead})"),
                        })
                        .map_err(ctx)?;
                    eprintln!(
                        "  {:<13} {:<12} run {}: empty {} KiB, loaded {} KiB, {:.0} B/conn, \
                         marginal {:.0} B/conn, peak {} KiB, {} threads",
                        sc.key(),
                        s.label,
                        run + 1,
                        r.empty_kib,
                        r.loaded_kib,
                        r.per_conn(),
                        r.marginal(),
                        r.peak_kib,
                        r.threads
                    );
                    srv.report_output();
                    rep.cell_mut(sc, s.key).idles.push(r);
                    continue;
                }
                let mut kept: Option<load::Load> = None;
                for attempt in 0..=NOISY_RETRIES {
                    let srv = start().map_err(ctx)?;
                    let r = if sc.ws() {
                        ws::ws_run(&srv, &set, client_cpu, ws::Kind::of(sc))
                    } else if sc.h3() {
                        h3::load_run(&srv, sc, &set, client_cpu, &bins.h3_load())
                    } else if sc.h2() || sc == Scenario::Grpc {
                        h2::load_run(&srv, sc, &set, client_cpu)
                    } else if sc == Scenario::C10k {
                        h1load::c10k_run(&srv, &set, client_cpu, s.real)
                    } else if let (Some(share), Some(base)) = (sc.rate(), &rep.rate_base) {
                        h1load::rate_run(&srv, &set, client_cpu, share * base.rps)
                    } else {
                        load::load_run(&srv, sc, &set, client_cpu, &lua.0)
                    };
                    let r = r
                        .map_err(|e| match srv.check_alive() {
                            Ok(()) => e,
                            Err(dead) => format!("{e} ({dead})"),
                        })
                        .map_err(ctx)?;
                    eprintln!(
                        "  {:<13} {:<12} run {}: {:.0} {}/s, {:.2} µs CPU/{}, CPU {:.0} % \
                         (load {:.0} %), p99 {}, peak RSS {} KiB, {:.3} conns/req, {} errors, \
                         other load {:.0} %",
                        sc.key(),
                        s.label,
                        run + 1,
                        r.rps(),
                        sc.unit(),
                        r.cpu_per_req(),
                        sc.unit(),
                        r.cpu_pct(),
                        r.client_pct(),
                        report::fmt_us(r.p99_us),
                        r.peak_rss_kib,
                        r.opens_per_req(),
                        r.errors,
                        r.other_pct()
                    );
                    if sc.percentiles() {
                        eprintln!(
                            "    p50 {}, p99.9 {}, max {}{}",
                            report::fmt_us(r.p50_us),
                            report::fmt_us(r.p999_us),
                            report::fmt_us(r.max_us),
                            if r.target_rps > 0.0 {
                                format!(", sent at {:.0} requests/s", r.target_rps)
                            } else {
                                String::new()
                            }
                        );
                    }
                    srv.report_output();
                    let noisy = r.other_pct() > NOISY_PCT;
                    if kept.as_ref().is_none_or(|k| r.other_pct() < k.other_pct()) {
                        kept = Some(r);
                    }
                    if !noisy {
                        break;
                    }
                    if attempt < NOISY_RETRIES {
                        eprintln!("    (other load over {NOISY_PCT:.0} %: running it again)");
                    }
                }
                rep.cell_mut(sc, s.key).loads.extend(kept);
            }
        }
    }
    drop(lua);
    drop(tls);
    // The benches of their own, once each (they repeat their phases themselves).
    let quick: &[&str] = if opts.quick { &["--quick"] } else { &[] };
    if scenarios.contains(&Scenario::Client) {
        eprintln!("  client: {}", Scenario::Client.tool(&set));
        let mut args = quick.to_vec();
        if !opts.build {
            args.push("--no-build");
        }
        let v = micro::CLIENT
            .run(&args, &all_cpus, opts.build)
            .map_err(|e| format!("client: {e}"))?;
        micro::client_figs(&v).map_err(|e| format!("client: {e}"))?;
        rep.client = Some(v);
    }
    if scenarios.contains(&Scenario::Executor) {
        eprintln!("  executor: {}", Scenario::Executor.tool(&set));
        let mut v = micro::EXECUTOR
            .run(quick, &all_cpus, opts.build)
            .map_err(|e| format!("executor: {e}"))?;
        v["cpus"] = serde_json::json!(all_cpus
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(","));
        micro::exec_figs(&v).map_err(|e| format!("executor: {e}"))?;
        rep.executor = Some(v);
    }
    if scenarios.contains(&Scenario::Proxy) {
        eprintln!("  proxy: {}", Scenario::Proxy.tool(&set));
        let mut args = quick.to_vec();
        if !opts.build {
            args.push("--no-build");
        }
        let v = micro::PROXY
            .run(&args, &all_cpus, opts.build)
            .map_err(|e| format!("proxy: {e}"))?;
        micro::proxy_figs(&v).map_err(|e| format!("proxy: {e}"))?;
        rep.proxy = Some(v);
    }
    for (sc, bench) in [
        (Scenario::Files, side::FILES),
        (Scenario::Gateway, side::GATEWAY),
        (Scenario::Arpc, side::ARPC),
    ] {
        if !scenarios.contains(&sc) {
            continue;
        }
        eprintln!("  {}: {}", sc.key(), sc.tool(&set));
        let mut args = quick.to_vec();
        if !opts.build {
            args.push("--no-build");
        }
        let v = bench
            .run(&args, &all_cpus, opts.build)
            .map_err(|e| format!("{}: {e}", sc.key()))?;
        side::parse(&v).map_err(|e| format!("{}: {e}", sc.key()))?;
        rep.sides.push(v);
    }
    rep.finish();
    let json = rep.to_json();
    let json_path = dir.join(format!("{stem}.json"));
    report::write_atomic(&json_path, &json)?;
    output(&rep, &dir, stem, opts.update_readme)
}

/// axum::serve's saturated keep-alive GET throughput on this machine, which the fixed-rate
/// scenarios send shares of: the plain scenario's axum::serve figure when it ran before them
/// in this run (`wrk -c100`, the median so far), else a plain phase of its own (its warm-up,
/// then `wrk -c100`) on a fresh axum::serve. `cpus`: (server, load generator).
fn rate_base(
    rep: &report::Report,
    bins: &Binaries,
    set: &Settings,
    cpus: (usize, usize),
    workers: &str,
    lua: &Path,
) -> Result<report::RateBase, String> {
    let rps = rep.median_rps(Scenario::Plain, BASE);
    if rps.is_finite() {
        return Ok(report::RateBase {
            rps,
            from: "the plain scenario's axum::serve requests/s".into(),
        });
    }
    let axum = server(BASE).ok_or("no axum::serve")?;
    let srv = RunningServer::start(&bins.path(axum), axum, cpus.0, workers, &[])?;
    idle::check_routes(srv.addr, axum.real)?;
    let l = load::load_run(&srv, Scenario::Plain, set, cpus.1, lua)?;
    if l.errors > 0 {
        return Err(format!("wrk reported {} errors", l.errors));
    }
    Ok(report::RateBase {
        rps: l.rps(),
        from: format!("`{}` on axum::serve before them", Scenario::Plain.tool(set)),
    })
}

/// Prints the tables; writes the chart (and the README section).
fn output(rep: &report::Report, dir: &Path, stem: &str, update_readme: bool) -> Result<(), String> {
    print!("\n{}", rep.markdown());
    let svg_path = dir.join(format!("{stem}.svg"));
    report::write_atomic(&svg_path, &rep.svg())?;
    println!(
        "\nwrote {} and {}",
        dir.join(format!("{stem}.json")).display(),
        svg_path.display()
    );
    if update_readme {
        let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
        let chart = format!("benches/results/{stem}.svg");
        report::update_readme(&readme, &rep.readme_section(&chart))?;
        println!("updated {}", readme.display());
    }
    Ok(())
}

/// The built servers.
struct Binaries {
    bench_server: PathBuf,
    /// The directory of the peers' binaries.
    peers: PathBuf,
}

impl Binaries {
    fn find(build: bool) -> Result<Binaries, String> {
        if build {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            for args in [
                &os_support::bench_server_build_args()[..],
                &["build", "--release", "-p", "fibr-bench-peers"][..],
            ] {
                let status = Command::new(&cargo)
                    .args(args)
                    .current_dir(env!("CARGO_MANIFEST_DIR"))
                    .status()
                    .map_err(|e| format!("running cargo {}: {e}", args.join(" ")))?;
                if !status.success() {
                    return Err(format!("cargo {} failed: {status}", args.join(" ")));
                }
            }
        }
        // The bench runs from <target>/release/deps.
        let mut releases = Vec::new();
        if let Some(release) = std::env::current_exe()
            .ok()
            .and_then(|p| Some(p.parent()?.parent()?.to_path_buf()))
        {
            releases.push(release);
        }
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
        releases.push(target.join("release"));
        let release = releases
            .into_iter()
            .find(|r| {
                r.join("examples/bench_server").is_file()
                    && [
                        "hyper_plain",
                        "actix",
                        "tonic_grpc",
                        "floor",
                        "h3_quinn",
                        "h3_load",
                    ]
                    .iter()
                    .all(|p| r.join(p).is_file())
            })
            .ok_or(
                "cannot find the built servers (examples/bench_server and the fibr-bench-peers \
                 binaries); run without --no-build",
            )?;
        Ok(Binaries {
            bench_server: release.join("examples/bench_server"),
            peers: release,
        })
    }

    /// The HTTP/3 load generator (`benches/peers` `h3_load`).
    fn h3_load(&self) -> PathBuf {
        self.peers.join("h3_load")
    }

    /// The program and its arguments before the port.
    fn path(&self, s: &Server) -> (PathBuf, Option<&'static str>) {
        match s.program {
            Program::BenchServer(arg) => (self.bench_server.clone(), Some(arg)),
            Program::Peer(bin) => (self.peers.join(bin), None),
        }
    }
}
