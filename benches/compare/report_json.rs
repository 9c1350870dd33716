//! The compare bench's results as JSON, written and read back (`--from-json`).

use super::*;

impl Report {
    pub fn to_json(&self) -> String {
        let cells: Vec<Value> = self
            .cells
            .iter()
            .map(|c| {
                let mut v = json!({
                    "scenario": c.scenario.key(),
                    "server": c.server,
                });
                if c.scenario.idle() {
                    v["runs"] = c.idles.iter().map(idle_json).collect();
                    v["median"] = json!({
                        "per_conn_b": median(c.values(PER_CONN)),
                        "loaded_kib": median(c.values(Figure::Idle(|r| r.loaded_kib as f64))),
                        "empty_kib": median(c.values(Figure::Idle(|r| r.empty_kib as f64))),
                    });
                } else {
                    v["runs"] = c.loads.iter().map(load_json).collect();
                    v["median"] = json!({
                        "rps": median(c.values(RPS)),
                        "cpu_per_req_us": median(c.values(CPU_PER_REQ)),
                        "p99_us": median(c.values(P99)),
                        "peak_rss_kib": median(c.values(PEAK_RSS)),
                    });
                    if c.scenario.percentiles() {
                        v["median"]["p50_us"] = json!(median(c.values(Figure::Load(|l| l.p50_us))));
                        v["median"]["p999_us"] = json!(median(c.values(P999)));
                        v["median"]["max_us"] = json!(median(c.values(Figure::Load(|l| l.max_us))));
                    }
                }
                let f = if c.scenario.idle() {
                    PER_CONN
                } else {
                    CPU_PER_REQ
                };
                let base = c.scenario.base();
                let r = self.ratio(c.scenario, c.server, base, f);
                if r.is_finite() {
                    v[format!("ratio_to_{base}")] = json!(r);
                }
                v
            })
            .collect();
        let set = self.settings();
        let doc = json!({
            "command": self.command,
            "date": self.date,
            "machine": self.machine,
            "cpus": { "server": self.cpus.0, "load": self.cpus.1 },
            "workers": self.workers,
            "fibr_backend": self.backend,
            "quick": self.quick,
            "runs": self.runs,
            "phase_s": set.phase.as_secs(),
            "idle_conns": set.idle_conns,
            "loadavg_before": self.load_before,
            "loadavg_after": self.load_after,
            "servers": self.servers().iter().map(|s| json!({"key": s.key, "label": s.label})).collect::<Vec<_>>(),
            "scenarios": self.all_scenarios().iter().map(|s| json!({"key": s.key(), "title": s.title(), "load": s.tool(&set)})).collect::<Vec<_>>(),
            "cells": cells,
        });
        let mut doc = doc;
        if let Some(c) = &self.client {
            doc["client"] = c.clone();
        }
        if let Some(e) = &self.executor {
            doc["executor"] = e.clone();
        }
        if !self.sides.is_empty() {
            doc["sides"] = json!(self.sides);
        }
        if let Some(p) = &self.proxy {
            doc["proxy"] = p.clone();
        }
        if let Some(b) = &self.rate_base {
            doc["rate_base"] = json!({ "rps": b.rps, "from": b.from });
        }
        let mut text = serde_json::to_string_pretty(&doc).expect("JSON values serialize");
        text.push('\n');
        text
    }

