//! fibr's FileBody: whole files and ranges, through the sendfile path, byte for byte.

use fibr::http::FileBody;
use http::{Request, Response, StatusCode};
use std::convert::Infallible;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

fn start(path: std::path::PathBuf) -> SocketAddr {
    let svc = tower::service_fn(move |req: Request<fibr::body::Incoming>| {
        let path = path.clone();
        async move {
            let file = std::fs::File::open(&path).unwrap();
            let body = match req.uri().path() {
                "/range" => FileBody::range(file, 1000, 50_000),
                _ => FileBody::new(file).unwrap(),
            };
            Ok::<_, Infallible>(
                Response::builder()
                    .status(StatusCode::OK)
                    .body(body)
                    .unwrap(),
            )
        }
    });
    fibr::run(async move {
        let listener = fibr::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        fibr::spawn(async move { fibr::serve(listener, svc).await });
        addr
    })
}

/// Reads one response with a Content-Length body from `s`; `buf` carries bytes that
/// arrived past it (the next pipelined response).
fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> (String, Vec<u8>) {
    let mut chunk = [0u8; 65536];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "connection closed before the head");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(buf[..head_end].to_vec()).unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .expect("content-length")
        .trim()
        .parse()
        .unwrap();
    while buf.len() < head_end + len {
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "connection closed mid-body");
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = buf[head_end..head_end + len].to_vec();
    buf.drain(..head_end + len);
    (head, body)
}

#[test]
fn file_bodies_whole_and_ranged_on_one_connection() {
    let data = pattern(3 * 1024 * 1024 + 17);
    let path = std::env::temp_dir().join(format!("fibr-file-body-{}", std::process::id()));
    std::fs::write(&path, &data).unwrap();
    let addr = start(path.clone());
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // Pipelined: the whole file, then a range, then the whole file again.
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /range HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut carry = Vec::new();
    let (head, body) = read_response(&mut s, &mut carry);
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(body == data, "whole file differs");
    let (_, body) = read_response(&mut s, &mut carry);
    assert!(body == data[1000..51_000], "range differs");
    let (_, body) = read_response(&mut s, &mut carry);
    assert!(body == data, "second whole file differs");
    assert!(carry.is_empty(), "nothing beyond the three responses");
    std::fs::remove_file(&path).unwrap();
}
