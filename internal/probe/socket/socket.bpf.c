//go:build ignore

/* socket: TCP and UDP endpoint statistics (gala-gopher endpoint_tcp and
 * endpoint_udp), without kprobes.
 *
 * Hooks:
 *   tp_btf/inet_sock_set_state      socket owners (bpf/include/sockowner.h),
 *       syn_sent (CLOSE->SYN_SENT), active_open(_failed) (SYN_SENT->ESTABLISHED
 *       /CLOSE), passive_open(_failed) (SYN_RECV->ESTABLISHED/other) of children
 *       of observed listeners, estab_latency (client: connect to ESTABLISHED;
 *       server: SYN/ACK to ESTABLISHED, the kernel's SYN/ACK RTT sample)
 *   tp_btf/tcp_retransmit_synack    retran_synacks (listener, request's peer),
 *       and one more synack_sent
 *   tp_btf/tcp_retransmit_skb       retran_syn (SYN_SENT client sockets, err 0)
 *   tp_btf/kfree_skb                ACK-time listen overflow (reason
 *       TCP_LISTEN_OVERFLOW on the listener), syn_drop (a SYN of an observed
 *       SYN_SENT socket freed on transmit)
 *   cgroup_skb/ingress (cgroup2 root) SYN-time accept/syn queue overflows: the
 *       tcp_conn_request checks, evaluated on the listener just before it runs
 *   sockops (cgroup2 root)          synack_sent: BPF_SOCK_OPS_RWND_INIT of a
 *       request socket, once per SYN/ACK tcp_conn_request sends (no per-packet
 *       callback is enabled); retransmitted ones in tcp_rtx_synack
 *   tp_btf/udp_fail_queue_rcv_skb   udp_rcv_drops (bytes of datagrams the
 *       receive queue refused; the kernel's InErrors path)
 *   tp_btf/sock_send_length, sock_recv_length  bind_sends / bind_rcvs (bytes)
 *   cgroup/post_bind4, post_bind6   owner of UDP sockets that bind and only
 *       receive (drops happen in softirq, where current is unrelated)
 *   iter/task_file                  walk_owners: owners of sockets opened
 *       before the probe (galago_owner_from_file); hooks meeting an unowned
 *       listener or UDP socket ask for a walk (struct socket_walk_req, once per
 *       socket: walk_asked)
 * Output: per-endpoint counters in the hash maps tcp_endpoints and
 *   udp_endpoints (estab_latency buckets, sum and per-period max included),
 *   updated in place; user space reads them once per report period. The
 *   ring buffer "events" carries only owner walk requests (struct
 *   socket_walk_req), which need user space to run the iterator.
 * Filter: snoopers via GALAGO_FILTER, checked against the socket owner.
 * Kernel: 6.2+ (kfree_skb rx_sk needs 6.10+ for ACK-time overflows;
 *   sock_*_length and the synack_sent sockops program 6.3+), BTF, cgroup2.
 */
#define GALAGO_RINGBUF
#define GALAGO_FILTER
#include "common.h"
#include "sockowner.h"

#ifndef IPPROTO_TCP
#define IPPROTO_TCP 6
#endif
#ifndef IPPROTO_UDP
#define IPPROTO_UDP 17
#endif
#define TCPHDR_FIN 0x01
#define TCPHDR_SYN 0x02
#define TCPHDR_RST 0x04
#define TCPHDR_ACK 0x10
#define MSG_PEEK 2
#define CURRENT_NETNS ((__u64)-1) /* BPF_F_CURRENT_NETNS: not in every vmlinux.h */

/* The drop reason is resolved against the running kernel (CO-RE enum
 * relocation): its value changes between kernels, and older headers lack it. */
enum skb_drop_reason___socket {
	SKB_DROP_REASON_TCP_LISTEN_OVERFLOW___socket = 0,
};

/* Walk requests: the only records of the ring buffer (see below). */
struct socket_walk_req {
	__u32 netns;  /* inode of the socket's network namespace */
	__u16 family;
	__u16 port;   /* local port, host order */
};

/* ---- per-endpoint counters, aggregated in the kernel ----
 *
 * endpoint_tcp and endpoint_udp rows are counters per endpoint key: the hooks
 * add to them in place (atomic adds: several CPUs update one endpoint) and
 * user space reads the maps once per report period and reports the growth
 * since its previous read. Counters only grow; user space never writes them,
 * so no increment is lost to a read/reset race. It deletes endpoints idle for
 * ten minutes with BPF_MAP_LOOKUP_AND_DELETE_ELEM, which returns the final
 * value atomically. */

