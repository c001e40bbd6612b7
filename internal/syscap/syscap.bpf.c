//go:build ignore

/* syscap: socket data from syscalls, for the l7 probe and every probe that
 * reads what processes send and receive (proc, ksli, postgre_sli, kafka,
 * tprofiling). No kprobes: the programs read each syscall's arguments from
 * the saved user registers (intact inside the syscall and at its exit), so
 * no sys_enter program and no per-thread stash are needed.
 *
 * Hooks:
 *   tp_btf/sock_send_length, sock_recv_length (syscap_sock_send/_recv, when
 *                     syscap_sock_hooks is set): inside every send and
 *                     receive of a socket; they take read, write, readv,
 *                     writev, sendto, sendmsg, and a TCP socket's recvfrom
 *                     and recvmsg (sock_data).
 *   One body, syscap_exit, for the rest (a datagram's recvfrom/recvmsg,
 *                     whose source address reaches the caller after the
 *                     sock hook, attached while DNS is enabled; recvmmsg,
 *                     sendmmsg; close), and for every
 *                     data syscall where the sock hooks are not attached;
 *                     two attachments, syscap.go picks one:
 *   tracepoint/syscalls/sys_exit_<name> (syscap_sc_exit) for each syscall
 *                     it takes: no other syscall runs a program.
 *   tp_btf/sys_exit   (syscap_sys_exit) the raw tracepoint, where the
 *                     per-syscall events cannot be had: every other
 *                     syscall returns at the first switch.
 * Flow of a data syscall: the syscall number, the snooper filter
 *   (galago_observed, common.h), then the connection of (tgid, fd) in
 *   conns. Its struct file is compared with the fd table's, so a reused fd
 *   number is a new connection. A new fd is a connection only when it is
 *   an AF_INET/AF_INET6 TCP or UDP socket. Its protocol is inferred in the
 *   kernel from the first bytes it carries (infer()); a connection whose
 *   protocol is not enabled (syscap_protos), that is TLS (ciphertext: its
 *   plaintext comes from the TLS uprobes) or that is not recognised within
 *   INFER_TRIES chunks is ignored from then on: later syscalls on it cost
 *   one lookup. A traced connection sends one CONN record (addresses,
 *   protocol, role), then one DATA record per syscall (per message for
 *   *mmsg) with the bytes moved and a prefix of them, then a CLOSE record
 *   at close(), or when another thread's new socket got the fd number
 *   before that close() returned (the entry then stays the new socket's).
 *   A short first read (<= SYSCAP_PRE_MAX bytes: a server reading a
 *   length prefix or a fixed header first) is kept and inferred together
 *   with the next read, then sent as the DATA record it was.
 * Capture: the first chunk of each turn (a run of chunks in one direction)
 *   keeps up to syscap_cap bytes (<= SYSCAP_CAP_MAX), the following ones of
 *   the same turn up to syscap_cont_cap: enough for the parsers to step over
 *   message bodies by their declared lengths. Records come in six size
 *   classes (128 bytes to 4 KiB of data, doubling) so that a 40-byte
 *   request does not reserve 4 KiB nor a 230-byte HTTP answer 1 KiB: the
 *   ring holds more records and the reader copies fewer bytes.
 *   Connections of the protocols in syscap_whole_protos (Kafka, for the
 *   kafka probe's record counts) are captured whole instead, up to
 *   syscap_whole_max bytes a chunk, in 4 KiB records (emit_whole).
 * Maps: conns (hash, (tgid << 32 | fd) -> struct syscap_conn),
 *   events (ring buffer), lost_events, conn_lost (connections not tracked
 *   because conns was full), next_id, filter_* (common.h).
 * Per-process syscall statistics (the proc probe) are a separate section at
 *   the end of this file: their own sys_enter/sys_exit programs, loaded
 *   without the ones above (syscap.OpenStats).
 * Thread events for tprofiling are a third section, in tprof.bpf.h
 *   (syscap.OpenTprof), loaded the same way.
 * Limits: 32-bit (ia32) processes' syscall numbers are not told apart;
 *   sendfile/splice bodies are counted as not captured.
 * Kernel: 5.8+ (ring buffer), tp_btf (5.5+), BTF; the sock hooks 6.3+.
 */
#define GALAGO_RINGBUF
#define GALAGO_FILTER
#include "common.h"
#include "atomic.h"

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define S_IFMT 00170000
#define S_IFSOCK 0140000
#define S_IFREG 0100000

/* Syscall numbers (x86_64, and asm-generic for arm64). */
#if defined(__TARGET_ARCH_x86)
#define NR_read 0
#define NR_write 1
#define NR_close 3
#define NR_readv 19
#define NR_writev 20
#define NR_sendto 44
#define NR_recvfrom 45
#define NR_sendmsg 46
#define NR_recvmsg 47
#define NR_recvmmsg 299
#define NR_sendmmsg 307
#define SC_NR(r) ((r)->orig_ax)
#define SC_ARG0(r) ((r)->di)
#define SC_ARG1(r) ((r)->si)
#define SC_ARG2(r) ((r)->dx)
#elif defined(__TARGET_ARCH_arm64)
#define NR_read 63
#define NR_write 64
#define NR_close 57
#define NR_readv 65
#define NR_writev 66
#define NR_sendto 206
#define NR_recvfrom 207
#define NR_sendmsg 211
#define NR_recvmsg 212
#define NR_recvmmsg 243
#define NR_sendmmsg 269
#define SC_NR(r) ((r)->syscallno)
#define SC_ARG0(r) ((r)->orig_x0) /* x0 holds the return value at exit */
#define SC_ARG1(r) ((r)->regs[1])
#define SC_ARG2(r) ((r)->regs[2])
#else
#error "syscap: unsupported architecture"
#endif

/* Protocols: the values of Go's l7.Protocol (internal/l7). */
enum syscap_proto {
	SYSCAP_P_UNKNOWN = 0,
	SYSCAP_P_HTTP = 1,
	SYSCAP_P_HTTP2 = 2,
	SYSCAP_P_MYSQL = 3,
	SYSCAP_P_PGSQL = 4,
	SYSCAP_P_DNS = 5,
	SYSCAP_P_REDIS = 6,
	SYSCAP_P_KAFKA = 7,
	SYSCAP_P_MONGO = 8,
	SYSCAP_P_MEMCACHED = 9,
	SYSCAP_P_DUBBO = 11,
};

enum syscap_dir {
	SYSCAP_EGRESS = 1,  /* written by the process */
	SYSCAP_INGRESS = 2, /* read by the process */
};

enum syscap_role {
	SYSCAP_ROLE_UNKNOWN = 0,
	SYSCAP_ROLE_CLIENT = 1,
	SYSCAP_ROLE_SERVER = 2,
};

enum syscap_l4 {
	SYSCAP_L4_TCP = 1,
	SYSCAP_L4_UDP = 2,
};

enum syscap_state {
	SYSCAP_INFER = 0,  /* protocol not known yet */
	SYSCAP_TRACE = 1,  /* traced: DATA records */
	SYSCAP_IGNORE = 2, /* not L7 of interest: one lookup per syscall */
	SYSCAP_TLS = 3,    /* raw bytes are TLS records: the plaintext stream (TLS uprobes) is the one traced */
};

enum syscap_rec_type {
	SYSCAP_REC_CONN = 1,
	SYSCAP_REC_DATA = 2,
	SYSCAP_REC_CLOSE = 3,
};

/* Data record flags. */
#define SYSCAP_F_PEER 0x1 /* peer/peer_port hold the datagram's address */
#define SYSCAP_F_SSL 0x2  /* plaintext of a TLS connection, from the TLS uprobes */
#define SYSCAP_F_MORE 0x4 /* whole capture: more of this chunk's bytes follow, in SYSCAP_F_CONT records */
#define SYSCAP_F_CONT 0x8 /* whole capture: these bytes are the chunk's from off on */

#define SYSCAP_CAP_MAX 4096
#define SYSCAP_CAP_M2 2048
#define SYSCAP_CAP_M 1024
#define SYSCAP_CAP_S4 512
#define SYSCAP_CAP_S2 256
#define SYSCAP_CAP_S 128
#define INFER_TRIES 4
#define INFER_BYTES 32
#define SYSCAP_PRE_MAX 16
#define MAX_IOV 4
#define MAX_MMSG 8

struct syscap_conn {
	__u64 file; /* struct file *: the fd's identity */
	__u64 id;   /* connection id, unique while galago runs */
	__u8 state; /* enum syscap_state */
	__u8 proto; /* enum syscap_proto */
	__u8 role;  /* enum syscap_role */
	__u8 l4;    /* enum syscap_l4 */
	__u8 tries; /* chunks seen while inferring */
	__u8 dir;   /* direction of the last chunk (turns) */
	__u8 pt_state; /* enum syscap_state of the plaintext stream (state == SYSCAP_TLS) */
	__u8 pt_tries;
	/* A short first read of a stream that is inferring (a server reading
	 * a length prefix or a fixed header before the rest: Kafka's size,
	 * MongoDB's header): kept to be inferred with the next read. */
	__u8 pre[SYSCAP_PRE_MAX];
	__u8 pre_n;
	__u8 _pad[7];
};

/* A traced connection, once, before its first DATA record. */
struct syscap_conn_rec {
	__u32 type; /* SYSCAP_REC_CONN */
	__u32 tgid;
	__u64 conn_id;
	__u64 ts;
	__u32 fd;
	__u32 netns;
	__u16 family;
	__u16 sport; /* local port, host order */
	__u16 dport; /* remote port, host order; 0 for an unconnected UDP socket */
	__u8 l4;
	__u8 role;
	__u8 proto;
	__u8 ssl; /* 1: the plaintext of a TLS connection */
	__u8 _pad[6];
	__u8 saddr[16]; /* local address (IPv4 in the first 4 bytes) */
	__u8 daddr[16]; /* remote address */
};

/* A connection closed (close() by its process). */
struct syscap_close_rec {
	__u32 type; /* SYSCAP_REC_CLOSE */
	__u32 tgid;
	__u64 conn_id;
	__u64 ts;
};

/* One syscall's (or one datagram's) data on a traced connection, followed
 * by len captured bytes (the record's size class holds up to cap). */
struct syscap_data_hdr {
	__u32 type; /* SYSCAP_REC_DATA */
	__u32 tgid;
	__u64 conn_id;
	__u64 ts;   /* bpf_ktime_get_ns at the syscall's return */
	__u32 size; /* bytes the syscall (or datagram) moved */
	__u16 len;  /* bytes captured */
	__u8 dir;   /* enum syscap_dir */
	__u8 flags; /* SYSCAP_F_* */
	__u8 peer[16]; /* SYSCAP_F_PEER: the datagram's remote address */
	__u16 peer_port;
	__u16 peer_family;
	__u32 off; /* SYSCAP_F_CONT: offset of these bytes in the chunk */
};

