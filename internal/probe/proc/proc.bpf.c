//go:build ignore

/* proc: per-process off-CPU and I/O-wait time for the proc probe's
 * proc_offcpu sub-item (table proc_cpu), and block I/O by issuing process
 * for proc_io (table proc_io). The syscall tables come from the shared
 * syscall capture (internal/syscap), not from here.
 *
 * Hooks:
 *   tp_btf/block_bio_queue  proc_bio_queue: a bio submitted by an observed
 *       process (current is the submitter: direct I/O, reads it waits for,
 *       writeback it forces; the flusher threads' writeback is theirs)
 *       counts in its row by direction (read; write or flush) and size
 *       (<= 4096 bytes "less", > 4096 "greater", as gala-gopher), and
 *       leaves {submit time, tgid} in bio_starts keyed by the bio.
 *   tp_btf/block_rq_complete (disks) and tp_btf/block_bio_complete
 *       (bio-based devices): a bio's completion (bio.h, shared with the
 *       sli probe): an error counts in bio_err, else the latency since
 *       submission updates the row's maximum.
 *   tp_btf/sched_switch  proc_sched_switch: the thread going off CPU (prev)
 *       of an observed process leaves its switch time and whether it waits
 *       for I/O (task_struct.in_iowait, set by io_schedule) in its task
 *       storage; the thread coming on CPU (next) adds the time since then
 *       to its process's row. As in gala-gopher, every switch counts
 *       (preempted threads too): off-CPU time is all the time a thread was
 *       not running. Exiting threads' last switch (TASK_DEAD) is not.
 *   tp_btf/mm_filemap_add_to_page_cache, writeback_dirty_folio,
 *       block_dirty_buffer  proc_page_*: page cache pages loaded and
 *       dirtied (pages of the folio) and buffers dirtied, by the task
 *       that caused them (readahead and faults of the reader; the
 *       writer's write or fault), for proc_pagecache.
 *   uprobes proc_gai_enter (getaddrinfo), proc_ghbn_enter (gethostbyname,
 *       gethostbyname2) and uretprobe proc_dns_return on the C library
 *       an observed process maps (attached per library file by user
 *       space): the call's time and outcome per (tgid, name asked), for
 *       proc_dns.
 * Maps: cpu_stats (hash tgid -> struct proc_cpu_val) and io_stats (hash
 *   tgid -> struct proc_io_val: bios and page cache), read and deleted by user space each
 *   period; cpu_lost (per CPU: intervals and bios dropped because a row
 *   table or bio_starts was full), off_starts (task storage, freed with
 *   the thread), bio_starts (bio.h: hash bio -> submission; user space
 *   deletes the stale), filter_* (common.h).
 * Kernel: 5.11+ (task storage in tracing programs), tp_btf, BTF. */
#define GALAGO_FILTER
#include "common.h"
#include "folio.h"
#include "atomic.h"
#include "bio.h"

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

/* count_lost counts an interval or a bio dropped because a row table was full. */
static __always_inline void count_lost(void)
{
	__u32 z = 0;
	__u64 *lost = bpf_map_lookup_elem(&cpu_lost, &z);

	if (lost)
		*lost += 1;
}

/* tgid_row_key returns the row of key in a hash map of rows, created from
 * zero when missing; NULL (counted lost) when the map is full. */
static __always_inline void *tgid_row_key(void *map, const void *key, const void *zero)
{
	void *v = bpf_map_lookup_elem(map, key);

	if (v)
		return v;
	bpf_map_update_elem(map, key, zero, BPF_NOEXIST);
	v = bpf_map_lookup_elem(map, key);
	if (!v)
		count_lost();
	return v;
}

/* tgid_row: the row of process tgid in a per-process map. */
static __always_inline void *tgid_row(void *map, __u32 tgid, const void *zero)
{
	return tgid_row_key(map, &tgid, zero);
}

/* ---- block I/O (proc_io) ---- */

