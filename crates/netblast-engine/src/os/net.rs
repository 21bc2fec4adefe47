//! Socket system calls used on the hot paths of the message generators, without std's
//! buffering or retries: one call here is one system call.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

fn check(rc: isize) -> io::Result<usize> {
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(rc as usize) }
}

/// `send(2)` with `MSG_NOSIGNAL` added.
#[inline]
pub fn send(fd: RawFd, buf: &[u8], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reads of its length for the duration of the call.
    check(unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), flags | libc::MSG_NOSIGNAL) })
}

/// `recv(2)`; `Ok(0)` is end of file on TCP.
#[inline]
pub fn recv(fd: RawFd, buf: &mut [u8], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of its length for the duration of the call.
    check(unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), flags) })
}

/// Sets SO_SNDTIMEO and SO_RCVTIMEO, so blocking calls return `EAGAIN` after `t` and loops
/// can look at the clock and the run flags.
pub fn set_timeouts(fd: RawFd, t: Duration) -> io::Result<()> {
    let b = Fd(fd);
    let s = socket2::SockRef::from(&b);
    s.set_read_timeout(Some(t))?;
    s.set_write_timeout(Some(t))
}

/// Puts a socket in blocking (`true`) or non-blocking mode.
pub fn set_blocking(fd: RawFd, blocking: bool) -> io::Result<()> {
    let b = Fd(fd);
    socket2::SockRef::from(&b).set_nonblocking(!blocking)
}

/// Sets an integer socket option.
pub fn set_int_opt(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: `value` is a valid c_int for the option length given.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Waits until one of `fds` is readable or `timeout` passes; returns which are readable.
pub fn poll_readable(fds: &[RawFd], timeout: Duration) -> io::Result<Vec<bool>> {
    let mut p: Vec<libc::pollfd> =
        fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: `p` is a valid array of `p.len()` pollfd structs.
    let rc = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![false; fds.len()]);
        }
        return Err(e);
    }
    Ok(p.iter().map(|x| x.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0).collect())
}

/// Datagrams the kernel dropped at a UDP socket because its receive queue was full: the
/// `drops` column of /proc/net/udp (or udp6) for the socket's inode. `None` when not found.
pub fn udp_drops(fd: RawFd) -> Option<u64> {
    // SAFETY: stat is plain data; fstat fills it for an open descriptor.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid stat buffer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return None;
    }
    let inode = st.st_ino.to_string();
    for table in ["/proc/net/udp", "/proc/net/udp6"] {
        let Ok(text) = std::fs::read_to_string(table) else { continue };
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            // sl local rem st tx:rx tr:tm retrnsmt uid timeout inode ref pointer drops
            if cols.len() >= 13 && cols[9] == inode {
                return cols[12].parse().ok();
            }
        }
    }
    None
}

/// A borrowed raw descriptor for socket2's `SockRef`.
struct Fd(RawFd);

impl std::os::fd::AsFd for Fd {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        // SAFETY: callers pass descriptors they own and keep open for the duration of the call.
        unsafe { std::os::fd::BorrowedFd::borrow_raw(self.0) }
    }
}

/// One message header per iovec (one buffer per message), for `sendmmsg`/`recvmmsg`.
fn headers_for(iovs: &mut [libc::iovec]) -> Box<[libc::mmsghdr]> {
    iovs.iter_mut()
        .map(|iov| {
            // SAFETY: mmsghdr is plain data; zeroed is a valid empty header.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
            h
        })
        .collect()
}

/// A batch of messages for `sendmmsg`, every entry pointing at the same payload.
pub struct SendBatch {
    // The iovecs and headers hold raw pointers into `payload` and `iovs`: both are boxed
    // slices that never move or resize after construction.
    _payload: Box<[u8]>,
    iovs: Box<[libc::iovec]>,
    hdrs: Box<[libc::mmsghdr]>,
}

// SAFETY: the raw pointers only refer to the struct's own heap allocations, which move with it.
unsafe impl Send for SendBatch {}

