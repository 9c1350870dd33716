//! UDP's batched calls: `recvmmsg`/`sendmmsg` with GRO and GSO where the kernel has them
//! (Linux), one datagram per call elsewhere; what QUIC's endpoints and UDP connections use.

use super::socket::{cvt, send_vectored, sockaddr_to_std, std_to_sockaddr, SEND_FLAGS};
use std::io::{self, IoSlice};
use std::mem::{size_of, MaybeUninit};
use std::net::SocketAddr;
use std::os::fd::RawFd;

/// The kernel's cap on the segments of one UDP GSO send (`UDP_MAX_SEGMENTS`; newer kernels
/// take more, every kernel with GSO takes this many).
pub(crate) const GSO_MAX_SEGMENTS: usize = 64;
/// Most payload bytes in one UDP send, GSO or not: an IPv4 packet's 65,535 bytes less its
/// IP and UDP headers (IPv6 allows a little more).
pub(crate) const MAX_UDP_PAYLOAD: usize = 65_507;

/// `Err(InvalidInput)` unless `segment_size` can be a UDP datagram's size (1..=65,507):
/// what `Conn::send_segments` and `UdpSender::send_segments_to` both refuse.
pub(crate) fn check_segment_size(segment_size: usize) -> io::Result<()> {
    if segment_size == 0 || segment_size > MAX_UDP_PAYLOAD {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "segment_size must be 1..=65507",
        ));
    }
    Ok(())
}

#[cfg(target_os = "linux")]
fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    val: libc::c_int,
) -> io::Result<()> {
    // SAFETY: passes a valid c_int option value of the right size.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&val as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

#[cfg(target_os = "linux")]
fn getsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut val: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: val and len describe a writable c_int.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            (&mut val as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok(val)
}

/// Turns on UDP_GRO (Linux 5.0+): the kernel may then hand over several datagrams of one
/// flow coalesced in one read, their size in a control message that [`recv_batch`] reads.
/// False where the kernel (or the OS) lacks it; reads then carry one datagram each.
pub(crate) fn set_udp_gro(fd: RawFd) -> bool {
    #[cfg(target_os = "linux")]
    {
        setsockopt_int(fd, libc::SOL_UDP, libc::UDP_GRO, 1).is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = fd;
        false
    }
}

/// Whether the kernel knows UDP_SEGMENT (GSO, Linux 4.18+) on this socket: the option then
/// reads back (the socket's default segment size, 0). A device that cannot do it still
/// fails the first GSO send with EIO, which [`send_batch`] handles.
pub(crate) fn udp_gso_supported(fd: RawFd) -> bool {
    #[cfg(target_os = "linux")]
    {
        getsockopt_int(fd, libc::SOL_UDP, libc::UDP_SEGMENT).is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = fd;
        false
    }
}

/// One received read's length and sender, filled by [`recv_batch`].
pub(crate) struct Datagram {
    pub len: usize,
    pub from: Option<SocketAddr>,
    /// With UDP_GRO: the size of the datagrams the kernel coalesced into this read (the
    /// last may be shorter). `None`: the read is one datagram.
    pub segment: Option<usize>,
}

impl Datagram {
    /// The datagrams of this read, `buf` being the buffer it was read into: one, or
    /// several when GRO coalesced them. An empty datagram is one empty slice.
    pub fn datagrams<'a>(&self, buf: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
        segments(&buf[..self.len], self.segment.unwrap_or(self.len))
    }
}

/// `data` cut into pieces of `size` bytes (the last may be shorter); at least one piece,
/// so an empty `data` is one empty datagram.
fn segments(data: &[u8], size: usize) -> impl Iterator<Item = &[u8]> {
    let size = if size == 0 || size > data.len() {
        data.len().max(1)
    } else {
        size
    };
    let count = data.len().div_ceil(size).max(1);
    (0..count).map(move |k| &data[k * size..((k + 1) * size).min(data.len())])
}

/// The segment size a UDP_GRO control message of a received header gives, if any.
#[cfg(target_os = "linux")]
///
/// # Safety
/// `hdr`'s control buffer was just filled by the kernel, which set its msg_controllen.
unsafe fn gro_segment(hdr: &libc::msghdr) -> Option<usize> {
    let mut c = libc::CMSG_FIRSTHDR(hdr);
    while !c.is_null() {
        if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == libc::UDP_GRO {
            let size = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
            return usize::try_from(size).ok().filter(|&s| s > 0);
        }
        c = libc::CMSG_NXTHDR(hdr, c);
    }
    None
}

