/* sockowner.h: which process owns a socket, for probes that see sockets in
 * softirq or timer context (where the current task is unrelated).
 *
 * Include after common.h:   #include "common.h"
 *                           #include "sockowner.h"
 *
 * Model. A socket's owner is recorded once, in process context, and kept in
 * socket-local storage (BPF_MAP_TYPE_SK_STORAGE: freed by the kernel with the
 * socket, so no stale entries and no pointer reuse):
 *   connect()  CLOSE -> SYN_SENT runs in the connecting task: owner = current,
 *              role client                       (galago_owner_on_state)
 *   listen()   CLOSE -> LISTEN runs in the listening task: owner = current,
 *              role listener; also indexed by (netns, port) in
 *              galago_listen_owners              (galago_owner_on_state)
 *   accept     SYN_RECV -> ESTABLISHED runs in softirq: the child inherits the
 *              owner of the listener on (netns, local port), role server,
 *              src INHERITED (provisional: with SO_REUSEPORT or a pre-forked
 *              server the accepting process may differ)
 *   any socket held in a process's fd table: galago_owner_from_file() from an
 *              iter/task_file program sets owner = that task, src FILE; it
 *              picks up sockets opened before the probe started and replaces
 *              provisional (INHERITED) owners with the real holder.
 *
 * Requirements. bpf_sk_storage_get needs a BTF-typed socket pointer, so the
 * helpers work in tp_btf, iterator, sock_ops and fentry programs, NOT in
 * raw_tp/tracepoint programs (use galago_owner_get only where the sk pointer
 * came from BTF arguments or a BTF pointer walk). Kernel 5.11+ (sk storage in
 * tracing programs), BTF (CO-RE).
 *
 * Sharing. Every object including this header declares the same two maps;
 * the loader may give several objects one pair (cilium/ebpf
 * MapReplacements, internal/sockowner), so that a socket seen by two probes
 * has one owner storage element, created by whichever hook runs first.
 * Each probe's own per-socket state therefore lives in a word of its own
 * (tcp_aux, socket_aux), never in the other's.
 * Role and src values are an ABI with Go code that reads them: change both.
 */
#ifndef GALAGO_SOCKOWNER_H
#define GALAGO_SOCKOWNER_H

#ifndef GALAGO_COMMON_H
#error "include common.h before sockowner.h"
#endif

/* Address families and TCP states, as the kernel defines them (macros are
 * not in vmlinux.h). */
#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif

enum galago_sk_role {
	GALAGO_ROLE_UNKNOWN = 0,
	GALAGO_ROLE_CLIENT = 1,   /* the socket called connect() */
	GALAGO_ROLE_SERVER = 2,   /* accepted from a listener */
	GALAGO_ROLE_LISTENER = 3, /* the listening socket itself */
};

enum galago_owner_src {
	GALAGO_OWNER_NONE = 0,
	GALAGO_OWNER_CONNECT = 1,   /* current task at connect() */
	GALAGO_OWNER_LISTEN = 2,    /* current task at listen() */
	GALAGO_OWNER_INHERITED = 3, /* copied from the listener's owner */
	GALAGO_OWNER_FILE = 4,      /* found in a task's fd table (iter/task_file) */
};

struct galago_sk_owner {
	__u32 tgid;
	__u8 role; /* enum galago_sk_role */
	__u8 src;  /* enum galago_owner_src */
	__u16 _pad;
	__u64 cgroup_id; /* cgroup2 id of the owner (for the snooper filter) */
	char comm[GALAGO_TASK_COMM_LEN];
	/* Per-socket state of the tcp and of the socket probe, kept here
	 * rather than in a second socket storage: a storage element allocated
	 * per socket costs more than the hook that uses it. Each word is
	 * written by its probe only (0 in a new owner), so the two probes can
	 * share the owners; an inherited owner copies the listener's, which
	 * the probe overwrites. */
	__u64 tcp_aux;
	__u64 socket_aux;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct galago_sk_owner);
} galago_sk_owners SEC(".maps");

