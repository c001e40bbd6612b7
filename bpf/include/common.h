/* common.h: what every galago BPF program shares.
 *
 * Include it after nothing else:  #include "common.h"
 * Opt-in parts, enabled by a define before the include:
 *   GALAGO_RINGBUF  the lost_events counter map, GALAGO_RB_RESERVE (a
 *                   reserve that counts its failures) and galago_rb_flags()
 *                   (batched wake-ups). internal/bpfrt.Reader consumes both.
 *   GALAGO_FILTER   the snooper filter: the variable galago_filter_cfg, the
 *                   maps filter_tgids, filter_cgroups, filter_pending,
 *                   filter_decided, filter_pending_lost, the programs galago_filter_fork and
 *                   galago_filter_exec (tp_btf/sched_process_fork, _exec)
 *                   and galago_observed(). internal/bpfrt.FilterSync keeps
 *                   them equal to a probe's snoop.Targets and attaches the
 *                   two programs.
 * Map and variable names here are an ABI with internal/bpfrt: change both. */
#ifndef GALAGO_COMMON_H
#define GALAGO_COMMON_H

#include "vmlinux.h"
#include "bpf/bpf_helpers.h"
#include "bpf/bpf_tracing.h"
#include "bpf/bpf_core_read.h"
#include "bpf/bpf_endian.h"

/* Several helpers (bpf_probe_read_kernel, ring buffer, cgroup id) are GPL-only. */
char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define GALAGO_TASK_COMM_LEN 16

#ifndef likely
#define likely(x) __builtin_expect(!!(x), 1)
#endif
#ifndef unlikely
#define unlikely(x) __builtin_expect(!!(x), 0)
#endif

/* Forces a type into the object's BTF so bpf2go -type can generate it even
 * when no map or program mentions it directly. */
#define GALAGO_EXPORT_TYPE(T, name) const T *__galago_export_##name __attribute__((unused))

#ifdef GALAGO_RINGBUF

/* lost_events[0], per CPU: ring buffer reservations that failed (ring
 * full). The reader sums the CPUs and reports the growth as lost events. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost_events SEC(".maps");

/* Wake the reader only when at least this many bytes wait in the ring (set
 * by the loader before load: N records, or a fill fraction of the ring,
 * whichever is smaller). 0 keeps the kernel's default (wake when the reader
 * has caught up). The Go reader also polls on a deadline, so records below
 * the threshold are never stranded. */
const volatile __u64 galago_rb_wakeup_bytes = 0;

static __always_inline void galago_count_lost(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&lost_events, &zero);

	if (n)
		*n += 1; /* per-CPU slot: no atomic needed */
}

/* GALAGO_RB_RESERVE(&ring, struct ev) reserves one record and counts a
 * failure in lost_events; evaluates to the record pointer or NULL. */
#define GALAGO_RB_RESERVE(rb, type)                                            \
	({                                                                     \
		type *__rec = bpf_ringbuf_reserve((rb), sizeof(type), 0);      \
		if (!__rec)                                                    \
			galago_count_lost();                                   \
		__rec;                                                         \
	})

/* galago_rb_flags_for: the wake-up flags for a record of size bytes given
 * pending, the bytes waiting in the ring with the record counted. */