/// Room for a message's control data: UDP_GRO's int on receive, UDP_SEGMENT's u16 on send.
#[cfg(target_os = "linux")]
const CMSG_BUF: usize = 64;

/// A control buffer aligned for `cmsghdr` (whose first field is a size_t).
#[cfg(target_os = "linux")]
#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct CmsgBuf([u8; CMSG_BUF]);

/// Receives up to `bufs.len()` reads in one call (recvmmsg on Linux). With UDP_GRO on (see
/// [`set_udp_gro`]) a read may hold several datagrams ([`Datagram::datagrams`]), up to
/// 64 KiB in all: give buffers that large.
pub(crate) fn recv_batch(
    fd: RawFd,
    bufs: &mut [impl AsMut<[u8]>],
    out: &mut Vec<Datagram>,
) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        const MAX: usize = 32;
        let n = bufs.len().min(MAX);
        let mut iovs: [MaybeUninit<libc::iovec>; MAX] = [const { MaybeUninit::uninit() }; MAX];
        // SAFETY: zeroed sockaddr_storage and mmsghdr are valid plain data.
        let mut addrs: [libc::sockaddr_storage; MAX] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; MAX] = unsafe { std::mem::zeroed() };
        let mut ctrl = [CmsgBuf([0; CMSG_BUF]); MAX];
        for i in 0..n {
            let buf = bufs[i].as_mut();
            iovs[i].write(libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            });
            msgs[i].msg_hdr.msg_iov = iovs[i].as_mut_ptr();
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_name = (&mut addrs[i] as *mut libc::sockaddr_storage).cast();
            msgs[i].msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            msgs[i].msg_hdr.msg_control = ctrl[i].0.as_mut_ptr().cast();
            msgs[i].msg_hdr.msg_controllen = CMSG_BUF as _;
        }
        // SAFETY: every header points at a live buffer, address slot and control buffer
        // for the call.
        let got = cvt(unsafe {
            libc::recvmmsg(
                fd,
                msgs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        })?;
        for i in 0..got as usize {
            let hdr = &msgs[i].msg_hdr;
            out.push(Datagram {
                len: msgs[i].msg_len as usize,
                // SAFETY: the kernel filled msg_namelen bytes of addrs[i].
                from: unsafe { sockaddr_to_std(&addrs[i], hdr.msg_namelen) },
                // SAFETY: the kernel just filled ctrl[i] and set msg_controllen for it.
                segment: unsafe { gro_segment(hdr) },
            });
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        for buf in bufs.iter_mut() {
            let buf = buf.as_mut();
            let mut storage = MaybeUninit::<libc::sockaddr_storage>::zeroed();
            let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            // SAFETY: buf, storage and len are valid for writes.
            let r = unsafe {
                libc::recvfrom(
                    fd,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    0,
                    storage.as_mut_ptr().cast(),
                    &mut len,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                return if out.is_empty() { Err(e) } else { Ok(()) };
            }
            // SAFETY: the kernel filled `len` bytes of storage.
            out.push(Datagram {
                len: r as usize,
                from: unsafe { sockaddr_to_std(storage.as_ptr(), len) },
                segment: None,
            });
        }
        Ok(())
    }
}

/// One entry of a send batch: `data` leaves as datagrams of `segment_size` bytes (the last
/// may be shorter), in one GSO send when there are several.
#[derive(Clone, Copy)]
pub(crate) struct OutDatagram<'a> {
    pub data: &'a [u8],
    pub segment_size: usize,
}