struct syscap_data_s {
	struct syscap_data_hdr h;
	__u8 data[SYSCAP_CAP_S];
};

struct syscap_data_s2 {
	struct syscap_data_hdr h;
	__u8 data[SYSCAP_CAP_S2];
};

struct syscap_data_s4 {
	struct syscap_data_hdr h;
	__u8 data[SYSCAP_CAP_S4];
};

struct syscap_data_m {
	struct syscap_data_hdr h;
	__u8 data[SYSCAP_CAP_M];
};

struct syscap_data_m2 {
	struct syscap_data_hdr h;
	__u8 data[SYSCAP_CAP_M2];
};

struct syscap_data_l {
	struct syscap_data_hdr h;
	__u8 data[SYSCAP_CAP_MAX];
};

/* Run-time settings, written by user space: globals, read without a
 * helper call on the hot path. */
volatile __u32 syscap_protos = 0;                /* bit (1 << enum syscap_proto) per enabled protocol */
volatile __u32 syscap_cap = SYSCAP_CAP_MAX;      /* bytes kept of a turn's first chunk (<= SYSCAP_CAP_MAX) */
volatile __u32 syscap_cont_cap = 256;            /* bytes kept of the turn's later chunks */
volatile __u32 syscap_ssl = 0;                   /* 1: TLS uprobes are attached: note the fds of TLS calls */
volatile __u32 syscap_sock_hooks = 0;            /* 1: the sock hooks take the data syscalls (syscap_sock_*) */

GALAGO_EXPORT_TYPE(struct syscap_conn, conn);
GALAGO_EXPORT_TYPE(struct syscap_conn_rec, conn_rec);
GALAGO_EXPORT_TYPE(struct syscap_close_rec, close_rec);
GALAGO_EXPORT_TYPE(struct syscap_data_hdr, data_hdr);
GALAGO_EXPORT_TYPE(enum syscap_proto, proto);
GALAGO_EXPORT_TYPE(enum syscap_dir, dir);
GALAGO_EXPORT_TYPE(enum syscap_role, role);
GALAGO_EXPORT_TYPE(enum syscap_l4, l4);
GALAGO_EXPORT_TYPE(enum syscap_state, state);
GALAGO_EXPORT_TYPE(enum syscap_rec_type, rec_type);

#ifndef SYSCAP_MAX_CONNS
#define SYSCAP_MAX_CONNS 65536
#endif

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SYSCAP_MAX_CONNS);
	__type(key, __u64); /* tgid << 32 | fd */
	__type(value, struct syscap_conn);
} conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 * 1024 * 1024);
} events SEC(".maps");

/* conn_lost[0], per CPU: sockets not tracked because conns was full. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} conn_lost SEC(".maps");

/* next_id[0]: connection ids. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} next_id SEC(".maps");

/* Scratch for a chunk gathered from several iovecs (twice the capture, so
 * that every bounded write stays inside it). */
struct syscap_scratch {
	struct syscap_data_hdr h;
	__u8 data[2 * SYSCAP_CAP_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct syscap_scratch);
} scratch SEC(".maps");

/* The first bytes of a connection, for infer(). A map value rather than a
 * stack array: clang turns offsets into an aligned stack buffer into ORs,
 * which the verifier refuses on pointers. */
struct syscap_head {
	__u8 b[INFER_BYTES * 2];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct syscap_head);
} head_buf SEC(".maps");

/* fd_file: the struct file of fd in the current task, or NULL. */
static __always_inline struct file *fd_file(struct task_struct *task, __u32 fd)
{
	struct files_struct *files = task->files;
	struct fdtable *fdt;
	struct file **fds;
	struct file *f = NULL;

	if (!files)
		return NULL;
	fdt = files->fdt;
	if (!fdt || fd >= fdt->max_fds)
		return NULL;
	fds = fdt->fd;
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]))
		return NULL;
	return f;
}

/* ---- protocol inference (the same signatures as the Go parsers' Detect) ---- */

static __always_inline bool is_digit(__u8 c)
{
	return c >= '0' && c <= '9';
}

static __always_inline bool has_prefix(const __u8 *b, __u32 n, const char *p, __u32 plen)
{
	if (n < plen)
		return false;
#pragma unroll
	for (int i = 0; i < 10; i++) {
		if (i >= plen)
			break;
		if (b[i] != (__u8)p[i])
			return false;
	}
	return true;
}

#define PREFIX(b, n, s) has_prefix((b), (n), (s), sizeof(s) - 1)

static __always_inline __u32 be32(const __u8 *b)
{
	return ((__u32)b[0] << 24) | ((__u32)b[1] << 16) | ((__u32)b[2] << 8) | b[3];
}

static __always_inline __u32 le32(const __u8 *b)
{
	return ((__u32)b[3] << 24) | ((__u32)b[2] << 16) | ((__u32)b[1] << 8) | b[0];
}

static __always_inline bool http_request(const __u8 *b, __u32 n)
{
	switch (b[0]) {
	case 'G': return PREFIX(b, n, "GET /") || PREFIX(b, n, "GET http");
	case 'P': return PREFIX(b, n, "POST /") || PREFIX(b, n, "PUT /") || PREFIX(b, n, "PATCH /") ||
			 PREFIX(b, n, "POST http") || PREFIX(b, n, "PUT http");
	case 'H': return PREFIX(b, n, "HEAD /");
	case 'D': return PREFIX(b, n, "DELETE /");
	case 'O': return PREFIX(b, n, "OPTIONS ");
	case 'C': return PREFIX(b, n, "CONNECT ");
	case 'T': return PREFIX(b, n, "TRACE /");
	}
	return false;
}

static __always_inline bool http2_preface(const __u8 *b, __u32 n)
{
	return PREFIX(b, n, "PRI * HTT") && n >= 24 && b[9] == 'P' && b[10] == '/' && b[11] == '2';
}

/* RESP: an array of bulk strings, "*<n>\r\n$". */
static __always_inline bool redis_request(const __u8 *b, __u32 n)
{
	if (n < 5 || b[0] != '*' || !is_digit(b[1]))
		return false;
	if (b[2] == '\r')
		return b[3] == '\n' && b[4] == '$';
	return n >= 6 && is_digit(b[2]) && b[3] == '\r' && b[4] == '\n' && b[5] == '$';
}

static __always_inline bool memcached_request(const __u8 *b, __u32 n)
{
	switch (b[0]) {
	case 'g': return PREFIX(b, n, "get ") || PREFIX(b, n, "gets ") || PREFIX(b, n, "gat ") || PREFIX(b, n, "gats ");
	case 's': return PREFIX(b, n, "set ") || PREFIX(b, n, "stats\r\n") || PREFIX(b, n, "stats ");
	case 'a': return PREFIX(b, n, "add ") || PREFIX(b, n, "append ");
	case 'r': return PREFIX(b, n, "replace ");
	case 'p': return PREFIX(b, n, "prepend ");
	case 'c': return PREFIX(b, n, "cas ");
	case 'd': return PREFIX(b, n, "delete ") || PREFIX(b, n, "decr ");
	case 'i': return PREFIX(b, n, "incr ");
	case 't': return PREFIX(b, n, "touch ");
	case 'v': return PREFIX(b, n, "version\r\n") || PREFIX(b, n, "verbosity ");
	case 'f': return PREFIX(b, n, "flush_all");
	}
	return false;
}

/* PostgreSQL startup (protocol 3.0), SSLRequest or GSSENCRequest: the
 * first message a client sends, with its whole length. */
static __always_inline bool pgsql_startup(const __u8 *b, __u32 n, __u32 size)
{
	__u32 len, code;

	if (n < 8)
		return false;
	len = be32(b);
	code = be32(b + 4);
	if (len != size || len < 8 || len > 10000)
		return false;
	return code == 0x00030000 || (len == 8 && (code == 80877103 || code == 80877104));
}

/* PostgreSQL simple or extended query with its whole length (a
 * connection caught after its start): 'Q' or 'P' + int32 length. */
static __always_inline bool pgsql_query(const __u8 *b, __u32 n, __u32 size)
{
	__u32 len;

	if (n < 5 || (b[0] != 'Q' && b[0] != 'P'))
		return false;
	len = be32(b + 1);
	return len >= 4 && len + 1 <= size && len < (1 << 24);
}

/* MySQL server greeting (protocol 10) as the first packet of a
 * connection: [3-byte length][seq 0][0x0a][version "5.", "8.", "10."...]. */
static __always_inline bool mysql_greeting(const __u8 *b, __u32 n, __u32 size)
{
	__u32 len;

	if (n < 8)
		return false;
	len = b[0] | (b[1] << 8) | (b[2] << 16);
	return len + 4 == size && b[3] == 0 && b[4] == 0x0a && is_digit(b[5]) && (b[6] == '.' || is_digit(b[6]));
}

/* MySQL command with its whole length (caught after the handshake):
 * COM_QUERY (3), COM_STMT_PREPARE (0x16), COM_STMT_EXECUTE (0x17) with
 * sequence 0. */
static __always_inline bool mysql_command(const __u8 *b, __u32 n, __u32 size)
{
	__u32 len;

	if (n < 5)
		return false;
	len = b[0] | (b[1] << 8) | (b[2] << 16);
	return len + 4 == size && len >= 1 && b[3] == 0 && (b[4] == 0x03 || b[4] == 0x16 || b[4] == 0x17);
}

/* Kafka request with its whole size: int32 size, int16 api_key,
 * int16 api_version, int32 correlation_id, int16 client_id length. */
static __always_inline bool kafka_request(const __u8 *b, __u32 n, __u32 size)
{
	__u32 len;
	__u16 key, ver;
	__s16 cid;

	if (n < 14)
		return false;
	len = be32(b);
	key = ((__u16)b[4] << 8) | b[5];
	ver = ((__u16)b[6] << 8) | b[7];
	cid = (__s16)(((__u16)b[12] << 8) | b[13]);
	return len + 4 == size && len >= 10 && key <= 74 && ver <= 20 && cid >= -1 && cid <= 512;
}

/* MongoDB request: 16-byte header with its whole length, responseTo 0,
 * opCode OP_MSG (2013), OP_QUERY (2004) or OP_COMPRESSED (2012). */
static __always_inline bool mongo_request(const __u8 *b, __u32 n, __u32 size)
{
	__u32 len, op;

	if (n < 16)
		return false;
	len = le32(b);
	op = le32(b + 12);
	return len == size && len >= 16 && le32(b + 8) == 0 && (op == 2013 || op == 2004 || op == 2012);
}

/* Dubbo2 request: magic 0xdabb, request flag, status 0, body length
 * under 64 MiB (internal/l7/dubbo Detect). */
static __always_inline bool dubbo_request(const __u8 *b, __u32 n)
{
	return n >= 16 && b[0] == 0xda && b[1] == 0xbb && (b[2] & 0x80) && b[3] == 0 && be32(b + 12) <= (64 << 20);
}

