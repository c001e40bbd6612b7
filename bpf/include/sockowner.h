/* sockowner.h: which process owns a socket, for probes that see sockets in
 * softirq or timer context (where the current task is unrelated).
 *
 * Include after common.h:   #include "common.h"
 *                           #include "sockowner.h"
 *
 * Model. A socket's owner is recorded once, in process context:
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
 * Storage. TCP owners live in a preallocated hash keyed by the socket cookie
 * (galago_sk_owners): creating one takes an element from the map's free
 * list, where socket-local storage allocated (kmalloc and memcg charging)
 * twice per socket and freed it by RCU at the socket's destruction, more
 * than half the cost of a connection's state-change programs. The entry is
 * deleted when the kernel destroys the socket (tp_btf/tcp_destroy_sock,
 * which every full TCP socket reaches after its transition to CLOSE): every
 * probe including this header attaches galago_owner_forget there. It
 * outlives the CLOSE transition, so a socket that connects again after
 * tcp_disconnect keeps its owner and aux word. A socket without a cookie
 * (skc_cookie 0) has no owner: lookups leave before the map. When the map
 * is full a new owner is not recorded and the loss is counted in
 * lost_events (GALAGO_RINGBUF). UDP owners (GALAGO_UDP_OWNERS) stay in
 * socket-local storage: no hook sees a UDP socket's destruction.
 *
 * Requirements. The helpers read the socket through BTF pointers, so they
 * work in tp_btf, iterator, sock_ops and fentry programs, NOT in
 * raw_tp/tracepoint programs (use galago_owner_get only where the sk pointer
 * came from BTF arguments, a BTF pointer walk or bpf_skc_to_tcp_sock).
 * Kernel 5.12+ (socket cookies in tracing programs), BTF (CO-RE).
 *
 * The maps are per BPF object: two probes including this header each keep
 * their own owners (each fills them from its own hooks and iterators).
 * GALAGO_UDP_OWNERS (defined before the include) adds galago_udp_owners for
 * UDP sockets; without it the task_file walk records TCP sockets only.
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
	/* State of the probe that owns the map (each probe has its own
	 * owners), kept here rather than in a second socket storage: a storage
	 * element allocated per socket costs more than the hook that uses it.
	 * Only the probe writes it (0 in a new owner); an inherited owner
	 * copies the listener's, which the probe overwrites. */
	__u64 aux;
};

/* Live TCP sockets with an owner, per probe (listeners, connections and
 * closed sockets not yet destroyed; not TIME_WAIT, which is no full
 * socket). */
#ifndef GALAGO_MAX_OWNERS
#define GALAGO_MAX_OWNERS 65536
#endif

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GALAGO_MAX_OWNERS);
	__type(key, __u64); /* socket cookie */
	__type(value, struct galago_sk_owner);
} galago_sk_owners SEC(".maps");

#ifdef GALAGO_UDP_OWNERS
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct galago_sk_owner);
} galago_udp_owners SEC(".maps");
#endif

#ifndef IPPROTO_TCP
#define IPPROTO_TCP 6
#endif
#ifndef IPPROTO_UDP
#define IPPROTO_UDP 17
#endif

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

/* galago_owner_get: the recorded owner of TCP socket sk, or NULL. An owner
 * is keyed by the socket's cookie, which the kernel only assigns on demand:
 * a socket without one has no owner, and the read costs no helper call. */
static __always_inline struct galago_sk_owner *galago_owner_get(const struct sock *sk)
{
	__u64 cookie = sk->__sk_common.skc_cookie.counter;

	if (!cookie)
		return NULL;
	return bpf_map_lookup_elem(&galago_sk_owners, &cookie);
}

/* galago_owner_new: record owner n for the socket with this cookie (no
 * owner yet). Returns the stored owner or NULL (map full: counted). */
static __always_inline struct galago_sk_owner *galago_owner_new(__u64 cookie, const struct galago_sk_owner *n)
{
	long err = bpf_map_update_elem(&galago_sk_owners, &cookie, n, BPF_NOEXIST);

	if (err && err != -17 /* EEXIST: recorded meanwhile on another CPU */) {
#ifdef GALAGO_RINGBUF
		galago_count_lost();
#endif
		return NULL;
	}
	return bpf_map_lookup_elem(&galago_sk_owners, &cookie);
}

