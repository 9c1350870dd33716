//! Who is at the other end of a Unix stream socket: its address and its credentials.

use std::mem::ManuallyDrop;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::net::{SocketAddr, UnixStream};

/// The peer's process, user and group, as the kernel recorded them at `connect`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCred {
    /// The peer's process id, where the OS reports it (Linux does; the BSDs' `getpeereid`
    /// does not).
    pub pid: Option<i32>,
    /// The peer's effective user id.
    pub uid: u32,
    /// The peer's effective group id.
    pub gid: u32,
}

/// The address the peer of the Unix stream socket `fd` is bound to (usually unnamed).
pub(crate) fn peer_addr(fd: RawFd) -> Option<SocketAddr> {
    // SAFETY: `fd` is an open socket the caller owns for this call; ManuallyDrop keeps the
    // borrowed stream from closing it.
    let stream = ManuallyDrop::new(unsafe { UnixStream::from_raw_fd(fd) });
    stream.peer_addr().ok()
}

/// The credentials of the peer of the Unix stream socket `fd` (`SO_PEERCRED`).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn peer_cred(fd: RawFd) -> Option<PeerCred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` describe a writable ucred, as SO_PEERCRED fills.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(PeerCred {
        pid: Some(cred.pid),
        uid: cred.uid,
        gid: cred.gid,
    })
}

/// The credentials of the peer of the Unix stream socket `fd` (`getpeereid`).
#[cfg(any(
    target_os = "macos",
    target_os = "ios",
    target_os = "freebsd",
    target_os = "openbsd",
    target_os = "netbsd",
    target_os = "dragonfly"
))]
pub(crate) fn peer_cred(fd: RawFd) -> Option<PeerCred> {
    let (mut uid, mut gid) = (0, 0);
    // SAFETY: both are writable ids for getpeereid to fill.
    let r = unsafe { libc::getpeereid(fd, &mut uid, &mut gid) };
    (r == 0).then_some(PeerCred {
        pid: None,
        uid,
        gid,
    })
}

/// No credentials call known here.
#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_os = "macos",
    target_os = "ios",
    target_os = "freebsd",
    target_os = "openbsd",
    target_os = "netbsd",
    target_os = "dragonfly"
)))]
pub(crate) fn peer_cred(_fd: RawFd) -> Option<PeerCred> {
    None
}
