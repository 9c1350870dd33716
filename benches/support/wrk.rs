//! wrk runs and the medians the small benches report. Each bench includes this file.
#![allow(dead_code)]

use std::time::Duration;

use super::server_support::pinned_command;

/// What a wrk run did: the requests it completed and the bytes it read (partial
/// responses included).
pub struct Done {
    pub requests: u64,
    pub bytes: f64,
}

/// `wrk -t1 -cCONNS -dSECS URL` pinned to `cpu` (an error if wrk saw a non-2xx answer or
/// a socket error).
pub fn run(cpu: usize, conns: usize, phase: Duration, url: &str) -> Result<Done, String> {
    let out = pinned_command(cpu, "wrk")
        .args([
            "-t1",
            &format!("-c{conns}"),
            &format!("-d{}s", phase.as_secs().max(1)),
        ])
        .arg(url)
        .output()
        .map_err(|e| format!("wrk: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if text.contains("Non-2xx") || text.contains("Socket errors") {
        return Err(format!("wrk saw errors:\n{text}"));
    }
    // "  12345 requests in 5.00s, 4.88GB read"
    let line = text
        .lines()
        .find(|l| l.contains(" requests in "))
        .ok_or_else(|| format!("no request count in wrk's output:\n{text}"))?;
    let requests = line.split_whitespace().next().and_then(|n| n.parse().ok());
    let bytes = line
        .rsplit_once(", ")
        .and_then(|(_, b)| size(b.trim_end_matches(" read")));
    match (requests, bytes) {
        (Some(requests), Some(bytes)) => Ok(Done { requests, bytes }),
        _ => Err(format!("cannot read wrk's line {line:?}")),
    }
}

/// The requests `wrk` completed (see [`run`]).
pub fn requests(cpu: usize, conns: usize, phase: Duration, url: &str) -> Result<u64, String> {
    run(cpu, conns, phase, url).map(|d| d.requests)
}

/// wrk's sizes: `4.88GB`, `512.00MB`, `1.20KB`, `900B` (powers of 1024).
fn size(s: &str) -> Option<f64> {
    let s = s.trim();
    let (num, mult) = [
        ("TB", 1u64 << 40),
        ("GB", 1 << 30),
        ("MB", 1 << 20),
        ("KB", 1 << 10),
        ("B", 1),
    ]
    .iter()
    .find_map(|(suffix, m)| Some((s.strip_suffix(suffix)?, *m)))?;
    num.parse::<f64>().ok().map(|n| n * mult as f64)
}

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[s.len() / 2]
}

/// "median (min–max)".
pub fn spread(v: &[f64]) -> String {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{:.2} ({min:.2}–{max:.2})", median(v))
}
