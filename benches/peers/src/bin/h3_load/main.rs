//! The HTTP/3 load generator of `cargo bench --bench compare` (issue 15): quinn + h3's
//! client on a current-thread tokio runtime (the bench pins it to one CPU), so that neither
//! server is measured against its own HTTP/3 code.
//!
//! ```sh
//! h3_load load ADDR CONNS STREAMS SECS  # CONNS connections × STREAMS GET / in flight
//! h3_load download ADDR BYTES SECS      # GET /bytes/BYTES again and again, one connection
//! h3_load idle ADDR                     # stdin "open N": hold N connections, answer "open N"
//! h3_load check ADDR                    # every route answered as it should: "ok"
//! ```
//!
//! A load starts no request after SECS and waits for those in flight, so every request it
//! counts was served within its run. It prints `key value` lines: `requests`, `wall_us`,
//! `errors` (non-200 answers and failed streams), `p99_us`, and for a download `bytes`.
//! Each connection has its own endpoint (UDP socket), as separate clients would, and is
//! closed at the end. An idle connection has made its handshake and had one GET /
//! answered; it is then left silent (no keep-alives) until stdin closes.

mod client;

use bytes::Bytes;
use client::{exchange, BoxError, Conn};
use http::{Method, StatusCode};
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Idle connections opened at once (their handshakes in flight together).
const IDLE_BATCH: usize = 100;

fn usage() -> BoxError {
    "usage: h3_load load ADDR CONNS STREAMS SECS | download ADDR BYTES SECS | idle ADDR | \
     check ADDR"
        .into()
}

fn main() {
    if let Err(e) = run() {
        eprintln!("h3_load: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize| -> Result<u64, BoxError> {
        let a = args.get(i).ok_or_else(usage)?;
        a.parse()
            .map_err(|e| format!("bad number {a:?}: {e}").into())
    };
    let addr: SocketAddr = args.get(1).ok_or_else(usage)?.parse()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let config = client::client_config()?;
    match args[0].as_str() {
        "load" => {
            let (conns, streams, secs) = (num(2)? as usize, num(3)? as usize, num(4)?);
            rt.block_on(load(addr, &config, conns, streams, secs))
        }
        "download" => {
            let (bytes, secs) = (num(2)? as usize, num(3)?);
            rt.block_on(download(addr, &config, bytes, secs))
        }
        "idle" => rt.block_on(idle(addr, &config)),
        "check" => rt.block_on(check(addr, &config)),
        _ => Err(usage()),
    }
}

/// What one request loop counted.
#[derive(Default)]
struct Tally {
    requests: u64,
    errors: u64,
    bytes: u64,
    /// Each request's time, µs.
    times: Vec<u32>,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.requests += other.requests;
        self.errors += other.errors;
        self.bytes += other.bytes;
        self.times.extend(other.times);
    }

    fn print(mut self, wall: Duration) {
        let p99 = if self.times.is_empty() {
            0
        } else {
            let i = (self.times.len() * 99)
                .div_ceil(100)
                .clamp(1, self.times.len())
                - 1;
            *self.times.select_nth_unstable(i).1
        };
        println!("requests {}", self.requests);
        println!("wall_us {}", wall.as_micros());
        println!("errors {}", self.errors);
        println!("p99_us {p99}");
        println!("bytes {}", self.bytes);
    }
}

/// Sends GET `path` on `send` until `deadline`, one at a time; a request is counted when
/// answered 200 with `want` bytes (if given). A failed stream ends the loop.
async fn request_loop(
    mut send: client::Sender,
    path: String,
    want: Option<usize>,
    deadline: Instant,
) -> Tally {
    let mut t = Tally::default();
    while Instant::now() < deadline {
        let start = Instant::now();
        match exchange(&mut send, Method::GET, &path, None, false).await {
            Ok(got) if got.status == StatusCode::OK && want.is_none_or(|w| w == got.len) => {
                t.requests += 1;
                t.bytes += got.len as u64;
                t.times.push(start.elapsed().as_micros() as u32);
            }
            Ok(_) => t.errors += 1,
            Err(_) => {
                t.errors += 1;
                break;
            }
        }
    }
    t
}

/// Opens `n` connections at once.
async fn open_all(
    addr: SocketAddr,
    config: &quinn::ClientConfig,
    n: usize,
) -> Result<Vec<Conn>, BoxError> {
    let opening: Vec<_> = (0..n)
        .map(|_| {
            let config = config.clone();
            tokio::spawn(async move { Conn::open(addr, &config).await })
        })
        .collect();
    let mut conns = Vec::with_capacity(n);
    for (i, o) in opening.into_iter().enumerate() {
        conns.push(o.await?.map_err(|e| format!("connection {i}: {e}"))?);
    }
    Ok(conns)
}

