// Package taskstats reads the kernel's per-process delay accounting over
// the TASKSTATS generic netlink family (TASKSTATS_CMD_GET with a tgid, the
// interface getdelays.c uses): the time a process's threads waited for a
// CPU (run-queue delay), for block I/O, for swap-in, for free pages
// (direct reclaim), on thrashing page cache, for memory compaction, for
// write-protect copies and for IRQs, each with its count. Pure Go, no CLI.
//
// Limits:
//   - CPU delay comes from the scheduler's sched_info (the second field of
//     /proc/<pid>/schedstat) and is always filled. The other delays are
//     recorded only while the kernel.task_delayacct sysctl is 1 (or the
//     kernel booted with delayacct): with it 0 they read as 0 and
//     DelayAcctEnabled says so, so callers omit them instead of reporting
//     zeros. This package never changes the sysctl.
//   - struct taskstats only grows: a field the running kernel's version
//     does not send is absent (Has reports it), never a zero.
//   - For a tgid the kernel sums the live threads and the threads that
//     already exited; the query needs CAP_NET_ADMIN and names the pid in
//     the caller's pid namespace.
package taskstats
