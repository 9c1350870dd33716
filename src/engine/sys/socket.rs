//! Raw socket calls on already non-blocking descriptors.
//!
//! The hot path (read, vectored send, sendfile, batched UDP) goes straight to the kernel:
//! the descriptor's readiness is already known, so nothing else is worth paying for.

use std::io::{self, IoSlice};
use std::mem::{size_of, MaybeUninit};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::path::Path;

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// Turns a `-1` syscall result into the thread's `errno` as an `io::Error`.
#[inline]
pub(crate) fn cvt<T: Copy + PartialEq + From<i8>>(r: T) -> io::Result<T> {
    if r == T::from(-1) {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A send to a peer that has gone raises no SIGPIPE (EPIPE is enough). Apple's systems have
/// SO_NOSIGPIPE on the socket instead (socket2 sets it on the sockets it makes; accepted
/// ones inherit it from their listener); on illumos SIGPIPE is left to Rust's runtime,
/// which ignores it in every Rust binary.
#[cfg(any(
    target_os = "linux",
    target_os = "android",
    target_os = "freebsd",
    target_os = "dragonfly",
    target_os = "netbsd",
    target_os = "openbsd"
))]
pub(super) const SEND_FLAGS: libc::c_int = libc::MSG_NOSIGNAL;
#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_os = "freebsd",
    target_os = "dragonfly",
    target_os = "netbsd",
    target_os = "openbsd"
)))]
pub(super) const SEND_FLAGS: libc::c_int = 0;

/// A listening TCP socket, non-blocking, with SO_REUSEADDR (and SO_REUSEPORT if asked).
pub(crate) fn tcp_listener(
    addr: SocketAddr,
    reuse_port: bool,
    backlog: i32,
) -> io::Result<OwnedFd> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    sock.set_nonblocking(true)?;
    sock.set_reuse_address(true)?;
    if reuse_port {
        set_reuse_port(&sock)?;
    }
    sock.bind(&addr.into())?;
    sock.listen(backlog)?;
    Ok(sock.into())
}

#[cfg(not(any(target_os = "illumos", target_os = "solaris")))]
fn set_reuse_port(sock: &Socket) -> io::Result<()> {
    sock.set_reuse_port(true)
}

/// illumos and Solaris have no SO_REUSEPORT with the kernel spreading connections (nor
/// does socket2 offer one there): asking for it is an error, not a silent no-op.
#[cfg(any(target_os = "illumos", target_os = "solaris"))]
fn set_reuse_port(_: &Socket) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "SO_REUSEPORT is not available on illumos or Solaris",
    ))
}

/// A listening Unix stream socket at `path` (a stale socket file is not removed).
pub(crate) fn unix_listener(path: &Path, backlog: i32) -> io::Result<OwnedFd> {
    let sock = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    sock.set_nonblocking(true)?;
    sock.bind(&SockAddr::unix(path)?)?;
    sock.listen(backlog)?;
    Ok(sock.into())
}

/// A bound, non-blocking UDP socket.
pub(crate) fn udp_socket(addr: SocketAddr) -> io::Result<OwnedFd> {
    let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    Ok(sock.into())
}

/// Starts a non-blocking connect; completion shows up as writability (then check
/// [`take_error`]).
pub(crate) fn tcp_connect(addr: SocketAddr) -> io::Result<OwnedFd> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    sock.set_nonblocking(true)?;
    sock.set_tcp_nodelay(true)?;
    match sock.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
        Err(e) => return Err(e),
    }
    Ok(sock.into())
}

/// Starts a non-blocking connect to a Unix socket.
pub(crate) fn unix_connect(path: &Path) -> io::Result<OwnedFd> {
    let sock = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    sock.set_nonblocking(true)?;
    match sock.connect(&SockAddr::unix(path)?) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
        Err(e) => return Err(e),
    }
    Ok(sock.into())
}

/// Accepts one connection as a non-blocking, close-on-exec descriptor.
pub(crate) fn accept(listener: RawFd) -> io::Result<(OwnedFd, Option<SocketAddr>)> {
    let mut storage = MaybeUninit::<libc::sockaddr_storage>::zeroed();
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
    let fd = {
        // SAFETY: storage and len describe a writable sockaddr_storage.
        let fd = cvt(unsafe {
            libc::accept4(
                listener,
                storage.as_mut_ptr().cast(),
                &mut len,
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            )
        })?;
        // SAFETY: accept4 returned a fresh descriptor that nothing else owns.
        unsafe { OwnedFd::from_raw_fd(fd) }
    };
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
    let fd = {
        // SAFETY: storage and len describe a writable sockaddr_storage.
        let fd = cvt(unsafe { libc::accept(listener, storage.as_mut_ptr().cast(), &mut len) })?;
        // SAFETY: accept returned a fresh descriptor that nothing else owns.
        let sock = unsafe { Socket::from_raw_fd(fd) };
        sock.set_nonblocking(true)?;
        sock.set_cloexec(true)?;
        OwnedFd::from(sock)
    };
    // SAFETY: the kernel initialized `len` bytes of the storage (zeroed beyond that).
    let addr = unsafe { sockaddr_to_std(storage.as_ptr(), len) };
    Ok((fd, addr))
}

