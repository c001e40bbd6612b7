//go:build ignore

/* sli: node and container service-level latencies for the sli probe
 * (gala-gopher's sliprobe): where the time of the tasks went while they
 * were not running, waited for memory or for block I/O.
 *
 * Hooks (all tp_btf; attached per sub-item by user space):
 *   sched_switch  the thread going off CPU (prev) leaves in its task
 *       storage either the start of a run delay (preempted, or prev_state
 *       RUNNING: it stays runnable) or the start and kind of a sleep
 *       (TASK_INTERRUPTIBLE: sleep; TASK_UNINTERRUPTIBLE: iowait when
 *       in_iowait is set, else block; TASK_IDLE/NOLOAD sleeps of idle
 *       kernel threads are not counted); the thread coming on CPU (next)
 *       ends its run delay: SLI_RUNDELAY. With queued_clock (the kernel
 *       keeps sched_info.last_queued, CONFIG_SCHED_INFO) it also ends
 *       next's sleep at the time the kernel queued it, and nothing else
 *       is attached for cpu. Times are the run queue's clock.
 *   sched_wakeup, sched_wakeup_new  (without queued_clock only) end the
 *       woken thread's sleep (SLI_SLEEP, SLI_IOWAIT, SLI_BLOCK) and start
 *       its run delay, as the kernel's sched_info does when it queues a
 *       task.
 *   mm_vmscan_direct_reclaim_begin/end, mm_vmscan_memcg_reclaim_begin/end
 *       direct reclaim by the allocating task, global or at its memory
 *       cgroup's limit: SLI_RECLAIM.
 *   mm_compaction_begin/end  compaction of one zone by a user task (direct
 *       compaction; kcompactd's background work is no task's latency):
 *       SLI_COMPACT.
 *   block_bio_queue, block_rq_complete, block_bio_complete  a bio's
 *       submission to its completion (bio.h, shared with the proc probe),
 *       attributed to the submitting task: SLI_BIO.
 *   sched_process_exit  an exiting thread's scheduler latencies not yet
 *       taken go to its row (below), so short-lived threads count whole.
 *   iter/task  sli_take: user space's walk over every thread at the end of
 *       a period, writing what each one accumulated in it (struct
 *       sli_task_rec) with the cgroup it counts in.
 * Where the latencies go: a scheduler latency (run delay, sleep, iowait,
 *   block: one or two per context switch) is added to the thread's own
 *   task storage, in the half of it for the current period (period, a
 *   counter user space advances; struct task_state), which sched_switch
 *   already holds: no map lookup and no filter question per switch. The
 *   walk (sli_take) or the thread's exit (sli_exit) takes each half once
 *   (taken). Every other latency, and a scheduler latency of a thread
 *   without storage or past its exit, is added to one row of a map:
 *   node_stats (per-CPU array of two rows: the programs add to row
 *   node_slot, user space flips node_slot each period and takes the other
 *   one) or con_stats (per-CPU hash cgroup2 id -> struct sli_row:
 *   observed cgroups, taken by user space with lookup-and-delete every
 *   period): its cgroup's if it has one, else node_stats (row_for). The
 *   node's figures are node_stats plus every con_stats row and every
 *   thread's record. sli_lost
 *   (per CPU: latencies dropped because con_stats was full, submissions
 *   because bio_starts was), task_state (task storage), bio_starts (bio.h:
 *   hash bio -> submission; user space deletes the stale), filter_*
 *   (common.h).
 * Kernel: 5.11+ (task storage in tracing programs), tp_btf, BTF. */
#define GALAGO_FILTER
#include "common.h"
#include "atomic.h"
#include "bio.h"

#define TASK_RUNNING 0x0
#define TASK_INTERRUPTIBLE 0x1
#define TASK_UNINTERRUPTIBLE 0x2
#define TASK_DEAD 0x80
#define TASK_NOLOAD 0x400
#define PF_KTHREAD 0x00200000

enum sli_kind {
	SLI_RUNDELAY = 0,
	SLI_SLEEP = 1,
	SLI_IOWAIT = 2,
	SLI_BLOCK = 3,
	SLI_RECLAIM = 4,
	SLI_COMPACT = 5,
	SLI_BIO = 6,
	SLI_KIND_MAX = 7,
};

