//! The gRPC scenario (issue 13): unary calls of the gRPC example's `fibr.example.Echo`
//! (`examples/grpc/echo.rs`), served by `fibr::serve` (`bench_server fibr` with
//! `BENCH_GRPC=1`) and by tonic's own server (`benches/peers`' `tonic_grpc`).
//!
//! The load is h2load (`compare/h2.rs`'s phase, checked as strictly) posting one
//! length-prefixed gRPC message from a file with `content-type: application/grpc` and
//! `te: trailers` to `Unary`. h2load counts HTTP statuses only, and gRPC answers its
//! errors with 200 too, so two more checks: h2load's DATA byte count must be one echoed
//! message per request it counted (a failed call is a trailers-only response, with no
//! DATA), and before and after every phase a probe with hyper's HTTP/2 client (an
//! implementation independent of both servers) calls `Unary`, which must echo the
//! message with `grpc-status: 0` in the trailers, and an unknown method, which must
//! answer `grpc-status: 12` (UNIMPLEMENTED): the probe reads the status for real.

use std::net::SocketAddr;
use std::path::Path;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

use crate::load::TempFile;
use crate::IO_TIMEOUT;

/// The unary method's path (`echo::UNARY` in `examples/grpc/echo.rs`).
pub const PATH: &str = "/fibr.example.Echo/Unary";
/// The message every call sends, and gets back.
pub const MESSAGE: &[u8] = &[b'x'; 64];

/// `MESSAGE` as gRPC frames it: not compressed, its length (u32, big-endian), itself.
fn framed() -> Vec<u8> {
    let mut m = vec![0];
    m.extend_from_slice(&(MESSAGE.len() as u32).to_be_bytes());
    m.extend_from_slice(MESSAGE);
    m
}

/// The framed message in a file for h2load's `-d`.
pub fn write_message() -> Result<TempFile, String> {
    let f = TempFile::new("grpc.msg");
    std::fs::write(&f.0, framed()).map_err(|e| format!("writing {}: {e}", f.0.display()))?;
    Ok(f)
}

/// h2load's arguments for a gRPC call posting `message`.
pub fn h2load_args(message: &Path) -> Vec<String> {
    vec![
        "-d".into(),
        message.display().to_string(),
        "-H".into(),
        "content-type: application/grpc".into(),
        "-H".into(),
        "te: trailers".into(),
    ]
}

/// h2load's DATA bytes (its `traffic:` line) are one echoed message for each of the `ok`
/// requests it counted, give or take the `in_flight` it left unfinished at the end.
pub fn check_traffic(text: &str, ok: u64, in_flight: u64) -> Result<(), String> {
    // "traffic: 196.24KB (200950) total, 6.20KB (6350) headers (...), 134.77KB (138000) data"
    let data: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("traffic: "))
        .and_then(|l| l.split(',').find(|p| p.trim_end().ends_with(" data")))
        .and_then(|p| p.split_once('(')?.1.split_once(')')?.0.parse().ok())
        .ok_or_else(|| format!("no DATA byte count in h2load's output:\n{text}"))?;
    let each = framed().len() as u64;
    if data < ok * each || data > (ok + in_flight) * each {
        return Err(format!(
            "h2load received {data} DATA bytes for {ok} calls of {each} bytes each: some \
             calls were not answered with their message"
        ));
    }
    Ok(())
}

/// The probe: `Unary` echoes the message with `grpc-status: 0`, an unknown method gets
/// `grpc-status: 12`.
pub fn probe(addr: SocketAddr) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("gRPC probe: a runtime: {e}"))?;
    rt.block_on(async {
        tokio::time::timeout(IO_TIMEOUT, async {
            let (body, status) = call(addr, PATH).await?;
            if status != "0" || body != framed() {
                return Err(format!(
                    "{PATH} answered grpc-status {status:?} with {body:02x?}"
                ));
            }
            let unknown = "/fibr.example.Echo/Nope";
            let (_, status) = call(addr, unknown).await?;
            if status != "12" {
                return Err(format!("{unknown} answered grpc-status {status:?}, not 12"));
            }
            Ok(())
        })
        .await
        .map_err(|_| "timed out".to_string())?
    })
    .map_err(|e| format!("gRPC probe: {e}"))
}

/// One call on a connection of its own: (the response body, `grpc-status` from the
/// trailers, or from the head of a trailers-only response).
async fn call(addr: SocketAddr, path: &str) -> Result<(Vec<u8>, String), String> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
    tokio::spawn(conn);
    let req = http::Request::post(format!("http://{addr}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Full::new(Bytes::from(framed())))
        .map_err(|e| e.to_string())?;
    let resp = send
        .send_request(req)
        .await
        .map_err(|e| format!("{path}: {e}"))?;
    let (head, body) = resp.into_parts();
    let content_type = head.headers.get("content-type").map(|v| v.as_bytes());
    if head.status != 200 || !content_type.is_some_and(|c| c.starts_with(b"application/grpc")) {
        return Err(format!("{path} answered {} {content_type:?}", head.status));
    }
    let all = body
        .collect()
        .await
        .map_err(|e| format!("{path}: body: {e}"))?;
    let status = all
        .trailers()
        .and_then(|t| t.get("grpc-status"))
        .or_else(|| head.headers.get("grpc-status"))
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| format!("{path} answered without grpc-status"))?
        .to_string();
    Ok((all.to_bytes().to_vec(), status))
}
