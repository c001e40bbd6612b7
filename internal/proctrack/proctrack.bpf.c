//go:build ignore

/* proctrack: process lifecycle for the snoop resolver and identity caches.
 *
 * Hooks (one set is loaded, chosen by the Go loader):
 *   tp_btf/sched_process_{fork,exec,exit}   preferred: BTF-typed task pointers
 *   tp_btf/cgroup_{mkdir,rmdir}          a cgroup directory made or removed, in
 *       any hierarchy (cgroup2 and every v1 one): how a container is known
 *       as its runtime creates its cgroups, before its first process, and
 *       forgotten when they go (optional: the loader attaches them when
 *       the kernel has them).
 *   raw_tp/sched_process_{fork,exec,exit}, raw_tp/cgroup_{mkdir,rmdir}
 *       fallback when the kernel BTF lacks
 *       btf_trace_sched_process_*: same arguments, read with CO-RE probe
 *       reads. Chosen over tracepoint/sched because the fork tracepoint's
 *       record holds only the child's pid (not its task, so no tgid or
 *       cgroup) and tracepoints need tracefs mounted; raw tracepoints do not.
 * Events: one fixed-size struct proctrack_event per new process (fork of a thread
 *   group leader; thread creation is not reported), per successful exec,
 *   and per process exit (when its last thread exits: signal->live == 0),
 *   and per cgroup directory made or removed (PROCTRACK_CGROUP_*: the
 *   cgroup's kernfs id, its hierarchy id (0 is cgroup2) and, where the
 *   process events have their cmdline, the cgroup's path in its
 *   hierarchy; current is the task that made or removed it).
 *   Fork and exec records carry what the snoopers match and the labels need
 *   (comm, start time, the first PROCTRACK_CMDLINE_MAX bytes of the argument
 *   area), read in the kernel at the event, so a process that exits before
 *   user space reads /proc is still classified and labelled. Records are
 *   variable-size: the fixed part, then cmdline_len bytes of cmdline.
 * Maps: events (ring buffer), lost_events (failed reservations, per CPU).
 * Kernel: 5.8+ (ring buffer), BTF (CO-RE); tp_btf path 5.5+.
 */
#define GALAGO_RINGBUF
#include "common.h"

enum proctrack_event_type {
	PROCTRACK_FORK = 1,
	PROCTRACK_EXEC = 2,
	PROCTRACK_EXIT = 3,
	PROCTRACK_CGROUP_MKDIR = 4,
	PROCTRACK_CGROUP_RMDIR = 5,
};

/* As much of the argument area as gala-gopher's cmdline match reads from
 * /proc/<pid>/cmdline: a cmdline snooper matches a process that is gone
 * before user space reads /proc. */
#define PROCTRACK_CMDLINE_MAX 4096

struct proctrack_event {
	__u32 type;      /* enum proctrack_event_type */
	__u32 pid;       /* thread id of the task (== tgid for fork; exec makes it the leader) */
	__u32 tgid;      /* process id */
	__u32 ppid;      /* parent process id (real_parent's tgid) */
	__u64 cgroup_id; /* cgroup2 id of the process; cgroup events: the cgroup's kernfs id */
	__u64 timestamp_ns; /* bpf_ktime_get_ns: CLOCK_MONOTONIC */
	__u64 start_boottime_ns; /* task->start_boottime: /proc/<pid>/stat starttime in ns */
	__u32 exit_code; /* exit: task->exit_code (status << 8 | signal); else 0 */
	__u32 cmdline_len; /* bytes of cmdline that follow (fork, exec; the path for cgroup events), <= PROCTRACK_CMDLINE_MAX */
	__u32 cmdline_size; /* bytes of the whole argument area (may exceed cmdline_len) */
	__u32 hierarchy_id; /* cgroup events: the cgroup's hierarchy, 0 for cgroup2; else 0 */
	char comm[GALAGO_TASK_COMM_LEN];
	char cmdline[PROCTRACK_CMDLINE_MAX]; /* NUL-separated arguments, as /proc/<pid>/cmdline;
					      * only cmdline_len bytes are in the record */
};

GALAGO_EXPORT_TYPE(struct proctrack_event, proc_event);
GALAGO_EXPORT_TYPE(enum proctrack_event_type, proc_event_type);

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1024 * 1024);
} events SEC(".maps");

/* The record is built here (too large for the stack), then copied into the
 * ring at its actual size. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct proctrack_event);
} scratch SEC(".maps");

/* read_cmdline copies the start of the current task's argument area (the
 * new program's after exec; a forked child's is a copy of its parent's, the
 * current task at fork). The pages were just written by exec or are the
 * parent's live stack, so the read does not fault in practice; when it
 * does, cmdline_len stays 0 and user space reads /proc instead. */