/* Histogram upper bounds, ns: 1 µs, 10 µs, 100 µs, 1 ms, 10 ms, 100 ms,
 * 1 s; the last bucket is everything longer. Mirrored in Go (bounds). */
#define SLI_NBUCKETS 8

struct sli_stat {
	__u64 ns;    /* summed latency */
	__u64 count; /* latencies summed */
	__u64 max;   /* the longest */
	__u64 buckets[SLI_NBUCKETS];
};

struct sli_row {
	struct sli_stat s[SLI_KIND_MAX];
};

/* The scheduler kinds (SLI_RUNDELAY..SLI_BLOCK), which a thread keeps in
 * its task storage. */
#define SLI_SCHED_KINDS (SLI_BLOCK + 1)

struct sli_sched {
	struct sli_stat s[SLI_SCHED_KINDS];
};

/* sli_task_rec: one thread's scheduler latencies of a period, written by
 * sli_take. cgid: the cgroup2 id they count in (keep_cgid), 0 for the
 * node alone. */
struct sli_task_rec {
	__u64 cgid;
	struct sli_sched sched;
};

GALAGO_EXPORT_TYPE(enum sli_kind, kind);
GALAGO_EXPORT_TYPE(struct sli_row, row);
GALAGO_EXPORT_TYPE(struct sli_task_rec, task_rec);

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32); /* node_slot */
	__type(value, struct sli_row);
} node_stats SEC(".maps");

/* Per CPU, like node_stats: a container's threads on several CPUs would
 * otherwise bounce one row's cache lines between them at every switch. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096);
	__type(key, __u64); /* cgroup2 id */
	__type(value, struct sli_row);
} con_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sli_lost SEC(".maps");

struct task_state {
	__u64 off_ts;     /* went to sleep at */
	__u64 wait_ts;    /* runnable, waiting for a CPU since */
	__u64 reclaim_ts; /* in direct reclaim since */
	__u64 compact_ts; /* compacting a zone since */
	__u64 run_delay;  /* sched_info.run_delay when it went off CPU */
	__u32 off_kind;   /* enum sli_kind of the sleep */
	__u32 exited;     /* past sched_process_exit: latencies go to rows */
	__u64 gen[2];     /* the period each half of sched holds (0: none) */
	__u64 taken;      /* the last period whose half was taken */
	struct sli_sched sched[2]; /* by period parity */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_state);
} task_state SEC(".maps");

/* node_on: node rows are kept; con_on: rows of observed cgroups are. */
volatile __u32 node_on = 0;
volatile __u32 con_on = 0;
/* node_slot: the node_stats row the programs add to; user space flips it
 * each period and then takes the other one, which nothing writes. */
volatile __u32 node_slot = 0;
/* period: the current period (from 1); user space advances it, then walks
 * the threads (sli_take) for the one that ended. */
volatile __u64 period = 1;

/* queued_clock (set before load when the kernel's task_struct has
 * sched_info.last_queued, CONFIG_SCHED_INFO): sched_switch alone times
 * sleeps and run delays from the kernel's own queueing time; the wakeup
 * programs are not attached. */
const volatile __u32 queued_clock = 0;

static __always_inline __u32 bucket_of(__u64 ns)
{
	__u64 bound = 1000;

	for (__u32 i = 0; i < SLI_NBUCKETS - 1; i++) {
		if (ns <= bound)
			return i;
		bound *= 10;
	}
	return SLI_NBUCKETS - 1;
}

/* stat_add_plain adds one latency of a scheduler kind to st, the stats of
 * a row of the running CPU (both maps are per CPU) or of a thread's
 * storage (sched_half). The scheduler kinds are accounted only from
 * sched_switch and sched_wakeup(_new), which run with interrupts off, and
 * from sched_process_exit (preemption off): nothing else adds to the row
 * on this CPU, or to the thread's storage, meanwhile, so plain adds are
 * exact and spare four locked instructions per latency and row. kind is
 * 64-bit so that the register checked is the one that indexes the row (a
 * 32-bit one is zero-extended again after the check, which the verifier
 * cannot follow). */
