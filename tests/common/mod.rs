//! Helpers shared by the integration tests. Each test file is its own binary and includes
//! this module with `mod common;`; no binary uses all of it, hence `allow(dead_code)`.
//!
//! - a watchdog for test bodies ([`bounded`]) and a bound for single awaits ([`step`]);
//! - the process's threads, descriptors and RSS from /proc, and RLIMIT_NOFILE;
//! - std sockets with timeouts, and a raw HTTP/1.1 client over them ([`Client`]);
//! - starting `fibr::serve` on 127.0.0.1:0 ([`start`]), and unique temporary paths.

#![allow(dead_code)]

#[cfg(all(feature = "http3", feature = "axum"))]
pub mod h3;
#[cfg(feature = "tls")]
pub mod pki;
pub mod prefork;
pub mod socks;
#[cfg(feature = "tls")]
pub mod tls_provider;
#[cfg(all(feature = "tunnel", feature = "axum", feature = "tokio"))]
pub mod tunnel;
#[cfg(feature = "ws")]
pub mod ws_echo;

use fibr::http::{MakeService, Server, ServerConfig};
use fibr::net::TcpListener;
use fibr::Handler;
use std::future::Future;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// Watchdog
// ---------------------------------------------------------------------------------------

/// Runs `f` on its own thread and fails if it does not finish within `limit` (a panic in
/// `f` is re-raised here).
pub fn bounded<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let th = thread::Builder::new()
        .name("bounded-test-body".into())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .unwrap();
    match rx.recv_timeout(limit) {
        Ok(v) => {
            th.join().unwrap();
            v
        }
        // The body panicked: surface its panic.
        Err(mpsc::RecvTimeoutError::Disconnected) => match th.join() {
            Err(p) => std::panic::resume_unwind(p),
            Ok(()) => unreachable!("the body finished without sending"),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("test body did not finish within {limit:?} (hang)")
        }
    }
}

/// `fut` under `fibr::run`, on a watchdog thread bounded by `limit`.
pub fn run_bounded<T: Send + 'static>(
    limit: Duration,
    fut: impl Future<Output = T> + Send + 'static,
) -> T {
    bounded(limit, move || fibr::run(fut))
}

/// Bound on any single awaited step inside a test.
pub const STEP: Duration = Duration::from_secs(5);

/// Awaits `fut` for at most [`STEP`] (on fibr's timer), panicking with `what` on a timeout.
pub async fn step<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match fibr::time::timeout(STEP, fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: no result within {STEP:?}"),
    }
}

/// Polls `f` every 2 ms until it holds or `within` passes; true if it held.
pub fn wait_until(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + within;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        thread::sleep(Duration::from_millis(2));
    }
}

// ---------------------------------------------------------------------------------------
// The process, from /proc
// ---------------------------------------------------------------------------------------

/// The resident set size of this process, in bytes.
pub fn rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS line");
    let kb: usize = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("VmRSS value");
    kb * 1024
}

/// Open descriptors of this process.
pub fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// The open descriptors as sorted `fd->target` lines (to show what leaked).
pub fn fds() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| {
            let target = std::fs::read_link(e.path())
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            format!("{}->{}", e.file_name().to_string_lossy(), target)
        })
        .collect();
    v.sort();
    v
}

/// Threads of this process.
pub fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// The names of this process's threads, sorted.
pub fn thread_names() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| {
            std::fs::read_to_string(e.path().join("comm"))
                .unwrap_or_default()
                .trim()
                .to_string()
        })
        .collect();
    v.sort();
    v
}

