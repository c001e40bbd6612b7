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
 * Maps: stacks (BPF_MAP_TYPE_STACK_TRACE, ids are bucket indices; a bucket
 *   holding another stack gives -EEXIST: counted as a drop), oncpu_counts and
 *   offcpu_counts (struct flame_key -> samples / ns), offcpu_start,
 *   drops (per CPU, enum flame_drop). User space drains the counts maps and
 *   deletes the stacks they named every drain period.
 *   A sample whose stack could not be recorded is still counted, with the
 *   negative error in its stack id, so totals stay exact.
 * Filter: snoopers via GALAGO_FILTER (galago_observed for the sampled task,
 *   galago_observed_in for the task switched out).
 * Kernel: 5.15+ (BPF link for perf events), BTF for tp_btf.
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
	FLAME_DROP_N = 4,
};

GALAGO_EXPORT_TYPE(struct flame_key, flame_key);
GALAGO_EXPORT_TYPE(struct flame_start, flame_start);
GALAGO_EXPORT_TYPE(enum flame_drop, flame_drop);

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
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FLAME_DROP_N);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

/* offcpu_on: off-CPU accounting runs only while user space sets it (the
 * offcpu sub-item), so the sched_switch program costs one load otherwise. */
volatile __u32 offcpu_on = 0;

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
