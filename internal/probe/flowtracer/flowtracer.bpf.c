//go:build ignore

/* flowtracer: carries a connection's original client address across NAT
 * to the server, as gala-gopher's flowtracer does: the client writes its
 * own address into a TCP option of its SYN, the server reads it back from
 * the SYN once the connection is established.
 *
 * Hook: one sock_ops program at the cgroup2 root (every socket of the
 * machine, every network namespace), IPv4, IPv6 and IPv4-mapped IPv6:
 *   TCP_CONNECT_CB        (client) ask for the header-option callbacks;
 *   HDR_OPT_LEN_CB        reserve the option on the SYN: 8 bytes for an
 *                         IPv4 connection (an AF_INET6 socket's too when
 *                         its address is IPv4-mapped: IPv4 on the wire),
 *                         20 for IPv6;
 *   WRITE_HDR_OPT_CB      write {kind 0x55, len 8, port, IPv4 address} or
 *                         {kind 0x55, len 20, port, IPv6 address}: the
 *                         client's own port and address (network order);
 *   ACTIVE_ESTABLISHED_CB stop the callbacks (no cost per later segment);
 *   TCP_LISTEN_CB         (server) TCP_SAVE_SYN on the new listener, so
 *                         its connections keep their SYN;
 *   PASSIVE_ESTABLISHED_CB read option 0x55 (either length) from the saved
 *                         SYN and record the connection as the server sees
 *                         it (network namespace, addresses, ports) -> the
 *                         original client; ask for the state callback;
 *   STATE_CB              (server, with an origin) at TCP_CLOSE, stamp the
 *                         entry closed: user space deletes it after a grace
 *                         period, so the tcp probe can still name the real
 *                         client of a connection it first sees closed.
 * The SYN of Linux carries 20 bytes of options (MSS, SACK-permitted,
 * timestamps, window scale): 20 are left of TCP's 40, so the IPv6 form
 * fits exactly; a SYN with more (TCP-MD5, TCP-AO) goes without.
 * Maps: origins (hash, not LRU, so that a full table is counted: an insert
 *   that fails counts FT_FULL), ft_stats (per CPU: options written,
 *   options read, SYNs without room for the option, inserts that failed).
 * Kernel: 5.10+ (sock_ops header options), cgroup2. */
#include "common.h"

#define AF_INET 2
#define AF_INET6 10
#define SOL_TCP 6
#define TCP_SAVE_SYN 27
#define TCP_CLOSE 7
#define TCPHDR_SYN 0x02
#define TCPHDR_ACK 0x10
#define FT_OPT_KIND 0x55

/* The option as written: IPv4 (len 8) or IPv6 (len 20). */
struct ft_opt4 {
	__u8 kind;
	__u8 len;
	__u16 port; /* network order */
	__u32 addr; /* network order */
};

struct ft_opt6 {
	__u8 kind;
	__u8 len;
	__u16 port;     /* network order */
	__u32 addr[4];  /* network order */
};

/* A connection as the server sees it: its network namespace (inode), its
 * own address and port, the peer's (after any SNAT on the way).
 * Addresses are IPv6, network order (IPv4 as IPv4-mapped), ports host
 * order. */
struct ft_key {
	__u32 netns;
	__u16 local_port;
	__u16 remote_port;
	__u32 local_addr[4];
	__u32 remote_addr[4];
};

/* The client's own address (IPv6, network order; IPv4 as IPv4-mapped) and
 * port (host order) as it wrote them in its SYN; closed_ns: when the
 * server's connection closed (bpf_ktime_get_ns), 0 while it is open. */
struct ft_origin {
	__u64 closed_ns;
	__u32 addr[4];
	__u16 port;
	__u16 _pad;
	__u32 _pad2;
};

enum ft_stat {
	FT_WRITTEN = 0,
	FT_READ = 1,
	FT_NO_ROOM = 2,
	FT_FULL = 3,
	FT_STAT_MAX = 4,
};

GALAGO_EXPORT_TYPE(struct ft_key, key);
GALAGO_EXPORT_TYPE(struct ft_origin, origin);
GALAGO_EXPORT_TYPE(enum ft_stat, stat);

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct ft_key);
	__type(value, struct ft_origin);
} origins SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FT_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} ft_stats SEC(".maps");

static __always_inline void count(__u32 s)
{
	__u64 *n = bpf_map_lookup_elem(&ft_stats, &s);

	if (n)
		*n += 1;
}

static __always_inline bool is_syn(struct bpf_sock_ops *skops)
{
	return (skops->skb_tcp_flags & (TCPHDR_SYN | TCPHDR_ACK)) == TCPHDR_SYN;
}

/* v4_on_wire: the connection is IPv4: an AF_INET socket, or an AF_INET6
 * one whose local address is IPv4-mapped (::ffff:a.b.c.d). */
static __always_inline bool v4_on_wire(struct bpf_sock_ops *skops)
{
	if (skops->family == AF_INET)
		return true;
	return skops->local_ip6[0] == 0 && skops->local_ip6[1] == 0 && skops->local_ip6[2] == bpf_htonl(0xffff);
}

static __always_inline void map4(__u32 *dst, __u32 a)
{
	dst[0] = 0;
	dst[1] = 0;
	dst[2] = bpf_htonl(0xffff);
	dst[3] = a;
}

