/* tprof.bpf.h: the tprofiling section of the capture object (included at
 * the end of syscap.bpf.c, after the per-process statistics).
 *
 * A third use of the same object: the tprofiling probe loads it with only
 * the programs below and the snooper filter (tprof.go), so neither the l7
 * capture nor the proc statistics pay for them at run time, and this
 * section pays nothing for theirs.
 *
 * Hooks:
 *   tp_btf/sys_enter   the syscalls of the timed classes (enum
 *                      syscap_tprof_type: file, net, sched, lock) of an
 *                      observed process: entry time, call and arguments
 *                      in the thread's tprof_threads row.
 *   tp_btf/sys_exit    the matching exit: one record of the call's
 *                      duration when it lasted min_exec_dur or more.
 *   tp_btf/sched_switch  on-CPU (switch-in to switch-out) and off-CPU
 *                      (switch-out to switch-in) slices of observed
 *                      threads, one record each above the same minimum.
 *   tp_btf/sched_process_exit  forgets the thread's rows.
 * read/write/readv/writev/preadv/pwritev/fsync/fdatasync on a socket are
 * net events (with the connection's addresses), on other files file events
 * (with the file's inode; the path is read in user space); the fd is
 * looked at in sys_exit, for the calls long enough to be sent only, so an
 * in-flight call in tprof_threads still says file.
 * Maps: tprof_threads (hash, tid -> in-flight call and on/off-CPU since),
 *   which user space also reads for the calls still blocked (a deadlock
 *   never reaches sys_exit); tprof_events (ring buffer); tprof_stacks
 *   (stack trace map: the user stack of a call, taken when it blocks
 *   (sched_switch, attached for that while any type is on) or else at
 *   the exit of one long enough to be sent, and of each off-CPU slice,
 *   taken at switch-out; frame-pointer walks as flamegraph's);
 *   tprof_uthreads (hash, tid -> pthread call and collection in flight);
 *   tprof_lost (threads
 *   not tracked because tprof_threads was full); tprof_stack_lost (stacks
 *   not recorded).
 *   uprobe.multi/uretprobe.multi  pthread_sync: the C library's lock
 *                      and wait functions (tprof.go attaches them per
 *                      observed process, one link per direction, the
 *                      cookie naming the function): entry
 *                      time and the lock's address in tprof_uthreads, one
 *                      record at the return of a call that lasted
 *                      min_exec_dur, with the caller's user stack.
 *   uprobe (USDT)      python_gc: CPython's python:gc__start and
 *                      python:gc__done notes (the cookie packs the
 *                      argument's location, internal/uprobes.ArgCookie):
 *                      one record per collection with its generation and
 *                      the objects collected.
 *   uprobe.multi/uretprobe.multi  mem_glibc: malloc, calloc, realloc
 *                      (size at entry, one record at return with the
 *                      block's address and the caller's user stack) and
 *                      free (one record of the block, no stack).
 *   perf_event         oncpu_sample: a cpu-clock sample (internal/bpfrt
 *                      CPUClock, on every CPU) of an observed thread: one
 *                      record with its user stack and the CPU.
 * Limits: a thread on a CPU when the programs attach has its first
 *   on-CPU slice unreported (its start was not seen); 32-bit (ia32)
 *   syscalls are not told apart. */

enum syscap_tprof_type {
	SYSCAP_TP_ONCPU = 0,
	SYSCAP_TP_OFFCPU = 1,
	SYSCAP_TP_FILE = 2,
	SYSCAP_TP_NET = 3,
	SYSCAP_TP_SCHED = 4,
	SYSCAP_TP_LOCK = 5,
	SYSCAP_TP_PTHREAD = 6, /* pthread_sync: call is the function (tprof.go's pthreadFuncs) */
	SYSCAP_TP_PYGC = 7,    /* python_gc: arg the generation, ret what it collected */
	SYSCAP_TP_SAMPLE = 8,  /* oncpu_sample: arg the CPU, dur 0 */
	SYSCAP_TP_MEMGLIBC = 9, /* mem_glibc: call the function (tprof.go's memFuncs), arg the size,
				 * ret the block's address, ino the block realloc freed; dur 0 */
	SYSCAP_TP_MAX = 10,
};

