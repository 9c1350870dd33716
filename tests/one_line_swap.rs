//! The README's promise: an axum app written for `axum::serve` runs on `fibr::serve` with
//! that one line changed and fibr at its default features. The app uses tokio (its timers,
//! `spawn`, `fs`, tower-http's `ServeDir`), `ConnectInfo<SocketAddr>` and axum's own
//! `WebSocketUpgrade`, on the listener it would give axum (tokio's), and the engine's
//! settings (workers) are set from `serve` itself. CI also runs this file with default
//! features off (`--no-default-features --features axum`), where a handler that needs
//! tokio must name the missing feature in the log.

mod common;

use axum::routing::get;
use axum::Router;
use common::Client;
use std::time::Duration;

/// With default features (tokio on).
#[cfg(feature = "tokio")]
mod default_features {
    use super::*;
    use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
    use axum::extract::ConnectInfo;
    use common::TempPath;
    use std::future::IntoFuture;
    use std::net::SocketAddr;

    /// The app as it would be written for `axum::serve`.
    fn app(dir: &std::path::Path, file: &std::path::Path) -> Router {
        let file = file.to_path_buf();
        Router::new()
            .route(
                "/sleep",
                get(|| async {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    "slept"
                }),
            )
            .route(
                "/spawn",
                get(|| async { tokio::spawn(async { 6 * 7 }).await.unwrap().to_string() }),
            )
            .route(
                "/fs",
                get(move || async move { tokio::fs::read_to_string(&file).await.unwrap() }),
            )
            .route(
                "/ip",
                get(|ConnectInfo(addr): ConnectInfo<SocketAddr>| async move { addr.to_string() }),
            )
            .route("/thread", get(|| async { thread_name() }))
            .route(
                "/ws",
                get(|ws: WebSocketUpgrade| async { ws.on_upgrade(echo) }),
            )
            .nest_service("/static", tower_http::services::ServeDir::new(dir))
    }

    fn thread_name() -> String {
        std::thread::current().name().unwrap_or("").to_string()
    }

    /// axum's WebSocket echo.
    async fn echo(mut socket: WebSocket) {
        while let Some(Ok(msg)) = socket.recv().await {
            if matches!(msg, Message::Close(_)) || socket.send(msg).await.is_err() {
                return;
            }
        }
    }

    /// A file for `/fs` and a directory for `ServeDir`, removed when dropped.
    struct Files {
        dir: std::path::PathBuf,
        file: TempPath,
    }

    impl Files {
        fn new() -> Files {
            let file = TempPath::new("swap", "txt");
            std::fs::write(&file, "read by tokio::fs").unwrap();
            // One directory per test: the tests run at once, and each removes its own.
            static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!("fibr-swap-{}-{n}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("index.html"), "<h1>static</h1>").unwrap();
            Files { dir, file }
        }
    }

    impl Drop for Files {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// `#[tokio::main]`, with `axum::serve` swapped for `fibr::serve` and nothing else.
    #[test]
    fn an_axum_app_that_uses_tokio_runs_with_default_features() {
        let files = Files::new();
        let app = app(&files.dir, &files.file);
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            tokio::runtime::Runtime::new()
                .unwrap()
                .block_on(async move {
                    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                    addr_tx.send(listener.local_addr().unwrap()).unwrap();
                    let app = app.into_make_service_with_connect_info::<SocketAddr>();
                    fibr::serve(listener, app).await.unwrap(); // was: axum::serve(listener, app)
                })
        });
        let addr = addr_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        let mut c = Client::connect(addr);
        for (path, want) in [
            ("/sleep", "slept".to_string()),
            ("/spawn", "42".to_string()),
            ("/fs", "read by tokio::fs".to_string()),
            ("/static/index.html", "<h1>static</h1>".to_string()),
            ("/ip", c.s.local_addr().unwrap().to_string()),
        ] {
            let r = c.get(path);
            assert_eq!((r.status, r.text()), (200, want), "{path}");
        }
        // The handlers ran on fibr's workers, not tokio's.
        assert!(c.get("/thread").text().starts_with("fibr"));
        // axum's own WebSocketUpgrade.
        let url = format!("ws://{addr}/ws");
        let (mut ws, _) = tungstenite::connect(url).unwrap();
        ws.send(tungstenite::Message::text("over axum's upgrade"))
            .unwrap();
        assert_eq!(
            ws.read().unwrap().into_text().unwrap(),
            "over axum's upgrade"
        );
    }

