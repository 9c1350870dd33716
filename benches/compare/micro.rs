//! The client, executor and proxy scenarios: `benches/client.rs`, `benches/executor.rs` and
//! `benches/proxy.rs` run as they are, each as `cargo bench --bench NAME -- --json FILE` (so their figures are the
//! ones their own command prints), on the CPUs this bench was given, and their JSON read
//! back into the report.

use std::io;
use std::os::fd::AsFd;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::load::TempFile;
use crate::proc;

/// Bound on one sub-bench's run, its build excluded (the full client bench takes about
/// 80 s, the executor's about a minute on two cores).
const RUN_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// One of the benches.
#[derive(Clone, Copy)]
pub struct Bench {
    pub name: &'static str,
    pub features: Option<&'static str>,
}

pub const CLIENT: Bench = Bench {
    name: "client",
    features: Some("client"),
};
pub const EXECUTOR: Bench = Bench {
    name: "executor",
    features: None,
};
pub const PROXY: Bench = Bench {
    name: "proxy",
    features: Some("proxy"),
};

impl Bench {
    /// `cargo bench --bench NAME [--features F]`.
    fn cargo_args(&self) -> Vec<String> {
        let mut a = vec!["bench".to_string(), "--bench".into(), self.name.into()];
        if let Some(f) = self.features {
            a.extend(["--features".into(), f.into()]);
        }
        a
    }

    /// The command that reproduces the figures alone.
    pub fn command(&self, quick: bool) -> String {
        let mut c = format!("cargo {}", self.cargo_args().join(" "));
        if quick {
            c.push_str(" -- --quick");
        }
        c
    }

    /// Builds (if `build`) and runs the bench with `args` and `--json`, with the CPUs in
    /// `cpus` (it pins its own threads); its JSON. Its output goes to this process's
    /// stderr.
    pub fn run(&self, args: &[&str], cpus: &[usize], build: bool) -> Result<Value, String> {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let to_stderr = || -> Result<Stdio, String> {
            io::stderr()
                .as_fd()
                .try_clone_to_owned()
                .map(Stdio::from)
                .map_err(|e| format!("dup stderr: {e}"))
        };
        if build {
            let mut a = self.cargo_args();
            a.push("--no-run".into());
            let status = Command::new(&cargo)
                .args(&a)
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .stdout(to_stderr()?)
                .status()
                .map_err(|e| format!("running cargo {}: {e}", a.join(" ")))?;
            if !status.success() {
                return Err(format!("cargo {} failed: {status}", a.join(" ")));
            }
        }
        let out = TempFile::new(&format!("{}.json", self.name));
        let _ = std::fs::remove_file(&out.0);
        let cpu_list = cpus
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let mut a = self.cargo_args();
        a.push("--".into());
        a.extend(args.iter().map(|s| s.to_string()));
        a.extend(["--json".into(), out.0.display().to_string()]);
        // This process is pinned to the load CPU by now: the bench gets them all back.
        let mut child = Command::new("taskset")
            .arg("-c")
            .arg(&cpu_list)
            .arg(&cargo)
            .args(&a)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdin(Stdio::null())
            .stdout(to_stderr()?)
            .spawn()
            .map_err(|e| format!("running cargo {}: {e}", a.join(" ")))?;
        let deadline = Instant::now() + RUN_TIMEOUT;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(100)),
                Ok(None) => {
                    // cargo, the bench under it and the server under that.
                    proc::kill_tree(child.id());
                    let _ = child.wait();
                    return Err(format!(
                        "cargo {} did not finish within {} s",
                        a.join(" "),
                        RUN_TIMEOUT.as_secs()
                    ));
                }
                Err(e) => return Err(format!("waiting for cargo: {e}")),
            }
        };
        if !status.success() {
            return Err(format!("cargo {} failed: {status}", a.join(" ")));
        }
        let text = std::fs::read_to_string(&out.0)
            .map_err(|e| format!("reading {}: {e}", out.0.display()))?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}: bad JSON: {e}", out.0.display()))?;
        if v["bench"].as_str() != Some(self.name) {
            return Err(format!(
                "{}: not the {} bench's results",
                out.0.display(),
                self.name
            ));
        }
        Ok(v)
    }
}

