//! The client: one connection to a server, dialed on fibr's loops, serving its own
//! [`Router`] for the server's calls, and dialed again with backoff when it is lost.

use super::codec::Codec;
use super::driver::{Driver, Hooks};
use super::error::Error;
use super::peer::{Peer, Reply};
use super::router::Router;
use super::Config;
use crate::engine::conn::Conn;
use crate::engine::runtime::Runtime;
use crate::engine::time::{sleep, timeout};
use futures_channel::oneshot;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// Where the client's connection is.
enum State {
    /// Connected: calls go to this peer.
    Up(Peer),
    /// Lost and being dialed again.
    Down,
    /// Stopped, or out of reconnect attempts.
    Stopped,
}

struct Inner {
    addr: SocketAddr,
    router: Arc<Router>,
    config: Config,
    rt: Arc<Runtime>,
    state: Mutex<State>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let State::Up(p) = &*self.state.lock().unwrap() {
            p.close();
        }
    }
}

/// An arpc client. Cheap to clone; the connection closes when the last clone goes.
///
/// ```no_run
/// use fibr::arpc::{Client, Router};
/// use std::time::Duration;
///
/// fibr::run(async {
///     let router = Router::new().route("/pushed", |ctx| async move { println!("{:?}", ctx.body()) });
///     let client = Client::connect("127.0.0.1:8888".parse().unwrap(), router).await?;
///     let reply = client.call("/echo", b"hi", Duration::from_secs(1)).await?;
///     assert_eq!(&reply[..], b"hi");
///     Ok::<(), fibr::arpc::Error>(())
/// })?;
/// # Ok::<(), fibr::arpc::Error>(())
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// A dial's hooks: the first open (or the failure) goes to the dialing task; a later
/// close is the connection lost.
struct Dial {
    client: Weak<Inner>,
    opened: Mutex<Option<oneshot::Sender<Result<(), Error>>>>,
}

impl Hooks for Dial {
    fn opened(&self, peer: &Peer) {
        if let Some(inner) = self.client.upgrade() {
            let mut state = inner.state.lock().unwrap();
            if matches!(*state, State::Stopped) {
                peer.close();
            } else {
                *state = State::Up(peer.clone());
            }
        } else {
            peer.close();
        }
        if let Some(tx) = self.opened.lock().unwrap().take() {
            let _ = tx.send(Ok(()));
        }
    }

    fn closed(&self, peer: Option<&Peer>, err: Option<io::Error>) {
        if let Some(tx) = self.opened.lock().unwrap().take() {
            let e = err.unwrap_or_else(|| io::ErrorKind::ConnectionRefused.into());
            let _ = tx.send(Err(Error::Io(e)));
            return;
        }
        let (Some(inner), Some(peer)) = (self.client.upgrade(), peer) else {
            return;
        };
        let mut state = inner.state.lock().unwrap();
        if !matches!(&*state, State::Up(p) if Arc::ptr_eq(&p.session, &peer.session)) {
            return;
        }
        if inner.config.reconnect {
            *state = State::Down;
            tracing::debug!(addr = %inner.addr, error = ?err, "arpc: connection lost, dialing again");
            drop(crate::engine::runtime::spawn(redial(self.client.clone())));
        } else {
            *state = State::Stopped;
        }
    }
}

/// Dials `inner.addr` once; on success the client's state is the new peer.
async fn dial(inner: &Arc<Inner>) -> Result<(), Error> {
    let (tx, rx) = oneshot::channel();
    let hooks = Dial {
        client: Arc::downgrade(inner),
        opened: Mutex::new(Some(tx)),
    };
    let lost: fn() -> Error = if inner.config.reconnect {
        || Error::Reconnecting
    } else {
        || Error::Closed
    };
    let driver = Driver::new(inner.router.clone(), inner.config.clone(), lost, hooks);
    let conn = Conn::dial_on(&inner.rt, inner.addr, Arc::new(driver))?;
    match timeout(inner.config.connect_timeout, rx).await {
        Ok(Ok(r)) => r,
        Ok(Err(_)) => Err(Error::Closed),
        Err(_) => {
            conn.close();
            Err(Error::Io(io::ErrorKind::TimedOut.into()))
        }
    }
}

