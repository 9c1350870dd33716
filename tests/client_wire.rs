//! `fibr::client::Client` on the wire, against hand-written servers (std sockets on
//! threads that read the raw request bytes and write raw responses):
//!
//! - request encoding: exact heads and bodies (no framing for a bodiless GET,
//!   `content-length: 0` for an empty POST, Content-Length for full bodies, chunked
//!   framing and trailers for streamed ones, a caller's Content-Length kept and enforced,
//!   Title-Case names, Host from the URI or the caller's); `Connection: close` and
//!   HTTP/1.0 requests (persistent only with keep-alive; a body of unknown length needs
//!   a Content-Length, never chunked);
//! - response parsing: interim 1xx skipped (but not without end), bodiless responses
//!   (HEAD, 204, 304), bodies delimited by close, keep-alive by version and `Connection`
//!   (not with Transfer-Encoding in HTTP/1.0), trailers, bytes after a body,
//!   Content-Length with Transfer-Encoding, head limits at and over their bounds,
//!   obsolete folding, a bad chunk size mid-body;
//! - bodies of other types with a known size (axum's, boxed) framed like the built-in ones;
//! - an early answer (413) while a large upload is still streaming (server closing
//!   abruptly or lingering), a keep-alive answer before the upload ends (the upload goes
//!   on, then the connection is pooled; dropping the response stops it; it goes on while
//!   nobody polls the response body), a request body failing after the response head
//!   (reported in the response body), full duplex echo, lockstep and bulk, and with a
//!   `Connection: close` response (the upload goes on; then closed, not pooled);
//! - pool state: `idle_connections()` after a body read to its end or dropped early, and
//!   an idle connection the server closed is noticed at checkout (no retry needed);
//! - connectors of the caller's: a connection that buffers writes until flushed (as TLS
//!   streams do), and a reused connection reset before a request's first byte went out
//!   (the request is retried, POST included).
//!
//! Whether a connection was reused is checked on the server's side: every request is
//! logged with the index of the connection it came on, and the client closing a
//! connection is logged too. Every test body runs under a watchdog and every await is
//! bounded.

#![cfg(feature = "client")]

mod common;

use bytes::Bytes;
use fibr::client::{Client, Connected, Connection, Connector, Error, ErrorKind, ResponseBody};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, Version};
use http_body_util::{BodyExt, Empty, Full, StreamBody};
use hyper::body::{Body as _, Frame};
use std::convert::Infallible;
use std::future::Future;
use std::io::{self, IoSlice, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::thread;
use std::time::{Duration, Instant};

use common::{find, run_bounded, step, STEP};

// ---------------------------------------------------------------------------------------
// Harness: a raw server that logs what arrives
// ---------------------------------------------------------------------------------------

const LIMIT: Duration = Duration::from_secs(15);

/// `fut` under `fibr::run`, bounded by the watchdog.
fn run<T: Send + 'static>(fut: impl Future<Output = T> + Send + 'static) -> T {
    run_bounded(LIMIT, fut)
}

/// What a server saw, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    /// A whole request (head and body, exactly as received) on connection `.0`.
    Req(usize, Vec<u8>),
    /// The client closed connection `.0` (end of stream or reset) at a request boundary.
    Eof(usize),
    /// The client closed connection `.0` within a request: the bytes read of it.
    Cut(usize, Vec<u8>),
}

type Log = Arc<Mutex<Vec<Ev>>>;

/// A raw HTTP/1.1 server on its own threads (one per connection).
struct Server {
    addr: SocketAddr,
    log: Log,
    conns: Arc<AtomicUsize>,
}

impl Server {
    fn uri(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// `host: 127.0.0.1:port`, as the client should send it.
    fn host(&self) -> String {
        format!("host: {}", self.addr)
    }

    fn conns(&self) -> usize {
        self.conns.load(Ordering::SeqCst)
    }

    /// The requests so far: (connection index, raw bytes).
    fn requests(&self) -> Vec<(usize, Vec<u8>)> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                Ev::Req(i, r) => Some((*i, r.clone())),
                Ev::Eof(_) | Ev::Cut(..) => None,
            })
            .collect()
    }

    /// The connection each request came on, in order.
    fn request_conns(&self) -> Vec<usize> {
        self.requests().into_iter().map(|(i, _)| i).collect()
    }

    /// The raw request `k` (panics with the log if there is none).
    fn request(&self, k: usize) -> String {
        match self.requests().get(k) {
            Some(r) => String::from_utf8_lossy(&r.1).into_owned(),
            None => panic!("no request {k}; log: {:?}", self.events()),
        }
    }

    fn events(&self) -> Vec<Ev> {
        self.log.lock().unwrap().clone()
    }

    /// The partial requests cut short by the client closing: (connection, bytes).
    fn cut(&self) -> Vec<(usize, String)> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                Ev::Cut(i, r) => Some((i, String::from_utf8_lossy(&r).into_owned())),
                _ => None,
            })
            .collect()
    }

    /// The client closed connection `conn` (between or within requests).
    fn saw_eof(&self, conn: usize) -> bool {
        self.log
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, Ev::Eof(i) | Ev::Cut(i, _) if *i == conn))
    }

    /// Waits (on fibr's timer, up to 2 s) until the server has logged `n` whole requests
    /// (for requests the client finished sending without waiting for the server).
    async fn logged(&self, n: usize) -> bool {
        let until = Instant::now() + Duration::from_secs(2);
        while self.requests().len() < n {
            if Instant::now() >= until {
                return false;
            }
            fibr::time::sleep(Duration::from_millis(2)).await;
        }
        true
    }

    /// Waits (on fibr's timer, up to 2 s) for the client to close connection `conn`.
    async fn client_closed(&self, conn: usize) -> bool {
        let until = Instant::now() + Duration::from_secs(2);
        while !self.saw_eof(conn) {
            if Instant::now() >= until {
                return false;
            }
            fibr::time::sleep(Duration::from_millis(2)).await;
        }
        true
    }
}

/// Starts a server: `handle` gets each accepted connection (reads bounded by [`STEP`]).
fn server(handle: impl Fn(&mut Peer) + Send + Sync + 'static) -> Server {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let log: Log = Arc::default();
    let conns = Arc::new(AtomicUsize::new(0));
    let handle = Arc::new(handle);
    let (log2, conns2) = (log.clone(), conns.clone());
    thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            let idx = conns2.fetch_add(1, Ordering::SeqCst);
            s.set_read_timeout(Some(STEP)).unwrap();
            s.set_write_timeout(Some(STEP)).unwrap();
            s.set_nodelay(true).unwrap();
            let (h, log) = (handle.clone(), log2.clone());
            thread::spawn(move || {
                let mut p = Peer {
                    s,
                    buf: Vec::new(),
                    idx,
                    log,
                };
                h(&mut p);
            });
        }
    });
    Server { addr, log, conns }
}

/// One accepted connection: buffered reads of the raw request bytes.
struct Peer {
    s: TcpStream,
    buf: Vec<u8>,
    idx: usize,
    log: Log,
}

/// How a read ended without data.
#[derive(Debug, PartialEq)]
enum Stop {
    /// End of stream or a reset: the client closed.
    Closed,
    /// A timeout or another error.
    Failed,
}

