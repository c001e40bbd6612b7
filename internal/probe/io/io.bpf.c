//go:build ignore

/* io: block I/O latency per stage, errors, bytes and page cache activity
 * per block device (gala-gopher io_latency, io_err, io_count,
 * io_pagecache), without kprobes.
 *
 * Hooks:
 *   tp_btf/block_rq_issue          a request is handed to the driver: the
 *       issue time, submitter pid/comm and length are kept in rq_inflight
 *       under the request's address (for latency and for error attribution)
 *   tp_btf/block_rq_complete       the request's final completion (the
 *       completion whose nr_bytes covers what is left): one struct io_rec
 *       with start (rq->start_time_ns, the kernel's own allocation stamp),
 *       issue and completion times; a failed completion (any, partial or
 *       final) also yields a record with the blk_status_t
 *   tp_btf/block_bio_queue         bytes read / written per bdev (the bio's
 *       block device: a partition when the I/O targets one), once per bio
 *       (the kernel traces a split bio's remainder no second time)
 *   tp_btf/block_dirty_buffer      mark_buffer_dirty calls per bdev
 *   tp_btf/mm_filemap_add_to_page_cache  pages inserted into a file's or
 *       block device's page cache (load_page_cache)
 *   tp_btf/writeback_dirty_folio   pages newly accounted dirty
 *       (folio_account_dirtied: mark_page_dirty)
 * Output: per-request records (struct io_rec) through the ring buffer
 *   "events"; byte and page cache counters per device and CPU in the
 *   per-CPU hash dev_counts, which only grow (user space reports the growth
 *   per period, so no update races a reset).
 * Filter: dev_filter (dev_t set) when dev_filter_on is set (params.dev_name).
 * Losses: a full ring (lost_events), a full rq_inflight or dev_counts
 *   (io_drops): all reported as the probe's lost events.
 * Kernel: 5.16+ (folio tracepoints), BTF. Not measured here (no tracepoint):
 *   mark_page_accessed (access_pagecache); the driver/device split of SCSI
 *   (scsi_dispatch_cmd_*) and NVMe (nvme_setup_cmd) beyond block_rq_issue.
 */
#define GALAGO_RINGBUF
#include "common.h"

#define IO_MAX_INFLIGHT 16384
#define IO_MAX_DEVS 1024
#define IO_MAX_FILTER 256

#define MINORBITS 20
#define S_IFMT 00170000
#define S_IFBLK 0060000

/* Record kinds (bit set: a failed final completion is both). */
enum io_rec_kind {
	IO_REC_LATENCY = 1,
	IO_REC_ERROR = 2,
};

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

/* One completed (or failed) request. */
struct io_rec {
	__u64 start_ns; /* rq->start_time_ns; 0 when the kernel did not stamp it */
	__u64 issue_ns; /* block_rq_issue; 0 when not seen */
	__u64 done_ns;  /* block_rq_complete */
	__u32 dev;      /* disk: major << 20 | first_minor */
	__u32 pid;      /* submitter's tgid (at issue, else at completion) */
	__u32 data_len; /* bytes of the request at issue (at completion without issue) */
	__u8 kind;      /* enum io_rec_kind */
	__u8 op;        /* REQ_OP_* (cmd_flags & REQ_OP_MASK) */
	__u8 flags;     /* enum io_req_flag */
	__u8 status;    /* blk_status_t of an error record */
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
	IO_DROP_MAX = 2,
};

GALAGO_EXPORT_TYPE(struct io_rec, io_rec);
GALAGO_EXPORT_TYPE(struct io_counts, io_counts);
GALAGO_EXPORT_TYPE(enum io_rec_kind, io_rec_kind);
GALAGO_EXPORT_TYPE(enum io_req_flag, io_req_flag);
GALAGO_EXPORT_TYPE(enum io_flag, io_flag);
GALAGO_EXPORT_TYPE(enum io_drop, io_drop);

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1024 * 1024);
} events SEC(".maps");

