//! `getsockopt(TCP_INFO)`: the kernel's per-socket TCP statistics, polled.
//!
//! Reads `struct tcp_info` (linux/tcp.h) into [`RawTcpInfo`]; the kernel fills as much of it as
//! it knows and reports the length, so older kernels leave the newer fields zero.

use netblast_spec::result::{TcpLimits, TcpStats};
use std::os::fd::RawFd;

/// `struct tcp_info` from linux/tcp.h, field for field (up to `tcpi_snd_wnd`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RawTcpInfo {
    /// TCP state.
    pub state: u8,
    /// Congestion-avoidance state.
    pub ca_state: u8,
    /// Consecutive RTO retransmits.
    pub retransmits: u8,
    /// Zero-window probes.
    pub probes: u8,
    /// RTO backoff.
    pub backoff: u8,
    /// Negotiated options.
    pub options: u8,
    /// Window scales (4 bits each).
    pub wscale: u8,
    /// Delivery-rate app-limited flag and fastopen bits.
    pub flags: u8,
    /// Retransmission timeout (µs).
    pub rto: u32,
    /// Delayed-ACK timeout (µs).
    pub ato: u32,
    /// Sender MSS.
    pub snd_mss: u32,
    /// Receiver MSS.
    pub rcv_mss: u32,
    /// Unacknowledged segments.
    pub unacked: u32,
    /// SACKed segments.
    pub sacked: u32,
    /// Lost segments.
    pub lost: u32,
    /// Segments being retransmitted.
    pub retrans: u32,
    /// Unused (fackets).
    pub fackets: u32,
    /// ms since last data sent.
    pub last_data_sent: u32,
    /// Unused.
    pub last_ack_sent: u32,
    /// ms since last data received.
    pub last_data_recv: u32,
    /// ms since last ACK received.
    pub last_ack_recv: u32,
    /// Path MTU.
    pub pmtu: u32,
    /// Receive slow-start threshold.
    pub rcv_ssthresh: u32,
    /// Smoothed RTT (µs).
    pub rtt: u32,
    /// RTT variance (µs).
    pub rttvar: u32,
    /// Send slow-start threshold.
    pub snd_ssthresh: u32,
    /// Congestion window (segments).
    pub snd_cwnd: u32,
    /// Advertised MSS.
    pub advmss: u32,
    /// Reordering metric.
    pub reordering: u32,
    /// Receiver-side RTT estimate (µs).
    pub rcv_rtt: u32,
    /// Receive buffer space.
    pub rcv_space: u32,
    /// Total segments retransmitted.
    pub total_retrans: u32,
    /// Pacing rate (bytes/s).
    pub pacing_rate: u64,
    /// Max pacing rate.
    pub max_pacing_rate: u64,
    /// Bytes acknowledged.
    pub bytes_acked: u64,
    /// Bytes received.
    pub bytes_received: u64,
    /// Segments sent.
    pub segs_out: u32,
    /// Segments received.
    pub segs_in: u32,
    /// Bytes not yet sent.
    pub notsent_bytes: u32,
    /// Minimum RTT (µs).
    pub min_rtt: u32,
    /// Data segments received.
    pub data_segs_in: u32,
    /// Data segments sent.
    pub data_segs_out: u32,
    /// Delivery rate (bytes/s).
    pub delivery_rate: u64,
    /// µs busy sending.
    pub busy_time: u64,
    /// µs limited by the receive window.
    pub rwnd_limited: u64,
    /// µs limited by the send buffer.
    pub sndbuf_limited: u64,
    /// Segments delivered.
    pub delivered: u32,
    /// Segments delivered with CE.
    pub delivered_ce: u32,
    /// Bytes sent (including retransmissions).
    pub bytes_sent: u64,
    /// Bytes retransmitted.
    pub bytes_retrans: u64,
    /// DSACK duplicates.
    pub dsack_dups: u32,
    /// Reordering events.
    pub reord_seen: u32,
    /// Out-of-order packets received.
    pub rcv_ooopack: u32,
    /// Peer's advertised window (bytes).
    pub snd_wnd: u32,
}

