//! How a bulk flow hands bytes to the kernel and takes them back: a send from one pattern
//! buffer, `sendfile` from an in-memory file of the same pattern, or `send(MSG_ZEROCOPY)` with
//! its completions drained; a receive of up to one buffer. Each says what the kernel did as a
//! [`Step`].

use netblast_spec::profile::SendMode;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub(crate) enum Step {
    /// Moved this many bytes.
    Moved(usize),
    /// Would block.
    Again,
    /// Peer closed its write side (receivers only).
    Eof,
    /// Transmit queue of MSG_ZEROCOPY is full: drain completions and wait.
    NoBufs,
}

pub(crate) fn errno_result(rc: isize) -> io::Result<Step> {
    if rc > 0 {
        return Ok(Step::Moved(rc as usize));
    }
    if rc == 0 {
        return Ok(Step::Eof);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) => Ok(Step::Again),
        Some(libc::ENOBUFS) => Ok(Step::NoBufs),
        Some(libc::EINTR) => Ok(Step::Moved(0)),
        _ => Err(e),
    }
}

/// The per-worker sender state: the pattern buffer and, for sendfile, the in-memory file.
pub(crate) struct Sender {
    mode: SendMode,
    buf: Vec<u8>,
    file: Option<OwnedFd>,
}

impl Sender {
    pub(crate) fn new(block: usize, mode: SendMode) -> io::Result<Sender> {
        // A fixed pseudo-random pattern: not all zeros, so nothing on the path can compress it.
        let mut buf = vec![0u8; block];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for chunk in buf.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let b = x.to_le_bytes();
            chunk.copy_from_slice(&b[..chunk.len()]);
        }
        let file = match mode {
            SendMode::Sendfile => Some(memfd_with(&buf)?),
            _ => None,
        };
        Ok(Sender { mode, buf, file })
    }

    pub(crate) fn send(&self, fd: RawFd, len: usize) -> io::Result<Step> {
        let len = len.min(self.buf.len());
        let rc = match (self.mode, &self.file) {
            (SendMode::Sendfile, Some(file)) => {
                let mut off: libc::off_t = 0;
                // SAFETY: both descriptors are open for the duration of the call; `off` is a
                // valid off_t the kernel reads and writes.
                unsafe { libc::sendfile(fd, file.as_raw_fd(), &mut off, len) }
            }
            (SendMode::MsgZerocopy, _) => {
                // SAFETY: `buf` is valid for `len` bytes and is never written after creation, so
                // the kernel may keep referencing its pages until completion.
                unsafe { libc::send(fd, self.buf.as_ptr().cast(), len, libc::MSG_NOSIGNAL | libc::MSG_ZEROCOPY) }
            }
            _ => {
                // SAFETY: `buf` is valid for `len` bytes.
                unsafe { libc::send(fd, self.buf.as_ptr().cast(), len, libc::MSG_NOSIGNAL) }
            }
        };
        if rc == 0 && len > 0 {
            // A zero-byte send means nothing was taken; treat as would-block.
            return Ok(Step::Again);
        }
        errno_result(rc)
    }
}

/// Creates an in-memory file holding `data` (for sendfile).
pub(crate) fn memfd_with(data: &[u8]) -> io::Result<OwnedFd> {
    // SAFETY: the name is a valid NUL-terminated string; flags are valid.
    let fd = unsafe { libc::memfd_create(c"netblast-sendfile".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by memfd_create and is owned by nobody else.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut file = std::fs::File::from(owned);
    io::Write::write_all(&mut file, data)?;
    Ok(OwnedFd::from(file))
}

/// Enables MSG_ZEROCOPY on a socket.
pub(crate) fn enable_zerocopy(fd: RawFd) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: `one` is a valid c_int for the option length given.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ZEROCOPY,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Drains MSG_ZEROCOPY completion notifications from the socket's error queue.
pub(crate) fn drain_errqueue(fd: RawFd) {
    let mut control = [0u8; 256];
    loop {
        // SAFETY: msghdr is plain data; zeroed is valid (no name, no iov).
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len();
        // SAFETY: `msg` points at `control`, which outlives the call.
        let rc = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
        if rc < 0 {
            return;
        }
    }
}

pub(crate) fn receive(fd: RawFd, buf: &mut [u8]) -> io::Result<Step> {
    // SAFETY: `buf` is valid and writable for its length.
    let rc = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
    errno_result(rc)
}