impl<'a> OutDatagram<'a> {
    /// One plain datagram.
    pub fn single(data: &'a [u8]) -> OutDatagram<'a> {
        OutDatagram {
            data,
            segment_size: data.len(),
        }
    }

    /// True if this entry carries several datagrams (a GSO send).
    #[cfg(target_os = "linux")]
    fn is_gso(&self) -> bool {
        self.segment_size > 0 && self.segment_size < self.data.len()
    }

    /// How many datagrams it carries.
    #[cfg(target_os = "linux")]
    fn count(&self) -> usize {
        segments(self.data, self.segment_size).count()
    }
}

/// Cuts `data` into send entries of `segment_size`-byte datagrams (the last may be
/// shorter): with `gso`, entries of up to [`GSO_MAX_SEGMENTS`] segments and
/// [`MAX_UDP_PAYLOAD`] bytes each; without, one entry per datagram.
pub(crate) fn push_segmented<'a>(
    out: &mut Vec<OutDatagram<'a>>,
    data: &'a [u8],
    segment_size: usize,
    gso: bool,
) {
    let size = if segment_size == 0 || segment_size > data.len() {
        data.len()
    } else {
        segment_size
    };
    let per_send = if gso && size > 0 {
        (MAX_UDP_PAYLOAD / size).clamp(1, GSO_MAX_SEGMENTS)
    } else {
        1
    };
    if per_send == 1 {
        out.extend(segments(data, size).map(OutDatagram::single));
        return;
    }
    for group in data.chunks(per_send * size) {
        out.push(OutDatagram {
            data: group,
            segment_size: size,
        });
    }
}