static __always_inline void stat_add_plain(struct sli_stat *st, __u64 kind, __u64 ns)
{
	__u32 b = bucket_of(ns);
	struct sli_stat *s;

	if (kind > SLI_BLOCK || b >= SLI_NBUCKETS)
		return;
	s = &st[kind];
	s->ns += ns;
	s->count++;
	if (ns > s->max)
		s->max = ns;
	s->buckets[b]++;
}

/* stat_add adds one latency of any kind: mem and io latencies may be
 * accounted in a task and, on the same CPU, in an interrupt completing a
 * bio: atomic. */
static __always_inline void stat_add(struct sli_row *row, __u64 kind, __u64 ns)
{
	__u32 b = bucket_of(ns);
	struct sli_stat *s;

	if (kind <= SLI_BLOCK) {
		stat_add_plain(row->s, kind, ns);
		return;
	}
	if (kind >= SLI_KIND_MAX || b >= SLI_NBUCKETS)
		return;
	s = &row->s[kind];
	__sync_fetch_and_add(&s->ns, ns);
	__sync_fetch_and_add(&s->count, 1);
	galago_max_u64(&s->max, ns);
	__sync_fetch_and_add(&s->buckets[b], 1);
}

static __always_inline void count_lost(void)
{
	__u32 z = 0;
	__u64 *lost = bpf_map_lookup_elem(&sli_lost, &z);

	if (lost)
		__sync_fetch_and_add(lost, 1);
}

static __always_inline struct sli_row *con_row(__u64 cgid)
{
	struct sli_row *row = bpf_map_lookup_elem(&con_stats, &cgid);
	static const struct sli_row zero = {};

	if (row)
		return row;
	bpf_map_update_elem(&con_stats, &cgid, &zero, BPF_NOEXIST);
	row = bpf_map_lookup_elem(&con_stats, &cgid);
	if (!row)
		count_lost();
	return row;
}

/* node_row: the node row the programs add to on this CPU. */
static __always_inline struct sli_row *node_row(void)
{
	__u32 z = node_slot & 1;

	return bpf_map_lookup_elem(&node_stats, &z);
}

/* row_for: the one row a latency of cgroup cgid (0: none) is added to:
 * the cgroup's when it has one, else the node's (NULL when node rows are
 * off). Each latency is added to one row only: user space adds the
 * cgroup rows it takes to the node row (node = the latencies of tasks
 * without a cgroup row + every cgroup row), so a switch-in updates one row
 * instead of two. A cgroup whose row cannot be created (con_stats full,
 * counted in sli_lost) falls back to the node row, which stays whole. */
static __always_inline struct sli_row *row_for(__u64 cgid)
{
	struct sli_row *row;

	if (cgid) {
		row = con_row(cgid);
		if (row)
			return row;
	}
	return node_on ? node_row() : NULL;
}

/* account adds one latency of kind to its row (row_for). A global
 * function: the verifier checks it once, not at each of its callers' call
 * sites. */
__noinline int account(__u64 kind, __u64 ns, __u64 cgid)
{
	struct sli_row *row = row_for(cgid);

	if (row)
		stat_add(row, kind, ns);
	return 0;
}

/* keep_cgid: cgid when cgroup rows are on and process tgid in cgroup cgid
 * is observed, else 0. */
static __always_inline __u64 keep_cgid(__u32 tgid, __u64 cgid)
{
	return con_on && tgid && cgid && galago_observed_in(tgid, cgid) ? cgid : 0;
}

/* task_cgid: keep_cgid of task t; direct loads of the BTF pointers
 * (tp_btf), no helper calls. */
static __always_inline __u64 task_cgid(struct task_struct *t)
{
	return con_on ? keep_cgid(t->tgid, t->cgroups->dfl_cgrp->kn->id) : 0;
}

/* sched_half: the half of thread storage s that latencies of the current
 * period go to, zeroed when the period is new to it. Called from
 * sched_switch and sched_wakeup(_new) only (interrupts off, the thread's
 * run queue locked), as stat_add_plain. */