/* Counter indexes of struct socket_tcp_val, in endpoint_tcp order. */
enum socket_tcp_counter {
	SOCKET_C_LISTENDROP = 0,
	SOCKET_C_ACCEPT_OVERFLOW = 1,
	SOCKET_C_SYN_OVERFLOW = 2,
	SOCKET_C_PASSIVE_OPEN = 3,
	SOCKET_C_PASSIVE_OPEN_FAILED = 4,
	SOCKET_C_RETRAN_SYNACKS = 5,
	SOCKET_C_RETRAN_SYN = 6,
	SOCKET_C_ACTIVE_OPEN = 7,
	SOCKET_C_ACTIVE_OPEN_FAILED = 8,
	SOCKET_C_SYN_SENT = 9,
	SOCKET_C_SYN_DROP = 10,
	SOCKET_C_SYNACK_SENT = 11,
	SOCKET_NR_TCP_COUNTERS = 12,
};

enum socket_role {
	SOCKET_ROLE_CLIENT = 0,
	SOCKET_ROLE_SERVER = 1,
};

/* estab_latency buckets: gala-gopher's bounds in ns (3, 10, 50, 100, 500,
 * 1000, 10000 ms); bucket i counts values <= bound i, the last one the rest. */
#define SOCKET_NR_BOUNDS 7
#define SOCKET_NR_BUCKETS (SOCKET_NR_BOUNDS + 1)

/* One endpoint_tcp row, as gala-gopher keys it: the client port is not a
 * key. The whole key (padding included) is zeroed before it is filled. */
struct socket_tcp_key {
	__u32 tgid;
	__u16 family;
	__u16 server_port;
	__u8 client[16];
	__u8 server[16];
	char comm[GALAGO_TASK_COMM_LEN];
	__u8 role; /* enum socket_role */
	__u8 _pad[3];
};

struct socket_tcp_val {
	__u64 counters[SOCKET_NR_TCP_COUNTERS];
	__u64 lat_buckets[SOCKET_NR_BUCKETS];
	__u64 lat_sum; /* ns */
	/* Largest latency of report period max_period[i], in slot period & 1:
	 * user space advances socket_period at the end of a period and reads
	 * the slot of the period that ended, which no hook writes until the
	 * next advance. */
	__u64 max_period[2];
	__u64 max_ns[2];
};

/* One endpoint_udp row; remote is zero for unconnected sockets. */
struct socket_udp_key {
	__u32 tgid;
	__u16 family;
	__u16 local_port;
	__u16 remote_port;
	__u16 _pad;
	__u8 local[16];
	__u8 remote[16];
};

struct socket_udp_val {
	__u64 rcv_drops; /* bytes */
	__u64 sends;     /* bytes */
	__u64 rcvs;      /* bytes */
};

GALAGO_EXPORT_TYPE(struct socket_walk_req, socket_walk_req);
GALAGO_EXPORT_TYPE(struct socket_tcp_key, socket_tcp_key);
GALAGO_EXPORT_TYPE(struct socket_tcp_val, socket_tcp_val);
GALAGO_EXPORT_TYPE(struct socket_udp_key, socket_udp_key);
GALAGO_EXPORT_TYPE(struct socket_udp_val, socket_udp_val);
GALAGO_EXPORT_TYPE(enum socket_tcp_counter, socket_tcp_counter);

/* max_entries: endpoints kept at once (rows idle for ten minutes are
 * deleted). No preallocation: memory follows the live endpoints, and a
 * deleted element is freed only after an RCU grace period, so a hook still
 * holding it never writes into another endpoint's reused element. */
#define SOCKET_MAX_TCP_ENDPOINTS 16384
#define SOCKET_MAX_UDP_ENDPOINTS 16384

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, SOCKET_MAX_TCP_ENDPOINTS);
	__type(key, struct socket_tcp_key);
	__type(value, struct socket_tcp_val);
} tcp_endpoints SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, SOCKET_MAX_UDP_ENDPOINTS);
	__type(key, struct socket_udp_key);
	__type(value, struct socket_udp_val);
} udp_endpoints SEC(".maps");

/* agg_lost[0], per CPU: increments lost because an endpoint map was full.
 * User space reports the growth through Runtime.Lost. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} agg_lost SEC(".maps");

/* The current report period (user space advances it); selects the slot of
 * max_ns. */
volatile __u64 socket_period = 0;

/* Zero values to insert new endpoints from (not on the stack: the TCP value
 * is 232 bytes). */
const struct socket_tcp_val socket_tcp_zero = {};
const struct socket_udp_val socket_udp_zero = {};

static __always_inline void count_agg_lost(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&agg_lost, &zero);

	if (n)
		*n += 1; /* per-CPU slot */
}

/* endpoint: the value of key in map, inserted (zero) when new; NULL, and
 * counted as lost, when the map is full. */