impl Peer {
    /// Reads more into the buffer.
    fn fill(&mut self) -> Result<(), Stop> {
        let mut tmp = [0u8; 64 * 1024];
        loop {
            return match self.s.read(&mut tmp) {
                Ok(0) => Err(Stop::Closed),
                Ok(n) => {
                    self.buf.extend_from_slice(&tmp[..n]);
                    Ok(())
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => Err(Stop::Closed),
                Err(_) => Err(Stop::Failed),
            };
        }
    }

    /// The next `n` bytes.
    fn take(&mut self, n: usize) -> Result<Vec<u8>, Stop> {
        while self.buf.len() < n {
            self.fill()?;
        }
        Ok(self.buf.drain(..n).collect())
    }

    /// Everything up to and including the next `delim`.
    fn through(&mut self, delim: &[u8]) -> Result<Vec<u8>, Stop> {
        loop {
            if let Some(p) = find(&self.buf, delim) {
                return Ok(self.buf.drain(..p + delim.len()).collect());
            }
            self.fill()?;
        }
    }

    /// A request head, CRLF CRLF included.
    fn head(&mut self) -> Result<Vec<u8>, Stop> {
        self.through(b"\r\n\r\n")
    }

    /// A raw chunked body, from the first size line through the trailer section's end,
    /// appended to `raw` as it is parsed.
    fn chunked(&mut self, raw: &mut Vec<u8>) -> Result<(), Stop> {
        loop {
            let line = self.through(b"\r\n")?;
            raw.extend_from_slice(&line);
            let size = String::from_utf8_lossy(&line[..line.len() - 2]).into_owned();
            let size = size.split(';').next().unwrap().trim();
            let n = usize::from_str_radix(size, 16).map_err(|_| Stop::Failed)?;
            if n == 0 {
                loop {
                    let t = self.through(b"\r\n")?;
                    raw.extend_from_slice(&t);
                    if t == b"\r\n" {
                        return Ok(());
                    }
                }
            }
            raw.extend(self.take(n + 2)?);
        }
    }

    /// One whole request (head, then the body its framing says), logged. The client
    /// closing is logged as [`Ev::Eof`] at a request boundary, as [`Ev::Cut`] within one.
    fn request(&mut self) -> Option<Vec<u8>> {
        let mut raw = match self.head() {
            Ok(h) => h,
            Err(stop) => {
                if stop == Stop::Closed {
                    let ev = if self.buf.is_empty() {
                        Ev::Eof(self.idx)
                    } else {
                        Ev::Cut(self.idx, std::mem::take(&mut self.buf))
                    };
                    self.log.lock().unwrap().push(ev);
                }
                return None;
            }
        };
        let head = String::from_utf8_lossy(&raw).to_ascii_lowercase();
        let body = if head.contains("\r\ntransfer-encoding: chunked\r\n") {
            self.chunked(&mut raw)
        } else if let Some(n) = header_value(&head, "content-length") {
            self.take(n.parse().expect("content-length"))
                .map(|b| raw.extend(b))
        } else {
            Ok(())
        };
        if let Err(stop) = body {
            if stop == Stop::Closed {
                // A cut keeps what arrived of the body.
                raw.append(&mut self.buf);
                self.log.lock().unwrap().push(Ev::Cut(self.idx, raw));
            }
            return None;
        }
        self.log
            .lock()
            .unwrap()
            .push(Ev::Req(self.idx, raw.clone()));
        Some(raw)
    }

    /// Writes `b`, ignoring errors (the client may be gone).
    fn send(&mut self, b: &[u8]) {
        let _ = self.s.write_all(b);
    }

    /// Reads until the client closes (or [`STEP`] passes), logging the close.
    fn until_closed(&mut self) {
        while self.fill().is_ok() {}
        self.log.lock().unwrap().push(Ev::Eof(self.idx));
    }
}

fn header_value(head_lower: &str, name: &str) -> Option<String> {
    head_lower.split("\r\n").find_map(|l| {
        let (n, v) = l.split_once(':')?;
        (n == name).then(|| v.trim().to_string())
    })
}

/// A response to write: its parts go out one by one, 30 ms apart; then the server
/// closes the connection if `close`.
struct Reply {
    parts: Vec<Vec<u8>>,
    close: bool,
}

fn reply(b: impl AsRef<[u8]>) -> Reply {
    Reply {
        parts: vec![b.as_ref().to_vec()],
        close: false,
    }
}

fn reply_parts(parts: &[&[u8]]) -> Reply {
    Reply {
        parts: parts.iter().map(|p| p.to_vec()).collect(),
        close: false,
    }
}

impl Reply {
    fn then_close(mut self) -> Reply {
        self.close = true;
        self
    }
}

/// A server answering the k-th request (over all connections) with `script[k]`; past
/// the script's end it closes. After a reply without `close` it reads the next request.
fn scripted(script: Vec<Reply>) -> Server {
    let script = Arc::new(script);
    let next = Arc::new(AtomicUsize::new(0));
    server(move |p| {
        while p.request().is_some() {
            let Some(r) = script.get(next.fetch_add(1, Ordering::SeqCst)) else {
                return;
            };
            for (i, part) in r.parts.iter().enumerate() {
                if i > 0 {
                    thread::sleep(Duration::from_millis(30));
                }
                p.send(part);
            }
            if r.close {
                return;
            }
        }
    })
}

const OK: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";

fn ok_with(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

async fn collect(res: Response<ResponseBody>) -> Bytes {
    step("body", res.into_body().collect())
        .await
        .expect("body")
        .to_bytes()
}

/// `GET uri`: status and body.
async fn get<C: Connector>(client: &Client<C>, uri: &str) -> (StatusCode, Bytes) {
    let res = step("response", client.get(uri))
        .await
        .unwrap_or_else(|e| panic!("GET {uri}: {e:?}"));
    let status = res.status();
    (status, collect(res).await)
}

async fn send<C: Connector, B>(
    client: &Client<C>,
    req: Request<B>,
) -> Result<Response<ResponseBody>, Error>
where
    B: hyper::body::Body + Send + 'static,
    B::Error: Into<fibr::client::BoxError>,
{
    step("response", client.request(req)).await
}

type FrameResult = Result<Frame<Bytes>, Infallible>;

/// A streamed body (size unknown) yielding `frames`.
type FramesBody = StreamBody<futures_util::stream::Iter<std::vec::IntoIter<FrameResult>>>;

fn stream_body(frames: Vec<FrameResult>) -> FramesBody {
    StreamBody::new(futures_util::stream::iter(frames))
}

fn data(b: &'static [u8]) -> FrameResult {
    Ok(Frame::data(Bytes::from_static(b)))
}

type ChunkTx = tokio::sync::mpsc::Sender<FrameResult>;

/// A request body fed through a channel.
fn channel_body() -> (
    ChunkTx,
    StreamBody<impl futures_util::Stream<Item = FrameResult> + Send + 'static>,
) {
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let s =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) });
    (tx, StreamBody::new(s))
}

// ---------------------------------------------------------------------------------------
// Request encoding
// ---------------------------------------------------------------------------------------

/// A bodiless GET carries neither Content-Length nor Transfer-Encoding; the Host comes
/// from the URI's authority (without userinfo), and the target is origin-form.
#[test]
fn get_has_no_framing_headers_and_host_from_uri() {
    let srv = scripted(vec![reply(OK), reply(OK), reply(OK), reply(OK)]);
    run(async move {
        let client = Client::new();
        assert_eq!(get(&client, &srv.uri("/p/a?q=1&r")).await.1, "ok");
        // The same through request() with an Empty body and a header of the caller's.
        let req = Request::get(srv.uri("/"))
            .header("x-a", "1")
            .body(Empty::<Bytes>::new())
            .unwrap();
        assert_eq!(collect(send(&client, req).await.unwrap()).await, "ok");
        // An empty String body on a GET is no body either.
        let req = Request::get(srv.uri("/s")).body(String::new()).unwrap();
        assert_eq!(collect(send(&client, req).await.unwrap()).await, "ok");
        // Userinfo never reaches the Host header; no path is "/". (The authority with
        // userinfo is another pool key, as in hyper-util: a connection of its own.)
        let uri = format!("http://user:pw@{}", srv.addr);
        assert_eq!(get(&client, &uri).await.1, "ok");

        let host = srv.host();
        assert_eq!(
            srv.request(0),
            format!("GET /p/a?q=1&r HTTP/1.1\r\n{host}\r\n\r\n")
        );
        assert_eq!(
            srv.request(1),
            format!("GET / HTTP/1.1\r\nx-a: 1\r\n{host}\r\n\r\n")
        );
        assert_eq!(srv.request(2), format!("GET /s HTTP/1.1\r\n{host}\r\n\r\n"));
        assert_eq!(srv.request(3), format!("GET / HTTP/1.1\r\n{host}\r\n\r\n"));
        assert_eq!(srv.request_conns(), [0, 0, 0, 1]);
    });
}

/// A body of any other type with an exact size hint frames like the built-in ones: none
/// for an empty GET, Content-Length otherwise (never chunked).
#[test]
fn generic_bodies_of_known_size_use_content_length() {
    let srv = scripted((0..8).map(|_| reply(OK)).collect());
    run(async move {
        let client = Client::new();
        let host = srv.host();
        let reqs = [
            Request::get(srv.uri("/a")).body(axum::body::Body::empty()),
            Request::get(srv.uri("/b")).body(axum::body::Body::from(Bytes::new())),
            Request::post(srv.uri("/c")).body(axum::body::Body::from("abc")),
            Request::post(srv.uri("/d")).body(axum::body::Body::empty()),
        ];
        for req in reqs {
            assert_eq!(
                collect(send(&client, req.unwrap()).await.unwrap()).await,
                "ok"
            );
        }
        let req = Request::get(srv.uri("/e")).body(Empty::<Bytes>::new().boxed());
        assert_eq!(
            collect(send(&client, req.unwrap()).await.unwrap()).await,
            "ok"
        );
        let req = Request::put(srv.uri("/f")).body(Full::new(&b"xyz"[..]));
        assert_eq!(
            collect(send(&client, req.unwrap()).await.unwrap()).await,
            "ok"
        );
        let req =
            Request::post(srv.uri("/g")).body(Full::new(Bytes::from_static(b"boxed")).boxed());
        assert_eq!(
            collect(send(&client, req.unwrap()).await.unwrap()).await,
            "ok"
        );
        let req = Request::post(srv.uri("/h")).body(Empty::<Bytes>::new().boxed());
        assert_eq!(
            collect(send(&client, req.unwrap()).await.unwrap()).await,
            "ok"
        );
        let want = [
            format!("GET /a HTTP/1.1\r\n{host}\r\n\r\n"),
            format!("GET /b HTTP/1.1\r\n{host}\r\n\r\n"),
            format!("POST /c HTTP/1.1\r\n{host}\r\ncontent-length: 3\r\n\r\nabc"),
            format!("POST /d HTTP/1.1\r\n{host}\r\ncontent-length: 0\r\n\r\n"),
            format!("GET /e HTTP/1.1\r\n{host}\r\n\r\n"),
            format!("PUT /f HTTP/1.1\r\n{host}\r\ncontent-length: 3\r\n\r\nxyz"),
            format!("POST /g HTTP/1.1\r\n{host}\r\ncontent-length: 5\r\n\r\nboxed"),
            format!("POST /h HTTP/1.1\r\n{host}\r\ncontent-length: 0\r\n\r\n"),
        ];
        let got: Vec<String> = (0..8).map(|k| srv.request(k)).collect();
        assert_eq!(got, want);
    });
}

/// A Host header the caller set is sent as it is, once.
#[test]
fn user_host_header_is_kept() {
    let srv = scripted(vec![reply(OK), reply(OK)]);
    run(async move {
        let client = Client::new();
        let req = Request::get(srv.uri("/"))
            .header("Host", "example.test:8080")
            .body(Empty::<Bytes>::new())
            .unwrap();
        assert_eq!(collect(send(&client, req).await.unwrap()).await, "ok");
        assert_eq!(
            srv.request(0),
            "GET / HTTP/1.1\r\nhost: example.test:8080\r\n\r\n"
        );
        // Title-Case applies to it as well.
        let client = Client::builder().http1_title_case_headers(true).build();
        let req = Request::get(srv.uri("/"))
            .header("host", "example.test")
            .body(Empty::<Bytes>::new())
            .unwrap();
        assert_eq!(collect(send(&client, req).await.unwrap()).await, "ok");
        assert_eq!(
            srv.request(1),
            "GET / HTTP/1.1\r\nHost: example.test\r\n\r\n"
        );
    });
}

