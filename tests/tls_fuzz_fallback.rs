//! The stable fallback of the `tls_server_records` fuzz target (which needs nightly and
//! libFuzzer): the server's TLS machine on random bytes, on real ClientHellos with bytes
//! changed, cut or repeated, and on plain HTTP, whole, split and byte by byte
//! (`fibr::fuzzing::tls::check_split_invariance`). The seed corpus is replayed too.

#![cfg(feature = "tls")]

use fibr::fuzzing::tls::{check_split_invariance, serve_records};
use fibr::tls::rustls;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::Config as PtConfig;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection};
use std::path::Path;
use std::sync::Arc;

/// A real client's first flight (TLS 1.2 or 1.3 offered).
fn client_hello(tls12_only: bool) -> Vec<u8> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider);
    let builder = if tls12_only {
        builder.with_protocol_versions(&[&rustls::version::TLS12])
    } else {
        builder.with_safe_default_protocol_versions()
    };
    // No roots: a ClientHello is made before any certificate is seen.
    let config = builder
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let mut conn = ClientConnection::new(
        Arc::new(config),
        ServerName::try_from("fuzz.fibr.invalid").unwrap(),
    )
    .unwrap();
    let mut out = Vec::new();
    conn.write_tls(&mut out).unwrap();
    out
}

fn config(cases: u32) -> PtConfig {
    PtConfig {
        cases,
        failure_persistence: None,
        ..PtConfig::default()
    }
}

#[test]
fn a_real_client_hello_is_answered_and_kept_nothing() {
    for tls12 in [false, true] {
        let hello = client_hello(tls12);
        let out = serve_records(&[&hello], false);
        assert!(
            !out.failed && out.wire_bytes > 0,
            "a ServerHello flight: {out:?}"
        );
        assert_eq!(out.most_kept, 0);
        check_split_invariance(&hello, hello.len() / 2, false);
    }
}

#[test]
fn plain_http_is_refused_however_it_arrives() {
    let req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    for answer in [false, true] {
        let out = serve_records(&[req], answer);
        assert!(out.failed);
        check_split_invariance(req, 3, answer);
    }
}

#[test]
fn seed_corpus_replays() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/tls_server_records");
    let mut seeds = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        if data.len() >= 2 {
            let split = u16::from_le_bytes([data[0], data[1]]) as usize;
            check_split_invariance(&data[2..], split, data[0] & 1 == 1);
            seeds += 1;
        }
    }
    assert!(seeds >= 2, "seeds in {}", dir.display());
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn random_bytes(input in vec(any::<u8>(), 0..600), split in any::<usize>(), plain in any::<bool>()) {
        check_split_invariance(&input, split, plain);
    }

    #[test]
    fn a_record_header_then_random_bytes(
        typ in prop_oneof![Just(0x14u8), Just(0x15), Just(0x16), Just(0x17), any::<u8>()],
        len in any::<u16>(),
        body in vec(any::<u8>(), 0..300),
        split in any::<usize>(),
    ) {
        let mut input = vec![typ, 0x03, 0x03];
        input.extend_from_slice(&len.to_be_bytes());
        input.extend_from_slice(&body);
        check_split_invariance(&input, split, false);
    }

    #[test]
    fn client_hellos_with_bytes_changed_cut_or_repeated(
        tls12 in any::<bool>(),
        edits in vec((any::<usize>(), any::<u8>()), 0..8),
        cut in any::<usize>(),
        repeat in any::<bool>(),
        split in any::<usize>(),
    ) {
        let mut input = client_hello(tls12);
        for (at, byte) in edits {
            let i = at % input.len();
            input[i] = byte;
        }
        input.truncate(cut % (input.len() + 1));
        if repeat {
            input.extend_from_within(..);
        }
        check_split_invariance(&input, split, false);
    }
}