    pub fn from_json(text: &str) -> Result<Report, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("bad JSON: {e}"))?;
        let s = |k: &str| -> Result<String, String> {
            v[k].as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("no {k:?}"))
        };
        let n = |v: &Value, k: &str| -> Result<f64, String> {
            v[k].as_f64().ok_or_else(|| format!("no number {k:?}"))
        };
        let mut cells = Vec::new();
        for c in v["cells"].as_array().ok_or("no \"cells\"")? {
            let sc = c["scenario"]
                .as_str()
                .and_then(Scenario::from_key)
                .ok_or("a cell without a known scenario")?;
            let srv = c["server"]
                .as_str()
                .and_then(server)
                .ok_or("a cell without a known server")?;
            let mut cell = Cell::new(sc, srv.key);
            for r in c["runs"].as_array().ok_or("a cell without runs")? {
                if sc.idle() {
                    cell.idles.push(Idle {
                        empty_kib: n(r, "empty_kib")? as u64,
                        half_kib: n(r, "half_kib")? as u64,
                        loaded_kib: n(r, "loaded_kib")? as u64,
                        peak_kib: n(r, "peak_kib")? as u64,
                        threads: n(r, "threads")? as u64,
                        n: n(r, "n")? as usize,
                    });
                } else {
                    // Only `compare/h1load.rs`'s scenarios have these (and older JSON none).
                    let opt = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
                    cell.loads.push(Load {
                        requests: n(r, "requests")? as u64,
                        wall: Duration::from_secs_f64(n(r, "wall_s")?),
                        cpu_us: n(r, "cpu_us")?,
                        client_us: n(r, "client_us")?,
                        other_server_us: n(r, "other_server_us")?,
                        other_client_us: n(r, "other_client_us")?,
                        p99_us: n(r, "p99_us")?,
                        p50_us: opt("p50_us"),
                        p999_us: opt("p999_us"),
                        max_us: opt("max_us"),
                        target_rps: r["target_rps"].as_f64().unwrap_or(0.0),
                        peak_rss_kib: n(r, "peak_rss_kib")? as u64,
                        idle_rss_kib: n(r, "idle_rss_kib")? as u64,
                        opens: n(r, "opens")? as u64,
                        errors: n(r, "errors")? as u64,
                    });
                }
            }
            cells.push(cell);
        }
        Ok(Report {
            command: s("command")?,
            date: s("date")?,
            machine: s("machine")?,
            cpus: (
                n(&v["cpus"], "server")? as usize,
                n(&v["cpus"], "load")? as usize,
            ),
            workers: s("workers")?,
            backend: s("fibr_backend")?,
            quick: v["quick"].as_bool().ok_or("no \"quick\"")?,
            runs: n(&v, "runs")? as usize,
            load_before: s("loadavg_before")?,
            load_after: s("loadavg_after")?,
            cells,
            client: match v.get("client") {
                Some(c) => micro::client_figs(c).map(|_| Some(c.clone()))?,
                None => None,
            },
            executor: match v.get("executor") {
                Some(e) => micro::exec_figs(e).map(|_| Some(e.clone()))?,
                None => None,
            },
            proxy: match v.get("proxy") {
                Some(p) => micro::proxy_figs(p).map(|_| Some(p.clone()))?,
                None => None,
            },
            rate_base: match v.get("rate_base") {
                Some(b) => Some(RateBase {
                    rps: n(b, "rps")?,
                    from: b["from"].as_str().unwrap_or("?").to_string(),
                }),
                None => None,
            },
            sides: match v.get("sides").and_then(Value::as_array) {
                Some(sides) => sides
                    .iter()
                    .map(|s| side::parse(s).map(|_| s.clone()))
                    .collect::<Result<_, _>>()?,
                None => Vec::new(),
            },
        })
    }
}

fn load_json(l: &Load) -> Value {
    let mut v = json!({
        "requests": l.requests,
        "wall_s": l.wall.as_secs_f64(),
        "cpu_us": l.cpu_us,
        "client_us": l.client_us,
        "other_server_us": l.other_server_us,
        "other_client_us": l.other_client_us,
        "p99_us": l.p99_us,
        "peak_rss_kib": l.peak_rss_kib,
        "idle_rss_kib": l.idle_rss_kib,
        "opens": l.opens,
        "errors": l.errors,
        "rps": l.rps(),
        "cpu_per_req_us": l.cpu_per_req(),
    });
    // `compare/h1load.rs`'s figures (NaN, left out, from the other generators).
    for (k, x) in [
        ("p50_us", l.p50_us),
        ("p999_us", l.p999_us),
        ("max_us", l.max_us),
        ("target_rps", l.target_rps),
    ] {
        if x.is_finite() && x > 0.0 {
            v[k] = json!(x);
        }
    }
    v
}

fn idle_json(r: &Idle) -> Value {
    json!({
        "n": r.n,
        "empty_kib": r.empty_kib,
        "half_kib": r.half_kib,
        "loaded_kib": r.loaded_kib,
        "peak_kib": r.peak_kib,
        "threads": r.threads,
        "per_conn_b": r.per_conn(),
        "marginal_b": r.marginal(),
    })
}