/// POST and PUT with an empty body announce `content-length: 0`; a String, a Full (small
/// and beyond the inline size) carry a Content-Length and the bytes right behind the head;
/// an empty stream of unknown size is chunked with just the last chunk.
#[test]
fn empty_and_full_bodies_carry_content_length() {
    let big = "0123456789abcdef".repeat(4096); // 64 KiB
    let srv = scripted((0..7).map(|_| reply(OK)).collect());
    run(async move {
        let client = Client::new();
        let host = srv.host();
        macro_rules! post {
            ($req:expr) => {
                assert_eq!(
                    collect(send(&client, $req.unwrap()).await.unwrap()).await,
                    "ok"
                )
            };
        }
        post!(Request::post(srv.uri("/e")).body(Empty::<Bytes>::new()));
        post!(Request::put(srv.uri("/e")).body(Empty::<Bytes>::new()));
        post!(Request::post(srv.uri("/s")).body(String::new()));
        post!(Request::post(srv.uri("/s")).body(String::from("hello")));
        post!(Request::post(srv.uri("/f")).body(Full::new(Bytes::from_static(b"full body"))));
        post!(Request::post(srv.uri("/big")).body(Full::new(Bytes::from(big.clone()))));
        post!(Request::post(srv.uri("/st")).body(stream_body(vec![])));
        let want = [
            format!("POST /e HTTP/1.1\r\n{host}\r\ncontent-length: 0\r\n\r\n"),
            format!("PUT /e HTTP/1.1\r\n{host}\r\ncontent-length: 0\r\n\r\n"),
            format!("POST /s HTTP/1.1\r\n{host}\r\ncontent-length: 0\r\n\r\n"),
            format!("POST /s HTTP/1.1\r\n{host}\r\ncontent-length: 5\r\n\r\nhello"),
            format!("POST /f HTTP/1.1\r\n{host}\r\ncontent-length: 9\r\n\r\nfull body"),
            format!("POST /big HTTP/1.1\r\n{host}\r\ncontent-length: 65536\r\n\r\n{big}"),
            format!("POST /st HTTP/1.1\r\n{host}\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n"),
        ];
        for (k, w) in want.iter().enumerate() {
            assert_eq!(&srv.request(k), w, "request {k}");
        }
        assert_eq!(srv.request_conns(), [0; 7]);
        assert_eq!(client.idle_connections(), 1);
    });
}

/// A streamed body of unknown size goes chunked: one chunk per data frame (sizes in hex),
/// empty frames skipped (an empty chunk would end the body), then the last chunk; a
/// channel body's chunks go out as they are sent.
#[test]
fn streamed_body_is_chunked() {
    let srv = scripted(vec![reply(OK), reply(OK)]);
    run(async move {
        let client = Client::new();
        let host = srv.host();
        let seventeen = b"0123456789abcdefg";
        let req = Request::post(srv.uri("/"))
            .body(stream_body(vec![
                data(b"abc"),
                data(b""),
                data(seventeen),
                data(b"z"),
            ]))
            .unwrap();
        assert_eq!(collect(send(&client, req).await.unwrap()).await, "ok");
        assert_eq!(
            srv.request(0),
            format!(
                "POST / HTTP/1.1\r\n{host}\r\ntransfer-encoding: chunked\r\n\r\n\
                 3\r\nabc\r\n11\r\n0123456789abcdefg\r\n1\r\nz\r\n0\r\n\r\n"
            )
        );

        let (tx, body) = channel_body();
        let req = Request::put(srv.uri("/ch")).body(body).unwrap();
        let sender = fibr::spawn(async move {
            for i in 0..3 {
                let chunk = Bytes::from(vec![b'a' + i; 300]);
                tx.send(Ok(Frame::data(chunk))).await.unwrap();
                fibr::time::sleep(Duration::from_millis(5)).await;
            }
        });
        assert_eq!(collect(send(&client, req).await.unwrap()).await, "ok");
        step("sender", sender).await.unwrap();
        let body: String = (0..3u8)
            .map(|i| {
                format!(
                    "12c\r\n{}\r\n",
                    String::from_utf8(vec![b'a' + i; 300]).unwrap()
                )
            })
            .collect();
        assert_eq!(
            srv.request(1),
            format!(
                "PUT /ch HTTP/1.1\r\n{host}\r\ntransfer-encoding: chunked\r\n\r\n{body}0\r\n\r\n"
            )
        );
        assert_eq!(srv.request_conns(), [0, 0]);
        assert_eq!(client.idle_connections(), 1);
    });
}

/// Trailers of a streamed body go in the trailer section (fields not allowed there are
/// left out).
#[test]
fn streamed_body_trailers_are_sent() {
    let srv = scripted(vec![reply(OK), reply(OK)]);
    run(async move {
        let client = Client::new();
        let host = srv.host();
        let mut trailers = HeaderMap::new();
        trailers.insert("x-checksum", HeaderValue::from_static("abc123"));
        trailers.append("x-multi", HeaderValue::from_static("1"));
        trailers.append("x-multi", HeaderValue::from_static("2"));
        trailers.insert("content-length", HeaderValue::from_static("99"));
        let req = Request::post(srv.uri("/t"))
            .body(stream_body(vec![
                data(b"hello"),
                Ok(Frame::trailers(trailers)),
            ]))
            .unwrap();
        assert_eq!(collect(send(&client, req).await.unwrap()).await, "ok");
        assert_eq!(
            srv.request(0),
            format!(
                "POST /t HTTP/1.1\r\n{host}\r\ntransfer-encoding: chunked\r\n\r\n\
                 5\r\nhello\r\n0\r\nx-checksum: abc123\r\nx-multi: 1\r\nx-multi: 2\r\n\r\n"
            )
        );
        // Trailers alone (no data at all).
        let mut trailers = HeaderMap::new();
        trailers.insert("x-only", HeaderValue::from_static("t"));
        let req = Request::post(srv.uri("/t"))
            .body(stream_body(vec![Ok(Frame::trailers(trailers))]))
            .unwrap();
        assert_eq!(collect(send(&client, req).await.unwrap()).await, "ok");
        assert_eq!(
            srv.request(1),
            format!(
                "POST /t HTTP/1.1\r\n{host}\r\ntransfer-encoding: chunked\r\n\r\n0\r\nx-only: t\r\n\r\n"
            )
        );
        assert_eq!(srv.request_conns(), [0, 0]);
    });
}

/// A Content-Length the caller set on a streamed body is sent (no chunking) and the body
/// must match it: shorter or longer fails with `RequestBody`, and the connection is
/// closed (the server never sees more bytes than announced).
#[test]
fn user_content_length_with_streamed_body() {
    let srv = scripted(vec![reply(OK), reply(OK)]);
    run(async move {
        let client = Client::new();
        let host = srv.host();
        let req = Request::post(srv.uri("/"))
            .header("content-length", "6")
            .body(stream_body(vec![data(b"abc"), data(b"def")]))
            .unwrap();
        assert_eq!(collect(send(&client, req).await.unwrap()).await, "ok");
        assert_eq!(
            srv.request(0),
            format!("POST / HTTP/1.1\r\n{host}\r\ncontent-length: 6\r\n\r\nabcdef")
        );
        assert_eq!(client.idle_connections(), 1);

        // Shorter: 3 of 10 bytes, then the body ends.
        let req = Request::post(srv.uri("/short"))
            .header("content-length", "10")
            .body(stream_body(vec![data(b"abc")]))
            .unwrap();
        let e = send(&client, req).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RequestBody, "{e:?}");
        // Longer: the frame that overflows is refused before it is written.
        let req = Request::post(srv.uri("/long"))
            .header("content-length", "2")
            .body(stream_body(vec![data(b"abc")]))
            .unwrap();
        let e = send(&client, req).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RequestBody, "{e:?}");
        assert_eq!(client.idle_connections(), 0);
        // Neither incomplete request was completed on the wire: the server logged only
        // the first, and each failed connection was closed by the client.
        assert!(srv.client_closed(0).await, "{:?}", srv.events());
        assert!(srv.client_closed(1).await, "{:?}", srv.events());
        assert_eq!(srv.requests().len(), 1, "{:?}", srv.events());
        assert_eq!(srv.conns(), 2);
    });
}

/// A streamed body with a Content-Length of the caller's is complete once that many
/// bytes are sent: the connection is reused even if the stream reports its end only
/// later (hyper's client does the same: its length encoder ends the body at zero).
#[test]
fn user_content_length_body_complete_at_length() {
    let srv = scripted(vec![reply(OK), reply(OK)]);
    run(async move {
        let client = Client::new();
        let (tx, body) = channel_body();
        let req = Request::post(srv.uri("/"))
            .header("content-length", "6")
            .body(body)
            .unwrap();
        for part in [&b"abc"[..], b"def"] {
            step("send", tx.send(Ok(Frame::data(Bytes::from_static(part)))))
                .await
                .unwrap();
        }
        // The stream stays open until the response is read.
        assert_eq!(collect(send(&client, req).await.unwrap()).await, "ok");
        assert_eq!(client.idle_connections(), 1);
        drop(tx);
        assert_eq!(
            srv.request(0),
            format!(
                "POST / HTTP/1.1\r\n{}\r\ncontent-length: 6\r\n\r\nabcdef",
                srv.host()
            )
        );
        assert_eq!(get(&client, &srv.uri("/")).await.1, "ok");
        assert_eq!(srv.request_conns(), [0, 0]);
    });
}

/// Exactly what reached the server of each mismatched request before the client closed
/// the connection: the body up to the shortfall, or up to the frame that would overflow.
#[test]
fn user_content_length_mismatch_bytes_on_the_wire() {
    let srv = scripted(vec![]);
    run(async move {
        let client = Client::new();
        let host = srv.host();
        for (conn, (cl, frames)) in [
            ("10", vec![data(b"abc")]),
            ("2", vec![data(b"abc")]),
            ("4", vec![data(b"ab"), data(b"cde")]),
        ]
        .into_iter()
        .enumerate()
        {
            let req = Request::post(srv.uri("/"))
                .header("content-length", cl)
                .body(stream_body(frames))
                .unwrap();
            let e = send(&client, req).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::RequestBody, "{e:?}");
            assert!(srv.client_closed(conn).await, "{:?}", srv.events());
        }
        assert_eq!(
            srv.cut(),
            [
                (
                    0,
                    format!("POST / HTTP/1.1\r\n{host}\r\ncontent-length: 10\r\n\r\nabc")
                ),
                (
                    1,
                    format!("POST / HTTP/1.1\r\n{host}\r\ncontent-length: 2\r\n\r\n")
                ),
                (
                    2,
                    format!("POST / HTTP/1.1\r\n{host}\r\ncontent-length: 4\r\n\r\nab")
                ),
            ]
        );
        assert!(srv.requests().is_empty());
    });
}