    /// A std listener, and the engine's settings (here the workers and their name) from
    /// `serve` in one call.
    #[test]
    fn std_listener_with_engine_config() {
        let files = Files::new();
        let app = app(&files.dir, &files.file);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        // tokio's oneshot needs no tokio runtime to be awaited.
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = std::thread::spawn(move || {
            fibr::run(
                fibr::serve(
                    listener,
                    app.into_make_service_with_connect_info::<SocketAddr>(),
                )
                .with_engine_config(
                    fibr::Config::default()
                        .with_workers(2)
                        .with_thread_name("swap-engine".to_string()),
                )
                .with_graceful_shutdown(async move {
                    let _ = stop_rx.await;
                })
                .into_future(),
            )
        });
        let mut c = Client::connect(addr);
        assert!(c.get("/thread").text().starts_with("swap-engine"));
        assert_eq!(c.get("/sleep").text(), "slept");
        drop(c);
        stop_tx.send(()).unwrap();
        server.join().unwrap().unwrap();
        // The server's own runtime stopped with it: its threads are gone.
        assert!(common::wait_until(Duration::from_secs(5), || {
            !common::thread_names()
                .iter()
                .any(|n| n.starts_with("swap-engine"))
        }));
    }

    /// axum's `unix-domain-socket` example on fibr: tokio's `UnixListener`, and connect info
    /// with the client's address and credentials, whose `Connected` impl names fibr's
    /// `ConnInfo` (axum's `IncomingStream` can only be made by axum).
    #[test]
    fn unix_domain_socket_with_peer_credentials() {
        use axum::extract::connect_info::Connected;

        #[derive(Clone, Debug)]
        struct UdsConnectInfo {
            peer_addr: std::sync::Arc<std::os::unix::net::SocketAddr>,
            peer_cred: fibr::http::PeerCred,
        }

        impl Connected<fibr::http::ConnInfo> for UdsConnectInfo {
            fn connect_info(info: fibr::http::ConnInfo) -> Self {
                let unix = info.unix.expect("a Unix peer");
                UdsConnectInfo {
                    peer_addr: unix.addr.expect("its address"),
                    peer_cred: unix.cred.expect("its credentials"),
                }
            }
        }

        let path = TempPath::sock("swap-uds");
        let app = Router::new().route(
            "/",
            get(
                |ConnectInfo(info): ConnectInfo<UdsConnectInfo>| async move {
                    let cred = info.peer_cred;
                    format!(
                        "pid {} uid {} gid {} unnamed {}",
                        cred.pid.unwrap(),
                        cred.uid,
                        cred.gid,
                        info.peer_addr.is_unnamed()
                    )
                },
            ),
        );
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let sock = path.path().to_path_buf();
        std::thread::spawn(move || {
            tokio::runtime::Runtime::new()
                .unwrap()
                .block_on(async move {
                    let listener = tokio::net::UnixListener::bind(&sock).unwrap();
                    ready_tx.send(()).unwrap();
                    let app = app.into_make_service_with_connect_info::<UdsConnectInfo>();
                    fibr::serve(listener, app).await.unwrap();
                })
        });
        ready_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        let s = std::os::unix::net::UnixStream::connect(path.path()).unwrap();
        s.set_read_timeout(Some(common::IO_TIMEOUT)).unwrap();
        let mut c = Client::over(s);
        let r = c.get("/");
        // SAFETY: getuid and getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        assert_eq!(
            (r.status, r.text()),
            (
                200,
                format!(
                    "pid {} uid {uid} gid {gid} unnamed true",
                    std::process::id()
                )
            )
        );
    }
}

/// Without fibr's `tokio` feature, a handler that uses tokio answers 500, and the log says
/// which feature it needs.
#[cfg(not(feature = "tokio"))]
#[test]
fn a_handler_that_needs_tokio_names_the_feature_in_the_log() {
    use std::sync::{Arc, Mutex};

    /// Collects what the log says.
    #[derive(Clone, Default)]
    struct Log(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Log {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let log = Log::default();
    let writer = log.clone();
    tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .init();
    let app = Router::new().route(
        "/sleep",
        get(|| async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            "slept"
        }),
    );
    let addr = common::start(app, fibr::http::ServerConfig::default());
    let r = Client::connect(addr).get("/sleep");
    assert_eq!(r.status, 500);
    let said = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert!(said.contains("without its `tokio` feature"), "{said}");
}
