//! The rustls provider the TLS tests run on, from `FIBR_TLS_PROVIDER`: `ring` (or unset)
//! installs none, so fibr falls back to ring as a program that installs none does;
//! `aws-lc-rs` (a build with feature `tls-aws-lc`) installs aws-lc-rs as rustls's process
//! default, which fibr then uses too. The integration tests' `common::pki` and the lib's
//! TLS unit tests (through `#[path]`) share it.

/// What `FIBR_TLS_PROVIDER` asks for: `"ring"` or `"aws-lc-rs"`.
pub fn asked() -> &'static str {
    match std::env::var("FIBR_TLS_PROVIDER").as_deref() {
        Err(_) | Ok("" | "ring") => "ring",
        Ok("aws-lc-rs") => "aws-lc-rs",
        Ok(other) => panic!("FIBR_TLS_PROVIDER={other:?}: ring or aws-lc-rs"),
    }
}

/// Installs the provider asked for as the process default (once; nothing for ring).
pub fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if asked() == "aws-lc-rs" {
            #[cfg(feature = "tls-aws-lc")]
            let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
            #[cfg(not(feature = "tls-aws-lc"))]
            panic!("FIBR_TLS_PROVIDER=aws-lc-rs needs a build with feature tls-aws-lc");
        }
    });
}
