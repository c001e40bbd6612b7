//go:build ignore

/* proctrack: process lifecycle for the snoop resolver and identity caches.
 *
 * Hooks (one set is loaded, chosen by the Go loader):
 *   tp_btf/sched_process_{fork,exec,exit}   preferred: BTF-typed task pointers
 *   raw_tp/sched_process_{fork,exec,exit}   fallback when the kernel BTF lacks
 *       btf_trace_sched_process_*: same arguments, read with CO-RE probe
 *       reads. Chosen over tracepoint/sched because the fork tracepoint's
 *       record holds only the child's pid (not its task, so no tgid or
 *       cgroup) and tracepoints need tracefs mounted; raw tracepoints do not.
 * Events: one fixed-size struct proctrack_event per new process (fork of a thread
 *   group leader; thread creation is not reported), per successful exec,
 *   and per process exit (when its last thread exits: signal->live == 0).
 * Maps: events (ring buffer), lost_events (failed reservations, per CPU).
 * Kernel: 5.8+ (ring buffer), BTF (CO-RE); tp_btf path 5.5+.
 */
#define GALAGO_RINGBUF
#include "common.h"

enum proctrack_event_type {
	PROCTRACK_FORK = 1,
	PROCTRACK_EXEC = 2,
	PROCTRACK_EXIT = 3,
};

struct proctrack_event {
	__u32 type;      /* enum proctrack_event_type */
	__u32 pid;       /* thread id of the task (== tgid for fork; exec makes it the leader) */
	__u32 tgid;      /* process id */
	__u32 ppid;      /* parent process id (real_parent's tgid) */
	__u64 cgroup_id; /* cgroup2 id of the process */
	__u64 timestamp_ns; /* bpf_ktime_get_ns: CLOCK_MONOTONIC */
	__u32 exit_code; /* exit: task->exit_code (status << 8 | signal); else 0 */
	__u32 _pad;
	char comm[GALAGO_TASK_COMM_LEN];
};

GALAGO_EXPORT_TYPE(struct proctrack_event, proc_event);
GALAGO_EXPORT_TYPE(enum proctrack_event_type, proc_event_type);

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

static __always_inline void emit(__u32 type, struct task_struct *task, __u64 cgid, __u32 exit_code)
{
	struct proctrack_event *e = GALAGO_RB_RESERVE(&events, struct proctrack_event);

	if (!e)
		return;
	e->type = type;
	e->pid = BPF_CORE_READ(task, pid);
	e->tgid = BPF_CORE_READ(task, tgid);
	e->ppid = BPF_CORE_READ(task, real_parent, tgid);
	e->cgroup_id = cgid;
	e->timestamp_ns = bpf_ktime_get_ns();
	e->exit_code = exit_code;
	e->_pad = 0;
	BPF_CORE_READ_STR_INTO(&e->comm, task, comm);
	GALAGO_RB_SUBMIT(&events, e);
}

static __always_inline __u64 task_cgroup_id(struct task_struct *task)
{
	return BPF_CORE_READ(task, cgroups, dfl_cgrp, kn, id);
}

static __always_inline void on_fork(struct task_struct *child)
{
	/* Threads share the process: only a new thread group is news. The
	 * child's cgroup may differ from the parent's (CLONE_INTO_CGROUP);
	 * cgroup_post_fork has already run when the tracepoint fires. */
	if (BPF_CORE_READ(child, pid) != BPF_CORE_READ(child, tgid))
		return;
	emit(PROCTRACK_FORK, child, task_cgroup_id(child), 0);
}

static __always_inline void on_exec(struct task_struct *task)
{
	emit(PROCTRACK_EXEC, task, bpf_get_current_cgroup_id(), 0);
}

static __always_inline void on_exit(struct task_struct *task)
{
	/* do_exit decrements signal->live before this tracepoint: 0 means the
	 * last thread of the process is leaving. */
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return;
	emit(PROCTRACK_EXIT, task, bpf_get_current_cgroup_id(), BPF_CORE_READ(task, exit_code));
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(tp_btf_fork, struct task_struct *parent, struct task_struct *child)
{
	on_fork(child);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(tp_btf_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	on_exec(p);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(tp_btf_exit, struct task_struct *p)
{
	on_exit(p);
	return 0;
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(raw_tp_fork, struct task_struct *parent, struct task_struct *child)
{
	on_fork(child);
	return 0;
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(raw_tp_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	on_exec(p);
	return 0;
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(raw_tp_exit, struct task_struct *p)
{
	on_exit(p);
	return 0;
}