/* DNS query: header with QR=0, opcode QUERY, one question, no answers. */
static __always_inline bool dns_query(const __u8 *b, __u32 n)
{
	if (n < 12)
		return false;
	return (b[2] & 0xf8) == 0 && b[4] == 0 && b[5] == 1 && b[6] == 0 && b[7] == 0 && b[8] == 0 && b[9] == 0 &&
	       b[10] == 0 && b[11] <= 1;
}

/* TLS record: a handshake (ClientHello or ServerHello) of TLS 1.0-1.3. */
static __always_inline bool tls_record(const __u8 *b, __u32 n)
{
	return n >= 3 && b[0] == 0x16 && b[1] == 0x03 && b[2] <= 0x04;
}

/* infer: the protocol of a connection whose first chunk b (n captured of
 * size bytes) travels in dir, and the role it gives; false if unknown.
 * A request read is the server's side, a request written the client's;
 * MySQL's server speaks first. */
static __always_inline bool infer(const __u8 *b, __u32 n, __u32 size, __u8 dir, __u8 l4, __u8 *proto, __u8 *role)
{
	__u8 req_role = dir == SYSCAP_EGRESS ? SYSCAP_ROLE_CLIENT : SYSCAP_ROLE_SERVER;
	__u8 p = SYSCAP_P_UNKNOWN;

	if (n == 0)
		return false;
	if (l4 == SYSCAP_L4_UDP) {
		if (dns_query(b, n))
			p = SYSCAP_P_DNS;
	} else if (http_request(b, n)) {
		p = SYSCAP_P_HTTP;
	} else if (http2_preface(b, n)) {
		p = SYSCAP_P_HTTP2;
	} else if (redis_request(b, n)) {
		p = SYSCAP_P_REDIS;
	} else if (memcached_request(b, n)) {
		p = SYSCAP_P_MEMCACHED;
	} else if (pgsql_startup(b, n, size) || pgsql_query(b, n, size)) {
		p = SYSCAP_P_PGSQL;
	} else if (mysql_greeting(b, n, size)) {
		p = SYSCAP_P_MYSQL;
		req_role = dir == SYSCAP_EGRESS ? SYSCAP_ROLE_SERVER : SYSCAP_ROLE_CLIENT;
	} else if (mysql_command(b, n, size)) {
		p = SYSCAP_P_MYSQL;
	} else if (kafka_request(b, n, size)) {
		p = SYSCAP_P_KAFKA;
	} else if (mongo_request(b, n, size)) {
		p = SYSCAP_P_MONGO;
	} else if (dubbo_request(b, n)) {
		p = SYSCAP_P_DUBBO;
	} else if (n >= 14 && b[0] == 0 && (((__u32)b[0] << 8) | b[1]) + 2 == size && dns_query(b + 2, n - 2)) {
		p = SYSCAP_P_DNS; /* DNS over TCP: 2-byte length prefix */
	}
	if (p == SYSCAP_P_UNKNOWN)
		return false;
	*proto = p;
	*role = req_role;
	return true;
}

/* ---- records ---- */

static __always_inline void fill_addrs(struct syscap_conn_rec *r, struct sock *sk)
{
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);

	r->family = family;
	r->sport = BPF_CORE_READ(sk, __sk_common.skc_num);
	r->dport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	r->netns = BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
	__builtin_memset(r->saddr, 0, sizeof(r->saddr));
	__builtin_memset(r->daddr, 0, sizeof(r->daddr));
	if (family == AF_INET) {
		BPF_CORE_READ_INTO((__u32 *)r->saddr, sk, __sk_common.skc_rcv_saddr);
		BPF_CORE_READ_INTO((__u32 *)r->daddr, sk, __sk_common.skc_daddr);
	} else {
		BPF_CORE_READ_INTO(&r->saddr, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8);
		BPF_CORE_READ_INTO(&r->daddr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
	}
}

static __always_inline void emit_conn(__u32 tgid, __u32 fd, struct syscap_conn *c, struct sock *sk, __u64 ts)
{
	struct syscap_conn_rec *r = GALAGO_RB_RESERVE(&events, struct syscap_conn_rec);

	if (!r)
		return;
	r->type = SYSCAP_REC_CONN;
	r->tgid = tgid;
	r->conn_id = c->id;
	r->ts = ts;
	r->fd = fd;
	r->l4 = c->l4;
	r->role = c->role;
	r->proto = c->proto;
	r->ssl = c->state == SYSCAP_TLS;
	__builtin_memset(r->_pad, 0, sizeof(r->_pad));
	fill_addrs(r, sk);
	GALAGO_RB_SUBMIT(&events, r);
}

/* ---- the data path ---- */

/* A syscall's buffers: a plain buffer (iov NULL), or an iovec array. */
struct bufs {
	const void *buf;
	const struct iovec *iov;
	__u32 iovcnt;
	const struct sockaddr *peer; /* datagram address (recvfrom/recvmsg/sendto/sendmsg), may be NULL */
	__u64 ts; /* when the data moved, if not now (a TLS write: its entry) */
	__u64 file;   /* the socket's struct file when the hook knows it (the sock hooks), else 0 */
	__u8 udp_only; /* handle the chunk only if the socket is UDP (sys_exit beside the sock hooks) */
};

/* first_bytes copies up to INFER_BYTES of the data into out. */
static __always_inline __u32 first_bytes(const struct bufs *b, __u64 size, __u8 *out)
{
	const void *src = b->buf;
	__u64 avail = size;
	__u64 n;

	if (b->iov) {
		struct iovec v;

		if (bpf_probe_read_user(&v, sizeof(v), b->iov))
			return 0;
		src = v.iov_base;
		avail = v.iov_len < size ? v.iov_len : size;
	}
	n = avail < INFER_BYTES ? avail : INFER_BYTES;
	barrier_var(n);
	if (n > INFER_BYTES)
		n = INFER_BYTES;
	barrier_var(n);
	if (n == 0 || bpf_probe_read_user(out, n, src))
		return 0;
	return n;
}

/* COPY_ONE copies up to want bytes from src into dst, a buffer of CAP
 * bytes; evaluates to the bytes copied (0 when the read faults). */
#define COPY_ONE(dst, CAP, src, want)                                   \
	({                                                              \
		__u64 __n = (want);                                     \
		barrier_var(__n);                                       \
		if (__n > (CAP))                                        \
			__n = (CAP);                                    \
		barrier_var(__n);                                       \
		bpf_probe_read_user((dst), __n, (src)) ? 0 : __n;       \
	})

static __always_inline void fill_peer(struct syscap_data_hdr *h, const struct sockaddr *peer)
{
	__u16 family = 0;

	h->flags = 0;
	h->peer_family = 0;
	h->peer_port = 0;
	__builtin_memset(h->peer, 0, sizeof(h->peer));
	if (!peer || bpf_probe_read_user(&family, sizeof(family), peer))
		return;
	if (family == AF_INET) {
		struct sockaddr_in sin;

		if (bpf_probe_read_user(&sin, sizeof(sin), peer))
			return;
		*(__u32 *)h->peer = sin.sin_addr.s_addr;
		h->peer_port = bpf_ntohs(sin.sin_port);
	} else if (family == AF_INET6) {
		struct sockaddr_in6 sin6;

		if (bpf_probe_read_user(&sin6, sizeof(sin6), peer))
			return;
		__builtin_memcpy(h->peer, &sin6.sin6_addr, 16);
		h->peer_port = bpf_ntohs(sin6.sin6_port);
	} else {
		return;
	}
	h->peer_family = family;
	h->flags = SYSCAP_F_PEER;
}

static __always_inline void fill_hdr(struct syscap_data_hdr *h, __u32 tgid, const struct syscap_conn *c, __u64 ts,
				     __u64 size, __u8 dir, const struct sockaddr *peer)
{
	h->type = SYSCAP_REC_DATA;
	h->tgid = tgid;
	h->conn_id = c->id;
	h->ts = ts;
	h->size = size > 0xffffffffULL ? 0xffffffffU : size;
	h->dir = dir;
	h->off = 0;
	fill_peer(h, c->l4 == SYSCAP_L4_UDP ? peer : NULL);
	if (c->state == SYSCAP_TLS)
		h->flags |= SYSCAP_F_SSL;
}

/* EMIT_CLASS reserves a record of size class T (CAP data bytes) and sends
 * the header and up to want bytes from src in it (inside emit_data). */
#define EMIT_CLASS(T, CAP)                                                    \
	do {                                                                  \
		T *r = GALAGO_RB_RESERVE(&events, T);                         \
		if (!r)                                                       \
			return;                                               \
		fill_hdr(&r->h, tgid, c, ts, size, dir, b->peer);             \
		r->h.len = COPY_ONE(r->data, CAP, src, want);                 \
		GALAGO_RB_SUBMIT(&events, r);                                 \
	} while (0)

/* emit_data sends one DATA record with up to cap bytes of the data. */
static __always_inline void emit_data(__u32 tgid, const struct syscap_conn *c, const struct bufs *b, __u64 size,
				      __u8 dir, __u64 cap, __u64 ts)
{
	__u64 want = size < cap ? size : cap;

	if (b->iov && b->iovcnt > 1) {
		/* Gather from up to MAX_IOV iovecs into the scratch record. */
		__u32 zero = 0;
		__u64 off = 0;
		struct syscap_scratch *s = bpf_map_lookup_elem(&scratch, &zero);

		if (!s)
			return;
#pragma unroll
		for (int i = 0; i < MAX_IOV; i++) {
			struct iovec v;
			__u64 n;

			if (i >= b->iovcnt || off >= want)
				break;
			if (bpf_probe_read_user(&v, sizeof(v), &b->iov[i]))
				break;
			n = v.iov_len < want - off ? v.iov_len : want - off;
			barrier_var(n);
			if (n > SYSCAP_CAP_MAX)
				n = SYSCAP_CAP_MAX;
			barrier_var(n);
			/* off < want <= SYSCAP_CAP_MAX: the write stays in data[2 * CAP]. */
			if (bpf_probe_read_user(&s->data[off & (SYSCAP_CAP_MAX - 1)], n, v.iov_base))
				break;
			off += n;
		}
		barrier_var(off);
		if (off > SYSCAP_CAP_MAX)
			off = SYSCAP_CAP_MAX;
		barrier_var(off);
		fill_hdr(&s->h, tgid, c, ts, size, dir, b->peer);
		s->h.len = off;
		galago_rb_output(&events, s, sizeof(s->h) + off);
		return;
	}

	const void *src = b->buf;
	if (b->iov) {
		struct iovec v;

		if (bpf_probe_read_user(&v, sizeof(v), b->iov))
			return;
		src = v.iov_base;
		if (v.iov_len < want)
			want = v.iov_len;
	}
	if (want <= SYSCAP_CAP_S)
		EMIT_CLASS(struct syscap_data_s, SYSCAP_CAP_S);
	else if (want <= SYSCAP_CAP_S2)
		EMIT_CLASS(struct syscap_data_s2, SYSCAP_CAP_S2);
	else if (want <= SYSCAP_CAP_S4)
		EMIT_CLASS(struct syscap_data_s4, SYSCAP_CAP_S4);
	else if (want <= SYSCAP_CAP_M)
		EMIT_CLASS(struct syscap_data_m, SYSCAP_CAP_M);
	else if (want <= SYSCAP_CAP_M2)
		EMIT_CLASS(struct syscap_data_m2, SYSCAP_CAP_M2);
	else
		EMIT_CLASS(struct syscap_data_l, SYSCAP_CAP_MAX);
}

