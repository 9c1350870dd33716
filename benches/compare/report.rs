//! The results: Markdown tables, JSON, an SVG chart and the README's section.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::idle::Idle;
use crate::load::Load;
use crate::micro::{self, ClientFig, VersusTokio, CLIENT_BASE, CLIENT_CT};
use crate::{proc, server, side, Scenario, Settings, FULL, QUICK, SERVERS};

#[path = "chart.rs"]
mod chart;
#[path = "report_goals.rs"]
mod goals;
#[path = "report_json.rs"]
mod json;

pub const README_BEGIN: &str = "<!-- compare:begin -->";
pub const README_END: &str = "<!-- compare:end -->";

/// One scenario on one server, over the runs.
pub struct Cell {
    pub scenario: Scenario,
    pub server: &'static str,
    pub loads: Vec<Load>,
    pub idles: Vec<Idle>,
}

impl Cell {
    pub fn new(scenario: Scenario, server: &'static str) -> Cell {
        Cell {
            scenario,
            server,
            loads: Vec::new(),
            idles: Vec::new(),
        }
    }

    fn values(&self, f: Figure) -> Vec<f64> {
        match f {
            Figure::Load(f) => self.loads.iter().map(f).collect(),
            Figure::Idle(f) => self.idles.iter().map(f).collect(),
        }
    }

    fn runs(&self) -> usize {
        self.loads.len().max(self.idles.len())
    }
}

#[derive(Clone, Copy)]
enum Figure {
    Load(fn(&Load) -> f64),
    Idle(fn(&Idle) -> f64),
}

const CPU_PCT_ROW: &str = "CPU % server / load generator";
const CPU_PER_REQ: Figure = Figure::Load(|l| l.cpu_per_req());
const RPS: Figure = Figure::Load(|l| l.rps());
const P99: Figure = Figure::Load(|l| l.p99_us);
const P999: Figure = Figure::Load(|l| l.p999_us);
const PEAK_RSS: Figure = Figure::Load(|l| l.peak_rss_kib as f64);
const PER_CONN: Figure = Figure::Idle(|r| r.per_conn());

/// The rate the fixed-rate scenarios send shares of: axum::serve's saturated keep-alive GET
/// requests/s on this machine, and where the figure came from.
#[derive(Clone, Debug)]
pub struct RateBase {
    pub rps: f64,
    pub from: String,
}

pub struct Report {
    pub command: String,
    pub date: String,
    pub machine: String,
    pub cpus: (usize, usize),
    pub workers: String,
    pub backend: String,
    pub quick: bool,
    pub runs: usize,
    pub load_before: String,
    pub load_after: String,
    pub cells: Vec<Cell>,
    /// `benches/client.rs`'s, `benches/executor.rs`'s and `benches/proxy.rs`'s JSON, as
    /// they wrote it.
    pub client: Option<Value>,
    pub executor: Option<Value>,
    pub proxy: Option<Value>,
    /// The benches of their own beside other peers (`side.rs`), as they wrote their JSON.
    pub sides: Vec<Value>,
    /// The fixed-rate scenarios' base, once they have run.
    pub rate_base: Option<RateBase>,
}

impl Report {
    pub fn new(set: &Settings, measured_args: &[String], workers: &str, backend: &str) -> Report {
        let mut command = String::new();
        if workers != "1" {
            let _ = write!(command, "BENCH_WORKERS={workers} ");
        }
        if std::env::var_os("FIBR_BACKEND").is_some() {
            let _ = write!(command, "FIBR_BACKEND={backend} ");
        }
        command.push_str("cargo bench --bench compare");
        if !measured_args.is_empty() {
            let _ = write!(command, " -- {}", measured_args.join(" "));
        }
        Report {
            command,
            date: utc_now(),
            machine: proc::machine(),
            cpus: (0, 1),
            workers: workers.to_string(),
            backend: backend.to_string(),
            quick: set.phase == QUICK.phase,
            runs: set.runs,
            load_before: proc::loadavg(),
            load_after: String::new(),
            cells: Vec::new(),
            client: None,
            executor: None,
            proxy: None,
            sides: Vec::new(),
            rate_base: None,
        }
    }

    pub fn finish(&mut self) {
        self.load_after = proc::loadavg();
    }

    fn settings(&self) -> Settings {
        let mut s = if self.quick { QUICK } else { FULL };
        s.runs = self.runs;
        s
    }