static __always_inline __u64 galago_rb_flags_for(__u64 pending, __u64 size)
{
	__u64 threshold = galago_rb_wakeup_bytes;
	/* Each record carries an 8-byte header and is padded to 8 bytes. */
	__u64 rec = (size + 8 + 7) & ~7ULL;

	if (!threshold)
		return 0;
	if (pending >= threshold && (pending - threshold) % threshold < rec)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

/* Flags for bpf_ringbuf_submit of a record of size bytes: wake the reader
 * when the pending data crosses the threshold, and again each further
 * threshold's worth while it stays behind, rather than on every record
 * above it, which would raise an IPI per record exactly when the machine
 * is busiest. A crossing missed because another CPU reserved in between is
 * caught at the next multiple; the reader's poll deadline bounds the rest. */
static __always_inline __u64 galago_rb_flags(void *rb, __u64 size)
{
	if (!galago_rb_wakeup_bytes)
		return 0;
	/* The producer position moved at reserve time: pending counts this
	 * record already. */
	return galago_rb_flags_for(bpf_ringbuf_query(rb, BPF_RB_AVAIL_DATA), size);
}

/* GALAGO_RB_SUBMIT(&ring, rec) submits with batched wake-ups. */
#define GALAGO_RB_SUBMIT(rb, rec)                                              \
	bpf_ringbuf_submit((rec), galago_rb_flags((rb), sizeof(*(rec))))

/* galago_rb_output copies a variable-size record of size bytes (at most
 * the ring's size; a bounded scalar) into the ring with batched wake-ups,
 * counting a failure in lost_events. For records whose size is only known
 * at run time (bpf_ringbuf_reserve needs a constant). */
static __always_inline void galago_rb_output(void *rb, void *data, __u64 size)
{
	__u64 flags = 0;

	if (galago_rb_wakeup_bytes)
		flags = galago_rb_flags_for(bpf_ringbuf_query(rb, BPF_RB_AVAIL_DATA) + ((size + 8 + 7) & ~7ULL), size);
	if (bpf_ringbuf_output(rb, data, size, flags))
		galago_count_lost();
}

#endif /* GALAGO_RINGBUF */

#ifdef GALAGO_FILTER

enum galago_filter_mode {
	GALAGO_FILTER_OFF = 0,       /* observe everything */
	GALAGO_FILTER_WHITELIST = 1, /* only listed tgids / cgroups */
	GALAGO_FILTER_BLACKLIST = 2, /* everything except listed ones */
};

/* Flag ORed into galago_filter_cfg with a whitelist that follows running
 * processes (proc_name, container or pod selectors): a process that forks
 * or execs is observed from that moment until user space has classified it
 * (see filter_pending), so a matching process is seen from its first
 * syscall even if it lives for a millisecond. */
#define GALAGO_FILTER_F_PENDING 0x100
#define GALAGO_FILTER_MODE_MASK 0xff

/* galago_filter_cfg is an enum galago_filter_mode plus flags; a run-time
 * global (not a const: snoopers change while the probe runs), read without
 * a helper call on every filter check. */
volatile __u32 galago_filter_cfg = 0;

#ifndef GALAGO_FILTER_MAX_TGIDS
#define GALAGO_FILTER_MAX_TGIDS 10240
#endif
#ifndef GALAGO_FILTER_MAX_CGROUPS
#define GALAGO_FILTER_MAX_CGROUPS 4096
#endif
#ifndef GALAGO_FILTER_MAX_PENDING
#define GALAGO_FILTER_MAX_PENDING 16384
#endif

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GALAGO_FILTER_MAX_TGIDS);
	__type(key, __u32);  /* tgid */
	__type(value, __u8); /* 1 */
} filter_tgids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GALAGO_FILTER_MAX_CGROUPS);
	__type(key, __u64);  /* cgroup2 id (inode of the cgroup2 directory) */
	__type(value, __u8); /* 1 */
} filter_cgroups SEC(".maps");

/* Pending classification. filter_pending[tgid] is the time (bpf_ktime_get_ns,
 * CLOCK_MONOTONIC) of the process's last fork or exec, written by the
 * galago_filter_fork/exec programs while GALAGO_FILTER_F_PENDING is set;
 * filter_decided[tgid] is the time user space last classified the process
 * (what it read then reflects every exec before it). A process is pending,
 * and observed, while its last fork/exec is newer than its classification.
 * The kernel never deletes and user space never races an exec: a new exec
 * makes the process pending again until user space catches up. User space
 * removes both entries of processes that have exited. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GALAGO_FILTER_MAX_PENDING);
	__type(key, __u32);   /* tgid */
	__type(value, __u64); /* last fork/exec, ns */
} filter_pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GALAGO_FILTER_MAX_PENDING);
	__type(key, __u32);   /* tgid */
	__type(value, __u64); /* classified at, ns */
} filter_decided SEC(".maps");