/// `http1_title_case_headers(true)` sends every name in Title-Case, framing headers and
/// the Host the client adds included.
#[test]
fn title_case_headers() {
    let srv = scripted(vec![reply(OK), reply(OK)]);
    run(async move {
        let client = Client::builder().http1_title_case_headers(true).build();
        let req = Request::post(srv.uri("/"))
            .header("x-custom-header", "v")
            .header("content-type", "text/plain")
            .header("accept", "*/*")
            .body(String::from("hi"))
            .unwrap();
        assert_eq!(collect(send(&client, req).await.unwrap()).await, "ok");
        let req = Request::post(srv.uri("/"))
            .header("www-authenticate-x", "a")
            .body(stream_body(vec![data(b"x")]))
            .unwrap();
        assert_eq!(collect(send(&client, req).await.unwrap()).await, "ok");
        let addr = srv.addr;
        assert_eq!(
            srv.request(0),
            format!(
                "POST / HTTP/1.1\r\nX-Custom-Header: v\r\nContent-Type: text/plain\r\n\
                 Accept: */*\r\nHost: {addr}\r\nContent-Length: 2\r\n\r\nhi"
            )
        );
        assert_eq!(
            srv.request(1),
            format!(
                "POST / HTTP/1.1\r\nWww-Authenticate-X: a\r\nHost: {addr}\r\n\
                 Transfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n"
            )
        );
    });
}

/// A request asking `connection: close` (alone, or as one token of a list, any case) is
/// not pooled, even when the response would allow it (RFC 9112 §9.6: the server closes
/// after answering it).
#[test]
fn request_connection_close_is_not_pooled() {
    let srv = scripted((0..3).map(|_| reply(OK)).collect());
    run(async move {
        let client = Client::new();
        let host = srv.host();
        for (conn, value) in ["close", "x-trace, Close"].into_iter().enumerate() {
            let req = Request::get(srv.uri("/"))
                .header("connection", value)
                .body(Empty::<Bytes>::new())
                .unwrap();
            assert_eq!(collect(send(&client, req).await.unwrap()).await, "ok");
            assert_eq!(client.idle_connections(), 0, "{value:?}: pooled");
            assert!(srv.client_closed(conn).await, "{value:?}: left open");
            assert_eq!(
                srv.request(conn),
                format!("GET / HTTP/1.1\r\nconnection: {value}\r\n{host}\r\n\r\n")
            );
        }
        assert_eq!(get(&client, &srv.uri("/")).await.1, "ok");
        assert_eq!(srv.request_conns(), [0, 1, 2]);
    });
}

/// An HTTP/1.0 request is sent as HTTP/1.0 and is persistent only with `Connection:
/// keep-alive` (RFC 9112 §9.3), whatever the response's version: without it the
/// connection is closed after the answer even when an HTTP/1.1 response allows reuse.
#[test]
fn http10_request_is_pooled_only_with_keep_alive() {
    let srv = scripted((0..4).map(|_| reply(OK)).collect());
    run(async move {
        let client = Client::new();
        let host = srv.host();
        let req = Request::get(srv.uri("/a"))
            .version(Version::HTTP_10)
            .body(Empty::<Bytes>::new())
            .unwrap();
        assert_eq!(collect(send(&client, req).await.unwrap()).await, "ok");
        assert_eq!(
            client.idle_connections(),
            0,
            "HTTP/1.0 without keep-alive, pooled"
        );
        assert!(srv.client_closed(0).await, "HTTP/1.0 connection left open");
        for value in ["keep-alive", "Keep-Alive"] {
            let req = Request::get(srv.uri("/b"))
                .version(Version::HTTP_10)
                .header("connection", value)
                .body(Empty::<Bytes>::new())
                .unwrap();
            assert_eq!(collect(send(&client, req).await.unwrap()).await, "ok");
            assert_eq!(client.idle_connections(), 1, "{value:?}: not pooled");
        }
        assert_eq!(get(&client, &srv.uri("/c")).await.1, "ok");
        assert_eq!(srv.request(0), format!("GET /a HTTP/1.0\r\n{host}\r\n\r\n"));
        assert_eq!(
            srv.request(1),
            format!("GET /b HTTP/1.0\r\nconnection: keep-alive\r\n{host}\r\n\r\n")
        );
        assert_eq!(srv.request(3), format!("GET /c HTTP/1.1\r\n{host}\r\n\r\n"));
        assert_eq!(srv.request_conns(), [0, 1, 1, 1]);
    });
}

/// HTTP/1.0 has no chunked coding (RFC 9112 §6.1: no Transfer-Encoding unless the server
/// is known to speak HTTP/1.1): a streamed body of unknown length without a Content-Length
/// is refused with `RequestBody` before connecting; with the caller's Content-Length it
/// is sent with it (and no Transfer-Encoding), as is a full body.
#[test]
fn http10_request_body_needs_a_known_length() {
    let srv = scripted((0..2).map(|_| reply(OK)).collect());
    run(async move {
        let client = Client::new();
        let host = srv.host();
        let req = Request::post(srv.uri("/none"))
            .version(Version::HTTP_10)
            .body(stream_body(vec![data(b"abc")]))
            .unwrap();
        let e = send(&client, req).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RequestBody, "{e:?}");
        assert_eq!(client.idle_connections(), 0);
        assert_eq!(srv.conns(), 0, "{:?}", srv.events());

        let req = Request::post(srv.uri("/cl"))
            .version(Version::HTTP_10)
            .header("content-length", "6")
            .body(stream_body(vec![data(b"abc"), data(b"def")]))
            .unwrap();
        assert_eq!(collect(send(&client, req).await.unwrap()).await, "ok");
        let req = Request::put(srv.uri("/full"))
            .version(Version::HTTP_10)
            .body(Full::new(Bytes::from_static(b"xyz")))
            .unwrap();
        assert_eq!(collect(send(&client, req).await.unwrap()).await, "ok");
        // The refused request never connected: the first connection (accepted in order)
        // carried the first request sent, and nothing was cut short.
        assert_eq!(
            srv.request(0),
            format!("POST /cl HTTP/1.0\r\n{host}\r\ncontent-length: 6\r\n\r\nabcdef")
        );
        assert_eq!(
            srv.request(1),
            format!("PUT /full HTTP/1.0\r\n{host}\r\ncontent-length: 3\r\n\r\nxyz")
        );
        assert_eq!(srv.request_conns(), [0, 1]);
        assert!(srv.cut().is_empty(), "{:?}", srv.events());
    });
}

// ---------------------------------------------------------------------------------------
// Response parsing
// ---------------------------------------------------------------------------------------

/// Interim responses (100, 102, 103) before the final one are skipped, whether they come
/// with it or on their own; their headers are not the final response's. The connection
/// is reused afterwards.
#[test]
fn interim_responses_are_skipped() {
    let srv = scripted(vec![
        reply(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </s.css>\r\n\r\n\
              HTTP/1.1 200 OK\r\nx-final: 1\r\ncontent-length: 5\r\n\r\nfinal",
        ),
        reply_parts(&[
            b"HTTP/1.1 100 Continue\r\n\r\n",
            b"HTTP/1.1 102 Processing\r\n\r\n",
            b"HTTP/1.1 201 Created\r\ncontent-length: 7\r\n\r\ncreated",
        ]),
        reply(OK),
    ]);
    run(async move {
        let client = Client::new();
        let res = step("r", client.get(srv.uri("/"))).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.headers()["x-final"], "1");
        assert!(res.headers().get("link").is_none());
        assert_eq!(res.headers().len(), 2);
        assert_eq!(collect(res).await, "final");
        let req = Request::post(srv.uri("/")).body(String::from("x")).unwrap();
        let res = send(&client, req).await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        assert_eq!(collect(res).await, "created");
        assert_eq!(get(&client, &srv.uri("/")).await.1, "ok");
        assert_eq!(srv.request_conns(), [0, 0, 0]);
        assert_eq!(client.idle_connections(), 1);
    });
}

/// Interim responses are skipped, but not without end: a server streaming `100 Continue`
/// forever makes the request fail with `Protocol` promptly (no request timeout is set),
/// and the connection is closed.
#[test]
fn endless_interim_responses_are_a_protocol_error() {
    let srv = server(|p| {
        if p.head().is_err() {
            return;
        }
        let many = b"HTTP/1.1 100 Continue\r\n\r\n".repeat(256);
        while p.s.write_all(&many).is_ok() {}
        p.log.lock().unwrap().push(Ev::Eof(p.idx));
    });
    run(async move {
        let client = Client::new();
        let t0 = Instant::now();
        let e = step("1xx flood", client.get(srv.uri("/")))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Protocol, "{e:?}");
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        assert_eq!(client.idle_connections(), 0);
        // The server's writes fail once the client has closed.
        assert!(
            srv.client_closed(0).await,
            "the flooded connection left open"
        );
    });
}

