//! CONNECT tunnel helpers (feature `tunnel` with `axum`): an axum app whose fallback
//! tunnels every CONNECT to the TCP origin it names (`fibr::http::tunnel`), and local
//! origins that echo, half-close first, or reset.

use axum::Router;
use fibr::http::tunnel::{self, UpgradeBody};
use http::{Request, Response, StatusCode};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The authority whose tunnel does not read for [`HOLD`], then counts what it reads and
/// answers the count: its peer must stop at the stream's window meanwhile.
pub const HOLD_AUTHORITY: &str = "hold.invalid:1";
pub const HOLD: Duration = Duration::from_secs(2);

fn status(code: StatusCode) -> Response<UpgradeBody> {
    let mut res = Response::new(UpgradeBody::default());
    *res.status_mut() = code;
    res
}

/// Tunnels a CONNECT to its target over TCP: `502` if the target refuses, the stream
/// reset (CONNECT_ERROR) if the target resets.
pub async fn connect_handler(mut req: Request<axum::body::Body>) -> Response<UpgradeBody> {
    let Ok(connect) = tunnel::accept(&mut req) else {
        return status(StatusCode::METHOD_NOT_ALLOWED);
    };
    let Some(target) = connect.authority().map(|a| a.to_string()) else {
        return status(StatusCode::BAD_REQUEST);
    };
    if target == HOLD_AUTHORITY {
        return connect.on_open(|mut t| async move {
            fibr::time::sleep(HOLD).await;
            let mut n = 0usize;
            let mut buf = vec![0u8; 16 * 1024];
            while let Ok(k @ 1..) = t.read(&mut buf).await {
                n += k;
            }
            let _ = t.write_all(n.to_string().as_bytes()).await;
        });
    }
    let origin = match fibr::net::TcpStream::connect(target.as_str()).await {
        Ok(s) => s,
        Err(_) => return status(StatusCode::BAD_GATEWAY),
    };
    connect.on_open(|mut t| async move {
        let mut origin = origin;
        if tokio::io::copy_bidirectional(&mut t, &mut origin)
            .await
            .is_err()
        {
            t.abort();
        }
    })
}

pub fn tunnel_app() -> Router {
    Router::new().fallback(connect_handler)
}

/// What the origins saw.
#[derive(Default)]
pub struct Seen {
    /// Bytes the half-closing origin read after its own half-close.
    pub after_half_close: Vec<u8>,
    /// Connections the echo origin saw end.
    pub echo_ended: usize,
}

/// Local TCP origins, each on its own port, each connection on its own thread.
pub struct Origins {
    /// Echoes; at the client's EOF, half-closes.
    pub echo: SocketAddr,
    /// Writes `bye`, half-closes at once, then keeps reading until EOF (into `seen`).
    pub greet: SocketAddr,
    /// Reads a little, then resets the connection (SO_LINGER 0).
    pub rst: SocketAddr,
    /// A port nothing listens on.
    pub closed: SocketAddr,
    pub seen: Arc<Mutex<Seen>>,
}

fn serve(f: impl Fn(TcpStream) + Send + Sync + 'static) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let f = Arc::new(f);
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let f = f.clone();
            std::thread::spawn(move || f(s));
        }
    });
    addr
}

impl Origins {
    pub fn start() -> Origins {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let s = seen.clone();
        let echo = serve(move |mut c| {
            let mut buf = [0u8; 16 * 1024];
            while let Ok(n @ 1..) = c.read(&mut buf) {
                if c.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            let _ = c.shutdown(std::net::Shutdown::Write);
            s.lock().unwrap().echo_ended += 1;
        });
        let s = seen.clone();
        let greet = serve(move |mut c| {
            let _ = c.write_all(b"bye");
            let _ = c.shutdown(std::net::Shutdown::Write);
            let mut rest = Vec::new();
            let _ = c.read_to_end(&mut rest);
            s.lock().unwrap().after_half_close.extend_from_slice(&rest);
        });
        let rst = serve(|mut c| {
            let mut buf = [0u8; 4];
            let _ = c.read(&mut buf);
            reset(c);
        });
        let closed = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        Origins {
            echo,
            greet,
            rst,
            closed,
            seen,
        }
    }

    /// The origins' ports, as the Python peers take them.
    pub fn args(&self) -> Vec<String> {
        [self.echo, self.greet, self.rst, self.closed]
            .iter()
            .map(|a| a.port().to_string())
            .collect()
    }
}

/// Closes `c` with a RST (SO_LINGER 0).
fn reset(c: TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket descriptor and a `linger` of the size passed.
    unsafe {
        libc::setsockopt(
            c.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(c);
}
