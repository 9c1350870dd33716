//! [`FileBody`]: a response body read from a file, sent with sendfile(2) by fibr's
//! HTTP/1 server (and read in chunks by anything else that polls it).

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// Bytes read per frame when the body is polled rather than sent with sendfile.
const CHUNK: usize = 64 * 1024;

/// A byte range of a file as a response body. fibr's HTTP/1 server recognizes it and
/// hands the file to the kernel with sendfile(2), without copying it through user space.
#[derive(Debug)]
pub struct FileBody {
    file: File,
    offset: u64,
    remaining: u64,
}

impl FileBody {
    /// The whole file.
    pub fn new(file: File) -> io::Result<FileBody> {
        let len = file.metadata()?.len();
        Ok(FileBody {
            file,
            offset: 0,
            remaining: len,
        })
    }

    /// Opens the file at `path`.
    pub fn open(path: impl AsRef<Path>) -> io::Result<FileBody> {
        FileBody::new(File::open(path)?)
    }

    /// `len` bytes starting at `offset` (for Range responses).
    pub fn range(file: File, offset: u64, len: u64) -> FileBody {
        FileBody {
            file,
            offset,
            remaining: len,
        }
    }

    /// Bytes left to send.
    pub fn len(&self) -> u64 {
        self.remaining
    }

    /// True when nothing is left to send.
    pub fn is_empty(&self) -> bool {
        self.remaining == 0
    }

    /// Takes the rest of the body for sendfile: (file, offset, length).
    pub(crate) fn take_range(&mut self) -> (&File, u64, u64) {
        let range = (self.offset, self.remaining);
        self.offset += self.remaining;
        self.remaining = 0;
        (&self.file, range.0, range.1)
    }
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        if self.remaining == 0 {
            return Poll::Ready(None);
        }
        // The min in u64 first: on 32-bit targets `remaining` may not fit a usize.
        let want = self.remaining.min(CHUNK as u64) as usize;
        let mut buf = vec![0u8; want];
        let offset = self.offset;
        // Regular files are always "ready": a read blocks only as long as the disk takes.
        let read = self
            .file
            .seek(SeekFrom::Start(offset))
            .and_then(|_| self.file.read(&mut buf));
        match read {
            Ok(0) => Poll::Ready(Some(Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "file ended before the body's length",
            )))),
            Ok(n) => {
                buf.truncate(n);
                self.offset += n as u64;
                self.remaining -= n as u64;
                Poll::Ready(Some(Ok(Frame::data(Bytes::from(buf)))))
            }
            Err(e) => Poll::Ready(Some(Err(e))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

/// A [`FileBody`] that survives being boxed: the response carries it twice, as its body
/// ([`SharedFileBody`], which reads the file if polled) and as an extension (this), so
/// that fibr's HTTP/1 server can still find it behind an axum `Body` or another box and
/// send it with sendfile(2). Whoever takes the file first sends it.
#[derive(Clone, Debug)]
pub(crate) struct SharedFile {
    slot: Arc<Mutex<Option<FileBody>>>,
    len: u64,
}

impl SharedFile {
    /// The extension and the body for `file`.
    pub(crate) fn new(file: FileBody) -> (SharedFile, SharedFileBody) {
        let len = file.len();
        let shared = SharedFile {
            slot: Arc::new(Mutex::new(Some(file))),
            len,
        };
        let body = SharedFileBody {
            shared: shared.clone(),
            taken: None,
        };
        (shared, body)
    }

    /// The file, unless the body took it; `exact` is the response body's exact length
    /// as the server sees it: a middleware that changed the body (compression) changed
    /// that too, and the file is then left to the body.
    pub(crate) fn claim(&self, exact: Option<u64>) -> Option<FileBody> {
        if exact != Some(self.len) {
            return None;
        }
        let file = self.slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        #[cfg(test)]
        if file.is_some() {
            CLAIMED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        file
    }
}

/// Files the server took from a [`SharedFile`] (tests tell sendfile from polling by it).
#[cfg(test)]
pub(crate) static CLAIMED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The body half of a [`SharedFile`]: polled, it takes the file and reads it in chunks;
/// if the server took the file, it is empty.
#[derive(Debug)]
pub(crate) struct SharedFileBody {
    shared: SharedFile,
    taken: Option<FileBody>,
}

impl Body for SharedFileBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = &mut *self;
        if this.taken.is_none() {
            match this
                .shared
                .slot
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
            {
                Some(file) => this.taken = Some(file),
                None => return Poll::Ready(None),
            }
        }
        match &mut this.taken {
            Some(file) => Pin::new(file).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.taken {
            Some(file) => file.size_hint(),
            None => SizeHint::with_exact(self.shared.len),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    fn poll(body: &mut FileBody) -> Option<io::Result<Bytes>> {
        let mut cx = Context::from_waker(Waker::noop());
        match Pin::new(body).poll_frame(&mut cx) {
            Poll::Ready(f) => f.map(|r| r.map(|f| f.into_data().unwrap())),
            Poll::Pending => panic!("a file body is never pending"),
        }
    }

    #[test]
    fn polled_in_chunks_even_when_the_length_passes_u32() {
        let path = std::env::temp_dir().join(format!("fibr-file-unit-{}.bin", std::process::id()));
        let data: Vec<u8> = (0..CHUNK + 1000).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let file = File::open(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        // A range longer than the file and than u32::MAX: on a 32-bit target the old
        // `remaining as usize` read 5 bytes at a time, and then ended 4 GiB early.
        let mut body = FileBody::range(file, 0, (1u64 << 32) + 5);
        assert_eq!(body.size_hint().exact(), Some((1u64 << 32) + 5));
        let first = poll(&mut body).unwrap().unwrap();
        assert_eq!(first.len(), CHUNK);
        assert_eq!(first[..], data[..CHUNK]);
        let second = poll(&mut body).unwrap().unwrap();
        assert_eq!(second[..], data[CHUNK..]);
        assert_eq!(body.len(), (1u64 << 32) + 5 - data.len() as u64);
        // The file is shorter than the range: an error, not a silent end.
        let err = poll(&mut body).unwrap().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }
}
