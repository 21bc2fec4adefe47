// SPDX-License-Identifier: GPL-2.0
/* netblast.bpf.c: the kernel half of netblast's TCP probe. Small and dumb: it enables the
 * RTT, retransmit and state callbacks on connections to or from the ports user space asked
 * for, and fills the per-flow entries user space registered. All logic is in user space.
 *
 * Hooks: one sock_ops program attached to the cgroup v2 root (multi-attach), in two builds of
 * one body (with and without thread groups).
 * Maps: `ports` (port -> u32: 0, NB_PORT_WATCH_* bits or a group id, written by user space), `flows`
 * (u64 socket cookie -> struct nb_flow, entries created and deleted by user space), `groups`
 * (u32 group id -> struct nb_group per CPU, created by user space), `threads` (thread id ->
 * group id, written by user space; `threads_named` counts them), `by_port` (local port ->
 * socket cookie and group id of the last connection such a thread made from it) and
 * `conn_group` (socket-local group id, where a port's entry was taken), both kept by the
 * program.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "netblast.h"

char LICENSE[] SEC("license") = "GPL";

/* An array, a slot per port (0: nothing): a lookup is an address computation, where a hash
 * lookup on every connection's establishment cost ~100 ns. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__type(key, __u32);
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
 * threads here (thread id -> group id, once per thread), and the program notes each
 * connection such a thread makes, at connect, where its callbacks find it again:
 * - `by_port`, an array indexed by the connection's local port, holding its socket cookie
 *   (a cookie is never reused: an entry left by a closed connection matches no other), its
 *   group and a hash of its addresses. A store, no allocation: the usual place.
 * - `conn_group`, socket-local storage, only where the port's entry may still belong to a
 *   live connection (it names other addresses: one test's connections to several servers
 *   can share a local port). Allocated at connect (~1.7 us here), freed with the socket.
 * Nothing is removed: no state callbacks, nothing left over. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} threads SEC(".maps");

/* How many threads `threads` names (kept by user space): while none, no connection is
 * looked up as a thread's, and connections of other kinds pay nothing for the feature. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} threads_named SEC(".maps");

static __always_inline int threads_in_use(void)
{
	__u32 k = 0;
	__u32 *n = bpf_map_lookup_elem(&threads_named, &k);
	return n && *n;
}

struct nb_conn_slot {
	__u64 cookie;
	__u32 group;
	__u32 peer;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct nb_conn_slot);
} by_port SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u32);
} conn_group SEC(".maps");

/* The connection's addresses, folded: tells a port's earlier connection to elsewhere. */
static __always_inline __u32 peer_of(struct bpf_sock_ops *skops)
{
	__u32 h = skops->remote_port ^ (skops->family << 16);
	h = (h ^ skops->remote_ip4) * 0x9e3779b1;
	h = (h ^ skops->local_ip4) * 0x9e3779b1;
	h = (h ^ skops->remote_ip6[0]) * 0x9e3779b1;
	h = (h ^ skops->remote_ip6[1]) * 0x9e3779b1;
	h = (h ^ skops->remote_ip6[2]) * 0x9e3779b1;
	h = (h ^ skops->remote_ip6[3]) * 0x9e3779b1;
	return h ^ (h >> 15);
}

/* A thread's new connection tied to group `gid`; false if it could not be. */
static __always_inline int tie_conn(struct bpf_sock_ops *skops, __u32 gid)
{
	__u32 port = skops->local_port;
	struct nb_conn_slot *slot = bpf_map_lookup_elem(&by_port, &port);
	if (!slot)
		return 0;
	__u32 peer = peer_of(skops);
	/* Free, or last used by a connection between the same addresses from this port, which
	 * has closed (one connection per address pair and port at a time). */
	if (!slot->cookie || slot->peer == peer) {
		slot->group = gid;
		slot->peer = peer;
		slot->cookie = bpf_get_socket_cookie(skops);
		return 1;
	}
	struct bpf_sock *sk = skops->sk;
	if (!sk)
		return 0;
	__u32 *g = bpf_sk_storage_get(&conn_group, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!g)
		return 0;
	*g = gid;
	return 1;
}

/* The group a thread's connection was tied to at connect, or 0 (group ids are never 0). */
static __always_inline __u32 thread_group_of(struct bpf_sock_ops *skops)
{
	__u32 port = skops->local_port;
	struct nb_conn_slot *slot = bpf_map_lookup_elem(&by_port, &port);
	if (slot && slot->cookie && slot->cookie == bpf_get_socket_cookie(skops))
		return slot->group;
	struct bpf_sock *sk = skops->sk;
	if (!sk)
		return 0;
	__u32 *g = bpf_sk_storage_get(&conn_group, sk, 0, 0);
	return g ? *g : 0;
}

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
		if (id && tie_conn(skops, *id))
			bpf_sock_ops_cb_flags_set(skops, BPF_SOCK_OPS_RTT_CB_FLAG | BPF_SOCK_OPS_RETRANS_CB_FLAG);
		return 1;
	}
	/* Its callbacks find its group again by its local port's entry (or its socket). */
	if (by_thread && (op == BPF_SOCK_OPS_RTT_CB || op == BPF_SOCK_OPS_RETRANS_CB ||
			  op == BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB) && threads_in_use()) {
		__u32 gid = thread_group_of(skops);
		if (gid) {
			if (op == BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB)
				join_group(skops, gid);
			else
				group_event(skops, op, gid);
			return 1;
		}
	}

	if (op == BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB || op == BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB) {
		__u32 local = (__u16)skops->local_port;
		__u32 remote = (__u16)bpf_ntohl(skops->remote_port);
		__u32 *to = bpf_map_lookup_elem(&ports, &remote);
		/* A connection this host made to a group's port joins the group: its callbacks are
		 * turned on, and find their group again by that port. */
		if (op == BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB && to && *to >= NB_GROUP_FIRST) {
			join_group(skops, *to);
			return 1;
		}
		/* Sockets watched one by one: a connection to a port watched as a peer's, or on a
		 * port watched as a local one (a group's port on the passive side is neither: its
		 * connections are the peer's). */
		__u32 *at = bpf_map_lookup_elem(&ports, &local);
		if ((to && *to < NB_GROUP_FIRST && (*to & NB_PORT_WATCH_PEER)) ||
		    (at && *at < NB_GROUP_FIRST && (*at & NB_PORT_WATCH_LOCAL)))
			bpf_sock_ops_cb_flags_set(skops, BPF_SOCK_OPS_RTT_CB_FLAG | BPF_SOCK_OPS_RETRANS_CB_FLAG |
							 BPF_SOCK_OPS_STATE_CB_FLAG);
		return 1;
	}
	if (op != BPF_SOCK_OPS_RTT_CB && op != BPF_SOCK_OPS_RETRANS_CB && op != BPF_SOCK_OPS_STATE_CB)
		return 1;

	/* A grouped connection (an active one to a group's port; passive sockets never get
	 * callbacks through a group): its callbacks go to its group. */
	__u32 rport = (__u16)bpf_ntohl(skops->remote_port);
	__u32 *grp = bpf_map_lookup_elem(&ports, &rport);
	if (grp && *grp >= NB_GROUP_FIRST && skops->is_fullsock) {
		group_event(skops, op, *grp);
		return 1;
	}
	__u64 cookie = bpf_get_socket_cookie(skops);
	struct nb_flow *f = bpf_map_lookup_elem(&flows, &cookie);
	if (!f)
		return 1;

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
