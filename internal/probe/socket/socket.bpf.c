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
 *   tp_btf/tcp_retransmit_synack    retran_synacks (listener, request's peer)
 *   tp_btf/tcp_retransmit_skb       retran_syn (SYN_SENT client sockets, err 0)
 *   tp_btf/kfree_skb                ACK-time listen overflow (reason
 *       TCP_LISTEN_OVERFLOW on the listener), syn_drop (a SYN of an observed
 *       SYN_SENT socket freed on transmit)
 *   cgroup_skb/ingress (cgroup2 root) SYN-time accept/syn queue overflows: the
 *       tcp_conn_request checks, evaluated on the listener just before it runs
 *   cgroup_skb/egress  (cgroup2 root) synack_sent (every SYN/ACK a listener sends)
 *   tp_btf/udp_fail_queue_rcv_skb   udp_rcv_drops (bytes of datagrams the
 *       receive queue refused; the kernel's InErrors path)
 *   tp_btf/sock_send_length, sock_recv_length  bind_sends / bind_rcvs (bytes)
 *   cgroup/post_bind4, post_bind6   owner of UDP sockets that bind and only
 *       receive (drops happen in softirq, where current is unrelated)
 *   iter/task_file                  walk_owners: owners of sockets opened
 *       before the probe (galago_owner_from_file); hooks meeting an unowned
 *       listener or UDP socket ask for a walk (SOCKET_EV_UNOWNED, once per
 *       socket: walk_asked)
 * Events: one fixed-size struct socket_event per occurrence, ring buffer
 *   "events" (lost reservations counted in lost_events); user space
 *   aggregates per endpoint and report period.
 * Filter: snoopers via GALAGO_FILTER, checked against the socket owner.
 * Kernel: 6.2+ (kfree_skb rx_sk needs 6.10+ for ACK-time overflows;
 *   sock_*_length 6.3+), BTF, cgroup2.
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

enum socket_event_type {
	SOCKET_EV_SYN_SENT = 1,
	SOCKET_EV_ACTIVE_OPEN = 2,   /* value: connect->ESTABLISHED ns */
	SOCKET_EV_ACTIVE_FAIL = 3,
	SOCKET_EV_PASSIVE_OPEN = 4,  /* value: SYN/ACK RTT ns, 0 = no sample */
	SOCKET_EV_PASSIVE_FAIL = 5,
	SOCKET_EV_RETRAN_SYNACK = 6,
	SOCKET_EV_RETRAN_SYN = 7,
	SOCKET_EV_SYN_DROP = 8,
	SOCKET_EV_ACCEPT_OVERFLOW = 9, /* also a listen drop */
	SOCKET_EV_SYN_OVERFLOW = 10,   /* value 1: the SYN was dropped (listen drop) */
	SOCKET_EV_LISTEN_DROP = 11,    /* a listen drop that is no overflow */
	SOCKET_EV_SYNACK_SENT = 12,
	SOCKET_EV_UDP_SEND = 13,       /* value: bytes */
	SOCKET_EV_UDP_RECV = 14,       /* value: bytes */
	SOCKET_EV_UDP_DROP = 15,       /* value: bytes */
	SOCKET_EV_UNOWNED = 16,        /* a hook met a listener or UDP socket
					* without owner: user space re-runs the
					* task_file walk (walk_owners) */
};

enum socket_role {
	SOCKET_ROLE_CLIENT = 0,
	SOCKET_ROLE_SERVER = 1,
};

/* TCP: saddr/sport are the client, daddr/dport the server.
 * UDP: saddr/sport are local, daddr/dport remote (zero when unconnected). */
struct socket_event {
	__u32 type;  /* enum socket_event_type */
	__u32 tgid;
	__u64 value;
	__u8 saddr[16];
	__u8 daddr[16];
	__u16 sport;
	__u16 dport;
	__u16 family;
	__u8 role;   /* enum socket_role */
	__u8 _pad;
	char comm[GALAGO_TASK_COMM_LEN];
};

GALAGO_EXPORT_TYPE(struct socket_event, socket_event);
GALAGO_EXPORT_TYPE(enum socket_event_type, socket_event_type);

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1024 * 1024);
} events SEC(".maps");

