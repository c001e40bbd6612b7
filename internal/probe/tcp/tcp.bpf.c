//go:build ignore

/* tcp: per-connection TCP statistics for the tcp_metric (tcp_link) table.
 *
 * Cost model: the kernel already keeps most counters per socket (tcp_sock),
 * so they are read, not recomputed: once per sample period by an iterator and
 * once more when the socket closes. Only discrete, rare events (resets,
 * drops with a reason, buffer-limit hits) have their own hooks. No hook runs
 * per packet or per syscall.
 *
 * Programs:
 *   iter/task_file          dump_tcp: records which process holds each inet
 *                           socket (sockowner.h; picks up sockets that
 *                           existed before the probe and fixes owners of
 *                           accepted sockets), and writes one struct
 *                           tcp_conn (type SNAPSHOT) per observed TCP socket
 *                           held in an fd table, one (type LISTEN) per
 *                           listener, with bpf_seq_write; marks namespaces
 *                           holding connected MPTCP sockets (netns_seen)
 *   iter/tcp                dump_mptcp, only in those namespaces: SNAPSHOT
 *                           records of MPTCP subflows (in no fd table)
 *   tp_btf/inet_sock_set_state  owners at connect/listen/accept; SYN RTT at
 *                           ESTABLISHED; a struct tcp_conn (type CLOSE) with
 *                           the final counters at the transition to CLOSE, so
 *                           connections shorter than a period count exactly.
 *   tp_btf/tcp_send_reset, tp_btf/tcp_receive_reset   send_rsts, receive_rsts;
 *                           tcp_oom: resets sent with reason
 *                           SK_RST_REASON_TCP_ABORT_ON_MEMORY (6.10+ reason
 *                           argument; tcp_check_oom() true in tcp_close or
 *                           tcp_out_of_resources)
 *   tp_btf/kfree_skb        backlog_drops, filter_drops (drop reasons
 *                           SOCKET_BACKLOG / SOCKET_FILTER with the rx socket)
 *   tp_btf/sock_exceed_buf_limit  snd_buf_limit_count (SK_MEM_SEND),
 *                           rmem_scheduls (SK_MEM_RECV)
 *   sockops                 on_sock_ops (attached at the cgroup2 root only while
 *                           tcp_delay is on): net_delay of proc_flow_perf with
 *                           BPF TX timestamping (6.15+): flags observed
 *                           connections at ESTABLISHED, times one write per
 *                           socket at a time from tcp_sendmsg
 *                           (TSTAMP_SENDMSG_CB) to the ACK of its last byte
 *                           (TSTAMP_ACK_CB), one DELAY record per sample.
 * Maps: galago_sk_owners, galago_listen_owners (sockowner.h; the owner's
 *   tcp_aux word: SYN RTT and generation), tcp_counters (sk storage: the event
 *   counters above, created by the first event), events (ring buffer: CLOSE and
 *   LATE records), lost_events, filter_* (snooper filter, common.h).
 * Kernel: 5.11+ (sk storage in tracing programs), 6.1+ for the drop reason
 *   and rx socket arguments of kfree_skb (checked by the loader), BTF.
 */
#define GALAGO_RINGBUF
#define GALAGO_FILTER
#include "common.h"
#include "sockowner.h"

#ifndef IPPROTO_TCP
#define IPPROTO_TCP 6
#endif
#define SK_MEM_SEND 0
#define SK_MEM_RECV 1

enum tcp_rec_type {
	TCP_REC_SNAPSHOT = 1, /* iterator: a live connection */
	TCP_REC_LISTEN = 2,   /* iterator: a listener (role inference) */
	TCP_REC_CLOSE = 3,    /* final counters at the transition to CLOSE */
	TCP_REC_LATE = 4,     /* an event on an already closed socket */
	TCP_REC_DELAY = 5,    /* struct tcp_delay: one net_delay sample */
};

/* Value not available (e.g. CONFIG_HZ unknown for jiffies fields). */
#define TCP_UNSET 0xffffffffu

/* Per-socket event counters the kernel does not keep itself (socket
 * storage, created by the first such event). In records, syn_srtt_us and
 * gen come from the owner's tcp_aux word, not from the storage. */
