//! Certificates made in the test (rcgen): a CA, server certificates it signs for the
//! names given, a client certificate, PEM files for curl/openssl/Python, and rustls
//! configs on the provider the tests run on ([`provider`]).

use super::TempPath;
use fibr::tls::rustls;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::sync::Arc;

/// The provider the TLS tests run on: fibr's, once the one `FIBR_TLS_PROVIDER` asks for is
/// installed ([`super::tls_provider`]).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    super::tls_provider::install();
    fibr::tls::crypto_provider()
}

/// A CA and what it signed.
pub struct Pki {
    ca: CertifiedIssuer<'static, KeyPair>,
    /// The CA's certificate as a PEM file (curl `--cacert`, openssl `-CAfile`).
    pub ca_pem: TempPath,
}

/// A leaf certificate with its key, in DER and as PEM files.
pub struct Leaf {
    pub chain: Vec<CertificateDer<'static>>,
    key_der: Vec<u8>,
    pub cert_pem: TempPath,
    pub key_pem: TempPath,
}

impl Leaf {
    pub fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()))
    }
}

impl Pki {
    pub fn new() -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "fibr test CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let ca_pem = TempPath::new("ca", "pem");
        std::fs::write(&ca_pem, ca.pem()).unwrap();
        Pki { ca, ca_pem }
    }

    /// A server certificate for `names` (its common name is the first).
    pub fn server(&self, names: &[&str]) -> Leaf {
        self.leaf(names, ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// A client certificate whose common name is `name`.
    pub fn client(&self, name: &str) -> Leaf {
        self.leaf(&[name], ExtendedKeyUsagePurpose::ClientAuth)
    }

    fn leaf(&self, names: &[&str], usage: ExtendedKeyUsagePurpose) -> Leaf {
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.distinguished_name.push(DnType::CommonName, names[0]);
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        let cert_pem = TempPath::new("cert", "pem");
        std::fs::write(&cert_pem, cert.pem()).unwrap();
        let key_pem = TempPath::new("key", "pem");
        std::fs::write(&key_pem, key.serialize_pem()).unwrap();
        Leaf {
            chain: vec![cert.der().clone(), self.ca.der().clone()],
            key_der: key.serialize_der(),
            cert_pem,
            key_pem,
        }
    }

    pub fn roots(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        roots
    }

    /// A server config for `leaf`, TLS 1.2 and 1.3, no client authentication.
    pub fn server_config(&self, leaf: &Leaf) -> ServerConfig {
        ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(leaf.chain.clone(), leaf.key())
            .unwrap()
    }

    /// A client config trusting this CA.
    pub fn client_config(&self) -> ClientConfig {
        ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(self.roots())
            .with_no_client_auth()
    }
}