static __always_inline struct sli_sched *sched_half(struct task_state *s)
{
	__u64 g = period;
	__u32 i = g & 1;

	if (s->gen[i] != g) {
		__builtin_memset(&s->sched[i], 0, sizeof(s->sched[i]));
		s->gen[i] = g;
	}
	return &s->sched[i];
}

/* sched_add adds a scheduler latency (kind <= SLI_BLOCK) of thread t, whose
 * storage is s, to s's half for this period; past t's exit, to its row.
 * Same callers as sched_half. */
static __always_inline void sched_add(struct task_state *s, struct task_struct *t, __u64 kind, __u64 ns)
{
	struct sli_sched *h;

	if (s->exited) {
		account(kind, ns, task_cgid(t));
		return;
	}
	h = sched_half(s);
	stat_add_plain(h->s, kind, ns);
}

/* take_half claims thread storage s's half of period g for the caller
 * (the walk or the thread's exit, which may race on another CPU): true
 * once per half that holds latencies of g; *was is the period taken
 * before, for a walk that must give the half back (sli_take). */
static __always_inline bool take_half(struct task_state *s, __u64 g, __u64 *was)
{
	__u64 old = s->taken;

	*was = old;
	if (!g || s->gen[g & 1] != g || old >= g)
		return false;
	return __sync_val_compare_and_swap(&s->taken, old, g) == old;
}



/* ---- cpu ---- */

/* sched_now: the clock of task t's run queue (ns, sched_clock), which
 * the scheduler updates under the run queue's lock just before
 * sched_switch, sched_wakeup and sched_wakeup_new fire, and which its own
 * sched_info (the run delay of /proc/<pid>/schedstat) reads: three loads
 * (t->se.cfs_rq->rq, set for every task on its CPU with
 * CONFIG_FAIR_GROUP_SCHED) instead of bpf_ktime_get_ns, whose clock read
 * costs ~100 ns on a VM, twice per context switch. Without the field, the
 * monotonic clock. 0: no time (the pointers were not set). */
static __always_inline __u64 sched_now(struct task_struct *t)
{
	if (bpf_core_field_exists(struct cfs_rq, rq))
		return t->se.cfs_rq->rq->clock;
	return bpf_ktime_get_ns();
}

/* switched_in_queued: next is switched in, now; with queued_clock.
 * sched_info.last_queued is when the kernel queued it (at its wakeup, or
 * when it went off CPU still runnable), reset only after this tracepoint:
 * its sleep ended there and its run delay runs from there to now. The run
 * delay adds what the kernel's run_delay grew by since next went off CPU
 * (a queued task moved to another CPU: the wait on the first one), so it
 * is the kernel's own figure. */