struct tcp_counters {
	__u32 send_rsts;
	__u32 receive_rsts;
	__u32 backlog_drops;
	__u32 filter_drops;
	__u32 snd_buf_limit;
	__u32 rmem_scheduls;
	__u32 syn_srtt_us; /* smoothed RTT when the handshake completed; 0 unknown */
	__u32 gen;         /* connections closed on this socket (tcp_disconnect reuse) */
	__u32 tcp_oom;     /* resets sent because tcp_check_oom() said so */
	__u32 _pad;
};

/* One connection (or listener) as the iterator or the close hook sees it.
 * Counters are cumulative since the connection started; the reader turns
 * them into per-period deltas. */
struct tcp_conn {
	__u32 type; /* enum tcp_rec_type */
	__u32 tgid;
	__u64 cookie;    /* socket cookie: connection identity */
	__u64 cgroup_id; /* owner's cgroup2 id */
	char comm[GALAGO_TASK_COMM_LEN];
	__u8 saddr[16]; /* local address (IPv4 in the first 4 bytes) */
	__u8 daddr[16]; /* remote address */
	__u16 sport;    /* local port, host order */
	__u16 dport;    /* remote port, host order */
	__u16 family;   /* AF_INET / AF_INET6 */
	__u8 role;      /* enum galago_sk_role */
	__u8 state;     /* TCP state at the time of the record */
	__u32 netns;
	__u32 gen;
	/* cumulative counters */
	__u64 bytes_acked;    /* data bytes acknowledged by the peer (tx) */
	__u64 bytes_received; /* data bytes received (rx) */
	__u32 segs_in;
	__u32 segs_out;
	__u32 total_retrans;
	__u32 sk_drops;
	/* instantaneous values */
	__u32 lost_out;
	__u32 sacked_out;
	__u32 srtt_us;
	__u32 rcv_rtt_us;
	__u32 snd_cwnd;
	__u32 notsent_bytes;
	__u32 notack_bytes;
	__u32 reordering;
	__u32 snd_wnd;
	__u32 rcv_wnd;
	__u32 avl_snd_wnd;
	__u32 rto_us; /* TCP_UNSET when CONFIG_HZ is unknown */
	__u32 ato_us; /* TCP_UNSET when CONFIG_HZ is unknown */
	__u32 sk_rcvbuf;
	__u32 sk_sndbuf;
	/* tcp_sock.total_rto (6.7+, RTO expirations, 16 bits: wraps);
	 * TCP_UNSET on kernels without it. */
	__u32 total_rto;
	struct tcp_counters c; /* LATE records: the counter increments */
};

/* One net_delay sample (ring buffer, TCP_REC_DELAY): the time from the end
 * of a tcp_sendmsg to the ACK of the last byte it queued. */
struct tcp_delay {
	__u32 type; /* TCP_REC_DELAY */
	__u32 tgid;
	__u64 delay_ns;
	__u8 raddr[16]; /* remote address (IPv4 in the first 4 bytes) */
	__u16 server_port;
	__u16 family;
	__u8 role; /* enum galago_sk_role: client or server */
	__u8 _pad[3];
};

GALAGO_EXPORT_TYPE(struct tcp_conn, tcp_conn);
GALAGO_EXPORT_TYPE(struct tcp_delay, tcp_delay);
GALAGO_EXPORT_TYPE(enum tcp_rec_type, tcp_rec_type);
GALAGO_EXPORT_TYPE(struct galago_sk_owner, sk_owner);

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tcp_counters);
} tcp_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1024 * 1024);
} events SEC(".maps");

/* Scratch record for the iterator (too large for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tcp_conn);
} scratch SEC(".maps");

/* CONFIG_HZ of the running kernel, set by the loader before load (from the
 * kernel config); 0 when unknown, which leaves rto and ato unset. Not a
 * __kconfig extern: a kernel without an accessible config would then fail
 * to load the whole object. */
const volatile __u32 kernel_hz = 0;

static __always_inline __u32 jiffies_to_us(__u64 j)
{
	__u64 hz = kernel_hz;

	if (!hz)
		return TCP_UNSET;
	return (__u32)(j * 1000000 / hz);
}

