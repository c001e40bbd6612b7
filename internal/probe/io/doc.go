// Package ioprobe is the io feature (gala-gopher's ioprobe): per block
// device request latency by stage, I/O errors, bytes read and written and
// page cache activity, from block, filemap and writeback tracepoints only
// (tp_btf; no kprobes).
//
// Sub-items and tables (entity "block", keys major and first_minor, labels
// blk_name and disk_name from /sys/dev/block):
//
//   - io_trace → io_latency, per disk (the request's gendisk), per report
//     period, for every completed request (gala-gopher samples one request
//     per sample_period; galago measures all, so count_latency_req is the
//     number of requests completed in the period). Stages, in ns:
//     request = completion − rq->start_time_ns (the kernel's allocation
//     stamp, which gala-gopher uses too, in place of block_getrq);
//     driver = block_rq_issue − start; device = block_rq_complete −
//     block_rq_issue. max, last, sum, jitter (largest difference between
//     consecutive samples) and count per stage, as gala-gopher defines
//     them; the kernel aggregates them per disk and CPU, so jitter is
//     taken between consecutive completions on one CPU.
//     A request whose start the kernel did not stamp (no I/O accounting,
//     no scheduler, no blk stats on its queue) counts in the device stage
//     only; a stage without samples in a period is left out of the row,
//     never reported as 0.
//   - io_err → io_err: err_code is the negative errno of the period's last
//     failed completion of the disk (what the block_rq_complete tracepoint
//     prints). Rows exist only for periods with failures.
//   - io_count → io_count: bytes of read and write bios per block device
//     (the bio's device: a partition when the I/O targets one) as they are
//     queued (block_bio_queue, once per bio even when it is split).
//     Discard and write-zeroes bios move no data and are not counted.
//   - page_cache → io_pagecache, per block device (the device of a block
//     device's own cache, else the file system's device): load_page_cache
//     = pages inserted into a page cache (mm_filemap_add_to_page_cache;
//     reads and writes of pages not cached yet both insert),
//     mark_page_dirty = pages newly accounted dirty (writeback_dirty_folio,
//     in folio_account_dirtied), mark_buffer_dirty = mark_buffer_dirty
//     calls (block_dirty_buffer). Pages, not folios: a large folio counts
//     its pages. File systems whose device number is not a block device
//     (btrfs, overlayfs, tmpfs, NFS) are not attributed.
//
// Not measured on a kernel without kprobes, and therefore absent (never
// zero): access_pagecache (gala-gopher counts mark_page_accessed with a
// kprobe; no tracepoint is on that path; the probe logs one line saying so
// when page_cache is enabled). The stage boundaries differ from
// gala-gopher's where it uses kprobes or driver tracepoints: the device
// stage ends at block_rq_complete rather than blk_mq_complete_request (it
// includes the completion's hand-off to the submitting CPU, a few µs), and
// for SCSI and NVMe devices the driver/device split is at block_rq_issue
// rather than at scsi_dispatch_cmd_start / nvme_setup_cmd.
//
// Events (report_event=1), entity "block", id "<major>_<minor>":
//
//   - latency_req_max ≥ latency_thr ms: "IO latency occurred.(Disk …,
//     COMM …, PID …, op: …, datalen …, drv_latency …, dev_latency …)" with
//     the period's slowest request and the driver and device maxima (ns).
//     gala-gopher compares the ns maximum with latency_thr<<3, which fires
//     on nearly every request; galago compares like units.
//   - every failed completion: "IO errors occurred.(Disk …, COMM …, PID …,
//     op: …, datalen …, blk_err(<blk_status_t>) '<kernel description>',
//     scsi_err(0) 'UNKNOW', timestamp <ms since boot>)". The submitter is
//     the task that issued the request (gala-gopher names whatever task
//     runs the completion). scsi_err is what gala-gopher prints for a
//     device without a SCSI error recorded: the SCSI dispatch tracepoints
//     are not hooked. op is the kernel's rwbs text (e.g. "WS" for a
//     synchronous write).
//
// params.dev_name selects one device: a whole disk with its partitions, or
// one partition (then io_latency and io_err, which are per disk, report
// nothing). The filter is applied in the kernel and re-resolved every
// period, so a disk that appears later is picked up. gala-gopher accepts
// dev_name but ignores it (its filter is unimplemented).
//
// Collection: latency is aggregated in the kernel, per disk and CPU, in
// one of two maps user space swaps at every report (a map-in-map update
// returns after an RCU grace period, so the map read is no longer written):
// no request is lost or split between periods, and no record per request
// crosses to user space. Bytes and page cache counters are per-CPU
// counters that only grow; each period reports their growth. Failed
// completions are ring buffer records (40 bytes each).
//
// Limits: rq_inflight (16384 requests in flight), the latency maps and
// dev_counts (1024 devices each) and dev_filter (256 devices) are bounded;
// what a full map refuses, and failure records a full ring drops, are
// counted as lost events. So is a request whose completion no program saw:
// its entry is still in rq_inflight when its address is issued again (a
// requeued request's entry is taken out at block_rq_requeue). This kernel
// was seen not to run block_rq_complete's programs in some softirqs; see
// bpf/include/bio.h.
package ioprobe
