//! permessage-deflate's cost per message, to choose flate2's backend and level
//! (`src/ws/proto/deflate.rs` says what was chosen and why).
//!
//! `cargo bench --bench ws_deflate --features ws` measures the backend in Cargo.toml
//! (zlib-rs); `--features ws,flate2/zlib` or `ws,flate2/zlib-ng` switch flate2 to a C zlib
//! (flate2 prefers those over zlib-rs). Pin it: `taskset -c 1 cargo bench ...`.
//! (The table in deflate.rs ran this file as a lone crate on flate2 with each backend's
//! feature; for miniz_oxide, which has no window bits, without the block marked for them.)
//!
//! It drives flate2 directly, the way `PerMessageDeflate` does (raw deflate, a sync flush
//! per message, the 00 00 ff ff tail cut and put back), with three messages: 64 B and
//! 1 KiB of JSON-ish text, and 16 KiB of it. "fresh" is no context takeover (a state made and
//! dropped per message, as fibr does by default), "kept" is context takeover (one state for
//! the run, each message a little different from the last). A counting allocator measures the
//! zlib state (flate2 gives every backend Rust's allocator).

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const TAIL: [u8; 4] = [0, 0, 0xff, 0xff];

/// JSON-ish text of about `len` bytes; `seed` changes the numbers, as consecutive messages do.
fn message(len: usize, seed: u64) -> Vec<u8> {
    let mut s = String::from("[");
    let mut i = seed;
    while s.len() < len {
        i = i
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s.push_str(&format!(
            r#"{{"id":{},"user":"u{}","event":"{}","price":{}.{:02},"ok":{}}},"#,
            i % 100_000,
            (i >> 20) % 5000,
            ["click", "view", "buy", "scroll"][(i >> 40) as usize % 4],
            (i >> 24) % 1000,
            (i >> 8) % 100,
            i & 1 == 0
        ));
    }
    s.truncate(len);
    s.into_bytes()
}

fn deflate(c: &mut Compress, mut input: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(input.len() + input.len() / 1024 + 64);
    loop {
        if out.len() == out.capacity() {
            out.reserve(64 + input.len());
        }
        let before = c.total_in();
        c.compress_vec(input, out, FlushCompress::Sync).unwrap();
        input = &input[(c.total_in() - before) as usize..];
        if input.is_empty() && out.len() < out.capacity() {
            break;
        }
    }
    assert!(out.ends_with(&TAIL));
    out.truncate(out.len() - 4);
}

fn inflate(d: &mut Decompress, input: &[u8], out: &mut Vec<u8>) {
    out.clear();
    for part in [input, &TAIL[..]] {
        let mut part = part;
        loop {
            if out.capacity() - out.len() < 1024 {
                out.reserve(16 * 1024);
            }
            let before = d.total_in();
            d.decompress_vec(part, out, FlushDecompress::Sync).unwrap();
            part = &part[(d.total_in() - before) as usize..];
            if part.is_empty() && out.len() < out.capacity() {
                break;
            }
        }
    }
}

