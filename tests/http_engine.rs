//! The lower-level HTTP API: `fibr::http::Server` as a handler in an Engine binding (TCP and
//! Unix, beside a raw binding), and `fibr::serve` on a Unix listener.

mod common;

use axum::routing::get;
use axum::Router;
use fibr::{Binding, Config, Conn, Engine, Handler};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use common::TempPath;

fn app() -> Router {
    Router::new().route("/", get(|| async { "hello" }))
}

fn exchange<S: Read + Write>(mut s: S) -> String {
    s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

struct Echo;
impl Handler for Echo {
    fn on_data(&self, c: &Conn, data: &[u8]) {
        let _ = c.send(data);
    }
}

#[test]
fn http_server_as_a_binding_beside_a_raw_one() {
    let sock = TempPath::sock("http-binding");
    let engine = Engine::new(
        Config::default(),
        [
            Binding::tcp("127.0.0.1:0", fibr::http::Server::new(app())).and_unix(sock.path()),
            Binding::tcp("127.0.0.1:0", Echo),
        ],
    )
    .unwrap();
    let http = engine.binding_addrs(0)[0];
    let raw = engine.binding_addrs(1)[0];

    let s = std::net::TcpStream::connect(http).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let out = exchange(s);
    assert!(
        out.starts_with("HTTP/1.1 200 OK") && out.ends_with("hello"),
        "{out}"
    );

    let s = UnixStream::connect(&sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let out = exchange(s);
    assert!(out.ends_with("hello"), "over Unix: {out}");

    let mut s = std::net::TcpStream::connect(raw).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"raw bytes").unwrap();
    let mut buf = [0u8; 9];
    s.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"raw bytes");

    engine.shutdown(Duration::from_secs(1));
}

#[test]
fn serve_on_a_unix_listener() {
    let sock = TempPath::sock("serve-unix");
    let path = sock.to_path_buf();
    fibr::run(async move {
        let listener = fibr::net::UnixListener::bind(&path).unwrap();
        fibr::spawn(async move { fibr::serve(listener, app()).await });
    });
    let s = UnixStream::connect(&sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let out = exchange(s);
    assert!(
        out.starts_with("HTTP/1.1 200 OK") && out.ends_with("hello"),
        "{out}"
    );
}