    pub fn cell_mut(&mut self, sc: Scenario, server: &str) -> &mut Cell {
        self.cells
            .iter_mut()
            .find(|c| c.scenario == sc && c.server == server)
            .expect("cells are made before the runs")
    }

    fn cell(&self, sc: Scenario, server: &str) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|c| c.scenario == sc && c.server == server && c.runs() > 0)
    }

    /// The server scenarios measured.
    fn scenarios(&self) -> Vec<Scenario> {
        Scenario::ALL
            .into_iter()
            .filter(|sc| self.cells.iter().any(|c| c.scenario == *sc))
            .collect()
    }

    /// Every scenario measured.
    fn all_scenarios(&self) -> Vec<Scenario> {
        Scenario::ALL
            .into_iter()
            .filter(|sc| match sc {
                Scenario::Client => self.client.is_some(),
                Scenario::Executor => self.executor.is_some(),
                Scenario::Proxy => self.proxy.is_some(),
                Scenario::Files | Scenario::Gateway | Scenario::Arpc => self
                    .sides
                    .iter()
                    .any(|v| v["bench"].as_str() == Some(sc.key())),
                sc => self.cells.iter().any(|c| c.scenario == *sc),
            })
            .collect()
    }

    fn client_figs(&self) -> Option<Vec<ClientFig>> {
        micro::client_figs(self.client.as_ref()?).ok()
    }

    fn exec_figs(&self) -> Option<Vec<VersusTokio>> {
        micro::exec_figs(self.executor.as_ref()?).ok()
    }

    fn proxy_figs(&self) -> Option<Vec<VersusTokio>> {
        micro::proxy_figs(self.proxy.as_ref()?).ok()
    }

    /// fibr::client's CPU per request over hyper-util's (`base`: "mt" or "ct").
    fn client_ratio(&self, key: &str, base: &str) -> f64 {
        let Some(figs) = self.client_figs() else {
            return f64::NAN;
        };
        let m = |k: &str| {
            figs.iter()
                .find(|c| c.key == k)
                .map_or(f64::NAN, |c| median(c.cpu_per_req.clone()))
        };
        m(key) / m(base)
    }

    fn servers(&self) -> Vec<&'static crate::Server> {
        SERVERS
            .iter()
            .filter(|s| self.cells.iter().any(|c| c.server == s.key))
            .collect()
    }

    /// `server`'s median requests/s in `sc` so far (NaN when it has not run).
    pub fn median_rps(&self, sc: Scenario, server: &str) -> f64 {
        self.median(sc, server, RPS)
    }

    fn median(&self, sc: Scenario, server: &str, f: Figure) -> f64 {
        self.cell(sc, server)
            .map_or(f64::NAN, |c| median(c.values(f)))
    }

    /// `server`'s median over the base's (NaN when either is missing).
    fn ratio(&self, sc: Scenario, server: &str, base: &str, f: Figure) -> f64 {
        self.median(sc, server, f) / self.median(sc, base, f)
    }

    /// "median (min–max) · ratio×" for one table cell.
    fn stat(
        &self,
        sc: Scenario,
        server: &str,
        f: Figure,
        fmt: fn(f64) -> String,
        with_ratio: bool,
    ) -> String {
        let Some(cell) = self.cell(sc, server) else {
            return "—".into();
        };
        let xs = cell.values(f);
        let mut out = fmt(median(xs.clone()));
        if xs.len() > 1 {
            let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
            let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let _ = write!(out, " ({}–{})", fmt(min), fmt(max));
        }
        let r = self.ratio(sc, server, sc.base(), f);
        if with_ratio && server != sc.base() && r.is_finite() {
            let _ = write!(out, " · {}", fmt_ratio(r));
        }
        out
    }

    /// The results tables and the goals.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        // The WebSocket scenarios in a table of their own: their columns are the servers
        // that speak WebSocket, fibr::ws among them.
        let (ws, http): (Vec<Scenario>, Vec<Scenario>) =
            self.scenarios().into_iter().partition(|sc| sc.ws());
        for group in [http, ws].iter().filter(|g| !g.is_empty()) {
            out.push_str(&self.servers_table(group));
            out.push('\n');
        }
        if let Some(t) = self.client_table() {
            out.push_str(&t);
            out.push('\n');
        }
        if let (Some(v), Some(figs)) = (&self.executor, self.exec_figs()) {
            let title = format!(
                "executor <br>`{}`: {} workers each, on CPUs {}",
                v["command"].as_str().unwrap_or("?"),
                v["workers"].as_u64().unwrap_or(0),
                v["cpus"].as_str().unwrap_or("?"),
            );
            out.push_str(&versus_tokio_table(&title, v, &figs));
            out.push('\n');
        }
        if let (Some(v), Some(figs)) = (&self.proxy, self.proxy_figs()) {
            let title = format!(
                "proxy <br>`{}`: {} worker each, proxy on one CPU, clients and targets on the \
                 other",
                v["command"].as_str().unwrap_or("?"),
                v["workers"].as_u64().unwrap_or(0),
            );
            out.push_str(&versus_tokio_table(&title, v, &figs));
            out.push('\n');
        }
        for table in self.sides.iter().filter_map(side::table) {
            out.push_str(&table);
            out.push('\n');
        }
        out.push_str(&self.goals());
        let errors: Vec<String> = self
            .cells
            .iter()
            .filter(|c| c.loads.iter().any(|l| l.errors > 0))
            .map(|c| {
                format!(
                    "{} on {}: {} errors",
                    c.scenario.key(),
                    c.server,
                    c.loads.iter().map(|l| l.errors).sum::<u64>()
                )
            })
            .collect();
        if !errors.is_empty() {
            let _ = writeln!(
                out,
                "\nErrors reported by the load generators: {}.",
                errors.join("; ")
            );
        }
        out
    }

    /// The server scenarios `scenarios`, a row group each, a column per server measured in
    /// any of them.
    fn servers_table(&self, scenarios: &[Scenario]) -> String {
        let mut out = String::new();
        let servers: Vec<_> = self
            .servers()
            .into_iter()
            .filter(|s| scenarios.iter().any(|sc| self.cell(*sc, s.key).is_some()))
            .collect();
        let set = self.settings();
        let ws = scenarios.iter().all(|sc| sc.ws());
        let _ = write!(out, "| scenario | figure |");
        for s in &servers {
            // Which WebSocket each server's column runs.
            let label = match (ws, s.key) {
                (true, "fibr") => "fibr, axum's extractor",
                (true, "actix") => "actix-ws",
                _ => s.label,
            };
            let _ = write!(out, " {label} |");
        }
        let _ = write!(out, "\n|---|---|");
        for _ in &servers {
            out.push_str("---:|");
        }
        out.push('\n');
        type Row = (&'static str, Figure, fn(f64) -> String);
        let load_rows: [Row; 6] = [
            ("requests/s", RPS, fmt_int),
            ("**server CPU µs/request**", CPU_PER_REQ, |x| {
                format!("{x:.2}")
            }),
            // Whether the server was saturated, and whether the load generator was the
            // bottleneck (100 % = one core); shown as "server / load generator".
            (CPU_PCT_ROW, Figure::Load(|l| l.cpu_pct()), fmt_int),
            ("p99 latency", P99, fmt_us),
            ("peak RSS (KiB)", PEAK_RSS, fmt_int),
            ("other load (%)", Figure::Load(|l| l.other_pct()), |x| {
                format!("{x:.0}")
            }),
        ];
        // `compare/h1load.rs`'s scenarios: more percentiles (and at a fixed rate, the
        // largest latency), in place of the p99 row.
        let percentile_rows = |sc: Scenario| -> Vec<Row> {
            let mut rows = load_rows[..3].to_vec();
            rows.push(("p50 latency", Figure::Load(|l| l.p50_us), fmt_us));
            rows.push(("**p99 latency**", P99, fmt_us));
            rows.push(("**p99.9 latency**", P999, fmt_us));
            if sc.rate().is_some() {
                rows.push(("max latency", Figure::Load(|l| l.max_us), fmt_us));
            }
            rows.extend_from_slice(&load_rows[4..]);
            rows
        };
        let idle_rows: [Row; 3] = [
            ("**RSS per connection (B)**", PER_CONN, fmt_int),
            (
                "RSS empty (KiB)",
                Figure::Idle(|r| r.empty_kib as f64),
                fmt_int,
            ),
            (
                "RSS with the connections (KiB)",
                Figure::Idle(|r| r.loaded_kib as f64),
                fmt_int,
            ),
        ];
        for &sc in scenarios {
            let mut title = format!("{} <br>`{}`", sc.title(), sc.tool(&set));
            if let (Some(share), Some(base)) = (sc.rate(), &self.rate_base) {
                let _ = write!(
                    title,
                    " <br>at {} requests/s, {:.0} % of axum::serve's {} ({})",
                    fmt_int(share * base.rps),
                    share * 100.0,
                    fmt_int(base.rps),
                    base.from
                );
            }
            let more;
            let rows: &[Row] = if sc.idle() {
                &idle_rows
            } else if sc.percentiles() {
                more = percentile_rows(sc);
                &more
            } else {
                &load_rows
            };
            for (i, (name, f, fmt)) in rows.iter().enumerate() {
                // A WebSocket scenario counts messages; a download, MiB.
                let shown = match (sc.unit(), *name) {
                    ("msg", "requests/s") => "messages/s",
                    ("msg", "**server CPU µs/request**") => "**server CPU µs/message**",
                    ("MiB", "requests/s") => "MiB/s",
                    ("MiB", "**server CPU µs/request**") => "**server CPU µs/MiB**",
                    (_, name) => name,
                };
                let _ = write!(out, "| {} | {shown} |", if i == 0 { &title } else { "" });
                for s in &servers {
                    let text = match self.cell(sc, s.key) {
                        Some(c) if *name == CPU_PCT_ROW => format!(
                            "{:.0} / {:.0}",
                            median(c.values(Figure::Load(|l| l.cpu_pct()))),
                            median(c.values(Figure::Load(|l| l.client_pct())))
                        ),
                        _ => {
                            let ratio = !name.starts_with("other load");
                            self.stat(sc, s.key, *f, *fmt, ratio)
                        }
                    };
                    let _ = write!(out, " {text} |");
                }
                out.push('\n');
            }
        }
        out
    }

    /// `benches/client.rs`'s figures: one row per client.
    fn client_table(&self) -> Option<String> {
        let v = self.client.as_ref()?;
        let figs = self.client_figs()?;
        let base = figs.iter().find(|c| c.key == CLIENT_BASE)?;
        let base_cpu = median(base.cpu_per_req.clone());
        let mut out = String::new();
        let _ = writeln!(
            out,
            "| HTTP client <br>`{}`: GET / from fibr's bench server (1 worker, CPU {}), {} \
             requests in flight, client on CPU {} | requests/s | **client CPU µs/request** | \
             CPU % (100 = one core) |",
            v["command"].as_str().unwrap_or("?"),
            self.cpus.0,
            v["in_flight"].as_u64().unwrap_or(0),
            self.cpus.1,
        );
        out.push_str("|---|---:|---:|---:|\n");
        for c in &figs {
            let cpu = median(c.cpu_per_req.clone());
            let ratio = if c.key == CLIENT_BASE {
                String::new()
            } else {
                format!(" · {}", fmt_ratio(cpu / base_cpu))
            };
            let _ = writeln!(
                out,
                "| {} | {} | {}{ratio} | {} |",
                c.name,
                spread(&c.rps, fmt_int),
                spread(&c.cpu_per_req, |x| format!("{x:.2}")),
                fmt_int(median(c.cpu_pct.clone())),
            );
        }
        let _ = writeln!(
            out,
            "\n× is the ratio to hyper-util legacy on the tokio multi-thread runtime. The \
             client's CPU time is the whole client process's (`getrusage`) over the phase; {} \
             s phases after a 1 s warm-up, median of {} run(s){}.",
            v["phase_s"].as_f64().unwrap_or(f64::NAN),
            v["runs"].as_u64().unwrap_or(0),
            if v["runs"].as_u64().unwrap_or(0) > 1 {
                " (min–max)"
            } else {
                ""
            }
        );
        Some(out)
    }

    /// The README's section (between the markers).
    pub fn readme_section(&self, chart: &str) -> String {
        let set = self.settings();
        let mut out = String::new();
        let _ = writeln!(out, "### fibr against the servers you would pick instead\n");
        let _ = writeln!(
            out,
            "Written by `{}{}` (`benches/compare.rs`) on {}; {}. \
             Every server serves the same routes with {} worker thread(s), pinned to CPU {}; \
             the load generator runs on CPU {}. {} Medians of {} run(s){}; × is the ratio to \
             axum::serve (in the gRPC row, to tonic's own server; in the HTTP/3 rows, to quinn). **Server CPU µs/request** (utime + stime from `/proc/PID/stat` over \
             the phase, divided by the requests served) is the robust figure here: with two \
             cores the load generator is often the bottleneck, which caps requests/s. The \
             *floor* is a fixed-response epoll loop (`benches/peers/src/bin/floor.rs`), not a \
             server: the least a request can cost on this kernel (it does not echo). This \
             machine was shared with other work during the run (load average {} before, {} \
             after; the \"other load\" row).\n",
            self.command,
            if self.command.contains(" -- ") {
                " --update-readme"
            } else {
                " -- --update-readme"
            },
            self.machine,
            self.date,
            self.workers,
            self.cpus.0,
            self.cpus.1,
            if self.quick {
                "A quick run: 1 s phases."
            } else {
                "5 s phases after a 1 s warm-up, each on a fresh server."
            },
            set.runs,
            if set.runs > 1 { " (min–max)" } else { "" },
            self.load_before,
            self.load_after,
        );
        let mut more = Vec::new();
        if self.cells.iter().any(|c| c.scenario.ws()) {
            more.push(format!(
                "The WebSocket rows (issue 14) run on the servers that speak it: fibr::ws is \
                 fibr's own WebSocket (`fibr::ws::WebSocketUpgrade` in the same axum handler, \
                 permessage-deflate on with `DeflateConfig::default()`: no context takeover); \
                 fibr and axum::serve run axum's own `WebSocketUpgrade` (on fibr, the \
                 upgraded socket is handed with the bytes already read to hyper on the tokio \
                 runtime fibr's workers enter, a background one with one worker here, where \
                 axum's `on_upgrade` task runs too); actix-web runs `actix-ws`. Only fibr::ws \
                 negotiates permessage-deflate (tungstenite under axum and actix-ws do not), \
                 so the deflate rows have one column. The load is this bench's own generator \
                 (`benches/compare/ws.rs`: one thread, epoll, {} connections, one message in \
                 flight on each, masked, every echo checked byte for byte; with deflate it \
                 offers `permessage-deflate; client_no_context_takeover; \
                 server_no_context_takeover`, sends its message compressed and inflates \
                 every echo, which must come back compressed). The idle WebSocket \
                 connections are upgraded by the same client, one message echoed on each, \
                 then held.",
                crate::ws::CONNS,
            ));
        }
        if self
            .cells
            .iter()
            .any(|c| c.scenario.tls() && !c.scenario.h2() && !c.scenario.h3())
        {
            more.push(
                "The HTTPS rows run on the servers with TLS of their own, all on rustls 0.23 \
                 with the ring provider and one `ServerConfig` (TLS 1.2 and 1.3, ALPN \
                 `http/1.1`, stateless session tickets; an ECDSA P-256 certificate made for \
                 the run): fibr with `serve(..).with_tls(config)`; in the axum::serve column, \
                 the same axum `Router` on hyper-util's connection builder over \
                 tokio-rustls, as axum-server serves it; actix-web with its `rustls-0_23` \
                 feature. The tools negotiate TLS 1.3 (OpenSSL); the handshake churn makes a \
                 full handshake per request (ab resumes no session), and the idle TLS \
                 connections are this bench's own (rustls's client: a full handshake and one \
                 GET each, then only the socket kept)."
                    .to_string(),
            );
        }
        if self.cells.iter().any(|c| c.scenario.h2()) {
            more.push(
                "The HTTP/2 rows (issue 13) run on the servers that speak it: fibr, with \
                 `fibr::serve` as it is (h2c by prior knowledge beside HTTP/1.1 on the same \
                 port; over TLS, h2 by ALPN), and axum::serve, hyper's h2 through \
                 hyper-util's `auto` connection builder (over TLS: the same builder on \
                 tokio-rustls). Their TLS config is the HTTPS rows' with ALPN `h2`, \
                 `http/1.1`. The load is `h2load` with 100 connections and 1 or 10 streams in \
                 flight on each; every phase must end with all requests answered 2xx (no \
                 failed, errored or timed-out one). The idle h2c connections are this \
                 bench's own client: the preface, SETTINGS and one GET / each, its response \
                 read, then only the socket kept."
                    .to_string(),
            );
        }
        if self.cells.iter().any(|c| c.scenario == Scenario::Grpc) {
            more.push(
                "The gRPC row (issue 13) serves the gRPC example's hand-written tonic service \
                 (`examples/grpc/echo.rs`, raw-bytes messages) from one source file on both \
                 servers: fibr with `fibr::serve`, and tonic's own \
                 `tonic::transport::Server` (hyper's h2 on tokio), the ratios' base in that \
                 row. The load is `h2load` posting one 64-byte length-prefixed message with \
                 `content-type: application/grpc` to the unary method; every phase must have \
                 every call answered with its message, and a probe with hyper's HTTP/2 \
                 client reads `grpc-status: 0` before and after it."
                    .to_string(),
            );
        }
        if self.cells.iter().any(|c| c.scenario.h3()) {
            more.push(crate::h3::README_NOTE.to_string());
        }
        if self.cells.iter().any(|c| c.scenario.percentiles()) {
            more.push(crate::h1load::README_NOTE.to_string());
        }
        if self.client.is_some() || self.executor.is_some() || self.proxy.is_some() {
            more.push(
                "The HTTP client, executor and proxy tables come from `benches/client.rs`, \
                 `benches/executor.rs` and `benches/proxy.rs`, which this command runs as they \
                 are, with their own repetitions; their ratios are to hyper-util's legacy \
                 client on tokio's multi-thread runtime, to tokio's multi-thread runtime, and \
                 to a tokio proxy written the usual way (a task per client, \
                 `copy_bidirectional`; `benches/peers/src/bin/tokio_proxy.rs`)."
                    .to_string(),
            );
        }
        if !more.is_empty() {
            let _ = writeln!(out, "{}\n", more.join(" "));
        }
        let _ = writeln!(
            out,
            "![server CPU per request relative to axum::serve (gRPC: tonic), and fibr's client and executor \
             relative to hyper-util and tokio]({chart})\n"
        );
        out.push_str(&self.markdown());
        out
    }
}

