//! Static files: [`ServeDir`], a `tower::Service` that serves a directory, mountable in an
//! axum `Router` as it is (`Router::new().nest_service("/static", ServeDir::new("assets"))`
//! or `.fallback_service(..)`).
//!
//! - `GET` and `HEAD`; `ETag` and `Last-Modified`, answered with 304 to `If-None-Match` /
//!   `If-Modified-Since` (and 412 to `If-Match` / `If-Unmodified-Since`); a single `Range`
//!   (206, or 416 past the end; `If-Range` honoured);
//! - a directory's index file (`index.html`), and a redirect to the path with its `/`;
//! - no way out of the root: `..` and its encoded forms are refused, and so is a symbolic
//!   link that leads outside (404 either way);
//! - precompressed twins: `x.js.br` / `x.js.gz` beside `x.js` go out (with
//!   `Content-Encoding`) to a client whose `Accept-Encoding` takes them, with
//!   `Vary: Accept-Encoding`;
//! - small files (up to [`Config::cache_file_max`]) from memory, up to
//!   [`Config::cache_total_max`] in all; the cache follows the disk through inotify on
//!   Linux and a `stat` per hit elsewhere;
//! - larger files from the disk: fibr's HTTP/1 server sends them with sendfile(2) (behind
//!   axum's boxing too, as long as no middleware changed the body); TLS, HTTP/2 and HTTP/3
//!   read them in 64 KiB chunks as the connection takes them.
//!
//! Files are opened and read on the worker serving the request (as nginx does): from the
//! page cache that is a copy, from a cold disk it blocks that worker for the read.

mod body;
mod cache;
mod conditional;
mod encoding;
mod mime;
mod request_path;
#[cfg(test)]
mod tests;
#[cfg(target_os = "linux")]
mod watch;

pub use body::Body;

use crate::http::file::{FileBody, SharedFile};
use bytes::Bytes;
use cache::{mtime, whole_seconds, Cache, Resolved, Variant};
use conditional::{Answer, Validators};
use encoding::Twin;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use std::convert::Infallible;
use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::task::{Context, Poll};

/// How a [`ServeDir`] serves.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// Files up to this size are kept in memory (default 64 KiB).
    pub cache_file_max: u64,
    /// What the cache may hold in all, bytes and per-entry metadata (default 64 MiB;
    /// 0 turns the cache off).
    pub cache_total_max: u64,
    /// Tried in order in a directory (default `index.html`).
    pub index_files: Vec<String>,
    /// Serve `.br` / `.gz` twins (default on).
    pub precompressed: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            cache_file_max: 64 * 1024,
            cache_total_max: 64 * 1024 * 1024,
            index_files: vec!["index.html".into()],
            precompressed: true,
        }
    }
}

/// Serves the files under a directory (see the module docs). Cheap to clone: clones
/// share the cache.
#[derive(Clone)]
pub struct ServeDir {
    inner: Arc<Inner>,
}

struct Inner {
    root: PathBuf,
    cfg: Config,
    cache: Arc<Cache>,
    #[cfg(target_os = "linux")]
    watcher: Option<Arc<watch::Watcher>>,
}

impl std::fmt::Debug for ServeDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeDir")
            .field("root", &self.inner.root)
            .field("config", &self.inner.cfg)
            .finish()
    }
}

impl ServeDir {
    /// Serves `root` with the default [`Config`].
    pub fn new(root: impl AsRef<Path>) -> ServeDir {
        ServeDir::with_config(root, Config::default())
    }

    /// Serves `root` as `cfg` says. A root that does not exist (yet) answers 404.
    pub fn with_config(root: impl AsRef<Path>, cfg: Config) -> ServeDir {
        let root = root.as_ref();
        let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        let cache = Arc::new(Cache::new(cfg.cache_total_max));
        #[cfg(target_os = "linux")]
        let watcher = if cfg.cache_total_max > 0 {
            watch::Watcher::start(Arc::downgrade(&cache))
        } else {
            None
        };
        ServeDir {
            inner: Arc::new(Inner {
                root,
                cfg,
                cache,
                #[cfg(target_os = "linux")]
                watcher,
            }),
        }
    }

