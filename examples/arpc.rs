//! arpc (Go's github.com/lesismal/arpc protocol) on fibr, both roles.
//!
//! ```sh
//! cargo run --release --example arpc --features arpc                 # serve on PORT (8888)
//! cargo run --release --example arpc --features arpc -- client ADDR  # run the checks
//! ```
//!
//! The server has the handlers of the Go interop peer's server (`arpc-peer server`):
//! `/echo` (the body back), `/sum` (JSON `{"a":int,"b":int}` to a JSON int),
//! `/notify-back` (notifies the caller's `/pushed` with the body, then answers "ok"),
//! `/slow` (200 ms, then the body back), `/error` (an error "boom: BODY"), `/call-back`
//! (calls the caller's `/client-echo` with the body and answers with its answer), `/note`
//! (keeps the body for the connection) and `/last-note` (the last `/note` body, or "").
//! So `arpc-peer client 127.0.0.1:8888` runs its checks against it.
//!
//! `client ADDR` runs fibr's client against a server that has them (this one, or
//! `arpc-peer server ADDR`), prints `PASS name` or `FAIL name: why` per check and exits
//! non-zero if one failed.

use bytes::Bytes;
use fibr::arpc::{Client, Context, Error, Json, Router, Server};
use fibr::{Binding, Config, Engine};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What `/note` kept on a connection.
#[derive(Clone)]
struct Note(Bytes);

async fn sum(ctx: Context) {
    match ctx.bind::<serde_json::Value>(&Json) {
        Ok(v) => match (v["a"].as_i64(), v["b"].as_i64()) {
            (Some(a), Some(b)) => ctx.reply_with(&Json, &(a + b)),
            _ => ctx.reply_error("want {\"a\":int,\"b\":int}"),
        },
        Err(e) => ctx.reply_error(e),
    }
}

async fn notify_back(ctx: Context) {
    match ctx.peer().notify("/pushed", ctx.body()) {
        Ok(()) => ctx.reply("ok"),
        Err(e) => ctx.reply_error(e),
    }
}

async fn call_back(ctx: Context) {
    let peer = ctx.peer().clone();
    match peer
        .call("/client-echo", ctx.body(), Duration::from_secs(2))
        .await
    {
        Ok(b) => ctx.reply(b),
        Err(e) => ctx.reply_error(e),
    }
}

/// The Go peer's server handlers.
pub fn server_router() -> Router {
    Router::new()
        .route("/echo", |ctx| async move { ctx.reply(ctx.body()) })
        .route("/sum", sum)
        .route("/notify-back", notify_back)
        .route("/slow", |ctx| async move {
            fibr::time::sleep(Duration::from_millis(200)).await;
            ctx.reply(ctx.body());
        })
        .route("/error", |ctx| async move {
            ctx.reply_error(format!("boom: {}", String::from_utf8_lossy(ctx.body())));
        })
        .route("/call-back", call_back)
        .route("/note", |ctx| async move {
            ctx.peer().insert(Note(ctx.body().clone()));
        })
        .route("/last-note", |ctx| async move {
            let note = ctx.peer().get::<Note>().map(|n| n.0).unwrap_or_default();
            ctx.reply(note);
        })
}

const TIMEOUT: Duration = Duration::from_secs(3);

/// The client's side: `/pushed` notifies are kept in `pushed`, `/client-echo` answers the
/// body back.
fn client_router(pushed: Arc<Mutex<Vec<Bytes>>>) -> Router {
    Router::new()
        .route("/pushed", move |ctx| {
            let pushed = pushed.clone();
            async move { pushed.lock().unwrap().push(ctx.body().clone()) }
        })
        .route("/client-echo", |ctx| async move { ctx.reply(ctx.body()) })
}

fn check(cond: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(why())
    }
}

