// SPDX-License-Identifier: GPL-2.0
/* netblast.bpf.c: the kernel half of netblast's TCP probe. Small and dumb: it enables the
 * RTT, retransmit and state callbacks on connections to or from the ports user space asked
 * for, and fills the per-flow entries user space registered. All logic is in user space.
 *
 * Hooks: one sock_ops program attached to the cgroup v2 root (multi-attach), in two builds of
 * one body (with and without thread groups).
 * Maps: `ports` (u16 port -> u32: NB_PORT_WATCH or a group id, written by user space), `flows`
 * (u64 socket cookie -> struct nb_flow, entries created and deleted by user space), `groups`
 * (u32 group id -> struct nb_group per CPU, created by user space), `threads` (thread id ->
 * group id, written by user space) and `conn_group` (socket cookie -> group id of the
 * connections those threads make, kept here from connect to close).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "netblast.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u16);
	__type(value, __u32);
} ports SEC(".maps");

/* Per CPU: a group's connections are served on every CPU, and one shared entry would bounce
 * between them on every callback; user space adds the CPUs' entries up. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct nb_group);
} groups SEC(".maps");

/* Connections tied to a group by the thread that makes them, where no port can name the
 * group (HTTP without keep-alive to a shared server port): user space names its worker
 * threads here (thread id -> group id, once per thread), the program notes each connection
 * such a thread makes in `conn_group` (socket cookie -> group id). That map is an LRU: no
 * state callbacks to remove an entry at close, the oldest go when it is full, and a cookie
 * is never reused, so a stale entry is never another connection's. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u32);
} conn_group SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct nb_flow);
} flows SEC(".maps");

static __always_inline __u32 rtt_bucket(__u32 us)
{
	if (us < NB_RTT_EXACT)
		return us;
	if (us >= (1u << (8 + NB_RTT_OCTAVES)))
		return NB_RTT_BUCKETS - 1;
	/* floor(log2(us)), us >= 256 */
	__u32 p = 8, v = us >> 8;
	if (v >= 1u << 8) { v >>= 8; p += 8; }
	if (v >= 1u << 4) { v >>= 4; p += 4; }
	if (v >= 1u << 2) { v >>= 2; p += 2; }
	if (v >= 1u << 1) { p += 1; }
	__u32 sub = (us >> (p - NB_RTT_SUB_BITS)) & ((1u << NB_RTT_SUB_BITS) - 1);
	return NB_RTT_EXACT + (p - 8) * (1u << NB_RTT_SUB_BITS) + sub;
}

/* An active connection joins group `id` as it is established: counted, and its RTT and
 * retransmit callbacks turned on. */
static __always_inline void join_group(struct bpf_sock_ops *skops, __u32 id)
{
	struct nb_group *g = bpf_map_lookup_elem(&groups, &id);
	if (!g)
		return;
	__sync_fetch_and_add(&g->conns, 1);
	__sync_fetch_and_add(&g->syn_retrans, skops->total_retrans);
	bpf_sock_ops_cb_flags_set(skops, BPF_SOCK_OPS_RTT_CB_FLAG | BPF_SOCK_OPS_RETRANS_CB_FLAG);
}

/* A grouped connection's RTT or retransmit callback, into its group. */
static __always_inline void group_event(struct bpf_sock_ops *skops, __u32 op, __u32 id)
{
	struct nb_group *g = bpf_map_lookup_elem(&groups, &id);
	if (!g)
		return;
	if (op == BPF_SOCK_OPS_RTT_CB) {
		__u32 mrtt = skops->args[0];
		if (mrtt) {
			__sync_fetch_and_add(&g->rtt_samples, 1);
			__sync_fetch_and_add(&g->rtt_sum_us, mrtt);
			g->last_rtt_us = mrtt;
			if (!g->min_rtt_us || mrtt < g->min_rtt_us)
				g->min_rtt_us = mrtt;
			if (mrtt > g->max_rtt_us)
				g->max_rtt_us = mrtt;
			__u32 b = rtt_bucket(mrtt);
			if (b < NB_RTT_BUCKETS)
				__sync_fetch_and_add(&g->hist[b], 1);
		}
	} else if (op == BPF_SOCK_OPS_RETRANS_CB && skops->args[2] == 0) {
		__sync_fetch_and_add(&g->retrans_segs, skops->args[1]);
		__sync_fetch_and_add(&g->retrans_events, 1);
	}
}

static __always_inline void snapshot(struct bpf_sock_ops *skops, struct nb_flow *f)
{
	f->srtt_us = skops->srtt_us >> 3;
	f->snd_cwnd = skops->snd_cwnd;
	f->mss = skops->mss_cache;
	f->segs_out = skops->segs_out;
	f->segs_in = skops->segs_in;
	f->total_retrans = skops->total_retrans;
	f->bytes_acked = skops->bytes_acked;
	__u32 iv = skops->rate_interval_us;
	if (iv)
		f->delivery_rate = (__u64)skops->rate_delivered * skops->mss_cache * 1000000ull / iv;
}