/* galago_owner_forget: sk is being destroyed (tp_btf/tcp_destroy_sock). */
static __always_inline void galago_owner_forget(const struct sock *sk)
{
	__u64 cookie = sk->__sk_common.skc_cookie.counter;

	if (cookie)
		bpf_map_delete_elem(&galago_sk_owners, &cookie);
}

static __always_inline void galago_owner_fill_current(struct galago_sk_owner *o, __u8 role, __u8 src)
{
	o->tgid = bpf_get_current_pid_tgid() >> 32;
	o->role = role;
	o->src = src;
	o->cgroup_id = bpf_get_current_cgroup_id();
	bpf_get_current_comm(o->comm, sizeof(o->comm));
}

/* galago_owner_set_current: TCP socket sk is owned by the current task
 * (process context only). An existing owner keeps its aux word. Returns
 * the stored owner or NULL (map full). */
static __always_inline struct galago_sk_owner *galago_owner_set_current(const struct sock *sk, __u8 role, __u8 src)
{
	__u64 cookie = bpf_get_socket_cookie((void *)sk);
	struct galago_sk_owner *o = bpf_map_lookup_elem(&galago_sk_owners, &cookie);
	struct galago_sk_owner n;

	if (o) {
		galago_owner_fill_current(o, role, src);
		return o;
	}
	__builtin_memset(&n, 0, sizeof(n));
	galago_owner_fill_current(&n, role, src);
	return galago_owner_new(cookie, &n);
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
	struct galago_sk_owner n;
	__u64 cookie;

	if (!l)
		return NULL;
	cookie = bpf_get_socket_cookie((void *)sk);
	o = bpf_map_lookup_elem(&galago_sk_owners, &cookie);
	/* The task_file walk may already have found the real holder. */
	if (o && o->src == GALAGO_OWNER_FILE)
		return o;
	n = *l;
	n.role = GALAGO_ROLE_SERVER;
	n.src = GALAGO_OWNER_INHERITED;
	if (o) {
		*o = n;
		return o;
	}
	return galago_owner_new(cookie, &n);
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

/* galago_owner_fill_file: task holds sk; unknown and inherited owners
 * become that task. */
static __always_inline void galago_owner_fill_file(struct galago_sk_owner *o, struct task_struct *task, const struct sock *sk)
{
	if (o->src != GALAGO_OWNER_NONE && o->src != GALAGO_OWNER_INHERITED)
		return;
	o->tgid = task->tgid;
	o->cgroup_id = galago_task_cgroup_id(task);
	bpf_probe_read_kernel_str(o->comm, sizeof(o->comm), task->comm);
	if (o->role == GALAGO_ROLE_UNKNOWN && sk->__sk_common.skc_state == TCP_LISTEN)
		o->role = GALAGO_ROLE_LISTENER;
	o->src = GALAGO_OWNER_FILE;
}

/* galago_owner_from_file: from an iter/task_file program, record that task
 * holds file; returns the socket when file is an inet TCP socket, or a UDP
 * socket with GALAGO_UDP_OWNERS (NULL otherwise). Owners found at
 * connect/listen are kept (same task, or a descriptor passed to another
 * process: the creator stays the owner); unknown and inherited owners are
 * replaced by the holder. A listening socket found this way is indexed in
 * galago_listen_owners. */
static __always_inline struct sock *galago_owner_from_file(struct task_struct *task, struct file *file)
{
	struct galago_sk_owner *o, n;
	struct socket *sock;
	struct sock *sk;
	__u64 cookie = 0;
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
	if (sk->sk_protocol == IPPROTO_TCP) {
		cookie = bpf_get_socket_cookie(sk);
		o = bpf_map_lookup_elem(&galago_sk_owners, &cookie);
#ifdef GALAGO_UDP_OWNERS
	} else if (sk->sk_protocol == IPPROTO_UDP) {
		o = bpf_sk_storage_get(&galago_udp_owners, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
		if (!o)
			return sk;
#endif
	} else {
		return NULL;
	}
	if (o) {
		galago_owner_fill_file(o, task, sk);
	} else {
		__builtin_memset(&n, 0, sizeof(n));
		galago_owner_fill_file(&n, task, sk);
		o = galago_owner_new(cookie, &n);
		if (!o)
			return sk;
	}
	if (sk->__sk_common.skc_state == TCP_LISTEN) {
		struct galago_listen_key k = galago_listen_key_of(sk);
		bpf_map_update_elem(&galago_listen_owners, &k, o, BPF_NOEXIST);
	}
	return sk;
}

#endif /* GALAGO_SOCKOWNER_H */
