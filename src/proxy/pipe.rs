//! A CONNECT tunnel taken in a handler (`fibr::http::tunnel`: HTTP/2's or HTTP/3's
//! stream, or an HTTP/1.1 connection the forwarding server switched) joined to its
//! target's TCP connection: bytes both ways on one task, each side's end passed on as a
//! half-close, a failed target resetting the tunnel (CONNECT_ERROR), and the relay's idle
//! timeout ending both.

use super::RelayConfig;
use crate::engine::net::TcpStream;
use crate::engine::time::Sleep;
use crate::http::tunnel::Tunnel;
use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

/// One direction's bytes in flight.
struct Half {
    buf: Box<[u8]>,
    at: usize,
    end: usize,
    /// The source ended and the sink was told.
    done: bool,
    /// Bytes written to the sink, for the idle clock.
    moved: u64,
}

impl Half {
    fn new(size: usize) -> Half {
        Half {
            buf: vec![0; size].into_boxed_slice(),
            at: 0,
            end: 0,
            done: false,
            moved: 0,
        }
    }
}

/// Why the pipe ended early.
enum Failed {
    Tunnel,
    Target,
    Idle,
}

/// Moves bytes both ways until both sides ended; a target that fails, or a tunnel idle
/// past `relay.idle_timeout`, resets the tunnel.
pub(crate) async fn pipe(mut tunnel: Tunnel, tcp: TcpStream, relay: &RelayConfig) {
    let size = relay.buffer.clamp(1024, 64 * 1024);
    let (mut up, mut down) = (Half::new(size), Half::new(size));
    let idle = relay.idle_timeout;
    let mut timer = idle.map(|t| Box::pin(crate::engine::time::sleep(t)));
    let ended = poll_fn(|cx| {
        let moved = (up.moved, down.moved);
        let a = copy(cx, TunnelEnd(&mut tunnel), TargetEnd(&tcp), &mut up);
        let b = copy(cx, TargetEnd(&tcp), TunnelEnd(&mut tunnel), &mut down);
        match (a, b) {
            (Poll::Ready(Err(f)), _) | (_, Poll::Ready(Err(f))) => return Poll::Ready(Err(f)),
            (Poll::Ready(Ok(())), Poll::Ready(Ok(()))) => return Poll::Ready(Ok(())),
            _ => {}
        }
        let (Some(t), Some(idle)) = (timer.as_mut(), idle) else {
            return Poll::Pending;
        };
        if moved != (up.moved, down.moved) {
            t.as_mut().reset(Instant::now() + idle);
        }
        idle_expired(t.as_mut(), cx)
    })
    .await;
    if let Err(Failed::Target | Failed::Idle) = ended {
        tunnel.abort();
    }
}

fn idle_expired(t: Pin<&mut Sleep>, cx: &mut Context<'_>) -> Poll<Result<(), Failed>> {
    t.poll(cx).map(|()| Err(Failed::Idle))
}

/// One end of the pipe as [`copy`] reads from it or writes to it.
trait End {
    fn read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<Result<usize, Failed>>;
    fn write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<Result<usize, Failed>>;
    /// The other side ended: ours ends too (a half-close).
    fn shutdown(&mut self, cx: &mut Context<'_>);
}

/// The handler's tunnel (the client's stream).
struct TunnelEnd<'a>(&'a mut Tunnel);

impl End for TunnelEnd<'_> {
    fn read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<Result<usize, Failed>> {
        self.0.poll_read(cx, buf).map_err(|_| Failed::Tunnel)
    }
    fn write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<Result<usize, Failed>> {
        self.0.poll_write(cx, buf).map_err(|_| Failed::Tunnel)
    }
    fn shutdown(&mut self, _cx: &mut Context<'_>) {
        let _ = self.0.poll_shutdown();
    }
}

/// The target's TCP connection.
struct TargetEnd<'a>(&'a TcpStream);

impl End for TargetEnd<'_> {
    fn read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<Result<usize, Failed>> {
        self.0.poll_read(cx, buf).map_err(target_failed)
    }
    fn write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<Result<usize, Failed>> {
        self.0.poll_write(cx, buf).map_err(target_failed)
    }
    fn shutdown(&mut self, cx: &mut Context<'_>) {
        let _ = self.0.poll_shutdown(cx);
    }
}

/// Moves `h`'s direction from `from` to `to` until `from` ends (then `to` is shut down)
/// or either side waits.
fn copy(
    cx: &mut Context<'_>,
    mut from: impl End,
    mut to: impl End,
    h: &mut Half,
) -> Poll<Result<(), Failed>> {
    while !h.done {
        if h.at == h.end {
            match from.read(cx, &mut h.buf) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(f)) => return Poll::Ready(Err(f)),
                Poll::Ready(Ok(0)) => {
                    h.done = true;
                    to.shutdown(cx);
                    break;
                }
                Poll::Ready(Ok(n)) => (h.at, h.end) = (0, n),
            }
        }
        match to.write(cx, &h.buf[h.at..h.end]) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Err(f)) => return Poll::Ready(Err(f)),
            Poll::Ready(Ok(n)) => {
                h.at += n;
                h.moved += n as u64;
            }
        }
    }
    Poll::Ready(Ok(()))
}

fn target_failed(e: io::Error) -> Failed {
    tracing::debug!(error = %e, "a tunnel's target failed");
    Failed::Target
}
