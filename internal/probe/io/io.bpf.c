//go:build ignore

/* io: block I/O latency per stage, errors, bytes and page cache activity
 * per block device (gala-gopher io_latency, io_err, io_count,
 * io_pagecache), without kprobes.
 *
 * Hooks:
 *   tp_btf/block_rq_issue          a request is handed to the driver: the
 *       issue time, submitter pid/comm and length are kept in rq_inflight
 *       under the request's address (for latency and for error attribution)
 *   tp_btf/block_rq_requeue        a request handed back to the queue, to be
 *       issued again: its entry is taken out (its stages restart then)
 *   tp_btf/block_rq_complete       the request's final completion (the
 *       completion whose nr_bytes covers what is left) adds it to its disk's
 *       per-CPU stage statistics (struct io_lat in the map lat_active[0]):
 *       request = completion - rq->start_time_ns (the kernel's own
 *       allocation stamp), driver = issue - start, device = completion -
 *       issue; a failed completion (partial or final) is one struct
 *       io_err_rec in the ring buffer
 *   tp_btf/block_bio_queue         bytes read / written per bdev (the bio's
 *       block device: a partition when the I/O targets one), once per bio
 *       (the kernel traces a split bio's remainder no second time)
 *   tp_btf/block_dirty_buffer      mark_buffer_dirty calls per bdev
 *   tp_btf/mm_filemap_add_to_page_cache  pages inserted into a file's or
 *       block device's page cache (load_page_cache)
 *   tp_btf/writeback_dirty_folio   pages newly accounted dirty
 *       (folio_account_dirtied: mark_page_dirty)
 * Output: per-disk, per-CPU latency statistics, swapped out by user space
 *   once per period (lat_active); failed completions through the ring
 *   buffer "events"; byte and page cache counters per device and CPU in
 *   the per-CPU hash dev_counts, which only grow (user space reports the
 *   growth per period, so no update races a reset).
 * Filter: dev_filter (dev_t set) when dev_filter_on is set (params.dev_name).
 * Losses: a full ring (lost_events), a full rq_inflight, latency map or
 *   dev_counts, a request whose completion was not seen (io_drops): all
 *   reported as the probe's lost events.
 * Kernel: 5.18+ (writeback_dirty_folio; request_queue.disk, bio.bi_bdev),
 *   BTF; a missing tracepoint disables only what it measures. Not measured
 *   here (no tracepoint):
 *   mark_page_accessed (access_pagecache); the driver/device split of SCSI
 *   (scsi_dispatch_cmd_*) and NVMe (nvme_setup_cmd) beyond block_rq_issue.
 */
#define GALAGO_RINGBUF
#include "common.h"
#include "folio.h"

#define IO_MAX_INFLIGHT 16384
#define IO_MAX_DEVS 1024
#define IO_MAX_FILTER 256

#define MINORBITS 20
#define S_IFMT 00170000
#define S_IFBLK 0060000

/* Normalised request flags (the kernel's REQ_* bits move between releases;
 * these are resolved with CO-RE and carried in a stable form). */
enum io_req_flag {
	IO_F_FUA = 1,
	IO_F_RAHEAD = 2,
	IO_F_SYNC = 4,
	IO_F_META = 8,
	IO_F_PREFLUSH = 16,
};

/* Sub-items enabled at run time (io_flags). */
enum io_flag {
	IO_TRACE_ON = 1,
	IO_ERR_ON = 2,
};

/* Latency stages (gala-gopher's order). */
enum io_stage_id {
	IO_STAGE_REQ = 0,    /* start -> completion */
	IO_STAGE_DRIVER = 1, /* start -> issue */
	IO_STAGE_DEVICE = 2, /* issue -> completion */
	IO_STAGES = 3,
};

/* One stage of one disk on one CPU over one period, ns. */
struct io_stage {
	__u64 max;
	__u64 last;
	__u64 last_ns; /* when last was taken: the newest CPU's last wins */
	__u64 sum;
	__u64 jitter;  /* largest |difference| of consecutive samples (this CPU) */
	__u64 count;
};

/* One disk's requests on one CPU over one period, with the slowest
 * request (whole-request latency) for the latency event. */
struct io_lat {
	struct io_stage stage[IO_STAGES];
	__u64 slow_ns;
	__u32 slow_pid;
	__u32 slow_len;
	__u8 slow_op;
	__u8 slow_flags;
	__u8 _pad[6];
	char slow_comm[GALAGO_TASK_COMM_LEN];
};

