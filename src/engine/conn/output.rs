//! A connection's output: what the round corked plus what earlier rounds left queued.
//!
//! Small sends are appended to a pooled buffer, so a round's responses usually leave in
//! one contiguous write. Whatever the socket does not take is moved into exact-size owned
//! chunks, so the pooled buffer goes back and a backed-up connection holds only its data.

use crate::engine::buf::PooledBuf;
use crate::engine::sys::socket;
use std::cell::Cell;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, RawFd};
#[cfg(target_os = "linux")]
use {super::splice::Pipe, std::sync::Arc};

/// Sends at least this large are copied into their own chunk instead of the cork.
const CORK_SIZE: usize = 16 * 1024;
/// Most buffers gathered into one vectored write.
const MAX_IOVECS: usize = 64;

thread_local! {
    /// An emptied chunk queue, kept for the next connection this thread writes for: an idle
    /// connection holds no queue, and without this each keep-alive response's write would
    /// allocate one and free it again.
    static SPARE_CHUNKS: Cell<VecDeque<Chunk>> = const { Cell::new(VecDeque::new()) };
}

/// A spare queue grown past this many chunks (a backed-up connection's) is freed.
const SPARE_MAX_CHUNKS: usize = 8;

enum Data {
    Pooled(PooledBuf),
    Owned(Vec<u8>),
}

impl Data {
    fn bytes(&self) -> &[u8] {
        match self {
            Data::Pooled(b) => b,
            Data::Owned(v) => v,
        }
    }
}

enum Chunk {
    Bytes {
        data: Data,
        pos: usize,
    },
    File {
        file: File,
        offset: u64,
        remaining: u64,
    },
    Datagram(Datagrams),
    /// Bytes in a pipe, spliced into the socket (see `super::splice`).
    #[cfg(target_os = "linux")]
    Pipe {
        pipe: Arc<Pipe>,
        len: usize,
    },
}

/// Datagrams queued on a UDP peer: `data` leaves as datagrams of `segment_size` bytes (the
/// last may be shorter); a plain send is one datagram of `data.len()`.
pub(crate) struct Datagrams {
    pub data: Vec<u8>,
    pub segment_size: usize,
}

#[derive(Default)]
pub(crate) struct Output {
    chunks: VecDeque<Chunk>,
    /// Bytes not yet written, in u64: a file range may be longer than `usize` (32-bit
    /// targets), and a count that wrapped or saturated would reach 0 with data still queued.
    queued: u64,
}

impl Output {
    /// Bytes not yet written (`usize::MAX` if more than that).
    pub fn queued(&self) -> usize {
        usize::try_from(self.queued).unwrap_or(usize::MAX)
    }

    pub fn clear(&mut self) {
        self.chunks.clear();
        self.release_chunks();
        self.queued = 0;
    }

    /// Queues `chunk` last, in the thread's spare queue if this one has no room yet.
    fn push(&mut self, chunk: Chunk) {
        if self.chunks.capacity() == 0 {
            self.chunks = SPARE_CHUNKS.try_with(Cell::take).unwrap_or_default();
        }
        self.chunks.push_back(chunk);
    }

    /// Gives the (empty) queue's memory to the thread's spare: the connection keeps none.
    fn release_chunks(&mut self) {
        debug_assert!(self.chunks.is_empty());
        let chunks = std::mem::take(&mut self.chunks);
        if chunks.capacity() > 0 && chunks.capacity() <= SPARE_MAX_CHUNKS {
            let _ = SPARE_CHUNKS.try_with(|spare| spare.replace(chunks));
        }
    }