/// A HEAD response's Content-Length describes no body: nothing is read for it and the
/// connection carries the next request.
#[test]
fn head_response_has_no_body_and_is_reused() {
    let srv = scripted(vec![
        reply(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n"),
        reply(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"),
        reply(ok_with("after head")),
    ]);
    run(async move {
        let client = Client::new();
        for _ in 0..2 {
            let req = Request::head(srv.uri("/"))
                .body(Empty::<Bytes>::new())
                .unwrap();
            let res = send(&client, req).await.unwrap();
            assert_eq!(res.status(), StatusCode::OK);
            assert!(res.body().is_end_stream());
            assert_eq!(collect(res).await, "");
            assert_eq!(client.idle_connections(), 1);
        }
        assert_eq!(get(&client, &srv.uri("/")).await.1, "after head");
        assert_eq!(srv.request_conns(), [0, 0, 0]);
        assert_eq!(
            srv.request(0),
            format!("HEAD / HTTP/1.1\r\n{}\r\n\r\n", srv.host())
        );
    });
}

/// 204 and 304 have no body whatever their headers say; the connection is reused and
/// the next response is read from the right place.
#[test]
fn no_content_and_not_modified_are_empty_and_reused() {
    let srv = scripted(vec![
        reply(b"HTTP/1.1 204 No Content\r\n\r\n"),
        reply(b"HTTP/1.1 304 Not Modified\r\ncontent-length: 10\r\netag: \"x\"\r\n\r\n"),
        reply(b"HTTP/1.1 204 No Content\r\ncontent-length: 4\r\n\r\n"),
        reply(ok_with("next")),
    ]);
    run(async move {
        let client = Client::new();
        for want in [204, 304, 204] {
            let res = step("r", client.get(srv.uri("/"))).await.unwrap();
            assert_eq!(res.status().as_u16(), want);
            assert!(res.body().is_end_stream());
            assert_eq!(collect(res).await, "");
            assert_eq!(client.idle_connections(), 1, "after {want}");
        }
        assert_eq!(get(&client, &srv.uri("/")).await.1, "next");
        assert_eq!(srv.request_conns(), [0, 0, 0, 0]);
    });
}

/// No Content-Length and no chunking: the body runs to the server's close, and the
/// connection is not reused.
#[test]
fn close_delimited_body_is_read_to_eof() {
    let srv = scripted(vec![
        reply_parts(&[b"HTTP/1.1 200 OK\r\n\r\nuntil ", b"the close"]).then_close(),
        reply(OK),
    ]);
    run(async move {
        let client = Client::new();
        let res = step("r", client.get(srv.uri("/"))).await.unwrap();
        assert!(!res.body().is_end_stream());
        assert_eq!(collect(res).await, "until the close");
        assert_eq!(client.idle_connections(), 0);
        assert_eq!(get(&client, &srv.uri("/")).await.1, "ok");
        assert_eq!(srv.request_conns(), [0, 1]);
    });
}

/// `Connection: close` in a response (any case, in a list): read, then closed by the
/// client (the server keeps its side open), and the next request connects anew.
#[test]
fn connection_close_response_is_not_reused() {
    let srv = scripted(vec![
        reply(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok"),
        reply(b"HTTP/1.1 200 OK\r\nConnection: foo, Close\r\ncontent-length: 2\r\n\r\nok"),
        reply(OK),
    ]);
    run(async move {
        let client = Client::new();
        for conn in 0..2 {
            assert_eq!(get(&client, &srv.uri("/")).await.1, "ok");
            assert_eq!(client.idle_connections(), 0);
            assert!(srv.client_closed(conn).await, "connection {conn} left open");
        }
        assert_eq!(get(&client, &srv.uri("/")).await.1, "ok");
        assert_eq!(srv.request_conns(), [0, 1, 2]);
    });
}

/// An HTTP/1.0 response is not reused unless it says `Connection: keep-alive`; and not
/// even then if it has a Transfer-Encoding (RFC 9112 §6.1: faulty framing in HTTP/1.0,
/// close after it), though its chunked body is read.
#[test]
fn http10_response_keep_alive() {
    let srv = scripted(vec![
        reply(b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok"),
        reply(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\ncontent-length: 2\r\n\r\nok"),
        reply(b"HTTP/1.0 200 OK\r\nconnection: Keep-Alive\r\ncontent-length: 2\r\n\r\nok"),
        reply(
            b"HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ntransfer-encoding: chunked\r\n\r\n\
              2\r\nok\r\n0\r\n\r\n",
        ),
        reply(OK),
    ]);
    run(async move {
        let client = Client::new();
        let res = step("r", client.get(srv.uri("/"))).await.unwrap();
        assert_eq!(res.version(), Version::HTTP_10);
        assert_eq!(collect(res).await, "ok");
        assert_eq!(client.idle_connections(), 0);
        assert!(srv.client_closed(0).await, "HTTP/1.0 connection left open");
        for _ in 0..2 {
            assert_eq!(get(&client, &srv.uri("/")).await.1, "ok");
            assert_eq!(client.idle_connections(), 1);
        }
        assert_eq!(get(&client, &srv.uri("/")).await.1, "ok");
        assert_eq!(
            client.idle_connections(),
            0,
            "HTTP/1.0 with transfer-encoding pooled"
        );
        assert!(
            srv.client_closed(1).await,
            "HTTP/1.0 chunked connection left open"
        );
        assert_eq!(get(&client, &srv.uri("/")).await.1, "ok");
        assert_eq!(srv.request_conns(), [0, 1, 1, 1, 2]);
    });
}

/// A chunked response's trailers are its last frame; chunk extensions are ignored; the
/// connection is reused.
#[test]
fn chunked_response_trailers() {
    let srv = scripted(vec![
        reply_parts(&[
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntrailer: x-sum\r\n\r\n5;ext=1\r\nhello\r\n",
            b"6\r\n world\r\n0\r\nx-sum: 42\r\nx-other: a\r\n\r\n",
        ]),
        reply(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nx-t: 1\r\n\r\n"),
        reply(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n"),
        reply(OK),
    ]);
    run(async move {
        let client = Client::new();
        let res = step("r", client.get(srv.uri("/"))).await.unwrap();
        let c = step("collect", res.into_body().collect()).await.unwrap();
        let trailers = c.trailers().cloned().expect("trailers");
        assert_eq!(c.to_bytes(), "hello world");
        assert_eq!(trailers.len(), 2);
        assert_eq!(trailers["x-sum"], "42");
        assert_eq!(trailers["x-other"], "a");
        assert_eq!(client.idle_connections(), 1);

        // Frame by frame: data, then trailers, then the end.
        let res = step("r", client.get(srv.uri("/"))).await.unwrap();
        let mut body = res.into_body();
        let f = step("f", body.frame()).await.unwrap().unwrap();
        assert_eq!(f.into_data().unwrap(), "abc");
        let f = step("f", body.frame()).await.unwrap().unwrap();
        assert_eq!(f.into_trailers().unwrap()["x-t"], "1");
        assert!(step("end", body.frame()).await.is_none());
        assert!(body.is_end_stream());

        // No trailers: no trailer frame.
        let res = step("r", client.get(srv.uri("/"))).await.unwrap();
        let c = step("collect", res.into_body().collect()).await.unwrap();
        assert!(c.trailers().is_none());
        assert_eq!(c.to_bytes(), "");

        assert_eq!(get(&client, &srv.uri("/")).await.1, "ok");
        assert_eq!(srv.request_conns(), [0, 0, 0, 0]);
    });
}

/// Bytes after a response's body (garbage, or an unsolicited second response) mean the
/// connection is not pooled: whether they come with the body, after a streamed body, or
/// while the connection sits idle. The next request gets its own answer on a fresh
/// connection, never the unsolicited one (retries are off: nothing is papered over).
#[test]
fn extra_bytes_after_body_are_not_pooled() {
    let big = "b".repeat(100_000);
    let srv = scripted(vec![
        // With the body, in one write.
        reply(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokHTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nBAD"),
        reply(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokgarbage"),
        // After a body that streams (larger than one read).
        reply_parts(&[
            b"HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\n",
            format!("{big}HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nBAD").as_bytes(),
        ]),
        // After a chunked body.
        reply(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\nXX"),
        // An unsolicited response 30 ms after the answer, while idle.
        reply_parts(&[OK, b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nBAD"]),
        reply(ok_with("fresh")),
    ]);
    run(async move {
        let client = Client::builder().retry_canceled_requests(false).build();
        for (k, want) in ["ok", "ok", big.as_str(), "ok"].into_iter().enumerate() {
            let (status, body) = get(&client, &srv.uri("/")).await;
            assert_eq!(
                (status, body.len()),
                (StatusCode::OK, want.len()),
                "request {k}"
            );
            assert_eq!(body, want, "request {k}");
            assert_eq!(client.idle_connections(), 0, "request {k}");
        }
        assert_eq!(get(&client, &srv.uri("/")).await.1, "ok");
        // Pooled until the unsolicited bytes arrive; checkout must notice them.
        fibr::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(get(&client, &srv.uri("/")).await.1, "fresh");
        assert_eq!(srv.request_conns(), [0, 1, 2, 3, 4, 5]);
    });
}

/// Content-Length and Transfer-Encoding both: chunked framing wins, and the connection
/// is not reused (a smuggling shape).
#[test]
fn content_length_with_transfer_encoding() {
    let srv = scripted(vec![
        reply(
            b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n\
              5\r\nhello\r\n0\r\n\r\n",
        ),
        reply(OK),
    ]);
    run(async move {
        let client = Client::new();
        assert_eq!(get(&client, &srv.uri("/")).await.1, "hello");
        assert_eq!(client.idle_connections(), 0);
        assert!(srv.client_closed(0).await);
        assert_eq!(get(&client, &srv.uri("/")).await.1, "ok");
        assert_eq!(srv.request_conns(), [0, 1]);
    });
}

/// A response head with exactly `n` header fields.
fn head_with_fields(n: usize) -> Vec<u8> {
    let mut h = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n".to_vec();
    for i in 1..n {
        h.extend_from_slice(format!("x-h{i}: v\r\n").as_bytes());
    }
    h.extend_from_slice(b"\r\nok");
    h
}

/// `http1_max_headers(n)`: n fields pass, n + 1 fail with `Protocol` (also the default
/// of 100).
#[test]
fn max_headers_limit() {
    let srv = scripted(vec![
        reply(head_with_fields(10)),
        reply(head_with_fields(11)),
        reply(head_with_fields(100)),
        reply(head_with_fields(101)),
    ]);
    run(async move {
        let client = Client::builder().http1_max_headers(10).build();
        let res = step("10", client.get(srv.uri("/"))).await.unwrap();
        assert_eq!(res.headers().len(), 10);
        assert_eq!(collect(res).await, "ok");
        let e = step("11", client.get(srv.uri("/"))).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Protocol, "{e:?}");

        let client = Client::new();
        let res = step("100", client.get(srv.uri("/"))).await.unwrap();
        assert_eq!(res.headers().len(), 100);
        assert_eq!(collect(res).await, "ok");
        let e = step("101", client.get(srv.uri("/"))).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Protocol, "{e:?}");
        assert_eq!(client.idle_connections(), 0);
    });
}

/// A response head of exactly `len` bytes (status line through the empty line), then
/// the body "ok".
fn head_of_len(len: usize) -> Vec<u8> {
    let base = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nx-pad: \r\n\r\n".len();
    assert!(len >= base);
    let mut h = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nx-pad: ".to_vec();
    h.extend(std::iter::repeat_n(b'p', len - base));
    h.extend_from_slice(b"\r\n\r\n");
    assert_eq!(h.len(), len);
    h.extend_from_slice(b"ok");
    h
}

/// `http1_max_head_size(n)`: a head of n bytes passes, n + 1 fails with `Protocol`; the
/// heads here span several reads.
#[test]
fn max_head_size_limit() {
    const N: usize = 20_000;
    let srv = scripted(vec![
        reply(head_of_len(N)),
        reply(head_of_len(N + 1)),
        reply_parts(&[&head_of_len(N)[..N / 2], &head_of_len(N)[N / 2..]]),
        // With the default limit (64 KiB).
        reply(head_of_len(64 * 1024)),
        reply(head_of_len(64 * 1024 + 1)),
    ]);
    run(async move {
        let client = Client::builder().http1_max_head_size(N).build();
        let res = step("n", client.get(srv.uri("/"))).await.unwrap();
        assert_eq!(res.headers()["x-pad"].len(), N - 47);
        assert_eq!(collect(res).await, "ok");
        let e = step("n+1", client.get(srv.uri("/"))).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Protocol, "{e:?}");
        assert_eq!(get(&client, &srv.uri("/")).await.1, "ok");

        let client = Client::new();
        assert_eq!(get(&client, &srv.uri("/")).await.1, "ok");
        let e = step("64k+1", client.get(srv.uri("/"))).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Protocol, "{e:?}");
    });
}

/// An obsolete folded header line is refused by default and, when allowed, unfolded
/// into spaces.
#[test]
fn obsolete_folded_headers() {
    let folded: &[u8] =
        b"HTTP/1.1 200 OK\r\nx-folded: one\r\n two\r\n\tthree\r\ncontent-length: 2\r\n\r\nok";
    let srv = scripted(vec![reply(folded), reply(folded), reply(OK)]);
    run(async move {
        let client = Client::new();
        let e = step("default", client.get(srv.uri("/"))).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Protocol, "{e:?}");

        let client = Client::builder()
            .http1_allow_obsolete_multiline_headers_in_responses(true)
            .build();
        let res = step("allowed", client.get(srv.uri("/"))).await.unwrap();
        let v = res.headers()["x-folded"].as_bytes().to_vec();
        assert!(!v.contains(&b'\r') && !v.contains(&b'\n'), "{v:?}");
        let words: Vec<_> = v
            .split(|b| b.is_ascii_whitespace())
            .filter(|w| !w.is_empty())
            .collect();
        assert_eq!(
            words,
            [&b"one"[..], b"two", b"three"],
            "{:?}",
            String::from_utf8_lossy(&v)
        );
        assert_eq!(res.headers()["content-length"], "2");
        assert_eq!(collect(res).await, "ok");
        assert_eq!(get(&client, &srv.uri("/")).await.1, "ok");
        assert_eq!(srv.request_conns(), [0, 1, 1]);
    });
}

/// A bad chunk size after good chunks: the data before it arrives, then the body fails
/// with `Protocol`, and the connection is closed.
#[test]
fn invalid_chunk_size_mid_body() {
    let srv = scripted(vec![
        reply_parts(&[
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n",
            b"zz\r\nxx\r\n0\r\n\r\n",
        ]),
        reply(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n-1\r\n"),
        reply(OK),
    ]);
    run(async move {
        let client = Client::new();
        let res = step("r", client.get(srv.uri("/"))).await.unwrap();
        let mut body = res.into_body();
        let f = step("first", body.frame()).await.unwrap().unwrap();
        assert_eq!(f.into_data().unwrap(), "hello");
        let e = step("bad", body.frame()).await.unwrap().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Protocol, "{e:?}");
        assert!(step("after error", body.frame()).await.is_none());
        assert_eq!(client.idle_connections(), 0);

        let res = step("r", client.get(srv.uri("/"))).await.unwrap();
        let e = step("collect", res.into_body().collect())
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Protocol, "{e:?}");
        assert_eq!(client.idle_connections(), 0);
        assert!(srv.client_closed(0).await && srv.client_closed(1).await);
        assert_eq!(get(&client, &srv.uri("/")).await.1, "ok");
        assert_eq!(srv.request_conns(), [0, 1, 2]);
    });
}

// ---------------------------------------------------------------------------------------
// Early response, full duplex
// ---------------------------------------------------------------------------------------

const TOO_LARGE: &[u8] =
    b"HTTP/1.1 413 Payload Too Large\r\nconnection: close\r\ncontent-length: 9\r\n\r\ntoo large";

/// 8 MiB in 64 KiB chunks, produced as they are polled.
fn big_upload() -> StreamBody<impl futures_util::Stream<Item = FrameResult> + Send> {
    let chunk = Bytes::from(vec![b'u'; 64 * 1024]);
    StreamBody::new(futures_util::stream::iter(
        (0..128).map(move |_| Ok(Frame::data(chunk.clone()))),
    ))
}

/// How the 413 server ends the connection.
#[derive(Clone, Copy, Debug)]
enum Ending {
    /// Closes at once with the upload unread (the kernel answers with a reset).
    Abrupt,
    /// Shuts down its write side, then reads (and drops) the rest until the client
    /// closes: a lingering close.
    Lingering,
}

/// A server that reads a request head, answers 413 with `connection: close` without
/// reading the body, then ends the connection as `ending` says.
fn rejecting_server(ending: Ending) -> Server {
    server(move |p| {
        if p.head().is_err() {
            return;
        }
        p.send(TOO_LARGE);
        match ending {
            Ending::Abrupt => {}
            Ending::Lingering => {
                let _ = p.s.shutdown(Shutdown::Write);
                p.until_closed();
            }
        }
    })
}

/// The server answers 413 while the client is still streaming an 8 MiB body (a stream,
/// or one `Full`): the client gets the 413 (not a send error), promptly, and closes the
/// connection (no reuse). Several rounds, since a send error racing the answer is
/// timing-dependent.
fn early_response(ending: Ending) {
    let srv = rejecting_server(ending);
    run(async move {
        let client = Client::new();
        let mut outcomes = Vec::new();
        for round in 0..32 {
            let t0 = Instant::now();
            let sent = if round % 2 == 0 {
                send(
                    &client,
                    Request::post(srv.uri("/upload"))
                        .body(big_upload())
                        .unwrap(),
                )
                .await
            } else {
                let full = Full::new(Bytes::from(vec![b'f'; 8 << 20]));
                send(
                    &client,
                    Request::post(srv.uri("/upload")).body(full).unwrap(),
                )
                .await
            };
            let outcome = match sent {
                Ok(res) => {
                    let status = res.status();
                    let body = collect(res).await;
                    format!("{} {}", status.as_u16(), String::from_utf8_lossy(&body))
                }
                Err(e) => format!("error {:?}: {e}", e.kind()),
            };
            assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
            assert_eq!(client.idle_connections(), 0);
            if let Ending::Lingering = ending {
                // The client stopped sending and closed (the server drains until then).
                assert!(srv.client_closed(round).await, "round {round}: left open");
            }
            outcomes.push(outcome);
        }
        assert!(
            outcomes.iter().all(|o| o == "413 too large"),
            "{ending:?}: {outcomes:#?}"
        );
    });
}

#[test]
fn early_413_abrupt_close() {
    early_response(Ending::Abrupt);
}

#[test]
fn early_413_lingering_close() {
    early_response(Ending::Lingering);
}

/// The early answer also comes through while the request body is waiting for data (the
/// caller has not produced the next chunk): the client reads while its upload waits.
#[test]
fn early_response_while_body_waits() {
    let srv = rejecting_server(Ending::Lingering);
    run(async move {
        let client = Client::new();
        let (tx, body) = channel_body();
        step(
            "first chunk",
            tx.send(Ok(Frame::data(Bytes::from_static(b"part")))),
        )
        .await
        .unwrap();
        let req = Request::post(srv.uri("/")).body(body).unwrap();
        let res = send(&client, req).await.unwrap();
        assert_eq!(res.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(collect(res).await, "too large");
        assert_eq!(client.idle_connections(), 0);
        assert!(srv.client_closed(0).await);
        drop(tx);
    });
}

/// A server that sends `answer` as soon as it has the head (keep-alive), then reads the
/// rest of the (chunked) request body and logs the whole request (or, if the client
/// closes within it, what arrived as a cut), sends `then`, and answers any further
/// requests on the connection with [`OK`].
fn answers_before_body(answer: &'static [u8], then: &'static [u8]) -> Server {
    server(move |p| {
        let Ok(mut raw) = p.head() else { return };
        p.send(answer);
        match p.chunked(&mut raw) {
            Ok(()) => p.log.lock().unwrap().push(Ev::Req(p.idx, raw)),
            Err(_) => {
                raw.append(&mut p.buf);
                p.log.lock().unwrap().push(Ev::Cut(p.idx, raw));
                return;
            }
        }
        p.send(then);
        while p.request().is_some() {
            p.send(OK);
        }
    })
}

/// A chunked response head, sent before the request body is read.
const CHUNKED_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";

/// A keep-alive response that comes before the request body is all sent: the caller gets
/// it at once, the body keeps streaming after it (the producer is not stuck), and the
/// connection is pooled once both are done.
#[test]
fn response_before_upload_ends_then_pooled() {
    let srv = answers_before_body(OK, b"");
    run(async move {
        let client = Client::new();
        let (tx, body) = channel_body();
        step(
            "first",
            tx.send(Ok(Frame::data(Bytes::from_static(b"early")))),
        )
        .await
        .unwrap();
        let req = Request::post(srv.uri("/")).body(body).unwrap();
        let res = send(&client, req).await.unwrap();
        assert_eq!(collect(res).await, "ok");
        assert_eq!(client.idle_connections(), 0, "the upload is still open");
        // Nobody polls the response any more: the rest still goes out.
        step(
            "late",
            tx.send(Ok(Frame::data(Bytes::from_static(b"late")))),
        )
        .await
        .unwrap();
        drop(tx);
        let until = Instant::now() + Duration::from_secs(2);
        while client.idle_connections() == 0 && Instant::now() < until {
            fibr::time::sleep(Duration::from_millis(2)).await;
        }
        assert_eq!(client.idle_connections(), 1, "{:?}", srv.events());
        assert!(srv.logged(1).await, "{:?}", srv.events());
        assert_eq!(
            srv.request(0),
            format!(
                "POST / HTTP/1.1\r\n{}\r\ntransfer-encoding: chunked\r\n\r\n\
                 5\r\nearly\r\n4\r\nlate\r\n0\r\n\r\n",
                srv.host()
            )
        );
        assert_eq!(get(&client, &srv.uri("/")).await.1, "ok");
        assert_eq!(srv.request_conns(), [0, 0]);
    });
}

/// The response head (chunked, its body still open) comes first; the caller then feeds
/// the whole request body before it reads the response body (`join(request, feed)`):
/// the upload goes on although nobody polls the response, the server ends the response
/// once it has the whole request, and the connection is pooled.
#[test]
fn upload_goes_on_while_response_body_is_not_polled() {
    let srv = answers_before_body(CHUNKED_HEAD, b"4\r\ndone\r\n0\r\n\r\n");
    run(async move {
        let client = Client::new();
        let (tx, body) = channel_body();
        let req = Request::post(srv.uri("/")).body(body).unwrap();
        let feed = async move {
            for i in 0..32u8 {
                // Slow enough that the response head arrives while feeding; far more
                // than the channel holds.
                fibr::time::sleep(Duration::from_millis(3)).await;
                tx.send(Ok(Frame::data(Bytes::from(vec![b'a' + i % 26; 1024]))))
                    .await
                    .unwrap();
            }
        };
        let (res, ()) = step(
            "request and feeding its body",
            futures_util::future::join(send(&client, req), feed),
        )
        .await;
        assert_eq!(collect(res.unwrap()).await, "done");
        assert_eq!(client.idle_connections(), 1, "{:?}", srv.events());
        let chunks: String = (0..32u8)
            .map(|i| {
                let c = char::from(b'a' + i % 26);
                format!("400\r\n{}\r\n", c.to_string().repeat(1024))
            })
            .collect();
        assert_eq!(
            srv.request(0),
            format!(
                "POST / HTTP/1.1\r\n{}\r\ntransfer-encoding: chunked\r\n\r\n{chunks}0\r\n\r\n",
                srv.host()
            )
        );
        assert_eq!(get(&client, &srv.uri("/")).await.1, "ok");
        assert_eq!(srv.request_conns(), [0, 0]);
    });
}

/// The request body fails after the response head came (full duplex): the response body
/// reports the request body's error (`RequestBody`), at once, rather than waiting for a
/// response the server will not finish; the connection is closed with the request cut
/// short (never ended with a last chunk), and not pooled.
#[test]
fn request_body_error_after_head_is_reported() {
    let srv = answers_before_body(
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n",
        b"0\r\n\r\n",
    );
    run(async move {
        let client = Client::new();
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, io::Error>>(4);
        let body = StreamBody::new(futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|x| (x, rx))
        }));
        step("abc", tx.send(Ok(Frame::data(Bytes::from_static(b"abc")))))
            .await
            .unwrap();
        let req = Request::post(srv.uri("/")).body(body).unwrap();
        let res = send(&client, req).await.expect("head");
        let mut body = res.into_body();
        let f = step("first frame", body.frame()).await.unwrap().unwrap();
        assert_eq!(f.into_data().unwrap(), "hello");
        step("error", tx.send(Err(io::Error::other("upstream died"))))
            .await
            .unwrap();
        let t0 = Instant::now();
        match step("frame after the request body failed", body.frame()).await {
            Some(Err(e)) => assert_eq!(e.kind(), ErrorKind::RequestBody, "{e:?}"),
            other => panic!("expected the request body's error, got {other:?}"),
        }
        assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
        assert!(step("after error", body.frame()).await.is_none());
        assert_eq!(client.idle_connections(), 0);
        assert!(srv.client_closed(0).await, "{:?}", srv.events());
        assert_eq!(
            srv.cut(),
            [(
                0,
                format!(
                    "POST / HTTP/1.1\r\n{}\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n",
                    srv.host()
                )
            )]
        );
        assert!(srv.requests().is_empty());
    });
}

/// A response body dropped while its request body is still streaming stops the upload
/// and closes the connection (the server sees the request cut short).
#[test]
fn dropping_response_during_upload_closes() {
    let srv = answers_before_body(
        b"HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\nfirst bytes of a long body",
        b"",
    );
    run(async move {
        let client = Client::new();
        let (tx, body) = channel_body();
        step(
            "first",
            tx.send(Ok(Frame::data(Bytes::from_static(b"early")))),
        )
        .await
        .unwrap();
        let req = Request::post(srv.uri("/")).body(body).unwrap();
        let res = send(&client, req).await.unwrap();
        let mut body = res.into_body();
        let f = step("frame", body.frame()).await.unwrap().unwrap();
        assert!(!f.into_data().unwrap().is_empty());
        drop(body);
        assert!(srv.client_closed(0).await, "{:?}", srv.events());
        assert_eq!(client.idle_connections(), 0);
        assert_eq!(
            srv.cut(),
            [(
                0,
                format!(
                    "POST / HTTP/1.1\r\n{}\r\ntransfer-encoding: chunked\r\n\r\n5\r\nearly\r\n",
                    srv.host()
                )
            )]
        );
        // The producer learns that nobody takes its chunks any more.
        let sent = step("after close", async {
            for _ in 0..10 {
                if tx
                    .send(Ok(Frame::data(Bytes::from_static(b"x"))))
                    .await
                    .is_err()
                {
                    return false;
                }
            }
            true
        })
        .await;
        assert!(!sent, "the request body is still being taken");
    });
}

/// A server that echoes each request chunk back as a response chunk as soon as it has
/// read it (the response head goes first, before any body byte is read).
fn chunk_echo_server() -> Server {
    chunk_echo_server_with(CHUNKED_HEAD)
}

/// [`chunk_echo_server`] with the response head `head`. It keeps reading requests after
/// each response, whatever `head` says.
fn chunk_echo_server_with(head: &'static [u8]) -> Server {
    server(move |p| loop {
        let Ok(req_head) = p.head() else {
            p.log.lock().unwrap().push(Ev::Eof(p.idx));
            return;
        };
        p.send(head);
        let mut raw = req_head;
        loop {
            let Ok(line) = p.through(b"\r\n") else { return };
            raw.extend_from_slice(&line);
            let size = String::from_utf8_lossy(&line[..line.len() - 2]).into_owned();
            let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
                return;
            };
            if n == 0 {
                let Ok(end) = p.through(b"\r\n") else { return };
                raw.extend_from_slice(&end);
                // Logged before the response ends, so the client sees it once done.
                p.log
                    .lock()
                    .unwrap()
                    .push(Ev::Req(p.idx, std::mem::take(&mut raw)));
                p.send(b"0\r\n\r\n");
                break;
            }
            let Ok(chunk) = p.take(n + 2) else { return };
            raw.extend_from_slice(&chunk);
            let mut out = format!("{n:x}\r\n").into_bytes();
            out.extend_from_slice(&chunk);
            p.send(&out);
        }
    })
}

/// Each chunk sent comes back before the next is sent: the client reads the response
/// body while the request body is still open. Then the connection is reused.
#[test]
fn full_duplex_lockstep_echo() {
    let srv = chunk_echo_server();
    run(async move {
        let client = Client::new();
        let (tx, body) = channel_body();
        let req = Request::post(srv.uri("/echo")).body(body).unwrap();
        let res = send(&client, req).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let mut body = res.into_body();
        let mut want_raw = String::new();
        for i in 0..20 {
            let chunk = format!("chunk-{i};");
            want_raw.push_str(&format!("{:x}\r\n{chunk}\r\n", chunk.len()));
            step("send", tx.send(Ok(Frame::data(Bytes::from(chunk.clone())))))
                .await
                .unwrap();
            let f = step("echo", body.frame())
                .await
                .expect("frame")
                .expect("ok");
            assert_eq!(f.into_data().unwrap(), chunk);
        }
        drop(tx);
        assert!(step("end", body.frame()).await.is_none());
        assert_eq!(
            srv.request(0),
            format!(
                "POST /echo HTTP/1.1\r\n{}\r\ntransfer-encoding: chunked\r\n\r\n{want_raw}0\r\n\r\n",
                srv.host()
            )
        );
        assert_eq!(client.idle_connections(), 1);
        // And the pooled connection works.
        let req = Request::post(srv.uri("/echo"))
            .body(stream_body(vec![data(b"again")]))
            .unwrap();
        assert_eq!(collect(send(&client, req).await.unwrap()).await, "again");
        assert_eq!(srv.request_conns(), [0, 0]);
    });
}

/// 8 MiB streamed up while the server echoes every byte straight back: neither side
/// reads only after writing everything, so this completes only if the client reads the
/// response while it uploads.
#[test]
fn full_duplex_bulk_echo() {
    let srv = chunk_echo_server();
    run(async move {
        let client = Client::new();
        let t0 = Instant::now();
        let req = Request::post(srv.uri("/bulk")).body(big_upload()).unwrap();
        let res = send(&client, req).await.unwrap();
        let body = collect(res).await;
        assert_eq!(body.len(), 8 << 20);
        assert!(body.iter().all(|&b| b == b'u'));
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        let raw = srv.requests()[0].1.clone();
        assert!(raw.ends_with(b"\r\n0\r\n\r\n"));
        assert_eq!(client.idle_connections(), 1);
    });
}

/// A `Connection: close` response streamed back while the request body is still being
/// sent (a full-duplex server that does not keep connections): the upload goes on to its
/// end, the response body comes whole, and the client then closes the connection (the
/// server keeps its side open) rather than pooling it: the next request connects anew.
/// (hyper-util's legacy client uploads to the end here too.)
#[test]
fn connection_close_response_during_upload_is_full_duplex() {
    let srv = chunk_echo_server_with(
        b"HTTP/1.1 200 OK\r\nconnection: close\r\ntransfer-encoding: chunked\r\n\r\n",
    );
    run(async move {
        let client = Client::new();
        let (tx, body) = channel_body();
        step("one", tx.send(data(b"one"))).await.unwrap();
        let req = Request::post(srv.uri("/echo")).body(body).unwrap();
        let res = send(&client, req).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let mut body = res.into_body();
        let f = step("echo", body.frame())
            .await
            .expect("frame")
            .expect("ok");
        assert_eq!(f.into_data().unwrap(), "one");
        step("two", tx.send(data(b"two")))
            .await
            .expect("the request body is still taken");
        drop(tx);
        let rest = step("rest", body.collect()).await;
        let rest = rest.unwrap_or_else(|e| panic!("{e:?}; server: {:?}", srv.events()));
        assert_eq!(rest.to_bytes(), "two");
        assert_eq!(
            srv.request(0),
            format!(
                "POST /echo HTTP/1.1\r\n{}\r\ntransfer-encoding: chunked\r\n\r\n\
                 3\r\none\r\n3\r\ntwo\r\n0\r\n\r\n",
                srv.host()
            )
        );
        assert_eq!(client.idle_connections(), 0);
        assert!(srv.client_closed(0).await, "{:?}", srv.events());
        let req = Request::post(srv.uri("/echo"))
            .body(stream_body(vec![data(b"again")]))
            .unwrap();
        assert_eq!(collect(send(&client, req).await.unwrap()).await, "again");
        assert_eq!(srv.request_conns(), [0, 1]);
    });
}

// ---------------------------------------------------------------------------------------
// Pool state
// ---------------------------------------------------------------------------------------

/// A body read to its end pools the connection; one dropped early closes it (the server
/// sees the close); a small body that came with the head pooled it already, so dropping
/// it unread costs nothing.
#[test]
fn idle_connections_after_read_and_drop() {
    let big = "d".repeat(200_000);
    let srv = scripted(vec![
        reply_parts(&[
            b"HTTP/1.1 200 OK\r\ncontent-length: 200000\r\n\r\n",
            &big.as_bytes()[..1000],
            &big.as_bytes()[1000..],
        ]),
        reply_parts(&[
            b"HTTP/1.1 200 OK\r\ncontent-length: 200000\r\n\r\n",
            &big.as_bytes()[..1000],
            &big.as_bytes()[1000..],
        ]),
        reply(ok_with("small")),
        reply(OK),
    ]);
    run(async move {
        let client = Client::new();
        let res = step("r", client.get(srv.uri("/"))).await.unwrap();
        assert_eq!(client.idle_connections(), 0, "busy while the body streams");
        assert_eq!(collect(res).await.len(), 200_000);
        assert_eq!(client.idle_connections(), 1);

        let res = step("r", client.get(srv.uri("/"))).await.unwrap();
        let mut body = res.into_body();
        let f = step("frame", body.frame()).await.unwrap().unwrap();
        assert!(!f.into_data().unwrap().is_empty());
        drop(body);
        assert_eq!(client.idle_connections(), 0);
        assert!(
            srv.client_closed(0).await,
            "the dropped body's connection stays open"
        );

        let res = step("small", client.get(srv.uri("/"))).await.unwrap();
        assert_eq!(client.idle_connections(), 1, "pooled with the head");
        drop(res);
        assert_eq!(client.idle_connections(), 1);
        assert_eq!(get(&client, &srv.uri("/")).await.1, "ok");
        assert_eq!(srv.request_conns(), [0, 0, 1, 1]);
    });
}

/// A server that closes an idle pooled connection (FIN) is noticed at checkout: the next
/// request goes out on a fresh connection at once, with retries off (so no request was
/// lost on the closed one).
#[test]
fn closed_idle_connection_is_noticed_at_checkout() {
    let srv = scripted(vec![
        reply(OK).then_close(),
        reply(ok_with("second")).then_close(),
        reply(ok_with("third")),
    ]);
    run(async move {
        let client = Client::builder().retry_canceled_requests(false).build();
        for want in ["ok", "second", "third"] {
            assert_eq!(get(&client, &srv.uri("/")).await.1, want);
            // Pooled (the response allowed it); the server's FIN follows.
            assert_eq!(client.idle_connections(), 1);
            fibr::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(srv.request_conns(), [0, 1, 2]);
    });
}

// ---------------------------------------------------------------------------------------
// Connectors of the caller's
// ---------------------------------------------------------------------------------------

/// A TCP stream that holds written bytes until `poll_flush` (like a TLS session's buffer,
/// or any `BufWriter`-like adapter).
struct Buffered {
    inner: fibr::net::TcpStream,
    pending: Vec<u8>,
}

impl hyper::rt::Read for Buffered {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        hyper::rt::Read::poll_read(Pin::new(&mut self.inner), cx, buf)
    }
}

impl hyper::rt::Write for Buffered {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.pending.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut n = 0;
        for b in bufs {
            self.pending.extend_from_slice(b);
            n += b.len();
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        while !this.pending.is_empty() {
            let n = ready!(hyper::rt::Write::poll_write(
                Pin::new(&mut this.inner),
                cx,
                &this.pending
            ))?;
            this.pending.drain(..n);
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

impl Connection for Buffered {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

struct BufferedConnector;

impl Connector for BufferedConnector {
    type Io = Buffered;
    async fn connect(&self, dst: &http::Uri) -> Result<Buffered, Error> {
        let host = dst.authority().unwrap().as_str().to_string();
        let inner = fibr::net::TcpStream::connect(host)
            .await
            .map_err(Error::from_connect_io)?;
        Ok(Buffered {
            inner,
            pending: Vec::new(),
        })
    }
}

/// A connection that sends written bytes only when flushed (hyper's `Write` contract)
/// carries requests with bodies of each kind, and is reused: the client flushes after
/// the head, the body, each chunk.
#[test]
fn buffering_connection_is_flushed() {
    let srv = scripted((0..3).map(|_| reply(OK)).collect());
    run(async move {
        let client = Client::builder().build_with_connector(BufferedConnector);
        let host = srv.host();
        let res = step("get", client.get(srv.uri("/"))).await.expect("get");
        assert_eq!(collect(res).await, "ok");
        let req = Request::post(srv.uri("/full"))
            .body(Full::new(Bytes::from_static(b"full")))
            .unwrap();
        assert_eq!(collect(send(&client, req).await.unwrap()).await, "ok");
        let (tx, body) = channel_body();
        let req = Request::post(srv.uri("/chunks")).body(body).unwrap();
        let feed = async move {
            for part in [&b"one"[..], b"two"] {
                tx.send(Ok(Frame::data(Bytes::from_static(part))))
                    .await
                    .unwrap();
                // Each chunk reaches the server before the next one exists.
                fibr::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let (res, ()) = step(
            "chunks",
            futures_util::future::join(send(&client, req), feed),
        )
        .await;
        assert_eq!(collect(res.unwrap()).await, "ok");
        assert_eq!(srv.request(0), format!("GET / HTTP/1.1\r\n{host}\r\n\r\n"));
        assert_eq!(
            srv.request(1),
            format!("POST /full HTTP/1.1\r\n{host}\r\ncontent-length: 4\r\n\r\nfull")
        );
        assert_eq!(
            srv.request(2),
            format!(
                "POST /chunks HTTP/1.1\r\n{host}\r\ntransfer-encoding: chunked\r\n\r\n\
                 3\r\none\r\n3\r\ntwo\r\n0\r\n\r\n"
            )
        );
        assert_eq!(srv.request_conns(), [0, 0, 0]);
        assert_eq!(client.idle_connections(), 1);
    });
}

/// A stream whose connection (the first one made) is reset by the peer after its first
/// write: the next write fails with EPIPE before a byte goes out, and reads then fail
/// with ECONNRESET, as on a reset TCP socket.
struct ResetAfterFirst {
    inner: fibr::net::TcpStream,
    writes_ok: usize,
    reset: bool,
    first_conn: bool,
}

impl hyper::rt::Read for ResetAfterFirst {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        if self.reset {
            return Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()));
        }
        hyper::rt::Read::poll_read(Pin::new(&mut self.inner), cx, buf)
    }
}

impl hyper::rt::Write for ResetAfterFirst {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.first_conn && self.writes_ok == 1 {
            self.reset = true;
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        let r = hyper::rt::Write::poll_write(Pin::new(&mut self.inner), cx, buf);
        if matches!(r, Poll::Ready(Ok(_))) {
            self.writes_ok += 1;
        }
        r
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl Connection for ResetAfterFirst {}

/// Counts the connections it makes.
struct ResetConnector(Arc<AtomicUsize>);

impl Connector for ResetConnector {
    type Io = ResetAfterFirst;
    async fn connect(&self, dst: &http::Uri) -> Result<ResetAfterFirst, Error> {
        let n = self.0.fetch_add(1, Ordering::SeqCst);
        let host = dst.authority().unwrap().as_str().to_string();
        let inner = fibr::net::TcpStream::connect(host)
            .await
            .map_err(Error::from_connect_io)?;
        Ok(ResetAfterFirst {
            inner,
            writes_ok: 0,
            reset: false,
            first_conn: n == 0,
        })
    }
}

/// A POST with a full body on a reused connection that turns out reset before a byte of
/// it was written (the write fails, and so does the read) never reached the server, so
/// it is retried once on a fresh connection, although POST is not idempotent.
#[test]
fn unsent_post_on_a_reset_reused_connection_is_retried() {
    let srv = scripted((0..2).map(|_| reply(OK)).collect());
    run(async move {
        let made = Arc::new(AtomicUsize::new(0));
        let client = Client::builder().build_with_connector(ResetConnector(made.clone()));
        assert_eq!(get(&client, &srv.uri("/")).await.1, "ok");
        assert_eq!(client.idle_connections(), 1);
        let req = Request::post(srv.uri("/post"))
            .body(String::from("data"))
            .unwrap();
        let res = send(&client, req)
            .await
            .expect("never sent, so retried on a fresh connection");
        assert_eq!(collect(res).await, "ok");
        assert_eq!(made.load(Ordering::SeqCst), 2);
        assert_eq!(
            srv.request(1),
            format!(
                "POST /post HTTP/1.1\r\n{}\r\ncontent-length: 4\r\n\r\ndata",
                srv.host()
            )
        );
        assert_eq!(srv.request_conns(), [0, 1]);
        assert!(srv.client_closed(0).await, "the reset connection left open");
        assert!(srv.cut().is_empty(), "{:?}", srv.events());
    });
}