static __always_inline void switched_in_queued(struct task_struct *next, __u64 now)
{
	struct task_state *s = bpf_task_storage_get(&task_state, next, 0, 0);
	__u64 q = 0, rd = 0, wait = 0;

	if (bpf_core_field_exists(struct sched_info, last_queued)) {
		q = next->sched_info.last_queued;
		rd = next->sched_info.run_delay;
	}
	if (q && now > q)
		wait = now - q;
	if (!s) {
		/* not seen going off CPU since the probe started (or not
		 * observed, with node rows off): its run delay only */
		if (wait)
			account(SLI_RUNDELAY, wait, task_cgid(next));
		return;
	}
	if (s->off_ts && q > s->off_ts)
		sched_add(s, next, s->off_kind, q - s->off_ts);
	s->off_ts = 0;
	if (rd > s->run_delay)
		wait += rd - s->run_delay;
	if (wait)
		sched_add(s, next, SLI_RUNDELAY, wait);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sli_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 now = sched_now(prev);
	struct task_state *s;

	if (!now)
		return 0;
	if (prev->pid && !(prev_state & TASK_DEAD) && (node_on || task_cgid(prev))) {
		s = bpf_task_storage_get(&task_state, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (s) {
			s->wait_ts = 0;
			s->off_ts = 0;
			if (queued_clock && bpf_core_field_exists(struct sched_info, run_delay))
				s->run_delay = prev->sched_info.run_delay;
			/* preempted, or woken before it could sleep: still runnable */
			if (preempt || prev_state == TASK_RUNNING) {
				s->wait_ts = now;
			} else if (!(prev_state & TASK_NOLOAD)) {
				if (prev_state & TASK_UNINTERRUPTIBLE) {
					s->off_kind = BPF_CORE_READ_BITFIELD(prev, in_iowait) ? SLI_IOWAIT : SLI_BLOCK;
					s->off_ts = now;
				} else if (prev_state & TASK_INTERRUPTIBLE) {
					s->off_kind = SLI_SLEEP;
					s->off_ts = now;
				}
			}
		}
	}
	if (!next->pid)
		return 0;
	if (queued_clock) {
		switched_in_queued(next, now);
		return 0;
	}
	s = bpf_task_storage_get(&task_state, next, 0, 0);
	if (!s)
		return 0;
	if (s->wait_ts && now > s->wait_ts)
		sched_add(s, next, SLI_RUNDELAY, now - s->wait_ts);
	/* running: neither waiting nor asleep (a sleep whose wakeup was not
	 * traced must not last until some later wakeup) */
	s->wait_ts = 0;
	s->off_ts = 0;
	return 0;
}

/* woken: p becomes runnable. A wakeup of a thread still on its run queue
 * (woken before it slept, or while preempted) keeps the run delay already
 * started; one of a running thread is undone at its next switch. */
static __always_inline void woken(struct task_struct *p)
{
	__u64 now, cgid;
	struct task_state *s;

	if (!p->pid)
		return;
	/* unobserved tasks get no task storage when only container rows
	 * are on (the same test guards prev in sli_sched_switch) */
	cgid = task_cgid(p);
	if (!node_on && !cgid)
		return;
	s = bpf_task_storage_get(&task_state, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!s)
		return;
	now = sched_now(p); /* p's run queue, locked */
	if (!now)
		return;
	if (s->off_ts) {
		if (now > s->off_ts)
			sched_add(s, p, s->off_kind, now - s->off_ts);
		s->off_ts = 0;
	}
	if (!s->wait_ts)
		s->wait_ts = now;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(sli_sched_wakeup, struct task_struct *p)
{
	woken(p);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(sli_sched_wakeup_new, struct task_struct *p)
{
	woken(p);
	return 0;
}

/* sched_process_exit: the exiting thread's halves not yet taken (the
 * period that ended, when the walk has not reached it yet, and this one)
 * go to its row now; later latencies of it go there directly. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(sli_exit, struct task_struct *p)
{
	struct task_state *s = bpf_task_storage_get(&task_state, p, 0, 0);
	__u64 g = period, cgid, was;
	struct sli_row *row;

	if (!s || s->exited)
		return 0;
	s->exited = 1;
	cgid = task_cgid(p);
	for (__u32 d = 0; d < 2; d++) {
		__u64 gd = g - 1 + d;
		__u32 i = gd & 1;

		if (!take_half(s, gd, &was))
			continue;
		row = row_for(cgid);
		if (!row)
			return 0;
		for (__u32 k = 0; k < SLI_SCHED_KINDS; k++) {
			struct sli_stat *from = &s->sched[i].s[k], *to = &row->s[k];

			to->ns += from->ns;
			to->count += from->count;
			if (from->max > to->max)
				to->max = from->max;
			for (__u32 b = 0; b < SLI_NBUCKETS; b++)
				to->buckets[b] += from->buckets[b];
		}
	}
	return 0;
}

/* sli_take: user space's walk at the end of period - 1 writes each
 * thread's half of that period (once: take_half) with the cgroup it
 * counts in, when that is kept (keep_cgid) or node rows are on. A record
 * that does not fit in the iterator's buffer is dropped by the kernel and
 * the thread shown again at the next read: the half is given back so
 * that the second showing writes it. */
SEC("iter/task")
int sli_take(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;
	__u64 g = period - 1, cgid, was;
	struct task_state *s;

	if (!t)
		return 0;
	s = bpf_task_storage_get(&task_state, t, 0, 0);
	if (!s || !take_half(s, g, &was))
		return 0;
	cgid = task_cgid(t);
	if (!node_on && !cgid)
		return 0;
	if (bpf_seq_write(ctx->meta->seq, &cgid, sizeof(cgid)) ||
	    bpf_seq_write(ctx->meta->seq, &s->sched[g & 1], sizeof(s->sched[0])))
		__sync_val_compare_and_swap(&s->taken, g, was);
	return 0;
}

/* ---- mem ---- */

static __always_inline struct task_state *current_state(void)
{
	return bpf_task_storage_get(&task_state, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
}

static __always_inline void reclaim_begin(void)
{
	struct task_state *s = current_state();

	if (s)
		s->reclaim_ts = bpf_ktime_get_ns();
}

static __always_inline void current_done(__u32 kind, __u64 start)
{
	__u64 now = bpf_ktime_get_ns(), id = bpf_get_current_pid_tgid();

	if (!start || now <= start)
		return;
	account(kind, now - start, con_on ? keep_cgid(id >> 32, bpf_get_current_cgroup_id()) : 0);
}

static __always_inline void reclaim_end(void)
{
	struct task_state *s = bpf_task_storage_get(&task_state, bpf_get_current_task_btf(), 0, 0);

	if (!s)
		return;
	current_done(SLI_RECLAIM, s->reclaim_ts);
	s->reclaim_ts = 0;
}

SEC("tp_btf/mm_vmscan_direct_reclaim_begin")
int BPF_PROG(sli_direct_reclaim_begin, int order)
{
	reclaim_begin();
	return 0;
}

SEC("tp_btf/mm_vmscan_direct_reclaim_end")
int BPF_PROG(sli_direct_reclaim_end, unsigned long nr_reclaimed)
{
	reclaim_end();
	return 0;
}

SEC("tp_btf/mm_vmscan_memcg_reclaim_begin")
int BPF_PROG(sli_memcg_reclaim_begin, int order)
{
	reclaim_begin();
	return 0;
}

SEC("tp_btf/mm_vmscan_memcg_reclaim_end")
int BPF_PROG(sli_memcg_reclaim_end, unsigned long nr_reclaimed)
{
	reclaim_end();
	return 0;
}

static __always_inline bool current_kthread(void)
{
	struct task_struct *t = bpf_get_current_task_btf();

	return t->flags & PF_KTHREAD;
}

SEC("tp_btf/mm_compaction_begin")
int BPF_PROG(sli_compaction_begin, struct compact_control *cc)
{
	struct task_state *s;

	if (current_kthread())
		return 0;
	s = current_state();
	if (s)
		s->compact_ts = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/mm_compaction_end")
int BPF_PROG(sli_compaction_end, struct compact_control *cc)
{
	struct task_state *s;

	if (current_kthread())
		return 0;
	s = bpf_task_storage_get(&task_state, bpf_get_current_task_btf(), 0, 0);
	if (!s)
		return 0;
	current_done(SLI_COMPACT, s->compact_ts);
	s->compact_ts = 0;
	return 0;
}

/* ---- io ---- */

/* A bio's owner (struct galago_bio_start) is its submitter's cgroup2 id
 * when the submitter is observed, else 0. */
static __always_inline void galago_bio_done(const struct galago_bio_start *st, __u32 err, __u64 now)
{
	if (now > st->ts)
		account(SLI_BIO, now - st->ts, st->owner); /* filtered at submission */
}

static __always_inline void galago_bio_lost(void)
{
	count_lost();
}

SEC("tp_btf/block_bio_queue")
int BPF_PROG(sli_bio_queue, struct bio *bio)
{
	__u64 id = bpf_get_current_pid_tgid();

	galago_bio_submitted(bio, con_on ? keep_cgid(id >> 32, bpf_get_current_cgroup_id()) : 0);
	return 0;
}

SEC("tp_btf/block_bio_complete")
int BPF_PROG(sli_bio_complete, struct request_queue *q, struct bio *bio)
{
	galago_bio_completed(bio, 0, bpf_ktime_get_ns());
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(sli_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	galago_rq_completed(rq, 0, bpf_ktime_get_ns());
	return 0;
}
