//! Kernel TCP statistics of a stream (`TCP_INFO`), and what limited its sender.

use serde::{Deserialize, Serialize};

/// Kernel TCP statistics of one socket at one instant (cumulative counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpStats {
    /// Smoothed RTT (µs).
    pub rtt_us: u32,
    /// RTT variance (µs).
    pub rttvar_us: u32,
    /// Minimum RTT seen by the kernel (µs).
    pub min_rtt_us: u32,
    /// Congestion window (segments).
    pub cwnd_segs: u32,
    /// Sender MSS (bytes).
    pub mss: u32,
    /// Total segments retransmitted over the socket's life.
    pub retrans_segs: u64,
    /// Segments sent.
    pub segs_out: u64,
    /// Segments received.
    pub segs_in: u64,
    /// Bytes acknowledged by the peer.
    pub bytes_acked: u64,
    /// Most recent delivery-rate estimate, in bytes/s (`tcpi_delivery_rate`). Written as
    /// `delivery_rate_bps` before, a name that said bits for a count of bytes; read under both.
    #[serde(alias = "delivery_rate_bps")]
    pub delivery_rate_bytes_per_s: u64,
    /// Retransmitted segments the receiver reported getting twice (DSACK): spurious
    /// retransmissions (`tcpi_dsack_dups`). `None` where the source does not carry it (eBPF).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dsack_segs: Option<u64>,
    /// What limited the sender, by the kernel's own clocks (`TCP_INFO`, Linux 4.10+), over the
    /// socket's life. `None` where the kernel does not report them or the figures are a group's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<TcpLimits>,
}

/// How long a sender was limited by what, in µs, from the kernel's chronographs (`TCP_INFO`:
/// `tcpi_busy_time`, `tcpi_rwnd_limited`, `tcpi_sndbuf_limited`; the kernel counts them in
/// jiffies, 1 to 4 ms). Additive: a way's is the sum of its streams', over the sum of their
/// times (`wall_us`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpLimits {
    /// Time the socket had data in flight or queued (`tcpi_busy_time`), the two below included.
    pub busy_us: u64,
    /// Of it, time the receiver's advertised window stopped the sender.
    pub rwnd_limited_us: u64,
    /// Of it, time the sender's own send buffer stopped it.
    pub sndbuf_limited_us: u64,
    /// The time these are out of: the sender's seconds (0 in a kernel snapshot, which has
    /// no span of its own).
    #[serde(default)]
    pub wall_us: u64,
    /// The receiver's advertised window at the last sample, bytes (`tcpi_snd_wnd`, Linux
    /// 5.4+; 0 unknown); a way's is its streams' sum.
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub peer_window: u64,
}

/// The shares of a sender's time (fractions of `wall_us`) by what limited it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LimitShares {
    /// The receiver's window.
    pub rwnd: f64,
    /// The sender's send buffer.
    pub sndbuf: f64,
    /// Busy with neither: the congestion window or the path (sending as fast as it lets).
    pub cwnd: f64,
    /// Nothing to send: the application (the generator, its CPU, a rate it holds).
    pub app: f64,
}

impl TcpLimits {
    /// This and `o` added (a way's from its streams', a fleet's from its tests').
    pub fn add(&self, o: &TcpLimits) -> TcpLimits {
        TcpLimits {
            busy_us: self.busy_us + o.busy_us,
            rwnd_limited_us: self.rwnd_limited_us + o.rwnd_limited_us,
            sndbuf_limited_us: self.sndbuf_limited_us + o.sndbuf_limited_us,
            wall_us: self.wall_us + o.wall_us,
            peer_window: self.peer_window + o.peer_window,
        }
    }

    /// The clocks' advance since `earlier` (an interval's, from two snapshots), over `wall_us`.
    pub fn since(&self, earlier: &TcpLimits, wall_us: u64) -> TcpLimits {
        TcpLimits {
            busy_us: self.busy_us.saturating_sub(earlier.busy_us),
            rwnd_limited_us: self.rwnd_limited_us.saturating_sub(earlier.rwnd_limited_us),
            sndbuf_limited_us: self.sndbuf_limited_us.saturating_sub(earlier.sndbuf_limited_us),
            wall_us,
            peer_window: self.peer_window,
        }
    }

    /// The shares of `wall_us`; `None` without a span.
    pub fn shares(&self) -> Option<LimitShares> {
        if self.wall_us == 0 {
            return None;
        }
        let w = self.wall_us as f64;
        let busy = self.busy_us.min(self.wall_us) as f64;
        let rwnd = (self.rwnd_limited_us as f64).min(busy);
        let sndbuf = (self.sndbuf_limited_us as f64).min(busy - rwnd);
        Some(LimitShares { rwnd: rwnd / w, sndbuf: sndbuf / w, cwnd: (busy - rwnd - sndbuf) / w, app: (w - busy) / w })
    }
}

impl TcpStats {
    /// Congestion window in bytes (segments × MSS).
    pub fn cwnd_bytes(&self) -> u64 {
        self.cwnd_segs as u64 * self.mss as u64
    }
}