static __always_inline bool is_tcp(const struct sock *sk)
{
	return sk && sk->sk_protocol == IPPROTO_TCP &&
	       (sk->__sk_common.skc_family == AF_INET || sk->__sk_common.skc_family == AF_INET6);
}

static __always_inline struct tcp_counters *counters(const struct sock *sk, bool create)
{
	return bpf_sk_storage_get(&tcp_counters, (struct sock *)sk, 0, create ? BPF_SK_STORAGE_GET_F_CREATE : 0);
}

static __always_inline bool owner_observed(const struct galago_sk_owner *o)
{
	return o && o->tgid && galago_observed_in(o->tgid, o->cgroup_id);
}

/* The owner's tcp_aux word (sockowner.h) holds the two per-connection values
 * every connection has, so that no second socket storage is allocated per
 * connection: the low 32 bits the smoothed RTT when the handshake
 * completed (us, 0 unknown), the high 32 bits the generation (connections
 * closed on this socket: tcp_disconnect reuse). tcp_counters is created
 * only by the rare events it counts. */
static __always_inline __u32 owner_syn_srtt(const struct galago_sk_owner *o)
{
	return (__u32)o->tcp_aux;
}

static __always_inline __u32 owner_gen(const struct galago_sk_owner *o)
{
	return o->tcp_aux >> 32;
}

