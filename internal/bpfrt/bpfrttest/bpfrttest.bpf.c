//go:build ignore

/* bpfrttest: a BPF object for internal/bpfrt's own tests, exercising
 * common.h exactly as probes use it.
 *
 * Hooks:
 *   raw_tp/galago_test_emit  never attached; driven by BPF_PROG_TEST_RUN,
 *       one record per run: deterministic ring buffer loss tests.
 *   raw_tp/sys_enter         one record per syscall number target_syscall
 *       by an observed process (galago_observed): filter tests.
 * Maps: events (ring buffer), lost_events, filter_mode/tgids/cgroups.
 */
#define GALAGO_RINGBUF
#define GALAGO_FILTER
#include "common.h"

struct bpfrttest_event {
	__u64 seq;  /* emit: the run number; sys_enter: 0 */
	__u32 tgid;
	__u32 _pad;
	__u64 cgroup_id;
	__u64 filler[4]; /* 56 bytes: 64 with the ring header */
};

GALAGO_EXPORT_TYPE(struct bpfrttest_event, event);

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

const volatile __u64 target_syscall = 0;

/* runs[0]: number of emit runs, the sequence number source. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} runs SEC(".maps");

static __always_inline void emit(__u64 seq, __u32 tgid)
{
	struct bpfrttest_event *e = GALAGO_RB_RESERVE(&events, struct bpfrttest_event);

	if (!e)
		return;
	__builtin_memset(e, 0, sizeof(*e));
	e->seq = seq;
	e->tgid = tgid;
	e->cgroup_id = bpf_get_current_cgroup_id();
	GALAGO_RB_SUBMIT(&events, e);
}

SEC("raw_tp/galago_test_emit")
int test_emit(void *ctx)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&runs, &zero);

	if (!n)
		return 0;
	*n += 1;
	emit(*n, bpf_get_current_pid_tgid() >> 32);
	return 0;
}

SEC("raw_tp/sys_enter")
int BPF_PROG(test_sys_enter, struct pt_regs *regs, long id)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (id != target_syscall || !galago_observed(tgid))
		return 0;
	emit(0, tgid);
	return 0;
}