/* One failed completion. */
struct io_err_rec {
	__u64 done_ns;  /* bpf_ktime_get_ns at block_rq_complete */
	__u32 dev;      /* disk: major << 20 | first_minor */
	__u32 pid;      /* submitter's tgid (at issue, else at completion) */
	__u32 data_len; /* bytes of the request at issue (at completion without issue) */
	__u8 op;        /* REQ_OP_* (cmd_flags & REQ_OP_MASK) */
	__u8 flags;     /* enum io_req_flag */
	__u8 status;    /* blk_status_t */
	__u8 _pad;
	char comm[GALAGO_TASK_COMM_LEN];
};

/* What is kept between issue and completion. */
struct io_inflight {
	__u64 issue_ns;
	__u32 pid;
	__u32 data_len;
	char comm[GALAGO_TASK_COMM_LEN];
};

/* Counters per device, per CPU; they only grow. */
struct io_counts {
	__u64 read_bytes;
	__u64 write_bytes;
	__u64 mark_buffer_dirty;
	__u64 load_page_cache;
	__u64 mark_page_dirty;
};

/* io_drops indexes. */
enum io_drop {
	IO_DROP_INFLIGHT = 0, /* rq_inflight full: a request's latency is not measured */
	IO_DROP_DEVS = 1,     /* dev_counts full: a device's counters are not kept */
	IO_DROP_LAT = 2,      /* latency map full: a request's latency is not kept */
	IO_DROP_UNSEEN = 3,   /* a request issued again with no completion seen */
	IO_DROP_MAX = 4,
};

GALAGO_EXPORT_TYPE(struct io_err_rec, io_err_rec);
GALAGO_EXPORT_TYPE(struct io_lat, io_lat);
GALAGO_EXPORT_TYPE(struct io_counts, io_counts);
GALAGO_EXPORT_TYPE(enum io_stage_id, io_stage_id);
GALAGO_EXPORT_TYPE(enum io_req_flag, io_req_flag);
GALAGO_EXPORT_TYPE(enum io_flag, io_flag);
GALAGO_EXPORT_TYPE(enum io_drop, io_drop);

/* Failed completions only: rare, and each one is an event. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

/* Latency per disk and CPU for the current period. User space keeps two
 * such maps and swaps them in lat_active[0] at every report: the update
 * of a map-in-map returns only after an RCU grace period, when no program
 * still holds the previous map, which user space then reads and empties
 * undisturbed. No sample is lost or split between periods. */
struct io_lat_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, IO_MAX_DEVS);
	__type(key, __u32); /* disk dev_t, kernel encoding */
	__type(value, struct io_lat);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct io_lat_map);
} lat_active SEC(".maps");

/* Requests between issue and completion, by address. Request structures
 * are preallocated per tag, so the set of keys is bounded by the tags of
 * all queues. A requeued request's entry is taken out before its next
 * issue; an entry still there when its address is issued again is a
 * request whose completion no program saw (bio.h says when the kernel
 * skips them): it is counted lost (IO_DROP_UNSEEN) and replaced. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IO_MAX_INFLIGHT);
	__type(key, __u64);
	__type(value, struct io_inflight);
} rq_inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, IO_MAX_DEVS);
	__type(key, __u32); /* dev_t, kernel encoding */
	__type(value, struct io_counts);
} dev_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IO_MAX_FILTER);
	__type(key, __u32); /* dev_t, kernel encoding */
	__type(value, __u8);
} dev_filter SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, IO_DROP_MAX);
	__type(key, __u32);
	__type(value, __u64);
} io_drops SEC(".maps");

/* Run-time settings (user space writes them while the probe runs). */
volatile __u32 dev_filter_on = 0;
volatile __u32 io_flags = 0;

static __always_inline void count_drop(__u32 which)
{
	__u64 *n = bpf_map_lookup_elem(&io_drops, &which);

	if (n)
		*n += 1;
}

static __always_inline bool dev_selected(__u32 dev)
{
	if (!dev_filter_on)
		return true;
	return bpf_map_lookup_elem(&dev_filter, &dev) != NULL;
}

static __always_inline __u32 rq_disk_dev(struct request *rq)
{
	/* tp_btf arguments are BTF pointers: plain loads (relocated with
	 * CO-RE), no helper call per field. */
	struct gendisk *disk = rq->q->disk;

	if (!disk)
		return 0;
	return ((__u32)disk->major << MINORBITS) | (__u32)disk->first_minor;
}