static __always_inline void *endpoint(void *map, const void *key, const void *zero)
{
	void *v = bpf_map_lookup_elem(map, key);
	long err;

	if (v)
		return v;
	err = bpf_map_update_elem(map, key, zero, BPF_NOEXIST);
	if (err && err != -17 /* EEXIST: another CPU inserted it */) {
		count_agg_lost();
		return NULL;
	}
	v = bpf_map_lookup_elem(map, key);
	if (!v)
		count_agg_lost(); /* deleted by user space in between */
	return v;
}

static __always_inline void tcp_add(const struct socket_tcp_key *k, __u32 c)
{
	struct socket_tcp_val *v = endpoint(&tcp_endpoints, k, &socket_tcp_zero);

	if (v && c < SOCKET_NR_TCP_COUNTERS)
		__sync_fetch_and_add(&v->counters[c], 1);
}

/* tcp_open counts an open (counter c) and, when have_lat, its latency. */
static __always_inline void tcp_open(const struct socket_tcp_key *k, __u32 c, __u64 lat, bool have_lat)
{
	static const __u64 bounds[SOCKET_NR_BOUNDS] = {
		3000000ULL, 10000000ULL, 50000000ULL, 100000000ULL,
		500000000ULL, 1000000000ULL, 10000000000ULL,
	};
	struct socket_tcp_val *v = endpoint(&tcp_endpoints, k, &socket_tcp_zero);
	__u32 i;

	if (!v || c >= SOCKET_NR_TCP_COUNTERS)
		return;
	__sync_fetch_and_add(&v->counters[c], 1);
	if (!have_lat)
		return;
	for (i = 0; i < SOCKET_NR_BOUNDS; i++) {
		if (lat <= bounds[i])
			break;
	}
	if (i < SOCKET_NR_BUCKETS)
		__sync_fetch_and_add(&v->lat_buckets[i], 1);
	__sync_fetch_and_add(&v->lat_sum, lat);

	/* Not atomic: two CPUs opening connections of one endpoint within
	 * the same few nanoseconds may keep the smaller of their two values. */
	__u64 p = socket_period;
	__u32 s = p & 1;

	if (v->max_period[s] != p) {
		v->max_ns[s] = lat;
		v->max_period[s] = p;
	} else if (lat > v->max_ns[s]) {
		v->max_ns[s] = lat;
	}
}

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} events SEC(".maps");

/* Sockets that already asked for an owner walk: each unowned socket asks
 * once, so a socket no process holds (a kernel tunnel's UDP socket) cannot
 * make user space walk the fd tables again and again. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u8);
} walk_asked SEC(".maps");

/* ask_walk: a hook met a listener or UDP socket without owner (opened
 * before the probe, or before the sub-item's hooks were attached). The
 * event that revealed it cannot be attributed; the walk attributes the
 * ones that follow. sk is a BTF socket or a cgroup_skb full socket. The
 * socket is marked only once its request is in the ring: a full ring
 * (counted in lost_events) lets the next event ask again. */
