//! Keeps the cache true on Linux: an inotify watch on every directory something was
//! resolved in, read by one thread per cache. A change in a directory (a file written,
//! created, removed, renamed, its attributes) drops what was resolved in it and below the
//! name that changed; a lost event (queue overflow) drops everything. The thread ends
//! within a second of the cache's last user.

use super::cache::Cache;
use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

const MASK: u32 = libc::IN_MODIFY
    | libc::IN_ATTRIB
    | libc::IN_CLOSE_WRITE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF;

/// The watches of one cache.
pub(crate) struct Watcher {
    fd: OwnedFd,
    dirs: Mutex<Dirs>,
}

#[derive(Default)]
struct Dirs {
    by_wd: HashMap<i32, PathBuf>,
    by_dir: HashMap<PathBuf, i32>,
}

impl Watcher {
    /// A watcher for `cache`, with its reading thread; None if inotify is unavailable
    /// (the cache then checks each hit with a `stat`).
    pub(crate) fn start(cache: Weak<Cache>) -> Option<Arc<Watcher>> {
        // SAFETY: inotify_init1 takes flags only; a non-negative result is a new
        // descriptor that nothing else owns.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            tracing::debug!(error = %io::Error::last_os_error(), "no inotify: files are checked with stat");
            return None;
        }
        // SAFETY: `fd` was just created and is owned here alone.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let watcher = Arc::new(Watcher {
            fd,
            dirs: Mutex::new(Dirs::default()),
        });
        let w = Arc::downgrade(&watcher);
        std::thread::Builder::new()
            .name("fibr-fs-watch".into())
            .spawn(move || run(w, cache))
            .ok()?;
        Some(watcher)
    }

    /// Watches `dir` (once); false if it cannot be (the watch limit): then what is in it
    /// must not be cached.
    pub(crate) fn watch(&self, dir: &Path) -> bool {
        let mut dirs = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        if dirs.by_dir.contains_key(dir) {
            return true;
        }
        let Ok(c) = CString::new(dir.as_os_str().as_bytes()) else {
            return false;
        };
        // SAFETY: a valid descriptor and a NUL-terminated path that outlives the call.
        let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), c.as_ptr(), MASK) };
        if wd < 0 {
            tracing::debug!(dir = %dir.display(), error = %io::Error::last_os_error(), "cannot watch");
            return false;
        }
        dirs.by_wd.insert(wd, dir.to_path_buf());
        dirs.by_dir.insert(dir.to_path_buf(), wd);
        true
    }
}

/// The reading thread: waits up to a second for events, applies them, and ends once the
/// watcher or the cache is gone.
fn run(watcher: Weak<Watcher>, cache: Weak<Cache>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let (Some(w), Some(cache)) = (watcher.upgrade(), cache.upgrade()) else {
            return;
        };
        let mut pfd = libc::pollfd {
            fd: w.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the call's duration.
        let ready = unsafe { libc::poll(&mut pfd, 1, 1000) };
        if ready <= 0 {
            continue;
        }
        // SAFETY: reads into `buf`, which is valid for its whole length.
        let n = unsafe { libc::read(w.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            continue;
        }
        apply(&w, &cache, &buf[..n as usize]);
    }
}

/// Applies a buffer of `inotify_event`s.
fn apply(w: &Watcher, cache: &Cache, mut events: &[u8]) {
    const HEAD: usize = std::mem::size_of::<libc::inotify_event>();
    while events.len() >= HEAD {
        // SAFETY: the kernel wrote whole events; the header is read unaligned from bytes
        // that hold one.
        let ev: libc::inotify_event = unsafe { std::ptr::read_unaligned(events.as_ptr().cast()) };
        let end = (HEAD + ev.len as usize).min(events.len());
        let name = &events[HEAD..end];
        let name = &name[..name.iter().position(|b| *b == 0).unwrap_or(name.len())];
        events = &events[end..];
        if ev.mask & libc::IN_Q_OVERFLOW != 0 {
            cache.clear();
            continue;
        }
        let mut dirs = w.dirs.lock().unwrap_or_else(|e| e.into_inner());
        let Some(dir) = dirs.by_wd.get(&ev.wd).cloned() else {
            continue;
        };
        if ev.mask & (libc::IN_IGNORED | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF) != 0 {
            // The directory itself went: everything under it, and its watch.
            cache.invalidate_under(&dir);
            if ev.mask & libc::IN_IGNORED != 0 {
                dirs.by_wd.remove(&ev.wd);
                dirs.by_dir.remove(&dir);
            }
            continue;
        }
        drop(dirs);
        cache.invalidate_in(&dir);
        if !name.is_empty() {
            // A subdirectory renamed or removed: what was resolved below it.
            let child = dir.join(OsStr::from_bytes(name));
            cache.invalidate_under(&child);
        }
    }
}