/// Reads `TCP_INFO` of a socket; `None` when the descriptor is not a TCP socket or is closed.
pub fn read_raw(fd: RawFd) -> Option<RawTcpInfo> {
    read_with_len(fd).map(|(info, _)| info)
}

/// `TCP_INFO` and the number of bytes of it the kernel filled.
fn read_with_len(fd: RawFd) -> Option<(RawTcpInfo, usize)> {
    let mut info = RawTcpInfo::default();
    let mut len = std::mem::size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: `info` is a plain-old-data repr(C) struct of `len` bytes that outlives the call;
    // the kernel writes at most `len` bytes into it and updates `len`.
    let rc = unsafe {
        libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, (&mut info as *mut RawTcpInfo).cast(), &mut len)
    };
    (rc == 0).then_some((info, len as usize))
}

impl From<&RawTcpInfo> for TcpStats {
    fn from(i: &RawTcpInfo) -> TcpStats {
        TcpStats {
            rtt_us: i.rtt,
            rttvar_us: i.rttvar,
            min_rtt_us: i.min_rtt,
            cwnd_segs: i.snd_cwnd,
            mss: i.snd_mss,
            retrans_segs: i.total_retrans as u64,
            segs_out: i.segs_out as u64,
            segs_in: i.segs_in as u64,
            bytes_acked: i.bytes_acked,
            delivery_rate_bytes_per_s: i.delivery_rate,
            dsack_segs: Some(i.dsack_dups as u64),
            limits: Some(limits_of(i)),
        }
    }
}

/// Reads `TCP_INFO` and converts it to [`TcpStats`]; `dsack_segs` is `None` on a kernel too
/// old to report it (before 5.0).
pub fn read(fd: RawFd) -> Option<TcpStats> {
    let (raw, len) = read_with_len(fd)?;
    let mut stats = TcpStats::from(&raw);
    if len < std::mem::offset_of!(RawTcpInfo, dsack_dups) + std::mem::size_of::<u32>() {
        stats.dsack_segs = None;
    }
    if len < LIMITS_END {
        stats.limits = None;
    }
    Some(stats)
}

/// Where the chronographs end in `struct tcp_info` (Linux 4.10 filled them first).
const LIMITS_END: usize = std::mem::offset_of!(RawTcpInfo, sndbuf_limited) + std::mem::size_of::<u64>();

fn limits_of(i: &RawTcpInfo) -> TcpLimits {
    TcpLimits {
        busy_us: i.busy_time,
        rwnd_limited_us: i.rwnd_limited,
        sndbuf_limited_us: i.sndbuf_limited,
        wall_us: 0,
        peer_window: i.snd_wnd as u64,
    }
}

/// The sender's limit clocks of a socket (what an eBPF sample lacks); `None` on a kernel
/// before 4.10 or a closed socket.
pub fn read_limits(fd: RawFd) -> Option<TcpLimits> {
    let (raw, len) = read_with_len(fd)?;
    (len >= LIMITS_END).then(|| limits_of(&raw))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    #[test]
    fn layout_matches_linux_header() {
        // linux/tcp.h up to tcpi_snd_wnd is 232 bytes.
        assert_eq!(std::mem::size_of::<RawTcpInfo>(), 232);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, rtt), 68);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, total_retrans), 100);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, pacing_rate), 104);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, delivery_rate), 160);
    }

    #[test]
    fn reads_a_live_socket() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(&[1u8; 100_000]).unwrap();
        let mut buf = vec![0u8; 100_000];
        s.read_exact(&mut buf).unwrap();
        let st = read(c.as_raw_fd()).unwrap();
        assert!(st.segs_out > 0);
        assert!(st.mss > 0);
        assert!(st.bytes_acked > 0 || st.segs_out > 0);
        assert_eq!(st.dsack_segs, Some(0), "this kernel reports DSACKs; nothing was sent twice");
        let raw = read_raw(c.as_raw_fd()).unwrap();
        assert_eq!(raw.state, 1, "ESTABLISHED");
    }

    #[test]
    fn not_a_socket_is_none() {
        let f = std::fs::File::open("/dev/null").unwrap();
        assert!(read(f.as_raw_fd()).is_none());
    }
}
