//! fibr's FileBody: whole files and ranges, through the sendfile path, byte for byte; and
//! that path is the kernel's (the body is never polled), told from the fallback by the
//! file's offset.

mod common;

use fibr::http::FileBody;
use http::{Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use std::convert::Infallible;
use std::fs::File;
use std::io::Seek;
use std::net::SocketAddr;
use std::sync::Arc;
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
    common::start(svc, fibr::http::ServerConfig::default())
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

/// Serves `GET /` as `wrap(FileBody::range(file, 1000, 50_000))` from a descriptor that
/// shares its open file description (and so its offset) with `file`.
fn start_shared<B>(file: Arc<File>, wrap: fn(FileBody) -> B) -> SocketAddr
where
    B: http_body::Body<Data = bytes::Bytes, Error = std::io::Error> + Send + 'static,
{
    let svc = tower::service_fn(move |_req: Request<fibr::body::Incoming>| {
        let body = wrap(FileBody::range(file.try_clone().unwrap(), 1000, 50_000));
        async move { Ok::<_, Infallible>(Response::new(body)) }
    });
    common::start(svc, fibr::http::ServerConfig::default())
}

/// The shared offset after one `GET /` (the response checked byte for byte).
fn offset_after_get(addr: SocketAddr, file: &Arc<File>, data: &[u8]) -> u64 {
    let mut c = Client::connect_within(addr, Duration::from_secs(10));
    let r = c.get("/");
    assert_eq!(r.status, 200, "{:?}", r.headers);
    assert!(r.body == data[1000..51_000], "range differs");
    (&**file).stream_position().unwrap()
}

/// A `FileBody` that fibr's server sees as one is handed to the kernel (sendfile with an
/// explicit offset, which leaves the file's own offset alone); a polled body reads with
/// seek + read, which moves it. The same body behind a `BoxBody` (not recognized) is the
/// control: the probe does see the fallback.
#[test]
fn file_body_is_sent_by_the_kernel_not_polled() {
    let data = pattern(300 * 1024);
    let path = TempPath::new("file-body-path", "bin");
    std::fs::write(&path, &data).unwrap();

    let file = Arc::new(File::open(&path).unwrap());
    let addr = start_shared(file.clone(), |b| b);
    assert_eq!(
        offset_after_get(addr, &file, &data),
        0,
        "the FileBody was read through the file's offset: polled, not sent with sendfile"
    );

    let boxed = Arc::new(File::open(&path).unwrap());
    let addr = start_shared(boxed.clone(), BoxBody::new);
    assert_eq!(
        offset_after_get(addr, &boxed, &data),
        51_000,
        "a boxed FileBody is polled (64 KiB reads up to the range's end)"
    );
}