async fn echo(client: &Client, body: Vec<u8>) -> Result<(), String> {
    let got = client
        .call("/echo", &body, TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    check(got[..] == body[..], || {
        format!("{} bytes back for {}", got.len(), body.len())
    })
}

async fn sum_json(client: &Client) -> Result<(), String> {
    for (a, b) in [(40i64, 2i64), (-7, 1_000_000)] {
        let req = serde_json::json!({"a": a, "b": b});
        let got: i64 = client
            .call_with(&Json, "/sum", &req, TIMEOUT)
            .await
            .map_err(|e| e.to_string())?;
        check(got == a + b, || format!("sum({a},{b}) = {got}"))?;
    }
    Ok(())
}

async fn notify_pushed(client: &Client, pushed: &Mutex<Vec<Bytes>>) -> Result<(), String> {
    let body = format!("push-{:?}", Instant::now());
    let got = client
        .call("/notify-back", &body, TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    check(&got[..] == b"ok", || format!("answer {got:?}"))?;
    let deadline = Instant::now() + Duration::from_secs(2);
    // Checked once more after the deadline: a late wake-up is not a missing notify.
    loop {
        if pushed
            .lock()
            .unwrap()
            .iter()
            .any(|p| p[..] == *body.as_bytes())
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err("no /pushed notify within 2 s".into());
        }
        fibr::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn expect_remote(client: &Client, method: &str, want: &str) -> Result<(), String> {
    match client.call(method, "x", TIMEOUT).await {
        Err(Error::Remote(t)) => check(t == want, || format!("error {t:?}, want {want:?}")),
        other => Err(format!("{other:?}, want the error {want:?}")),
    }
}

async fn timeout_then_late_reply(client: &Client) -> Result<(), String> {
    let start = Instant::now();
    let r = client.call("/slow", "slow", Duration::from_millis(1)).await;
    let took = start.elapsed();
    check(matches!(r, Err(Error::Timeout)), || {
        format!("{r:?}, want Timeout")
    })?;
    check(took < Duration::from_millis(150), || {
        format!("timeout took {took:?}")
    })?;
    // The answer comes 200 ms later to no call; the connection goes on.
    fibr::time::sleep(Duration::from_millis(300)).await;
    let got = client.call("/echo", "still-alive", TIMEOUT).await;
    check(matches!(&got, Ok(b) if &b[..] == b"still-alive"), || {
        format!("{got:?}")
    })
}

async fn async_calls(client: &Client, n: usize) -> Result<(), String> {
    let ok = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(Mutex::new(Vec::new()));
    for i in 0..n {
        let want = format!("async-{i:04}");
        let (ok, failed) = (ok.clone(), failed.clone());
        client
            .call_async(
                "/echo",
                want.clone(),
                Duration::from_secs(10),
                move |r| match r {
                    Ok(b) if b[..] == *want.as_bytes() => drop(ok.fetch_add(1, Ordering::Relaxed)),
                    other => failed.lock().unwrap().push(format!("call {i}: {other:?}")),
                },
            )
            .map_err(|e| e.to_string())?;
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    while ok.load(Ordering::Relaxed) + failed.lock().unwrap().len() < n {
        if Instant::now() > deadline {
            return Err(format!(
                "{}/{n} answered in 15 s",
                ok.load(Ordering::Relaxed)
            ));
        }
        fibr::time::sleep(Duration::from_millis(5)).await;
    }
    let failed = failed.lock().unwrap();
    check(failed.is_empty(), || {
        format!("{} failed, first: {}", failed.len(), failed[0])
    })
}

async fn client_notify(client: &Client) -> Result<(), String> {
    let token = format!("note-{:?}", Instant::now());
    client.notify("/note", &token).map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let last = client
            .call("/last-note", "", TIMEOUT)
            .await
            .map_err(|e| e.to_string())?;
        if last[..] == *token.as_bytes() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("last-note {last:?}, want {token:?}"));
        }
        fibr::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Runs every client check against the server at `addr`: each check's name and result.
pub async fn client_checks(addr: SocketAddr) -> Vec<(&'static str, Result<(), String>)> {
    let pushed = Arc::new(Mutex::new(Vec::new()));
    let client = match Client::connect(addr, client_router(pushed.clone())).await {
        Ok(c) => c,
        Err(e) => return vec![("connect", Err(e.to_string()))],
    };
    let pattern = |n: usize| (0..n).map(|i| (i * 7 + 3) as u8).collect::<Vec<u8>>();
    let results = vec![
        ("echo-empty", echo(&client, Vec::new()).await),
        ("echo-1KiB", echo(&client, pattern(1024)).await),
        ("echo-1MiB", echo(&client, pattern(1 << 20)).await),
        ("sum-json", sum_json(&client).await),
        ("notify-pushed", notify_pushed(&client, &pushed).await),
        ("server-calls-client", {
            let got = client.call("/call-back", "ping-back", TIMEOUT).await;
            check(matches!(&got, Ok(b) if &b[..] == b"ping-back"), || {
                format!("{got:?}")
            })
        }),
        (
            "error-reply",
            expect_remote(&client, "/error", "boom: x").await,
        ),
        (
            "method-not-found",
            expect_remote(&client, "/no-such-method", "method not found").await,
        ),
        (
            "timeout-1ms-late-reply-ignored",
            timeout_then_late_reply(&client).await,
        ),
        ("async-echo-1000", async_calls(&client, 1000).await),
        ("client-notify", client_notify(&client).await),
    ];
    client.stop();
    results
}

// pub: tests/arpc.rs runs it.
pub fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [mode, addr] = &args[..] {
        if mode == "client" {
            let addr: SocketAddr = addr.parse().map_err(std::io::Error::other)?;
            let results = fibr::run(client_checks(addr));
            let mut failed = 0;
            for (name, r) in results {
                match r {
                    Ok(()) => println!("PASS {name}"),
                    Err(why) => {
                        failed += 1;
                        println!("FAIL {name}: {why}");
                    }
                }
            }
            std::process::exit(if failed == 0 { 0 } else { 1 });
        }
    }
    let port: u16 = match std::env::var("PORT") {
        Ok(p) => p.parse().map_err(std::io::Error::other)?,
        Err(_) => 8888,
    };
    let server = Server::new(server_router());
    let engine = Engine::new(
        Config::default(),
        [Binding::tcp(("127.0.0.1", port), server)],
    )?;
    println!("READY {}", engine.binding_addrs(0)[0]);
    engine.run()
}