    /// The response to `method` on `path` (the request's path as the service sees it:
    /// under `nest_service`, without the prefix) with the request's `headers`.
    fn respond(&self, method: &Method, path: &str, headers: &http::HeaderMap) -> Response<Body> {
        let head = match *method {
            Method::GET => false,
            Method::HEAD => true,
            _ => {
                let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "GET and HEAD only\n");
                r.headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
                return r;
            }
        };
        let resolved = match self.resolve(path) {
            Ok(Found::File(r)) => r,
            Ok(Found::Directory) => return redirect_to_slash(path),
            Ok(Found::Refused(request_path::Refused::BadEncoding)) => {
                return plain(StatusCode::BAD_REQUEST, "malformed percent-encoding\n")
            }
            Ok(Found::Refused(request_path::Refused::Traversal)) | Err(_) => return not_found(),
        };
        let accepted = if resolved.twins.is_empty() {
            Vec::new()
        } else {
            encoding::accepted(headers)
        };
        let (twin, v) = accepted
            .iter()
            .find_map(|t| resolved.twins.iter().find(|(have, _)| have == t))
            .map_or((None, &resolved.identity), |(t, v)| (Some(*t), v));
        let mut resp = match conditional::evaluate(headers, &v.validators, v.len, !head) {
            Answer::NotModified => empty(StatusCode::NOT_MODIFIED),
            Answer::PreconditionFailed => empty(StatusCode::PRECONDITION_FAILED),
            Answer::RangeNotSatisfiable => {
                let mut r = empty(StatusCode::RANGE_NOT_SATISFIABLE);
                let range = format!("bytes */{}", v.len);
                r.headers_mut().insert(header::CONTENT_RANGE, value(range));
                r
            }
            Answer::Whole => match self.body(v, 0, v.len, head) {
                Ok(body) => with_length(StatusCode::OK, body, v.len),
                Err(_) => return not_found(),
            },
            Answer::Part { start, len } => match self.body(v, start, len, head) {
                Ok(body) => {
                    let mut r = with_length(StatusCode::PARTIAL_CONTENT, body, len);
                    let range = format!("bytes {}-{}/{}", start, start + len - 1, v.len);
                    r.headers_mut().insert(header::CONTENT_RANGE, value(range));
                    r
                }
                Err(_) => return not_found(),
            },
        };
        let h = resp.headers_mut();
        h.insert(header::ETAG, v.etag.clone());
        h.insert(header::LAST_MODIFIED, v.last_modified.clone());
        h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
        if !resolved.twins.is_empty() {
            h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
        }
        if let Some(t) = twin {
            h.insert(
                header::CONTENT_ENCODING,
                HeaderValue::from_static(t.coding()),
            );
        }
        h.insert(header::CONTENT_TYPE, resolved.content_type.clone());
        resp
    }

    /// `len` bytes of `v` from `start`: from memory, or the file (none for HEAD). A file
    /// comes with the extension that lets fibr's HTTP/1 server find it behind a box.
    fn body(
        &self,
        v: &Variant,
        start: u64,
        len: u64,
        head: bool,
    ) -> io::Result<(Body, Option<SharedFile>)> {
        if head {
            return Ok((Body::empty(), None));
        }
        if let Some(bytes) = &v.bytes {
            let (s, e) = (start as usize, (start + len) as usize);
            return Ok((Body::bytes(bytes.slice(s..e)), None));
        }
        let file = File::open(&v.path)?;
        let (shared, body) = SharedFile::new(FileBody::range(file, start, len));
        Ok((Body::file(body), Some(shared)))
    }

    /// The request path's file, from the cache or the disk.
    fn resolve(&self, request_path: &str) -> io::Result<Found> {
        let validate = !self.watching();
        if let Some(hit) = self.inner.cache.get(request_path, validate) {
            return Ok(Found::File(hit));
        }
        let generation = self.inner.cache.generation();
        let (relative, slash) = match request_path::relative(request_path) {
            Ok(rel) => rel,
            Err(refused) => return Ok(Found::Refused(refused)),
        };
        let mut path = self.inner.root.join(relative);
        let mut meta = std::fs::metadata(&path)?;
        if meta.is_dir() {
            if !slash {
                return Ok(Found::Directory);
            }
            let index = self.inner.cfg.index_files.iter().find_map(|name| {
                let p = path.join(name);
                std::fs::metadata(&p)
                    .ok()
                    .filter(|m| m.is_file())
                    .map(|m| (p, m))
            });
            (path, meta) = index.ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        } else if slash || !meta.is_file() {
            // `file.txt/`, a device, a socket: nothing to serve.
            return Err(io::ErrorKind::NotFound.into());
        }
        // Symbolic links are followed only where they stay under the root.
        let real = std::fs::canonicalize(&path)?;
        if !real.starts_with(&self.inner.root) {
            return Err(io::ErrorKind::NotFound.into());
        }
        let dir = path.parent().unwrap_or(&self.inner.root).to_path_buf();
        let cacheable = self.inner.cfg.cache_total_max > 0 && self.watch(&dir);
        let identity = self.variant(path.clone(), &meta, "", cacheable)?;
        let mut twins = Vec::new();
        if self.inner.cfg.precompressed {
            for t in Twin::ALL {
                let mut p = path.clone().into_os_string();
                p.push(".");
                p.push(t.suffix());
                let p = PathBuf::from(p);
                let Ok(m) = std::fs::metadata(&p) else {
                    continue;
                };
                let inside =
                    std::fs::canonicalize(&p).is_ok_and(|r| r.starts_with(&self.inner.root));
                if m.is_file() && inside {
                    twins.push((t, self.variant(p, &m, t.suffix(), cacheable)?));
                }
            }
        }
        let content_type = HeaderValue::from_static(mime::content_type(&path));
        let resolved = Arc::new(Resolved {
            dir,
            content_type,
            identity,
            twins,
        });
        if cacheable {
            self.inner
                .cache
                .insert(request_path.to_owned(), resolved.clone(), generation);
        }
        Ok(Found::File(resolved))
    }

    /// One file's validators and headers, and its bytes if it is small enough to keep.
    fn variant(
        &self,
        path: PathBuf,
        meta: &Metadata,
        tag: &str,
        keep: bool,
    ) -> io::Result<Variant> {
        let modified = mtime(meta);
        let since_epoch = modified
            .duration_since(std::time::SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let etag = format!(
            "\"{:x}.{:x}-{:x}-{:x}{}{}\"",
            since_epoch.as_secs(),
            since_epoch.subsec_nanos(),
            meta.len(),
            meta.ino(),
            if tag.is_empty() { "" } else { "-" },
            tag
        );
        let whole = whole_seconds(modified);
        let bytes = if keep && meta.len() <= self.inner.cfg.cache_file_max {
            let mut buf = Vec::with_capacity(meta.len() as usize);
            File::open(&path)?.read_to_end(&mut buf)?;
            // Changed while read: served from the disk (the watch drops the entry).
            (buf.len() as u64 == meta.len()).then(|| Bytes::from(buf))
        } else {
            None
        };
        Ok(Variant {
            path,
            len: meta.len(),
            ino: meta.ino(),
            mtime: modified,
            etag: value(etag.clone()),
            last_modified: value(httpdate::fmt_http_date(whole)),
            validators: Validators {
                etag,
                modified: whole,
            },
            bytes,
        })
    }

    /// Whether the cache's entries are kept true by a watcher (else a `stat` per hit).
    fn watching(&self) -> bool {
        #[cfg(target_os = "linux")]
        return self.inner.watcher.is_some();
        #[cfg(not(target_os = "linux"))]
        return false;
    }

    /// Watches `dir` if there is a watcher; true if what is in it may be cached.
    fn watch(&self, dir: &Path) -> bool {
        #[cfg(target_os = "linux")]
        if let Some(w) = &self.inner.watcher {
            return w.watch(dir);
        }
        let _ = dir;
        true
    }
}

