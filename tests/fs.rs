//! fibr::fs::ServeDir mounted in an axum Router (`nest_service` and `fallback_service`) and
//! served by fibr, driven by curl: headers, HEAD, 304, ranges, precompressed twins, the
//! directory redirect, a traversal battery, files changed on disk while served, large
//! files over HTTP/1.1 (sendfile) and h2c.

#![cfg(feature = "axum")]

mod common;

use axum::routing::get;
use axum::Router;
use fibr::fs::ServeDir;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A directory of test files, removed when dropped.
struct Tree(PathBuf);

impl Tree {
    fn new(tag: &str) -> Tree {
        let p = std::env::temp_dir().join(format!("fibr-fs-it-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Tree(p)
    }

    fn write(&self, rel: &str, data: &[u8]) {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 13 % 251) as u8).collect()
}

/// The Router: the files under `/static`, and a route of the app's own beside them.
fn serve(root: &Path) -> SocketAddr {
    let app = Router::new()
        .route("/", get(|| async { "app" }))
        .nest_service("/static", ServeDir::new(root));
    common::start(app, fibr::http::ServerConfig::default())
}

/// curl's output for `args`: (status line code, headers lowercased, body).
struct Got {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Got {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

fn curl(args: &[&str]) -> Got {
    common::require_tool("curl", "curl");
    let headers = tempfile_path("hdr");
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20", "-D"])
        .arg(&headers)
        .args(args)
        .output()
        .expect("run curl");
    assert!(
        out.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&headers).unwrap();
    let _ = std::fs::remove_file(&headers);
    // The last response's head (after a redirect, the one followed).
    let head = text.trim_end().rsplit("\r\n\r\n").next().unwrap();
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Got {
        status,
        headers,
        body: out.stdout,
    }
}

fn tempfile_path(tag: &str) -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("fibr-fs-curl-{tag}-{}-{n}", std::process::id()))
}

#[test]
fn files_through_an_axum_router() {
    let t = Tree::new("basic");
    t.write("hello.txt", b"hello, files");
    t.write("docs/index.html", b"<h1>docs</h1>");
    t.write("app.js", b"console.log('identity')");
    t.write("app.js.gz", b"GZIP TWIN");
    t.write("app.js.br", b"BROTLI TWIN");
    let addr = serve(&t.0);
    let url = |p: &str| format!("http://{addr}{p}");

    assert_eq!(
        curl(&[&url("/")]).body,
        b"app",
        "the app's own route still answers"
    );
    let g = curl(&[&url("/static/hello.txt")]);
    assert_eq!((g.status, g.body.as_slice()), (200, &b"hello, files"[..]));
    assert_eq!(g.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(g.header("content-length"), Some("12"));
    assert_eq!(g.header("accept-ranges"), Some("bytes"));
    let etag = g.header("etag").expect("an ETag").to_string();
    let modified = g
        .header("last-modified")
        .expect("Last-Modified")
        .to_string();

    // (curl -I prints the head as its output: only the head is checked.)
    let h = curl(&["-I", &url("/static/hello.txt")]);
    assert_eq!(h.status, 200);
    assert_eq!(h.header("content-length"), Some("12"));
    assert_eq!(h.header("etag"), Some(etag.as_str()));

    let inm = format!("If-None-Match: {etag}");
    assert_eq!(curl(&["-H", &inm, &url("/static/hello.txt")]).status, 304);
    let ims = format!("If-Modified-Since: {modified}");
    let g = curl(&["-H", &ims, &url("/static/hello.txt")]);
    assert_eq!((g.status, g.body.len()), (304, 0));

    let g = curl(&["-r", "7-11", &url("/static/hello.txt")]);
    assert_eq!((g.status, g.body.as_slice()), (206, &b"files"[..]));
    assert_eq!(g.header("content-range"), Some("bytes 7-11/12"));
    assert_eq!(curl(&["-r", "12-", &url("/static/hello.txt")]).status, 416);

    let g = curl(&["-H", "Accept-Encoding: gzip", &url("/static/app.js")]);
    assert_eq!(g.body, b"GZIP TWIN");
    assert_eq!(g.header("content-encoding"), Some("gzip"));
    assert_eq!(g.header("vary"), Some("accept-encoding"));
    assert_eq!(
        g.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    let g = curl(&["-H", "Accept-Encoding: br, gzip", &url("/static/app.js")]);
    assert_eq!(g.body, b"BROTLI TWIN");
    let g = curl(&[&url("/static/app.js")]);
    assert_eq!(
        (g.body.as_slice(), g.header("content-encoding")),
        (&b"console.log('identity')"[..], None)
    );

    let g = curl(&[&url("/static/docs")]);
    assert_eq!(g.status, 301);
    assert_eq!(g.header("location"), Some("./docs/"));
    let g = curl(&["-L", &url("/static/docs")]);
    assert_eq!((g.status, g.body.as_slice()), (200, &b"<h1>docs</h1>"[..]));

    assert_eq!(curl(&[&url("/static/nope.txt")]).status, 404);
    assert_eq!(
        curl(&["-X", "DELETE", &url("/static/hello.txt")]).status,
        405
    );
}

#[test]
fn traversal_battery() {
    let outside = Tree::new("outside");
    outside.write("secret.txt", b"TOP SECRET");
    let t = Tree::new("jail");
    t.write("pub/ok.txt", b"ok");
    t.write("above.txt", b"ABOVE THE ROOT");
    std::os::unix::fs::symlink(outside.0.join("secret.txt"), t.0.join("pub/link.txt")).unwrap();
    std::os::unix::fs::symlink(&outside.0, t.0.join("pub/linkdir")).unwrap();
    let addr = serve(&t.0.join("pub"));
    let outside_name = outside.0.file_name().unwrap().to_str().unwrap().to_string();
    let attempts = [
        "/static/../above.txt".to_string(),
        "/static/%2e%2e/above.txt".into(),
        "/static/%2E%2E/above.txt".into(),
        "/static/.%2e/above.txt".into(),
        "/static/..%2fabove.txt".into(),
        "/static/..%2Fabove.txt".into(),
        "/static/..%5cabove.txt".into(),
        "/static/ok.txt%00.html".into(),
        "/static/link.txt".into(),
        "/static/linkdir/secret.txt".into(),
        format!("/static/../../{outside_name}/secret.txt"),
        format!("/static/%2e%2e/%2e%2e/{outside_name}/secret.txt"),
        "/static//etc/passwd".into(),
        "/static/%2fetc%2fpasswd".into(),
    ];
    for path in &attempts {
        let g = curl(&["--path-as-is", &format!("http://{addr}{path}")]);
        assert!(
            g.status == 404 || g.status == 400,
            "{path}: {} {:?}",
            g.status,
            String::from_utf8_lossy(&g.body)
        );
        for secret in [&b"TOP SECRET"[..], b"ABOVE THE ROOT", b"root:"] {
            assert!(common::find(&g.body, secret).is_none(), "{path} leaked");
        }
    }
    assert_eq!(curl(&[&format!("http://{addr}/static/ok.txt")]).body, b"ok");
}

#[test]
fn files_changed_on_disk_while_served() {
    let t = Tree::new("changing");
    t.write("v.txt", b"version one");
    let big = pattern(8 * 1024 * 1024);
    t.write("big.bin", &big);
    let addr = serve(&t.0);
    let url = |p: &str| format!("http://{addr}{p}");
    assert_eq!(curl(&[&url("/static/v.txt")]).body, b"version one");
    let before = curl(&[&url("/static/v.txt")])
        .header("etag")
        .unwrap()
        .to_string();
    // Rewritten in place, then replaced by a rename (as deploys do).
    t.write("v.txt", b"version two, longer");
    assert!(common::wait_until(Duration::from_secs(5), || curl(&[
        &url("/static/v.txt")
    ])
    .body
        == b"version two, longer"));
    t.write(".v.tmp", b"version three");
    std::fs::rename(t.0.join(".v.tmp"), t.0.join("v.txt")).unwrap();
    assert!(common::wait_until(Duration::from_secs(5), || curl(&[
        &url("/static/v.txt")
    ])
    .body
        == b"version three"));
    let g = curl(&[&url("/static/v.txt")]);
    assert_ne!(g.header("etag").unwrap(), before, "a new ETag");
    let stale = format!("If-None-Match: {before}");
    assert_eq!(curl(&["-H", &stale, &url("/static/v.txt")]).status, 200);
    // A large file replaced while a download of it is under way: the download finishes
    // with the file it started with (its descriptor), the next one gets the new file.
    let out = tempfile_path("big");
    let mut download = Command::new("curl")
        .args(["-sS", "--limit-rate", "4M", "-o"])
        .arg(&out)
        .arg(url("/static/big.bin"))
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let newer = pattern(1024 * 1024 + 3);
    t.write(".big.tmp", &newer);
    std::fs::rename(t.0.join(".big.tmp"), t.0.join("big.bin")).unwrap();
    assert!(download.wait().unwrap().success());
    let got = std::fs::read(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    assert!(
        got == big,
        "the first download is the old file, whole ({} bytes)",
        got.len()
    );
    assert!(common::wait_until(Duration::from_secs(5), || curl(&[
        &url("/static/big.bin")
    ])
    .body
        == newer));
    std::fs::remove_file(t.0.join("v.txt")).unwrap();
    assert!(common::wait_until(Duration::from_secs(5), || curl(&[
        &url("/static/v.txt")
    ])
    .status
        == 404));
}

#[test]
fn large_files_over_http1_and_h2c() {
    let t = Tree::new("large");
    let data = pattern(5 * 1024 * 1024 + 11);
    t.write("large.bin", &data);
    let addr = serve(&t.0);
    let url = format!("http://{addr}/static/large.bin");
    let g = curl(&[&url]);
    assert_eq!(g.status, 200);
    assert!(g.body == data, "HTTP/1.1: {} bytes", g.body.len());
    let g = curl(&["--http2-prior-knowledge", &url]);
    assert_eq!(g.status, 200);
    assert!(g.body == data, "h2c: {} bytes", g.body.len());
    let g = curl(&["--http2-prior-knowledge", "-r", "1000000-1999999", &url]);
    assert_eq!(g.status, 206);
    assert!(g.body == data[1_000_000..2_000_000]);
    // Two on one HTTP/1.1 keep-alive connection (the range applies to both).
    let g = curl(&["-r", "5000000-", &url, &url]);
    let tail = &data[5_000_000..];
    assert!(g.body == [tail, tail].concat(), "{} bytes", g.body.len());
}