/// Converts an IPv4 or IPv6 socket address; anything else (Unix) gives `None`.
///
/// # Safety
/// `storage` must point to a sockaddr_storage whose first `len` bytes are initialized.
pub(super) unsafe fn sockaddr_to_std(
    storage: *const libc::sockaddr_storage,
    len: libc::socklen_t,
) -> Option<SocketAddr> {
    let family = (*storage).ss_family as libc::c_int;
    if family == libc::AF_INET && len as usize >= size_of::<libc::sockaddr_in>() {
        let a = &*(storage as *const libc::sockaddr_in);
        let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
        Some(SocketAddr::V4(SocketAddrV4::new(
            ip,
            u16::from_be(a.sin_port),
        )))
    } else if family == libc::AF_INET6 && len as usize >= size_of::<libc::sockaddr_in6>() {
        let a = &*(storage as *const libc::sockaddr_in6);
        let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
        Some(SocketAddr::V6(SocketAddrV6::new(
            ip,
            u16::from_be(a.sin6_port),
            a.sin6_flowinfo,
            a.sin6_scope_id,
        )))
    } else {
        None
    }
}

/// Fills a sockaddr_storage from a std address; returns its length.
pub(super) fn std_to_sockaddr(
    addr: &SocketAddr,
    storage: &mut libc::sockaddr_storage,
) -> libc::socklen_t {
    let sa: SockAddr = (*addr).into();
    let len = sa.len();
    // SAFETY: SockAddr holds a valid sockaddr of `len` bytes, and len <= sizeof(storage).
    unsafe {
        std::ptr::copy_nonoverlapping(
            sa.as_ptr() as *const u8,
            (storage as *mut libc::sockaddr_storage).cast::<u8>(),
            len as usize,
        )
    };
    len
}

pub(crate) fn set_nodelay(fd: RawFd) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: passes a valid c_int option value of the right size.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&one as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// The pending socket error (SO_ERROR), e.g. the outcome of a non-blocking connect.
pub(crate) fn take_error(fd: RawFd) -> io::Result<Option<io::Error>> {
    let mut err: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: err and len describe a writable c_int.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok((err != 0).then(|| io::Error::from_raw_os_error(err)))
}

fn name_of(
    fd: RawFd,
    f: unsafe extern "C" fn(libc::c_int, *mut libc::sockaddr, *mut libc::socklen_t) -> libc::c_int,
) -> Option<SocketAddr> {
    let mut storage = MaybeUninit::<libc::sockaddr_storage>::zeroed();
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: storage and len describe a writable sockaddr_storage.
    if unsafe { f(fd, storage.as_mut_ptr().cast(), &mut len) } != 0 {
        return None;
    }
    // SAFETY: the kernel initialized `len` bytes (the rest is zeroed).
    unsafe { sockaddr_to_std(storage.as_ptr(), len) }
}

pub(crate) fn local_addr(fd: RawFd) -> Option<SocketAddr> {
    name_of(fd, libc::getsockname)
}

pub(crate) fn peer_addr(fd: RawFd) -> Option<SocketAddr> {
    name_of(fd, libc::getpeername)
}

#[inline]
pub(crate) fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for writes of buf.len() bytes.
    let n = cvt(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) })?;
    Ok(n as usize)
}

/// True if the socket holds bytes not yet read (they stay there: a peek).
pub(crate) fn has_input(fd: RawFd) -> bool {
    let mut byte = 0u8;
    // SAFETY: `byte` is valid for a write of one byte.
    let n = unsafe {
        libc::recv(
            fd,
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n > 0
}

/// Most iovecs one sendmsg takes (more is EINVAL): Linux's UIO_MAXIOV; elsewhere IOV_MAX,
/// 1024 on macOS, the BSDs and illumos alike (libc names it on none of them).
#[cfg(any(target_os = "linux", target_os = "android"))]
const MAX_IOV: usize = libc::UIO_MAXIOV as usize;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const MAX_IOV: usize = 1024;

/// Writes as much of `bufs` as the socket takes now, in one call, without SIGPIPE.
#[inline]
pub(crate) fn send_vectored(fd: RawFd, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    if bufs.len() == 1 {
        // SAFETY: the slice is valid for reads of its length.
        let n = cvt(unsafe { libc::send(fd, bufs[0].as_ptr().cast(), bufs[0].len(), SEND_FLAGS) })?;
        return Ok(n as usize);
    }
    // SAFETY: msghdr is plain data; an all-zero value is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // IoSlice is ABI-compatible with iovec on Unix.
    msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = bufs.len().min(MAX_IOV) as _;
    // SAFETY: msg points to iovecs that stay valid for the call.
    let n = cvt(unsafe { libc::sendmsg(fd, &msg, SEND_FLAGS) })?;
    Ok(n as usize)
}

/// Sends up to `len` bytes of `file` from `offset`, advancing `offset`.
pub(crate) fn sendfile(out: RawFd, file: RawFd, offset: &mut u64, len: usize) -> io::Result<usize> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let mut off = *offset as libc::off_t;
        // SAFETY: off is a valid off_t the kernel updates; both descriptors are open.
        let n = cvt(unsafe { libc::sendfile(out, file, &mut off, len) })?;
        *offset = off as u64;
        Ok(n as usize)
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        // Portable fallback: read a slice of the file, then send what the socket takes.
        let mut chunk = vec![0u8; len.min(64 * 1024)];
        // SAFETY: chunk is valid for writes of its length.
        let n = cvt(unsafe {
            libc::pread(
                file,
                chunk.as_mut_ptr().cast(),
                chunk.len(),
                *offset as libc::off_t,
            )
        })?;
        if n == 0 {
            return Ok(0);
        }
        let sent = send_vectored(out, &[IoSlice::new(&chunk[..n as usize])])?;
        *offset += sent as u64;
        Ok(sent)
    }
}

/// A second descriptor for the same socket (close-on-exec).
pub(crate) fn dup(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the new descriptor is checked and then owned.
    let new = cvt(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) })?;
    // SAFETY: fcntl returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

pub(crate) fn shutdown_write(fd: RawFd) -> io::Result<()> {
    // SAFETY: plain syscall on an open descriptor.
    cvt(unsafe { libc::shutdown(fd, libc::SHUT_WR) })?;
    Ok(())
}