/* emit_pre sends the kept first read of a stream (struct syscap_conn's
 * pre) as the DATA record it was. */
static __always_inline void emit_pre(__u32 tgid, const struct syscap_conn *c, const __u8 *pre, __u32 n, __u8 dir,
				     __u64 ts)
{
	struct syscap_data_s *r = GALAGO_RB_RESERVE(&events, struct syscap_data_s);

	if (!r)
		return;
	fill_hdr(&r->h, tgid, c, ts, n, dir, NULL);
	__builtin_memcpy(r->data, pre, SYSCAP_PRE_MAX);
	r->h.len = n;
	GALAGO_RB_SUBMIT(&events, r);
}

static __always_inline __u64 new_conn_id(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&next_id, &zero);

	if (!n)
		return 0;
	return __sync_fetch_and_add(n, 1) + 1;
}

/* traced: whether c's records reach user space (a CLOSE is owed). */
static __always_inline bool traced(const struct syscap_conn *c)
{
	return c->state == SYSCAP_TRACE || (c->state == SYSCAP_TLS && c->pt_state == SYSCAP_TRACE);
}

/* emit_close sends the CLOSE record of a traced connection. */
static __always_inline void emit_close(__u32 tgid, const struct syscap_conn *c, __u64 ts)
{
	struct syscap_close_rec *r;

	if (!traced(c))
		return;
	r = GALAGO_RB_RESERVE(&events, struct syscap_close_rec);
	if (!r)
		return;
	r->type = SYSCAP_REC_CLOSE;
	r->tgid = tgid;
	r->conn_id = c->id;
	r->ts = ts;
	GALAGO_RB_SUBMIT(&events, r);
}

/* lookup_conn returns the connection of (tgid, fd), creating it for a
 * socket not seen before (or whose fd now names another file); NULL for
 * anything that is not an inet TCP/UDP socket. *sk_out gets the socket of
 * a new connection (for its CONN record), NULL otherwise. */
static __always_inline struct syscap_conn *lookup_conn(__u64 key, __u32 fd, __u64 hint, struct sock **sk_out)
{
	struct syscap_conn *c = bpf_map_lookup_elem(&conns, &key);
	struct syscap_conn nc = {};
	struct socket *sock;
	struct sock *sk;
	struct file *f;
	__u16 family, type;
	__u8 proto;

	*sk_out = NULL;
	/* The sock hooks know the socket's file: a known connection
	 * needs no walk of the fd table. */
	if (hint && c && c->file == hint)
		return c;
	f = fd_file(bpf_get_current_task_btf(), fd);
	if (!f)
		return NULL;
	if (hint && (__u64)f != hint)
		return NULL; /* the syscall's fd is not the socket the hook saw */
	if (c && c->file == (__u64)f)
		return c;
	if (c) {
		/* The fd names another file now: the old connection was
		 * closed by a thread whose close() has not returned yet. */
		emit_close(key >> 32, c, bpf_ktime_get_ns());
	}
	if ((BPF_CORE_READ(f, f_inode, i_mode) & S_IFMT) != S_IFSOCK)
		return NULL;
	sock = BPF_CORE_READ(f, private_data);
	if (!sock)
		return NULL;
	sk = BPF_CORE_READ(sock, sk);
	if (!sk)
		return NULL;
	family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family != AF_INET && family != AF_INET6)
		return NULL;
	proto = BPF_CORE_READ_BITFIELD_PROBED(sk, sk_protocol);
	type = BPF_CORE_READ(sock, type);
	if (proto == IPPROTO_TCP && type == 1 /* SOCK_STREAM */)
		nc.l4 = SYSCAP_L4_TCP;
	else if (proto == IPPROTO_UDP && type == 2 /* SOCK_DGRAM */)
		nc.l4 = SYSCAP_L4_UDP;
	else
		return NULL;
	nc.file = (__u64)f;
	nc.state = SYSCAP_INFER;
	if (bpf_map_update_elem(&conns, &key, &nc, BPF_ANY)) {
		__u32 zero = 0;
		__u64 *lost = bpf_map_lookup_elem(&conn_lost, &zero);

		if (lost)
			*lost += 1;
		return NULL;
	}
	*sk_out = sk;
	return bpf_map_lookup_elem(&conns, &key);
}

/* stream_infer runs the inference of one stream (raw or plaintext) on the
 * chunk; returns true when it now traces (and the CONN record is sent). */
static __always_inline bool stream_infer(__u32 tgid, __u32 fd, struct syscap_conn *c, struct sock *sk,
					 const struct bufs *b, __u64 size, __u8 dir, __u64 ts, bool plaintext)
{
	__u32 zero = 0;
	struct syscap_head *hb = bpf_map_lookup_elem(&head_buf, &zero);
	__u8 *head;
	__u32 n, pre;
	__u8 proto, role;

	if (!hb)
		return false;
	head = hb->b;
	__builtin_memset(head, 0, sizeof(hb->b));
	pre = dir == SYSCAP_INGRESS && c->pre_n <= SYSCAP_PRE_MAX ? c->pre_n : 0;
	c->pre_n = 0;
	if (pre)
		__builtin_memcpy(head, c->pre, SYSCAP_PRE_MAX);
	/* pre <= SYSCAP_PRE_MAX: the mask only shows the verifier that
	 * head + pre + INFER_BYTES stays in the buffer. */
	n = first_bytes(b, size, head + (pre & (SYSCAP_PRE_MAX * 2 - 1)));
	if (!pre && !plaintext && n && tls_record(head, n)) {
		c->state = SYSCAP_TLS; /* plaintext comes from the TLS uprobes */
		return false;
	}
	if (!infer(head, pre + n, pre + size, dir, c->l4, &proto, &role)) {
		if (!pre && n == size && size <= SYSCAP_PRE_MAX && dir == SYSCAP_INGRESS && c->l4 == SYSCAP_L4_TCP) {
			__builtin_memcpy(c->pre, head, SYSCAP_PRE_MAX);
			c->pre_n = n;
		}
		if (plaintext) {
			if (++c->pt_tries >= INFER_TRIES)
				c->pt_state = SYSCAP_IGNORE;
		} else if (++c->tries >= INFER_TRIES) {
			c->state = SYSCAP_IGNORE;
		}
		return false;
	}
	if (!(syscap_protos & (1U << proto))) {
		if (plaintext)
			c->pt_state = SYSCAP_IGNORE;
		else
			c->state = SYSCAP_IGNORE;
		return false;
	}
	if (!sk) {
		/* Known socket: read its sock again for the record. */
		struct file *f = (struct file *)c->file;
		struct socket *sock = BPF_CORE_READ(f, private_data);

		sk = sock ? BPF_CORE_READ(sock, sk) : NULL;
		if (!sk)
			return false;
	}
	c->id = new_conn_id();
	c->proto = proto;
	c->role = role;
	c->dir = 0;
	if (plaintext)
		c->pt_state = SYSCAP_TRACE;
	else
		c->state = SYSCAP_TRACE;
	emit_conn(tgid, fd, c, sk, ts);
	if (pre)
		emit_pre(tgid, c, c->pre, pre, dir, ts);
	return true;
}

/* ---- whole capture (Kafka): a chunk's bytes past the first 4 KiB ----
 * The protocols in syscap_whole_protos (a consumer counts what lies deep
 * in large messages: the record count of every batch of a Fetch response
 * or Produce request) have every chunk captured from its first byte up to
 * syscap_whole_max, in records of SYSCAP_CAP_MAX bytes: the first flagged
 * SYSCAP_F_MORE, the next ones SYSCAP_F_CONT with their offset (and
 * SYSCAP_F_MORE but the last). User space joins them into one chunk; a
 * record lost to a full ring leaves the rest of the chunk a gap, as the
 * plain capture does. A chunk of several iovecs (up to MAX_IOV) has each
 * iovec's bytes in records of their own (whole_iov). */
volatile __u32 syscap_whole_protos = 0; /* bit (1 << enum syscap_proto) */
volatile __u32 syscap_whole_max = 0;    /* bytes kept of a chunk (<= SYSCAP_WHOLE_RECS * SYSCAP_CAP_MAX) */
#define SYSCAP_WHOLE_RECS 64

static __always_inline bool whole(const struct syscap_conn *c)
{
	return c->proto < 32 && (syscap_whole_protos & (1U << c->proto));
}

/* whole_rec sends the n bytes at src, at off in the chunk, in one record. */
static __always_inline bool whole_rec(const struct syscap_conn *c, __u32 tgid, const void *src, __u64 off, __u64 n,
				      __u64 size, __u8 dir, __u64 ts, __u8 flags)
{
	struct syscap_data_l *r = GALAGO_RB_RESERVE(&events, struct syscap_data_l);

	if (!r)
		return false;
	fill_hdr(&r->h, tgid, c, ts, size, dir, NULL);
	r->h.flags |= flags;
	r->h.off = off;
	r->h.len = COPY_ONE(r->data, SYSCAP_CAP_MAX, src, n);
	GALAGO_RB_SUBMIT(&events, r);
	return true;
}

/* whole_iov sends the n bytes of one buffer (a plain one, or one iovec of a
 * writev or sendmsg: a Kafka client's or broker's) at src, at off in a
 * chunk of end bytes kept, in records of up to SYSCAP_CAP_MAX. Returns 0
 * when a record could not be sent. A global function: its loop is
 * verified once, not per iovec or on_data path. */
struct whole_seg {
	const void *src;
	__u64 off, n; /* the iovec's bytes kept, at off in the chunk */
	__u64 end;    /* the chunk's bytes kept */
	__u64 size;   /* the chunk's bytes */
	__u64 ts;
	__u8 dir;
};

