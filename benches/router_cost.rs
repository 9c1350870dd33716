//! What the compare bench's axum `Router` costs per request on its own, with no server:
//! `cargo bench --bench router_cost --features axum` (pin it: `taskset -c 1 cargo bench ...`).
//!
//! Every server column in `compare` that serves the `Router` (fibr, axum::serve) pays this
//! cost; actix-web pays its own router's and hyper's column pays none (routes matched by
//! hand). It bounds how close to actix-web a server of the `Router` can get (issue 31).
//!
//! Each iteration builds `GET /` the way fibr's HTTP/1 driver does (one copy of the head,
//! the URI and three header values slices of it), calls the service, polls its future and
//! the response body to the end and drops everything. Two services take the same requests:
//! the `Router` of `examples/common/bench_routes.rs` and a bare `service_fn` answering
//! `hello` with a content type, the least any tower service does. Their difference is the
//! Router's own cost: routing, extractors, its boxed futures and bodies, the extensions it
//! inserts. Figures: nanoseconds and heap allocations per request (median of the runs).

#[path = "support/skip.rs"]
mod skip;

#[path = "../examples/common/bench_routes.rs"]
#[allow(dead_code)]
mod bench_routes;

use axum::body::Body;
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE, HOST, USER_AGENT};
use http::{HeaderMap, Method, Request, Response, Uri, Version};
use http_body::Body as _;
use std::alloc::{GlobalAlloc, Layout, System};
use std::convert::Infallible;
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Instant;
use tower::Service;

/// Counts allocations, so the figures say how many a request costs.
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above, i.e. from the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as in `dealloc`; the caller's contract is the system allocator's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const HEAD: &[u8] = b"GET / HTTP/1.1\r\nhost: 127.0.0.1:8080\r\nuser-agent: h2load nghttp2/1.52.0\r\naccept: */*\r\n\r\n";
/// Requests per run; `--iterations N` sets another (a run under callgrind wants few).
const ITERATIONS: u64 = 1_000_000;
const RUNS: usize = 7;

/// Where [`HEAD`]'s target and header values are: (start, end).
const TARGET: (usize, usize) = (4, 5);
const VALUES: [(HeaderName, (usize, usize)); 3] =
    [(HOST, (22, 36)), (USER_AGENT, (50, 71)), (ACCEPT, (81, 84))];

/// `GET /` as fibr's HTTP/1 parser builds it: one copy of the head, slices of it.
fn request() -> Request<Body> {
    let shared = Bytes::copy_from_slice(HEAD);
    let mut headers = HeaderMap::with_capacity(VALUES.len());
    for (name, (start, end)) in VALUES {
        let value = HeaderValue::from_maybe_shared(shared.slice(start..end)).unwrap();
        headers.append(name, value);
    }
    let mut req = Request::new(Body::empty());
    *req.method_mut() = Method::GET;
    *req.uri_mut() = Uri::from_maybe_shared(shared.slice(TARGET.0..TARGET.1)).unwrap();
    *req.version_mut() = Version::HTTP_11;
    *req.headers_mut() = headers;
    req
}

/// One request through `svc`, its response body read to the end: the bytes read.
fn once<S>(svc: &mut S, cx: &mut Context<'_>) -> usize
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
{
    assert!(svc.poll_ready(cx).is_ready());
    let mut fut = pin!(svc.call(request()));
    let Poll::Ready(Ok(resp)) = fut.as_mut().poll(cx) else {
        panic!("the service did not answer at once");
    };
    assert_eq!(resp.status(), 200);
    let mut body = pin!(resp.into_body());
    let mut n = 0;
    while let Poll::Ready(Some(frame)) = body.as_mut().poll_frame(cx) {
        n += frame.unwrap().into_data().map_or(0, |d| d.len());
    }
    n
}

/// Median nanoseconds and allocations per request of `svc`.
fn measure<S>(mut svc: S, iterations: u64) -> (f64, f64)
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
{
    let mut cx = Context::from_waker(Waker::noop());
    let req = request();
    assert_eq!(req.uri(), "/");
    assert_eq!(req.headers()[HOST], "127.0.0.1:8080");
    assert_eq!(req.headers()[USER_AGENT], "h2load nghttp2/1.52.0");
    assert_eq!(req.headers()[ACCEPT], "*/*");
    assert_eq!(once(&mut svc, &mut cx), 5);
    let mut runs: Vec<(f64, f64)> = (0..RUNS)
        .map(|_| {
            let allocs = ALLOCS.load(Ordering::Relaxed);
            let start = Instant::now();
            for _ in 0..iterations {
                black_box(once(&mut svc, &mut cx));
            }
            let ns = start.elapsed().as_nanos() as f64 / iterations as f64;
            let per = (ALLOCS.load(Ordering::Relaxed) - allocs) as f64 / iterations as f64;
            (ns, per)
        })
        .collect();
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    runs[RUNS / 2]
}

fn main() {
    if skip::skip_unless_benchmarking() {
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    let iterations = match args.iter().position(|a| a == "--iterations") {
        Some(i) => args[i + 1].parse().expect("--iterations N"),
        None => ITERATIONS,
    };
    let bare = tower::service_fn(|_req: Request<Body>| async {
        let mut resp = Response::new(Body::from("hello"));
        resp.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        Ok::<_, Infallible>(resp)
    });
    // `--only bare|router`: one service (for callgrind, which counts each on its own).
    let only = args
        .iter()
        .position(|a| a == "--only")
        .map(|i| args[i + 1].as_str());
    let (bare_ns, bare_allocs) = match only {
        Some("router") => (0.0, 0.0),
        _ => measure(bare, iterations),
    };
    let (router_ns, router_allocs) = match only {
        Some("bare") => (0.0, 0.0),
        _ => measure(bench_routes::http_routes(), iterations),
    };
    println!("| service | ns/request | allocations/request |");
    println!("|---|---:|---:|");
    println!("| bare `service_fn` | {bare_ns:.1} | {bare_allocs:.1} |");
    println!("| axum `Router` (compare's routes) | {router_ns:.1} | {router_allocs:.1} |");
    println!(
        "| the Router's own cost | {:.1} | {:.1} |",
        router_ns - bare_ns,
        router_allocs - bare_allocs
    );
}