/// Dials again after a loss, waiting `reconnect_min` first and twice as long after each
/// failure (at most `reconnect_max`), until it connects, the client goes, or
/// `max_reconnects` attempts failed.
async fn redial(client: Weak<Inner>) {
    let mut delay = match client.upgrade() {
        Some(inner) => inner.config.reconnect_min,
        None => return,
    };
    let mut attempts = 0u32;
    loop {
        sleep(delay).await;
        let Some(inner) = client.upgrade() else {
            return;
        };
        if !matches!(*inner.state.lock().unwrap(), State::Down) {
            return;
        }
        match dial(&inner).await {
            Ok(()) => return,
            Err(e) => {
                attempts += 1;
                tracing::debug!(addr = %inner.addr, attempts, error = %e, "arpc: redial failed");
                if inner
                    .config
                    .max_reconnects
                    .is_some_and(|max| attempts >= max)
                {
                    *inner.state.lock().unwrap() = State::Stopped;
                    return;
                }
            }
        }
        delay = (delay * 2).min(inner.config.reconnect_max);
    }
}

impl Client {
    /// Connects to `addr` with the default [`Config`]; `router` serves the server's calls.
    pub async fn connect(addr: SocketAddr, router: Router) -> Result<Client, Error> {
        Client::connect_with(addr, router, Config::default()).await
    }

    /// Connects to `addr` with `config`.
    pub async fn connect_with(
        addr: SocketAddr,
        router: Router,
        config: Config,
    ) -> Result<Client, Error> {
        let inner = Arc::new(Inner {
            addr,
            router: Arc::new(router),
            config,
            rt: Runtime::current(),
            state: Mutex::new(State::Down),
        });
        dial(&inner).await?;
        Ok(Client { inner })
    }

    /// The connection now: [`Error::Reconnecting`] while it is being dialed again,
    /// [`Error::Closed`] once stopped.
    pub fn peer(&self) -> Result<Peer, Error> {
        match &*self.inner.state.lock().unwrap() {
            State::Up(p) => Ok(p.clone()),
            State::Down => Err(Error::Reconnecting),
            State::Stopped => Err(Error::Closed),
        }
    }

    /// [`Peer::call`] on the connection.
    pub async fn call(&self, method: &str, body: impl AsRef<[u8]>, timeout: Duration) -> Reply {
        self.peer()?.call(method, body, timeout).await
    }

    /// [`Peer::call_with`] on the connection.
    pub async fn call_with<C, Req, Resp>(
        &self,
        codec: &C,
        method: &str,
        req: &Req,
        timeout: Duration,
    ) -> Result<Resp, Error>
    where
        C: Codec<Req> + Codec<Resp>,
    {
        self.peer()?.call_with(codec, method, req, timeout).await
    }

    /// [`Peer::call_async`] on the connection.
    pub fn call_async(
        &self,
        method: &str,
        body: impl AsRef<[u8]>,
        timeout: Duration,
        done: impl FnOnce(Reply) + Send + 'static,
    ) -> Result<(), Error> {
        self.peer()?.call_async(method, body, timeout, done)
    }

    /// [`Peer::notify`] on the connection.
    pub fn notify(&self, method: &str, body: impl AsRef<[u8]>) -> Result<(), Error> {
        self.peer()?.notify(method, body)
    }

    /// Closes the connection for good: no more dialing.
    pub fn stop(&self) {
        let old = std::mem::replace(&mut *self.inner.state.lock().unwrap(), State::Stopped);
        if let State::Up(p) = old {
            p.close();
        }
    }
}
