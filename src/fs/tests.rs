//! ServeDir without sockets: what each request gets, straight from `respond`.

use super::*;
use http::HeaderMap;
use http_body::Body as _;
use std::task::Waker;
use std::time::{Duration, Instant};

/// A fresh directory under the system's temp dir, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("fibr-fs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }

    fn write(&self, rel: &str, data: &[u8]) -> &Dir {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
        self
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn get(s: &ServeDir, path: &str, headers: &[(&str, &str)]) -> (Response<Body>, Vec<u8>) {
    request(s, Method::GET, path, headers)
}

fn request(
    s: &ServeDir,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
) -> (Response<Body>, Vec<u8>) {
    let mut h = HeaderMap::new();
    for (k, v) in headers {
        h.append(
            header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    let mut resp = s.respond(&method, path, &h);
    let mut cx = Context::from_waker(Waker::noop());
    let mut bytes = Vec::new();
    while let Poll::Ready(Some(frame)) = std::pin::Pin::new(resp.body_mut()).poll_frame(&mut cx) {
        bytes.extend_from_slice(frame.unwrap().data_ref().unwrap());
    }
    (resp, bytes)
}

fn hdr<'a>(r: &'a Response<Body>, name: &str) -> Option<&'a str> {
    r.headers().get(name).map(|v| v.to_str().unwrap())
}

#[test]
fn files_headers_and_methods() {
    let d = Dir::new("basic");
    d.write("a.txt", b"hello")
        .write("sub/page.html", b"<p>hi</p>");
    let s = ServeDir::new(&d.0);
    let (r, body) = get(&s, "/a.txt", &[]);
    assert_eq!(r.status(), 200);
    assert_eq!(body, b"hello");
    assert_eq!(hdr(&r, "content-length"), Some("5"));
    assert_eq!(hdr(&r, "content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(hdr(&r, "accept-ranges"), Some("bytes"));
    assert!(hdr(&r, "etag").unwrap().starts_with('"'));
    assert!(hdr(&r, "last-modified").unwrap().ends_with("GMT"));
    assert_eq!(hdr(&r, "vary"), None, "no twins, no Vary");
    let (r, body) = request(&s, Method::HEAD, "/sub/page.html", &[]);
    assert_eq!(r.status(), 200);
    assert!(body.is_empty());
    assert_eq!(hdr(&r, "content-length"), Some("9"));
    assert_eq!(hdr(&r, "content-type"), Some("text/html; charset=utf-8"));
    let (r, _) = request(&s, Method::POST, "/a.txt", &[]);
    assert_eq!(r.status(), 405);
    assert_eq!(hdr(&r, "allow"), Some("GET, HEAD"));
    assert_eq!(get(&s, "/missing", &[]).0.status(), 404);
    assert_eq!(get(&s, "/a.txt/", &[]).0.status(), 404);
    assert_eq!(get(&s, "/%zz", &[]).0.status(), 400);
}

#[test]
fn directories_index_and_redirect() {
    let d = Dir::new("index");
    d.write("docs/index.html", b"index!")
        .write("empty/x.bin", b"x");
    let s = ServeDir::new(&d.0);
    let (r, _) = get(&s, "/docs", &[]);
    assert_eq!(r.status(), 301);
    assert_eq!(hdr(&r, "location"), Some("./docs/"));
    let (r, body) = get(&s, "/docs/", &[]);
    assert_eq!(r.status(), 200);
    assert_eq!(body, b"index!");
    assert_eq!(hdr(&r, "content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(
        get(&s, "/empty/", &[]).0.status(),
        404,
        "no index, no listing"
    );
}

#[test]
fn conditional_requests() {
    let d = Dir::new("cond");
    d.write("f.css", b"body{}");
    let s = ServeDir::new(&d.0);
    let (r, _) = get(&s, "/f.css", &[]);
    let etag = hdr(&r, "etag").unwrap().to_string();
    let lm = hdr(&r, "last-modified").unwrap().to_string();
    let (r, body) = get(&s, "/f.css", &[("if-none-match", &etag)]);
    assert_eq!(r.status(), 304);
    assert!(body.is_empty());
    assert_eq!(hdr(&r, "etag"), Some(&etag[..]));
    assert_eq!(
        get(&s, "/f.css", &[("if-modified-since", &lm)]).0.status(),
        304
    );
    assert_eq!(
        get(&s, "/f.css", &[("if-none-match", "\"other\"")])
            .0
            .status(),
        200
    );
    assert_eq!(
        get(&s, "/f.css", &[("if-match", "\"other\"")]).0.status(),
        412
    );
}

#[test]
fn ranges() {
    let d = Dir::new("range");
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    d.write("small.bin", &data[..1000]).write("big.bin", &data);
    let s = ServeDir::new(&d.0);
    for (name, len) in [("small.bin", 1000usize), ("big.bin", 200_000)] {
        let (r, body) = get(&s, &format!("/{name}"), &[("range", "bytes=10-19")]);
        assert_eq!(r.status(), 206, "{name}");
        assert_eq!(body, &data[10..20]);
        assert_eq!(
            hdr(&r, "content-range"),
            Some(&format!("bytes 10-19/{len}")[..])
        );
        assert_eq!(hdr(&r, "content-length"), Some("10"));
        let (r, body) = get(&s, &format!("/{name}"), &[("range", "bytes=-5")]);
        assert_eq!(r.status(), 206);
        assert_eq!(body, &data[len - 5..len]);
        let (r, _) = get(
            &s,
            &format!("/{name}"),
            &[("range", &format!("bytes={len}-"))],
        );
        assert_eq!(r.status(), 416);
        assert_eq!(
            hdr(&r, "content-range"),
            Some(&format!("bytes */{len}")[..])
        );
        let (r, body) = get(&s, &format!("/{name}"), &[]);
        assert_eq!(r.status(), 200);
        assert_eq!(body, &data[..len]);
    }
    // The large file comes from the disk, shareable with the HTTP/1 server's sendfile.
    let (r, _) = get(&s, "/big.bin", &[]);
    assert!(r.extensions().get::<SharedFile>().is_some());
    let (r, _) = get(&s, "/small.bin", &[]);
    assert!(r.extensions().get::<SharedFile>().is_none(), "from memory");
}

#[test]
fn precompressed_twins() {
    let d = Dir::new("twins");
    d.write("app.js", b"identity")
        .write("app.js.br", b"BR")
        .write("app.js.gz", b"GZ");
    d.write("only.js", b"plain").write("only.js.gz", b"GZONLY");
    let s = ServeDir::new(&d.0);
    let (r, body) = get(&s, "/app.js", &[("accept-encoding", "gzip, br")]);
    assert_eq!(
        (body.as_slice(), hdr(&r, "content-encoding")),
        (&b"BR"[..], Some("br"))
    );
    assert_eq!(hdr(&r, "vary"), Some("accept-encoding"));
    assert_eq!(
        hdr(&r, "content-type"),
        Some("text/javascript; charset=utf-8")
    );
    let br_tag = hdr(&r, "etag").unwrap().to_string();
    let (r, body) = get(&s, "/app.js", &[("accept-encoding", "gzip")]);
    assert_eq!(
        (body.as_slice(), hdr(&r, "content-encoding")),
        (&b"GZ"[..], Some("gzip"))
    );
    assert_ne!(hdr(&r, "etag").unwrap(), br_tag, "each twin its own tag");
    let (r, body) = get(&s, "/app.js", &[]);
    assert_eq!(
        (body.as_slice(), hdr(&r, "content-encoding")),
        (&b"identity"[..], None)
    );
    assert_eq!(hdr(&r, "vary"), Some("accept-encoding"));
    let (r, body) = get(&s, "/only.js", &[("accept-encoding", "br")]);
    assert_eq!(
        (body.as_slice(), hdr(&r, "content-encoding")),
        (&b"plain"[..], None)
    );
    let (_, body) = get(&s, "/only.js", &[("accept-encoding", "br;q=1, gzip;q=0.5")]);
    assert_eq!(body, b"GZONLY");
}

#[test]
fn traversal_and_symlinks_stay_inside() {
    let outside = Dir::new("outside");
    outside.write("secret.txt", b"secret");
    let d = Dir::new("jail");
    d.write("pub/ok.txt", b"ok").write("inside.txt", b"inside");
    std::os::unix::fs::symlink(outside.0.join("secret.txt"), d.0.join("pub/leak.txt")).unwrap();
    std::os::unix::fs::symlink(&outside.0, d.0.join("pub/leakdir")).unwrap();
    std::os::unix::fs::symlink(d.0.join("inside.txt"), d.0.join("pub/alias.txt")).unwrap();
    std::os::unix::fs::symlink(outside.0.join("secret.txt"), d.0.join("pub/ok.txt.gz")).unwrap();
    let s = ServeDir::new(d.0.join("pub"));
    for bad in [
        "/../inside.txt",
        "/%2e%2e/inside.txt",
        "/..%2finside.txt",
        "/leak.txt",
        "/leakdir/secret.txt",
        "/..%5cinside.txt",
    ] {
        let (r, body) = get(&s, bad, &[]);
        assert_eq!(r.status(), 404, "{bad}");
        assert_ne!(body, b"secret");
    }
    let (r, body) = get(&s, "/ok.txt", &[("accept-encoding", "gzip")]);
    assert_eq!(body, b"ok", "a twin that leads outside is not one");
    assert_eq!(hdr(&r, "content-encoding"), None);
    // A link that stays under the root is followed... only if its target is under the
    // root served: `inside.txt` is above `pub/`, so it is refused too.
    assert_eq!(get(&s, "/alias.txt", &[]).0.status(), 404);
}

/// Waits until `f` holds (inotify is asynchronous), up to 5 s.
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

#[test]
fn the_cache_follows_the_disk() {
    let d = Dir::new("follow");
    d.write("v.txt", b"one").write("sub/w.txt", b"first");
    let s = ServeDir::new(&d.0);
    assert_eq!(get(&s, "/v.txt", &[]).1, b"one");
    assert_eq!(get(&s, "/sub/w.txt", &[]).1, b"first");
    assert!(s.inner.cache.held() > 0, "cached");
    d.write("v.txt", b"two, longer");
    assert!(eventually(|| get(&s, "/v.txt", &[]).1 == b"two, longer"));
    // Replaced by rename (how editors and deploys write).
    d.write("sub/.w.tmp", b"second");
    std::fs::rename(d.0.join("sub/.w.tmp"), d.0.join("sub/w.txt")).unwrap();
    assert!(eventually(|| get(&s, "/sub/w.txt", &[]).1 == b"second"));
    // A twin appearing changes what a gzip client gets.
    d.write("v.txt.gz", b"GZ");
    assert!(eventually(|| get(
        &s,
        "/v.txt",
        &[("accept-encoding", "gzip")]
    )
    .1 == b"GZ"));
    std::fs::remove_file(d.0.join("v.txt")).unwrap();
    assert!(eventually(|| get(&s, "/v.txt", &[]).0.status() == 404));
    // The whole directory renamed away.
    std::fs::rename(d.0.join("sub"), d.0.join("gone")).unwrap();
    assert!(eventually(|| get(&s, "/sub/w.txt", &[]).0.status() == 404));
}

#[test]
fn the_cache_stays_within_its_bounds() {
    let d = Dir::new("bounds");
    for i in 0..20 {
        d.write(&format!("f{i}.bin"), &[i as u8; 1000]);
    }
    d.write("large.bin", &[7u8; 5000]);
    let cfg = Config {
        cache_file_max: 1000,
        cache_total_max: 5 * (1000 + cache::ENTRY_OVERHEAD),
        ..Config::default()
    };
    let s = ServeDir::with_config(&d.0, cfg);
    for i in 0..20 {
        assert_eq!(get(&s, &format!("/f{i}.bin"), &[]).1, vec![i as u8; 1000]);
        assert!(s.inner.cache.held() <= 5 * (1000 + cache::ENTRY_OVERHEAD));
    }
    let (r, body) = get(&s, "/large.bin", &[]);
    assert_eq!(body.len(), 5000, "over the file bound: from the disk");
    assert!(r.extensions().get::<SharedFile>().is_some());
    // Off: nothing kept.
    let off = Config {
        cache_total_max: 0,
        ..Config::default()
    };
    let s = ServeDir::with_config(&d.0, off);
    assert_eq!(get(&s, "/f1.bin", &[]).1, vec![1u8; 1000]);
    assert_eq!(s.inner.cache.held(), 0);
}

/// Behind axum's boxing, a large file still reaches fibr's HTTP/1 server as a file: the
/// server takes it for sendfile(2) (and the bytes arrive whole); under a middleware that
/// changes the body (compression) it is left to the body, which is read.
#[cfg(feature = "axum")]
#[test]
fn the_http1_server_finds_the_file_behind_axum() {
    use crate::engine::runtime::{run, spawn};
    use crate::http::file::CLAIMED;
    use std::io::{Read, Write};
    use std::sync::atomic::Ordering;
    let d = Dir::new("sendfile");
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    d.write("big.bin", &data)
        .write("big.txt", &vec![b'a'; 300_000]);
    let app = axum::Router::new()
        .nest_service("/plain", ServeDir::new(&d.0))
        .nest_service(
            "/zipped",
            tower::ServiceBuilder::new()
                .layer(tower_http::compression::CompressionLayer::new())
                .service(ServeDir::new(&d.0)),
        );
    let listener = run(crate::engine::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    drop(spawn(
        async move { crate::http::serve(listener, app).await },
    ));
    let fetch = |path: &str, extra: &str| -> Vec<u8> {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n"
        )
        .unwrap();
        let mut all = Vec::new();
        s.read_to_end(&mut all).unwrap();
        let at = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        all.split_off(at)
    };
    let before = CLAIMED.load(Ordering::Relaxed);
    assert!(fetch("/plain/big.bin", "") == data);
    assert_eq!(
        CLAIMED.load(Ordering::Relaxed),
        before + 1,
        "sent as a file"
    );
    let zipped = fetch("/zipped/big.txt", "Accept-Encoding: gzip\r\n");
    assert!(zipped.len() < 10_000, "compressed: {} bytes", zipped.len());
    assert_eq!(
        CLAIMED.load(Ordering::Relaxed),
        before + 1,
        "compressed: read, not sent"
    );
}
