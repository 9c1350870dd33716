//! The TLS machine driven deterministically: a rustls client in memory as the peer, a
//! fake clock, no sockets.

use super::TlsInfo;
use crate::proto::tls::{sealed_len, Event, Session, MAX_RECORD};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::server::UnbufferedServerConnection;
use rustls::{
    ClientConfig, ClientConnection, DigitallySignedStruct, ServerConfig, SignatureScheme,
};
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "../../tests/common/tls_provider.rs"]
mod tls_provider;

/// The provider these tests run on: fibr's, once the one `FIBR_TLS_PROVIDER` asks for is
/// installed.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    tls_provider::install();
    super::crypto_provider()
}

fn server_config(versions: &[&'static rustls::SupportedProtocolVersion]) -> Arc<ServerConfig> {
    let key = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = key.cert.der().clone();
    let pkcs8 = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.signing_key.serialize_der()));
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(versions)
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], pkcs8)
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(config)
}

/// Accepts any server certificate: these tests are about records, not trust.
#[derive(Debug)]
struct AnyCert;

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A client (ALPN `http/1.1`) that takes any server certificate.
fn client_config() -> Arc<ClientConfig> {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

fn new_client() -> ClientConnection {
    ClientConnection::new(client_config(), "localhost".try_into().unwrap()).unwrap()
}

/// The server machine plus what a driver keeps: the unconsumed tail and what was delivered.
struct Driver {
    session: Session<UnbufferedServerConnection>,
    kept: Vec<u8>,
    opened: usize,
    info: Option<TlsInfo>,
    plain: Vec<u8>,
    peer_closed: bool,
}

impl Driver {
    fn new(config: Arc<ServerConfig>, now: Instant) -> Driver {
        let conn = UnbufferedServerConnection::new(config).unwrap();
        Driver {
            session: Session::new(conn, now, Some(Duration::from_secs(10))),
            kept: Vec::new(),
            opened: 0,
            info: None,
            plain: Vec::new(),
            peer_closed: false,
        }
    }

    /// Feeds `bytes` (after what was kept); returns what the machine wants sent back.
    fn feed(&mut self, bytes: &[u8]) -> std::io::Result<Vec<u8>> {
        let mut input = std::mem::take(&mut self.kept);
        input.extend_from_slice(bytes);
        let mut wire = Vec::new();
        let (mut opened, mut plain, mut info) = (0, Vec::new(), None);
        let res = self.session.receive(&mut input, &mut wire, &mut |d| {
            match d {
                Event::Opened(state) => {
                    opened += 1;
                    info = Some(TlsInfo::new(state));
                }
                Event::Data(p) => plain.extend_from_slice(p),
            }
            true
        });
        self.opened += opened;
        self.info = self.info.take().or(info);
        self.plain.extend_from_slice(&plain);
        let r = res?;
        assert!(r.consumed <= input.len());
        self.kept = input[r.consumed..].to_vec();
        self.peer_closed |= r.peer_closed;
        Ok(wire)
    }

    fn seal(&mut self, plain: &[u8]) -> Vec<u8> {
        let mut wire = Vec::new();
        self.session.seal(&mut self.kept, plain, &mut wire).unwrap();
        assert!(wire.len() <= sealed_len(plain.len()), "the bound holds");
        wire
    }
}

/// Moves bytes both ways until neither side has more to say. `chunk` splits what the
/// client sends into pieces of that size.
fn handshake(server: &mut Driver, client: &mut ClientConnection, chunk: usize) {
    for _ in 0..20 {
        let mut to_server = Vec::new();
        while client.wants_write() {
            client.write_tls(&mut to_server).unwrap();
        }
        let mut to_client = Vec::new();
        for piece in to_server.chunks(chunk) {
            to_client.extend(server.feed(piece).unwrap());
        }
        if !to_client.is_empty() {
            client.read_tls(&mut &to_client[..]).unwrap();
            client.process_new_packets().unwrap();
        }
        if to_server.is_empty() && to_client.is_empty() {
            return;
        }
    }
    panic!("the handshake did not settle");
}

/// The content types of the records in `wire`.
fn record_types(mut wire: &[u8]) -> Vec<u8> {
    let mut types = Vec::new();
    while wire.len() >= 5 {
        let len = u16::from_be_bytes([wire[3], wire[4]]) as usize;
        types.push(wire[0]);
        wire = &wire[5 + len..];
    }
    assert!(wire.is_empty(), "whole records only");
    types
}

fn client_reads(client: &mut ClientConnection, mut wire: &[u8]) -> Vec<u8> {
    let mut got = Vec::new();
    while !wire.is_empty() {
        client.read_tls(&mut wire).unwrap();
        client.process_new_packets().unwrap();
        let _ = client.reader().read_to_end(&mut got);
    }
    got
}

#[test]
fn handshake_then_data_both_ways_tls13_and_tls12() {
    for versions in [
        &[&rustls::version::TLS13][..],
        &[&rustls::version::TLS12][..],
    ] {
        let now = Instant::now();
        let mut server = Driver::new(server_config(versions), now);
        let mut client = new_client();
        handshake(&mut server, &mut client, usize::MAX);
        assert_eq!(server.opened, 1, "on_open is due exactly once");
        let info = server.info.as_ref().expect("info once open");
        assert_eq!(info.alpn_protocol(), Some(&b"http/1.1"[..]));
        assert_eq!(info.protocol_version(), client.protocol_version());
        assert!(info.peer_certificates().is_empty());
        assert_eq!(server.session.deadline(), None, "no deadline once open");

        client
            .writer()
            .write_all(b"GET / HTTP/1.1\r\n\r\n")
            .unwrap();
        let mut out = Vec::new();
        client.write_tls(&mut out).unwrap();
        assert!(server.feed(&out).unwrap().is_empty());
        assert_eq!(server.plain, b"GET / HTTP/1.1\r\n\r\n");

        let wire = server.seal(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi");
        assert_eq!(
            client_reads(&mut client, &wire),
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi"
        );
    }
}

#[test]
fn records_split_anywhere_give_the_same_plaintext() {
    let payload: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
    for chunk in [1, 3, 5, 7, 100, 4096] {
        let mut server = Driver::new(server_config(&[&rustls::version::TLS13]), Instant::now());
        let mut client = new_client();
        handshake(&mut server, &mut client, chunk);
        assert_eq!(server.opened, 1);
        client.writer().write_all(&payload).unwrap();
        let mut out = Vec::new();
        while client.wants_write() {
            client.write_tls(&mut out).unwrap();
        }
        for piece in out.chunks(chunk) {
            server.feed(piece).unwrap();
            assert!(
                server.kept.len() < MAX_RECORD,
                "only a partial record is kept"
            );
        }
        assert!(server.kept.is_empty());
        assert!(server.plain == payload, "split into pieces of {chunk}");
    }
}

#[test]
fn a_round_of_small_responses_is_one_record_and_a_large_one_is_few() {
    let mut server = Driver::new(server_config(&[&rustls::version::TLS13]), Instant::now());
    let mut client = new_client();
    handshake(&mut server, &mut client, usize::MAX);
    let response = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello";
    let round: Vec<u8> = response
        .iter()
        .copied()
        .cycle()
        .take(response.len() * 16)
        .collect();
    let wire = server.seal(&round);
    assert_eq!(
        record_types(&wire),
        vec![0x17],
        "16 pipelined responses, one record"
    );
    assert_eq!(client_reads(&mut client, &wire), round);

    let big = vec![7u8; 100_000];
    let wire = server.seal(&big);
    assert_eq!(record_types(&wire).len(), 100_000usize.div_ceil(16_384));
    assert!(client_reads(&mut client, &wire) == big, "100 KB through");
}

#[test]
fn plain_http_gets_a_400_where_asked_and_an_alert_otherwise() {
    let conn = UnbufferedServerConnection::new(server_config(&[&rustls::version::TLS13])).unwrap();
    let mut session = Session::new(conn, Instant::now(), None).answer_plain_http(true);
    let mut wire = Vec::new();
    let err = session
        .receive(
            &mut b"GET / HTTP/1.1\r\nhost: x\r\n\r\n".to_vec(),
            &mut wire,
            &mut |_| true,
        )
        .unwrap_err();
    assert!(err.to_string().contains("plain HTTP"), "{err}");
    assert!(
        wire.starts_with(b"HTTP/1.1 400 Bad Request\r\n"),
        "{:?}",
        String::from_utf8_lossy(&wire)
    );

    // Garbage (and plain HTTP on a raw TLS port): rustls's alert, then close.
    for junk in [
        &b"GET / HTTP/1.1\r\n\r\n"[..],
        b"\x00\x01garbage-not-tls-at-all",
    ] {
        let mut server = Driver::new(server_config(&[&rustls::version::TLS13]), Instant::now());
        let mut wire = Vec::new();
        let err = server
            .session
            .receive(&mut junk.to_vec(), &mut wire, &mut |_| true)
            .unwrap_err();
        assert!(err.to_string().starts_with("TLS"), "{err}");
        assert_eq!(record_types(&wire), vec![0x15], "one alert record");
        assert_eq!(server.opened, 0);
    }
}

#[test]
fn an_oversized_record_is_refused_with_an_alert() {
    let mut server = Driver::new(server_config(&[&rustls::version::TLS13]), Instant::now());
    let mut client = new_client();
    handshake(&mut server, &mut client, usize::MAX);
    // An application-data record claiming more than TLS allows.
    let len = (MAX_RECORD - 5 + 1) as u16;
    let mut record = vec![0x17, 0x03, 0x03];
    record.extend_from_slice(&len.to_be_bytes());
    record.extend(std::iter::repeat_n(0u8, 64));
    let mut wire = Vec::new();
    let res = server
        .session
        .receive(&mut record, &mut wire, &mut |_| true);
    assert!(res.is_err(), "an oversized record is an error");
    assert_eq!(
        record_types(&wire),
        vec![0x17],
        "the alert, encrypted (TLS 1.3)"
    );
    // Nothing more is taken after the failure.
    let mut more = vec![0x17, 0x03, 0x03, 0, 1, 0];
    let r = server
        .session
        .receive(&mut more, &mut wire, &mut |_| {
            panic!("nothing is delivered")
        })
        .unwrap();
    assert_eq!(r.consumed, more.len());
}

#[test]
fn a_truncated_or_tampered_record_is_an_error_not_data() {
    let mut server = Driver::new(server_config(&[&rustls::version::TLS13]), Instant::now());
    let mut client = new_client();
    handshake(&mut server, &mut client, usize::MAX);
    client.writer().write_all(b"secret").unwrap();
    let mut out = Vec::new();
    client.write_tls(&mut out).unwrap();
    // Truncated: kept, not delivered.
    server.feed(&out[..out.len() - 1]).unwrap();
    assert!(server.plain.is_empty());
    assert_eq!(server.kept.len(), out.len() - 1);
    // Tampered: the last byte flipped.
    let mut last = out[out.len() - 1..].to_vec();
    last[0] ^= 1;
    assert!(server.feed(&last).is_err());
    assert!(server.plain.is_empty(), "no plaintext from a bad record");
}

#[test]
fn the_handshake_deadline_comes_from_the_clock_given() {
    let t0 = Instant::now();
    let server = Driver::new(server_config(&[&rustls::version::TLS13]), t0);
    assert_eq!(
        server.session.deadline(),
        Some(t0 + Duration::from_secs(10))
    );
    let none = Session::new(
        UnbufferedServerConnection::new(server_config(&[&rustls::version::TLS13])).unwrap(),
        t0,
        None,
    );
    assert_eq!(none.deadline(), None);
}

#[test]
fn close_notify_both_ways() {
    let mut server = Driver::new(server_config(&[&rustls::version::TLS13]), Instant::now());
    let mut client = new_client();
    handshake(&mut server, &mut client, usize::MAX);
    // Ours: one alert record, then nothing can be sealed.
    let mut wire = server.seal(b"bye");
    server.session.close(&mut [], &mut wire);
    assert_eq!(record_types(&wire), vec![0x17, 0x17]);
    assert_eq!(client_reads(&mut client, &wire), b"bye");
    assert!(client.process_new_packets().unwrap().peer_has_closed());
    let mut more = Vec::new();
    assert!(server.session.seal(&mut [], b"late", &mut more).is_err());

    // Theirs: delivered as the end of input.
    let mut server = Driver::new(server_config(&[&rustls::version::TLS13]), Instant::now());
    let mut client = new_client();
    handshake(&mut server, &mut client, usize::MAX);
    client.writer().write_all(b"last words").unwrap();
    client.send_close_notify();
    let mut out = Vec::new();
    while client.wants_write() {
        client.write_tls(&mut out).unwrap();
    }
    server.feed(&out).unwrap();
    assert_eq!(server.plain, b"last words");
    assert!(server.peer_closed);
}

/// A handshake message split over many records (the server's session tickets, in 32-byte
/// fragments) is tracked by rustls by its place in the input: sealing while only part of
/// it has arrived must offer the kept input again (it panicked inside rustls when the
/// kept bytes were not passed).
#[test]
fn sealing_between_pieces_of_a_fragmented_handshake_message() {
    use rustls::client::UnbufferedClientConnection;
    use rustls::ServerConnection;
    let mut server_config = Arc::unwrap_or_clone(server_config(&[&rustls::version::TLS13]));
    server_config.max_fragment_size = Some(32);
    let mut server = ServerConnection::new(Arc::new(server_config)).unwrap();
    let conn =
        UnbufferedClientConnection::new(client_config(), "localhost".try_into().unwrap()).unwrap();
    let mut client = Session::new(conn, Instant::now(), None);
    let mut kept: Vec<u8> = Vec::new();
    let mut opened = false;
    let mut got = Vec::new();
    let mut feed =
        |client: &mut Session<UnbufferedClientConnection>, kept: &mut Vec<u8>, bytes: &[u8]| {
            kept.extend_from_slice(bytes);
            let mut wire = Vec::new();
            let r = client
                .receive(kept, &mut wire, &mut |d| {
                    match d {
                        Event::Opened(_) => opened = true,
                        Event::Data(p) => got.extend_from_slice(p),
                    }
                    true
                })
                .unwrap();
            kept.drain(..r.consumed);
            wire
        };
    // ClientHello out; the server's flight in; the client's Finished out.
    let mut to_server = feed(&mut client, &mut kept, &[]);
    for _ in 0..4 {
        server.read_tls(&mut &to_server[..]).unwrap();
        server.process_new_packets().unwrap();
        let mut to_client = Vec::new();
        while server.wants_write() {
            server.write_tls(&mut to_client).unwrap();
        }
        if to_client.is_empty() {
            break;
        }
        // Record by record (the tickets in many), with a seal after each once open.
        to_server = Vec::new();
        let mut rest = &to_client[..];
        while rest.len() >= 5 {
            let len = 5 + u16::from_be_bytes([rest[3], rest[4]]) as usize;
            to_server.extend(feed(&mut client, &mut kept, &rest[..len]));
            rest = &rest[len..];
            if client.is_open() {
                client.seal(&mut kept, b"ping", &mut to_server).unwrap();
            }
        }
    }
    assert!(client.is_open());
    assert!(kept.is_empty(), "every record was used");
    let mut plain = Vec::new();
    let _ = server.reader().read_to_end(&mut plain);
    assert!(plain.starts_with(b"ping"), "{plain:?}");
}

/// Every open TLS connection keeps one `Negotiated` (its `TlsInfo`): at most 56 bytes is
/// one 80-byte glibc chunk with the `Arc`'s counts (it was a 96-byte one, plus a 32-byte
/// copy of the ALPN protocol and a 32-byte box around the `Arc`).
#[test]
fn the_negotiated_info_is_one_small_allocation() {
    assert!(
        std::mem::size_of::<super::Negotiated>() <= 56,
        "{}",
        std::mem::size_of::<super::Negotiated>()
    );
    // The usual ALPN protocols are not copied.
    let alpn = super::KNOWN_ALPN[0];
    assert_eq!(alpn, b"http/1.1");
}