/* A listening port within a network namespace. One entry per (netns, port):
 * with several listeners on one port (SO_REUSEPORT) the last one wins, and
 * accepted sockets are corrected by the task_file walk. */
struct galago_listen_key {
	__u32 netns; /* inode number of the network namespace */
	__u16 port;  /* host byte order */
	__u16 _pad;
};

#ifndef GALAGO_MAX_LISTENERS
#define GALAGO_MAX_LISTENERS 16384
#endif

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GALAGO_MAX_LISTENERS);
	__type(key, struct galago_listen_key);
	__type(value, struct galago_sk_owner);
} galago_listen_owners SEC(".maps");

/* sk must be a BTF pointer (tracing, iterator and sock_ops programs): the
 * loads are direct (CO-RE relocated), not helper calls, as in the rest of
 * this header. */
static __always_inline __u32 galago_sk_netns(const struct sock *sk)
{
	return sk->__sk_common.skc_net.net->ns.inum;
}

/* galago_sk_local_port: the local port of sk, host byte order, also at and
 * after the transition to CLOSE. tcp_set_state(TCP_CLOSE) releases the bind
 * bucket (__inet_put_port zeroes inet_num, i.e. skc_num) before the
 * inet_sock_set_state tracepoint fires, so a close hook reading skc_num sees
 * 0; inet_sport (set from the same port at bind, connect and accept) is left
 * alone by put_port and still names the port. */
static __always_inline __u16 galago_sk_local_port(const struct sock *sk)
{
	__u16 port = sk->__sk_common.skc_num;

	if (!port)
		port = bpf_ntohs(BPF_CORE_READ((const struct inet_sock *)sk, inet_sport));
	return port;
}

static __always_inline struct galago_listen_key galago_listen_key_of(const struct sock *sk)
{
	struct galago_listen_key k = {};

	k.netns = galago_sk_netns(sk);
	k.port = galago_sk_local_port(sk);
	return k;
}

/* galago_owner_get: the recorded owner of sk, or NULL. */
static __always_inline struct galago_sk_owner *galago_owner_get(const struct sock *sk)
{
	return bpf_sk_storage_get(&galago_sk_owners, (struct sock *)sk, 0, 0);
}

