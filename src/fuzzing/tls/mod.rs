//! For the fuzzers (`fuzz/` and `tests/fuzz_fallback.rs`): the server's TLS machine fed
//! arbitrary bytes, in pieces. Not part of the API. The certificate and key are a
//! throwaway self-signed pair made for this (`CN=fuzz.fibr.invalid`); they protect nothing.

use crate::proto::tls::{Event, Session, MAX_RECORD};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::UnbufferedServerConnection;
use rustls::ServerConfig;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

const CERT: &[u8] = include_bytes!("cert.pem");
const KEY: &[u8] = include_bytes!("key.pem");

fn config() -> Arc<ServerConfig> {
    static CONFIG: OnceLock<Arc<ServerConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let cert = CertificateDer::from_pem_slice(CERT).expect("the fuzz certificate");
            let key = PrivateKeyDer::from_pem_slice(KEY).expect("the fuzz key");
            let config = ServerConfig::builder_with_provider(crate::tls::crypto_provider())
                .with_safe_default_protocol_versions()
                .expect("the provider does TLS 1.2 and 1.3")
                .with_no_client_auth()
                .with_single_cert(vec![cert], key)
                .expect("the fuzz pair");
            Arc::new(config)
        })
        .clone()
}

/// What the machine did with one connection's input.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// It refused the input (after writing its alert, or the plain-HTTP answer).
    pub failed: bool,
    /// The handshake finished.
    pub opened: bool,
    /// Plaintext delivered.
    pub plaintext: Vec<u8>,
    /// The most input kept between pieces (a partial record).
    pub most_kept: usize,
    /// Bytes it wanted sent back, in all.
    pub wire_bytes: usize,
}

/// Feeds `pieces` to a fresh server session, keeping what it leaves unconsumed as a driver
/// does. Panics if the machine breaks its contract (consumes more than it was given, or
/// keeps more than a partial record).
pub fn serve_records(pieces: &[&[u8]], answer_plain_http: bool) -> Outcome {
    let conn = UnbufferedServerConnection::new(config()).expect("a server connection");
    let mut session = Session::new(conn, Instant::now(), None).answer_plain_http(answer_plain_http);
    let mut out = Outcome::default();
    let mut kept: Vec<u8> = Vec::new();
    for piece in pieces {
        kept.extend_from_slice(piece);
        let mut wire = Vec::new();
        let res = session.receive(&mut kept, &mut wire, &mut |d| {
            match d {
                Event::Opened(_) => out.opened = true,
                Event::Data(p) => out.plaintext.extend_from_slice(p),
            }
            true
        });
        out.wire_bytes += wire.len();
        match res {
            Ok(r) => {
                assert!(r.consumed <= kept.len(), "consumed more than given");
                kept.drain(..r.consumed);
                assert!(kept.len() < MAX_RECORD + 5, "kept {} bytes", kept.len());
                out.most_kept = out.most_kept.max(kept.len());
            }
            Err(_) => {
                out.failed = true;
                return out;
            }
        }
    }
    out
}

/// The fuzz property: `input` served whole, split at `split` (modulo its length) and byte
/// by byte never panics, keeps no more than a partial record, and is refused (or not) the
/// same way, with the same plaintext.
pub fn check_split_invariance(input: &[u8], split: usize, answer_plain_http: bool) {
    let split = split % (input.len() + 1);
    let whole = serve_records(&[input], answer_plain_http);
    let (a, b) = input.split_at(split);
    let two = serve_records(&[a, b], answer_plain_http);
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    let each = serve_records(&bytes, answer_plain_http);
    assert_eq!(whole.failed, two.failed, "split at {split}");
    assert_eq!(whole.failed, each.failed, "byte by byte");
    assert_eq!(whole.plaintext, two.plaintext, "split at {split}");
    assert_eq!(whole.plaintext, each.plaintext, "byte by byte");
}