/* The calls traced, independent of the architecture's numbers. */
enum syscap_tprof_call {
	SYSCAP_TPC_NONE = 0,
	SYSCAP_TPC_READ,
	SYSCAP_TPC_WRITE,
	SYSCAP_TPC_READV,
	SYSCAP_TPC_WRITEV,
	SYSCAP_TPC_PREADV,
	SYSCAP_TPC_PWRITEV,
	SYSCAP_TPC_SYNC,
	SYSCAP_TPC_FSYNC,
	SYSCAP_TPC_FDATASYNC,
	SYSCAP_TPC_SCHED_YIELD,
	SYSCAP_TPC_NANOSLEEP,
	SYSCAP_TPC_CLOCK_NANOSLEEP,
	SYSCAP_TPC_WAIT4,
	SYSCAP_TPC_SELECT,
	SYSCAP_TPC_PSELECT6,
	SYSCAP_TPC_POLL,
	SYSCAP_TPC_PPOLL,
	SYSCAP_TPC_EPOLL_WAIT,
	SYSCAP_TPC_EPOLL_PWAIT,
	SYSCAP_TPC_EPOLL_PWAIT2,
	SYSCAP_TPC_SENDTO,
	SYSCAP_TPC_RECVFROM,
	SYSCAP_TPC_SENDMSG,
	SYSCAP_TPC_RECVMSG,
	SYSCAP_TPC_SENDMMSG,
	SYSCAP_TPC_RECVMMSG,
	SYSCAP_TPC_FUTEX,
	SYSCAP_TPC_MAX,
};

/* One event: a syscall, an on-CPU or an off-CPU slice of one thread. */
struct syscap_tprof_rec {
	__u64 start; /* ns, CLOCK_MONOTONIC (bpf_ktime_get_ns) */
	__u64 dur;   /* ns */
	__u64 arg;   /* file/net: the fd; lock: futex's op argument;
		      * pthread: the lock's address; pygc: the generation */
	__u64 ino;   /* file: the inode number of the fd's file */
	__s64 ret;   /* the syscall's (function's) return value; pygc: objects collected */
	__u32 pid;   /* thread id */
	__u32 tgid;
	__u8 type;   /* enum syscap_tprof_type */
	__u8 call;   /* enum syscap_tprof_call */
	__u16 family; /* net: AF_INET/AF_INET6 (0: not an inet socket) */
	__u16 sport;  /* net: local port, host order */
	__u16 dport;  /* net: remote port, host order */
	__u8 saddr[16];
	__u8 daddr[16];
	char comm[16]; /* the thread's name */
	__s32 user_stack; /* id in tprof_stacks; negative: none (oncpu) or not recorded */
	__u32 _pad;
};

/* A thread's state: its in-flight call and since when it is on or off the
 * CPU (0: not known). */
struct syscap_tprof_thread {
	__u64 sc_start; /* entry time of the in-flight call, 0 when none */
	__u64 sc_arg;   /* as syscap_tprof_rec.arg */
	__u64 on_since;
	__u64 off_since;
	__u32 tgid;
	__u8 sc_type; /* enum syscap_tprof_type (file for a call on a socket too) */
	__u8 sc_call; /* enum syscap_tprof_call */
	__u8 _pad[2];
	__s32 sc_stack;  /* the in-flight call's user stack (as syscap_tprof_rec.user_stack) */
	__s32 off_stack; /* the user stack the thread went off the CPU in */
};

GALAGO_EXPORT_TYPE(struct syscap_tprof_rec, tprof_rec);
GALAGO_EXPORT_TYPE(struct syscap_tprof_thread, tprof_thread);
GALAGO_EXPORT_TYPE(enum syscap_tprof_type, tprof_type);
GALAGO_EXPORT_TYPE(enum syscap_tprof_call, tprof_call);

#if defined(__TARGET_ARCH_x86)
#define TP_NR_sync 162
#define TP_NR_nanosleep 35
#define TP_NR_clock_nanosleep 230
#define TP_NR_wait4 61
#define TP_NR_select 23
#define TP_NR_pselect6 270
#define TP_NR_poll 7
#define TP_NR_ppoll 271
#else
#define TP_NR_sync 81
#define TP_NR_nanosleep 101
#define TP_NR_clock_nanosleep 115
#define TP_NR_wait4 260
#define TP_NR_pselect6 72
#define TP_NR_ppoll 73
#endif

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* no memory in the loads that never attach these programs */
	__uint(max_entries, 32768);
	__type(key, __u32); /* tid */
	__type(value, struct syscap_tprof_thread);
} tprof_threads SEC(".maps");

