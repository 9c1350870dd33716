//! fibr's FileBody: whole files and ranges, through the sendfile path, byte for byte.

mod common;

use fibr::http::FileBody;
use http::{Request, Response, StatusCode};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use common::{Client, TempPath};

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
    common::start(svc, fibr::http::Config::default())
}

#[test]
fn file_bodies_whole_and_ranged_on_one_connection() {
    let data = pattern(3 * 1024 * 1024 + 17);
    let path = TempPath::new("file-body", "bin");
    std::fs::write(&path, &data).unwrap();
    let addr = start(path.to_path_buf());
    let mut c = Client::connect_within(addr, Duration::from_secs(10));
    // Pipelined: the whole file, then a range, then the whole file again.
    c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /range HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n");
    let r = c.response();
    assert_eq!(r.status, 200, "{:?}", r.headers);
    assert!(r.header("content-length").is_some(), "{:?}", r.headers);
    assert!(r.body == data, "whole file differs");
    let r = c.response();
    assert!(r.header("content-length").is_some(), "{:?}", r.headers);
    assert!(r.body == data[1000..51_000], "range differs");
    let r = c.response();
    assert!(r.header("content-length").is_some(), "{:?}", r.headers);
    assert!(r.body == data, "second whole file differs");
    assert!(
        c.unconsumed().is_empty(),
        "nothing beyond the three responses"
    );
}