#define REQ_OP_MASK 0xff
#define REQ_OP_READ 0
#define REQ_OP_WRITE 1
#define REQ_OP_FLUSH 2
#define BIG_BIO 4096

struct proc_io_val {
	__u64 less_4k_read;
	__u64 less_4k_write;
	__u64 greater_4k_read;
	__u64 greater_4k_write;
	__u64 bio_latency_max; /* ns, completed bios without error */
	__u64 bio_err;
	__u64 bio_done; /* completed bios with a latency (bio_latency_max is set) */
	/* proc_pagecache, counted by the task that caused them: */
	__u64 load_page_cache;   /* pages added to a file's page cache */
	__u64 mark_page_dirty;   /* pages newly accounted dirty */
	__u64 mark_buffer_dirty; /* mark_buffer_dirty calls */
};

GALAGO_EXPORT_TYPE(struct proc_io_val, io_val);

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, __u32); /* tgid */
	__type(value, struct proc_io_val);
} io_stats SEC(".maps");

/* io_on: proc_io is on; page_on: proc_pagecache is on (the programs are
 * attached only then; these keep a stale row from being created between a
 * detach and a drain). */
volatile __u32 io_on = 0;
volatile __u32 page_on = 0;

static __always_inline struct proc_io_val *io_row(__u32 tgid)
{
	struct proc_io_val zero = {};

	return tgid_row(&io_stats, tgid, &zero);
}

SEC("tp_btf/block_bio_queue")
int BPF_PROG(proc_bio_queue, struct bio *bio)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u32 op = bio->bi_opf & REQ_OP_MASK;
	__u32 size = bio->bi_iter.bi_size;
	struct proc_io_val *v;

	if (!io_on || (op != REQ_OP_READ && op != REQ_OP_WRITE && op != REQ_OP_FLUSH) || !tgid ||
	    !galago_observed(tgid))
		return 0;
	v = io_row(tgid);
	if (!v)
		return 0;
	if (op == REQ_OP_READ)
		__sync_fetch_and_add(size > BIG_BIO ? &v->greater_4k_read : &v->less_4k_read, 1);
	else
		__sync_fetch_and_add(size > BIG_BIO ? &v->greater_4k_write : &v->less_4k_write, 1);
	galago_bio_submitted(bio, tgid);
	return 0;
}

/* A bio's owner (struct galago_bio_start) is its submitter's tgid. */
static __always_inline void galago_bio_done(const struct galago_bio_start *st, __u32 err, __u64 now)
{
	struct proc_io_val *v = io_on ? io_row(st->owner) : NULL;

	if (!v)
		return;
	if (err) {
		__sync_fetch_and_add(&v->bio_err, 1);
		return;
	}
	__sync_fetch_and_add(&v->bio_done, 1);
	galago_max_u64(&v->bio_latency_max, now > st->ts ? now - st->ts : 0);
}

static __always_inline void galago_bio_lost(void)
{
	count_lost();
}