static __always_inline void fill_addrs(struct tcp_conn *e, const struct sock *sk)
{
	e->family = sk->__sk_common.skc_family;
	e->sport = galago_sk_local_port(sk); /* skc_num is 0 by the close hook */
	e->dport = bpf_ntohs(sk->__sk_common.skc_dport);
	e->netns = galago_sk_netns(sk);
	e->state = sk->__sk_common.skc_state;
	if (e->family == AF_INET) {
		__builtin_memset(e->saddr, 0, sizeof(e->saddr));
		__builtin_memset(e->daddr, 0, sizeof(e->daddr));
		*(__u32 *)e->saddr = sk->__sk_common.skc_rcv_saddr;
		*(__u32 *)e->daddr = sk->__sk_common.skc_daddr;
	} else {
		BPF_CORE_READ_INTO(&e->saddr, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8);
		BPF_CORE_READ_INTO(&e->daddr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
	}
}

/* CO-RE flavours of 6.17+ fields, so the object builds against headers that
 * predate them; relocations match them by name against the running kernel. */
struct numa_drop_counters___galago {
	atomic_t drops0;
	atomic_t drops1;
} __attribute__((preserve_access_index));

struct sock___galago {
	struct numa_drop_counters___galago *sk_drop_counters;
} __attribute__((preserve_access_index));

/* tcp_sock.total_rto appeared in 6.7: a flavour so that the object also
 * builds against older headers; absent on the running kernel, the guarded
 * read is removed by the loader and the value reported as unset. */
struct tcp_sock___galago_rto {
	u16 total_rto;
} __attribute__((preserve_access_index));

static __always_inline __u32 total_rto_of(const struct tcp_sock *tp)
{
	const struct tcp_sock___galago_rto *t2 = (const void *)tp;

	if (bpf_core_field_exists(t2->total_rto))
		return t2->total_rto;
	return TCP_UNSET;
}

static __always_inline __u32 sk_drops_of(const struct sock *sk)
{
	/* Direct loads (sk is a BTF pointer), not helper calls: this runs at
	 * every close. */
	__u32 n = sk->sk_drops.counter;
	struct sock___galago *s2 = (void *)sk;

	/* 6.17+: some protocols spread drops over NUMA counters. */
	if (bpf_core_field_exists(s2->sk_drop_counters)) {
		struct numa_drop_counters___galago *nd = s2->sk_drop_counters;
		if (nd)
			n += nd->drops0.counter + nd->drops1.counter;
	}
	return n;
}

/* Data bytes only. bytes_acked and bytes_received advance with sequence
 * numbers, and SYN and FIN each take one: an active opener's bytes_acked
 * counts its SYN (a passive opener's counter starts after the handshake),
 * an acknowledged FIN adds one to the sender's bytes_acked, a received FIN
 * one to the receiver's bytes_received. state is the connection's state
 * (for a close record: the state it left). */
static __always_inline void data_bytes(struct tcp_conn *e, struct tcp_sock *tp, const struct galago_sk_owner *o,
				       int state)
{
	const struct sock *sk = (const struct sock *)tp;
	__u64 acked = tp->bytes_acked, received = tp->bytes_received;
	__u64 nondata = 0;
	bool fin_acked;

	if (o->role == GALAGO_ROLE_CLIENT && acked > 0)
		nondata++; /* SYN */
	fin_acked = state == TCP_FIN_WAIT2 ||
		    ((state == TCP_CLOSING || state == TCP_LAST_ACK) && tp->snd_una == tp->snd_nxt);
	if (fin_acked)
		nondata++;
	e->bytes_acked = acked > nondata ? acked - nondata : 0;
	/* SOCK_DONE is set by tcp_fin() only: a FIN was received. */
	if ((sk->__sk_common.skc_flags & (1UL << bpf_core_enum_value(enum sock_flags, SOCK_DONE))) && received > 0)
		received--;
	e->bytes_received = received;
}

static __always_inline void fill_conn(struct tcp_conn *e, struct tcp_sock *tp, const struct galago_sk_owner *o,
				      const struct tcp_counters *c, int state)
{
	const struct sock *sk = (const struct sock *)tp;
	const struct inet_connection_sock *icsk = (const struct inet_connection_sock *)tp;
	__u32 snd_una = tp->snd_una, snd_nxt = tp->snd_nxt, write_seq = tp->write_seq;
	__u32 wnd_end = snd_una + tp->snd_wnd;

	e->tgid = o->tgid;
	e->cgroup_id = o->cgroup_id;
	__builtin_memcpy(e->comm, o->comm, sizeof(e->comm));
	e->role = o->role;
	e->cookie = bpf_get_socket_cookie((void *)sk);
	fill_addrs(e, sk);
	data_bytes(e, tp, o, state);
	e->segs_in = tp->segs_in;
	e->segs_out = tp->segs_out;
	e->total_retrans = tp->total_retrans;
	e->sk_drops = sk_drops_of(sk);
	e->lost_out = tp->lost_out;
	e->sacked_out = tp->sacked_out;
	e->srtt_us = tp->srtt_us >> 3;
	e->rcv_rtt_us = tp->rcv_rtt_est.rtt_us >> 3;
	e->snd_cwnd = tp->snd_cwnd;
	e->notsent_bytes = (__s32)(write_seq - snd_nxt) > 0 ? write_seq - snd_nxt : 0;
	e->notack_bytes = (__s32)(snd_nxt - snd_una) > 0 ? snd_nxt - snd_una : 0;
	e->reordering = tp->reordering;
	e->snd_wnd = tp->snd_wnd;
	e->rcv_wnd = tp->rcv_wnd;
	e->avl_snd_wnd = (__s32)(wnd_end - snd_nxt) > 0 ? wnd_end - snd_nxt : 0;
	e->rto_us = jiffies_to_us(icsk->icsk_rto);
	e->ato_us = jiffies_to_us(icsk->icsk_ack.ato);
	e->sk_rcvbuf = sk->sk_rcvbuf;
	e->sk_sndbuf = sk->sk_sndbuf;
	e->total_rto = total_rto_of(tp);
	if (c)
		e->c = *c;
	else
		__builtin_memset(&e->c, 0, sizeof(e->c));
	e->c.syn_srtt_us = owner_syn_srtt(o);
	e->gen = e->c.gen = owner_gen(o);
}

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif

/* Network namespaces that hold a connected MPTCP socket, each with one
 * process inside: their TCP subflows are in no fd table, so the loader runs
 * iter/tcp (dump_mptcp) there, entering each namespace in turn (iter/tcp
 * walks its opener's namespace). Cleared by the loader after reading. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);   /* netns inode number */
	__type(value, __u32); /* a tgid with such a socket in it */
} netns_seen SEC(".maps");

