//! Name resolution for the client's dials, direct and through a proxy.

use super::error::{Error, ErrorKind};
use std::net::SocketAddr;

/// Resolves `host` off the calling thread (IP literals in place): see `fibr::net`.
pub(crate) async fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, Error> {
    crate::engine::net::resolve((host, port))
        .await
        .map_err(|e| Error::new(ErrorKind::Dns, format!("resolving {host:?}: {e}")))
}
