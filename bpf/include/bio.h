/* bio.h: a bio's submission-to-completion time, as the proc and sli probes
 * take it. Include after common.h. The includer defines the two functions
 * declared below: galago_bio_done (a traced bio completed) and
 * galago_bio_lost (a bio whose latency is lost).
 *
 * bio_starts is a hash, not an LRU: the kernel does not report an LRU's
 * evictions, while a full hash refuses the insert, which is counted. What
 * no completion takes (the bios of a merged request past
 * GALAGO_RQ_MAX_BIOS, a completion path that is not traced, a completion
 * the kernel did not run the program for) stays until a new bio at the
 * same address replaces it or user space deletes what is older than it can
 * be in flight; either counts it lost as well. (Seen on this project's
 * 6.18 VM: block_rq_complete's BPF programs do not run in softirqs taken
 * on top of some tasks, with no recursion miss counted, while the
 * tracepoint's ftrace event does; the freed bio's address comes back
 * within a few submissions.) */
#ifndef GALAGO_BIO_H
#define GALAGO_BIO_H

struct galago_bio_start {
	__u64 ts;    /* bpf_ktime_get_ns at submission */
	__u64 owner; /* the includer's: the submitter's tgid, cgroup id, ... */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64); /* struct bio * */
	__type(value, struct galago_bio_start);
} bio_starts SEC(".maps");

/* galago_bio_done: a bio submitted at st->ts by st->owner completed with
 * status err at now. */
static __always_inline void galago_bio_done(const struct galago_bio_start *st, __u32 err, __u64 now);

/* galago_bio_lost: a bio's latency is lost: its submission was not
 * recorded (bio_starts full), or its completion was not seen. */
static __always_inline void galago_bio_lost(void);

/* galago_bio_submitted records bio's submission by owner, now. */
static __always_inline void galago_bio_submitted(struct bio *bio, __u64 owner)
{
	struct galago_bio_start st = {.ts = bpf_ktime_get_ns(), .owner = owner};
	__u64 key = (__u64)bio;

	if (!bpf_map_update_elem(&bio_starts, &key, &st, BPF_NOEXIST))
		return;
	/* an entry at this address: a bio freed without its completion seen */
	if (bpf_map_lookup_elem(&bio_starts, &key))
		galago_bio_lost();
	if (bpf_map_update_elem(&bio_starts, &key, &st, BPF_ANY))
		galago_bio_lost();
}

/* galago_bio_completed: bio completed with status err at now; a bio whose
 * submission was recorded is taken out of bio_starts and passed to
 * galago_bio_done. */
static __always_inline void galago_bio_completed(struct bio *bio, __u32 err, __u64 now)
{
	__u64 key = (__u64)bio;
	struct galago_bio_start *p = bpf_map_lookup_elem(&bio_starts, &key);
	struct galago_bio_start st;

	if (!p)
		return;
	st = *p;
	bpf_map_delete_elem(&bio_starts, &key);
	galago_bio_done(&st, err, now);
}

#define GALAGO_RQ_MAX_BIOS 16

/* galago_rq_completed: request-based devices (blk-mq: disks) trace the
 * request's completion only (blk_update_request clears the bios'
 * BIO_TRACE_COMPLETION): its bios are completed here, the first
 * GALAGO_RQ_MAX_BIOS of a merged request. A partial completion (fewer
 * bytes than the request) completes them all: rare, and only their
 * latency is early. Bio-based devices (device mapper, md) trace each
 * bio's completion: galago_bio_completed. */
static __always_inline void galago_rq_completed(struct request *rq, __u32 err, __u64 now)
{
	struct bio *bio = rq->bio;

	for (int i = 0; i < GALAGO_RQ_MAX_BIOS && bio; i++) {
		galago_bio_completed(bio, err, now);
		bio = bio->bi_next;
	}
}

#endif /* GALAGO_BIO_H */
