//! [`FileBody`]: a response body read from a file, sent with sendfile(2) by fibr's
//! HTTP/1 server (and read in chunks by anything else that polls it).

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;
use std::pin::Pin;
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
        let want = (self.remaining as usize).min(CHUNK);
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
