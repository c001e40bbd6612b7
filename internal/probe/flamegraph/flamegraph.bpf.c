//go:build ignore

/* flamegraph: on-CPU and off-CPU stack profiles of observed processes,
 * aggregated in the kernel (gala-gopher stackprobe's oncpu and offcpu).
 *
 * Hooks:
 *   perf_event (software cpu-clock, one event per CPU, opened by user
 *       space at perf_sample_period)  on_cpu: one sample of the running
 *       task: user and kernel stack ids, counted per (tgid, stacks) in
 *       oncpu_counts
 *   tp_btf/sched_switch  off_cpu: the task going off CPU in a blocked state
 *       (prev_state != TASK_RUNNING) leaves {ts, stack ids} in offcpu_start
 *       (keyed by thread id; current is still prev here, so its stacks are
 *       the ones it blocked in); the task coming on CPU finds its entry and
 *       adds the blocked ns to offcpu_counts per (tgid, stacks).
 *       Preempted tasks (still runnable) are not counted: that time is run
 *       queue delay, not off-CPU time. Exiting threads (TASK_DEAD) neither.
 *   tp_btf/page_fault_user, tp_btf/page_fault_kernel (x86; mem)  mem_fault:
 *       one page fault of an observed process, counted as page_size bytes
 *       per (tgid, user stack[, kernel stack for a fault taken in the
 *       kernel on a user address]) in mem_counts (gala-gopher's mem).
 *   uprobes + uretprobes on libc malloc, calloc, realloc, memalign,
 *       aligned_alloc, valloc, pvalloc, posix_memalign, uprobe on free
 *       (mem_glibc; attached by user space to each libc file the observed
 *       processes map, so they fire for every process mapping that file:
 *       the entry filters on the tgid)  the entry leaves {size, realloc's
 *       old block, posix_memalign's memptr, entry stack pointer} in
 *       glibc_pending per thread; the
 *       return with the same stack pointer (a nested call, realloc(NULL, n)
 *       calling malloc, has a lower one and is not counted) takes the
 *       caller's user stack (the return address is the caller's pc, so a
 *       frame-pointer walk from here names the allocating function), adds
 *       {bytes, 1} to glibc_counts and records the live block in
 *       glibc_allocs {tgid, address} -> {size, stack}; free deletes it.
 *       User space reads glibc_allocs for the live (in-use) bytes per stack.
 * Maps: stacks (BPF_MAP_TYPE_STACK_TRACE, ids are bucket indices; a bucket
 *   holding another stack gives -EEXIST: counted as a drop), oncpu_counts and
 *   offcpu_counts (struct flame_key -> samples / ns), mem_counts and
 *   glibc_counts (struct flame_key -> struct flame_mem), offcpu_start,
 *   glibc_allocs (bounded: a block beyond is counted as a drop),
 *   glibc_pending,
 *   drops (per CPU, enum flame_drop). User space drains the counts maps and
 *   deletes the stacks they named every drain period.
 *   A sample whose stack could not be recorded is still counted, with the
 *   negative error in its stack id, so totals stay exact.
 * Filter: snoopers via GALAGO_FILTER (galago_observed for the sampled task,
 *   galago_observed_in for the task switched out).
 * Kernel: 5.15+ (BPF link for perf events), BTF for tp_btf; the page
 *   fault tracepoints exist on x86 only.
 */
#define GALAGO_FILTER
#include "common.h"

#define PERF_MAX_STACK_DEPTH 127
#define TASK_RUNNING 0
#define TASK_DEAD 0x80
#define EEXIST 17
#define EFAULT 14

#ifndef FLAME_MAX_STACKS
#define FLAME_MAX_STACKS 16384
#endif
#ifndef FLAME_MAX_KEYS
#define FLAME_MAX_KEYS 32768
#endif
#ifndef FLAME_MAX_ALLOCS
#define FLAME_MAX_ALLOCS 65536
#endif
#ifndef FLAME_MAX_PENDING
#define FLAME_MAX_PENDING 16384
#endif

/* A profile key: one process and its user and kernel stack ids (negative:
 * the error bpf_get_stackid returned; -EFAULT for a kernel thread's user
 * stack). */