/* A thread's user-space calls in flight (pthread_sync, python_gc). */
struct syscap_tprof_ucall {
	__u64 pt_start; /* entry time of the pthread call, 0 when none */
	__u64 pt_addr;  /* its lock's address (first argument) */
	__u64 gc_start; /* start of the collection, 0 when none */
	__u32 pt_fn;    /* the function (the uprobe's cookie) */
	__s32 gc_gen;   /* the collection's generation */
	__u64 al_size;  /* the allocation in flight: its size */
	__u64 al_old;   /* realloc's block */
	__u32 al_fn;    /* its function, 0 when none */
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 32768);
	__type(key, __u32); /* tid */
	__type(value, struct syscap_tprof_ucall);
} tprof_uthreads SEC(".maps");

/* One page here: the tprofiling load sizes it before loading (tprof.go),
 * the other loads of this object keep a page they never use. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} tprof_events SEC(".maps");

/* The user stacks of the events. One entry here: the tprofiling load sizes
 * it before loading (tprof.go), the other loads keep one they never use.
 * Stacks are deduplicated by the kernel (one id per distinct stack) and
 * never deleted while the probe runs, so an id names one stack for the
 * load's life and user space reads each id once. */
#define TPROF_STACK_DEPTH 64
struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__uint(value_size, TPROF_STACK_DEPTH * sizeof(__u64));
} tprof_stacks SEC(".maps");

/* TPROF_NO_STACK: an event without a stack (on-CPU slices). */
#define TPROF_NO_STACK (-1)
#define TPROF_EFAULT 14

/* tprof_lost[0], per CPU: events not made because tprof_threads was full. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} tprof_lost SEC(".maps");

/* tprof_types: bit (1 << enum syscap_tprof_type) enables a type. Run-time:
 * the probe's sub-items. */
volatile __u32 tprof_types = 0;
/* tprof_min_ns: events shorter than this are not sent (min_exec_dur). */
volatile __u64 tprof_min_ns = 0;

static __always_inline __u32 tprof_call_of(long nr)
{
	switch (nr) {
	case NR_read:
		return SYSCAP_TPC_READ;
	case NR_write:
		return SYSCAP_TPC_WRITE;
	case NR_readv:
		return SYSCAP_TPC_READV;
	case NR_writev:
		return SYSCAP_TPC_WRITEV;
	case NR_preadv:
		return SYSCAP_TPC_PREADV;
	case NR_pwritev:
		return SYSCAP_TPC_PWRITEV;
	case TP_NR_sync:
		return SYSCAP_TPC_SYNC;
	case NR_fsync:
		return SYSCAP_TPC_FSYNC;
	case NR_fdatasync:
		return SYSCAP_TPC_FDATASYNC;
	case NR_sched_yield:
		return SYSCAP_TPC_SCHED_YIELD;
	case TP_NR_nanosleep:
		return SYSCAP_TPC_NANOSLEEP;
	case TP_NR_clock_nanosleep:
		return SYSCAP_TPC_CLOCK_NANOSLEEP;
	case TP_NR_wait4:
		return SYSCAP_TPC_WAIT4;
#ifdef TP_NR_select
	case TP_NR_select:
		return SYSCAP_TPC_SELECT;
	case TP_NR_poll:
		return SYSCAP_TPC_POLL;
#endif
	case TP_NR_pselect6:
		return SYSCAP_TPC_PSELECT6;
	case TP_NR_ppoll:
		return SYSCAP_TPC_PPOLL;
#ifdef NR_epoll_wait
	case NR_epoll_wait:
		return SYSCAP_TPC_EPOLL_WAIT;
#endif
	case NR_epoll_pwait:
		return SYSCAP_TPC_EPOLL_PWAIT;
	case NR_epoll_pwait2:
		return SYSCAP_TPC_EPOLL_PWAIT2;
	case NR_sendto:
		return SYSCAP_TPC_SENDTO;
	case NR_recvfrom:
		return SYSCAP_TPC_RECVFROM;
	case NR_sendmsg:
		return SYSCAP_TPC_SENDMSG;
	case NR_recvmsg:
		return SYSCAP_TPC_RECVMSG;
	case NR_sendmmsg:
		return SYSCAP_TPC_SENDMMSG;
	case NR_recvmmsg:
		return SYSCAP_TPC_RECVMMSG;
	case NR_futex:
		return SYSCAP_TPC_FUTEX;
	}
	return SYSCAP_TPC_NONE;
}