    pub fn push_bytes(&mut self, bufs: &[IoSlice<'_>]) {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if total == 0 {
            return;
        }
        self.queued += total as u64;
        if let Some(Chunk::Bytes {
            data: Data::Pooled(cork),
            ..
        }) = self.chunks.back_mut()
        {
            let v = cork.vec_mut();
            if v.capacity() - v.len() >= total {
                for b in bufs {
                    v.extend_from_slice(b);
                }
                return;
            }
        }
        let data = if total < CORK_SIZE {
            let mut cork = PooledBuf::take_empty(CORK_SIZE);
            for b in bufs {
                cork.vec_mut().extend_from_slice(b);
            }
            Data::Pooled(cork)
        } else {
            let mut v = Vec::with_capacity(total);
            for b in bufs {
                v.extend_from_slice(b);
            }
            Data::Owned(v)
        };
        self.push(Chunk::Bytes { data, pos: 0 });
    }

    /// Queues `data` as it is (no copy): bytes a layer produced (handshake, alerts).
    pub fn push_owned(&mut self, data: Vec<u8>) {
        if data.is_empty() {
            return;
        }
        self.queued += data.len() as u64;
        self.push(Chunk::Bytes {
            data: Data::Owned(data),
            pos: 0,
        });
    }

    /// Lets `f` append to the back of the queue (a layer sealing records into it), with
    /// room for `reserve` bytes made first, so small records share the cork.
    pub fn append_with<R>(&mut self, reserve: usize, f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        let fits = matches!(self.chunks.back_mut(), Some(Chunk::Bytes {
            data: Data::Pooled(cork),
            ..
        }) if cork.spare() >= reserve);
        if !fits {
            let data = if reserve <= CORK_SIZE {
                Data::Pooled(PooledBuf::take_empty(CORK_SIZE))
            } else {
                Data::Owned(Vec::with_capacity(reserve))
            };
            self.push(Chunk::Bytes { data, pos: 0 });
        }
        let Some(Chunk::Bytes { data, .. }) = self.chunks.back_mut() else {
            unreachable!("a bytes chunk was just made the back one")
        };
        let vec = match data {
            Data::Pooled(cork) => cork.vec_mut(),
            Data::Owned(v) => v,
        };
        let before = vec.len();
        let r = f(vec);
        let added = vec.len().saturating_sub(before);
        let empty = vec.is_empty();
        self.queued += added as u64;
        if empty {
            // A chunk with nothing to write would stall the write loop.
            self.chunks.pop_back();
        }
        r
    }