static __always_inline __u8 req_flags(__u64 opf)
{
	__u8 f = 0;

	if (opf & (1ULL << bpf_core_enum_value(enum req_flag_bits, __REQ_FUA)))
		f |= IO_F_FUA;
	if (opf & (1ULL << bpf_core_enum_value(enum req_flag_bits, __REQ_RAHEAD)))
		f |= IO_F_RAHEAD;
	if (opf & (1ULL << bpf_core_enum_value(enum req_flag_bits, __REQ_SYNC)))
		f |= IO_F_SYNC;
	if (opf & (1ULL << bpf_core_enum_value(enum req_flag_bits, __REQ_META)))
		f |= IO_F_META;
	if (opf & (1ULL << bpf_core_enum_value(enum req_flag_bits, __REQ_PREFLUSH)))
		f |= IO_F_PREFLUSH;
	return f;
}

#define REQ_OP_MASK_IO 0xff

SEC("tp_btf/block_rq_issue")
int BPF_PROG(io_rq_issue, struct request *rq)
{
	struct io_inflight v = {};
	__u64 key = (__u64)rq;
	__u32 dev;

	/* Errors need the submitter too: at completion current is whoever
	 * runs the completion (softirq, a driver thread). */
	if (!(io_flags & (IO_TRACE_ON | IO_ERR_ON)))
		return 0;
	dev = rq_disk_dev(rq);
	if (!dev || !dev_selected(dev))
		return 0;
	v.issue_ns = bpf_ktime_get_ns();
	v.pid = bpf_get_current_pid_tgid() >> 32;
	v.data_len = rq->__data_len;
	bpf_get_current_comm(v.comm, sizeof(v.comm));
	if (!bpf_map_update_elem(&rq_inflight, &key, &v, BPF_NOEXIST))
		return 0;
	if (bpf_map_lookup_elem(&rq_inflight, &key))
		count_drop(IO_DROP_UNSEEN);
	if (bpf_map_update_elem(&rq_inflight, &key, &v, BPF_ANY))
		count_drop(IO_DROP_INFLIGHT);
	return 0;
}

SEC("tp_btf/block_rq_requeue")
int BPF_PROG(io_rq_requeue, struct request *rq)
{
	__u64 key = (__u64)rq;

	bpf_map_delete_elem(&rq_inflight, &key);
	return 0;
}

static __always_inline void stage_add(struct io_stage *st, __u64 v, __u64 now)
{
	__u64 d;

	if (st->count == 0) {
		st->max = v;
		st->sum = v;
		st->jitter = 0;
	} else {
		if (v > st->max)
			st->max = v;
		st->sum += v;
		d = v > st->last ? v - st->last : st->last - v;
		if (d > st->jitter)
			st->jitter = d;
	}
	st->last = v;
	st->last_ns = now;
	st->count++;
}

