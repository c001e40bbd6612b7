// Package proc is the proc feature (gala-gopher's taskprobe): for the
// observed processes (PUT /proc, snoopers proc_id, proc_name,
// container_id, container_name, pod_id or a blacklist), syscall failures
// and latencies by syscall and by file system, off-CPU and I/O-wait time,
// block I/O, page-cache activity and DNS lookups through the C library.
//
// # Sources and cost
//
// Syscalls: one capture path, the syscall statistics section of the
// shared capture object (internal/syscap, syscap.OpenStats), loaded without
// the l7 programs, so that each probe's cost is independent of the other.
// sys_enter (attached per syscall of the timed classes:
// syscalls:sys_enter_<name>; the raw tracepoint where tracefs cannot be
// had) stores the entry time of a timed syscall of an observed
// process in the thread's task storage (a switch on the syscall number,
// then the snooper filter, then one store); sys_exit (per syscall too,
// but on the raw tracepoint with proc_syscall, whose failure count needs
// every syscall) adds the call
// to its (tgid, class) row and counts a failed syscall of any kind (return
// value -4095..-1, including the kernel's restart codes as gala-gopher
// counts them) in the process's failure row. Only the classes of the
// enabled sub-items are timed. Rows are aggregated in the kernel (calls,
// failures, latency sum and max) and read and deleted by user space every
// report_period, so no record per syscall leaves the kernel and a process
// that exits, however short-lived, is reported once for the period it
// exited in. The snooper filter observes a process matched by a
// proc_name/container/pod selector from its fork or exec (bpfrt.FilterSync).
//
// Measured on the 2-core CI VM (kernel BPF statistics on, as galago runs),
// dd if=/dev/zero of=/dev/null bs=1 count=1000000 (2 M syscalls, all
// observed, blacklist mode), 0.54 s without the probe: 1.27 s with
// proc_syscall only (the two programs attached: ~0.36 µs per syscall, most
// of it the kernel's syscall tracepoint path and two program calls),
// 1.9 s with proc_io (read and write timed: ~0.7 µs), 2.5 s with every
// syscall sub-item (~1 µs: plus the fd's file system for proc_fs). A
// 1-byte read/write loop is the worst case; a process doing real work
// between syscalls pays the same per call. BenchmarkSyscallCost
// (privileged; `go test -bench SyscallCost`) gives the kernel's run time
// of each program per syscall of a 1-byte read loop: ~85-105 ns for
// sys_enter and ~110-125 ns for sys_exit when the syscall is not timed
// (the floor of a tp_btf program with statistics on), ~260-330 ns and
// ~200-360 ns when it is (proc_io; all sub-items, with the file system),
// i.e. ~0.2 µs per syscall with proc_syscall alone and ~0.7-0.8 µs with
// every syscall sub-item (figures from a machine at load average 15,
// BENCHMARKS.md; an empty blacklist turns the snooper filter off, which
// saves sys_enter's ~80 ns of filter lookups per timed call). The gala-gopher-compatible target of >= 0.95 of the
// throughput with every sub-item on is met only where a syscall costs
// well over 10 µs of work; a tight syscall loop cannot meet it with two
// programs per syscall. `make bench -probes proc` measures it on real
// servers.
//
// # Sub-items and tables (entity proc, key tgid)
//
//   - proc_syscall → proc_syscall.syscall_failed: the process's failed
//     syscalls in the period (a row for every process with a counted call,
//     0 included); proc_syscall_sched (ns_sched_yield, ns_futex,
//     ns_epoll_wait, ns_epoll_pwait: epoll_pwait2 counts as epoll_pwait) and
//     proc_syscall_fork (ns_fork, ns_vfork, ns_clone: clone3 counts as
//     clone; the child's return is not timed).
//   - proc_io → proc_syscall_io (ns_mount, ns_umount: umount2, ns_read,
//     ns_write, ns_fsync) and proc_io, from the probe's own object
//     (proc.bpf.c): tp_btf/block_bio_queue counts each bio an observed
//     process submits (current is the submitter: its direct I/O, the reads
//     it waits for, the writeback it forces; background writeback is the
//     flusher threads') by direction (read; write or flush) and size
//     (less_4k_io_*: <= 4096 bytes, greater_4k_io_*: > 4096, as
//     gala-gopher), and keeps its submission time; its completion, from
//     tp_btf/block_rq_complete for disks (blk-mq traces the request, not
//     its bios: the first 16 bios of a merged request are completed) or
//     tp_btf/block_bio_complete for bio-based devices (device mapper, md),
//     counts bio_err_count on error, else updates bio_latency, the longest
//     submission-to-completion time of the period (set only when a bio
//     completed without error). Cost: two map operations per bio of an
//     observed process, one lookup per completed request otherwise; the
//     programs are detached when proc_io is off. hang_count
//     (sched_process_hang) is NOT reported: the hook exists, but a test
//     would need a task blocked past kernel.hung_task_timeout_secs, a
//     machine-wide setting (120 s by default); gala-gopher counts the
//     hung-task detector's reports, which no bounded test can cause.
//   - proc_net → proc_syscall_net (ns_sendmsg, ns_recvmsg).
//   - proc_fs → proc_ext4 (ns_ext4_read, _write, _open, _flush),
//     proc_overlay (ns_overlay_*, same four) and proc_tmpfs (ns_tmpfs_read,
//     _write, _flush): the same programs time read (read, pread64, readv,
//     preadv, preadv2), write (write, pwrite64, writev, pwritev, pwritev2),
//     open (open, openat, openat2, creat: the file it returned) and flush
//     (fsync, fdatasync) calls, and at exit file them under the file system
//     of the call's file: the fd table's struct file, its inode's super
//     block magic (ext4 0xEF53, which ext2/ext3 share; overlay; tmpfs),
//     regular files only (a device node on devtmpfs is not a tmpfs file).
//     gala-gopher kprobes the file systems' own functions
//     (ext4_file_read_iter, ovl_read_iter, generic_file_read_iter, ...);
//     galago has no kprobes, so its latency is the whole syscall's, which
//     includes the VFS layers above the file system (a few hundred ns).
//     xfs and other file systems are not reported (gala-gopher has no
//     table for them). Cost: one fd-table read per timed call of these
//     kinds.
//   - proc_ioctl → proc_syscall_ioctl: ns_ioctl, the longest ioctl of the
//     period, and the fd and command of that call (the entry program keeps
//     them): labels ioctl_fd, ioctl_dir (0 none, 1 write, 2 read, 3 both),
//     ioctl_type and ioctl_nr, and ioctl_size, decoded as the kernel's _IOC
//     macros, in decimal. gala-gopher labels the row with the last ioctl
//     entered, whatever its length; galago with the one ns_ioctl describes.
//   - proc_pagecache → proc_page, from the probe's own object:
//     load_page_cache (pages added to a file's page cache,
//     tp_btf/mm_filemap_add_to_page_cache, the folio's pages),
//     mark_page_dirty (pages newly accounted dirty,
//     tp_btf/writeback_dirty_folio) and mark_buffer_dirty
//     (tp_btf/block_dirty_buffer: data and file-system metadata buffers;
//     a metadata buffer may also dirty, or load, a page of the block
//     device's own cache, counted in the two others),
//     each counted for the task that caused it (the reader's readahead and
//     faults, the writer's write or fault), per period; a row only for a
//     process that did any. reclaim_ns and access_pagecache are NOT
//     reported: mark_page_accessed has no tracepoint (gala-gopher
//     kprobes it), and direct reclaim time has one
//     (mm_vmscan_direct_reclaim_begin/end, gala-gopher's source) but is
//     entered only under machine-wide memory pressure, which a test on a
//     shared machine must not cause; a memory cgroup's limit reclaim
//     (mm_vmscan_memcg_reclaim_*) is another measure, and the only
//     independent figure for it (PSI memory stall time) is not exact.
//     Enabling proc_io or proc_pagecache logs these omissions once.
//     Cost: one filter check per page-cache insertion or dirtying
//     on the machine while the sub-item is on.
//   - proc_dns → proc_dns (entity dns, keys tgid and domain): uprobes on
//     getaddrinfo, gethostbyname and gethostbyname2 and a uretprobe on each,
//     attached to every C library (glibc libc.so.6, musl) an observed
//     process maps, read through the process's own root
//     (/proc/<pid>/root: a container's library), once per library file
//     (inode); the observed processes are scanned when the sub-item or the
//     snoopers change and every report period. A call of an observed
//     process counts per (tgid, name asked, first 63 bytes): count,
//     error_count (getaddrinfo's non-zero return, gethostbyname's NULL),
//     error_ratio (errors / count × 100, as gala-gopher) and delay_avg and
//     max_delay over the successful calls, in ns (gala-gopher prints ns
//     shifted right by 6; both delays are omitted when no call succeeded).
//     With report_event, a row with errors raises gala-gopher's event
//     "Process(PID:<tgid>) DNS error ratio(<ratio> %)." (entity dns, id
//     "<tgid>_<domain>", metric error_ratio). Statically linked programs
//     and Go's own resolver (which does not call the C library) are not
//     seen; a process that resolves and exits before the next scan is seen
//     only when another observed process maps the same library file (the
//     usual case: the host's libc).
//   - proc_offcpu → proc_cpu (offcpu_ns, iowait_ns): the probe's own object
//     (proc.bpf.c), tp_btf/sched_switch. A thread of an observed process
//     going off CPU leaves the time and its in_iowait flag (set by
//     io_schedule: waiting for block I/O) in its task storage; coming back
//     it adds the interval to its process's row, and to iowait_ns too when
//     the flag was set. As in gala-gopher every switch counts, preempted
//     threads included: offcpu_ns is the time the process's threads were
//     not running, summed over threads, counted in the period the thread
//     came back (a 10-minute sleep counts in the period it ends). Cost: the
//     program runs at every context switch of the machine while the
//     sub-item is on (a filter check, and two task-storage accesses for
//     observed threads); it is detached when the sub-item is off.
//
// Every ns_* field is, as in gala-gopher, the longest call of that syscall
// in the period, entry to exit, in ns. A latency table has a row for a
// process only in periods where it called one of its syscalls, and a field
// is set only when its syscall was called (gala-gopher prints 0 for the
// others; galago omits what it did not measure). arm64 has no fork and no
// epoll_wait syscall (glibc calls clone and epoll_pwait): ns_fork and
// ns_epoll_wait are never set there.
//
// proc_pygc is NOT BUILT: a request for only those is refused with "not
// supported in the current version"; alongside a built sub-item they are
// named in one warning log line and ignored. gala-gopher reports proc's
// events only for proc_dns (the others are compiled out), as galago does. The per-process /proc gauges (fd counts, page faults,
// I/O bytes, memory, CPU) are baseinfo's system_proc table (sub-item proc),
// as in gala-gopher.
//
// # Limits
//
// A call entered before the programs attached (or before its process was
// observed) is not timed; its failure is still counted. A full row table
// (16384 (process, class) rows, or 16384 processes for proc_cpu and
// proc_io/proc_page, per period) drops calls, off-CPU intervals, bios and
// pages, counted in
// galago_probe_events_lost_total{probe="proc"}, as are new processes the
// snooper filter could not mark pending. An off-CPU interval that began
// before the program attached or before the thread's process was observed
// is not counted; nor is an exiting thread's last switch. A bio in flight
// when the probe started is not timed; submissions past 65536 bios in
// flight are not kept, and those no completion took (a merged request's
// bios past its first 16, or a completion the kernel did not run the
// program for) are dropped when a new bio takes their address, or after
// 60 s: all not timed and counted as lost (the table is a hash shared
// with sli, bpf/include/bio.h, not an LRU whose evictions the kernel does
// not report). A call completing while its row is being read and deleted
// may be lost (a window of microseconds per row per period). 32-bit (ia32) processes' syscall numbers are not told apart.
// A kernel without tp_btf sys_enter/sys_exit or sched_switch: the sub-items
// needing them are refused ("not supported on this system") and one log
// line names the missing hook.
package proc