__noinline int whole_iov(const struct syscap_conn *c, const struct whole_seg *w)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	const void *src;
	__u64 off, n, full, at;
	__u8 flags;

	if (!c || !w || !w->n)
		return 0;
	src = w->src;
	off = w->off;
	n = w->n;
	/* As emit_whole: every record but the last is full, so that the
	 * loop's paths are alike and the verifier prunes them. */
	full = (n - 1) / SYSCAP_CAP_MAX;
	if (full > SYSCAP_WHOLE_RECS - 1)
		full = SYSCAP_WHOLE_RECS - 1;
	for (__u32 i = 0; i < SYSCAP_WHOLE_RECS - 1; i++) {
		if (i >= full)
			break;
		at = (__u64)i * SYSCAP_CAP_MAX;
		if (!whole_rec(c, tgid, src + at, off + at, SYSCAP_CAP_MAX, w->size, w->dir, w->ts,
			       off + at ? SYSCAP_F_CONT | SYSCAP_F_MORE : SYSCAP_F_MORE))
			return 0;
	}
	at = full * SYSCAP_CAP_MAX;
	flags = off + at ? SYSCAP_F_CONT : 0;
	if (off + n < w->end)
		flags |= SYSCAP_F_MORE;
	return whole_rec(c, tgid, src + at, off + at, n - at, w->size, w->dir, w->ts, flags);
}

/* emit_whole sends a chunk of more than SYSCAP_CAP_MAX bytes in records of
 * SYSCAP_CAP_MAX (whole_iov, once per iovec); 0 when the chunk is not one
 * for it (emit_data's). */
__noinline int emit_whole(const struct syscap_conn *c, const struct bufs *b, __u64 size, __u8 dir, __u64 ts)
{
	__u64 end = size < syscap_whole_max ? size : syscap_whole_max;
	struct whole_seg w = {.end = end, .size = size, .ts = ts, .dir = dir};
	__u64 off = 0;

	if (!c || !b || end <= SYSCAP_CAP_MAX)
		return 0; /* emit_data takes it (gathering several iovecs into one record) */
	if (!b->iov) {
		w.src = b->buf;
		w.n = end;
		whole_iov(c, &w);
		return 1;
	}
	/* Each iovec's bytes in records of their own, up to MAX_IOV iovecs:
	 * past them the chunk's rest is a gap, as the plain capture's. */
#pragma unroll
	for (int i = 0; i < MAX_IOV; i++) {
		struct iovec v;
		__u64 n;

		if (i >= b->iovcnt || off >= end)
			break;
		if (bpf_probe_read_user(&v, sizeof(v), &b->iov[i]))
			break;
		n = v.iov_len < end - off ? v.iov_len : end - off;
		w.src = v.iov_base;
		w.off = off;
		w.n = n;
		if (n && !whole_iov(c, &w))
			break;
		off += n;
	}
	return 1;
}

/* on_data handles one chunk of fd: the raw bytes of a syscall, or with
 * plaintext the decrypted bytes of a TLS call. A global function: the
 * verifier checks it once, not at each of its call sites (the syscall
 * program, the *mmsg loop, the TLS probes), which kept the program far
 * from the verifier's complexity limit. */
__noinline int on_data(__u32 fd, const struct bufs *b, __u64 size, __u8 dir, bool plaintext)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	__u64 key = ((__u64)tgid << 32) | fd;
	struct syscap_conn *c;
	struct sock *sk;
	__u64 cap, ts;
	__u8 st;

	if (!b || !galago_observed(tgid))
		return 0;
	c = lookup_conn(key, fd, b->file, &sk);
	if (!c || (b->udp_only && c->l4 != SYSCAP_L4_UDP))
		return 0;
	if (plaintext) {
		if (c->state == SYSCAP_INFER)
			c->state = SYSCAP_TLS; /* the handshake was before the probe */
		if (c->state != SYSCAP_TLS)
			return 0;
		st = c->pt_state;
	} else {
		st = c->state;
		if (st == SYSCAP_TRACE && size >= 5 && (c->proto == SYSCAP_P_PGSQL || c->proto == SYSCAP_P_MYSQL)) {
			/* STARTTLS (PostgreSQL SSLRequest, MySQL CLIENT_SSL): TLS
			 * after a plaintext start; the parser goes on with the
			 * plaintext of the same connection. */
			__u8 h[3] = {};
			const void *src = b->buf;

			if (b->iov) {
				struct iovec v;

				if (bpf_probe_read_user(&v, sizeof(v), b->iov))
					return 0;
				src = v.iov_base;
			}
			if (bpf_probe_read_user(h, sizeof(h), src) == 0 && tls_record(h, 3)) {
				c->state = SYSCAP_TLS;
				c->pt_state = SYSCAP_TRACE;
				return 0;
			}
		}
	}
	if (st == SYSCAP_IGNORE || st == SYSCAP_TLS)
		return 0;
	ts = b->ts ? b->ts : bpf_ktime_get_ns();
	if (st == SYSCAP_INFER && !stream_infer(tgid, fd, c, sk, b, size, dir, ts, plaintext))
		return 0;
	cap = c->dir == dir ? syscap_cont_cap : syscap_cap;
	c->dir = dir;
	if (whole(c)) {
		if (emit_whole(c, b, size, dir, ts))
			return 0;
		cap = SYSCAP_CAP_MAX;
	}
	if (cap > SYSCAP_CAP_MAX)
		cap = SYSCAP_CAP_MAX;
	emit_data(tgid, c, b, size, dir, cap, ts);
	return 0;
}

/* on_close runs at close()'s exit. Between the fd's release and here
 * another thread of the process may have got the same fd number for a
 * new socket and already made it a connection: the entry is then that
 * connection's (its file is the one the fd table holds now) and stays. */
static __always_inline void on_close(__u32 fd, __u64 ts)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 key = ((__u64)tgid << 32) | fd;
	struct syscap_conn *c = bpf_map_lookup_elem(&conns, &key);
	struct file *f;

	if (!c)
		return;
	f = fd_file(bpf_get_current_task_btf(), fd);
	if (f && c->file == (__u64)f)
		return;
	emit_close(tgid, c, ts);
	bpf_map_delete_elem(&conns, &key);
}

/* msghdr_bufs reads a user_msghdr's iovecs and name. */
static __always_inline bool msghdr_bufs(const struct user_msghdr *m, struct bufs *b)
{
	struct user_msghdr h;

	if (bpf_probe_read_user(&h, sizeof(h), m))
		return false;
	b->buf = NULL;
	b->iov = h.msg_iov;
	b->iovcnt = h.msg_iovlen;
	b->peer = h.msg_name;
	return b->iov != NULL;
}

static __always_inline void on_mmsg(__u32 fd, const struct mmsghdr *vec, __u32 count, __u8 dir)
{
	for (int i = 0; i < MAX_MMSG; i++) {
		struct bufs b = {};
		__u32 len;

		if (i >= count)
			break;
		if (bpf_probe_read_user(&len, sizeof(len), &vec[i].msg_len))
			break;
		if (!msghdr_bufs(&vec[i].msg_hdr, &b))
			break;
		if (len)
			on_data(fd, &b, len, dir, false);
	}
}

/* ---- TLS plaintext (OpenSSL uprobes) ----
 *
 * SSL_read/SSL_write (and the _ex variants) are probed at entry (the
 * buffer) and at return (the bytes moved). The socket under an SSL object
 * is found without reading OpenSSL's structures (their layout changes
 * between versions): the read or write syscall OpenSSL makes on it during
 * the call names the fd (sys_exit notes it in the call's ssl_calls entry),
 * and ssl_fds remembers it for calls served from OpenSSL's buffer without
 * a syscall. The plaintext then goes through on_data like raw bytes, on the
 * connection of that fd, whose raw bytes were found to be TLS records. */

struct ssl_call {
	__u64 ssl;     /* SSL * */
	__u64 buf;     /* user buffer */
	__u64 out_len; /* _ex: size_t * of the bytes moved; 0 otherwise */
	__u64 ts;      /* entry time: a write's data is timed from its call */
	__s32 fd;      /* fd of a syscall made during the call, -1 if none */
	__u8 dir;      /* enum syscap_dir */
	__u8 _pad[3];
};

/* ssl_call.dir of SSL_do_handshake: no data, only the socket. */
#define SSL_HANDSHAKE 0xff

struct ssl_key {
	__u32 tgid;
	__u32 _pad;
	__u64 ssl;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* pid_tgid: the thread in the call */
	__type(value, struct ssl_call);
} ssl_calls SEC(".maps");

/* The socket of an SSL object, and the file the fd named then: OpenSSL
 * gives a new connection's SSL object the address of a freed one, so an
 * entry is used only while the fd still names that file. */
struct ssl_fd {
	__s32 fd;
	__u32 _pad;
	__u64 file; /* struct file * */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct ssl_key);
	__type(value, struct ssl_fd);
} ssl_fds SEC(".maps");

/* ssl_lost[0], per CPU: TLS calls whose plaintext was lost: socket not
 * found, or ssl_calls / go_tls_calls full. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} ssl_lost SEC(".maps");

/* ssl_lost_inc counts a TLS call whose plaintext is lost: its socket
 * not found, or no room to follow the call (ssl_calls, go_tls_calls
 * full). */
static __always_inline void ssl_lost_inc(void)
{
	__u32 zero = 0;
	__u64 *lost = bpf_map_lookup_elem(&ssl_lost, &zero);

	if (lost)
		*lost += 1;
}

/* note_ssl_fd: a syscall on fd during a TLS call of this thread. */
static __always_inline void note_ssl_fd(__u32 fd)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct ssl_call *call = bpf_map_lookup_elem(&ssl_calls, &id);

	if (call && call->fd < 0)
		call->fd = fd;
}

/* ssl_socket returns the fd of the SSL object of k: the fd of a syscall
 * the call made (noted, with its file, for later calls), else the noted
 * one while it still names the same file; -1 when unknown. */
static __always_inline __s32 ssl_socket(const struct ssl_key *k, __s32 fd)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct ssl_fd *known, v = {};

	if (fd >= 0) {
		v.fd = fd;
		v.file = (__u64)fd_file(task, fd);
		bpf_map_update_elem(&ssl_fds, k, &v, BPF_ANY);
		return fd;
	}
	known = bpf_map_lookup_elem(&ssl_fds, k);
	if (!known)
		return -1;
	fd = known->fd;
	if (fd < 0 || known->file != (__u64)fd_file(task, fd)) {
		bpf_map_delete_elem(&ssl_fds, k); /* an SSL object freed and its address reused */
		return -1;
	}
	return fd;
}

static __always_inline int ssl_enter(void *ssl, const void *buf, void *out_len, __u8 dir)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct ssl_call call = {};

	if (!galago_observed(id >> 32))
		return 0;
	if (dir == SSL_HANDSHAKE && bpf_map_lookup_elem(&ssl_calls, &id))
		return 0; /* inside SSL_read/SSL_write: that call notes the fd */
	call.ssl = (__u64)ssl;
	call.buf = (__u64)buf;
	call.out_len = (__u64)out_len;
	call.fd = -1;
	call.dir = dir;
	if (dir == SYSCAP_EGRESS)
		call.ts = bpf_ktime_get_ns();
	/* A full ssl_calls loses the call's data: counted. (A handshake's
	 * loss shows later, as a data call whose socket is not known.) */
	if (bpf_map_update_elem(&ssl_calls, &id, &call, BPF_ANY) && dir != SSL_HANDSHAKE)
		ssl_lost_inc();
	return 0;
}

