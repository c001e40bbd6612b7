//go:build ignore

/* nginx.bpf.c: nginx's proxied links (client -> nginx -> upstream server)
 * from uprobes on the nginx binary and its stream module.
 *
 * Hooks (symbols resolved from the ELF's .symtab or .dynsym at attach
 * time; Debian's nginx exports them for its dynamic modules):
 *   uprobe/uretprobe ngx_http_upstream_init(r)       an HTTP request goes upstream (L7)
 *   uprobe/uretprobe ngx_stream_core_run_phases(s)   a stream session's phases run (L4)
 *   uprobe/uretprobe ngx_event_connect_peer(pc)      nginx connects (or takes a kept-alive
 *                                                    connection) to an upstream peer
 *   uprobe ngx_close_connection(c)                   a connection closes
 * While a thread is inside the first two, an upstream connection it makes
 * belongs to that request's (session's) client connection: one link event
 * with the client socket's two addresses (client, virtual) and the upstream
 * socket's peer (server), read from the kernel's sockets through the
 * thread's fd table. The close of a linked client connection is one close
 * event.
 *
 * nginx structures are read at the offsets that every nginx since 1.0 has
 * (no debug info is needed): ngx_http_request_t and ngx_stream_session_t
 * start with a uint32 signature then the client ngx_connection_t pointer
 * (offset 8); ngx_connection_t starts with data, read, write, then the fd
 * (offset 24); ngx_peer_connection_t starts with its ngx_connection_t
 * pointer. The signatures ("HTTP", "STRM") are checked, so another layout
 * is counted (skips[NGINX_SKIP_LAYOUT]) instead of misread.
 *
 * Maps: nginx_ctx (thread -> client fd and kind), nginx_pc (thread ->
 * ngx_event_connect_peer's pc), nginx_links (client sock -> tgid: linked
 * connections whose close is reported), events (ring), lost_events,
 * skips (per reason). Kernel 5.8+ (ring buffer), BTF for the socket reads. */

#define GALAGO_RINGBUF
#include "common.h"

#define NGX_HTTP_SIGNATURE 0x50545448   /* "HTTP", NGX_HTTP_MODULE */
#define NGX_STREAM_SIGNATURE 0x4d525453 /* "STRM", NGX_STREAM_MODULE */
#define NGX_OFF_CONNECTION 8            /* request/session -> connection */
#define NGX_OFF_FD 24                   /* connection -> fd */
#define NGX_OK 0
#define NGX_AGAIN -2
#define NGX_DONE -4 /* a kept-alive upstream connection was taken from the cache */

#define AF_INET 2
#define AF_INET6 10
#define SOCK_STREAM 1
#define S_IFMT 00170000
#define S_IFSOCK 0140000

enum nginx_ev_kind {
	NGINX_EV_LINK = 1,
	NGINX_EV_CLOSE = 2,
};

/* Why a link was not reported (skips map index). */
enum nginx_skip {
	NGINX_SKIP_LAYOUT = 0,   /* a signature did not match: another struct layout */
	NGINX_SKIP_NOT_TCP = 1,  /* client or upstream is not a TCP/IP socket (UDP, unix) */
	NGINX_SKIP_NO_SOCK = 2,  /* an fd that is not a socket, or unreadable memory */
	NGINX_SKIP_MAP_FULL = 3, /* nginx_ctx, nginx_pc or nginx_links full: a bound */
	NGINX_SKIP_MAX = 4,
};

struct nginx_ev {
	__u64 client_sk; /* the client socket's kernel address: the link's identity until close */
	__u32 tgid;
	__u8 kind;   /* enum nginx_ev_kind */
	__u8 is_l7;  /* 1 http, 0 stream */
	__u16 family;
	__u16 server_family;
	__u16 client_port; /* host order */
	__u16 virtual_port;
	__u16 server_port;
	__u8 client_ip[16];  /* IPv4: the first 4 bytes */
	__u8 virtual_ip[16];
	__u8 server_ip[16];
};
GALAGO_EXPORT_TYPE(struct nginx_ev, nginx_ev);
GALAGO_EXPORT_TYPE(enum nginx_ev_kind, nginx_ev_kind);
GALAGO_EXPORT_TYPE(enum nginx_skip, nginx_skip);

