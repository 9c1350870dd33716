//! Address resolution that never blocks a worker or an event loop: socket addresses and
//! IP literals resolve in place; host names go to the system resolver (`getaddrinfo`,
//! which blocks) on a short-lived thread of their own.

use std::future::poll_fn;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};

/// What fibr's sockets accept as an address, as tokio's sockets do: a socket address, an
/// `(ip, port)` pair, a `"host:port"` string or a `(host, port)` pair.
pub trait ToSocketAddrs: sealed::Sealed {}

mod sealed {
    use super::Lookup;

    pub trait Sealed {
        fn lookup(&self) -> Lookup;
    }
}

/// Either resolved already, or a name for the resolver thread.
#[doc(hidden)]
pub enum Lookup {
    Ready(Vec<SocketAddr>),
    HostPort(String),
    Host(String, u16),
}

macro_rules! ready_addr {
    ($($t:ty),*) => {$(
        impl ToSocketAddrs for $t {}
        impl sealed::Sealed for $t {
            fn lookup(&self) -> Lookup {
                Lookup::Ready(vec![SocketAddr::from(*self)])
            }
        }
    )*};
}

ready_addr!(
    SocketAddr,
    SocketAddrV4,
    SocketAddrV6,
    (IpAddr, u16),
    (Ipv4Addr, u16),
    (Ipv6Addr, u16)
);

impl ToSocketAddrs for [SocketAddr] {}
impl sealed::Sealed for [SocketAddr] {
    fn lookup(&self) -> Lookup {
        Lookup::Ready(self.to_vec())
    }
}

impl ToSocketAddrs for str {}
impl sealed::Sealed for str {
    fn lookup(&self) -> Lookup {
        match self.parse::<SocketAddr>() {
            Ok(a) => Lookup::Ready(vec![a]),
            Err(_) => Lookup::HostPort(self.to_owned()),
        }
    }
}

impl ToSocketAddrs for String {}
impl sealed::Sealed for String {
    fn lookup(&self) -> Lookup {
        self.as_str().lookup()
    }
}

impl ToSocketAddrs for (&str, u16) {}
impl sealed::Sealed for (&str, u16) {
    fn lookup(&self) -> Lookup {
        let (host, port) = *self;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        match bare.parse::<IpAddr>() {
            Ok(ip) => Lookup::Ready(vec![SocketAddr::new(ip, port)]),
            Err(_) => Lookup::Host(bare.to_owned(), port),
        }
    }
}

impl ToSocketAddrs for (String, u16) {}
impl sealed::Sealed for (String, u16) {
    fn lookup(&self) -> Lookup {
        (self.0.as_str(), self.1).lookup()
    }
}

impl<T: ToSocketAddrs + ?Sized> ToSocketAddrs for &T {}
impl<T: ToSocketAddrs + ?Sized> sealed::Sealed for &T {
    fn lookup(&self) -> Lookup {
        (**self).lookup()
    }
}

/// Resolves `host` to its socket addresses (at least one, else an error), like
/// `tokio::net::lookup_host`.
pub async fn lookup_host(host: impl ToSocketAddrs) -> io::Result<impl Iterator<Item = SocketAddr>> {
    resolve(host).await.map(Vec::into_iter)
}

/// Resolves `addr` (at least one address, else an error).
pub(crate) async fn resolve(addr: impl ToSocketAddrs) -> io::Result<Vec<SocketAddr>> {
    let (addrs, what) = match sealed::Sealed::lookup(&addr) {
        Lookup::Ready(addrs) => (addrs, None),
        Lookup::HostPort(name) => {
            let what = name.clone();
            (
                off_thread(move || std::net::ToSocketAddrs::to_socket_addrs(&name)).await?,
                Some(what),
            )
        }
        Lookup::Host(name, port) => {
            let what = format!("{name}:{port}");
            let addrs = off_thread(move || {
                std::net::ToSocketAddrs::to_socket_addrs(&(name.as_str(), port))
            })
            .await?;
            (addrs, Some(what))
        }
    };
    if addrs.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            match what {
                Some(w) => format!("{w:?} resolved to no address"),
                None => "no address given".to_string(),
            },
        ));
    }
    Ok(addrs)
}

/// Runs a blocking lookup on its own thread and waits for it without blocking.
async fn off_thread<I>(
    lookup: impl FnOnce() -> io::Result<I> + Send + 'static,
) -> io::Result<Vec<SocketAddr>>
where
    I: Iterator<Item = SocketAddr>,
{
    struct Slot {
        result: Option<io::Result<Vec<SocketAddr>>>,
        waker: Option<Waker>,
    }
    let slot = Arc::new(Mutex::new(Slot {
        result: None,
        waker: None,
    }));
    let theirs = slot.clone();
    std::thread::Builder::new()
        .name("fibr-dns".into())
        .spawn(move || {
            let r = lookup().map(|it| it.collect());
            let mut s = theirs.lock().unwrap_or_else(|e| e.into_inner());
            s.result = Some(r);
            if let Some(w) = s.waker.take() {
                w.wake();
            }
        })?;
    poll_fn(|cx| {
        let mut s = slot.lock().unwrap_or_else(|e| e.into_inner());
        match s.result.take() {
            Some(r) => Poll::Ready(r),
            None => {
                s.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    })
    .await
}