struct flame_key {
	__u32 tgid;
	__s32 user_stack;
	__s32 kern_stack;
	__u32 pad;
};

/* What a blocked thread left at switch-out. */
struct flame_start {
	__u64 ts;
	__u32 tgid;
	__s32 user_stack;
	__s32 kern_stack;
	__u32 pad;
};

enum flame_drop {
	FLAME_DROP_STACK_COLLISION = 0, /* -EEXIST: the stack's bucket held another stack */
	FLAME_DROP_STACK_OTHER = 1,     /* any other stack error but -EFAULT (empty stack) */
	FLAME_DROP_COUNTS_FULL = 2,     /* oncpu/offcpu_counts full: the sample is lost */
	FLAME_DROP_START_FULL = 3,      /* offcpu_start full: the blocked period is lost */
	FLAME_DROP_ALLOCS_FULL = 4,     /* glibc_allocs full: a block counted as allocated is not tracked as live */
	FLAME_DROP_PENDING_FULL = 5,    /* glibc_pending full: an allocation call is not counted */
	FLAME_DROP_N = 6,
};

/* Bytes and allocations (page faults for mem) of one key. */
struct flame_mem {
	__u64 bytes;
	__u64 objects;
};

/* A live block of an observed process. */
struct flame_alloc_key {
	__u32 tgid;
	__u32 pad;
	__u64 addr;
};

struct flame_alloc {
	__u64 size;
	__s32 user_stack;
	__u32 pad;
};

/* An allocation call in progress on a thread. */
struct flame_pending {
	__u64 size;
	__u64 old; /* realloc's block */
	__u64 out; /* posix_memalign's memptr: where the block's address goes */
	__u64 sp;  /* the stack pointer at entry */
};

GALAGO_EXPORT_TYPE(struct flame_key, flame_key);
GALAGO_EXPORT_TYPE(struct flame_start, flame_start);
GALAGO_EXPORT_TYPE(enum flame_drop, flame_drop);
GALAGO_EXPORT_TYPE(struct flame_mem, flame_mem);
GALAGO_EXPORT_TYPE(struct flame_alloc_key, flame_alloc_key);
GALAGO_EXPORT_TYPE(struct flame_alloc, flame_alloc);
GALAGO_EXPORT_TYPE(struct flame_pending, flame_pending);

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, FLAME_MAX_STACKS);
	__type(key, __u32);
	__uint(value_size, PERF_MAX_STACK_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FLAME_MAX_KEYS);
	__type(key, struct flame_key);
	__type(value, __u64); /* samples */
} oncpu_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FLAME_MAX_KEYS);
	__type(key, struct flame_key);
	__type(value, __u64); /* ns off CPU */
} offcpu_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FLAME_MAX_KEYS);
	__type(key, __u32); /* thread id */
	__type(value, struct flame_start);
} offcpu_start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FLAME_MAX_KEYS);
	__type(key, struct flame_key);
	__type(value, struct flame_mem); /* page fault bytes, faults */
} mem_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FLAME_MAX_KEYS);
	__type(key, struct flame_key);
	__type(value, struct flame_mem); /* bytes allocated, allocations */
} glibc_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FLAME_MAX_ALLOCS);
	__type(key, struct flame_alloc_key);
	__type(value, struct flame_alloc);
} glibc_allocs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FLAME_MAX_PENDING);
	__type(key, __u64); /* pid_tgid */
	__type(value, struct flame_pending);
} glibc_pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FLAME_DROP_N);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

/* offcpu_on: off-CPU accounting runs only while user space sets it (the
 * offcpu sub-item), so the sched_switch program costs one load otherwise. */
volatile __u32 offcpu_on = 0;
/* mem_on, glibc_on: the mem and mem_glibc sub-items, set by user space. */
volatile __u32 mem_on = 0;
volatile __u32 glibc_on = 0;
/* The size a page fault counts, set before load. */
const volatile __u64 page_size = 4096;

static __always_inline void count_drop(__u32 reason)
{
	__u64 *n = bpf_map_lookup_elem(&drops, &reason);

	if (n)
		*n += 1;
}

/* -EFAULT is an empty stack (a kernel thread's user stack, the kernel stack
 * of a sample taken in user mode): not a drop. */