static __always_inline void read_cmdline(struct proctrack_event *e)
{
	struct task_struct *cur = (struct task_struct *)bpf_get_current_task();
	__u64 start = BPF_CORE_READ(cur, mm, arg_start);
	__u64 end = BPF_CORE_READ(cur, mm, arg_end);
	__u64 n;

	e->cmdline_len = 0;
	e->cmdline_size = 0;
	if (!start || end <= start)
		return;
	n = end - start;
	e->cmdline_size = n > 0xffffffffULL ? 0xffffffffU : (__u32)n;
	if (n > PROCTRACK_CMDLINE_MAX)
		n = PROCTRACK_CMDLINE_MAX;
	if (bpf_probe_read_user(e->cmdline, n, (void *)start) == 0)
		e->cmdline_len = n;
}

static __always_inline void emit(__u32 type, struct task_struct *task, __u64 cgid, __u32 exit_code)
{
	__u32 zero = 0;
	struct proctrack_event *e = bpf_map_lookup_elem(&scratch, &zero);
	__u64 size;

	if (!e)
		return;
	e->type = type;
	e->pid = BPF_CORE_READ(task, pid);
	e->tgid = BPF_CORE_READ(task, tgid);
	e->ppid = BPF_CORE_READ(task, real_parent, tgid);
	e->cgroup_id = cgid;
	e->timestamp_ns = bpf_ktime_get_ns();
	e->start_boottime_ns = BPF_CORE_READ(task, start_boottime);
	e->exit_code = exit_code;
	e->hierarchy_id = 0;
	BPF_CORE_READ_STR_INTO(&e->comm, task, comm);
	if (type == PROCTRACK_EXIT) {
		e->cmdline_len = 0;
		e->cmdline_size = 0;
	} else {
		read_cmdline(e);
	}
	size = e->cmdline_len;
	if (size > PROCTRACK_CMDLINE_MAX)
		size = PROCTRACK_CMDLINE_MAX;
	galago_rb_output(&events, e, offsetof(struct proctrack_event, cmdline) + size);
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

/* emit_cgroup reports a cgroup directory made or removed: its id, its
 * hierarchy and its path (cgroup_path: relative to the hierarchy's root,
 * the form /proc/<pid>/cgroup gives). */
static __always_inline void emit_cgroup(__u32 type, struct cgroup *cgrp, const char *path)
{
	__u32 zero = 0;
	struct proctrack_event *e = bpf_map_lookup_elem(&scratch, &zero);
	__u64 id = bpf_get_current_pid_tgid();
	long n;

	if (!e)
		return;
	e->type = type;
	e->pid = (__u32)id;
	e->tgid = id >> 32;
	e->ppid = 0;
	e->cgroup_id = BPF_CORE_READ(cgrp, kn, id);
	e->timestamp_ns = bpf_ktime_get_ns();
	e->start_boottime_ns = 0;
	e->exit_code = 0;
	e->hierarchy_id = BPF_CORE_READ(cgrp, root, hierarchy_id);
	e->cmdline_size = 0;
	bpf_get_current_comm(&e->comm, sizeof(e->comm));
	n = bpf_probe_read_kernel_str(e->cmdline, PROCTRACK_CMDLINE_MAX, path);
	/* The path without its NUL; nothing when it could not be read. */
	e->cmdline_len = n > 1 ? n - 1 : 0;
	galago_rb_output(&events, e, offsetof(struct proctrack_event, cmdline) + (e->cmdline_len & (PROCTRACK_CMDLINE_MAX - 1)));
}

SEC("tp_btf/cgroup_mkdir")
int BPF_PROG(tp_btf_cgroup_mkdir, struct cgroup *cgrp, const char *path)
{
	emit_cgroup(PROCTRACK_CGROUP_MKDIR, cgrp, path);
	return 0;
}

SEC("tp_btf/cgroup_rmdir")
int BPF_PROG(tp_btf_cgroup_rmdir, struct cgroup *cgrp, const char *path)
{
	emit_cgroup(PROCTRACK_CGROUP_RMDIR, cgrp, path);
	return 0;
}

SEC("raw_tp/cgroup_mkdir")
int BPF_PROG(raw_tp_cgroup_mkdir, struct cgroup *cgrp, const char *path)
{
	emit_cgroup(PROCTRACK_CGROUP_MKDIR, cgrp, path);
	return 0;
}

SEC("raw_tp/cgroup_rmdir")
int BPF_PROG(raw_tp_cgroup_rmdir, struct cgroup *cgrp, const char *path)
{
	emit_cgroup(PROCTRACK_CGROUP_RMDIR, cgrp, path);
	return 0;
}