/* One pass over every task's open files (iter/task_file) does the owner
 * bookkeeping of each socket (galago_owner_from_file) and writes one
 * record per observed full TCP socket it holds (SNAPSHOT) and per listener
 * (LISTEN). It visits only sockets some process holds, in every network
 * namespace at once: not the TIME_WAIT and request sockets iter/tcp walks
 * past (under connection churn, tens of thousands per sample), and no
 * namespace switching. Sockets no process holds any more (closed by the
 * application, still in FIN_WAIT, CLOSING or LAST_ACK) are not sampled:
 * their CLOSE record carries their final counters. A socket held by
 * several processes or descriptors is written once per descriptor: the
 * reader keeps the first record of each connection. An MPTCP listener
 * (Go 1.24+ listens with MPTCP by default) is written as a listener from
 * its own addresses; an accepted connection from a plain TCP client falls
 * back to a plain TCP socket in the fd table. A connected MPTCP socket
 * only marks its namespace for dump_mptcp. */
SEC("iter/task_file")
int dump_tcp(struct bpf_iter__task_file *ctx)
{
	struct task_struct *task = ctx->task;
	struct sock *sk = galago_owner_from_file(task, ctx->file);
	struct galago_sk_owner *o;
	struct tcp_counters *c;
	struct tcp_sock *tp;
	struct tcp_conn *e;
	__u32 zero = 0, ns, tgid;
	int state;

	if (!sk || !task)
		return 0;
	state = sk->__sk_common.skc_state;
	if (state == TCP_CLOSE) /* closed or never connected: not hashed, as iter/tcp skipped it */
		return 0;
	if (sk->sk_protocol == IPPROTO_MPTCP) {
		if (state != TCP_LISTEN) {
			ns = galago_sk_netns(sk);
			tgid = task->tgid;
			bpf_map_update_elem(&netns_seen, &ns, &tgid, BPF_NOEXIST);
			return 0;
		}
	} else if (sk->sk_protocol != IPPROTO_TCP) {
		return 0;
	}
	e = bpf_map_lookup_elem(&scratch, &zero);
	if (!e)
		return 0;
	o = galago_owner_get(sk);
	if (state == TCP_LISTEN) {
		__builtin_memset(e, 0, sizeof(*e));
		e->type = TCP_REC_LISTEN;
		fill_addrs(e, sk);
		if (o) {
			e->tgid = o->tgid;
			__builtin_memcpy(e->comm, o->comm, sizeof(e->comm));
		}
		bpf_seq_write(ctx->meta->seq, e, sizeof(*e));
		return 0;
	}
	tp = bpf_skc_to_tcp_sock(sk);
	if (!tp || !owner_observed(o))
		return 0;
	c = counters(sk, false);
	e->type = TCP_REC_SNAPSHOT;
	fill_conn(e, tp, o, c, state);
	bpf_seq_write(ctx->meta->seq, e, sizeof(*e));
	return 0;
}

/* The subflows of MPTCP connections in one network namespace (see
 * netns_seen): plain TCP sockets leave at once, they were written by
 * dump_tcp. */
