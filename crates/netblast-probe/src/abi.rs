//! The layout shared with the kernel program: a field-for-field mirror of `struct nb_flow` in
//! `ebpf/netblast.h`. Sizes are pinned here and by `_Static_assert` there, so changing one side
//! without the other fails the build.

/// Values below this many microseconds get a histogram bucket each.
pub const RTT_EXACT: u32 = 256;
/// Every power of two above [`RTT_EXACT`] is split into 2^RTT_SUB_BITS buckets.
pub const RTT_SUB_BITS: u32 = 7;
/// Powers of two covered above [`RTT_EXACT`] (up to 2^24 µs).
pub const RTT_OCTAVES: u32 = 16;
/// Number of histogram buckets.
pub const RTT_BUCKETS: usize = (RTT_EXACT + RTT_OCTAVES * (1 << RTT_SUB_BITS)) as usize;

/// `struct nb_flow`: per-flow statistics the kernel program fills, keyed by socket cookie.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct NbFlow {
    /// RTT callbacks with a measured RTT.
    pub rtt_samples: u64,
    /// Sum of measured RTTs (µs).
    pub rtt_sum_us: u64,
    /// Segments of successful retransmissions.
    pub retrans_segs: u64,
    /// Successful retransmission callbacks.
    pub retrans_events: u64,
    /// Bytes acknowledged.
    pub bytes_acked: u64,
    /// Delivery rate (bytes/s) from the last rate sample.
    pub delivery_rate: u64,
    /// Smoothed RTT (µs) at the last callback.
    pub srtt_us: u32,
    /// Last measured RTT (µs).
    pub last_rtt_us: u32,
    /// Smallest measured RTT (µs); 0: none yet.
    pub min_rtt_us: u32,
    /// Largest measured RTT (µs).
    pub max_rtt_us: u32,
    /// Congestion window (segments).
    pub snd_cwnd: u32,
    /// MSS.
    pub mss: u32,
    /// Segments sent.
    pub segs_out: u32,
    /// Segments received.
    pub segs_in: u32,
    /// The kernel's own total_retrans at the last callback: the retransmissions reported.
    pub total_retrans: u32,
    /// TCP state after the last state change.
    pub state: u32,
    /// RTT histogram (see [`bucket_of`]).
    pub hist: [u32; RTT_BUCKETS],
}

const _: () = assert!(std::mem::size_of::<NbFlow>() == 6 * 8 + 10 * 4 + RTT_BUCKETS * 4);
const _: () = assert!(std::mem::align_of::<NbFlow>() == 8);

impl NbFlow {
    /// An all-zero entry, as user space inserts it to register a socket.
    pub fn zeroed() -> Box<NbFlow> {
        // SAFETY: NbFlow is plain integers; all-zero is a valid value.
        Box::new(unsafe { std::mem::zeroed() })
    }
}

// SAFETY: NbFlow is repr(C), Copy, made of integers only, with no padding (asserted above).
unsafe impl aya::Pod for NbFlow {}

/// `struct nb_group`: the statistics of a group of short connections (every connection this
/// host makes to one port), filled by the kernel program, keyed by group id.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct NbGroup {
    /// Connections established.
    pub conns: u64,
    /// SYNs retransmitted before those connections were established.
    pub syn_retrans: u64,
    /// RTT callbacks with a measured RTT.
    pub rtt_samples: u64,
    /// Sum of measured RTTs (µs).
    pub rtt_sum_us: u64,
    /// Segments of successful retransmissions after establishment.
    pub retrans_segs: u64,
    /// Successful retransmission callbacks.
    pub retrans_events: u64,
    /// Last measured RTT (µs), any connection.
    pub last_rtt_us: u32,
    /// Smallest measured RTT (µs); 0: none yet.
    pub min_rtt_us: u32,
    /// Largest measured RTT (µs).
    pub max_rtt_us: u32,
    /// Padding.
    pub pad: u32,
    /// RTT histogram (see [`bucket_of`]).
    pub hist: [u32; RTT_BUCKETS],
}

const _: () = assert!(std::mem::size_of::<NbGroup>() == 6 * 8 + 4 * 4 + RTT_BUCKETS * 4);

impl NbGroup {
    /// An all-zero entry, as user space inserts it to create a group.
    pub fn zeroed() -> Box<NbGroup> {
        // SAFETY: NbGroup is plain integers; all-zero is a valid value.
        Box::new(unsafe { std::mem::zeroed() })
    }
}

// SAFETY: NbGroup is repr(C), Copy, made of integers only, with no padding (asserted above).
unsafe impl aya::Pod for NbGroup {}

/// `ports` map bit: watch, one socket at a time, the connections this host makes to the port
/// (a client watching its server).
pub const PORT_WATCH_PEER: u32 = 1;
/// `ports` map bit: watch, one socket at a time, the connections accepted on this local port
/// (a server watching its listener). A server's watch leaves its clients' sockets on the same
/// host alone, and a client's the server's.
pub const PORT_WATCH_LOCAL: u32 = 2;
/// `ports` map values from this one on are group ids (below it: `PORT_WATCH_*` bits).
pub const GROUP_FIRST: u32 = 4;

/// The bucket of a value in µs, exactly as the kernel program computes it.
pub fn bucket_of(us: u32) -> usize {
    if us < RTT_EXACT {
        return us as usize;
    }
    if us >= 1 << (8 + RTT_OCTAVES) {
        return RTT_BUCKETS - 1;
    }
    let p = 31 - us.leading_zeros();
    let sub = (us >> (p - RTT_SUB_BITS)) & ((1 << RTT_SUB_BITS) - 1);
    (RTT_EXACT + (p - 8) * (1 << RTT_SUB_BITS) + sub) as usize
}

/// The range of values (µs) a bucket holds: `[low, high)`.
pub fn bucket_range(b: usize) -> (u64, u64) {
    let b = b as u64;
    let exact = RTT_EXACT as u64;
    if b < exact {
        return (b, b + 1);
    }
    let sub_n = 1u64 << RTT_SUB_BITS;
    let octave = (b - exact) / sub_n;
    let sub = (b - exact) % sub_n;
    let p = 8 + octave;
    let width = 1u64 << (p - RTT_SUB_BITS as u64);
    let low = (1u64 << p) + sub * width;
    (low, low + width)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_values_and_are_narrow() {
        for us in [0u32, 1, 255, 256, 257, 300, 1000, 4095, 4096, 65_535, 1 << 20, (1 << 24) - 1] {
            let b = bucket_of(us);
            let (lo, hi) = bucket_range(b);
            assert!(lo <= us as u64 && (us as u64) < hi, "{us} in bucket {b} [{lo},{hi})");
            // At most 1/128 of the bucket's low value wide: finer than 2 significant digits.
            assert!((hi - lo) * 128 <= lo.max(128), "{us}: [{lo},{hi})");
        }
        assert_eq!(bucket_of(u32::MAX), RTT_BUCKETS - 1);
        assert_eq!(bucket_of((1 << 24) - 1), RTT_BUCKETS - 1);
        // Buckets are contiguous.
        for b in 0..RTT_BUCKETS - 1 {
            assert_eq!(bucket_range(b).1, bucket_range(b + 1).0);
        }
    }
}