/// Waits (up to 3 s) for threads and fds to come down to the given counts; returns the
/// last counts seen.
pub fn settle(threads: usize, fds: usize) -> (usize, usize) {
    let until = Instant::now() + Duration::from_secs(3);
    loop {
        let now = (thread_count(), fd_count());
        if (now.0 <= threads && now.1 <= fds) || Instant::now() >= until {
            return now;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Waits (up to `within`) for the fd count to come back to `baseline` (plus `slack`);
/// returns the last count seen.
pub fn settle_fds(baseline: usize, slack: usize, within: Duration) -> usize {
    let until = Instant::now() + within;
    loop {
        let n = fd_count();
        if n <= baseline + slack || Instant::now() >= until {
            return n;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Samples RSS on a thread of its own until finished; `finish` returns the peak.
pub struct RssSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicUsize>,
    th: Option<thread::JoinHandle<()>>,
}

impl RssSampler {
    /// Starts sampling, once every `every`.
    pub fn start(every: Duration) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicUsize::new(rss()));
        let (s, p) = (stop.clone(), peak.clone());
        let th = thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                p.fetch_max(rss(), Ordering::Relaxed);
                thread::sleep(every);
            }
        });
        RssSampler {
            stop,
            peak,
            th: Some(th),
        }
    }

    /// Stops sampling; the highest RSS seen (including now).
    pub fn finish(mut self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(th) = self.th.take() {
            th.join().unwrap();
        }
        self.peak.fetch_max(rss(), Ordering::Relaxed);
        self.peak.load(Ordering::Relaxed)
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The process's RLIMIT_NOFILE.
pub fn nofile() -> libc::rlimit {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    lim
}

/// Sets the process's RLIMIT_NOFILE.
pub fn set_nofile(lim: libc::rlimit) {
    // SAFETY: setrlimit reads the struct we pass.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
}

/// Raises the soft RLIMIT_NOFILE to at least `want` (up to the hard limit); returns it.
pub fn raise_nofile(want: u64) -> u64 {
    let mut lim = nofile();
    if lim.rlim_cur < want {
        lim.rlim_cur = want.min(lim.rlim_max);
        set_nofile(lim);
    }
    lim.rlim_cur
}

/// Restores the descriptor limit when dropped (also when the test fails).
pub struct RestoreNofile(pub libc::rlimit);

impl Drop for RestoreNofile {
    fn drop(&mut self) {
        set_nofile(self.0);
    }
}

// ---------------------------------------------------------------------------------------
// Peers
// ---------------------------------------------------------------------------------------

/// Fails the test, naming the install line, unless `python3` can import `module`: a test
/// whose peer is missing must fail, not pass without having run. `scripts/peers` (run by
/// `scripts/test`, the README's test command) installs every peer.
pub fn require_python(module: &str) {
    let found = std::process::Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "python3 cannot import {module}: run scripts/peers (or scripts/test), which installs the Python peers"
    );
}

/// Runs `python3 -c script ARGS...` (40 s at most): its output lines, once it succeeded
/// (else the test fails with its output and errors).
pub fn python_lines(script: &str, args: &[String]) -> Vec<String> {
    let out = std::process::Command::new("timeout")
        .args(["40", "python3", "-c", script])
        .args(args)
        .output()
        .expect("python3");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().map(str::to_owned).collect()
}

/// Fails the test, naming the install line, unless the program `tool` (from the Debian
/// package `package`) is on the PATH.
pub fn require_tool(tool: &str, package: &str) {
    let found = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "{tool} is not installed: run scripts/peers (or apt-get install {package})"
    );
}

// ---------------------------------------------------------------------------------------
// Sockets and files
// ---------------------------------------------------------------------------------------

/// Bound on any single blocking socket operation of a client.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// A read or write that ran into its socket timeout.
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Connects to `addr` within `timeout`, with `timeout` on every read and write, and
/// `TCP_NODELAY`.
pub fn try_connect_within(addr: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// [`try_connect_within`], panicking on an error.
pub fn connect_within(addr: SocketAddr, timeout: Duration) -> TcpStream {
    try_connect_within(addr, timeout).unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
}

/// [`try_connect_within`] with [`IO_TIMEOUT`].
pub fn try_connect(addr: SocketAddr) -> io::Result<TcpStream> {
    try_connect_within(addr, IO_TIMEOUT)
}

/// [`connect_within`] with [`IO_TIMEOUT`].
pub fn connect(addr: SocketAddr) -> TcpStream {
    connect_within(addr, IO_TIMEOUT)
}

/// Where `needle` first occurs in `hay`.
pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Reads until EOF; an error (a reset, a timeout) also ends the stream and is returned.
pub fn read_to_eof<S: Read>(s: &mut S) -> (Vec<u8>, Option<io::Error>) {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (out, None),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (out, Some(e)),
        }
    }
}

/// Ok if the peer closes (EOF or reset) within `within` with no further byte. Leaves the
/// read timeout at `within`.
pub fn closed_within(s: &mut TcpStream, within: Duration) -> Result<(), String> {
    s.set_read_timeout(Some(within)).unwrap();
    let mut tmp = [0u8; 4096];
    match s.read(&mut tmp) {
        Ok(0) => Ok(()),
        Ok(n) => Err(format!(
            "expected the connection to close, got {n} bytes: {:?}",
            String::from_utf8_lossy(&tmp[..n])
        )),
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => Ok(()),
        Err(e) => Err(format!(
            "expected the connection to close within {within:?}: {e}"
        )),
    }
}

/// A path in the temporary directory that no other test (or run) uses, removed (if it
/// exists) when dropped.
pub struct TempPath(PathBuf);

impl TempPath {
    /// `fibr-{tag}-{pid}-{n}-{nanos}.{ext}` in the temporary directory.
    pub fn new(tag: &str, ext: &str) -> TempPath {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        TempPath(std::env::temp_dir().join(format!(
            "fibr-{tag}-{}-{n}-{nanos}.{ext}",
            std::process::id()
        )))
    }

