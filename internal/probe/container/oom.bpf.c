//go:build ignore

/* container: OOM kills per cgroup (gala-gopher container_oom,
 * oom_events_total).
 *
 * Hook: tp_btf/mark_victim (struct task_struct *task, uid_t uid), fired
 *   for each thread the OOM killer marks (memcg and global OOM alike), with
 *   the victim itself, not the task that ran out of memory: in a pod with a
 *   pod-level limit the victim may be another container's process. A
 *   process whose memory is not freed yet can be marked again through
 *   another of its threads by a later OOM (the kernel does not count that
 *   as a kill): oom_seen keeps the processes already counted (tgid and
 *   start time), so each killed process counts once, as memory.events'
 *   oom_kill does.
 * Outputs:
 * - oom_kills, keyed by the victim's cgroups (struct oom_key): the
 *   kernfs id of its memory controller cgroup (the v1 memory hierarchy's
 *   directory on legacy and hybrid hosts, the cgroup2 directory on unified
 *   ones; 0 without the memory controller) and of its cgroup2 directory
 *   (bpf_get_current_cgroup_id's id; the root's on legacy hosts). A kernfs
 *   id is the directory's inode number. The value counts kills since load;
 *   user space reads the map once per report period and never clears it.
 * - victims, a ring buffer of one struct oom_victim per kill (the victim's
 *   pid, tgid, comm, oom_score_adj and the same cgroup ids), for the
 *   per-process proc_oom table and its abnormal event. A full ring loses
 *   the record (counted in lost_events); oom_kills still counts it.
 * Kernel: 6.8+ (mark_victim takes the task since then), BTF.
 */
#define GALAGO_RINGBUF
#include "common.h"

struct oom_key {
	__u64 memcg_id;
	__u64 cgroup_id;
};

struct oom_proc {
	__u64 start_time; /* the thread group leader's, ns since boot */
	__u32 tgid;
	__u32 pad;
};

/* Processes already counted; LRU: a forgotten one is long dead. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct oom_proc);
	__type(value, __u8);
} oom_seen SEC(".maps");

struct oom_victim {
	__u64 memcg_id;
	__u64 cgroup_id;
	__u32 pid;
	__u32 tgid;
	__s32 oom_score_adj;
	__u32 uid;
	char comm[GALAGO_TASK_COMM_LEN];
};

GALAGO_EXPORT_TYPE(struct oom_key, oom_key);
GALAGO_EXPORT_TYPE(struct oom_victim, oom_victim);

/* OOM kills are rare: 64 KiB holds about 1300 records. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} victims SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct oom_key);
	__type(value, __u64);
} oom_kills SEC(".maps");

SEC("tp_btf/mark_victim")
int BPF_PROG(mark_victim, struct task_struct *task, uid_t uid)
{
	struct oom_key key = {};
	struct oom_proc proc = {
		.start_time = BPF_CORE_READ(task, group_leader, start_time),
		.tgid = BPF_CORE_READ(task, tgid),
	};
	__u8 yes = 1;

	if (bpf_map_update_elem(&oom_seen, &proc, &yes, BPF_NOEXIST) != 0)
		return 0; /* this process was counted already */

	struct css_set *cset = BPF_CORE_READ(task, cgroups);
	struct cgroup_subsys_state *css = NULL;
	int mem = bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id);

	key.cgroup_id = BPF_CORE_READ(cset, dfl_cgrp, kn, id);
	if (mem >= 0 && mem < 32) {
		void *slot = (void *)cset + bpf_core_field_offset(struct css_set, subsys) +
			     mem * sizeof(css);
		if (bpf_probe_read_kernel(&css, sizeof(css), slot) == 0 && css)
			key.memcg_id = BPF_CORE_READ(css, cgroup, kn, id);
	}

	struct oom_victim *v = GALAGO_RB_RESERVE(&victims, struct oom_victim);
	if (v) {
		v->memcg_id = key.memcg_id;
		v->cgroup_id = key.cgroup_id;
		v->pid = BPF_CORE_READ(task, pid);
		v->tgid = BPF_CORE_READ(task, tgid);
		v->oom_score_adj = BPF_CORE_READ(task, signal, oom_score_adj);
		v->uid = uid;
		BPF_CORE_READ_STR_INTO(&v->comm, task, comm);
		bpf_ringbuf_submit(v, 0);
	}

	__u64 one = 1, *n = bpf_map_lookup_elem(&oom_kills, &key);
	if (n)
		__sync_fetch_and_add(n, 1);
	else if (bpf_map_update_elem(&oom_kills, &key, &one, BPF_NOEXIST) != 0 &&
		 (n = bpf_map_lookup_elem(&oom_kills, &key)))
		__sync_fetch_and_add(n, 1);
	return 0;
}