static __always_inline int ssl_exit(long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct ssl_call *call = bpf_map_lookup_elem(&ssl_calls, &id);
	struct ssl_key k = {};
	struct bufs b = {};
	__u64 n = 0;
	__s32 fd;

	if (!call)
		return 0;
	/* The functions return int: only the low 32 bits of the register
	 * are the value. */
	if (call->out_len) {
		size_t moved = 0;

		if ((int)ret == 1 && bpf_probe_read_user(&moved, sizeof(moved), (void *)call->out_len) == 0)
			n = moved;
	} else if ((int)ret > 0) {
		n = (int)ret;
	}
	k.tgid = id >> 32;
	k.ssl = call->ssl;
	fd = ssl_socket(&k, call->fd);
	if (n > 0 && call->dir != SSL_HANDSHAKE) {
		if (fd >= 0) {
			b.buf = (const void *)call->buf;
			b.ts = call->ts;
			on_data(fd, &b, n, call->dir, true);
		} else {
			ssl_lost_inc();
		}
	}
	bpf_map_delete_elem(&ssl_calls, &id);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(ssl_write_enter, void *ssl, const void *buf, int num)
{
	return ssl_enter(ssl, buf, NULL, SYSCAP_EGRESS);
}

SEC("uprobe")
int BPF_KPROBE(ssl_read_enter, void *ssl, void *buf, int num)
{
	return ssl_enter(ssl, buf, NULL, SYSCAP_INGRESS);
}

SEC("uprobe")
int BPF_KPROBE(ssl_write_ex_enter, void *ssl, const void *buf, size_t num, size_t *written)
{
	return ssl_enter(ssl, buf, written, SYSCAP_EGRESS);
}

SEC("uprobe")
int BPF_KPROBE(ssl_read_ex_enter, void *ssl, void *buf, size_t num, size_t *readbytes)
{
	return ssl_enter(ssl, buf, readbytes, SYSCAP_INGRESS);
}

/* SSL_do_handshake (SSL_accept and SSL_connect call it): its syscalls
 * name the socket of a new SSL object before its first SSL_read, which
 * OpenSSL may answer from data it already holds, without a syscall. */
SEC("uprobe")
int BPF_KPROBE(ssl_handshake_enter, void *ssl)
{
	return ssl_enter(ssl, NULL, NULL, SSL_HANDSHAKE);
}

SEC("uretprobe")
int BPF_KRETPROBE(ssl_return, long ret)
{
	return ssl_exit(ret);
}

SEC("uretprobe")
int BPF_KRETPROBE(ssl_handshake_return, long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct ssl_call *call = bpf_map_lookup_elem(&ssl_calls, &id);

	if (!call || call->dir != SSL_HANDSHAKE)
		return 0; /* a nested handshake: its SSL_read/SSL_write returns later */
	return ssl_exit(ret);
}

/* ---- TLS plaintext (Go crypto/tls uprobes) ----
 *
 * crypto/tls.(*Conn).Write and Read are probed at entry and at each of
 * their RET instructions (uretprobes would corrupt Go's stacks). Go's
 * register ABI (1.17+) passes the receiver and the slice in the first
 * registers and returns n in the first; a call is keyed by its goroutine
 * (the g register), which stays the same across a blocking Read that
 * resumes on another thread. The fd comes from the tls.Conn: its conn
 * field is a net.Conn interface whose data word points at a *net.TCPConn,
 * whose netFD's poll.FD holds Sysfd after the 16-byte fdMutex (layouts
 * stable since Go 1.9). A conn that is not a TCPConn gives no socket fd
 * and is counted in ssl_lost. */

#if defined(__TARGET_ARCH_x86)
#define GO_ARG0(r) ((r)->ax)
#define GO_ARG1(r) ((r)->bx)
#define GO_ARG2(r) ((r)->cx)
#define GO_G(r) ((r)->r14)
#define GO_RET0(r) ((r)->ax)
#elif defined(__TARGET_ARCH_arm64)
#define GO_ARG0(r) ((r)->regs[0])
#define GO_ARG1(r) ((r)->regs[1])
#define GO_ARG2(r) ((r)->regs[2])
#define GO_G(r) ((r)->regs[28])
#define GO_RET0(r) ((r)->regs[0])
#endif

/* Field offsets of the Go runtime structures read above. */
const volatile __u64 go_tls_conn_data_off = 8; /* tls.Conn.conn's data word */
const volatile __u64 go_tcpconn_fd_off = 0;    /* net.TCPConn -> *netFD */
const volatile __u64 go_netfd_sysfd_off = 16;  /* netFD.pfd.Sysfd */

struct go_tls_key {
	__u32 tgid;
	__u32 _pad;
	__u64 g;
};

struct go_tls_call {
	__u64 buf;
	__s64 fd; /* the socket, read at entry: a Close on another goroutine
		   * may reset the netFD's Sysfd to -1 before the Read returns */
	__u8 dir;
	__u8 _pad[7];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct go_tls_key);
	__type(value, struct go_tls_call);
} go_tls_calls SEC(".maps");

/* GO_FD_CLOSED: go_conn_fd of a closed conn (poll.FD's Sysfd is -1 once
 * destroyed). */
#define GO_FD_CLOSED (-2)

/* go_conn_fd: the socket fd of the tls.Conn conn; GO_FD_CLOSED for a
 * closed one, -1 when it cannot be read (not a TCPConn). */
static __always_inline __s64 go_conn_fd(__u64 conn)
{
	__u64 data = 0, netfd = 0;
	__s64 fd = -1;

	if (bpf_probe_read_user(&data, sizeof(data), (void *)(conn + go_tls_conn_data_off)) || !data)
		return -1;
	if (bpf_probe_read_user(&netfd, sizeof(netfd), (void *)(data + go_tcpconn_fd_off)) || !netfd)
		return -1;
	if (bpf_probe_read_user(&fd, sizeof(fd), (void *)(netfd + go_netfd_sysfd_off)))
		return -1;
	return fd == -1 ? GO_FD_CLOSED : fd;
}

/* go_tls_data sends n bytes of buf moved by a call on the socket fd (of
 * the call's tls.Conn, go_conn_fd). */
static __always_inline void go_tls_data(__s64 fd, __u64 buf, __s64 n, __u8 dir)
{
	struct bufs b = {};

	if (fd < 0 || fd >= (1 << 30)) {
		ssl_lost_inc();
		return;
	}
	b.buf = (const void *)buf;
	on_data(fd, &b, n, dir, true);
}

/* go_tls_enter: a Write's plaintext is sent at entry, in the order the
 * program wrote it (net/http's client writes and reads on different
 * goroutines: a response may be read before the Write of its request
 * returns); a Read's is sent at return, when its bytes are there, on the
 * socket read at entry (by then a Close racing the Read may have reset
 * the netFD's Sysfd: the data was read all the same). */
static __always_inline int go_tls_enter(struct pt_regs *ctx, __u8 dir)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct go_tls_key k = {};
	struct go_tls_call call = {};
	__s64 n;

	if (!galago_observed(tgid))
		return 0;
	if (dir == SYSCAP_EGRESS) {
		__s64 fd = go_conn_fd(GO_ARG0(ctx));

		/* A Write on a closed conn fails without sending: no loss. (A
		 * Read on one may still return plaintext tls.Conn had
		 * decrypted: counted lost at return.) */
		n = (__s64)GO_ARG2(ctx);
		if (n > 0 && fd != GO_FD_CLOSED)
			go_tls_data(fd, GO_ARG1(ctx), n, dir);
		return 0;
	}
	k.tgid = tgid;
	k.g = GO_G(ctx);
	call.fd = go_conn_fd(GO_ARG0(ctx));
	call.buf = GO_ARG1(ctx);
	call.dir = dir;
	/* A full go_tls_calls: the Read's data cannot be followed to its
	 * return, counted lost. */
	if (bpf_map_update_elem(&go_tls_calls, &k, &call, BPF_ANY))
		ssl_lost_inc();
	return 0;
}

SEC("uprobe")
int go_tls_write_enter(struct pt_regs *ctx)
{
	return go_tls_enter(ctx, SYSCAP_EGRESS);
}

SEC("uprobe")
int go_tls_read_enter(struct pt_regs *ctx)
{
	return go_tls_enter(ctx, SYSCAP_INGRESS);
}

SEC("uprobe")
int go_tls_return(struct pt_regs *ctx)
{
	struct go_tls_key k = {};
	struct go_tls_call *call;
	__s64 n;

	k.tgid = bpf_get_current_pid_tgid() >> 32;
	k.g = GO_G(ctx);
	call = bpf_map_lookup_elem(&go_tls_calls, &k);
	if (!call)
		return 0;
	n = (__s64)GO_RET0(ctx);
	if (n > 0)
		go_tls_data(call->fd, call->buf, n, call->dir);
	bpf_map_delete_elem(&go_tls_calls, &k);
	return 0;
}

/* note_if_ssl notes fd for a TLS call in progress on this thread, when
 * the TLS uprobes are attached. */
static __always_inline void note_if_ssl(__u32 fd)
{
	if (syscap_ssl)
		note_ssl_fd(fd);
}

/* The programs on sys_enter/sys_exit come in two attachments with one
 * body each: tp_btf on the raw tracepoint (every syscall of every process
 * runs it) and a tracepoint program attached to syscalls:sys_{enter,exit}_
 * <name> for each syscall the body handles (syscap.go: per-syscall mode,
 * so the others run no program at all). The per-syscall event's record has
 * the number and the arguments or return value; the bodies read the
 * arguments from the saved user registers either way (intact at exit). */
#define SYSCAP_TP_REGS() ((struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf()))