struct nginx_ctx_val {
	__s32 fd;
	__u32 is_l7;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64); /* pid_tgid */
	__type(value, struct nginx_ctx_val);
} nginx_ctx SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64); /* pid_tgid */
	__type(value, __u64); /* ngx_peer_connection_t * */
} nginx_pc SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64); /* client struct sock * */
	__type(value, __u32); /* tgid */
} nginx_links SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NGINX_SKIP_MAX);
	__type(key, __u32);
	__type(value, __u64);
} skips SEC(".maps");

static __always_inline void skip(__u32 why)
{
	__u64 *n = bpf_map_lookup_elem(&skips, &why);

	if (n)
		*n += 1;
}

/* sock_of_fd: the struct sock behind fd in the current task, or NULL. */
static __always_inline struct sock *sock_of_fd(__s32 fd)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct files_struct *files;
	struct fdtable *fdt;
	struct file **fds;
	struct file *f = NULL;
	struct socket *so;
	__u16 mode;

	if (fd < 0)
		return NULL;
	files = BPF_CORE_READ(task, files);
	if (!files)
		return NULL;
	fdt = BPF_CORE_READ(files, fdt);
	if (!fdt || (__u32)fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	fds = BPF_CORE_READ(fdt, fd);
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return NULL;
	mode = BPF_CORE_READ(f, f_inode, i_mode);
	if ((mode & S_IFMT) != S_IFSOCK)
		return NULL;
	so = BPF_CORE_READ(f, private_data);
	if (!so)
		return NULL;
	return BPF_CORE_READ(so, sk);
}

/* tcp_addrs reads a TCP/IP socket's local and remote addresses; false for
 * another kind of socket. */
static __always_inline bool tcp_addrs(struct sock *sk, __u16 *family, __u8 *lip, __u16 *lport, __u8 *rip, __u16 *rport)
{
	__u16 fam = BPF_CORE_READ(sk, __sk_common.skc_family);

	if (BPF_CORE_READ(sk, sk_type) != SOCK_STREAM)
		return false;
	if (fam == AF_INET) {
		bpf_core_read(lip, 4, &sk->__sk_common.skc_rcv_saddr);
		bpf_core_read(rip, 4, &sk->__sk_common.skc_daddr);
	} else if (fam == AF_INET6) {
		bpf_core_read(lip, 16, &sk->__sk_common.skc_v6_rcv_saddr);
		bpf_core_read(rip, 16, &sk->__sk_common.skc_v6_daddr);
	} else {
		return false;
	}
	*family = fam;
	*lport = BPF_CORE_READ(sk, __sk_common.skc_num);
	*rport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	return true;
}

/* conn_fd reads an ngx_connection_t's fd. */
static __always_inline int conn_fd(void *c, __s32 *fd)
{
	return bpf_probe_read_user(fd, sizeof(*fd), c + NGX_OFF_FD);
}

/* enter notes the client connection of request (session) r, whose
 * signature must be sig. */
static __always_inline int enter(void *r, __u32 sig, __u32 is_l7)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct nginx_ctx_val v = {.is_l7 = is_l7};
	__u32 got = 0;
	void *c = NULL;

	if (!r || bpf_probe_read_user(&got, sizeof(got), r)) {
		skip(NGINX_SKIP_NO_SOCK);
		return 0;
	}
	if (got != sig) {
		skip(NGINX_SKIP_LAYOUT);
		return 0;
	}
	if (bpf_probe_read_user(&c, sizeof(c), r + NGX_OFF_CONNECTION) || !c || conn_fd(c, &v.fd)) {
		skip(NGINX_SKIP_NO_SOCK);
		return 0;
	}
	if (bpf_map_update_elem(&nginx_ctx, &id, &v, BPF_ANY))
		skip(NGINX_SKIP_MAP_FULL);
	return 0;
}

