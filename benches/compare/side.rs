//! The benches of their own that put fibr beside peers other than axum (issue 30's static
//! files and gateway against nginx, issue 32's arpc against Go's): run as they are with
//! `--json` (`support/side.rs` writes it), each a table of its own in the report.

use std::fmt::Write;

use serde_json::Value;

use crate::micro::Bench;
use crate::report::{fmt_ratio, median};

pub const FILES: Bench = Bench {
    name: "files",
    features: Some("axum"),
};
pub const GATEWAY: Bench = Bench {
    name: "gateway",
    features: Some("client"),
};
pub const ARPC: Bench = Bench {
    name: "arpc",
    features: Some("arpc"),
};

/// One scenario: every run's figure per server (fibr first).
pub struct Row {
    pub name: String,
    pub desc: String,
    pub unit: String,
    pub figures: Vec<Vec<f64>>,
}

/// The servers and the rows of a bench's JSON, checked.
pub fn parse(v: &Value) -> Result<(Vec<String>, Vec<Row>), String> {
    let what = v["bench"].as_str().unwrap_or("a side bench");
    let servers: Vec<String> = v["servers"]
        .as_array()
        .ok_or_else(|| format!("{what}: no \"servers\""))?
        .iter()
        .map(|s| s.as_str().map(str::to_string))
        .collect::<Option<_>>()
        .ok_or_else(|| format!("{what}: a server that is not a string"))?;
    let mut rows = Vec::new();
    for s in v["scenarios"]
        .as_array()
        .ok_or_else(|| format!("{what}: no \"scenarios\""))?
    {
        let text = |k: &str| {
            s[k].as_str()
                .map(str::to_string)
                .ok_or(format!("{what}: no {k}"))
        };
        let figures: Vec<Vec<f64>> = s["figures"]
            .as_array()
            .ok_or_else(|| format!("{what}: a row without figures"))?
            .iter()
            .map(|runs| {
                runs.as_array()?
                    .iter()
                    .map(Value::as_f64)
                    .collect::<Option<Vec<f64>>>()
            })
            .collect::<Option<_>>()
            .ok_or_else(|| format!("{what}: a figure that is not a number"))?;
        if figures.len() != servers.len() || figures.iter().any(Vec::is_empty) {
            return Err(format!(
                "{what}: {} was not run on every server",
                text("name")?
            ));
        }
        rows.push(Row {
            name: text("name")?,
            desc: text("desc")?,
            unit: text("unit")?,
            figures,
        });
    }
    if servers.len() < 2 || rows.is_empty() {
        return Err(format!("{what}: nothing side by side"));
    }
    Ok((servers, rows))
}

/// The bench's table: a row per scenario, fibr's figure and each peer's, and fibr over each.
pub fn table(v: &Value) -> Option<String> {
    let (servers, rows) = parse(v).ok()?;
    let mut out = String::new();
    let title = format!(
        "{} <br>`{}`",
        v["title"].as_str().unwrap_or("?"),
        v["command"].as_str().unwrap_or("?")
    );
    let _ = write!(out, "| {title} | unit | {} |", servers.join(" | "));
    for peer in &servers[1..] {
        let _ = write!(out, " fibr / {peer} |");
    }
    out.push_str("\n|---|---|");
    out.push_str(&"---:|".repeat(2 * servers.len() - 1));
    out.push('\n');
    for r in &rows {
        let m: Vec<f64> = r.figures.iter().map(|f| median(f.clone())).collect();
        let _ = write!(out, "| {} ({}) | {} |", r.name, r.desc, r.unit);
        for (f, med) in r.figures.iter().zip(&m) {
            let min = f.iter().copied().fold(f64::INFINITY, f64::min);
            let max = f.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if f.len() > 1 {
                let _ = write!(out, " {med:.2} ({min:.2}–{max:.2}) |");
            } else {
                let _ = write!(out, " {med:.2} |");
            }
        }
        for peer in &m[1..] {
            let _ = write!(out, " {} |", fmt_ratio(m[0] / peer));
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "\nMedian of {} run(s) each (min–max), the servers alternated.",
        v["reps"].as_u64().unwrap_or(0)
    );
    Some(out)
}
