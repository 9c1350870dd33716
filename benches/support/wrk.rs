//! wrk runs and the medians the small benches report. Each bench includes this file.
#![allow(dead_code)]

use std::time::Duration;

use super::server_support::pinned_command;

/// `wrk -t1 -cCONNS -dSECS URL` pinned to `cpu`: the requests it completed (an error if
/// wrk saw a non-2xx answer or a socket error).
pub fn requests(cpu: usize, conns: usize, phase: Duration, url: &str) -> Result<u64, String> {
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
    text.lines()
        .find_map(|l| l.trim().split_once(" requests in ")?.0.parse().ok())
        .ok_or_else(|| format!("no request count in wrk's output:\n{text}"))
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