static __always_inline int leave(void)
{
	__u64 id = bpf_get_current_pid_tgid();

	bpf_map_delete_elem(&nginx_ctx, &id);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(ngx_http_upstream_init, void *r)
{
	return enter(r, NGX_HTTP_SIGNATURE, 1);
}

SEC("uretprobe")
int BPF_KRETPROBE(ngx_http_upstream_init_ret)
{
	return leave();
}

SEC("uprobe")
int BPF_KPROBE(ngx_stream_core_run_phases, void *s)
{
	return enter(s, NGX_STREAM_SIGNATURE, 0);
}

SEC("uretprobe")
int BPF_KRETPROBE(ngx_stream_core_run_phases_ret)
{
	return leave();
}

SEC("uprobe")
int BPF_KPROBE(ngx_event_connect_peer, void *pc)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 v = (__u64)pc;

	if (!bpf_map_lookup_elem(&nginx_ctx, &id))
		return 0; /* not on behalf of a request or session */
	if (bpf_map_update_elem(&nginx_pc, &id, &v, BPF_ANY))
		skip(NGINX_SKIP_MAP_FULL);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(ngx_event_connect_peer_ret, long rc)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct nginx_ctx_val *nc;
	struct nginx_ev *e;
	struct sock *csk, *usk;
	__u64 *pcp, key;
	void *pc, *uc = NULL;
	__s32 ufd = -1;
	__u32 tgid = id >> 32;
	__u16 sfam = 0, lport = 0;
	__u8 lip[16];

	pcp = bpf_map_lookup_elem(&nginx_pc, &id);
	if (!pcp)
		return 0;
	pc = (void *)*pcp;
	bpf_map_delete_elem(&nginx_pc, &id);
	if ((int)rc != NGX_OK && (int)rc != NGX_AGAIN && (int)rc != NGX_DONE)
		return 0; /* no connection (busy, declined, error): nothing was linked */
	nc = bpf_map_lookup_elem(&nginx_ctx, &id);
	if (!nc)
		return 0;
	if (bpf_probe_read_user(&uc, sizeof(uc), pc) || !uc || conn_fd(uc, &ufd)) {
		skip(NGINX_SKIP_NO_SOCK);
		return 0;
	}
	csk = sock_of_fd(nc->fd);
	usk = sock_of_fd(ufd);
	if (!csk || !usk) {
		skip(NGINX_SKIP_NO_SOCK);
		return 0;
	}
	e = GALAGO_RB_RESERVE(&events, struct nginx_ev);
	if (!e)
		return 0;
	__builtin_memset(e, 0, sizeof(*e));
	if (!tcp_addrs(csk, &e->family, e->virtual_ip, &e->virtual_port, e->client_ip, &e->client_port) ||
	    !tcp_addrs(usk, &sfam, lip, &lport, e->server_ip, &e->server_port)) {
		bpf_ringbuf_discard(e, 0);
		skip(NGINX_SKIP_NOT_TCP);
		return 0;
	}
	e->server_family = sfam;
	e->kind = NGINX_EV_LINK;
	e->is_l7 = nc->is_l7;
	e->tgid = tgid;
	key = (__u64)csk;
	e->client_sk = key;
	if (bpf_map_update_elem(&nginx_links, &key, &tgid, BPF_ANY))
		skip(NGINX_SKIP_MAP_FULL); /* its close will not be seen: user space ages it out */
	GALAGO_RB_SUBMIT(&events, e);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(ngx_close_connection, void *c)
{
	struct nginx_ev *e;
	struct sock *sk;
	__s32 fd = -1;
	__u64 key;

	if (!c || conn_fd(c, &fd) || fd < 0)
		return 0;
	sk = sock_of_fd(fd);
	if (!sk)
		return 0;
	key = (__u64)sk;
	if (!bpf_map_lookup_elem(&nginx_links, &key))
		return 0; /* not a linked client connection */
	bpf_map_delete_elem(&nginx_links, &key);
	e = GALAGO_RB_RESERVE(&events, struct nginx_ev);
	if (!e)
		return 0;
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = NGINX_EV_CLOSE;
	e->client_sk = key;
	e->tgid = bpf_get_current_pid_tgid() >> 32;
	GALAGO_RB_SUBMIT(&events, e);
	return 0;
}
