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

/// The command line such a bench takes: `--quick` (1 s phases, 1 run), `--runs N`,
/// `--only a,b` (scenario keys), `--no-build`, `--json FILE`.
pub struct Options {
    pub phase: std::time::Duration,
    pub runs: usize,
    pub quick: bool,
    pub build: bool,
    pub json: Option<std::path::PathBuf>,
    /// The scenario keys `--only` named (all when None).
    pub only: Option<Vec<String>>,
}

impl Options {
    pub fn parse() -> Result<Options, String> {
        let mut o = Options {
            phase: std::time::Duration::from_secs(5),
            runs: 3,
            quick: false,
            build: true,
            json: None,
            only: None,
        };
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            match a.as_str() {
                "--bench" => {}
                "--quick" => {
                    o.phase = std::time::Duration::from_secs(1);
                    o.runs = 1;
                    o.quick = true;
                }
                "--json" => o.json = Some(args.next().ok_or("--json takes a file")?.into()),
                "--no-build" => o.build = false,
                "--runs" => {
                    o.runs = args
                        .next()
                        .and_then(|n| n.parse().ok())
                        .filter(|&n| n > 0)
                        .ok_or("--runs takes a positive number")?
                }
                "--only" => {
                    let list = args.next().ok_or("--only takes a list")?;
                    o.only = Some(list.split(',').map(str::to_string).collect());
                }
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        Ok(o)
    }

    /// The scenarios of `all` to run: those `--only` named, by `key`, or all of them.
    pub fn scenarios<T: Copy>(
        &self,
        all: &[T],
        key: fn(T) -> &'static str,
    ) -> Result<Vec<T>, String> {
        let Some(only) = &self.only else {
            return Ok(all.to_vec());
        };
        only.iter()
            .map(|k| {
                all.iter()
                    .copied()
                    .find(|s| key(*s) == k)
                    .ok_or_else(|| format!("unknown scenario {k:?}"))
            })
            .collect()
    }

    /// " -- --quick" when quick: what the reproducing command adds.
    pub fn quick_suffix(&self) -> &'static str {
        if self.quick {
            " -- --quick"
        } else {
            ""
        }
    }
}
