//go:build ignore

/* flowtracer: carries a connection's original client address across NAT
 * to the server, as gala-gopher's flowtracer does: the client writes its
 * own address into a TCP option of its SYN, the server reads it back from
 * the SYN once the connection is established.
 *
 * Hook: one sock_ops program at the cgroup2 root (every socket of the
 * machine, every network namespace), IPv4 only:
 *   TCP_CONNECT_CB        (client) ask for the header-option callbacks;
 *   HDR_OPT_LEN_CB        reserve 8 bytes on the SYN;
 *   WRITE_HDR_OPT_CB      write {kind 0x55, len 8, port, address}: the
 *                         client's own port and address (network order);
 *   ACTIVE_ESTABLISHED_CB stop the callbacks (no cost per later segment);
 *   TCP_LISTEN_CB         (server) TCP_SAVE_SYN on the new listener, so
 *                         its connections keep their SYN;
 *   PASSIVE_ESTABLISHED_CB read option 0x55 from the saved SYN and record
 *                         the connection as the server sees it -> the
 *                         original client.
 * Maps: origins (LRU hash: the oldest connections age out; user space
 *   reads it for cluster_ip_backend=2), ft_stats (per CPU: options written,
 *   options read, SYNs without room for the option).
 * Kernel: 5.10+ (sock_ops header options), cgroup2. */
#include "common.h"

#define AF_INET 2
#define SOL_TCP 6
#define TCP_SAVE_SYN 27
#define TCPHDR_SYN 0x02
#define TCPHDR_ACK 0x10
#define FT_OPT_KIND 0x55

struct ft_opt {
	__u8 kind;
	__u8 len;
	__u16 port; /* network order */
	__u32 addr; /* network order */
};

/* A connection as the server sees it: its own address and port, the
 * peer's (after any SNAT on the way). Addresses network order, ports host
 * order. */
struct ft_key {
	__u32 local_addr;
	__u32 remote_addr;
	__u16 local_port;
	__u16 remote_port;
};

/* The client's own address and port, as it wrote them in its SYN. */
struct ft_origin {
	__u32 addr; /* network order */
	__u16 port; /* host order */
	__u16 _pad;
};

enum ft_stat {
	FT_WRITTEN = 0,
	FT_READ = 1,
	FT_NO_ROOM = 2,
	FT_STAT_MAX = 3,
};

GALAGO_EXPORT_TYPE(struct ft_key, key);
GALAGO_EXPORT_TYPE(struct ft_origin, origin);
GALAGO_EXPORT_TYPE(enum ft_stat, stat);

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
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

SEC("sockops")
int flowtracer_sockops(struct bpf_sock_ops *skops)
{
	struct ft_opt opt = {};

	if (skops->family != AF_INET)
		return 1;
	switch (skops->op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
		bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
		break;
	case BPF_SOCK_OPS_HDR_OPT_LEN_CB:
		if (is_syn(skops) && bpf_reserve_hdr_opt(skops, sizeof(opt), 0))
			count(FT_NO_ROOM);
		break;
	case BPF_SOCK_OPS_WRITE_HDR_OPT_CB:
		if (!is_syn(skops))
			break;
		opt.kind = FT_OPT_KIND;
		opt.len = sizeof(opt);
		opt.port = bpf_htons((__u16)skops->local_port);
		opt.addr = skops->local_ip4;
		if (!bpf_store_hdr_opt(skops, &opt, sizeof(opt), 0))
			count(FT_WRITTEN);
		break;
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
		bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags & ~BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
		break;
	case BPF_SOCK_OPS_TCP_LISTEN_CB: {
		int one = 1;

		bpf_setsockopt(skops, SOL_TCP, TCP_SAVE_SYN, &one, sizeof(one));
		break;
	}
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB: {
		struct ft_key k = {};
		struct ft_origin o = {};

		opt.kind = FT_OPT_KIND;
		if (bpf_load_hdr_opt(skops, &opt, sizeof(opt), BPF_LOAD_HDR_OPT_TCP_SYN) != sizeof(opt) ||
		    opt.len != sizeof(opt))
			break;
		k.local_addr = skops->local_ip4;
		k.remote_addr = skops->remote_ip4;
		k.local_port = (__u16)skops->local_port;
		k.remote_port = (__u16)bpf_ntohl(skops->remote_port);
		o.addr = opt.addr;
		o.port = bpf_ntohs(opt.port);
		bpf_map_update_elem(&origins, &k, &o, BPF_ANY);
		count(FT_READ);
		break;
	}
	}
	return 1;
}
