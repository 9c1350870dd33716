//! What every benchmark binary shares: staying out of `cargo test`. Each bench uses part of it.
#![allow(dead_code)]

/// `cargo test --all-targets` runs bench binaries too (without `--bench`): there, a
/// benchmark only checks that it builds, so the test suite stays fast.
pub fn skip_unless_benchmarking() -> bool {
    if std::env::args().any(|a| a == "--bench") {
        return false;
    }
    eprintln!("not run under `cargo test`; use `cargo bench` to measure");
    true
}

/// A benchmark's `main`: skipped under `cargo test`, else runs `bench` and reports its
/// error (prefixed with `name`) as a failure.
pub fn bench_main(name: &str, bench: fn() -> Result<(), String>) -> std::process::ExitCode {
    if skip_unless_benchmarking() {
        return std::process::ExitCode::SUCCESS;
    }
    match bench() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
