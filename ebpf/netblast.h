/* netblast.h: the layout shared by the kernel program (netblast.bpf.c) and user space
 * (crates/netblast-probe/src/abi.rs). Plain fixed-size integers only, explicit padding, sizes
 * pinned on both sides: a change here without the Rust mirror fails the build.
 */
#ifndef NETBLAST_H
#define NETBLAST_H

/* RTT histogram, microseconds. Values below NB_RTT_EXACT get a bucket each; above, every
 * power of two is split into 2^NB_RTT_SUB_BITS buckets, so a bucket is at most 1/128 (0.8%)
 * of its values wide: finer than the 2 significant digits (1%) of the HDR histogram user
 * space turns it into. Values of 2^24 us (16.8 s) and more land in the last bucket. */
#define NB_RTT_EXACT 256
#define NB_RTT_SUB_BITS 7
#define NB_RTT_OCTAVES 16
#define NB_RTT_BUCKETS (NB_RTT_EXACT + NB_RTT_OCTAVES * (1 << NB_RTT_SUB_BITS))

/* Per-flow statistics, keyed by socket cookie in the `flows` map. User space creates the
 * entry (zeroed) when it starts watching a socket and deletes it when done; the kernel
 * program only updates entries that exist, so only registered sockets are recorded. */
struct nb_flow {
	__u64 rtt_samples;     /* RTT callbacks with a measured RTT */
	__u64 rtt_sum_us;      /* sum of measured RTTs */
	__u64 retrans_segs;    /* sum of segments of successful retransmissions */
	__u64 retrans_events;  /* retransmission callbacks (successful) */
	__u64 bytes_acked;     /* tp->bytes_acked at the last callback */
	__u64 delivery_rate;   /* bytes/s from the last rate sample */
	__u32 srtt_us;         /* smoothed RTT at the last callback */
	__u32 last_rtt_us;     /* last measured RTT */
	__u32 min_rtt_us;      /* smallest measured RTT (0: none yet) */
	__u32 max_rtt_us;      /* largest measured RTT */
	__u32 snd_cwnd;        /* congestion window, segments */
	__u32 mss;             /* mss_cache */
	__u32 segs_out;        /* tp->segs_out at the last callback */
	__u32 segs_in;         /* tp->segs_in at the last callback */
	__u32 total_retrans;   /* tp->total_retrans at the last callback: the figure reported */
	__u32 state;           /* TCP state after the last state change */
	__u32 hist[NB_RTT_BUCKETS];
};

_Static_assert(sizeof(struct nb_flow) == 6 * 8 + 10 * 4 + NB_RTT_BUCKETS * 4, "nb_flow has no hidden padding");

/* Statistics of a group of short connections (a cps flow: every connection this host makes
 * to one port), in the `groups` map keyed by group id. User space creates the entry (zeroed)
 * and names the group's destination port in `ports` (value: the group id); the kernel
 * program turns the callbacks on for each such connection as it is established and adds
 * them here, atomically, finding the group by the connection's remote port: no work in user
 * space and no map entry per connection. */
struct nb_group {
	__u64 conns;           /* connections established */
	__u64 syn_retrans;     /* SYNs retransmitted before they were established */
	__u64 rtt_samples;     /* RTT callbacks with a measured RTT */
	__u64 rtt_sum_us;      /* sum of measured RTTs */
	__u64 retrans_segs;    /* segments of successful retransmissions after establishment */
	__u64 retrans_events;  /* retransmission callbacks (successful) */
	__u32 last_rtt_us;     /* last measured RTT, any connection */
	__u32 min_rtt_us;      /* smallest measured RTT (0: none yet) */
	__u32 max_rtt_us;      /* largest measured RTT */
	__u32 pad;
	__u32 hist[NB_RTT_BUCKETS];
};

_Static_assert(sizeof(struct nb_group) == 6 * 8 + 4 * 4 + NB_RTT_BUCKETS * 4, "nb_group has no hidden padding");

/* Values of the `ports` map: below NB_GROUP_FIRST, which of the port's connections are watched
 * (their sockets registered one by one in `flows`): those this host makes to the port (a
 * client's server), those accepted on it (a server's listener), or both; from NB_GROUP_FIRST
 * on, the group id of connections made to it. A server's watch never turns callbacks on for
 * its clients' sockets on the same host, nor a client's for the server's. */
#define NB_PORT_WATCH_PEER 1
#define NB_PORT_WATCH_LOCAL 2
#define NB_GROUP_FIRST 4

#endif