SEC("iter/tcp")
int dump_mptcp(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	struct galago_sk_owner *o;
	struct tcp_counters *c;
	struct tcp_sock *tp;
	struct tcp_conn *e;
	__u32 zero = 0;

	if (!skc)
		return 0;
	tp = bpf_skc_to_tcp_sock(skc);
	if (!tp || !BPF_CORE_READ_BITFIELD(tp, is_mptcp))
		return 0;
	o = galago_owner_get((struct sock *)tp);
	if (!owner_observed(o))
		return 0;
	e = bpf_map_lookup_elem(&scratch, &zero);
	if (!e)
		return 0;
	c = counters((struct sock *)tp, false);
	e->type = TCP_REC_SNAPSHOT;
	fill_conn(e, tp, o, c, tp->inet_conn.icsk_inet.sk.__sk_common.skc_state);
	bpf_seq_write(ctx->meta->seq, e, sizeof(*e));
	return 0;
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(on_set_state, const struct sock *sk, const int oldstate, const int newstate)
{
	struct galago_sk_owner *o;
	struct tcp_counters *c;
	struct tcp_sock *tp;
	struct tcp_conn *e;

	/* Half of a connection's transitions (LISTEN -> SYN_RECV of a child,
	 * ESTABLISHED -> FIN_WAIT1 -> FIN_WAIT2, ESTABLISHED -> CLOSE_WAIT ->
	 * LAST_ACK) neither change the owner nor end the connection: leave
	 * before touching the socket or any map. */
	switch (newstate) {
	case TCP_SYN_SENT:
		if (oldstate != TCP_CLOSE)
			return 0;
		break;
	case TCP_ESTABLISHED:
	case TCP_LISTEN:
	case TCP_CLOSE:
		break;
	default:
		return 0;
	}
	if (!is_tcp(sk))
		return 0;
	o = galago_owner_on_state(sk, oldstate, newstate);
	if (!owner_observed(o))
		return 0;
	if (newstate == TCP_ESTABLISHED) {
		tp = bpf_skc_to_tcp_sock((void *)sk);
		if (tp)
			o->tcp_aux = ((__u64)owner_gen(o) << 32) | (__u32)(tp->srtt_us >> 3);
		return 0;
	}
	if (newstate != TCP_CLOSE || oldstate == TCP_LISTEN)
		return 0;
	tp = bpf_skc_to_tcp_sock((void *)sk);
	if (!tp)
		return 0;
	c = counters(sk, false);
	e = GALAGO_RB_RESERVE(&events, struct tcp_conn);
	if (e) {
		e->type = TCP_REC_CLOSE;
		fill_conn(e, tp, o, c, oldstate);
		e->state = oldstate; /* the state the connection ended in */
		GALAGO_RB_SUBMIT(&events, e);
	}
	/* A socket can connect again after tcp_disconnect: start afresh. */
	o->tcp_aux = (__u64)(owner_gen(o) + 1) << 32;
	if (c)
		__builtin_memset(c, 0, sizeof(*c));
	return 0;
}

/* count adds one to a counter of sk: in its storage while the connection
 * lives, or as a LATE record when it has already closed (tcp_disconnect
 * sends its reset after the transition to CLOSE). */
static __always_inline void count(const struct sock *sk, int field)
{
	struct galago_sk_owner *o;
	struct tcp_counters *c;
	struct tcp_conn *e;

	if (!is_tcp(sk))
		return;
	o = galago_owner_get(sk);
	if (!owner_observed(o))
		return;
	if (sk->__sk_common.skc_state == TCP_CLOSE) {
		e = GALAGO_RB_RESERVE(&events, struct tcp_conn);
		if (!e)
			return;
		__builtin_memset(e, 0, sizeof(*e));
		e->type = TCP_REC_LATE;
		e->tgid = o->tgid;
		e->cookie = bpf_get_socket_cookie((void *)sk);
		/* The closed connection is the previous generation. */
		e->gen = owner_gen(o) ? owner_gen(o) - 1 : 0;
		switch (field) {
		case 0: e->c.send_rsts = 1; break;
		case 1: e->c.receive_rsts = 1; break;
		case 2: e->c.backlog_drops = 1; break;
		case 3: e->c.filter_drops = 1; break;
		case 4: e->c.snd_buf_limit = 1; break;
		case 6: e->c.tcp_oom = 1; break;
		default: e->c.rmem_scheduls = 1; break;
		}
		GALAGO_RB_SUBMIT(&events, e);
		return;
	}
	c = counters(sk, true);
	if (!c)
		return;
	switch (field) {
	case 0: __sync_fetch_and_add(&c->send_rsts, 1); break;
	case 1: __sync_fetch_and_add(&c->receive_rsts, 1); break;
	case 2: __sync_fetch_and_add(&c->backlog_drops, 1); break;
	case 3: __sync_fetch_and_add(&c->filter_drops, 1); break;
	case 4: __sync_fetch_and_add(&c->snd_buf_limit, 1); break;
	case 6: __sync_fetch_and_add(&c->tcp_oom, 1); break;
	default: __sync_fetch_and_add(&c->rmem_scheduls, 1); break;
	}
}

/* CO-RE flavour of enum sk_rst_reason (6.10+; not in older headers): the
 * value is only a placeholder, the loader takes the running kernel's. */
enum sk_rst_reason___galago {
	SK_RST_REASON_TCP_ABORT_ON_MEMORY___galago = 0,
};

SEC("tp_btf/tcp_send_reset")
int BPF_PROG(on_send_reset, const struct sock *sk)
{
	/* sk is NULL for resets answering segments that matched no socket:
	 * those have no owner to charge. */
	if (!sk || !bpf_skc_to_tcp_sock((void *)sk))
		return 0;
	count(sk, 0);
	/* Since 6.10 the tracepoint's third argument is the reset reason
	 * (enum sk_rst_reason, which appeared with it). tcp_check_oom()
	 * returning true is always followed by tcp_send_active_reset with
	 * SK_RST_REASON_TCP_ABORT_ON_MEMORY (tcp_close, tcp_out_of_resources):
	 * gala-gopher's tcp_oom. The enum value is resolved by CO-RE; on a
	 * kernel without it the branch (and its read of the third argument,
	 * which the verifier would refuse there) is removed at load. */
	if (bpf_core_enum_value_exists(enum sk_rst_reason___galago, SK_RST_REASON_TCP_ABORT_ON_MEMORY___galago)) {
		__u64 reason = ((__u64 *)ctx)[2];

		if (reason == bpf_core_enum_value(enum sk_rst_reason___galago, SK_RST_REASON_TCP_ABORT_ON_MEMORY___galago))
			count(sk, 6);
	}
	return 0;
}

SEC("tp_btf/tcp_receive_reset")
int BPF_PROG(on_receive_reset, struct sock *sk)
{
	if (sk)
		count(sk, 1);
	return 0;
}

SEC("tp_btf/kfree_skb")
int BPF_PROG(on_kfree_skb, struct sk_buff *skb, void *location, enum skb_drop_reason reason, struct sock *rx_sk)
{
	int field;

	if (reason == bpf_core_enum_value(enum skb_drop_reason, SKB_DROP_REASON_SOCKET_BACKLOG))
		field = 2;
	else if (reason == bpf_core_enum_value(enum skb_drop_reason, SKB_DROP_REASON_SOCKET_FILTER))
		field = 3;
	else
		return 0;
	if (rx_sk && bpf_skc_to_tcp_sock(rx_sk))
		count(rx_sk, field);
	return 0;
}

SEC("tp_btf/sock_exceed_buf_limit")
int BPF_PROG(on_exceed_buf_limit, struct sock *sk, struct proto *prot, long allocated, int kind)
{
	if (sk && bpf_skc_to_tcp_sock(sk))
		count(sk, kind == SK_MEM_SEND ? 4 : 5);
	return 0;
}

/* net_delay (proc_flow_perf, sub-item tcp_delay): BPF TX timestamping.
 *
 * Cost: the program is attached only while tcp_delay is on. It runs for the
 * sock_ops callbacks the kernel always makes (connection setup: a few per
 * connection) and, on connections it flagged, once per tcp_sendmsg
 * (TSTAMP_SENDMSG_CB). One write per socket is timed at a time: while a
 * timed write is unacknowledged the next writes are not stamped (so they
 * cost one early return each and no further callbacks); a stamped write
 * adds the SCHED, SND_SW (early returns) and ACK callbacks and one ring
 * buffer record. Each sample is exact for the write it times; writes
 * pipelined behind a timed one are not sampled. */

extern int bpf_sock_ops_enable_tx_tstamp(struct bpf_sock_ops_kern *skops, __u64 flags) __ksym;
extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

#ifndef SOL_SOCKET
#define SOL_SOCKET 1
#endif
/* UAPI values (include/uapi/linux/bpf.h, 6.14+), spelled out because
 * headers of older kernels (the arm64 build's) lack them. */
#define GALAGO_SOCK_OPS_TSTAMP_ACK_CB 19
#define GALAGO_SOCK_OPS_TSTAMP_SENDMSG_CB 20
#define GALAGO_SK_BPF_CB_FLAGS 1009
#define GALAGO_SK_BPF_CB_TX_TIMESTAMPING 1

/* A pending write older than this is abandoned (its ACK callback never
 * came: e.g. the program was detached meanwhile); a later write is timed. */
#define DELAY_STALE_NS (60ULL * 1000000000ULL)

/* Attachment generation, bumped by the loader at every attach: a write
 * stamped under an earlier attachment is not matched with a later one. */
volatile __u32 delay_epoch = 0;

struct tcp_delay_pending {
	__u64 sent_ns; /* end of the tcp_sendmsg, 0: nothing pending */
	__u32 tskey;   /* sequence number of the write's last byte */
	__u32 epoch;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tcp_delay_pending);
} tcp_delay_pending SEC(".maps");