    /// A path for a Unix socket.
    pub fn sock(tag: &str) -> TempPath {
        TempPath::new(tag, "sock")
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl std::ops::Deref for TempPath {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TempPath {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

// ---------------------------------------------------------------------------------------
// HTTP servers
// ---------------------------------------------------------------------------------------

/// Binds 127.0.0.1:0 and serves `app` with `cfg` on fibr's default runtime (detached);
/// returns the address.
pub fn start<M, Marker>(app: M, cfg: ServerConfig) -> SocketAddr
where
    M: MakeService<Marker>,
    Marker: 'static,
    Server<M, Marker>: Handler,
{
    let listener = fibr::run(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let addr = listener.local_addr().unwrap();
    drop(fibr::spawn(async move {
        if let Err(e) = fibr::serve(listener, app).with_config(cfg).await {
            eprintln!("serve failed: {e}");
        }
    }));
    addr
}

// ---------------------------------------------------------------------------------------
// A raw HTTP/1.1 client over std::net::TcpStream
// ---------------------------------------------------------------------------------------

/// A response as [`Client`] read it.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The body (empty when it was only counted).
    pub body: Vec<u8>,
    /// Body bytes received (also when not kept).
    pub len: usize,
}

impl Resp {
    /// The first header called `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// How many headers are called `name` (any case).
    pub fn header_count(&self, name: &str) -> usize {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .count()
    }

    /// The response says `connection: close` (as one of its tokens).
    pub fn closes(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
    }

    /// The body as (lossy) UTF-8.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A raw HTTP/1.1 client: writes whatever it is given, reads responses strictly
/// (status line, headers, Content-Length, chunked or close-delimited bodies) and panics on
/// EOF, errors and timeouts where a response is expected.
pub struct Client<S = TcpStream> {
    pub s: S,
    /// Bytes read; those before `pos` are consumed.
    buf: Vec<u8>,
    pos: usize,
    /// The read timeout to go back to after a shorter wait.
    io_timeout: Duration,
}

impl Client {
    /// Connects with [`IO_TIMEOUT`] on connect, reads and writes.
    pub fn connect(addr: SocketAddr) -> Client {
        Client::connect_within(addr, IO_TIMEOUT)
    }

    /// Connects with `io_timeout` on connect, reads and writes.
    pub fn connect_within(addr: SocketAddr, io_timeout: Duration) -> Client {
        Client {
            s: connect_within(addr, io_timeout),
            buf: Vec::new(),
            pos: 0,
            io_timeout,
        }
    }
}

impl<S: Read + Write> Client<S> {
    /// Reads and writes through `s` (a TLS stream, say), whose timeouts are its own.
    pub fn over(s: S) -> Client<S> {
        Client {
            s,
            buf: Vec::new(),
            pos: 0,
            io_timeout: IO_TIMEOUT,
        }
    }

    /// Bytes read but not consumed yet.
    pub fn unconsumed(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    pub fn send(&mut self, data: &[u8]) {
        self.s.write_all(data).expect("client write");
    }

    /// `GET path` and its response.
    pub fn get(&mut self, path: &str) -> Resp {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        self.response()
    }

    /// Reads more bytes; panics on EOF, errors and timeouts.
    pub fn fill(&mut self, what: &str) {
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > 64 * 1024 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        let mut tmp = [0u8; 64 * 1024];
        match self.s.read(&mut tmp) {
            Ok(0) => panic!(
                "EOF while reading {what}; unconsumed: {:?}",
                String::from_utf8_lossy(self.unconsumed())
            ),
            Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
            Err(e) => panic!(
                "reading {what}: {e}; unconsumed: {:?}",
                String::from_utf8_lossy(self.unconsumed())
            ),
        }
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize, what: &str) -> Vec<u8> {
        while self.unconsumed().len() < n {
            self.fill(what);
        }
        let v = self.buf[self.pos..self.pos + n].to_vec();
        self.pos += n;
        v
    }

    /// The next line, without its CRLF.
    pub fn line(&mut self, what: &str) -> Vec<u8> {
        loop {
            if let Some(p) = find(self.unconsumed(), b"\r\n") {
                let l = self.buf[self.pos..self.pos + p].to_vec();
                self.pos += p + 2;
                return l;
            }
            self.fill(what);
        }
    }

    /// Status line and headers: an `HTTP/1.1` status line, UTF-8, no whitespace before a
    /// colon.
    pub fn head(&mut self) -> (u16, Vec<(String, String)>) {
        let end = loop {
            if let Some(p) = find(self.unconsumed(), b"\r\n\r\n") {
                break p;
            }
            self.fill("a response head");
        };
        let head = self.buf[self.pos..self.pos + end].to_vec();
        self.pos += end + 4;
        let head = String::from_utf8(head).expect("response head is UTF-8");
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap();
        assert!(
            status_line.starts_with("HTTP/1.1 "),
            "bad status line {status_line:?}"
        );
        let status: u16 = status_line[9..12].parse().expect("status code");
        let headers = lines
            .map(|l| {
                let (n, v) = l
                    .split_once(':')
                    .unwrap_or_else(|| panic!("bad header {l:?}"));
                assert!(!n.ends_with(' '), "whitespace before colon in {l:?}");
                (n.to_string(), v.trim().to_string())
            })
            .collect();
        (status, headers)
    }

    /// One response, body kept.
    pub fn response(&mut self) -> Resp {
        self.read_response(false, true)
    }

    /// One response; `head_only` for the answer to a HEAD request.
    pub fn response_to(&mut self, head_only: bool) -> Resp {
        self.read_response(head_only, true)
    }

    /// One response; its body is only counted (`len`) unless `keep`, so a large one costs
    /// no memory.
    pub fn response_keeping(&mut self, keep: bool) -> Resp {
        self.read_response(false, keep)
    }

    fn read_response(&mut self, head_only: bool, keep: bool) -> Resp {
        let (status, headers) = self.head();
        let mut resp = Resp {
            status,
            headers,
            body: Vec::new(),
            len: 0,
        };
        if head_only || status < 200 || status == 204 || status == 304 {
            return resp;
        }
        let mut body = Vec::new();
        let mut len = 0;
        let mut on_data = |d: &[u8]| {
            len += d.len();
            if keep {
                body.extend_from_slice(d);
            }
        };
        if resp
            .header("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
        {
            self.chunked_body(on_data);
        } else if let Some(n) = resp.header("content-length") {
            let n: usize = n.parse().expect("content-length");
            self.body_bytes(n, on_data);
        } else {
            // Close-delimited.
            on_data(&self.buf[self.pos..]);
            self.buf.clear();
            self.pos = 0;
            let mut rest = Vec::new();
            self.s.read_to_end(&mut rest).expect("close-delimited body");
            on_data(&rest);
        }
        resp.body = body;
        resp.len = len;
        resp
    }

    /// Hands the next `n` bytes to `on_data` as they arrive.
    fn body_bytes(&mut self, mut left: usize, mut on_data: impl FnMut(&[u8])) {
        while left > 0 {
            if self.pos == self.buf.len() {
                self.fill("a response body");
            }
            let k = left.min(self.buf.len() - self.pos);
            on_data(&self.buf[self.pos..self.pos + k]);
            self.pos += k;
            left -= k;
        }
    }

    /// Decodes a chunked body, handing data to `on_data` as it arrives (never all at once).
    pub fn chunked_body(&mut self, mut on_data: impl FnMut(&[u8])) {
        loop {
            let line = self.line("a chunk-size line");
            let line = String::from_utf8(line).expect("chunk-size line");
            let size = line.split(';').next().unwrap().trim();
            let left = usize::from_str_radix(size, 16).expect("chunk size");
            if left == 0 {
                // Trailers until the empty line.
                while !self.line("the trailer section").is_empty() {}
                return;
            }
            self.body_bytes(left, &mut on_data);
            assert_eq!(self.take(2, "a chunk's CRLF"), b"\r\n");
        }
    }
}

impl Client {
    /// The server must close the connection within `within`, with nothing more sent.
    pub fn expect_closed(&mut self, within: Duration) {
        if let Err(e) = self.closed_within(within) {
            panic!("{e}");
        }
    }

    /// Ok if the server closes the connection within `within` with nothing more sent.
    pub fn closed_within(&mut self, within: Duration) -> Result<(), String> {
        if !self.unconsumed().is_empty() {
            return Err(format!(
                "expected the connection to close, got {:?}",
                String::from_utf8_lossy(self.unconsumed())
            ));
        }
        let r = closed_within(&mut self.s, within);
        self.s.set_read_timeout(Some(self.io_timeout)).unwrap();
        r
    }

    /// True if nothing arrives for `d` (bytes that do arrive are kept; EOF is "not quiet").
    pub fn quiet_for(&mut self, d: Duration) -> bool {
        self.s.set_read_timeout(Some(d)).unwrap();
        let mut tmp = [0u8; 4096];
        let r = self.s.read(&mut tmp);
        self.s.set_read_timeout(Some(self.io_timeout)).unwrap();
        match r {
            Ok(0) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&tmp[..n]);
                false
            }
            Err(e) => is_timeout(&e),
        }
    }
}