impl SendBatch {
    /// A batch of `n` messages, each a copy of `payload`.
    pub fn new(payload: &[u8], n: usize) -> SendBatch {
        let payload: Box<[u8]> = payload.into();
        let mut iovs: Box<[libc::iovec]> = (0..n)
            .map(|_| libc::iovec { iov_base: payload.as_ptr() as *mut libc::c_void, iov_len: payload.len() })
            .collect();
        let hdrs = headers_for(&mut iovs);
        SendBatch { _payload: payload, iovs, hdrs }
    }

    /// Sends the batch with one `sendmmsg` (`flags` for each message, `MSG_EOR` say); returns
    /// (messages sent, bytes sent).
    pub fn send(&mut self, fd: RawFd, flags: libc::c_int) -> io::Result<(usize, u64)> {
        debug_assert_eq!(self.iovs.len(), self.hdrs.len());
        // SAFETY: `hdrs` holds `len` valid headers whose iovecs point into live buffers.
        let rc =
            unsafe { libc::sendmmsg(fd, self.hdrs.as_mut_ptr(), self.hdrs.len() as u32, flags | libc::MSG_NOSIGNAL) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = rc as usize;
        let bytes = self.hdrs[..n].iter().map(|h| h.msg_len as u64).sum();
        Ok((n, bytes))
    }
}

/// A batch of datagrams for `sendmmsg`, each with a buffer of its own (sequenced datagrams
/// carry a different header each).
pub struct OwnBatch {
    // As in SendBatch: boxed slices that never move or resize after construction.
    bufs: Box<[u8]>,
    size: usize,
    iovs: Box<[libc::iovec]>,
    hdrs: Box<[libc::mmsghdr]>,
}

// SAFETY: the raw pointers only refer to the struct's own heap allocations, which move with it.
unsafe impl Send for OwnBatch {}

impl OwnBatch {
    /// `n` datagrams of `size` bytes, each filled with `fill`.
    pub fn new(size: usize, n: usize, fill: u8) -> OwnBatch {
        let mut bufs: Box<[u8]> = vec![fill; n * size].into();
        let base = bufs.as_mut_ptr();
        let mut iovs: Box<[libc::iovec]> = (0..n)
            // SAFETY: i * size < n * size, inside `bufs`.
            .map(|i| libc::iovec { iov_base: unsafe { base.add(i * size) }.cast(), iov_len: size })
            .collect();
        let hdrs = headers_for(&mut iovs);
        OwnBatch { bufs, size, iovs, hdrs }
    }

    /// Datagram `i`'s buffer.
    pub fn buf_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i * self.size..(i + 1) * self.size]
    }

    /// Every datagram's buffer, end to end, and the size of each.
    pub fn datagrams_mut(&mut self) -> (&mut [u8], usize) {
        (&mut self.bufs, self.size)
    }

    /// Sends the first `k` datagrams with one `sendmmsg`; returns (datagrams, bytes) sent.
    pub fn send(&mut self, fd: RawFd, k: usize) -> io::Result<(usize, u64)> {
        let k = k.min(self.hdrs.len());
        debug_assert_eq!(self.iovs.len(), self.hdrs.len());
        // SAFETY: `hdrs[..k]` are valid headers whose iovecs point into `bufs`, which is live.
        let rc = unsafe { libc::sendmmsg(fd, self.hdrs.as_mut_ptr(), k as u32, libc::MSG_NOSIGNAL) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = rc as usize;
        Ok((n, self.hdrs[..n].iter().map(|h| h.msg_len as u64).sum()))
    }
}

/// Datagrams sent with UDP GSO (`UDP_SEGMENT`, set on the socket by [`set_udp_gso`]): `n`
/// datagrams of `size` bytes in one contiguous buffer, handed to the kernel as super-datagrams
/// of up to `segs` each, one `sendmmsg` for all; the kernel (or the NIC) cuts each into
/// datagrams of `size` bytes, so what goes on the wire is the same as without GSO.
pub struct GsoBatch {
    // As in SendBatch: boxed slices that never move or resize after construction.
    bufs: Box<[u8]>,
    size: usize,
    segs: usize,
    iovs: Box<[libc::iovec]>,
    hdrs: Box<[libc::mmsghdr]>,
}

