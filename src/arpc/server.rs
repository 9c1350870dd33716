//! The server: a connection [`Handler`] for an `Engine` binding (or a `Mux` route) that
//! serves a [`Router`] on every connection and keeps the connected peers, so it can call,
//! notify and broadcast to them.

use super::driver::{Driver, Hooks};
use super::error::Error;
use super::peer::Peer;
use super::router::Router;
use super::Config;
use crate::engine::conn::{Conn, Handler};
use crate::proto::arpc::{encode_frame, Cmd, FLAG_ASYNC};
use bytes::Bytes;
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The connected peers, by their session's address.
#[derive(Default)]
struct Peers {
    map: Mutex<HashMap<usize, Peer>>,
}

fn key(peer: &Peer) -> usize {
    Arc::as_ptr(&peer.session) as usize
}

impl Hooks for Arc<Peers> {
    fn opened(&self, peer: &Peer) {
        self.map.lock().unwrap().insert(key(peer), peer.clone());
    }
    fn closed(&self, peer: Option<&Peer>, _err: Option<io::Error>) {
        if let Some(p) = peer {
            self.map.lock().unwrap().remove(&key(p));
        }
    }
}

/// A notify encoded once, to be sent to many peers as it is ([`Server::message`]).
#[derive(Clone, Debug)]
pub struct Message {
    frame: Bytes,
}

impl Message {
    /// The whole frame.
    pub fn as_bytes(&self) -> &[u8] {
        &self.frame
    }
}

/// An arpc server: give it (or [`Server::handler`]) to a binding.
///
/// ```no_run
/// use fibr::arpc::{Router, Server};
/// use fibr::{Binding, Config, Engine};
///
/// let router = Router::new().route("/echo", |ctx| async move { ctx.reply(ctx.body()) });
/// let server = Server::new(router);
/// let engine = Engine::new(Config::default(), [Binding::tcp("127.0.0.1:8888", server.clone())])?;
/// engine.run()?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone)]
pub struct Server {
    driver: Arc<Driver<Arc<Peers>>>,
    /// Broadcasts share one seq counter across the server (arpc's starts at 0: first is 1).
    broadcast_seq: Arc<AtomicU64>,
}

impl Server {
    /// Serves `router` with the default [`Config`].
    pub fn new(router: Router) -> Server {
        Server::with_config(router, Config::default())
    }

    /// Serves `router` with `config`.
    pub fn with_config(router: Router, config: Config) -> Server {
        Server {
            driver: Arc::new(Driver::new(
                Arc::new(router),
                config,
                || Error::Closed,
                Arc::new(Peers::default()),
            )),
            broadcast_seq: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The connection handler, shared (for `Mux::route_shared` and the like).
    pub fn handler(&self) -> Arc<dyn Handler> {
        self.driver.clone()
    }

    /// The peers connected now.
    pub fn peers(&self) -> Vec<Peer> {
        self.driver
            .hooks
            .map
            .lock()
            .unwrap()
            .values()
            .cloned()
            .collect()
    }

    /// A notify of `method` with `body`, encoded once for [`broadcast_message`](Self::broadcast_message).
    pub fn message(&self, method: &str, body: impl AsRef<[u8]>) -> Result<Message, Error> {
        let seq = self.broadcast_seq.fetch_add(1, Ordering::Relaxed) + 1;
        let body = body.as_ref();
        let mut frame = Vec::new();
        encode_frame(
            &mut frame,
            Cmd::Notify as u8,
            FLAG_ASYNC,
            seq,
            method.as_bytes(),
            body,
        )?;
        Ok(Message {
            frame: frame.into(),
        })
    }

    /// Sends `message` to every connected peer: how many it was queued for.
    pub fn broadcast_message(&self, message: &Message) -> usize {
        self.peers()
            .iter()
            .filter(|p| p.send_encoded(&message.frame).is_ok())
            .count()
    }

    /// Notifies every connected peer of `method` with `body`, encoded once.
    pub fn broadcast(&self, method: &str, body: impl AsRef<[u8]>) -> Result<usize, Error> {
        Ok(self.broadcast_message(&self.message(method, body)?))
    }
}

impl Handler for Server {
    fn on_open(&self, conn: &Conn) {
        self.driver.on_open(conn)
    }
    fn on_data(&self, conn: &Conn, data: &[u8]) {
        self.driver.on_data(conn, data)
    }
    fn on_wake(&self, conn: &Conn) {
        self.driver.on_wake(conn)
    }
    fn on_close(&self, conn: &Conn, err: Option<io::Error>) {
        self.driver.on_close(conn, err)
    }
}
