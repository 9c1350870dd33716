//! Pipes and `splice(2)` (Linux): the relay's zero-copy path moves bytes socket → pipe →
//! socket inside the kernel (see `conn::splice`).

use super::socket::cvt;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// A non-blocking, close-on-exec pipe: (read end, write end).
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) })?;
    // SAFETY: pipe2 succeeded, so both are fresh descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Asks for a pipe of `size` bytes (the kernel rounds up to a power of two of pages, and
/// refuses past `/proc/sys/fs/pipe-max-size` or the user's pipe pages); returns the size
/// it has, asked for or not.
pub(crate) fn set_pipe_size(fd: RawFd, size: usize) -> usize {
    let size = libc::c_int::try_from(size).unwrap_or(libc::c_int::MAX);
    // SAFETY: plain fcntl on an open pipe; a refusal leaves the pipe as it was.
    unsafe { libc::fcntl(fd, libc::F_SETPIPE_SZ, size) };
    // SAFETY: as above.
    let got = unsafe { libc::fcntl(fd, libc::F_GETPIPE_SZ) };
    // The default of a pipe (16 pages) if even asking fails.
    usize::try_from(got).unwrap_or(16 * 4096)
}

/// Moves up to `len` bytes from `from` to `to` (one of them a pipe) without copying them
/// to user space, never blocking on either end (`SPLICE_F_NONBLOCK`; the sockets are
/// non-blocking too). `Ok(0)` from a socket is its EOF.
///
/// A socket written this way gets no `MSG_NOSIGNAL` (as with sendfile): writing to one
/// whose peer has gone raises SIGPIPE, which Rust programs ignore from startup.
pub(crate) fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: plain syscall on open descriptors; null offsets mean "the current position",
    // the only kind a socket or a pipe has.
    let n = cvt(unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    })?;
    Ok(n as usize)
}

/// Bytes waiting in a socket's receive queue (FIONREAD).
pub(crate) fn unread(fd: RawFd) -> io::Result<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int, which `n` is.
    cvt(unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) })?;
    Ok(n.max(0) as usize)
}