/* Start of connect() per client socket, for estab_latency. Socket storage:
 * freed with the socket. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} connect_start SEC(".maps");

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
 * ones that follow. sk is a BTF socket or a cgroup_skb full socket. */
static __always_inline void ask_walk(void *sk, __u16 family, __u16 lport)
{
	__u8 *asked = bpf_sk_storage_get(&walk_asked, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	struct socket_event *e;

	if (!asked || *asked)
		return;
	*asked = 1;
	e = GALAGO_RB_RESERVE(&events, struct socket_event);
	if (!e)
		return;
	__builtin_memset(e, 0, sizeof(*e));
	e->type = SOCKET_EV_UNOWNED;
	e->family = family;
	e->sport = lport;
	/* Rare and urgent: wake the reader now rather than at the batch. */
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

static __always_inline void ask_walk_sk(const struct sock *sk)
{
	ask_walk((void *)sk, sk->__sk_common.skc_family, sk->__sk_common.skc_num);
}

static __always_inline bool owner_observed(const struct galago_sk_owner *o)
{
	return galago_observed_in(o->tgid, o->cgroup_id);
}

static __always_inline struct socket_event *ev_new(__u32 type, const struct galago_sk_owner *o, __u8 role)
{
	struct socket_event *e = GALAGO_RB_RESERVE(&events, struct socket_event);

	if (!e)
		return NULL;
	__builtin_memset(e, 0, sizeof(*e));
	e->type = type;
	e->tgid = o->tgid;
	e->role = role;
	__builtin_memcpy(e->comm, o->comm, sizeof(e->comm));
	return e;
}

/* Addresses of a full or request socket (struct sock_common first). */
static __always_inline void ev_addrs_common(struct socket_event *e, const struct sock_common *c, bool local_is_client)
{
	__u16 family = BPF_CORE_READ(c, skc_family);
	__u16 lport = BPF_CORE_READ(c, skc_num);
	__u16 rport = bpf_ntohs(BPF_CORE_READ(c, skc_dport));
	__u8 *local = local_is_client ? e->saddr : e->daddr;
	__u8 *remote = local_is_client ? e->daddr : e->saddr;

	e->family = family;
	/* Explicit sizes: BPF_CORE_READ_INTO copies sizeof(*dst), one byte
	 * through these __u8 pointers. */
	if (family == AF_INET6) {
		bpf_core_read(local, 16, &c->skc_v6_rcv_saddr);
		bpf_core_read(remote, 16, &c->skc_v6_daddr);
	} else {
		bpf_core_read(local, 4, &c->skc_rcv_saddr);
		bpf_core_read(remote, 4, &c->skc_daddr);
	}
	if (local_is_client) {
		e->sport = lport;
		e->dport = rport;
	} else {
		e->sport = rport;
		e->dport = lport;
	}
}

static __always_inline void emit_sk(__u32 type, const struct sock *sk, const struct galago_sk_owner *o, __u8 role, __u64 value)
{
	struct socket_event *e = ev_new(type, o, role);

	if (!e)
		return;
	ev_addrs_common(e, &sk->__sk_common, role == SOCKET_ROLE_CLIENT);
	e->value = value;
	GALAGO_RB_SUBMIT(&events, e);
}

/* ---- TCP state changes ---- */

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(tcp_state, const struct sock *sk, const int oldstate, const int newstate)
{
	struct galago_sk_owner *o;

	if (sk->sk_protocol != IPPROTO_TCP)
		return 0;

	if (oldstate == TCP_LISTEN && newstate == TCP_SYN_RECV) {
		/* A child cloned from a listener (the ACK of the handshake):
		 * it belongs to the listener's owner until accept(). */
		galago_owner_inherit_listener(sk);
		return 0;
	}

	o = galago_owner_on_state(sk, oldstate, newstate);
	if (!o || !owner_observed(o))
		return 0;

	if (oldstate == TCP_CLOSE && newstate == TCP_SYN_SENT) {
		__u64 *ts = bpf_sk_storage_get(&connect_start, (struct sock *)sk, 0, BPF_SK_STORAGE_GET_F_CREATE);

		if (ts)
			*ts = bpf_ktime_get_ns();
		emit_sk(SOCKET_EV_SYN_SENT, sk, o, SOCKET_ROLE_CLIENT, 0);
		return 0;
	}
	if (oldstate == TCP_SYN_SENT && o->role == GALAGO_ROLE_CLIENT) {
		if (newstate == TCP_ESTABLISHED) {
			__u64 *ts = bpf_sk_storage_get(&connect_start, (struct sock *)sk, 0, 0);
			__u64 lat = 0;

			if (ts && *ts) {
				lat = bpf_ktime_get_ns() - *ts;
				*ts = 0;
			}
			emit_sk(SOCKET_EV_ACTIVE_OPEN, sk, o, SOCKET_ROLE_CLIENT, lat);
		} else {
			emit_sk(SOCKET_EV_ACTIVE_FAIL, sk, o, SOCKET_ROLE_CLIENT, 0);
		}
		return 0;
	}
	if (oldstate == TCP_SYN_RECV && o->role == GALAGO_ROLE_SERVER) {
		if (newstate == TCP_ESTABLISHED) {
			/* tcp_rcv_state_process took the SYN/ACK RTT sample
			 * (tcp_synack_rtt_meas) just before; srtt_us is 8x
			 * the first sample. No sample when the SYN/ACK was
			 * retransmitted (Karn). */
			const struct tcp_sock *tp = (const struct tcp_sock *)sk;
			__u64 srtt = BPF_CORE_READ(tp, srtt_us) >> 3;

			emit_sk(SOCKET_EV_PASSIVE_OPEN, sk, o, SOCKET_ROLE_SERVER, srtt * 1000);
		} else {
			emit_sk(SOCKET_EV_PASSIVE_FAIL, sk, o, SOCKET_ROLE_SERVER, 0);
		}
	}
	return 0;
}

SEC("tp_btf/tcp_retransmit_synack")
int BPF_PROG(tcp_rtx_synack, const struct sock *sk, const struct request_sock *req)
{
	struct galago_sk_owner *o = galago_owner_get(sk);
	struct socket_event *e;

	if (!o) {
		ask_walk_sk(sk);
		return 0;
	}
	if (o->role != GALAGO_ROLE_LISTENER || !owner_observed(o))
		return 0;
	e = ev_new(SOCKET_EV_RETRAN_SYNACK, o, SOCKET_ROLE_SERVER);
	if (!e)
		return 0;
	ev_addrs_common(e, &req->__req_common, false);
	GALAGO_RB_SUBMIT(&events, e);
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
	emit_sk(SOCKET_EV_RETRAN_SYN, sk, o, SOCKET_ROLE_CLIENT, 0);
	return 0;
}

/* Client IP and port of a packet received by a listener, from its headers. */
static __always_inline void ev_addrs_skb(struct socket_event *e, const struct sk_buff *skb, const struct sock *listener)
{
	unsigned char *head = BPF_CORE_READ(skb, head);
	__u16 nh = BPF_CORE_READ(skb, network_header);
	__u16 th = BPF_CORE_READ(skb, transport_header);
	__u16 port;

	if (BPF_CORE_READ(skb, protocol) == bpf_htons(0x86DD)) {
		struct ipv6hdr *ip6 = (struct ipv6hdr *)(head + nh);

		e->family = AF_INET6;
		bpf_probe_read_kernel(e->saddr, 16, &ip6->saddr);
		bpf_probe_read_kernel(e->daddr, 16, &ip6->daddr);
	} else {
		struct iphdr *ip = (struct iphdr *)(head + nh);

		e->family = AF_INET;
		bpf_probe_read_kernel(e->saddr, 4, &ip->saddr);
		bpf_probe_read_kernel(e->daddr, 4, &ip->daddr);
	}
	bpf_probe_read_kernel(&port, 2, head + th);
	e->sport = bpf_ntohs(port);
	e->dport = listener->__sk_common.skc_num;
}

SEC("tp_btf/kfree_skb")
int BPF_PROG(skb_drop, struct sk_buff *skb, void *location, enum skb_drop_reason reason, struct sock *rx_sk)
{
	struct galago_sk_owner *o;
	struct socket_event *e;

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
		e = ev_new(full ? SOCKET_EV_ACCEPT_OVERFLOW : SOCKET_EV_LISTEN_DROP, o, SOCKET_ROLE_SERVER);
		if (!e)
			return 0;
		ev_addrs_skb(e, skb, rx_sk);
		GALAGO_RB_SUBMIT(&events, e);
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
	emit_sk(SOCKET_EV_SYN_DROP, sk, o, SOCKET_ROLE_CLIENT, 0);
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

static __always_inline void pkt_to_ev(struct socket_event *e, const struct pkt *p, bool ingress)
{
	/* Ingress SYN: source is the client. Egress SYN/ACK: destination is. */
	e->family = p->family;
	if (p->family == AF_INET) {
		__builtin_memcpy(e->saddr, ingress ? &p->saddr4 : &p->daddr4, 4);
		__builtin_memcpy(e->daddr, ingress ? &p->daddr4 : &p->saddr4, 4);
	} else {
		__builtin_memcpy(e->saddr, ingress ? p->saddr6 : p->daddr6, 16);
		__builtin_memcpy(e->daddr, ingress ? p->daddr6 : p->saddr6, 16);
	}
	e->sport = bpf_ntohs(ingress ? p->sport : p->dport);
	e->dport = bpf_ntohs(ingress ? p->dport : p->sport);
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
		ask_walk(bsk, bsk->family, bsk->src_port);
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

	if (!bsk)
		return 1;
	bsk = bpf_sk_fullsock(bsk);
	if (!bsk)
		return 1;
	o = listener_owner(bsk);
	if (!o)
		return 1;
	parse_pkt(skb, &p);
	if (!p.ok || (p.flags & (TCPHDR_SYN | TCPHDR_ACK | TCPHDR_RST | TCPHDR_FIN)) != TCPHDR_SYN)
		return 1;
	if (!fresh_syn(skb, &p))
		return 1;
	tp = bpf_skc_to_tcp_sock(bsk);
	if (!tp)
		return 1;

	/* tcp_conn_request's checks, in its order. */
	struct sock *sk = (struct sock *)tp;
	__u32 max = sk->sk_max_ack_backlog;
	__u32 qlen = tp->inet_conn.icsk_accept_queue.qlen.counter;
	__u8 syncookies = sk->__sk_common.skc_net.net->ipv4.sysctl_tcp_syncookies;
	struct socket_event *e;

	if (qlen > max) {
		e = ev_new(SOCKET_EV_SYN_OVERFLOW, o, SOCKET_ROLE_SERVER);
		if (e) {
			pkt_to_ev(e, &p, true);
			e->value = syncookies == 0; /* no cookie: dropped */
			GALAGO_RB_SUBMIT(&events, e);
		}
		if (syncookies == 0)
			return 1;
	}
	if (sk->sk_ack_backlog > max) {
		e = ev_new(SOCKET_EV_ACCEPT_OVERFLOW, o, SOCKET_ROLE_SERVER);
		if (e) {
			pkt_to_ev(e, &p, true);
			GALAGO_RB_SUBMIT(&events, e);
		}
	}
	return 1;
}

SEC("cgroup_skb/egress")
int listen_egress(struct __sk_buff *skb)
{
	struct bpf_sock *bsk = skb->sk;
	struct galago_sk_owner *o;
	struct socket_event *e;
	struct pkt p = {};

	if (!bsk)
		return 1;
	bsk = bpf_sk_fullsock(bsk);
	if (!bsk)
		return 1;
	o = listener_owner(bsk);
	if (!o)
		return 1;
	parse_pkt(skb, &p);
	if (!p.ok || (p.flags & (TCPHDR_SYN | TCPHDR_ACK)) != (TCPHDR_SYN | TCPHDR_ACK))
		return 1;
	e = ev_new(SOCKET_EV_SYNACK_SENT, o, SOCKET_ROLE_SERVER);
	if (!e)
		return 1;
	pkt_to_ev(e, &p, false);
	GALAGO_RB_SUBMIT(&events, e);
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

static __always_inline void emit_udp(__u32 type, struct sock *sk, const struct galago_sk_owner *o, __u64 bytes)
{
	struct socket_event *e = ev_new(type, o, 0);

	if (!e)
		return;
	ev_addrs_common(e, &sk->__sk_common, true);
	e->value = bytes;
	GALAGO_RB_SUBMIT(&events, e);
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
	emit_udp(SOCKET_EV_UDP_SEND, sk, o, ret);
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
	emit_udp(SOCKET_EV_UDP_RECV, sk, o, ret);
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
	emit_udp(SOCKET_EV_UDP_DROP, sk, o, BPF_CORE_READ(skb, len));
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