static __always_inline int sockops(struct bpf_sock_ops *skops, const int by_thread)
{
	__u32 op = skops->op;

	/* A connection made by a thread of a group (process context: connect()). */
	if (by_thread && op == BPF_SOCK_OPS_TCP_CONNECT_CB) {
		__u32 tid = (__u32)bpf_get_current_pid_tgid();
		__u32 *id = bpf_map_lookup_elem(&threads, &tid);
		if (id) {
			__u64 cookie = bpf_get_socket_cookie(skops);
			__u32 gid = *id;
			if (bpf_map_update_elem(&conn_group, &cookie, &gid, BPF_ANY) == 0)
				bpf_sock_ops_cb_flags_set(skops, BPF_SOCK_OPS_RTT_CB_FLAG | BPF_SOCK_OPS_RETRANS_CB_FLAG);
		}
		return 1;
	}

	if (op == BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB || op == BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB) {
		__u16 local = (__u16)skops->local_port;
		__u16 remote = (__u16)bpf_ntohl(skops->remote_port);
		__u32 *to = bpf_map_lookup_elem(&ports, &remote);
		/* A connection this host made to a group's port joins the group: its callbacks are
		 * turned on, and find their group again by that port. */
		if (op == BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB && to && *to >= NB_GROUP_FIRST) {
			join_group(skops, *to);
			return 1;
		}
		/* One a group's thread made: counted as it is established. */
		if (by_thread && op == BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB) {
			__u64 cookie = bpf_get_socket_cookie(skops);
			__u32 *id = bpf_map_lookup_elem(&conn_group, &cookie);
			if (id) {
				join_group(skops, *id);
				return 1;
			}
		}
		/* Sockets watched one by one: either end on a watched port (a group's port on the
		 * passive side is not: its connections are the peer's). */
		__u32 *at = bpf_map_lookup_elem(&ports, &local);
		if ((to && *to == NB_PORT_WATCH) || (at && *at == NB_PORT_WATCH))
			bpf_sock_ops_cb_flags_set(skops, BPF_SOCK_OPS_RTT_CB_FLAG | BPF_SOCK_OPS_RETRANS_CB_FLAG |
							 BPF_SOCK_OPS_STATE_CB_FLAG);
		return 1;
	}
	if (op != BPF_SOCK_OPS_RTT_CB && op != BPF_SOCK_OPS_RETRANS_CB && op != BPF_SOCK_OPS_STATE_CB)
		return 1;

	/* A grouped connection (an active one to a group's port; passive sockets never get
	 * callbacks through a group): its callbacks go to its group. */
	__u16 rport = (__u16)bpf_ntohl(skops->remote_port);
	__u32 *grp = bpf_map_lookup_elem(&ports, &rport);
	if (grp && *grp >= NB_GROUP_FIRST && skops->is_fullsock) {
		group_event(skops, op, *grp);
		return 1;
	}
	__u64 cookie = bpf_get_socket_cookie(skops);
	struct nb_flow *f = bpf_map_lookup_elem(&flows, &cookie);
	if (!f) {
		/* A connection a group's thread made: its events to the group. */
		if (!by_thread || op == BPF_SOCK_OPS_STATE_CB)
			return 1;
		__u32 *id = bpf_map_lookup_elem(&conn_group, &cookie);
		if (id)
			group_event(skops, op, *id);
		return 1;
	}

	if (op == BPF_SOCK_OPS_RTT_CB) {
		__u32 mrtt = skops->args[0];
		if (mrtt) {
			f->rtt_samples++;
			f->rtt_sum_us += mrtt;
			f->last_rtt_us = mrtt;
			if (!f->min_rtt_us || mrtt < f->min_rtt_us)
				f->min_rtt_us = mrtt;
			if (mrtt > f->max_rtt_us)
				f->max_rtt_us = mrtt;
			__u32 b = rtt_bucket(mrtt);
			if (b < NB_RTT_BUCKETS)
				f->hist[b]++;
		}
		snapshot(skops, f);
	} else if (op == BPF_SOCK_OPS_RETRANS_CB) {
		if (skops->args[2] == 0) {
			f->retrans_segs += skops->args[1];
			f->retrans_events++;
		}
		snapshot(skops, f);
	} else {
		f->state = skops->args[1];
		snapshot(skops, f);
	}
	return 1;
}

/* The program, with connections tied to groups by their threads (kernels whose verifier
 * lets sock_ops read the current thread), and without (older ones): user space loads the
 * first it can. */
SEC("sockops")
int netblast_sockops_threads(struct bpf_sock_ops *skops)
{
	return sockops(skops, 1);
}

SEC("sockops")
int netblast_sockops(struct bpf_sock_ops *skops)
{
	return sockops(skops, 0);
}