/* Requests between issue and completion, by address. Request structures
 * are preallocated per tag, so the set of keys is bounded by the tags of
 * all queues; an entry of a request that never completes through
 * block_rq_complete (a flush sequence's internal request) is overwritten
 * when its address is issued again. */
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
	struct gendisk *disk = BPF_CORE_READ(rq, q, disk);

	if (!disk)
		return 0;
	return ((__u32)BPF_CORE_READ(disk, major) << MINORBITS) | (__u32)BPF_CORE_READ(disk, first_minor);
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
	if (bpf_map_update_elem(&rq_inflight, &key, &v, BPF_ANY))
		count_drop(IO_DROP_INFLIGHT);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(io_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	__u64 key = (__u64)rq;
	struct io_inflight *in;
	struct io_rec *rec;
	bool final, traced;
	__u8 kind = 0;
	__u32 dev;
	__u64 opf;

	/* blk_update_request traces before it consumes nr_bytes: the request is
	 * done when they cover what is left. */
	final = nr_bytes >= rq->__data_len;
	in = bpf_map_lookup_elem(&rq_inflight, &key);
	traced = in && final && (io_flags & IO_TRACE_ON);
	if (traced)
		kind |= IO_REC_LATENCY;
	if (error && (io_flags & IO_ERR_ON))
		kind |= IO_REC_ERROR;
	if (!kind)
		goto out;
	dev = rq_disk_dev(rq);
	if (!dev || !dev_selected(dev))
		goto out;
	rec = GALAGO_RB_RESERVE(&events, struct io_rec);
	if (!rec)
		goto out;
	opf = rq->cmd_flags;
	rec->done_ns = bpf_ktime_get_ns();
	rec->start_ns = rq->start_time_ns;
	rec->dev = dev;
	rec->kind = kind;
	rec->op = opf & REQ_OP_MASK_IO;
	rec->flags = req_flags(opf);
	rec->status = error;
	if (in) {
		rec->issue_ns = in->issue_ns;
		rec->pid = in->pid;
		rec->data_len = in->data_len;
		__builtin_memcpy(rec->comm, in->comm, sizeof(rec->comm));
	} else {
		rec->issue_ns = 0;
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
	c = counts_of(BPF_CORE_READ(bio, bi_bdev, bd_dev));
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
	struct io_counts *c = counts_of(BPF_CORE_READ(bh, b_bdev, bd_dev));

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
	host = BPF_CORE_READ(mapping, host);
	if (!host)
		return 0;
	if ((BPF_CORE_READ(host, i_mode) & S_IFMT) == S_IFBLK)
		dev = BPF_CORE_READ(host, i_rdev);
	else
		dev = BPF_CORE_READ(host, i_sb, s_dev);
	if ((dev >> MINORBITS) == 0)
		return 0;
	return dev;
}

static __always_inline __u64 folio_pages(struct folio *folio)
{
	/* folio_nr_pages: a large folio has PG_head in its flags and keeps its
	 * order in the low byte of the second page's flags (_flags_1). flags
	 * is an unsigned long, wrapped in a struct (memdesc_flags_t) on newer
	 * kernels: read the word at the field's offset. */
	unsigned long flags = 0;

	bpf_probe_read_kernel(&flags, sizeof(flags), (void *)folio + bpf_core_field_offset(folio->flags));
	if (!(flags & (1UL << bpf_core_enum_value(enum pageflags, PG_head))))
		return 1;
	if (!bpf_core_field_exists(folio->_flags_1))
		return 1;
	return 1ULL << (BPF_CORE_READ(folio, _flags_1) & 0xff);
}

SEC("tp_btf/mm_filemap_add_to_page_cache")
int BPF_PROG(io_page_add, struct folio *folio)
{
	struct io_counts *c = counts_of(mapping_dev(BPF_CORE_READ(folio, mapping)));

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