/// `loops` request loops per connection for `secs`; then the tally, and the connections
/// closed.
async fn run_loops(
    conns: Vec<Conn>,
    loops: usize,
    path: &str,
    want: Option<usize>,
    secs: u64,
) -> Result<(), BoxError> {
    let start = Instant::now();
    let deadline = start + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for c in &conns {
        for _ in 0..loops {
            let send = c.send.clone();
            tasks.push(tokio::spawn(request_loop(
                send,
                path.to_string(),
                want,
                deadline,
            )));
        }
    }
    let mut total = Tally::default();
    for t in tasks {
        total.add(t.await?);
    }
    let wall = start.elapsed();
    let closing = Instant::now();
    futures_util::future::join_all(conns.into_iter().map(Conn::close)).await;
    eprintln!("h3_load: closed in {:?}", closing.elapsed());
    total.print(wall);
    Ok(())
}

/// `conns` connections with `streams` GET / loops each, for `secs`.
async fn load(
    addr: SocketAddr,
    config: &quinn::ClientConfig,
    conns: usize,
    streams: usize,
    secs: u64,
) -> Result<(), BoxError> {
    let opening = Instant::now();
    let conns = open_all(addr, config, conns).await?;
    eprintln!(
        "h3_load: {} connections in {:?}",
        conns.len(),
        opening.elapsed()
    );
    run_loops(conns, streams, "/", None, secs).await
}

/// GET /bytes/BYTES on one connection, one after the other, for `secs`; each must bring
/// all `bytes`.
async fn download(
    addr: SocketAddr,
    config: &quinn::ClientConfig,
    bytes: usize,
    secs: u64,
) -> Result<(), BoxError> {
    let conns = open_all(addr, config, 1).await?;
    run_loops(conns, 1, &format!("/bytes/{bytes}"), Some(bytes), secs).await
}

/// Holds idle connections: on each "open N" from stdin, opens connections (a batch at a
/// time, each with one GET / answered `hello`) until N are held, then says "open N".
async fn idle(addr: SocketAddr, config: &quinn::ClientConfig) -> Result<(), BoxError> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(4);
    // Stdin read on a thread of its own: the runtime keeps driving the connections.
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.blocking_send(line).is_err() {
                break;
            }
        }
    });
    let mut held: Vec<Conn> = Vec::new();
    while let Some(line) = rx.recv().await {
        let upto: usize = line
            .strip_prefix("open ")
            .and_then(|n| n.trim().parse().ok())
            .ok_or_else(|| format!("expected \"open N\", got {line:?}"))?;
        while held.len() < upto {
            let batch = open_all(addr, config, IDLE_BATCH.min(upto - held.len())).await?;
            let answered = batch.into_iter().map(|mut c| async move {
                let got = exchange(&mut c.send, Method::GET, "/", None, true).await?;
                if got.status != StatusCode::OK || got.body != fibr_bench_peers::HELLO.as_bytes() {
                    return Err(format!("GET / answered {}", got.status).into());
                }
                Ok::<_, BoxError>(c)
            });
            for c in futures_util::future::join_all(answered).await {
                held.push(c.map_err(|e| format!("idle connection {}: {e}", held.len()))?);
            }
        }
        println!("open {upto}");
        std::io::stdout().flush()?;
    }
    Ok(())
}

/// Each route answers what it should, on one connection.
async fn check(addr: SocketAddr, config: &quinn::ClientConfig) -> Result<(), BoxError> {
    let mut c = Conn::open(addr, config).await?;
    let got = exchange(&mut c.send, Method::GET, "/", None, true).await?;
    if got.status != StatusCode::OK || got.body != fibr_bench_peers::HELLO.as_bytes() {
        return Err(format!("GET / answered {} ({} bytes)", got.status, got.len).into());
    }
    let payload: Vec<u8> = (0..1024u32).map(|i| b'a' + (i % 26) as u8).collect();
    let body = Some(Bytes::from(payload.clone()));
    let got = exchange(&mut c.send, Method::POST, "/echo", body, true).await?;
    if got.status != StatusCode::OK || got.body != payload {
        return Err(format!("POST /echo answered {} ({} bytes)", got.status, got.len).into());
    }
    let got = exchange(&mut c.send, Method::GET, "/json", None, true).await?;
    let text = String::from_utf8_lossy(&got.body);
    if got.status != StatusCode::OK || !text.contains("\"message\":\"hello\"") {
        return Err(format!("GET /json answered {} {text:?}", got.status).into());
    }
    let n = 3 * fibr_bench_peers::BYTES_CHUNK + 5;
    let got = exchange(
        &mut c.send,
        Method::GET,
        &format!("/bytes/{n}"),
        None,
        false,
    )
    .await?;
    if got.status != StatusCode::OK || got.len != n {
        return Err(format!("GET /bytes/{n} answered {} ({} bytes)", got.status, got.len).into());
    }
    c.close().await;
    println!("ok");
    Ok(())
}