/* filter_pending_lost[0], per CPU: forks/execs that could not be marked
 * pending (filter_pending full): such a process is only observed once user
 * space has classified it. User space reports these as lost events. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} filter_pending_lost SEC(".maps");

static __always_inline __u32 galago_filter_mode_get(void)
{
	return galago_filter_cfg;
}

static __always_inline bool galago_tgid_listed(__u32 tgid)
{
	return bpf_map_lookup_elem(&filter_tgids, &tgid) != NULL;
}

static __always_inline bool galago_cgroup_listed(__u64 cgid)
{
	return bpf_map_lookup_elem(&filter_cgroups, &cgid) != NULL;
}

/* galago_tgid_pending: has tgid forked or exec'd since user space last
 * classified it? */
static __always_inline bool galago_tgid_pending(__u32 tgid)
{
	__u64 *at = bpf_map_lookup_elem(&filter_pending, &tgid);
	__u64 *decided;

	if (!at)
		return false;
	decided = bpf_map_lookup_elem(&filter_decided, &tgid);
	return !decided || *at > *decided;
}

/* galago_filter_decide: the filter's answer for a process, given whether
 * its tgid or cgroup is listed, under galago_filter_cfg = raw. */
static __always_inline bool galago_filter_decide(__u32 raw, bool listed, __u32 tgid)
{
	__u32 mode = raw & GALAGO_FILTER_MODE_MASK;

	if (mode == GALAGO_FILTER_WHITELIST)
		return listed || ((raw & GALAGO_FILTER_F_PENDING) && galago_tgid_pending(tgid));
	return !listed;
}

/* galago_observed_in: is process tgid, running in cgroup cgid, observed? */
static __always_inline bool galago_observed_in(__u32 tgid, __u64 cgid)
{
	__u32 raw = galago_filter_mode_get();

	if ((raw & GALAGO_FILTER_MODE_MASK) == GALAGO_FILTER_OFF)
		return true;
	return galago_filter_decide(raw, galago_tgid_listed(tgid) || galago_cgroup_listed(cgid), tgid);
}

/* galago_observed: the filter check where the current task is the one acted
 * on (syscalls, most tracepoints, uprobes); in softirq or scheduler context
 * use galago_observed_in with the target's tgid and cgroup id. The cgroup id
 * is only fetched when the tgid is not listed. */
static __always_inline bool galago_observed(__u32 tgid)
{
	__u32 raw = galago_filter_mode_get();

	if ((raw & GALAGO_FILTER_MODE_MASK) == GALAGO_FILTER_OFF)
		return true;
	return galago_filter_decide(raw, galago_tgid_listed(tgid) || galago_cgroup_listed(bpf_get_current_cgroup_id()),
				    tgid);
}

static __always_inline void galago_filter_mark_pending(__u32 tgid)
{
	__u32 raw = galago_filter_mode_get();
	__u64 now;

	if ((raw & GALAGO_FILTER_MODE_MASK) != GALAGO_FILTER_WHITELIST || !(raw & GALAGO_FILTER_F_PENDING))
		return;
	now = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&filter_pending, &tgid, &now, BPF_ANY)) {
		__u32 zero = 0;
		__u64 *n = bpf_map_lookup_elem(&filter_pending_lost, &zero);

		if (n)
			*n += 1;
	}
}

/* A new process (a new thread group: threads share their process's
 * classification). The tracepoint runs in the parent. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(galago_filter_fork, struct task_struct *parent, struct task_struct *child)
{
	if (child->pid == child->tgid)
		galago_filter_mark_pending(child->tgid);
	return 0;
}

/* A new program: its comm and cmdline changed, so its classification may. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(galago_filter_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	galago_filter_mark_pending(p->tgid);
	return 0;
}

#endif /* GALAGO_FILTER */

#endif /* GALAGO_COMMON_H */
