//! A CONNECT tunnel taken in a handler (`fibr::http::tunnel`: HTTP/2's or HTTP/3's
//! stream, or an HTTP/1.1 connection the forwarding server switched) joined to its
//! target's TCP connection: bytes both ways on one task, each side's end passed on as a
//! half-close, a failed target resetting the tunnel (CONNECT_ERROR).

use crate::engine::net::TcpStream;
use crate::http::tunnel::Tunnel;
use std::future::poll_fn;
use std::io;
use std::task::{Context, Poll};

/// One direction's bytes in flight.
struct Half {
    buf: Box<[u8]>,
    at: usize,
    end: usize,
    /// The source ended and the sink was told.
    done: bool,
}

impl Half {
    fn new(size: usize) -> Half {
        Half {
            buf: vec![0; size].into_boxed_slice(),
            at: 0,
            end: 0,
            done: false,
        }
    }
}

/// Which side failed.
enum Failed {
    Tunnel,
    Target,
}

/// Moves bytes both ways until both sides ended; a target that fails resets the tunnel.
pub(crate) async fn pipe(mut tunnel: Tunnel, tcp: TcpStream, buffer: usize) {
    let mut up = Half::new(buffer.clamp(1024, 64 * 1024));
    let mut down = Half::new(buffer.clamp(1024, 64 * 1024));
    let ended = poll_fn(|cx| {
        let a = to_target(cx, &mut tunnel, &tcp, &mut up);
        let b = to_tunnel(cx, &mut tunnel, &tcp, &mut down);
        match (a, b) {
            (Poll::Ready(Err(f)), _) | (_, Poll::Ready(Err(f))) => Poll::Ready(Err(f)),
            (Poll::Ready(Ok(())), Poll::Ready(Ok(()))) => Poll::Ready(Ok(())),
            _ => Poll::Pending,
        }
    })
    .await;
    if let Err(Failed::Target) = ended {
        tunnel.abort();
    }
}

fn to_target(
    cx: &mut Context<'_>,
    tunnel: &mut Tunnel,
    tcp: &TcpStream,
    h: &mut Half,
) -> Poll<Result<(), Failed>> {
    while !h.done {
        if h.at == h.end {
            match tunnel.poll_read(cx, &mut h.buf) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(_)) => return Poll::Ready(Err(Failed::Tunnel)),
                Poll::Ready(Ok(0)) => {
                    h.done = true;
                    let _ = tcp.poll_shutdown(cx);
                    break;
                }
                Poll::Ready(Ok(n)) => (h.at, h.end) = (0, n),
            }
        }
        match tcp.poll_write(cx, &h.buf[h.at..h.end]) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Err(_)) => return Poll::Ready(Err(Failed::Target)),
            Poll::Ready(Ok(n)) => h.at += n,
        }
    }
    Poll::Ready(Ok(()))
}

fn to_tunnel(
    cx: &mut Context<'_>,
    tunnel: &mut Tunnel,
    tcp: &TcpStream,
    h: &mut Half,
) -> Poll<Result<(), Failed>> {
    while !h.done {
        if h.at == h.end {
            match tcp.poll_read(cx, &mut h.buf) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(target_failed(e))),
                Poll::Ready(Ok(0)) => {
                    h.done = true;
                    let _ = tunnel.poll_shutdown();
                    break;
                }
                Poll::Ready(Ok(n)) => (h.at, h.end) = (0, n),
            }
        }
        match tunnel.poll_write(cx, &h.buf[h.at..h.end]) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Err(_)) => return Poll::Ready(Err(Failed::Tunnel)),
            Poll::Ready(Ok(n)) => h.at += n,
        }
    }
    Poll::Ready(Ok(()))
}

fn target_failed(e: io::Error) -> Failed {
    tracing::debug!(error = %e, "a tunnel's target failed");
    Failed::Target
}
