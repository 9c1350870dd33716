//! The in-memory cache of resolved files: for each request path, the file it names and
//! its precompressed twins, their validators, and the bytes of those under
//! `Config::cache_file_max`. Bounded in total (`Config::cache_total_max`, each entry's
//! metadata counted too); when full, entries are dropped to make room. Kept true by
//! inotify on Linux ([`super::watch`]: a change in a directory drops what was resolved in
//! it) and by a `stat` per hit elsewhere (or where a watch cannot be added).

use super::conditional::Validators;
use super::encoding::Twin;
use bytes::Bytes;
use http::HeaderValue;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

/// What an entry costs beyond its bytes (its paths, headers and the map's slot).
pub(crate) const ENTRY_OVERHEAD: u64 = 512;

/// One file as served: where it is, what it is known by, and (small ones) its bytes.
#[derive(Debug)]
pub(crate) struct Variant {
    pub path: PathBuf,
    pub len: u64,
    /// Its inode, to tell a replaced file from the one cached (with `stat` validation).
    pub ino: u64,
    /// Its modification time, to the nanosecond.
    pub mtime: SystemTime,
    pub validators: Validators,
    pub etag: HeaderValue,
    pub last_modified: HeaderValue,
    pub bytes: Option<Bytes>,
}

/// A request path resolved: the file and the twins that exist beside it.
#[derive(Debug)]
pub(crate) struct Resolved {
    /// The directory the files are in (what a watch covers).
    pub dir: PathBuf,
    /// The identity file's `Content-Type`.
    pub content_type: HeaderValue,
    pub identity: Variant,
    pub twins: Vec<(Twin, Variant)>,
}

impl Resolved {
    fn cost(&self) -> u64 {
        let variant = |v: &Variant| ENTRY_OVERHEAD + v.bytes.as_ref().map_or(0, |b| b.len() as u64);
        variant(&self.identity) + self.twins.iter().map(|(_, v)| variant(v)).sum::<u64>()
    }

    /// Whether the disk still holds what was resolved (the `stat` check).
    fn unchanged(&self) -> bool {
        std::iter::once(&self.identity)
            .chain(self.twins.iter().map(|(_, v)| v))
            .all(|v| {
                std::fs::metadata(&v.path).is_ok_and(|m| {
                    use std::os::unix::fs::MetadataExt;
                    m.len() == v.len && m.ino() == v.ino && mtime(&m) == v.mtime
                })
            })
    }
}

pub(crate) struct Cache {
    entries: RwLock<Entries>,
    /// Bumped by every invalidation: an entry resolved before a bump is not inserted.
    generation: AtomicU64,
    max_total: u64,
}

#[derive(Default)]
struct Entries {
    /// By the request's path as it came (still percent-encoded): a hit needs no decoding.
    map: HashMap<String, Arc<Resolved>>,
    held: u64,
}

impl Cache {
    pub(crate) fn new(max_total: u64) -> Cache {
        Cache {
            entries: RwLock::new(Entries::default()),
            generation: AtomicU64::new(0),
            max_total,
        }
    }

    /// The generation to pass to [`Cache::insert`] for what is resolved from now on.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// A cached resolution; with `validate`, only if a `stat` shows it unchanged.
    pub(crate) fn get(&self, path: &str, validate: bool) -> Option<Arc<Resolved>> {
        let hit = self.read().map.get(path).cloned()?;
        if validate && !hit.unchanged() {
            self.remove_where(|k, _| k == path);
            return None;
        }
        Some(hit)
    }

    /// Keeps `resolved` unless something changed since `generation` (or it cannot fit).
    pub(crate) fn insert(&self, key: String, resolved: Arc<Resolved>, generation: u64) {
        let cost = resolved.cost();
        if cost > self.max_total {
            return;
        }
        let mut e = self.entries.write().unwrap_or_else(|e| e.into_inner());
        if self.generation() != generation {
            return;
        }
        if let Some(old) = e.map.remove(&key) {
            e.held -= old.cost();
        }
        while e.held + cost > self.max_total {
            let Some(victim) = e.map.keys().next().cloned() else {
                break;
            };
            let old = e.map.remove(&victim).expect("a key just seen");
            e.held -= old.cost();
        }
        e.held += cost;
        e.map.insert(key, resolved);
    }

    /// Drops every entry resolved in `dir` or below it.
    pub(crate) fn invalidate_under(&self, dir: &Path) {
        self.remove_where(|_, r| r.dir.starts_with(dir));
    }

    /// Drops every entry resolved in exactly `dir`.
    pub(crate) fn invalidate_in(&self, dir: &Path) {
        self.remove_where(|_, r| r.dir == dir);
    }

    /// Drops everything (the watcher lost events).
    pub(crate) fn clear(&self) {
        self.remove_where(|_, _| true);
    }

    /// Bytes and metadata held (for tests and limits).
    #[cfg(test)]
    pub(crate) fn held(&self) -> u64 {
        self.read().held
    }

    fn remove_where(&self, drop: impl Fn(&str, &Resolved) -> bool) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        let mut e = self.entries.write().unwrap_or_else(|e| e.into_inner());
        let mut freed = 0;
        e.map.retain(|k, r| {
            let gone = drop(k, r);
            if gone {
                freed += r.cost();
            }
            !gone
        });
        e.held -= freed;
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Entries> {
        self.entries.read().unwrap_or_else(|e| e.into_inner())
    }
}

/// A file's modification time (the epoch where the platform has none).
pub(crate) fn mtime(m: &std::fs::Metadata) -> SystemTime {
    m.modified().unwrap_or(SystemTime::UNIX_EPOCH)
}

/// `t` cut to whole seconds, as `Last-Modified` can say it.
pub(crate) fn whole_seconds(t: SystemTime) -> SystemTime {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs)
}
