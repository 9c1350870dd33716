/// `cargo test --all-targets` runs bench binaries too (without `--bench`): there, a
/// benchmark only checks that it builds, so the test suite stays fast.
pub fn skip_unless_benchmarking() -> bool {
    if std::env::args().any(|a| a == "--bench") {
        return false;
    }
    eprintln!("not run under `cargo test`; use `cargo bench` to measure");
    true
}