static __always_inline void check_stack(__s32 id)
{
	if (id >= 0 || id == -EFAULT)
		return;
	if (id == -EEXIST)
		count_drop(FLAME_DROP_STACK_COLLISION);
	else
		count_drop(FLAME_DROP_STACK_OTHER);
}

static __always_inline void add(void *counts, struct flame_key *k, __u64 v)
{
	__u64 *cur = bpf_map_lookup_elem(counts, k);

	if (cur) {
		__sync_fetch_and_add(cur, v);
		return;
	}
	if (bpf_map_update_elem(counts, k, &v, BPF_NOEXIST)) {
		/* Another CPU may have inserted it meanwhile. */
		cur = bpf_map_lookup_elem(counts, k);
		if (cur)
			__sync_fetch_and_add(cur, v);
		else
			count_drop(FLAME_DROP_COUNTS_FULL);
	}
}

SEC("perf_event")
int on_cpu(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct flame_key k = {};

	if ((__u32)id == 0) /* the idle task */
		return 0;
	if (!galago_observed(tgid))
		return 0;
	k.tgid = tgid;
	k.user_stack = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
	k.kern_stack = bpf_get_stackid(ctx, &stacks, 0);
	check_stack(k.user_stack);
	check_stack(k.kern_stack);
	add(&oncpu_counts, &k, 1);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(off_cpu, bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state)
{
	__u64 now;
	__u32 tid;
	struct flame_start *st;

	if (!offcpu_on)
		return 0;
	now = bpf_ktime_get_ns();

	/* An exiting thread's last switch (TASK_DEAD) never comes back. */
	if (prev->pid && prev_state != TASK_RUNNING && !(prev_state & TASK_DEAD) &&
	    galago_observed_in(prev->tgid, bpf_get_current_cgroup_id())) {
		struct flame_start s = { .ts = now, .tgid = prev->tgid };

		tid = prev->pid;
		s.user_stack = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
		s.kern_stack = bpf_get_stackid(ctx, &stacks, 0);
		check_stack(s.user_stack);
		check_stack(s.kern_stack);
		if (bpf_map_update_elem(&offcpu_start, &tid, &s, BPF_ANY))
			count_drop(FLAME_DROP_START_FULL);
	}

	tid = next->pid;
	st = bpf_map_lookup_elem(&offcpu_start, &tid);
	if (st) {
		struct flame_key k = {
			.tgid = st->tgid,
			.user_stack = st->user_stack,
			.kern_stack = st->kern_stack,
		};

		if (now > st->ts)
			add(&offcpu_counts, &k, now - st->ts);
		bpf_map_delete_elem(&offcpu_start, &tid);
	}
	return 0;
}

static __always_inline void add_mem(void *counts, struct flame_key *k, __u64 bytes)
{
	struct flame_mem *cur = bpf_map_lookup_elem(counts, k);
	struct flame_mem v = { .bytes = bytes, .objects = 1 };

	if (!cur && bpf_map_update_elem(counts, k, &v, BPF_NOEXIST) == 0)
		return;
	if (!cur)
		cur = bpf_map_lookup_elem(counts, k); /* inserted meanwhile */
	if (!cur) {
		count_drop(FLAME_DROP_COUNTS_FULL);
		return;
	}
	__sync_fetch_and_add(&cur->bytes, bytes);
	__sync_fetch_and_add(&cur->objects, 1);
}

static __always_inline void mem_fault(void *ctx, bool in_kernel)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct flame_key k = { .kern_stack = -EFAULT };

	if (!mem_on || !tgid || !galago_observed(tgid))
		return;
	k.tgid = tgid;
	k.user_stack = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
	check_stack(k.user_stack);
	/* A user-mode fault's kernel stack is the exception entry only. */
	if (in_kernel) {
		k.kern_stack = bpf_get_stackid(ctx, &stacks, 0);
		check_stack(k.kern_stack);
	}
	add_mem(&mem_counts, &k, page_size);
}

SEC("tp_btf/page_fault_user")
int BPF_PROG(page_fault_user, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	mem_fault(ctx, false);
	return 0;
}

SEC("tp_btf/page_fault_kernel")
int BPF_PROG(page_fault_kernel, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	mem_fault(ctx, true);
	return 0;
}