// SAFETY: the raw pointers only refer to the struct's own heap allocations, which move with it.
unsafe impl Send for GsoBatch {}

/// Most segments in one GSO send (the kernel's UDP_MAX_SEGMENTS is 64 on older kernels).
pub const GSO_MAX_SEGMENTS: usize = 64;
/// Most bytes in one GSO send: the largest UDP payload over IPv6 and IPv4 alike.
pub const GSO_MAX_BYTES: usize = 65_000;

impl GsoBatch {
    /// Room for `n` datagrams of `size` bytes (rounded up to whole super-datagrams), each
    /// filled with `fill`.
    pub fn new(size: usize, n: usize, fill: u8) -> GsoBatch {
        let segs = (GSO_MAX_BYTES / size.max(1)).clamp(1, GSO_MAX_SEGMENTS);
        let supers = n.div_ceil(segs).max(1);
        let mut bufs: Box<[u8]> = vec![fill; supers * segs * size].into();
        let base = bufs.as_mut_ptr();
        let mut iovs: Box<[libc::iovec]> = (0..supers)
            // SAFETY: j * segs * size < supers * segs * size, inside `bufs`.
            .map(|j| libc::iovec { iov_base: unsafe { base.add(j * segs * size) }.cast(), iov_len: segs * size })
            .collect();
        let hdrs = headers_for(&mut iovs);
        GsoBatch { bufs, size, segs, iovs, hdrs }
    }

    /// How many datagrams one call sends at most.
    pub fn capacity(&self) -> usize {
        self.hdrs.len() * self.segs
    }

    /// Datagram `i`'s buffer.
    pub fn buf_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i * self.size..(i + 1) * self.size]
    }

    /// Every datagram's buffer, end to end, and the size of each.
    pub fn datagrams_mut(&mut self) -> (&mut [u8], usize) {
        (&mut self.bufs, self.size)
    }

    /// Sends the first `k` datagrams as super-datagrams with one `sendmmsg`; returns
    /// (datagrams, bytes) sent.
    pub fn send(&mut self, fd: RawFd, k: usize) -> io::Result<(usize, u64)> {
        let k = k.min(self.capacity());
        let supers = k.div_ceil(self.segs);
        for (j, iov) in self.iovs[..supers].iter_mut().enumerate() {
            iov.iov_len = (k - j * self.segs).min(self.segs) * self.size;
        }
        // SAFETY: `hdrs[..supers]` are valid headers whose iovecs point into `bufs`, which is live.
        let rc = unsafe { libc::sendmmsg(fd, self.hdrs.as_mut_ptr(), supers as u32, libc::MSG_NOSIGNAL) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let bytes: u64 = self.hdrs[..rc as usize].iter().map(|h| h.msg_len as u64).sum();
        Ok(((bytes as usize).div_ceil(self.size), bytes))
    }
}

/// Turns on UDP GSO for `fd`: a send larger than `segment` bytes leaves as datagrams of
/// `segment` bytes (`UDP_SEGMENT`, Linux 4.18).
pub fn set_udp_gso(fd: RawFd, segment: usize) -> io::Result<()> {
    set_int_opt(fd, libc::SOL_UDP, libc::UDP_SEGMENT, segment as libc::c_int)
}

/// Turns on UDP GRO for `fd`: the kernel may hand over several datagrams of one flow as one
/// buffer, their segment size in a `UDP_GRO` control message (Linux 5.0).
pub fn set_udp_gro(fd: RawFd) -> io::Result<()> {
    set_int_opt(fd, libc::SOL_UDP, libc::UDP_GRO, 1)
}

/// Room for a control message holding one `int` (the `UDP_GRO` segment size).
const GRO_CMSG_SPACE: usize = 32;

/// Buffers for `recvmmsg`: `n` messages of up to `size` bytes each, and optionally each
/// one's source address.
pub struct RecvBatch {
    bufs: Box<[u8]>,
    iovs: Box<[libc::iovec]>,
    hdrs: Box<[libc::mmsghdr]>,
    names: Option<Box<[libc::sockaddr_storage]>>,
    /// With GRO: a control buffer per message, for its segment size.
    control: Option<Box<[u8]>>,
}