/// `benches/executor.rs`'s or `benches/proxy.rs`'s figures (`v`, their JSON): a row per
/// scenario, fibr against tokio.
fn versus_tokio_table(title: &str, v: &Value, figs: &[VersusTokio]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "| {title} | unit | fibr | tokio | fibr / tokio |");
    out.push_str("|---|---|---:|---:|---:|\n");
    let num = |x: f64| {
        if x >= 100.0 {
            format!("{x:.0}")
        } else {
            format!("{x:.1}")
        }
    };
    for f in figs {
        let r = median(f.fibr.clone()) / median(f.tokio.clone());
        let _ = writeln!(
            out,
            "| {} ({}) | {} | {} | {} | {} |",
            f.name,
            f.desc,
            f.unit,
            spread(&f.fibr, num),
            spread(&f.tokio, num),
            fmt_ratio(r)
        );
    }
    let _ = writeln!(
        out,
        "\nMedian of {} repetition(s) each (min–max), fibr and tokio alternated.",
        v["reps"].as_u64().unwrap_or(0)
    );
    out
}

/// Replaces the text between the README's markers with `section`.
pub fn update_readme(path: &Path, section: &str) -> Result<(), String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let (Some(b), Some(e)) = (text.find(README_BEGIN), text.find(README_END)) else {
        return Err(format!(
            "{} has no `{README_BEGIN}` … `{README_END}` markers: add them where the \
             section belongs",
            path.display()
        ));
    };
    if e < b {
        return Err(format!("{}: the markers are out of order", path.display()));
    }
    let new = format!(
        "{}{README_BEGIN}\n{}{}",
        &text[..b],
        section.trim_end_matches('\n').to_string() + "\n",
        &text[e..]
    );
    write_atomic(path, &new)
}

/// Writes `path` through a `.tmp` file renamed over it.
pub fn write_atomic(path: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// "median (min–max)" of `xs`, or the one value.
fn spread(xs: &[f64], fmt: fn(f64) -> String) -> String {
    let mut out = fmt(median(xs.to_vec()));
    if xs.len() > 1 {
        let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let _ = write!(out, " ({}–{})", fmt(min), fmt(max));
    }
    out
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        l if l % 2 == 1 => v[l / 2],
        l => (v[l / 2 - 1] + v[l / 2]) / 2.0,
    }
}

pub fn fmt_us(us: f64) -> String {
    if us.is_nan() {
        "—".into()
    } else if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

pub fn fmt_ratio(r: f64) -> String {
    if r < 0.095 {
        format!("{r:.3}×")
    } else {
        format!("{r:.2}×")
    }
}

/// 1234567.8 -> "1,234,568".
fn fmt_int(x: f64) -> String {
    if !x.is_finite() {
        return "—".into();
    }
    let neg = x < 0.0;
    let digits = format!("{:.0}", x.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if neg {
        format!("-{out}")
    } else {
        out
    }
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// "YYYY-MM-DD HH:MM UTC" now.
fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}