/* key_of: the server-side connection of skops (a full TCP socket). false:
 * not an address family of ours, or no socket to read the namespace from. */
static __always_inline bool key_of(struct bpf_sock_ops *skops, struct ft_key *k)
{
	struct bpf_sock *bsk = skops->sk;
	struct tcp_sock *tp;

	if (!bsk)
		return false;
	tp = bpf_skc_to_tcp_sock(bsk);
	if (!tp)
		return false;
	k->netns = BPF_CORE_READ(tp, inet_conn.icsk_inet.sk.__sk_common.skc_net.net, ns.inum);
	k->local_port = (__u16)skops->local_port;
	k->remote_port = (__u16)bpf_ntohl(skops->remote_port);
	if (skops->family == AF_INET) {
		map4(k->local_addr, skops->local_ip4);
		map4(k->remote_addr, skops->remote_ip4);
		return true;
	}
	if (skops->family != AF_INET6)
		return false;
	k->local_addr[0] = skops->local_ip6[0];
	k->local_addr[1] = skops->local_ip6[1];
	k->local_addr[2] = skops->local_ip6[2];
	k->local_addr[3] = skops->local_ip6[3];
	k->remote_addr[0] = skops->remote_ip6[0];
	k->remote_addr[1] = skops->remote_ip6[1];
	k->remote_addr[2] = skops->remote_ip6[2];
	k->remote_addr[3] = skops->remote_ip6[3];
	return true;
}

static __always_inline void write_opt(struct bpf_sock_ops *skops)
{
	if (v4_on_wire(skops)) {
		struct ft_opt4 o = {.kind = FT_OPT_KIND, .len = sizeof(o)};

		o.port = bpf_htons((__u16)skops->local_port);
		/* an IPv4-mapped socket's IPv4 address is set too (by
		 * tcp_v4_connect, which tcp_v6_connect calls for it) */
		o.addr = skops->local_ip4;
		if (!bpf_store_hdr_opt(skops, &o, sizeof(o), 0))
			count(FT_WRITTEN);
		return;
	}
	struct ft_opt6 o = {.kind = FT_OPT_KIND, .len = sizeof(o)};

	o.port = bpf_htons((__u16)skops->local_port);
	o.addr[0] = skops->local_ip6[0];
	o.addr[1] = skops->local_ip6[1];
	o.addr[2] = skops->local_ip6[2];
	o.addr[3] = skops->local_ip6[3];
	if (!bpf_store_hdr_opt(skops, &o, sizeof(o), 0))
		count(FT_WRITTEN);
}

/* read_opt: the option of the saved SYN into the connection's entry. */
static __always_inline void read_opt(struct bpf_sock_ops *skops)
{
	struct ft_opt6 opt = {.kind = FT_OPT_KIND};
	struct ft_origin o = {};
	struct ft_key k = {};
	long n;

	n = bpf_load_hdr_opt(skops, &opt, sizeof(opt), BPF_LOAD_HDR_OPT_TCP_SYN);
	if (n == sizeof(struct ft_opt4) && opt.len == sizeof(struct ft_opt4)) {
		map4(o.addr, opt.addr[0]);
	} else if (n == sizeof(struct ft_opt6) && opt.len == sizeof(struct ft_opt6)) {
		o.addr[0] = opt.addr[0];
		o.addr[1] = opt.addr[1];
		o.addr[2] = opt.addr[2];
		o.addr[3] = opt.addr[3];
	} else {
		return;
	}
	o.port = bpf_ntohs(opt.port);
	if (!key_of(skops, &k))
		return;
	if (bpf_map_update_elem(&origins, &k, &o, BPF_ANY)) {
		count(FT_FULL);
		return;
	}
	count(FT_READ);
	bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_STATE_CB_FLAG);
}

static __always_inline void closed(struct bpf_sock_ops *skops)
{
	struct ft_origin *o;
	struct ft_key k = {};

	if (!key_of(skops, &k))
		return;
	o = bpf_map_lookup_elem(&origins, &k);
	if (o)
		o->closed_ns = bpf_ktime_get_ns();
}

SEC("sockops")
int flowtracer_sockops(struct bpf_sock_ops *skops)
{
	if (skops->family != AF_INET && skops->family != AF_INET6)
		return 1;
	switch (skops->op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
		bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
		break;
	case BPF_SOCK_OPS_HDR_OPT_LEN_CB:
		if (is_syn(skops) &&
		    bpf_reserve_hdr_opt(skops, v4_on_wire(skops) ? sizeof(struct ft_opt4) : sizeof(struct ft_opt6), 0))
			count(FT_NO_ROOM);
		break;
	case BPF_SOCK_OPS_WRITE_HDR_OPT_CB:
		if (is_syn(skops))
			write_opt(skops);
		break;
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
		bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags & ~BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
		break;
	case BPF_SOCK_OPS_TCP_LISTEN_CB: {
		int one = 1;

		bpf_setsockopt(skops, SOL_TCP, TCP_SAVE_SYN, &one, sizeof(one));
		break;
	}
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		read_opt(skops);
		break;
	case BPF_SOCK_OPS_STATE_CB:
		if (skops->args[1] == TCP_CLOSE)
			closed(skops);
		break;
	}
	return 1;
}