static __always_inline void ask_walk(void *sk, __u16 family, __u16 lport, __u32 netns)
{
	__u8 *asked = bpf_sk_storage_get(&walk_asked, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	struct socket_walk_req *e;

	if (!asked || *asked)
		return;
	e = GALAGO_RB_RESERVE(&events, struct socket_walk_req);
	if (!e)
		return;
	*asked = 1;
	e->netns = netns;
	e->family = family;
	e->port = lport;
	/* Rare and urgent: wake the reader now. */
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

static __always_inline void ask_walk_sk(const struct sock *sk)
{
	ask_walk((void *)sk, sk->__sk_common.skc_family, sk->__sk_common.skc_num, galago_sk_netns(sk));
}

static __always_inline bool owner_observed(const struct galago_sk_owner *o)
{
	return galago_observed_in(o->tgid, o->cgroup_id);
}

static __always_inline void key_owner(struct socket_tcp_key *k, const struct galago_sk_owner *o, __u8 role)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->tgid = o->tgid;
	k->role = role;
	__builtin_memcpy(k->comm, o->comm, sizeof(k->comm));
}

/* The local and remote addresses of c into zeroed 16-byte fields (IPv4 in
 * the first 4 bytes). c is a BTF pointer in every caller (tracing
 * arguments, sock_ops' kernel context): direct loads, not helper calls
 * (bpf_probe_read_kernel was 13 % of tcp_state's time in a perf profile). */
static __always_inline void sk_addrs(const struct sock_common *c, __u16 family, __u8 *local, __u8 *remote)
{
	if (family == AF_INET6) {
		for (int i = 0; i < 4; i++) {
			((__u32 *)local)[i] = c->skc_v6_rcv_saddr.in6_u.u6_addr32[i];
			((__u32 *)remote)[i] = c->skc_v6_daddr.in6_u.u6_addr32[i];
		}
	} else {
		*(__u32 *)local = c->skc_rcv_saddr;
		*(__u32 *)remote = c->skc_daddr;
	}
}

/* Addresses of a full or request socket (struct sock_common first). */
static __always_inline void key_addrs_common(struct socket_tcp_key *k, const struct sock_common *c, bool local_is_client)
{
	__u16 family = c->skc_family;

	k->family = family;
	if (local_is_client) {
		sk_addrs(c, family, k->client, k->server);
		k->server_port = bpf_ntohs(c->skc_dport);
	} else {
		sk_addrs(c, family, k->server, k->client);
		k->server_port = c->skc_num;
	}
}

/* tcp_add_sk counts counter c on the endpoint of sk. */
static __always_inline void tcp_add_sk(__u32 c, const struct sock *sk, const struct galago_sk_owner *o, __u8 role)
{
	struct socket_tcp_key k;

	key_owner(&k, o, role);
	key_addrs_common(&k, &sk->__sk_common, role == SOCKET_ROLE_CLIENT);
	tcp_add(&k, c);
}

/* ---- TCP state changes ---- */

/* The owner of an accepted child: the owner of the listener on its (netns,
 * local port), without creating socket storage on the child (its endpoint
 * is counted once, at the end of the handshake, and nothing later needs
 * the child's owner). */
static __always_inline struct galago_sk_owner *child_owner(const struct sock *sk)
{
	struct galago_listen_key k = galago_listen_key_of(sk);
	struct galago_sk_owner *o = galago_owner_get(sk);

	/* An owner recorded on the child itself (a TCP Fast Open child the
	 * task_file walk found in an fd table) wins. */
	if (o && o->role == GALAGO_ROLE_SERVER)
		return o;
	return bpf_map_lookup_elem(&galago_listen_owners, &k);
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(tcp_state, const struct sock *sk, const int oldstate, const int newstate)
{
	struct galago_sk_owner *o;
	struct socket_tcp_key k;

	/* Most transitions of a connection (ESTABLISHED and after, the child's
	 * LISTEN -> SYN_RECV) count nothing: leave before touching any map. */
	switch (oldstate) {
	case TCP_CLOSE:
		if (newstate != TCP_SYN_SENT && newstate != TCP_LISTEN)
			return 0;
		break;
	case TCP_SYN_SENT:
	case TCP_SYN_RECV:
	case TCP_LISTEN:
		if (oldstate == TCP_LISTEN && newstate == TCP_SYN_RECV)
			return 0;
		break;
	default:
		if (newstate != TCP_LISTEN)
			return 0;
	}
	if (sk->sk_protocol != IPPROTO_TCP)
		return 0;

	if (oldstate == TCP_SYN_RECV) {
		o = child_owner(sk);
		if (!o || !owner_observed(o))
			return 0;
		key_owner(&k, o, SOCKET_ROLE_SERVER);
		key_addrs_common(&k, &sk->__sk_common, false);
		/* The bind bucket is gone on the way to CLOSE (skc_num 0). */
		k.server_port = galago_sk_local_port(sk);
		if (newstate == TCP_ESTABLISHED) {
			/* tcp_rcv_state_process took the SYN/ACK RTT sample
			 * (tcp_synack_rtt_meas) just before; srtt_us is 8x
			 * the first sample. No sample when the SYN/ACK was
			 * retransmitted (Karn). */
			const struct tcp_sock *tp = (const struct tcp_sock *)sk;
			__u64 srtt = BPF_CORE_READ(tp, srtt_us) >> 3;

			tcp_open(&k, SOCKET_C_PASSIVE_OPEN, srtt * 1000, srtt != 0);
		} else {
			tcp_add(&k, SOCKET_C_PASSIVE_OPEN_FAILED);
		}
		return 0;
	}

	/* connect(), listen() and the end of a listener: owner bookkeeping. */
	o = galago_owner_on_state(sk, oldstate, newstate);
	if (!o || !owner_observed(o))
		return 0;

	if (oldstate == TCP_CLOSE && newstate == TCP_SYN_SENT) {
		/* The start of connect(), for estab_latency: in the owner's socket_aux
		 * word (no second socket storage per connection). */
		o->socket_aux = bpf_ktime_get_ns();
		tcp_add_sk(SOCKET_C_SYN_SENT, sk, o, SOCKET_ROLE_CLIENT);
		return 0;
	}
	if (oldstate == TCP_SYN_SENT && o->role == GALAGO_ROLE_CLIENT) {
		key_owner(&k, o, SOCKET_ROLE_CLIENT);
		key_addrs_common(&k, &sk->__sk_common, true);
		if (newstate == TCP_ESTABLISHED) {
			__u64 lat = 0;
			bool have = false;

			if (o->socket_aux) {
				lat = bpf_ktime_get_ns() - o->socket_aux;
				have = true;
				o->socket_aux = 0;
			}
			tcp_open(&k, SOCKET_C_ACTIVE_OPEN, lat, have);
		} else {
			tcp_add(&k, SOCKET_C_ACTIVE_OPEN_FAILED);
		}
	}
	return 0;
}

SEC("tp_btf/tcp_retransmit_synack")
int BPF_PROG(tcp_rtx_synack, const struct sock *sk, const struct request_sock *req)
{
	struct galago_sk_owner *o = galago_owner_get(sk);
	struct socket_tcp_key k;

	if (!o) {
		ask_walk_sk(sk);
		return 0;
	}
	if (o->role != GALAGO_ROLE_LISTENER || !owner_observed(o))
		return 0;
	key_owner(&k, o, SOCKET_ROLE_SERVER);
	key_addrs_common(&k, &req->__req_common, false);
	/* Fired only for a SYN/ACK actually sent again: one more sent. */
	struct socket_tcp_val *v = endpoint(&tcp_endpoints, &k, &socket_tcp_zero);

	if (!v)
		return 0;
	__sync_fetch_and_add(&v->counters[SOCKET_C_RETRAN_SYNACKS], 1);
	__sync_fetch_and_add(&v->counters[SOCKET_C_SYNACK_SENT], 1);
	return 0;
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(tcp_rtx_skb, const struct sock *sk, const struct sk_buff *skb, int err)
{
	struct galago_sk_owner *o;

	/* Only a sent retransmission counts, as TCPSynRetrans does. */
	if (err != 0 || sk->__sk_common.skc_state != TCP_SYN_SENT)
		return 0;
	o = galago_owner_get(sk);
	if (!o || o->role != GALAGO_ROLE_CLIENT || !owner_observed(o))
		return 0;
	tcp_add_sk(SOCKET_C_RETRAN_SYN, sk, o, SOCKET_ROLE_CLIENT);
	return 0;
}

/* Client and server addresses of a packet received by a listener, from its
 * headers. */
static __always_inline void key_addrs_skb(struct socket_tcp_key *k, const struct sk_buff *skb, const struct sock *listener)
{
	unsigned char *head = BPF_CORE_READ(skb, head);
	__u16 nh = BPF_CORE_READ(skb, network_header);

	if (BPF_CORE_READ(skb, protocol) == bpf_htons(0x86DD)) {
		struct ipv6hdr *ip6 = (struct ipv6hdr *)(head + nh);

		k->family = AF_INET6;
		bpf_probe_read_kernel(k->client, 16, &ip6->saddr);
		bpf_probe_read_kernel(k->server, 16, &ip6->daddr);
	} else {
		struct iphdr *ip = (struct iphdr *)(head + nh);

		k->family = AF_INET;
		bpf_probe_read_kernel(k->client, 4, &ip->saddr);
		bpf_probe_read_kernel(k->server, 4, &ip->daddr);
	}
	k->server_port = listener->__sk_common.skc_num;
}

SEC("tp_btf/kfree_skb")
int BPF_PROG(skb_drop, struct sk_buff *skb, void *location, enum skb_drop_reason reason, struct sock *rx_sk)
{
	struct galago_sk_owner *o;
	struct socket_tcp_key k;

	if (rx_sk) {
		/* The final ACK of a handshake reached a listener that could
		 * not create the child (tcp_check_req: listen_overflow). The
		 * kernel counted a listen drop, and a listen overflow when the
		 * accept queue was full. */
		if (!bpf_core_enum_value_exists(enum skb_drop_reason___socket, SKB_DROP_REASON_TCP_LISTEN_OVERFLOW___socket) ||
		    reason != bpf_core_enum_value(enum skb_drop_reason___socket, SKB_DROP_REASON_TCP_LISTEN_OVERFLOW___socket) ||
		    rx_sk->__sk_common.skc_state != TCP_LISTEN)
			return 0;
		o = galago_owner_get(rx_sk);
		if (!o) {
			ask_walk_sk(rx_sk);
			return 0;
		}
		if (o->role != GALAGO_ROLE_LISTENER || !owner_observed(o))
			return 0;
		bool full = rx_sk->sk_ack_backlog > rx_sk->sk_max_ack_backlog;

		key_owner(&k, o, SOCKET_ROLE_SERVER);
		key_addrs_skb(&k, skb, rx_sk);
		struct socket_tcp_val *v = endpoint(&tcp_endpoints, &k, &socket_tcp_zero);

		if (!v)
			return 0;
		__sync_fetch_and_add(&v->counters[SOCKET_C_LISTENDROP], 1);
		if (full)
			__sync_fetch_and_add(&v->counters[SOCKET_C_ACCEPT_OVERFLOW], 1);
		return 0;
	}

	/* Transmit side: a SYN of a connecting socket dropped by the local
	 * stack (no neighbour, qdisc, netfilter). */
	struct sock *sk = skb->sk;

	if (!sk || sk->__sk_common.skc_state != TCP_SYN_SENT || sk->sk_protocol != IPPROTO_TCP)
		return 0;
	o = galago_owner_get(sk);
	if (!o || o->role != GALAGO_ROLE_CLIENT || !owner_observed(o))
		return 0;
	tcp_add_sk(SOCKET_C_SYN_DROP, sk, o, SOCKET_ROLE_CLIENT);
	return 0;
}

/* ---- listener queues, on the wire (cgroup_skb at the cgroup2 root) ---- */

struct pkt {
	__u16 family;
	__u8 flags; /* TCP flags */
	__u8 ok;
	__be32 saddr4, daddr4;
	__u8 saddr6[16], daddr6[16];
	__be16 sport, dport;
};

static __always_inline void parse_pkt(struct __sk_buff *skb, struct pkt *p)
{
	__u32 thoff;

	p->ok = 0;
	if (skb->protocol == bpf_htons(0x0800)) {
		struct iphdr ip;

		if (bpf_skb_load_bytes(skb, 0, &ip, sizeof(ip)))
			return;
		if (ip.protocol != IPPROTO_TCP)
			return;
		thoff = ip.ihl * 4;
		p->family = AF_INET;
		p->saddr4 = ip.saddr;
		p->daddr4 = ip.daddr;
	} else if (skb->protocol == bpf_htons(0x86DD)) {
		struct ipv6hdr ip6;

		if (bpf_skb_load_bytes(skb, 0, &ip6, sizeof(ip6)))
			return;
		/* Extension headers are not followed: such SYNs are skipped. */
		if (ip6.nexthdr != IPPROTO_TCP)
			return;
		thoff = sizeof(ip6);
		p->family = AF_INET6;
		__builtin_memcpy(p->saddr6, &ip6.saddr, 16);
		__builtin_memcpy(p->daddr6, &ip6.daddr, 16);
	} else {
		return;
	}
	struct tcphdr th;

	if (bpf_skb_load_bytes(skb, thoff, &th, sizeof(th)))
		return;
	p->sport = th.source;
	p->dport = th.dest;
	p->flags = ((__u8 *)&th)[13];
	p->ok = 1;
}

static __always_inline void key_pkt(struct socket_tcp_key *k, const struct pkt *p)
{
	/* An ingress SYN: the source is the client. */
	k->family = p->family;
	if (p->family == AF_INET) {
		__builtin_memcpy(k->client, &p->saddr4, 4);
		__builtin_memcpy(k->server, &p->daddr4, 4);
	} else {
		__builtin_memcpy(k->client, p->saddr6, 16);
		__builtin_memcpy(k->server, p->daddr6, 16);
	}
	k->server_port = bpf_ntohs(p->dport);
}

/* Is the SYN going to reach tcp_conn_request? Not when it belongs to a
 * pending request (a retransmitted SYN): then tcp_check_req answers it. */
static __always_inline bool fresh_syn(struct __sk_buff *skb, const struct pkt *p)
{
	struct bpf_sock_tuple t = {};
	struct bpf_sock *s;
	__u32 size;
	bool fresh;

	if (p->family == AF_INET) {
		t.ipv4.saddr = p->saddr4;
		t.ipv4.daddr = p->daddr4;
		t.ipv4.sport = p->sport;
		t.ipv4.dport = p->dport;
		size = sizeof(t.ipv4);
	} else {
		__builtin_memcpy(t.ipv6.saddr, p->saddr6, 16);
		__builtin_memcpy(t.ipv6.daddr, p->daddr6, 16);
		t.ipv6.sport = p->sport;
		t.ipv6.dport = p->dport;
		size = sizeof(t.ipv6);
	}
	s = bpf_skc_lookup_tcp(skb, &t, size, CURRENT_NETNS, 0);
	if (!s)
		return true;
	fresh = s->state == BPF_TCP_LISTEN;
	bpf_sk_release(s);
	return fresh;
}

static __always_inline struct galago_sk_owner *listener_owner(struct bpf_sock *bsk)
{
	struct galago_sk_owner *o;

	if (bsk->protocol != IPPROTO_TCP || bsk->state != BPF_TCP_LISTEN)
		return NULL;
	o = bpf_sk_storage_get(&galago_sk_owners, bsk, 0, 0);
	if (!o) {
		ask_walk(bsk, bsk->family, bsk->src_port, 0);
		return NULL;
	}
	if (o->role != GALAGO_ROLE_LISTENER || !owner_observed(o))
		return NULL;
	return o;
}

SEC("cgroup_skb/ingress")
int listen_ingress(struct __sk_buff *skb)
{
	struct bpf_sock *bsk = skb->sk;
	struct galago_sk_owner *o;
	struct tcp_sock *tp;
	struct pkt p = {};

	/* Every packet of the host comes here: leave on the first load unless
	 * it is for a listener (state is readable without a full socket). */
	if (!bsk || bsk->state != BPF_TCP_LISTEN)
		return 1;
	bsk = bpf_sk_fullsock(bsk);
	if (!bsk)
		return 1;
	o = listener_owner(bsk);
	if (!o)
		return 1;
	tp = bpf_skc_to_tcp_sock(bsk);
	if (!tp)
		return 1;

	/* tcp_conn_request's checks, in its order, first: with room in both
	 * queues (the usual case) the packet is not even parsed. */
	struct sock *sk = (struct sock *)tp;
	__u32 max = sk->sk_max_ack_backlog;
	__u32 qlen = tp->inet_conn.icsk_accept_queue.qlen.counter;
	__u8 syncookies = sk->__sk_common.skc_net.net->ipv4.sysctl_tcp_syncookies;
	bool syn_full = qlen > max;
	bool accept_full = sk->sk_ack_backlog > max && (!syn_full || syncookies != 0);
	struct socket_tcp_key k;
	struct socket_tcp_val *v;

	if (!syn_full && !accept_full)
		return 1;
	parse_pkt(skb, &p);
	if (!p.ok || (p.flags & (TCPHDR_SYN | TCPHDR_ACK | TCPHDR_RST | TCPHDR_FIN)) != TCPHDR_SYN)
		return 1;
	if (!fresh_syn(skb, &p))
		return 1;
	key_owner(&k, o, SOCKET_ROLE_SERVER);
	key_pkt(&k, &p);
	v = endpoint(&tcp_endpoints, &k, &socket_tcp_zero);
	if (!v)
		return 1;
	if (syn_full) {
		__sync_fetch_and_add(&v->counters[SOCKET_C_SYN_OVERFLOW], 1);
		/* No cookie: the SYN is dropped, a listen drop. */
		if (syncookies == 0)
			__sync_fetch_and_add(&v->counters[SOCKET_C_LISTENDROP], 1);
	}
	if (accept_full) {
		__sync_fetch_and_add(&v->counters[SOCKET_C_ACCEPT_OVERFLOW], 1);
		__sync_fetch_and_add(&v->counters[SOCKET_C_LISTENDROP], 1);
	}
	return 1;
}

/* ---- SYN/ACKs sent: once per request, not per packet ----
 *
 * tcp_conn_request sizes the receive window of every request it answers
 * (tcp_openreq_init_rwin, for a normal, cookie or Fast Open SYN/ACK alike)
 * right before it sends the SYN/ACK, and asks the sock_ops programs of the
 * listener's cgroup for it (BPF_SOCK_OPS_RWND_INIT, on the request socket:
 * not a full socket). A sock_ops program at the cgroup2 root runs only for
 * a connection's few set-up callbacks (the per-packet ones need flags this
 * probe never sets), so it costs nothing per packet. Retransmitted
 * SYN/ACKs are counted by tcp_rtx_synack. */

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

SEC("sockops")
int synack_sent(struct bpf_sock_ops *skops)
{
	struct bpf_sock_ops_kern *kctx;
	struct galago_listen_key lk;
	struct galago_sk_owner *o;
	struct socket_tcp_key k;
	struct sock *req;

	if (skops->op != BPF_SOCK_OPS_RWND_INIT || skops->is_fullsock)
		return 1;
	kctx = bpf_cast_to_kern_ctx(skops);
	req = kctx->sk;
	if (!req || req->__sk_common.skc_state != TCP_NEW_SYN_RECV)
		return 1;
	/* The listener's owner by (netns, port), as accepted children find
	 * it: the verifier sees the request's listener pointer (a union
	 * member of sock_common) as a number, which socket storage refuses. */
	lk = galago_listen_key_of(req);
	o = bpf_map_lookup_elem(&galago_listen_owners, &lk);
	if (!o || o->role != GALAGO_ROLE_LISTENER || !owner_observed(o))
		return 1;
	key_owner(&k, o, SOCKET_ROLE_SERVER);
	key_addrs_common(&k, &req->__sk_common, false);
	tcp_add(&k, SOCKET_C_SYNACK_SENT);
	return 1;
}

/* ---- UDP ---- */

static __always_inline struct galago_sk_owner *udp_owner_current(struct sock *sk)
{
	struct galago_sk_owner *o = galago_owner_get(sk);

	if (o && o->tgid == (__u32)(bpf_get_current_pid_tgid() >> 32))
		return o;
	return galago_owner_set_current(sk, GALAGO_ROLE_UNKNOWN, GALAGO_OWNER_CONNECT);
}

/* udp_add adds bytes to field off (UDP_SENDS etc.) of sk's endpoint. */
enum { UDP_RCV_DROPS, UDP_SENDS, UDP_RCVS };

static __always_inline void udp_add(int field, const struct sock *sk, const struct galago_sk_owner *o, __u64 bytes)
{
	const struct sock_common *c = &sk->__sk_common;
	struct socket_udp_key k;
	struct socket_udp_val *v;

	__builtin_memset(&k, 0, sizeof(k));
	k.tgid = o->tgid;
	k.family = c->skc_family;
	k.local_port = c->skc_num;
	k.remote_port = bpf_ntohs(c->skc_dport);
	sk_addrs(c, k.family, k.local, k.remote);
	v = endpoint(&udp_endpoints, &k, &socket_udp_zero);
	if (!v)
		return;
	switch (field) {
	case UDP_RCV_DROPS:
		__sync_fetch_and_add(&v->rcv_drops, bytes);
		break;
	case UDP_SENDS:
		__sync_fetch_and_add(&v->sends, bytes);
		break;
	default:
		__sync_fetch_and_add(&v->rcvs, bytes);
	}
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(udp_send, struct sock *sk, int ret, int flags)
{
	struct galago_sk_owner *o;

	if (ret <= 0 || sk->sk_protocol != IPPROTO_UDP)
		return 0;
	if (sk->__sk_common.skc_family != AF_INET && sk->__sk_common.skc_family != AF_INET6)
		return 0;
	o = udp_owner_current(sk);
	if (!o || !owner_observed(o))
		return 0;
	udp_add(UDP_SENDS, sk, o, ret);
	return 0;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(udp_recv, struct sock *sk, int ret, int flags)
{
	struct galago_sk_owner *o;

	if (ret <= 0 || (flags & MSG_PEEK) || sk->sk_protocol != IPPROTO_UDP)
		return 0;
	if (sk->__sk_common.skc_family != AF_INET && sk->__sk_common.skc_family != AF_INET6)
		return 0;
	o = udp_owner_current(sk);
	if (!o || !owner_observed(o))
		return 0;
	udp_add(UDP_RCVS, sk, o, ret);
	return 0;
}

SEC("tp_btf/udp_fail_queue_rcv_skb")
int BPF_PROG(udp_drop, int rc, struct sock *sk, struct sk_buff *skb)
{
	struct galago_sk_owner *o;

	if (!sk)
		return 0;
	o = galago_owner_get(sk);
	if (!o) {
		ask_walk_sk(sk);
		return 0;
	}
	if (!owner_observed(o))
		return 0;
	/* skb->len is the payload: the UDP header was pulled before queueing. */
	udp_add(UDP_RCV_DROPS, sk, o, BPF_CORE_READ(skb, len));
	return 0;
}

static __always_inline int on_bind(struct bpf_sock *ctx)
{
	struct galago_sk_owner *o;

	if (ctx->protocol != IPPROTO_UDP)
		return 1;
	o = bpf_sk_storage_get(&galago_sk_owners, ctx, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!o)
		return 1;
	o->tgid = bpf_get_current_pid_tgid() >> 32;
	o->role = GALAGO_ROLE_UNKNOWN;
	o->src = GALAGO_OWNER_LISTEN;
	o->cgroup_id = bpf_get_current_cgroup_id();
	return 1;
}

SEC("cgroup/post_bind4")
int udp_bind4(struct bpf_sock *ctx) { return on_bind(ctx); }

SEC("cgroup/post_bind6")
int udp_bind6(struct bpf_sock *ctx) { return on_bind(ctx); }

/* ---- owners of sockets opened before the probe ---- */

/* Every task's open files: sockets get their holder as owner and listeners
 * enter the (netns, port) index their children inherit from. The walk covers
 * every network namespace at once (owners live on the socket itself). It
 * writes no output: user space reads it to the end for the side effects. */
SEC("iter/task_file")
int walk_owners(struct bpf_iter__task_file *ctx)
{
	galago_owner_from_file(ctx->task, ctx->file);
	return 0;
}