static __always_inline void alloc_enter(struct pt_regs *ctx, __u64 size, __u64 old, __u64 out)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 sp = PT_REGS_SP(ctx);
	struct flame_pending *cur, p = { .size = size, .old = old, .out = out, .sp = sp };

	if (!glibc_on || !galago_observed(id >> 32))
		return;
	cur = bpf_map_lookup_elem(&glibc_pending, &id);
	if (cur && cur->sp > sp)
		return; /* called from inside an allocator call of this thread: the outer call counts */
	if (bpf_map_update_elem(&glibc_pending, &id, &p, BPF_ANY))
		count_drop(FLAME_DROP_PENDING_FULL);
}

static __always_inline void alloc_exit(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 ret = PT_REGS_RC(ctx);
	struct flame_pending *cur, p;
	struct flame_alloc_key ak = { .tgid = id >> 32 };
	struct flame_alloc a = {};
	struct flame_key k = { .tgid = id >> 32, .kern_stack = -EFAULT };
	__u64 sp = PT_REGS_SP(ctx);

#if defined(__TARGET_ARCH_x86)
	sp -= 8; /* the return popped the return address */
#endif
	cur = bpf_map_lookup_elem(&glibc_pending, &id);
	if (!cur || cur->sp != sp)
		return;
	p = *cur;
	bpf_map_delete_elem(&glibc_pending, &id);
	/* posix_memalign returns 0 and stores the block's address. */
	if (p.out && (ret || bpf_probe_read_user(&ret, sizeof(ret), (void *)p.out)))
		return;
	/* realloc freed the old block when it moved it or was asked for 0 bytes. */
	if (p.old && (ret || !p.size)) {
		ak.addr = p.old;
		bpf_map_delete_elem(&glibc_allocs, &ak);
	}
	if (!ret)
		return;
	k.user_stack = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
	check_stack(k.user_stack);
	/* The live block first: user space drains the counts, then reads the
	 * live blocks, so every stack it drained is still kept. */
	ak.addr = ret;
	a.size = p.size;
	a.user_stack = k.user_stack;
	if (bpf_map_update_elem(&glibc_allocs, &ak, &a, BPF_ANY))
		count_drop(FLAME_DROP_ALLOCS_FULL);
	add_mem(&glibc_counts, &k, p.size);
}

SEC("uprobe")
int malloc_enter(struct pt_regs *ctx)
{
	alloc_enter(ctx, PT_REGS_PARM1(ctx), 0, 0);
	return 0;
}

SEC("uprobe")
int calloc_enter(struct pt_regs *ctx)
{
	alloc_enter(ctx, PT_REGS_PARM1(ctx) * PT_REGS_PARM2(ctx), 0, 0);
	return 0;
}

SEC("uprobe")
int realloc_enter(struct pt_regs *ctx)
{
	alloc_enter(ctx, PT_REGS_PARM2(ctx), PT_REGS_PARM1(ctx), 0);
	return 0;
}

/* memalign and aligned_alloc (alignment, size) */
SEC("uprobe")
int memalign_enter(struct pt_regs *ctx)
{
	alloc_enter(ctx, PT_REGS_PARM2(ctx), 0, 0);
	return 0;
}

/* valloc and pvalloc (size): pvalloc's rounding up to a page is not counted */
SEC("uprobe")
int valloc_enter(struct pt_regs *ctx)
{
	alloc_enter(ctx, PT_REGS_PARM1(ctx), 0, 0);
	return 0;
}

SEC("uprobe")
int posix_memalign_enter(struct pt_regs *ctx)
{
	alloc_enter(ctx, PT_REGS_PARM3(ctx), 0, PT_REGS_PARM1(ctx));
	return 0;
}

SEC("uretprobe")
int alloc_return(struct pt_regs *ctx)
{
	alloc_exit(ctx);
	return 0;
}

SEC("uprobe")
int free_enter(struct pt_regs *ctx)
{
	struct flame_alloc_key ak = { .tgid = bpf_get_current_pid_tgid() >> 32, .addr = PT_REGS_PARM1(ctx) };

	if (glibc_on && ak.addr)
		bpf_map_delete_elem(&glibc_allocs, &ak);
	return 0;
}