/// Nanoseconds per call of `f`, from the best of five runs of about 60 ms.
fn time(mut f: impl FnMut()) -> f64 {
    let mut n = 1u64;
    loop {
        let t = Instant::now();
        for _ in 0..n {
            f();
        }
        if t.elapsed() > Duration::from_millis(60) {
            break;
        }
        n *= 2;
    }
    (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// Bytes the allocator holds for what `make` returns, after it ran one message.
fn state_bytes<T>(make: impl FnOnce() -> T, run: impl FnOnce(&mut T)) -> usize {
    let before = LIVE.load(Ordering::Relaxed);
    let mut t = make();
    run(&mut t);
    let held = LIVE.load(Ordering::Relaxed) - before;
    drop(t);
    held
}

#[path = "support/skip.rs"]
mod skip;

fn main() {
    if skip::skip_unless_benchmarking() {
        return;
    }
    // Messages that differ a little, and their compressed forms from one kept state.
    let sizes = [64usize, 1024, 16 * 1024];
    println!("level size  | ratio fresh | deflate fresh  kept | inflate fresh  kept  (ns/message)");
    for level in [1u32, 3, 6] {
        for &len in &sizes {
            let msgs: Vec<Vec<u8>> = (0..8).map(|s| message(len, s)).collect();
            let mut out = Vec::new();
            let mut back = Vec::new();
            let fresh: Vec<Vec<u8>> = msgs
                .iter()
                .map(|m| {
                    let mut c = Compress::new(Compression::new(level), false);
                    deflate(&mut c, m, &mut out);
                    out.clone()
                })
                .collect();
            let mut kc = Compress::new(Compression::new(level), false);
            let kept: Vec<Vec<u8>> = msgs
                .iter()
                .cycle()
                .take(64)
                .map(|m| {
                    deflate(&mut kc, m, &mut out);
                    out.clone()
                })
                .collect();
            let ratio = fresh.iter().map(Vec::len).sum::<usize>() as f64 / (len * 8) as f64;
            let mut i = 0;
            let deflate_fresh = time(|| {
                i = (i + 1) % 8;
                let mut c = Compress::new(Compression::new(level), false);
                deflate(&mut c, black_box(&msgs[i]), &mut out);
            });
            let deflate_kept = time(|| {
                i = (i + 1) % 8;
                deflate(&mut kc, black_box(&msgs[i]), &mut out);
            });
            let inflate_fresh = time(|| {
                i = (i + 1) % 8;
                let mut d = Decompress::new(false);
                inflate(&mut d, black_box(&fresh[i]), &mut back);
            });
            // The kept stream must be read in order, from its start, by one state.
            let mut kd = Decompress::new(false);
            let mut k = 0;
            let inflate_kept = time(|| {
                if k == kept.len() {
                    kd = Decompress::new(false);
                    k = 0;
                }
                inflate(&mut kd, black_box(&kept[k]), &mut back);
                k += 1;
            });
            println!(
                "{level:5} {len:5} | {ratio:11.3} | {deflate_fresh:13.0} {deflate_kept:5.0} | {inflate_fresh:13.0} {inflate_kept:5.0}"
            );
        }
    }
    let msg = message(16 * 1024, 1);
    let mut out = Vec::with_capacity(32 * 1024);
    let compressed = {
        let mut c = Compress::new(Compression::new(1), false);
        deflate(&mut c, &msg, &mut out);
        out.clone()
    };
    let mut back = Vec::with_capacity(32 * 1024);
    println!(
        "state setup alone: deflate {:.0} ns, inflate {:.0} ns (level 1, 15 bits)",
        time(|| drop(black_box(Compress::new(Compression::new(1), false)))),
        time(|| drop(black_box(Decompress::new(false))))
    );
    // BEGIN window bits (needs a zlib API backend: not miniz_oxide)
    for bits in [9u8, 12, 15] {
        let deflate_bytes = state_bytes(
            || Compress::new_with_window_bits(Compression::new(1), false, bits),
            |c| deflate(c, &msg, &mut out),
        );
        let inflate_bytes = state_bytes(
            || Decompress::new_with_window_bits(false, bits),
            |d| inflate(d, &compressed, &mut back),
        );
        println!("state after a 16 KiB message, {bits} bits: deflate {deflate_bytes} B, inflate {inflate_bytes} B");
    }
    // END window bits
    let deflate_bytes = state_bytes(
        || Compress::new(Compression::new(1), false),
        |c| deflate(c, &msg, &mut out),
    );
    let inflate_bytes = state_bytes(
        || Decompress::new(false),
        |d| inflate(d, &compressed, &mut back),
    );
    println!("state after a 16 KiB message, default (15) bits: deflate {deflate_bytes} B, inflate {inflate_bytes} B");
}