fn nums(v: &Value, what: &str) -> Result<Vec<f64>, String> {
    v.as_array()
        .ok_or_else(|| format!("no {what} list"))?
        .iter()
        .map(|x| {
            x.as_f64()
                .ok_or_else(|| format!("a {what} that is not a number"))
        })
        .collect()
}

/// One client of `benches/client.rs`, over its runs.
pub struct ClientFig {
    pub key: String,
    pub name: String,
    pub rps: Vec<f64>,
    pub cpu_per_req: Vec<f64>,
    pub cpu_pct: Vec<f64>,
}

/// The base of the client ratios: hyper-util's legacy client on a multi-thread runtime.
pub const CLIENT_BASE: &str = "mt";
/// hyper-util's legacy client on a current-thread runtime.
pub const CLIENT_CT: &str = "ct";

pub fn client_figs(v: &Value) -> Result<Vec<ClientFig>, String> {
    let mut out = Vec::new();
    for c in v["clients"].as_array().ok_or("client: no \"clients\"")? {
        let runs = c["runs"]
            .as_array()
            .ok_or("client: a client without runs")?;
        let col = |k: &str| -> Result<Vec<f64>, String> {
            nums(
                &Value::Array(runs.iter().map(|r| r[k].clone()).collect()),
                k,
            )
        };
        out.push(ClientFig {
            key: c["key"].as_str().ok_or("client: no key")?.to_string(),
            name: c["name"].as_str().ok_or("client: no name")?.to_string(),
            rps: col("rps")?,
            cpu_per_req: col("cpu_per_req_us")?,
            cpu_pct: col("cpu_pct")?,
        });
    }
    if out.iter().all(|c| c.key != "fibr") || out.iter().all(|c| c.key != CLIENT_BASE) {
        return Err("client: fibr's or hyper-util's figures are missing".into());
    }
    if out.iter().any(|c| c.rps.is_empty()) {
        return Err("client: a client without runs".into());
    }
    Ok(out)
}

/// One scenario of `benches/executor.rs` or `benches/proxy.rs`: the figure per repetition
/// with fibr and with tokio (lower is better).
pub struct VersusTokio {
    pub name: String,
    pub desc: String,
    pub unit: String,
    pub fibr: Vec<f64>,
    pub tokio: Vec<f64>,
}

pub fn exec_figs(v: &Value) -> Result<Vec<VersusTokio>, String> {
    versus_tokio(v, "executor")
}

pub fn proxy_figs(v: &Value) -> Result<Vec<VersusTokio>, String> {
    versus_tokio(v, "proxy")
}

/// The `scenarios` of bench `what`'s JSON.
fn versus_tokio(v: &Value, what: &str) -> Result<Vec<VersusTokio>, String> {
    let mut out = Vec::new();
    for s in v["scenarios"]
        .as_array()
        .ok_or_else(|| format!("{what}: no \"scenarios\""))?
    {
        let text = |k: &str| -> Result<String, String> {
            s[k].as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("{what}: a scenario without {k}"))
        };
        let fig = VersusTokio {
            name: text("name")?,
            desc: text("desc")?,
            unit: text("unit")?,
            fibr: nums(&s["fibr"], "fibr figure")?,
            tokio: nums(&s["tokio"], "tokio figure")?,
        };
        if fig.fibr.is_empty() || fig.tokio.is_empty() {
            return Err(format!("{what}: {} was not run on both", fig.name));
        }
        out.push(fig);
    }
    if out.is_empty() {
        return Err(format!("{what}: no scenario"));
    }
    Ok(out)
}