/* tprof_type_of: the event type of a call before its fd is looked at. */
static __always_inline __u32 tprof_type_of(__u32 call)
{
	if (call <= SYSCAP_TPC_FDATASYNC)
		return SYSCAP_TP_FILE;
	if (call <= SYSCAP_TPC_EPOLL_PWAIT2)
		return SYSCAP_TP_SCHED;
	if (call <= SYSCAP_TPC_RECVMMSG)
		return SYSCAP_TP_NET;
	return SYSCAP_TP_LOCK;
}

/* tprof_has_fd: the call's first argument is a file descriptor. */
static __always_inline bool tprof_has_fd(__u32 call)
{
	return (call >= SYSCAP_TPC_READ && call <= SYSCAP_TPC_PWRITEV) || call == SYSCAP_TPC_FSYNC ||
	       call == SYSCAP_TPC_FDATASYNC || (call >= SYSCAP_TPC_SENDTO && call <= SYSCAP_TPC_RECVMMSG);
}

static __always_inline bool tprof_fd_is_socket(long fd)
{
	struct file *f;

	if (fd < 0)
		return false;
	f = fd_file(bpf_get_current_task_btf(), fd);
	return f && (BPF_CORE_READ(f, f_inode, i_mode) & S_IFMT) == S_IFSOCK;
}

/* tprof_stack_lost[0], per CPU: user stacks not recorded (a bucket of
 * tprof_stacks holding another stack, or any other error but an empty
 * stack); the event is sent without one. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} tprof_stack_lost SEC(".maps");

static __always_inline void tprof_count(void *counter)
{
	__u32 z = 0;
	__u64 *lost = bpf_map_lookup_elem(counter, &z);

	if (lost)
		*lost += 1;
}

/* tprof_thread_get: the thread's row, made when missing (a full map is
 * counted in tprof_lost). */
static __always_inline struct syscap_tprof_thread *tprof_thread_get(__u32 tid, __u32 tgid)
{
	struct syscap_tprof_thread *t = bpf_map_lookup_elem(&tprof_threads, &tid);
	struct syscap_tprof_thread zero = {.tgid = tgid, .sc_stack = TPROF_NO_STACK, .off_stack = TPROF_NO_STACK};

	if (t)
		return t;
	/* Another CPU may have made it first: look it up either way. */
	bpf_map_update_elem(&tprof_threads, &tid, &zero, BPF_NOEXIST);
	t = bpf_map_lookup_elem(&tprof_threads, &tid);
	if (!t)
		tprof_count(&tprof_lost);
	return t;
}

/* tprof_stack: the current thread's user stack id in tprof_stacks; a
 * failure other than an empty stack is counted lost. */
static __always_inline __s32 tprof_stack(void *ctx)
{
	__s32 id = bpf_get_stackid(ctx, &tprof_stacks, BPF_F_USER_STACK);

	if (id < 0 && id != -TPROF_EFAULT)
		tprof_count(&tprof_stack_lost);
	return id;
}

/* tprof_fill_file sets the inode, or the connection of a socket. */
static __always_inline void tprof_fill_file(struct syscap_tprof_rec *r, long fd)
{
	struct file *f;
	struct socket *sock;
	struct sock *sk;
	__u16 family;

	if (fd < 0)
		return;
	f = fd_file(bpf_get_current_task_btf(), fd);
	if (!f)
		return;
	r->ino = BPF_CORE_READ(f, f_inode, i_ino);
	if ((BPF_CORE_READ(f, f_inode, i_mode) & S_IFMT) != S_IFSOCK)
		return;
	sock = BPF_CORE_READ(f, private_data);
	if (!sock)
		return;
	sk = BPF_CORE_READ(sock, sk);
	if (!sk)
		return;
	family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family != AF_INET && family != AF_INET6)
		return;
	r->family = family;
	r->sport = BPF_CORE_READ(sk, __sk_common.skc_num);
	r->dport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	if (family == AF_INET) {
		BPF_CORE_READ_INTO((__u32 *)r->saddr, sk, __sk_common.skc_rcv_saddr);
		BPF_CORE_READ_INTO((__u32 *)r->daddr, sk, __sk_common.skc_daddr);
	} else {
		BPF_CORE_READ_INTO(&r->saddr, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8);
		BPF_CORE_READ_INTO(&r->daddr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
	}
}