/* lat_add adds one completed request to its disk's per-CPU stats. */
static __always_inline void lat_add(__u32 dev, struct request *rq, struct io_inflight *in, __u64 now, __u64 opf)
{
	static const struct io_lat zero;
	__u32 key0 = 0;
	struct io_lat *l;
	__u64 start;
	void *m;

	m = bpf_map_lookup_elem(&lat_active, &key0);
	if (!m)
		return;
	l = bpf_map_lookup_elem(m, &dev);
	if (!l) {
		if (bpf_map_update_elem(m, &dev, &zero, BPF_NOEXIST) && !bpf_map_lookup_elem(m, &dev)) {
			count_drop(IO_DROP_LAT);
			return;
		}
		l = bpf_map_lookup_elem(m, &dev);
		if (!l)
			return;
	}
	/* The kernel stamps start_time_ns when the queue does I/O
	 * accounting, has a scheduler or collects blk stats; without it only
	 * the device stage is known. */
	start = rq->start_time_ns;
	/* An issue time older than the request's own start belongs to an
	 * earlier request at the same address whose completion was not seen
	 * (hooks detached in between): this request's issue is unknown. */
	if (start && in->issue_ns < start)
		return;
	if (in->issue_ns && now >= in->issue_ns)
		stage_add(&l->stage[IO_STAGE_DEVICE], now - in->issue_ns, now);
	if (!start)
		return;
	stage_add(&l->stage[IO_STAGE_DRIVER], in->issue_ns - start, now);
	if (now >= start) {
		__u64 v = now - start;

		stage_add(&l->stage[IO_STAGE_REQ], v, now);
		if (l->stage[IO_STAGE_REQ].count == 1 || v > l->slow_ns) {
			l->slow_ns = v;
			l->slow_pid = in->pid;
			l->slow_len = in->data_len;
			l->slow_op = opf & REQ_OP_MASK_IO;
			l->slow_flags = req_flags(opf);
			__builtin_memcpy(l->slow_comm, in->comm, sizeof(l->slow_comm));
		}
	}
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(io_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	__u64 key = (__u64)rq;
	struct io_inflight *in;
	struct io_err_rec *rec;
	__u64 now, opf;
	bool final;
	__u32 dev;

	/* blk_update_request traces before it consumes nr_bytes: the request is
	 * done when they cover what is left. */
	final = nr_bytes >= rq->__data_len;
	in = bpf_map_lookup_elem(&rq_inflight, &key);
	if (!in && !(error && (io_flags & IO_ERR_ON)))
		return 0;
	dev = rq_disk_dev(rq);
	if (!dev || !dev_selected(dev))
		goto out;
	now = bpf_ktime_get_ns();
	opf = rq->cmd_flags;
	if (in && final && (io_flags & IO_TRACE_ON))
		lat_add(dev, rq, in, now, opf);
	if (!error || !(io_flags & IO_ERR_ON))
		goto out;
	rec = GALAGO_RB_RESERVE(&events, struct io_err_rec);
	if (!rec)
		goto out;
	rec->done_ns = now;
	rec->dev = dev;
	rec->op = opf & REQ_OP_MASK_IO;
	rec->flags = req_flags(opf);
	rec->status = error;
	rec->_pad = 0;
	if (in) {
		rec->pid = in->pid;
		rec->data_len = in->data_len;
		__builtin_memcpy(rec->comm, in->comm, sizeof(rec->comm));
	} else {
		rec->pid = bpf_get_current_pid_tgid() >> 32;
		rec->data_len = rq->__data_len;
		bpf_get_current_comm(rec->comm, sizeof(rec->comm));
	}
	GALAGO_RB_SUBMIT(&events, rec);
out:
	if (in && final)
		bpf_map_delete_elem(&rq_inflight, &key);
	return 0;
}

/* counts_of returns dev's per-CPU counters, creating them; NULL when the
 * device is filtered out or the map is full (counted). */
static __always_inline struct io_counts *counts_of(__u32 dev)
{
	struct io_counts *c, zero = {};

	if (!dev || !dev_selected(dev))
		return NULL;
	c = bpf_map_lookup_elem(&dev_counts, &dev);
	if (c)
		return c;
	if (bpf_map_update_elem(&dev_counts, &dev, &zero, BPF_NOEXIST) && bpf_map_lookup_elem(&dev_counts, &dev) == NULL) {
		count_drop(IO_DROP_DEVS);
		return NULL;
	}
	return bpf_map_lookup_elem(&dev_counts, &dev);
}

SEC("tp_btf/block_bio_queue")
int BPF_PROG(io_bio_queue, struct bio *bio)
{
	struct io_counts *c;
	__u32 op = bio->bi_opf & REQ_OP_MASK_IO;
	__u32 size;

	if (op != REQ_OP_READ && op != REQ_OP_WRITE)
		return 0;
	size = bio->bi_iter.bi_size;
	if (!size)
		return 0;
	c = counts_of(bio->bi_bdev->bd_dev);
	if (!c)
		return 0;
	if (op == REQ_OP_READ)
		c->read_bytes += size;
	else
		c->write_bytes += size;
	return 0;
}

SEC("tp_btf/block_dirty_buffer")
int BPF_PROG(io_dirty_buffer, struct buffer_head *bh)
{
	struct io_counts *c = counts_of(bh->b_bdev->bd_dev);

	if (c)
		c->mark_buffer_dirty += 1;
	return 0;
}

/* mapping_dev: the block device a page cache page belongs to: the device
 * itself for a block device's own cache, else the file system's device
 * (0 for file systems without one, e.g. tmpfs, whose s_dev has major 0). */
static __always_inline __u32 mapping_dev(struct address_space *mapping)
{
	struct inode *host;
	__u32 dev;

	if (!mapping)
		return 0;
	host = mapping->host;
	if (!host)
		return 0;
	if ((host->i_mode & S_IFMT) == S_IFBLK)
		dev = host->i_rdev;
	else
		dev = host->i_sb->s_dev;
	if ((dev >> MINORBITS) == 0)
		return 0;
	return dev;
}

SEC("tp_btf/mm_filemap_add_to_page_cache")
int BPF_PROG(io_page_add, struct folio *folio)
{
	struct io_counts *c = counts_of(mapping_dev(folio->mapping));

	if (c)
		c->load_page_cache += folio_pages(folio);
	return 0;
}

SEC("tp_btf/writeback_dirty_folio")
int BPF_PROG(io_page_dirty, struct folio *folio, struct address_space *mapping)
{
	struct io_counts *c = counts_of(mapping_dev(mapping));

	if (c)
		c->mark_page_dirty += folio_pages(folio);
	return 0;
}