SEC("tp_btf/block_bio_complete")
int BPF_PROG(proc_bio_complete, struct request_queue *q, struct bio *bio)
{
	galago_bio_completed(bio, bio->bi_status, bpf_ktime_get_ns());
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(proc_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	galago_rq_completed(rq, error, bpf_ktime_get_ns());
	return 0;
}

/* ---- page cache (proc_pagecache) ---- */

static __always_inline struct proc_io_val *page_row(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (!page_on || !tgid || !galago_observed(tgid))
		return NULL;
	return io_row(tgid);
}

SEC("tp_btf/mm_filemap_add_to_page_cache")
int BPF_PROG(proc_page_add, struct folio *folio)
{
	struct proc_io_val *v = page_row();

	if (v)
		__sync_fetch_and_add(&v->load_page_cache, folio_pages(folio));
	return 0;
}

SEC("tp_btf/writeback_dirty_folio")
int BPF_PROG(proc_page_dirty, struct folio *folio, struct address_space *mapping)
{
	struct proc_io_val *v = page_row();

	if (v)
		__sync_fetch_and_add(&v->mark_page_dirty, folio_pages(folio));
	return 0;
}

SEC("tp_btf/block_dirty_buffer")
int BPF_PROG(proc_buffer_dirty, struct buffer_head *bh)
{
	struct proc_io_val *v = page_row();

	if (v)
		__sync_fetch_and_add(&v->mark_buffer_dirty, 1);
	return 0;
}

/* ---- DNS (proc_dns): uprobes on the C library's resolver functions ---- */

#define DNS_NAME_LEN 64

enum proc_dns_fn {
	DNS_GETADDRINFO = 1, /* int getaddrinfo(node, ...): 0 is success */
	DNS_GETHOSTBYNAME = 2, /* struct hostent *gethostbyname(2)(name, ...): NULL is failure */
};

struct proc_dns_key {
	__u32 tgid;
	__u32 _pad;
	char domain[DNS_NAME_LEN]; /* the name asked, truncated, NUL-padded */
};

struct proc_dns_val {
	__u64 count;
	__u64 errors;
	__u64 ns_sum_ok; /* latency of the successful calls */
	__u64 ns_max_ok;
};

GALAGO_EXPORT_TYPE(struct proc_dns_key, dns_key);
GALAGO_EXPORT_TYPE(struct proc_dns_val, dns_val);

struct dns_call {
	__u64 ts;
	__u64 name; /* const char * in the process */
	__u32 fn;   /* enum proc_dns_fn */
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* pid_tgid: the thread in the call */
	__type(value, struct dns_call);
} dns_calls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, struct proc_dns_key);
	__type(value, struct proc_dns_val);
} dns_stats SEC(".maps");

static __always_inline int dns_enter(const char *name, __u32 fn)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct dns_call c = {.ts = bpf_ktime_get_ns(), .name = (__u64)name, .fn = fn};

	if (!name || !galago_observed(id >> 32))
		return 0;
	bpf_map_update_elem(&dns_calls, &id, &c, BPF_ANY);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(proc_gai_enter, const char *node)
{
	return dns_enter(node, DNS_GETADDRINFO);
}

SEC("uprobe")
int BPF_KPROBE(proc_ghbn_enter, const char *name)
{
	return dns_enter(name, DNS_GETHOSTBYNAME);
}

SEC("uretprobe")
int BPF_KRETPROBE(proc_dns_return, long ret)
{
	__u64 id = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns(), d;
	struct dns_call *c = bpf_map_lookup_elem(&dns_calls, &id);
	struct proc_dns_key k = {};
	struct proc_dns_val zero = {}, *v;
	bool failed;

	if (!c)
		return 0;
	d = now > c->ts ? now - c->ts : 0;
	/* getaddrinfo returns an int: only the low 32 bits are its value. */
	failed = c->fn == DNS_GETADDRINFO ? (int)ret != 0 : ret == 0;
	k.tgid = id >> 32;
	bpf_probe_read_user_str(k.domain, sizeof(k.domain), (const void *)c->name);
	bpf_map_delete_elem(&dns_calls, &id);
	v = tgid_row_key(&dns_stats, &k, &zero);
	if (!v)
		return 0;
	__sync_fetch_and_add(&v->count, 1);
	if (failed) {
		__sync_fetch_and_add(&v->errors, 1);
		return 0;
	}
	__sync_fetch_and_add(&v->ns_sum_ok, d);
	galago_max_u64(&v->ns_max_ok, d);
	return 0;
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
		struct proc_cpu_val zero = {};

		v = tgid_row(&cpu_stats, next->tgid, &zero);
		if (v) {
			__sync_fetch_and_add(&v->offcpu_ns, now - s->ts);
			if (s->iowait)
				__sync_fetch_and_add(&v->iowait_ns, now - s->ts);
		}
	}
	s->ts = 0;
	return 0;
}