/// Sends `msgs` to `to`, several per call where the OS can (sendmmsg on Linux). An entry
/// of several datagrams goes as one send with a UDP_SEGMENT control message (GSO); if the
/// kernel refuses that with EIO or EINVAL (a device without UDP segmentation offload),
/// `gso` is turned off and the rest goes again as separate datagrams.
/// Returns how many datagrams were sent; a full socket buffer stops the batch early.
pub(crate) fn send_batch(
    fd: RawFd,
    to: SocketAddr,
    msgs: &[OutDatagram<'_>],
    gso: &std::sync::atomic::AtomicBool,
) -> io::Result<usize> {
    // SAFETY: all-zero sockaddr_storage is valid plain data.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let namelen = std_to_sockaddr(&to, &mut storage);
    #[cfg(target_os = "linux")]
    {
        const MAX: usize = 32;
        // SAFETY: CMSG_SPACE and CMSG_LEN are arithmetic on a constant.
        let (space, cmsg_len) = unsafe {
            (
                libc::CMSG_SPACE(size_of::<u16>() as libc::c_uint) as usize,
                libc::CMSG_LEN(size_of::<u16>() as libc::c_uint) as usize,
            )
        };
        let mut sent = 0;
        let mut at = 0;
        while at < msgs.len() {
            let group = &msgs[at..msgs.len().min(at + MAX)];
            let mut iovs: [MaybeUninit<libc::iovec>; MAX] = [const { MaybeUninit::uninit() }; MAX];
            // SAFETY: zeroed mmsghdr is valid plain data.
            let mut hdrs: [libc::mmsghdr; MAX] = unsafe { std::mem::zeroed() };
            let mut ctrl = [CmsgBuf([0; CMSG_BUF]); MAX];
            for (i, d) in group.iter().enumerate() {
                iovs[i].write(libc::iovec {
                    iov_base: d.data.as_ptr() as *mut _,
                    iov_len: d.data.len(),
                });
                let hdr = &mut hdrs[i].msg_hdr;
                hdr.msg_iov = iovs[i].as_mut_ptr();
                hdr.msg_iovlen = 1;
                hdr.msg_name = (&mut storage as *mut libc::sockaddr_storage).cast();
                hdr.msg_namelen = namelen;
                if d.is_gso() {
                    hdr.msg_control = ctrl[i].0.as_mut_ptr().cast();
                    hdr.msg_controllen = space as _;
                    // SAFETY: msg_control points at CMSG_BUF (>= space) writable bytes,
                    // aligned for cmsghdr, so the first header and its u16 fit.
                    unsafe {
                        let c = libc::CMSG_FIRSTHDR(hdr);
                        (*c).cmsg_level = libc::SOL_UDP;
                        (*c).cmsg_type = libc::UDP_SEGMENT;
                        (*c).cmsg_len = cmsg_len as _;
                        std::ptr::write_unaligned(
                            libc::CMSG_DATA(c).cast::<u16>(),
                            d.segment_size as u16,
                        );
                    }
                }
            }
            // SAFETY: every header points at live data, the address and its control
            // buffer for the call.
            let n = unsafe {
                libc::sendmmsg(
                    fd,
                    hdrs.as_mut_ptr(),
                    group.len() as libc::c_uint,
                    SEND_FLAGS,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                if group[0].is_gso() && matches!(e.raw_os_error(), Some(libc::EIO | libc::EINVAL)) {
                    if gso.swap(false, std::sync::atomic::Ordering::Relaxed) {
                        tracing::debug!(error = %e, "UDP GSO refused; sending datagrams one by one");
                    }
                    let mut singles = Vec::new();
                    for m in &msgs[at..] {
                        push_segmented(&mut singles, m.data, m.segment_size, false);
                    }
                    return match send_batch(fd, to, &singles, gso) {
                        Ok(k) => Ok(sent + k),
                        Err(e) if sent == 0 => Err(e),
                        Err(_) => Ok(sent),
                    };
                }
                return if sent == 0 { Err(e) } else { Ok(sent) };
            }
            let n = n as usize;
            sent += group[..n].iter().map(OutDatagram::count).sum::<usize>();
            at += n;
            // sendmmsg stops at an entry it cannot send and keeps the reason: a full buffer
            // ends the batch, but a GSO entry is tried again first to learn why it failed.
            if n == 0 || (n < group.len() && !msgs[at].is_gso()) {
                break;
            }
        }
        Ok(sent)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = gso;
        let mut sent = 0;
        for m in msgs {
            for d in segments(m.data, m.segment_size) {
                // SAFETY: d and storage are valid for reads for the call.
                let r = unsafe {
                    libc::sendto(
                        fd,
                        d.as_ptr().cast(),
                        d.len(),
                        SEND_FLAGS,
                        (&storage as *const libc::sockaddr_storage).cast(),
                        namelen,
                    )
                };
                if r < 0 {
                    let e = io::Error::last_os_error();
                    return if sent == 0 { Err(e) } else { Ok(sent) };
                }
                sent += 1;
            }
        }
        Ok(sent)
    }
}

/// Sends one datagram on a connected UDP socket or to an address.
pub(crate) fn send_to(fd: RawFd, buf: &[u8], to: Option<SocketAddr>) -> io::Result<usize> {
    match to {
        Some(addr) => send_batch(
            fd,
            addr,
            &[OutDatagram::single(buf)],
            &std::sync::atomic::AtomicBool::new(false),
        )
        .and_then(|n| {
            if n == 1 {
                Ok(buf.len())
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            }
        }),
        None => send_vectored(fd, &[IoSlice::new(buf)]),
    }
}

/// Receives one datagram and its sender.
pub(crate) fn recv_from(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<SocketAddr>)> {
    let mut storage = MaybeUninit::<libc::sockaddr_storage>::zeroed();
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: buf, storage and len are valid for writes.
    let n = cvt(unsafe {
        libc::recvfrom(
            fd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            0,
            storage.as_mut_ptr().cast(),
            &mut len,
        )
    })?;
    // SAFETY: the kernel filled `len` bytes of storage.
    Ok((n as usize, unsafe {
        sockaddr_to_std(storage.as_ptr(), len)
    }))
}

#[cfg(all(test, target_os = "linux"))]
mod udp_offload_tests {
    use super::super::socket::{local_addr, udp_socket};
    use super::*;
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    fn bound() -> (OwnedFd, SocketAddr) {
        let fd = udp_socket("127.0.0.1:0".parse().unwrap()).unwrap();
        // Room for hundreds of small datagrams (each costs far more than its bytes).
        setsockopt_int(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, 2 << 20).unwrap();
        let addr = local_addr(fd.as_raw_fd()).unwrap();
        (fd, addr)
    }

    /// `len` bytes whose every byte depends on its datagram `index` and position.
    fn payload(index: usize, len: usize) -> Vec<u8> {
        (0..len).map(|i| (index * 31 + i * 7) as u8).collect()
    }

    /// Reads until `want` datagrams came (split as a handler would see them); also
    /// returns how many reads GRO had coalesced.
    fn receive(fd: RawFd, want: usize) -> (Vec<Vec<u8>>, usize) {
        let mut bufs = vec![vec![0u8; 65_536]; 8];
        let mut got = Vec::new();
        let mut coalesced = 0;
        let deadline = Instant::now() + Duration::from_secs(5);
        while got.len() < want && Instant::now() < deadline {
            let mut reads = Vec::new();
            match recv_batch(fd, &mut bufs, &mut reads) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(2));
                    continue;
                }
                Err(e) => panic!("recv_batch: {e}"),
            }
            for (i, r) in reads.iter().enumerate() {
                if r.segment.is_some_and(|s| s < r.len) {
                    coalesced += 1;
                }
                got.extend(r.datagrams(&bufs[i]).map(|d| d.to_vec()));
            }
        }
        (got, coalesced)
    }

    fn burst(count: usize, size: usize, last: usize) -> (Vec<u8>, Vec<Vec<u8>>) {
        let parts: Vec<Vec<u8>> = (0..count)
            .map(|k| payload(k, if k + 1 == count { last } else { size }))
            .collect();
        (parts.concat(), parts)
    }

    #[test]
    fn udp_segmenting_limits() {
        let data = vec![0u8; 100 * 1400];
        let mut out = Vec::new();
        push_segmented(&mut out, &data, 1400, true);
        // 65,507 / 1400 = 46 segments per GSO send.
        let lens: Vec<usize> = out.iter().map(|d| d.data.len()).collect();
        assert_eq!(lens, [46 * 1400, 46 * 1400, 8 * 1400]);
        assert!(out.iter().all(|d| d.segment_size == 1400 && d.is_gso()));
        let mut out = Vec::new();
        push_segmented(&mut out, &data[..200 * 100], 100, true);
        assert_eq!(out.len(), 4, "64 segments at most per send");
        assert!(out.iter().all(|d| d.count() <= GSO_MAX_SEGMENTS));
        let mut out = Vec::new();
        push_segmented(&mut out, &data[..2500], 1000, false);
        let lens: Vec<usize> = out.iter().map(|d| d.data.len()).collect();
        assert_eq!(lens, [1000, 1000, 500]);
        assert!(out.iter().all(|d| !d.is_gso()));
        let mut out = Vec::new();
        push_segmented(&mut out, &data[..500], 1000, true);
        assert_eq!(out.len(), 1);
        assert!(!out[0].is_gso(), "one datagram is a plain send");
    }

    /// A GSO burst to a GRO socket: one coalesced read on kernels with both, split back
    /// into the datagrams sent; with GRO off, the kernel splits it itself.
    #[test]
    fn udp_gso_burst_read_with_and_without_gro() {
        for gro in [true, false] {
            let (rx, rx_addr) = bound();
            let gro_on = gro && set_udp_gro(rx.as_raw_fd());
            let (tx, _) = bound();
            let gso = AtomicBool::new(udp_gso_supported(tx.as_raw_fd()));
            let gso_on = gso.load(Ordering::Relaxed);
            let (data, parts) = burst(11, 1000, 300);
            let mut entries = Vec::new();
            push_segmented(&mut entries, &data, 1000, gso_on);
            let sent = send_batch(tx.as_raw_fd(), rx_addr, &entries, &gso).unwrap();
            assert_eq!(sent, 11);
            let (got, coalesced) = receive(rx.as_raw_fd(), 11);
            assert_eq!(got.len(), 11, "gro {gro_on} gso {gso_on}");
            assert!(
                got == parts,
                "datagrams differ (gro {gro_on}, gso {gso_on})"
            );
            if gro_on && gso_on {
                assert!(
                    coalesced > 0,
                    "GRO on and a GSO send, yet no coalesced read"
                );
            } else {
                assert_eq!(coalesced, 0);
            }
            eprintln!("gro {gro_on} gso {gso_on}: {coalesced} coalesced reads");
        }
    }

    /// A GSO send the kernel refuses (more segments than it takes: EINVAL) turns GSO off
    /// and goes again as separate datagrams.
    #[test]
    fn udp_refused_gso_send_falls_back_to_datagrams() {
        let (rx, rx_addr) = bound();
        let (tx, _) = bound();
        if !udp_gso_supported(tx.as_raw_fd()) {
            eprintln!("no UDP_SEGMENT here: nothing to refuse");
            return;
        }
        let gso = AtomicBool::new(true);
        let (data, parts) = burst(300, 10, 10);
        // One entry of 300 segments: past every kernel's UDP_MAX_SEGMENTS.
        let entries = [
            OutDatagram::single(b"first"),
            OutDatagram {
                data: &data,
                segment_size: 10,
            },
            OutDatagram::single(b"last"),
        ];
        let sent = send_batch(tx.as_raw_fd(), rx_addr, &entries, &gso).unwrap();
        assert_eq!(sent, 302);
        assert!(!gso.load(Ordering::Relaxed), "the refusal turned GSO off");
        let (got, _) = receive(rx.as_raw_fd(), 302);
        assert_eq!(got.len(), 302);
        assert_eq!(got[0], b"first");
        assert!(got[1..301] == parts[..]);
        assert_eq!(got[301], b"last");
    }
}