// SAFETY: the raw pointers only refer to the struct's own heap allocations, which move with it.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    /// Room for `n` datagrams of `size` bytes.
    pub fn new(n: usize, size: usize) -> RecvBatch {
        let mut bufs: Box<[u8]> = vec![0u8; n * size].into();
        let base = bufs.as_mut_ptr();
        let mut iovs: Box<[libc::iovec]> = (0..n)
            // SAFETY: i * size < n * size, inside `bufs`.
            .map(|i| libc::iovec { iov_base: unsafe { base.add(i * size) }.cast(), iov_len: size })
            .collect();
        let hdrs = headers_for(&mut iovs);
        RecvBatch { bufs, iovs, hdrs, names: None, control: None }
    }

    /// Also takes each message's `UDP_GRO` segment size (for a socket with [`set_udp_gro`]):
    /// [`RecvBatch::segments`] then cuts a coalesced buffer into its datagrams. `size` must
    /// hold a whole coalesced buffer (64 KiB).
    pub fn with_gro(mut self) -> RecvBatch {
        let mut control: Box<[u8]> = vec![0u8; self.hdrs.len() * GRO_CMSG_SPACE].into();
        let base = control.as_mut_ptr();
        for (i, h) in self.hdrs.iter_mut().enumerate() {
            // SAFETY: i * GRO_CMSG_SPACE < len * GRO_CMSG_SPACE, inside `control`.
            h.msg_hdr.msg_control = unsafe { base.add(i * GRO_CMSG_SPACE) }.cast();
        }
        self.control = Some(control);
        self
    }

    /// The `UDP_GRO` segment size of message `i` of the last [`RecvBatch::recv`], if the
    /// kernel coalesced it.
    fn gro_segment(&self, i: usize) -> Option<usize> {
        self.control.as_ref()?;
        let h = &self.hdrs[i].msg_hdr;
        // SAFETY: the kernel wrote `msg_controllen` bytes of well-formed control messages into
        // the buffer `msg_control` points at (this message's slice of `control`, still live);
        // CMSG_FIRSTHDR/CMSG_NXTHDR stay within that length.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(h);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == libc::UDP_GRO {
                    let v = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                    return usize::try_from(v).ok().filter(|&v| v > 0);
                }
                c = libc::CMSG_NXTHDR(h, c);
            }
        }
        None
    }

    /// The datagrams message `i` of the last [`RecvBatch::recv`] holds: one, or with GRO the
    /// segments of a coalesced buffer (each the segment size, the last maybe shorter).
    pub fn segments(&self, i: usize) -> std::slice::Chunks<'_, u8> {
        let d = self.datagram(i);
        d.chunks(self.gro_segment(i).unwrap_or(d.len()).max(1))
    }

    /// As [`RecvBatch::new`], also taking each datagram's source address (an unconnected
    /// socket's datagrams come from anyone: [`RecvBatch::source`] tells from whom).
    pub fn with_sources(n: usize, size: usize) -> RecvBatch {
        let mut b = RecvBatch::new(n, size);
        // SAFETY: sockaddr_storage is plain data; zeroed is a valid (AF_UNSPEC) value.
        let mut names: Box<[libc::sockaddr_storage]> = (0..n).map(|_| unsafe { std::mem::zeroed() }).collect();
        for (h, name) in b.hdrs.iter_mut().zip(names.iter_mut()) {
            h.msg_hdr.msg_name = (name as *mut libc::sockaddr_storage).cast();
        }
        b.names = Some(names);
        b
    }

    /// The source of datagram `i` of the last [`RecvBatch::recv`], when sources are taken.
    pub fn source(&self, i: usize) -> Option<std::net::SocketAddr> {
        let name = self.names.as_ref()?.get(i)?;
        match name.ss_family as libc::c_int {
            libc::AF_INET => {
                // SAFETY: the kernel wrote a sockaddr_in here (family AF_INET); storage is large
                // and aligned enough for it.
                let a = unsafe { &*(name as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
                let ip = std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
                Some(std::net::SocketAddr::new(ip.into(), u16::from_be(a.sin_port)))
            }
            libc::AF_INET6 => {
                // SAFETY: as above, for sockaddr_in6.
                let a = unsafe { &*(name as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
                let ip = std::net::Ipv6Addr::from(a.sin6_addr.s6_addr);
                let ip = ip.to_ipv4_mapped().map_or(std::net::IpAddr::V6(ip), std::net::IpAddr::V4);
                Some(std::net::SocketAddr::new(ip, u16::from_be(a.sin6_port)))
            }
            _ => None,
        }
    }

    /// Receives up to `n` datagrams without blocking; returns (datagrams, bytes). `Ok((0, 0))`
    /// when none is waiting.
    pub fn recv(&mut self, fd: RawFd) -> io::Result<(usize, u64)> {
        debug_assert_eq!(self.iovs.len(), self.hdrs.len());
        debug_assert!(!self.bufs.is_empty());
        if self.names.is_some() {
            // The kernel shortens each name length to what it wrote: room again for any family.
            for h in self.hdrs.iter_mut() {
                h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            }
        }
        if self.control.is_some() {
            // As the names: the kernel sets each control length to what it wrote.
            for h in self.hdrs.iter_mut() {
                h.msg_hdr.msg_controllen = GRO_CMSG_SPACE as _;
            }
        }
        // SAFETY: `hdrs` holds valid headers whose iovecs point into `bufs`, which is live.
        let rc = unsafe {
            libc::recvmmsg(fd, self.hdrs.as_mut_ptr(), self.hdrs.len() as u32, libc::MSG_DONTWAIT, std::ptr::null_mut())
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::WouldBlock {
                return Ok((0, 0));
            }
            return Err(e);
        }
        let n = rc as usize;
        Ok((n, self.hdrs[..n].iter().map(|h| h.msg_len as u64).sum()))
    }

    /// Datagram `i` of the last [`RecvBatch::recv`] (`i` below the count it returned).
    pub fn datagram(&self, i: usize) -> &[u8] {
        let size = self.bufs.len() / self.hdrs.len().max(1);
        let len = (self.hdrs[i].msg_len as usize).min(size);
        &self.bufs[i * size..i * size + len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    /// 100 datagrams of 1400 bytes sent with GSO, each numbered: all of them, in order and of
    /// their size, reach a receiver with GRO (coalesced, cut by the control message's segment
    /// size) and one without (one datagram each: the wire is unchanged).
    #[test]
    fn gso_datagrams_arrive_whole_with_and_without_gro() {
        for gro in [true, false] {
            let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
            socket2::SockRef::from(&rx).set_recv_buffer_size(4 << 20).unwrap();
            if gro {
                set_udp_gro(rx.as_raw_fd()).unwrap();
            }
            let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
            tx.connect(rx.local_addr().unwrap()).unwrap();
            set_udp_gso(tx.as_raw_fd(), 1400).unwrap();
            let mut b = GsoBatch::new(1400, 100, 0x5a);
            assert!(b.capacity() >= 100);
            for i in 0..100u64 {
                b.buf_mut(i as usize)[..8].copy_from_slice(&i.to_be_bytes());
            }
            assert_eq!(b.send(tx.as_raw_fd(), 100).unwrap(), (100, 140_000));
            let mut r = RecvBatch::new(8, 65_536);
            if gro {
                r = r.with_gro();
            }
            let (mut got, mut calls_msgs) = (Vec::new(), 0);
            for _ in 0..200 {
                let (n, _) = r.recv(rx.as_raw_fd()).unwrap();
                calls_msgs += n;
                for i in 0..n {
                    for d in r.segments(i) {
                        got.push((u64::from_be_bytes(d[..8].try_into().unwrap()), d.len()));
                    }
                }
                if got.len() >= 100 {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            assert_eq!(got, (0..100).map(|i| (i, 1400)).collect::<Vec<_>>(), "gro {gro}");
            if gro {
                assert!(calls_msgs < 100, "coalesced: {calls_msgs} buffers for 100 datagrams");
            } else {
                assert_eq!(calls_msgs, 100);
            }
        }
    }

    #[test]
    fn sources_are_read_for_each_datagram() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.send_to(b"from a", rx.local_addr().unwrap()).unwrap();
        b.send_to(b"from b", rx.local_addr().unwrap()).unwrap();
        let mut batch = RecvBatch::with_sources(8, 64);
        let mut got = Vec::new();
        for _ in 0..100 {
            let (n, _) = batch.recv(rx.as_raw_fd()).unwrap();
            got.extend((0..n).map(|i| (batch.source(i).unwrap(), batch.datagram(i).to_vec())));
            if got.len() == 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(
            got,
            vec![(a.local_addr().unwrap(), b"from a".to_vec()), (b.local_addr().unwrap(), b"from b".to_vec())]
        );
        assert_eq!(RecvBatch::new(1, 8).source(0), None);
    }

    #[test]
    fn batches_keep_datagrams_whole() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.connect(a.local_addr().unwrap()).unwrap();
        let mut s = SendBatch::new(&[7u8; 3], 10);
        assert_eq!(s.send(a.as_raw_fd(), 0).unwrap(), (10, 30));
        let mut r = RecvBatch::new(4, 64);
        let mut got = (0, 0);
        for _ in 0..10 {
            let (n, bytes) = r.recv(b.as_raw_fd()).unwrap();
            got.0 += n;
            got.1 += bytes;
        }
        assert_eq!(got, (10, 30), "10 datagrams of 3 bytes, never merged");
        assert_eq!(r.recv(b.as_raw_fd()).unwrap(), (0, 0));
    }
}

/// `dev`'s offloads as its driver reports them (ethtool's legacy get commands, one
/// `SIOCETHTOOL` each); `None` when no socket can ask or the driver answers none.
pub fn offloads(dev: &str) -> Option<netblast_spec::result::Offloads> {
    // ETHTOOL_GRXCSUM, GTXCSUM, GSG, GTSO, GGSO, GGRO (linux/ethtool.h).
    const RX_CSUM: u32 = 0x14;
    const TX_CSUM: u32 = 0x16;
    const SG: u32 = 0x18;
    const TSO: u32 = 0x1e;
    const GSO: u32 = 0x23;
    const GRO: u32 = 0x2b;
    if dev.len() >= libc::IFNAMSIZ {
        return None;
    }
    // SAFETY: a plain datagram socket, closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return None;
    }
    let get = |cmd: u32| -> Option<bool> {
        #[repr(C)]
        struct EthtoolValue {
            cmd: u32,
            data: u32,
        }
        let mut v = EthtoolValue { cmd, data: 0 };
        // SAFETY: an all-zero ifreq is valid; its name and data pointer are set below.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (d, s) in req.ifr_name.iter_mut().zip(dev.bytes()) {
            *d = s as libc::c_char;
        }
        req.ifr_ifru.ifru_data = (&mut v as *mut EthtoolValue).cast();
        // SAFETY: `req` names the device and points at `v`, both alive for the call.
        let rc = unsafe { libc::ioctl(fd, libc::SIOCETHTOOL as _, &mut req) };
        (rc == 0).then_some(v.data != 0)
    };
    let o = netblast_spec::result::Offloads {
        tso: get(TSO),
        gso: get(GSO),
        gro: get(GRO),
        sg: get(SG),
        tx_checksum: get(TX_CSUM),
        rx_checksum: get(RX_CSUM),
    };
    // SAFETY: `fd` is the socket opened above.
    unsafe { libc::close(fd) };
    (o != netblast_spec::result::Offloads::default()).then_some(o)
}

#[cfg(test)]
mod device_tests {
    #[test]
    fn loopback_is_lo_and_its_driver_answers() {
        assert_eq!(crate::os::sys::device_of("127.0.0.1".parse().unwrap()).as_deref(), Some("lo"));
        assert_eq!(crate::os::sys::device_of("192.0.2.77".parse().unwrap()), None, "no interface holds it");
        // lo segments in software: the kernel reports its offloads as for any device.
        let o = super::offloads("lo").expect("lo answers ethtool's get commands");
        assert!(o.tso.is_some() && o.gso.is_some(), "{o:?}");
        assert!(super::offloads("no-such-dev").is_none());
    }
}