static __always_inline int syscap_exit(struct pt_regs *regs, long ret)
{
	struct bufs b = {};
	__u32 fd;

	if (syscap_sock_hooks) {
		/* The sock hooks took the chunk (and noted a TLS call's fd),
		 * but a datagram's source address, which the kernel copies to
		 * the caller only after the hook. */
		switch (SC_NR(regs)) {
		case NR_read:
		case NR_write:
		case NR_readv:
		case NR_writev:
		case NR_sendto:
		case NR_sendmsg:
			return 0;
		case NR_recvfrom:
		case NR_recvmsg: {
			__u64 key = (bpf_get_current_pid_tgid() & ~0xffffffffULL) | (__u32)SC_ARG0(regs);
			struct syscap_conn *c;

			if (ret <= 0)
				return 0;
			/* A known TCP connection costs one lookup here. */
			c = bpf_map_lookup_elem(&conns, &key);
			if (c && c->l4 == SYSCAP_L4_TCP)
				return 0;
			b.udp_only = 1;
			goto data;
		}
		}
	}
	switch (SC_NR(regs)) {
	case NR_read:
	case NR_write:
	case NR_recvfrom:
	case NR_sendto:
	case NR_readv:
	case NR_writev:
	case NR_recvmsg:
	case NR_sendmsg:
		note_if_ssl(SC_ARG0(regs));
		break;
	}
data:
	switch (SC_NR(regs)) {
	case NR_read:
	case NR_write:
	case NR_recvfrom:
	case NR_sendto:
		if (ret <= 0)
			return 0;
		fd = SC_ARG0(regs);
		b.buf = (const void *)SC_ARG1(regs);
		if (SC_NR(regs) == NR_recvfrom || SC_NR(regs) == NR_sendto) {
			/* The address argument is the fifth: read it from the regs. */
#if defined(__TARGET_ARCH_x86)
			b.peer = (const struct sockaddr *)regs->r8;
#else
			b.peer = (const struct sockaddr *)regs->regs[4];
#endif
		}
		on_data(fd, &b, ret, SC_NR(regs) == NR_read || SC_NR(regs) == NR_recvfrom ? SYSCAP_INGRESS : SYSCAP_EGRESS,
			false);
		return 0;
	case NR_readv:
	case NR_writev:
		if (ret <= 0)
			return 0;
		fd = SC_ARG0(regs);
		b.iov = (const struct iovec *)SC_ARG1(regs);
		b.iovcnt = SC_ARG2(regs);
		on_data(fd, &b, ret, SC_NR(regs) == NR_readv ? SYSCAP_INGRESS : SYSCAP_EGRESS, false);
		return 0;
	case NR_recvmsg:
	case NR_sendmsg:
		if (ret <= 0)
			return 0;
		fd = SC_ARG0(regs);
		if (!msghdr_bufs((const struct user_msghdr *)SC_ARG1(regs), &b))
			return 0;
		on_data(fd, &b, ret, SC_NR(regs) == NR_recvmsg ? SYSCAP_INGRESS : SYSCAP_EGRESS, false);
		return 0;
	case NR_recvmmsg:
	case NR_sendmmsg:
		if (ret <= 0)
			return 0;
		on_mmsg(SC_ARG0(regs), (const struct mmsghdr *)SC_ARG1(regs), ret,
			SC_NR(regs) == NR_recvmmsg ? SYSCAP_INGRESS : SYSCAP_EGRESS);
		return 0;
	case NR_close:
		if (ret != 0)
			return 0;
		on_close(SC_ARG0(regs), bpf_ktime_get_ns());
		return 0;
	}
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(syscap_sys_exit, struct pt_regs *regs, long ret)
{
	return syscap_exit(regs, ret);
}

#define PF_IO_WORKER 0x00000010
#define PF_KTHREAD 0x00200000

/* ---- The sock hooks: data syscalls from inside sock_sendmsg/sock_recvmsg ----
 * tp_btf/sock_send_length and sock_recv_length fire in every send and
 * receive of a socket, with the socket; the syscall's arguments are in the
 * saved user registers as at its exit. Their BPF dispatch costs ~40 ns
 * where a syscalls:sys_exit_* program's costs ~160 ns here (the event's
 * record is built first; BenchmarkCaptureCharged), and the socket's file comes with the hook, so a
 * known connection needs no fd table walk. Taken: read, write, readv,
 * writev, sendto, sendmsg, and recvfrom/recvmsg of TCP sockets; left to
 * sys_exit: a datagram's recvfrom/recvmsg (its source address reaches the
 * caller after the hook) and the *mmsg calls (the hook does not say which
 * message it is). Kernel threads and io_uring workers (their registers
 * hold no syscall) and other syscalls (sendfile, splice, io_uring_enter)
 * are skipped, as sys_exit skips them. */
static __always_inline int sock_data(struct sock *sk, int ret, __u8 dir)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs;
	struct socket *so;
	struct bufs b = {};
	__u32 fd;
	long nr;

	if (task->flags & (PF_KTHREAD | PF_IO_WORKER))
		return 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	nr = SC_NR(regs);
	switch (nr) {
	case NR_read:
	case NR_recvfrom:
	case NR_readv:
	case NR_recvmsg:
		if (dir != SYSCAP_INGRESS)
			return 0;
		break;
	case NR_write:
	case NR_sendto:
	case NR_writev:
	case NR_sendmsg:
		if (dir != SYSCAP_EGRESS)
			return 0;
		break;
	default:
		return 0;
	}
	fd = SC_ARG0(regs);
	note_if_ssl(fd);
	if (ret <= 0 || !sk)
		return 0;
	if ((nr == NR_recvfrom || nr == NR_recvmsg) && sk->sk_protocol != IPPROTO_TCP)
		return 0; /* sys_exit takes it, with the source address */
	so = sk->sk_socket;
	if (!so)
		return 0;
	b.file = (__u64)so->file;
	if (!b.file)
		return 0;
	switch (nr) {
	case NR_read:
	case NR_write:
	case NR_recvfrom:
		b.buf = (const void *)SC_ARG1(regs);
		break;
	case NR_sendto:
		b.buf = (const void *)SC_ARG1(regs);
#if defined(__TARGET_ARCH_x86)
		b.peer = (const struct sockaddr *)regs->r8;
#else
		b.peer = (const struct sockaddr *)regs->regs[4];
#endif
		break;
	case NR_readv:
	case NR_writev:
		b.iov = (const struct iovec *)SC_ARG1(regs);
		b.iovcnt = SC_ARG2(regs);
		break;
	default: /* recvmsg, sendmsg */
		if (!msghdr_bufs((const struct user_msghdr *)SC_ARG1(regs), &b))
			return 0;
		break;
	}
	on_data(fd, &b, ret, dir, false);
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(syscap_sock_send, struct sock *sk, int ret, int flags)
{
	return sock_data(sk, ret, SYSCAP_EGRESS);
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(syscap_sock_recv, struct sock *sk, int ret, int flags)
{
	return sock_data(sk, ret, SYSCAP_INGRESS);
}

SEC("tracepoint")
int syscap_sc_exit(struct trace_event_raw_sys_exit *ctx)
{
	return syscap_exit(SYSCAP_TP_REGS(), ctx->ret);
}

/* ---- Per-process syscall statistics (the proc probe) ----------------------
 *
 * A second use of the same capture object: the proc probe loads this
 * object with only the two programs below and the snooper filter (see
 * stats.go), so the l7 probe's sys_exit program above, which it never
 * attaches, costs nothing here, and these cost l7 nothing.
 *
 * Hooks: tp_btf/sys_enter (timed classes only: a switch on the number,
 *   then the filter, then the entry time in the thread's task storage),
 *   tp_btf/sys_exit (every syscall of an observed process that failed
 *   counts in its SYSCAP_SC_ALL row; a timed class adds its latency: only
 *   those look their thread's task storage up).
 * Aggregation in the kernel per (tgid, class) in sc_stats: calls, failures,
 *   latency sum and max. User space reads and deletes rows each period, so
 *   no record per syscall leaves the kernel.
 * Limits: a full sc_stats drops the call, counted in sc_lost. Task storage
 *   is freed with the thread, so a thread that dies inside a timed call
 *   leaves nothing behind. A call entered before the programs attached is
 *   not timed (no entry time). */
enum syscap_sc_class {
	SYSCAP_SC_ALL = 0, /* every syscall: failures only */
	SYSCAP_SC_READ = 1,
	SYSCAP_SC_WRITE = 2,
	SYSCAP_SC_MOUNT = 3,
	SYSCAP_SC_UMOUNT = 4, /* umount2 */
	SYSCAP_SC_FSYNC = 5,
	SYSCAP_SC_SENDMSG = 6,
	SYSCAP_SC_RECVMSG = 7,
	SYSCAP_SC_SCHED_YIELD = 8,
	SYSCAP_SC_FUTEX = 9,
	SYSCAP_SC_EPOLL_WAIT = 10,
	SYSCAP_SC_EPOLL_PWAIT = 11, /* epoll_pwait and epoll_pwait2 */
	SYSCAP_SC_FORK = 12,
	SYSCAP_SC_VFORK = 13,
	SYSCAP_SC_CLONE = 14, /* clone and clone3 */
	/* Timed for the file-system rows below only (no table of their own). */
	SYSCAP_SC_PREAD = 15,     /* pread64, readv, preadv, preadv2 */
	SYSCAP_SC_PWRITE = 16,    /* pwrite64, writev, pwritev, pwritev2 */
	SYSCAP_SC_OPEN = 17,      /* open, openat, openat2, creat */
	SYSCAP_SC_FDATASYNC = 18, /* fdatasync */
	/* Per file system of the call's file (the fd's, or the returned one
	 * for an open): SYSCAP_SC_FS + fs * 4 + op, fs 0 ext4 (and ext2/3,
	 * same magic), 1 overlay, 2 tmpfs; op 0 read, 1 write, 2 open,
	 * 3 flush (fsync, fdatasync). */
	SYSCAP_SC_FS = 19,
	SYSCAP_SC_IOCTL = 31, /* ioctl: the longest call's fd and cmd in sc_ioctl */
	SYSCAP_SC_MAX = 32,
};

struct syscap_sc_key {
	__u32 tgid;
	__u32 class; /* enum syscap_sc_class */
};

struct syscap_sc_val {
	__u64 calls;  /* completed calls (timed classes; 0 for SYSCAP_SC_ALL) */
	__u64 failed; /* calls that returned an error (-4095..-1) */
	__u64 ns_sum; /* latency, entry to exit */
	__u64 ns_max;
};

/* The longest ioctl of a process since the last read, and what it was. */
struct syscap_sc_ioctl {
	__u64 ns;
	__u32 fd;
	__u32 cmd;
};

GALAGO_EXPORT_TYPE(struct syscap_sc_ioctl, sc_ioctl_val);
GALAGO_EXPORT_TYPE(struct syscap_sc_key, sc_key);
GALAGO_EXPORT_TYPE(struct syscap_sc_val, sc_val);
GALAGO_EXPORT_TYPE(enum syscap_sc_class, sc_class);

#if defined(__TARGET_ARCH_x86)
#define NR_mount 165
#define NR_umount2 166
#define NR_fsync 74
#define NR_sched_yield 24
#define NR_futex 202
#define NR_epoll_wait 232
#define NR_epoll_pwait 281
#define NR_fork 57
#define NR_vfork 58
#define NR_clone 56
#else /* arm64: no epoll_wait, fork or vfork syscalls */
#define NR_mount 40
#define NR_umount2 39
#define NR_fsync 82
#define NR_sched_yield 124
#define NR_futex 98
#define NR_epoll_pwait 22
#define NR_clone 220
#endif
#define NR_clone3 435
#define NR_epoll_pwait2 441
#define NR_openat2 437
#if defined(__TARGET_ARCH_x86)
#define NR_ioctl 16
#else
#define NR_ioctl 29
#endif
#if defined(__TARGET_ARCH_x86)
#define NR_pread64 17
#define NR_pwrite64 18
#define NR_preadv 295
#define NR_pwritev 296
#define NR_preadv2 327
#define NR_pwritev2 328
#define NR_open 2
#define NR_creat 85
#define NR_openat 257
#define NR_fdatasync 75
#else
#define NR_pread64 67
#define NR_pwrite64 68
#define NR_preadv 69
#define NR_pwritev 70
#define NR_preadv2 286
#define NR_pwritev2 287
#define NR_openat 56
#define NR_fdatasync 83
#endif
#define EXT4_SUPER_MAGIC 0xEF53
#define OVERLAYFS_SUPER_MAGIC 0x794c7630
#define TMPFS_MAGIC 0x01021994

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* no memory in objects that never attach the programs (l7) */
	__uint(max_entries, 16384);
	__type(key, struct syscap_sc_key);
	__type(value, struct syscap_sc_val);
} sc_stats SEC(".maps");

/* sc_lost[0], per CPU: calls not counted because sc_stats was full. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sc_lost SEC(".maps");

struct sc_start {
	__u64 ts;
	__u32 class;
	__u32 fd;  /* ioctl */
	__u32 cmd; /* ioctl */
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, __u32); /* tgid */
	__type(value, struct syscap_sc_ioctl);
} sc_ioctl SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sc_start);
} sc_starts SEC(".maps");