static __always_inline bool seq_after(__u32 a, __u32 b)
{
	return (__s32)(a - b) > 0;
}

SEC("sockops")
int on_sock_ops(struct bpf_sock_ops *skops)
{
	struct tcp_delay_pending *pd;
	struct galago_sk_owner *o;
	struct bpf_sock *bsk;
	struct tcp_delay *d;
	struct tcp_sock *tp;
	struct sock *sk;
	__u32 op = skops->op;
	__u64 now;

	if (op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB && op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB &&
	    op != GALAGO_SOCK_OPS_TSTAMP_SENDMSG_CB && op != GALAGO_SOCK_OPS_TSTAMP_ACK_CB)
		return 1;
	bsk = skops->sk;
	if (!bsk)
		return 1;
	tp = bpf_skc_to_tcp_sock(bsk);
	if (!tp)
		return 1;
	sk = (struct sock *)tp;
	o = galago_owner_get(sk);
	if (op == BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB || op == BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB) {
		/* A locked callback, where bpf_setsockopt may set the flag that
		 * makes tcp_sendmsg call this program. */
		int flags = GALAGO_SK_BPF_CB_TX_TIMESTAMPING;

		if (owner_observed(o))
			bpf_setsockopt(skops, SOL_SOCKET, GALAGO_SK_BPF_CB_FLAGS, &flags, sizeof(flags));
		return 1;
	}
	if (!owner_observed(o))
		return 1;
	now = bpf_ktime_get_ns();
	if (op == GALAGO_SOCK_OPS_TSTAMP_SENDMSG_CB) {
		pd = bpf_sk_storage_get(&tcp_delay_pending, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
		if (!pd)
			return 1;
		if (pd->sent_ns && pd->epoch == delay_epoch && now - pd->sent_ns < DELAY_STALE_NS)
			return 1; /* a timed write is still unacknowledged */
		/* Called at the end of tcp_sendmsg_locked for the last skb of the
		 * write: its last byte is write_seq - 1, the key the kfunc gives
		 * the skb and the ACK callback's snd_una passes. */
		if (bpf_sock_ops_enable_tx_tstamp(bpf_cast_to_kern_ctx(skops), 0))
			return 1;
		pd->sent_ns = now;
		pd->tskey = tp->write_seq - 1;
		pd->epoch = delay_epoch;
		return 1;
	}
	/* TSTAMP_ACK_CB: an ACK passed the last byte of a stamped skb. snd_una
	 * is already advanced; the pending write is acknowledged when snd_una
	 * has passed its key (stamps of other attachments are refused by the
	 * epoch). */
	pd = bpf_sk_storage_get(&tcp_delay_pending, sk, 0, 0);
	if (!pd || !pd->sent_ns || pd->epoch != delay_epoch || !seq_after(tp->snd_una, pd->tskey))
		return 1;
	if (o->role != GALAGO_ROLE_CLIENT && o->role != GALAGO_ROLE_SERVER) {
		pd->sent_ns = 0; /* proc_flow_perf is keyed by role */
		return 1;
	}
	d = GALAGO_RB_RESERVE(&events, struct tcp_delay);
	if (d) {
		d->type = TCP_REC_DELAY;
		d->tgid = o->tgid;
		d->delay_ns = now - pd->sent_ns;
		d->role = o->role;
		d->family = sk->__sk_common.skc_family;
		if (d->family == AF_INET) {
			__builtin_memset(d->raddr, 0, sizeof(d->raddr));
			*(__u32 *)d->raddr = sk->__sk_common.skc_daddr;
		} else {
			BPF_CORE_READ_INTO(&d->raddr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
		}
		if (o->role == GALAGO_ROLE_SERVER)
			d->server_port = galago_sk_local_port(sk);
		else
			d->server_port = bpf_ntohs(sk->__sk_common.skc_dport);
		d->_pad[0] = d->_pad[1] = d->_pad[2] = 0;
		GALAGO_RB_SUBMIT(&events, d);
	}
	pd->sent_ns = 0;
	return 1;
}