/// What a request path names.
enum Found {
    File(Arc<Resolved>),
    /// A directory asked for without its `/`.
    Directory,
    /// A path that could lead out of the root, or is malformed.
    Refused(request_path::Refused),
}

impl<B> tower_service::Service<Request<B>> for ServeDir {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        std::future::ready(Ok(self.respond(
            req.method(),
            req.uri().path(),
            req.headers(),
        )))
    }
}

fn value(s: String) -> HeaderValue {
    HeaderValue::try_from(s).expect("made of visible ASCII")
}

fn empty(status: StatusCode) -> Response<Body> {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = status;
    r
}

fn with_length(
    status: StatusCode,
    (body, shared): (Body, Option<SharedFile>),
    len: u64,
) -> Response<Body> {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    if let Some(shared) = shared {
        r.extensions_mut().insert(shared);
    }
    r.headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    r
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut r = Response::new(Body::bytes(Bytes::from_static(text.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn not_found() -> Response<Body> {
    plain(StatusCode::NOT_FOUND, "not found\n")
}

/// A directory without its `/`: 301 to the same path with it (relative, so that it holds
/// under any prefix the service is mounted at).
fn redirect_to_slash(path: &str) -> Response<Body> {
    let last = path.rsplit('/').next().unwrap_or("");
    let mut r = empty(StatusCode::MOVED_PERMANENTLY);
    let location = format!("./{last}/");
    r.headers_mut().insert(header::LOCATION, value(location));
    r
}