/* tprof_reserve: a zeroed record in the ring (a full ring counts in
 * lost_events). */
static __always_inline struct syscap_tprof_rec *tprof_reserve(void)
{
	struct syscap_tprof_rec *r = GALAGO_RB_RESERVE(&tprof_events, struct syscap_tprof_rec);

	if (r)
		__builtin_memset(r, 0, sizeof(*r));
	return r;
}

static __always_inline int tprof_enter(struct pt_regs *regs, long id)
{
	__u32 call = tprof_call_of(id), type, types = tprof_types;
	__u64 pid_tgid;
	struct syscap_tprof_thread *t;

	if (call == SYSCAP_TPC_NONE)
		return 0;
	type = tprof_type_of(call);
	/* A file call on a socket is a net event. */
	if (type == SYSCAP_TP_FILE && !(types & ((1U << SYSCAP_TP_FILE) | (1U << SYSCAP_TP_NET))))
		return 0;
	if (type != SYSCAP_TP_FILE && !(types & (1U << type)))
		return 0;
	pid_tgid = bpf_get_current_pid_tgid();
	if (!galago_observed(pid_tgid >> 32))
		return 0;
	/* Whether a file call's fd is a socket is looked at the exit, and
	 * only for a call long enough to be sent. */
	t = tprof_thread_get((__u32)pid_tgid, pid_tgid >> 32);
	if (!t)
		return 0;
	t->sc_type = type;
	t->sc_call = call;
	t->sc_arg = call == SYSCAP_TPC_FUTEX ? SC_ARG1(regs) : (__u64)(long)(int)SC_ARG0(regs);
	/* The stack is taken when the call blocks (sched_switch) or, for one
	 * long enough to be sent, at its exit: a short call costs no walk. */
	t->sc_stack = TPROF_NO_STACK;
	t->sc_start = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(syscap_tprof_sys_enter, struct pt_regs *regs, long id)
{
	return tprof_enter(regs, id);
}

SEC("tracepoint")
int syscap_tprof_sc_enter(struct trace_event_raw_sys_enter *ctx)
{
	struct pt_regs *regs = SYSCAP_TP_REGS();

	return tprof_enter(regs, SC_NR(regs));
}

/* ctx: the program's context, for the user stack. */
static __always_inline int tprof_exit(void *ctx, struct pt_regs *regs, long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct syscap_tprof_thread *t;
	struct syscap_tprof_rec *r;
	__u64 now, start, d;
	__u32 call, type, types = tprof_types;

	if (!types)
		return 0;
	t = bpf_map_lookup_elem(&tprof_threads, &tid);
	if (!t || !t->sc_start)
		return 0;
	call = tprof_call_of(SC_NR(regs));
	start = t->sc_start;
	t->sc_start = 0;
	if (call != t->sc_call)
		return 0; /* not the call that stored it (a thread that exec'ed) */
	now = bpf_ktime_get_ns();
	d = now > start ? now - start : 0;
	if (d < tprof_min_ns)
		return 0;
	type = t->sc_type;
	if (type == SYSCAP_TP_FILE && tprof_has_fd(call) && tprof_fd_is_socket((long)t->sc_arg))
		type = SYSCAP_TP_NET;
	if (!(types & (1U << type)))
		return 0;
	r = tprof_reserve();
	if (!r)
		return 0;
	r->start = start;
	r->dur = d;
	r->arg = t->sc_arg;
	r->ret = ret;
	r->pid = tid;
	r->tgid = bpf_get_current_pid_tgid() >> 32;
	r->type = type;
	r->call = call;
	r->user_stack = t->sc_stack != TPROF_NO_STACK ? t->sc_stack : tprof_stack(ctx);
	if (tprof_has_fd(call))
		tprof_fill_file(r, (long)t->sc_arg);
	bpf_get_current_comm(r->comm, sizeof(r->comm));
	GALAGO_RB_SUBMIT(&tprof_events, r);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(syscap_tprof_sys_exit, struct pt_regs *regs, long ret)
{
	return tprof_exit(ctx, regs, ret);
}

SEC("tracepoint")
int syscap_tprof_sc_exit(struct trace_event_raw_sys_exit *ctx)
{
	return tprof_exit(ctx, SYSCAP_TP_REGS(), ctx->ret);
}

/* tprof_slice sends one on- or off-CPU slice of task. */
static __always_inline void tprof_slice(struct task_struct *task, __u32 type, __u64 since, __u64 now, __s32 stack)
{
	struct syscap_tprof_rec *r;

	if (!since || now <= since || now - since < tprof_min_ns)
		return;
	r = tprof_reserve();
	if (!r)
		return;
	r->start = since;
	r->dur = now - since;
	r->pid = BPF_CORE_READ(task, pid);
	r->tgid = BPF_CORE_READ(task, tgid);
	r->type = type;
	r->user_stack = stack;
	BPF_CORE_READ_STR_INTO(&r->comm, task, comm);
	GALAGO_RB_SUBMIT(&tprof_events, r);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(syscap_tprof_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u32 types = tprof_types, pid, tgid;
	struct syscap_tprof_thread *t;
	__s32 stack;
	__u64 now;

	if (!types)
		return 0;
	if (!(types & ((1U << SYSCAP_TP_ONCPU) | (1U << SYSCAP_TP_OFFCPU)))) {
		/* Syscall types only: the stack of a traced call that blocks,
		 * the only one a call that never returns (a deadlock) gets. */
		pid = prev->pid;
		t = pid ? bpf_map_lookup_elem(&tprof_threads, &pid) : NULL;
		if (t && t->sc_start && t->sc_stack == TPROF_NO_STACK)
			t->sc_stack = tprof_stack(ctx);
		return 0;
	}
	now = bpf_ktime_get_ns();
	/* prev: this runs in its context, so the filter's cgroup is its own. */
	pid = prev->pid;
	tgid = prev->tgid;
	if (pid && galago_observed(tgid)) {
		t = tprof_thread_get(pid, tgid);
		if (t) {
			if (types & (1U << SYSCAP_TP_ONCPU))
				tprof_slice(prev, SYSCAP_TP_ONCPU, t->on_since, now, TPROF_NO_STACK);
			t->on_since = 0;
			t->off_since = now;
			/* current is still prev: the stack it goes off the CPU in,
			 * which is its traced call's when it is in one. */
			stack = TPROF_NO_STACK;
			if (t->sc_start) {
				if (t->sc_stack == TPROF_NO_STACK)
					t->sc_stack = tprof_stack(ctx);
				stack = t->sc_stack;
			}
			if (types & (1U << SYSCAP_TP_OFFCPU)) {
				if (stack == TPROF_NO_STACK)
					stack = tprof_stack(ctx);
				t->off_stack = stack;
			} else {
				t->off_stack = TPROF_NO_STACK;
			}
		}
	} else if (pid && bpf_map_lookup_elem(&tprof_threads, &pid)) {
		/* Not observed any more (the snoopers changed): forget it. The
		 * lookup first: a delete takes the bucket's lock, and this runs
		 * at every switch of every thread of the machine. */
		bpf_map_delete_elem(&tprof_threads, &pid);
	}
	/* next: a thread seen before, or one of an observed process (its
	 * first slice then counts from here). */
	pid = next->pid;
	if (!pid)
		return 0;
	t = bpf_map_lookup_elem(&tprof_threads, &pid);
	if (!t) {
		tgid = next->tgid;
		if (galago_observed_in(tgid, BPF_CORE_READ(next, cgroups, dfl_cgrp, kn, id)))
			t = tprof_thread_get(pid, tgid);
	}
	if (t) {
		if (types & (1U << SYSCAP_TP_OFFCPU))
			tprof_slice(next, SYSCAP_TP_OFFCPU, t->off_since, now, t->off_stack);
		t->off_since = 0;
		t->on_since = now;
	}
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(syscap_tprof_task_exit, struct task_struct *task)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	if (bpf_map_lookup_elem(&tprof_threads, &tid))
		bpf_map_delete_elem(&tprof_threads, &tid);
	if (bpf_map_lookup_elem(&tprof_uthreads, &tid))
		bpf_map_delete_elem(&tprof_uthreads, &tid);
	return 0;
}

/* tprof_ucall_get: the thread's row, made when missing (a full map is
 * counted in tprof_lost). */
static __always_inline struct syscap_tprof_ucall *tprof_ucall_get(__u32 tid)
{
	struct syscap_tprof_ucall *u = bpf_map_lookup_elem(&tprof_uthreads, &tid);
	struct syscap_tprof_ucall zero = {};

	if (u)
		return u;
	bpf_map_update_elem(&tprof_uthreads, &tid, &zero, BPF_NOEXIST);
	u = bpf_map_lookup_elem(&tprof_uthreads, &tid);
	if (!u)
		tprof_count(&tprof_lost);
	return u;
}

/* tprof_usdt_arg reads a USDT argument whose location the cookie packs
 * (internal/uprobes.ArgCookie): kind in bits 56..63 (1 constant, 2
 * register, 3 memory at register + offset), size in 48..54 and sign in
 * 55, the register's offset in pt_regs in 32..47, the constant or offset
 * in 0..31. */
static __always_inline __s64 tprof_usdt_arg(struct pt_regs *ctx, __u64 spec)
{
	__u32 kind = spec >> 56, size = (spec >> 48) & 0x7f, regoff = (spec >> 32) & 0xffff;
	__s32 off = (__s32)(__u32)spec;
	__u64 v = 0;
	__s64 r;

	if (kind == 1)
		return off;
	if ((kind != 2 && kind != 3) || regoff > sizeof(struct pt_regs) - sizeof(__u64))
		return 0;
	if (bpf_probe_read_kernel(&v, sizeof(v), (void *)ctx + regoff))
		return 0;
	if (kind == 3 && bpf_probe_read_user(&v, sizeof(v), (void *)(v + (__s64)off)))
		return 0;
	switch (size) {
	case 1:
		r = spec & (1ULL << 55) ? (__s64)(__s8)v : (__s64)(__u8)v;
		break;
	case 2:
		r = spec & (1ULL << 55) ? (__s64)(__s16)v : (__s64)(__u16)v;
		break;
	case 4:
		r = spec & (1ULL << 55) ? (__s64)(__s32)v : (__s64)(__u32)v;
		break;
	default:
		r = (__s64)v;
	}
	return r;
}

/* tprof_user_reserve: a record of the current thread of type and call,
 * its thread, comm and start (now) set, for the caller to fill and
 * submit. */
static __always_inline struct syscap_tprof_rec *tprof_user_reserve(__u32 type, __u32 call)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct syscap_tprof_rec *r = tprof_reserve();

	if (!r)
		return NULL;
	r->start = bpf_ktime_get_ns();
	r->pid = (__u32)pid_tgid;
	r->tgid = pid_tgid >> 32;
	r->type = type;
	r->call = call;
	r->user_stack = TPROF_NO_STACK;
	bpf_get_current_comm(r->comm, sizeof(r->comm));
	return r;
}

/* tprof_user_rec sends one record of a user-space call of the current
 * thread, with its user stack. */
static __always_inline void tprof_user_rec(void *ctx, __u32 type, __u32 call, __u64 start, __u64 now, __u64 arg,
					   __s64 ret)
{
	struct syscap_tprof_rec *r = tprof_user_reserve(type, call);

	if (!r)
		return;
	r->start = start;
	r->dur = now - start;
	r->arg = arg;
	r->ret = ret;
	r->user_stack = tprof_stack(ctx);
	GALAGO_RB_SUBMIT(&tprof_events, r);
}

SEC("uprobe.multi")
int BPF_KPROBE(syscap_tprof_pthread_enter, void *lock)
{
	struct syscap_tprof_ucall *u;

	if (!(tprof_types & (1U << SYSCAP_TP_PTHREAD)))
		return 0;
	u = tprof_ucall_get((__u32)bpf_get_current_pid_tgid());
	if (!u)
		return 0;
	u->pt_fn = bpf_get_attach_cookie(ctx);
	u->pt_addr = (__u64)lock;
	u->pt_start = bpf_ktime_get_ns();
	return 0;
}

SEC("uretprobe.multi")
int BPF_KRETPROBE(syscap_tprof_pthread_exit, long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct syscap_tprof_ucall *u = bpf_map_lookup_elem(&tprof_uthreads, &tid);
	__u64 start, now;

	if (!u || !u->pt_start)
		return 0;
	start = u->pt_start;
	u->pt_start = 0;
	/* Another function's return (a call made before the attach, or one
	 * nested in the traced one): not this entry's. */
	if (u->pt_fn != (__u32)bpf_get_attach_cookie(ctx))
		return 0;
	now = bpf_ktime_get_ns();
	if (now < start || now - start < tprof_min_ns || !(tprof_types & (1U << SYSCAP_TP_PTHREAD)))
		return 0;
	tprof_user_rec(ctx, SYSCAP_TP_PTHREAD, u->pt_fn, start, now, u->pt_addr, ret);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(syscap_tprof_gc_start)
{
	struct syscap_tprof_ucall *u;

	if (!(tprof_types & (1U << SYSCAP_TP_PYGC)))
		return 0;
	u = tprof_ucall_get((__u32)bpf_get_current_pid_tgid());
	if (!u)
		return 0;
	u->gc_gen = (__s32)tprof_usdt_arg(ctx, bpf_get_attach_cookie(ctx));
	u->gc_start = bpf_ktime_get_ns();
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(syscap_tprof_gc_done)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct syscap_tprof_ucall *u = bpf_map_lookup_elem(&tprof_uthreads, &tid);
	__u64 start, now;

	if (!u || !u->gc_start)
		return 0;
	start = u->gc_start;
	u->gc_start = 0;
	now = bpf_ktime_get_ns();
	if (now < start || now - start < tprof_min_ns || !(tprof_types & (1U << SYSCAP_TP_PYGC)))
		return 0;
	tprof_user_rec(ctx, SYSCAP_TP_PYGC, 0, start, now, (__u64)(__s64)u->gc_gen,
		       tprof_usdt_arg(ctx, bpf_get_attach_cookie(ctx)));
	return 0;
}

SEC("perf_event")
int syscap_tprof_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), now;

	if (!(tprof_types & (1U << SYSCAP_TP_SAMPLE)) || (__u32)id == 0 || !galago_observed(id >> 32))
		return 0;
	now = bpf_ktime_get_ns();
	tprof_user_rec(ctx, SYSCAP_TP_SAMPLE, 0, now, now, bpf_get_smp_processor_id(), 0);
	return 0;
}

/* mem_glibc's functions: the uprobes' cookies, as tprof.go's memFuncs. */
#define TPROF_MEM_MALLOC 1
#define TPROF_MEM_CALLOC 2
#define TPROF_MEM_REALLOC 3
#define TPROF_MEM_FREE 4

SEC("uprobe.multi")
int BPF_KPROBE(syscap_tprof_alloc_enter, __u64 a0, __u64 a1)
{
	__u32 fn = bpf_get_attach_cookie(ctx);
	struct syscap_tprof_ucall *u;

	if (!(tprof_types & (1U << SYSCAP_TP_MEMGLIBC)))
		return 0;
	u = tprof_ucall_get((__u32)bpf_get_current_pid_tgid());
	if (!u)
		return 0;
	u->al_fn = fn;
	u->al_old = 0;
	switch (fn) {
	case TPROF_MEM_CALLOC:
		u->al_size = a0 * a1;
		break;
	case TPROF_MEM_REALLOC:
		u->al_old = a0;
		u->al_size = a1;
		break;
	default:
		u->al_size = a0;
	}
	return 0;
}

SEC("uretprobe.multi")
int BPF_KRETPROBE(syscap_tprof_alloc_return, __u64 addr)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), fn;
	struct syscap_tprof_ucall *u = bpf_map_lookup_elem(&tprof_uthreads, &tid);
	struct syscap_tprof_rec *r;

	if (!u || !u->al_fn)
		return 0;
	fn = u->al_fn;
	u->al_fn = 0;
	if (fn != (__u32)bpf_get_attach_cookie(ctx) || !(tprof_types & (1U << SYSCAP_TP_MEMGLIBC)))
		return 0;
	r = tprof_user_reserve(SYSCAP_TP_MEMGLIBC, fn);
	if (!r)
		return 0;
	r->arg = addr ? u->al_size : 0;
	r->ret = (__s64)addr;
	r->ino = u->al_old;
	r->user_stack = tprof_stack(ctx);
	GALAGO_RB_SUBMIT(&tprof_events, r);
	return 0;
}

SEC("uprobe.multi")
int BPF_KPROBE(syscap_tprof_free_enter, __u64 addr)
{
	struct syscap_tprof_rec *r;

	if (!addr || !(tprof_types & (1U << SYSCAP_TP_MEMGLIBC)))
		return 0;
	r = tprof_user_reserve(SYSCAP_TP_MEMGLIBC, TPROF_MEM_FREE);
	if (!r)
		return 0;
	r->ret = (__s64)addr;
	GALAGO_RB_SUBMIT(&tprof_events, r);
	return 0;
}
