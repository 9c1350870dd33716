//! The JSON a bench of its own writes with `--json FILE` for `cargo bench --bench compare`,
//! which runs it as it is and shows its figures beside the others: fibr first, then its
//! peers, and per scenario every run's figure for each. Each such bench includes this file.
#![allow(dead_code)]

use std::path::Path;

/// One scenario's row: `figures[i]` are server `i`'s runs.
pub fn scenario(name: &str, desc: &str, unit: &str, figures: &[Vec<f64>]) -> serde_json::Value {
    serde_json::json!({ "name": name, "desc": desc, "unit": unit, "figures": figures })
}

/// Writes the bench's results: `bench` (its name), the command that reproduces them, a
/// title, the servers (fibr first), the runs per cell and the scenarios' rows.
pub fn write_json(
    path: &Path,
    bench: &str,
    command: &str,
    title: &str,
    servers: &[&str],
    reps: usize,
    scenarios: Vec<serde_json::Value>,
) -> Result<(), String> {
    let doc = serde_json::json!({
        "bench": bench,
        "command": command,
        "title": title,
        "servers": servers,
        "reps": reps,
        "scenarios": scenarios,
    });
    std::fs::write(path, doc.to_string()).map_err(|e| format!("{}: {e}", path.display()))
}