/* sc_classes: bit (1 << class) enables a timed class; bit 0
 * (SYSCAP_SC_ALL) the failure count. Run-time: the proc probe's sub-items. */
volatile __u32 sc_classes = 0;
/* sc_fs: the per-file-system rows are on (proc_fs). */
volatile __u32 sc_fs = 0;

static __always_inline __u32 sc_class(long nr)
{
	switch (nr) {
	case NR_read:
		return SYSCAP_SC_READ;
	case NR_write:
		return SYSCAP_SC_WRITE;
	case NR_mount:
		return SYSCAP_SC_MOUNT;
	case NR_umount2:
		return SYSCAP_SC_UMOUNT;
	case NR_fsync:
		return SYSCAP_SC_FSYNC;
	case NR_sendmsg:
		return SYSCAP_SC_SENDMSG;
	case NR_recvmsg:
		return SYSCAP_SC_RECVMSG;
	case NR_sched_yield:
		return SYSCAP_SC_SCHED_YIELD;
	case NR_futex:
		return SYSCAP_SC_FUTEX;
#ifdef NR_epoll_wait
	case NR_epoll_wait:
		return SYSCAP_SC_EPOLL_WAIT;
#endif
	case NR_epoll_pwait:
	case NR_epoll_pwait2:
		return SYSCAP_SC_EPOLL_PWAIT;
#ifdef NR_fork
	case NR_fork:
		return SYSCAP_SC_FORK;
	case NR_vfork:
		return SYSCAP_SC_VFORK;
#endif
	case NR_clone:
	case NR_clone3:
		return SYSCAP_SC_CLONE;
	case NR_pread64:
	case NR_readv:
	case NR_preadv:
	case NR_preadv2:
		return SYSCAP_SC_PREAD;
	case NR_pwrite64:
	case NR_writev:
	case NR_pwritev:
	case NR_pwritev2:
		return SYSCAP_SC_PWRITE;
#ifdef NR_open
	case NR_open:
	case NR_creat:
#endif
	case NR_openat:
	case NR_openat2:
		return SYSCAP_SC_OPEN;
	case NR_fdatasync:
		return SYSCAP_SC_FDATASYNC;
	case NR_ioctl:
		return SYSCAP_SC_IOCTL;
	}
	return SYSCAP_SC_ALL;
}

static __always_inline struct syscap_sc_val *sc_row(__u32 tgid, __u32 class)
{
	struct syscap_sc_key k = {.tgid = tgid, .class = class};
	struct syscap_sc_val zero = {}, *v;

	v = bpf_map_lookup_elem(&sc_stats, &k);
	if (v)
		return v;
	if (bpf_map_update_elem(&sc_stats, &k, &zero, BPF_NOEXIST) && bpf_map_lookup_elem(&sc_stats, &k) == NULL) {
		__u32 z = 0;
		__u64 *lost = bpf_map_lookup_elem(&sc_lost, &z);

		if (lost)
			*lost += 1;
		return NULL;
	}
	return bpf_map_lookup_elem(&sc_stats, &k);
}

/* sc_fs_op: the file-system operation of a timed class, -1 for none. */
static __always_inline int sc_fs_op(__u32 class)
{
	switch (class) {
	case SYSCAP_SC_READ:
	case SYSCAP_SC_PREAD:
		return 0;
	case SYSCAP_SC_WRITE:
	case SYSCAP_SC_PWRITE:
		return 1;
	case SYSCAP_SC_OPEN:
		return 2;
	case SYSCAP_SC_FSYNC:
	case SYSCAP_SC_FDATASYNC:
		return 3;
	}
	return -1;
}

/* sc_fs_class: the per-file-system class of operation op on fd, 0 when
 * the fd's file is not on ext4, overlay or tmpfs. */
static __always_inline __u32 sc_fs_class(int op, long fd)
{
	struct file *f;
	struct inode *ino;
	unsigned long magic;
	__u32 fs;

	if (fd < 0)
		return 0;
	f = fd_file(bpf_get_current_task_btf(), fd);
	if (!f)
		return 0;
	ino = BPF_CORE_READ(f, f_inode);
	/* Regular files only: a device node or a pipe on devtmpfs or tmpfs
	 * is not a tmpfs file operation. */
	if ((BPF_CORE_READ(ino, i_mode) & S_IFMT) != S_IFREG)
		return 0;
	magic = BPF_CORE_READ(ino, i_sb, s_magic);
	switch (magic) {
	case EXT4_SUPER_MAGIC:
		fs = 0;
		break;
	case OVERLAYFS_SUPER_MAGIC:
		fs = 1;
		break;
	case TMPFS_MAGIC:
		fs = 2;
		break;
	default:
		return 0;
	}
	return SYSCAP_SC_FS + fs * 4 + op;
}

/* sc_add adds one call of d ns to row (tgid, class). */
static __always_inline void sc_add(__u32 tgid, __u32 class, __u64 d, bool failed)
{
	struct syscap_sc_val *v = sc_row(tgid, class);

	if (!v)
		return;
	__sync_fetch_and_add(&v->calls, 1);
	__sync_fetch_and_add(&v->ns_sum, d);
	if (failed)
		__sync_fetch_and_add(&v->failed, 1);
	galago_max_u64(&v->ns_max, d);
}

/* sc_note_ioctl keeps the fd and cmd of the process's longest ioctl. Two
 * threads finishing long ioctls at once may pair one's time with the
 * other's fd and cmd (no lock): both were long. */
static __always_inline void sc_note_ioctl(__u32 tgid, const struct sc_start *s, __u64 d)
{
	struct syscap_sc_ioctl *v = bpf_map_lookup_elem(&sc_ioctl, &tgid);
	struct syscap_sc_ioctl n = {.ns = d, .fd = s->fd, .cmd = s->cmd};

	if (!v) {
		if (bpf_map_update_elem(&sc_ioctl, &tgid, &n, BPF_NOEXIST) == 0)
			return;
		v = bpf_map_lookup_elem(&sc_ioctl, &tgid);
		if (!v)
			return; /* full: the call itself is counted in sc_stats */
	}
	if (d > v->ns)
		*v = n;
}

static __always_inline int stat_enter(struct pt_regs *regs, long id)
{
	__u32 class = sc_class(id);
	struct sc_start *s;

	if (class == SYSCAP_SC_ALL || !((sc_classes & (1U << class)) || (sc_fs && sc_fs_op(class) >= 0)) ||
	    !galago_observed(bpf_get_current_pid_tgid() >> 32))
		return 0;
	s = bpf_task_storage_get(&sc_starts, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!s)
		return 0;
	s->class = class;
	if (class == SYSCAP_SC_IOCTL) {
		s->fd = SC_ARG0(regs);
		s->cmd = SC_ARG1(regs);
	}
	s->ts = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(syscap_stat_enter, struct pt_regs *regs, long id)
{
	return stat_enter(regs, id);
}

SEC("tracepoint")
int syscap_stat_sc_enter(struct trace_event_raw_sys_enter *ctx)
{
	struct pt_regs *regs = SYSCAP_TP_REGS();

	return stat_enter(regs, SC_NR(regs));
}

static __always_inline int stat_exit(struct pt_regs *regs, long ret)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct syscap_sc_val *v;
	struct sc_start *s = NULL;
	bool failed = ret < 0 && ret >= -4095 && (sc_classes & 1);
	__u64 ts, d;
	__u32 class = sc_class(SC_NR(regs));

	/* Only a call of a class being timed can have an entry time: every
	 * other syscall costs a switch and the failure check. */
	if (class != SYSCAP_SC_ALL && ((sc_classes & (1U << class)) || (sc_fs && sc_fs_op(class) >= 0)))
		s = bpf_task_storage_get(&sc_starts, bpf_get_current_task_btf(), 0, 0);
	if (s && s->ts) {
		/* Entered observed: counted even if the snoopers changed since. */
		ts = bpf_ktime_get_ns();
		d = ts > s->ts ? ts - s->ts : 0;
		s->ts = 0;
		if (class != s->class || class >= SYSCAP_SC_MAX || (class >= SYSCAP_SC_FS && class != SYSCAP_SC_IOCTL))
			goto fail; /* not the call that stored it (a thread that exec'ed) */
		if (sc_classes & (1U << class))
			sc_add(tgid, class, d, failed);
		if (class == SYSCAP_SC_IOCTL && (sc_classes & (1U << class)))
			sc_note_ioctl(tgid, s, d);
		if (sc_fs) {
			int op = sc_fs_op(class);
			__u32 fsc;

			if (op >= 0) {
				fsc = sc_fs_class(op, op == 2 ? ret : (long)(int)SC_ARG0(regs));
				if (fsc)
					sc_add(tgid, fsc, d, failed);
			}
		}
	} else if (failed && !galago_observed(tgid)) {
		return 0;
	}
fail:
	if (!failed)
		return 0;
	v = sc_row(tgid, SYSCAP_SC_ALL);
	if (v)
		__sync_fetch_and_add(&v->failed, 1);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(syscap_stat_exit, struct pt_regs *regs, long ret)
{
	return stat_exit(regs, ret);
}

SEC("tracepoint")
int syscap_stat_sc_exit(struct trace_event_raw_sys_exit *ctx)
{
	return stat_exit(SYSCAP_TP_REGS(), ctx->ret);
}

#include "tprof.bpf.h"
