//go:build ignore

/* proc: per-process off-CPU and I/O-wait time for the proc probe's
 * proc_offcpu sub-item (table proc_cpu). The syscall tables come from the
 * shared syscall capture (internal/syscap), not from here.
 *
 * Hooks:
 *   tp_btf/sched_switch  proc_sched_switch: the thread going off CPU (prev)
 *       of an observed process leaves its switch time and whether it waits
 *       for I/O (task_struct.in_iowait, set by io_schedule) in its task
 *       storage; the thread coming on CPU (next) adds the time since then
 *       to its process's row. As in gala-gopher, every switch counts
 *       (preempted threads too): off-CPU time is all the time a thread was
 *       not running. Exiting threads' last switch (TASK_DEAD) is not.
 * Maps: cpu_stats (hash tgid -> struct proc_cpu_val, read and deleted by
 *   user space each period), cpu_lost (per CPU: intervals dropped because
 *   cpu_stats was full), off_starts (task storage, freed with the thread),
 *   filter_* (common.h).
 * Kernel: 5.11+ (task storage in tracing programs), tp_btf, BTF. */
#define GALAGO_FILTER
#include "common.h"

#define TASK_DEAD 0x80

struct proc_cpu_val {
	__u64 offcpu_ns;
	__u64 iowait_ns; /* part of offcpu_ns spent waiting for I/O */
};

GALAGO_EXPORT_TYPE(struct proc_cpu_val, cpu_val);

struct off_start {
	__u64 ts;
	__u32 iowait;
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, __u32); /* tgid */
	__type(value, struct proc_cpu_val);
} cpu_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} cpu_lost SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct off_start);
} off_starts SEC(".maps");

static __always_inline struct proc_cpu_val *cpu_row(__u32 tgid)
{
	struct proc_cpu_val zero = {}, *v;

	v = bpf_map_lookup_elem(&cpu_stats, &tgid);
	if (v)
		return v;
	bpf_map_update_elem(&cpu_stats, &tgid, &zero, BPF_NOEXIST);
	v = bpf_map_lookup_elem(&cpu_stats, &tgid);
	if (!v) {
		__u32 z = 0;
		__u64 *lost = bpf_map_lookup_elem(&cpu_lost, &z);

		if (lost)
			*lost += 1;
	}
	return v;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(proc_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state)
{
	__u64 now = bpf_ktime_get_ns();
	struct proc_cpu_val *v;
	struct off_start *s;

	/* current is still prev: its cgroup is the one to filter on. */
	if (prev->pid && !(prev_state & TASK_DEAD) && galago_observed_in(prev->tgid, bpf_get_current_cgroup_id())) {
		s = bpf_task_storage_get(&off_starts, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (s) {
			s->ts = now;
			s->iowait = BPF_CORE_READ_BITFIELD_PROBED(prev, in_iowait);
		}
	}
	if (!next->pid)
		return 0;
	s = bpf_task_storage_get(&off_starts, next, 0, 0);
	if (!s || !s->ts)
		return 0;
	if (now > s->ts) {
		v = cpu_row(next->tgid);
		if (v) {
			__sync_fetch_and_add(&v->offcpu_ns, now - s->ts);
			if (s->iowait)
				__sync_fetch_and_add(&v->iowait_ns, now - s->ts);
		}
	}
	s->ts = 0;
	return 0;
}