static __always_inline struct galago_sk_owner *galago_owner_slot(const struct sock *sk)
{
	return bpf_sk_storage_get(&galago_sk_owners, (struct sock *)sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
}

/* galago_owner_set_current: sk is owned by the current task (process
 * context only). Returns the stored owner or NULL (no memory). */
static __always_inline struct galago_sk_owner *galago_owner_set_current(const struct sock *sk, __u8 role, __u8 src)
{
	struct galago_sk_owner *o = galago_owner_slot(sk);

	if (!o)
		return NULL;
	o->tgid = bpf_get_current_pid_tgid() >> 32;
	o->role = role;
	o->src = src;
	o->cgroup_id = bpf_get_current_cgroup_id();
	bpf_get_current_comm(o->comm, sizeof(o->comm));
	return o;
}

/* galago_task_cgroup_id: cgroup2 id of a task other than current. */
static __always_inline __u64 galago_task_cgroup_id(struct task_struct *task)
{
	return BPF_CORE_READ(task, cgroups, dfl_cgrp, kn, id);
}

/* galago_owner_inherit_listener: give an accepted socket the owner of the
 * listener on its (netns, local port). Returns the stored owner or NULL when
 * no listener is known. */
static __always_inline struct galago_sk_owner *galago_owner_inherit_listener(const struct sock *sk)
{
	struct galago_listen_key k = galago_listen_key_of(sk);
	struct galago_sk_owner *l = bpf_map_lookup_elem(&galago_listen_owners, &k);
	struct galago_sk_owner *o;

	if (!l)
		return NULL;
	o = galago_owner_slot(sk);
	if (!o)
		return NULL;
	/* The task_file walk may already have found the real holder. */
	if (o->src == GALAGO_OWNER_FILE)
		return o;
	*o = *l;
	o->role = GALAGO_ROLE_SERVER;
	o->src = GALAGO_OWNER_INHERITED;
	return o;
}

/* galago_owner_on_state: the owner bookkeeping of one TCP state change
 * (call it from tp_btf/inet_sock_set_state for IPPROTO_TCP sockets).
 * Returns the owner of sk after the change, or NULL when unknown. */
static __always_inline struct galago_sk_owner *galago_owner_on_state(const struct sock *sk, int oldstate, int newstate)
{
	struct galago_listen_key k;
	struct galago_sk_owner *o;

	if (newstate == TCP_SYN_SENT && oldstate == TCP_CLOSE)
		return galago_owner_set_current(sk, GALAGO_ROLE_CLIENT, GALAGO_OWNER_CONNECT);
	if (newstate == TCP_LISTEN) {
		o = galago_owner_set_current(sk, GALAGO_ROLE_LISTENER, GALAGO_OWNER_LISTEN);
		if (o) {
			k = galago_listen_key_of(sk);
			bpf_map_update_elem(&galago_listen_owners, &k, o, BPF_ANY);
		}
		return o;
	}
	if (newstate == TCP_ESTABLISHED && oldstate == TCP_SYN_RECV) {
		o = galago_owner_get(sk);
		if (o && o->role == GALAGO_ROLE_SERVER)
			return o;
		return galago_owner_inherit_listener(sk);
	}
	if (oldstate == TCP_LISTEN) {
		/* Forget the port only if this listener is the one indexed. */
		k = galago_listen_key_of(sk);
		o = galago_owner_get(sk);
		struct galago_sk_owner *l = bpf_map_lookup_elem(&galago_listen_owners, &k);
		if (o && l && l->tgid == o->tgid)
			bpf_map_delete_elem(&galago_listen_owners, &k);
		return o;
	}
	return galago_owner_get(sk);
}

/* galago_owner_from_file: from an iter/task_file program, record that task
 * holds file; returns the socket when file is an inet TCP/UDP socket (NULL
 * otherwise). Owners found at connect/listen are kept (same task, or a
 * descriptor passed to another process: the creator stays the owner);
 * unknown and inherited owners are replaced by the holder. A listening
 * socket found this way is indexed in galago_listen_owners. */
static __always_inline struct sock *galago_owner_from_file(struct task_struct *task, struct file *file)
{
	struct socket *sock;
	struct sock *sk;
	struct galago_sk_owner *o;
	__u16 family;

	if (!task || !file)
		return NULL;
	sock = bpf_sock_from_file(file);
	if (!sock)
		return NULL;
	sk = sock->sk;
	if (!sk)
		return NULL;
	family = sk->__sk_common.skc_family;
	if (family != AF_INET && family != AF_INET6)
		return NULL;
	o = galago_owner_slot(sk);
	if (!o)
		return sk;
	if (o->src == GALAGO_OWNER_NONE || o->src == GALAGO_OWNER_INHERITED) {
		o->tgid = task->tgid;
		o->cgroup_id = galago_task_cgroup_id(task);
		bpf_probe_read_kernel_str(o->comm, sizeof(o->comm), task->comm);
		if (o->role == GALAGO_ROLE_UNKNOWN && sk->__sk_common.skc_state == TCP_LISTEN)
			o->role = GALAGO_ROLE_LISTENER;
		o->src = GALAGO_OWNER_FILE;
	}
	if (sk->__sk_common.skc_state == TCP_LISTEN) {
		struct galago_listen_key k = galago_listen_key_of(sk);
		bpf_map_update_elem(&galago_listen_owners, &k, o, BPF_NOEXIST);
	}
	return sk;
}

#endif /* GALAGO_SOCKOWNER_H */