    /// Hands up to `max` bytes from the front to `f` and drops them (a layer sealing
    /// staged plaintext); a file range is read into `scratch` first.
    pub fn take_front(
        &mut self,
        max: usize,
        scratch: &mut Vec<u8>,
        f: impl FnOnce(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        match self.chunks.front_mut() {
            None => Ok(()),
            Some(Chunk::Bytes { data, pos }) => {
                let bytes = &data.bytes()[*pos..];
                let n = bytes.len().min(max);
                f(&bytes[..n])?;
                self.advance(n);
                Ok(())
            }
            Some(Chunk::File {
                file,
                offset,
                remaining,
            }) => {
                use std::os::unix::fs::FileExt;
                // The min in u64 first: `remaining` may not fit a usize.
                let want = (*remaining).min(max as u64) as usize;
                scratch.resize(want, 0);
                let n = file.read_at(scratch, *offset)?;
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file ended before the length given to send_file",
                    ));
                }
                *offset += n as u64;
                *remaining -= n as u64;
                self.queued -= n as u64;
                if *remaining == 0 {
                    self.chunks.pop_front();
                }
                f(&scratch[..n])
            }
            Some(Chunk::Datagram(_)) => {
                Err(io::Error::other("datagram queued on a stream connection"))
            }
            #[cfg(target_os = "linux")]
            Some(Chunk::Pipe { .. }) => Err(io::Error::other(
                "spliced bytes queued on a connection with a layer",
            )),
        }
    }

    pub fn push_file(&mut self, file: File, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        self.queued += len;
        self.push(Chunk::File {
            file,
            offset,
            remaining: len,
        });
    }

    /// Queues `len` bytes just spliced into `pipe` (after the pipe's bytes queued before).
    #[cfg(target_os = "linux")]
    pub fn push_pipe(&mut self, pipe: &Arc<Pipe>, len: usize) {
        self.queued += len as u64;
        if let Some(Chunk::Pipe { pipe: back, len: n }) = self.chunks.back_mut() {
            if Arc::ptr_eq(back, pipe) {
                *n += len;
                return;
            }
        }
        self.push(Chunk::Pipe {
            pipe: pipe.clone(),
            len,
        });
    }

    pub fn push_datagram(&mut self, d: &[u8]) {
        self.push_segments(d, d.len());
    }

    /// Queues `data` as datagrams of `segment_size` bytes, the last may be shorter (UDP).
    pub fn push_segments(&mut self, data: &[u8], segment_size: usize) {
        self.queued += data.len() as u64;
        self.push(Chunk::Datagram(Datagrams {
            data: data.to_vec(),
            segment_size,
        }));
    }

    /// Takes the queued datagrams (UDP peers).
    pub fn take_datagrams(&mut self) -> Vec<Datagrams> {
        self.queued = 0;
        std::mem::take(&mut self.chunks)
            .into_iter()
            .filter_map(|c| match c {
                Chunk::Datagram(d) => Some(d),
                _ => None,
            })
            .collect()
    }

    /// Writes until everything is out or the socket would block. Errors other than
    /// `WouldBlock` are returned (the connection is then broken).
    pub fn write_to(&mut self, fd: RawFd) -> io::Result<()> {
        let res = self.write_loop(fd);
        if !self.chunks.is_empty() {
            self.release_pooled();
        } else if self.chunks.capacity() > 0 {
            // An idle connection keeps no output memory at all.
            self.release_chunks();
        }
        res
    }

    fn write_loop(&mut self, fd: RawFd) -> io::Result<()> {
        loop {
            match self.chunks.front_mut() {
                None => return Ok(()),
                Some(Chunk::File {
                    file,
                    offset,
                    remaining,
                }) => {
                    // The min in u64 first: `remaining` may not fit a usize.
                    let want = (*remaining).min(1 << 30) as usize;
                    match socket::sendfile(fd, file.as_raw_fd(), offset, want) {
                        Ok(0) => {
                            // The file is shorter than promised: the peer can never get the rest.
                            return Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "file ended before the length given to send_file",
                            ));
                        }
                        Ok(n) => {
                            *remaining -= n as u64;
                            self.queued -= n as u64;
                            if *remaining == 0 {
                                self.chunks.pop_front();
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                Some(Chunk::Datagram(_)) => {
                    return Err(io::Error::other("datagram queued on a stream connection"));
                }
                #[cfg(target_os = "linux")]
                Some(Chunk::Pipe { pipe, len }) => match pipe.splice_out(fd, *len) {
                    Ok(n) => {
                        *len -= n;
                        self.queued -= n as u64;
                        if *len == 0 {
                            self.chunks.pop_front();
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                },
                Some(Chunk::Bytes { .. }) => {
                    let one: [IoSlice<'_>; 1];
                    let mut iov: [IoSlice<'_>; MAX_IOVECS];
                    let slices: &[IoSlice<'_>] = if let (1, Some(Chunk::Bytes { data, pos })) =
                        (self.chunks.len(), self.chunks.front())
                    {
                        // Usually the round's one cork: no array of slices to fill.
                        one = [IoSlice::new(&data.bytes()[*pos..])];
                        &one
                    } else {
                        iov = [IoSlice::new(&[]); MAX_IOVECS];
                        let mut n = 0;
                        for c in self.chunks.iter() {
                            match c {
                                Chunk::Bytes { data, pos } if n < MAX_IOVECS => {
                                    iov[n] = IoSlice::new(&data.bytes()[*pos..]);
                                    n += 1;
                                }
                                _ => break,
                            }
                        }
                        &iov[..n]
                    };
                    let wanted: usize = slices.iter().map(|b| b.len()).sum();
                    match socket::send_vectored(fd, slices) {
                        Ok(written) => {
                            self.advance(written);
                            if written < wanted {
                                // A short write means the socket buffer is full.
                                return Ok(());
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
    }

    fn advance(&mut self, mut n: usize) {
        self.queued -= n as u64;
        while n > 0 {
            let Some(Chunk::Bytes { data, pos }) = self.chunks.front_mut() else {
                return;
            };
            let left = data.bytes().len() - *pos;
            if n >= left {
                n -= left;
                self.chunks.pop_front();
            } else {
                *pos += n;
                n = 0;
            }
        }
    }

    /// Copies leftovers out of pooled buffers so those go back to the pool.
    fn release_pooled(&mut self) {
        for c in self.chunks.iter_mut() {
            if let Chunk::Bytes {
                data: data @ Data::Pooled(_),
                pos,
            } = c
            {
                let rest = data.bytes()[*pos..].to_vec();
                *data = Data::Owned(rest);
                *pos = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_sends_share_one_buffer() {
        let mut o = Output::default();
        o.push_bytes(&[IoSlice::new(b"ab")]);
        o.push_bytes(&[IoSlice::new(b"cd"), IoSlice::new(b"e")]);
        assert_eq!(o.queued(), 5);
        assert_eq!(o.chunks.len(), 1);
        o.push_bytes(&[IoSlice::new(&vec![1u8; 20_000])]);
        assert_eq!(o.chunks.len(), 2);
        o.advance(3);
        assert_eq!(o.queued(), 20_002);
        o.release_pooled();
        match &o.chunks[0] {
            Chunk::Bytes {
                data: Data::Owned(v),
                pos: 0,
            } => assert_eq!(v, b"de"),
            _ => panic!("leftover should be owned"),
        }
    }

    /// Bytes queued before spliced ones leave first and the pipe's bytes follow in order;
    /// consecutive moves into one pipe are one chunk.
    #[cfg(target_os = "linux")]
    #[test]
    fn spliced_bytes_leave_in_order_behind_earlier_output() {
        use std::io::{Read, Write};
        use std::os::unix::net::UnixStream;
        let pipe = Arc::new(Pipe::new(std::sync::Weak::new(), 64 * 1024).unwrap());
        let (mut from, source) = UnixStream::pair().unwrap();
        let (dest, mut to) = UnixStream::pair().unwrap();
        dest.set_nonblocking(true).unwrap();
        let mut o = Output::default();
        o.push_bytes(&[IoSlice::new(b"first ")]);
        for part in [&b"second "[..], b"third"] {
            from.write_all(part).unwrap();
            let n = pipe.splice_in(source.as_raw_fd(), 1024).unwrap();
            assert_eq!(n, part.len());
            o.push_pipe(&pipe, n);
        }
        assert_eq!(o.chunks.len(), 2);
        assert_eq!(o.queued(), 18);
        o.write_to(dest.as_raw_fd()).unwrap();
        assert_eq!(o.queued(), 0);
        assert!(o.chunks.is_empty());
        drop(dest);
        let mut got = String::new();
        to.read_to_string(&mut got).unwrap();
        assert_eq!(got, "first second third");
    }

    #[test]
    fn a_file_range_longer_than_u32_is_counted_whole() {
        // On a 32-bit target `len as usize` kept 5 of these bytes: the output looked
        // drained (queued 0 closes or hands the socket over) with 4 GiB still to send.
        let len = (1u64 << 32) + 5;
        let mut o = Output::default();
        o.push_file(File::open("/dev/null").unwrap(), 0, len);
        assert_eq!(o.queued, len);
        assert_eq!(o.queued(), usize::try_from(len).unwrap_or(usize::MAX));
        o.push_bytes(&[IoSlice::new(b"tail")]);
        assert_eq!(o.queued, len + 4);
        assert!(o.queued() > u32::MAX as usize || usize::BITS == 32);
    }
}
