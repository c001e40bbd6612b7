// Package baseinfo is gala-gopher's "baseinfo" feature (system_infos):
// host-wide CPU, memory, NIC, SNMP, disk and filesystem statistics,
// per-process statistics of the observed processes, host identity and
// container directory growth. It attaches no BPF program: everything comes
// from /proc, /sys, statfs(2) and one rtnetlink qdisc dump per period, read
// under the host root (GOPHER_HOST_PATH in a container) through
// internal/procfs. Nothing is read by running a command.
//
// Every report_period each enabled sub-item publishes its tables. Fields
// that describe "the period" are differences between the sample at the
// start and the one at the end, and rates divide them by the measured
// elapsed time. Start (and enabling a sub-item through Reconfigure) takes
// the first sample, so the first report, one period later, covers a whole
// period. Levels (memory, filesystem usage, open fds, ...) are the values at
// the end of the period.
//
// A field that cannot be measured on a host is left unset (omitted from
// every output, gala-gopher's "(null)"), never filled with a guess; the
// probe logs once, when the sub-item starts or the condition first shows,
// which fields and why.
//
//	sub-item table            source                                   fields that may stay unset (why)
//	cpu      system_cpu       /proc/stat, /proc/softirqs,              mhz: no "cpu MHz" in /proc/cpuinfo and no cpufreq
//	                          /proc/net/softnet_stat, /proc/cpuinfo    (arm64 and some VMs); rcu, timer, sched, net_rx:
//	                          (or cpufreq scaling_cur_freq)            /proc/softirqs unreadable; backlog_drops, rps_count:
//	                                                                   /proc/net/softnet_stat unreadable; util_per: no tick
//	                                                                   elapsed. A CPU that comes online is reported from
//	                                                                   its second period.
//	cpu      system_cpu_util  /proc/stat "cpu" line                    total_used_per: no tick elapsed (no record)
//	mem      system_meminfo   /proc/meminfo, /proc/vmallocinfo         any field whose meminfo line this kernel lacks;
//	                                                                   vmalloc_kB is VmallocUsed when vmallocinfo is not
//	                                                                   readable (not root), logged once
//	mem      system_dentry    /proc/sys/fs/dentry-state                -
//	nic      nic              /sys/class/net/<dev>/{statistics,        tc_*: the rtnetlink dump failed, the device has no
//	                          operstate,ifindex}, rtnetlink qdiscs     root qdisc, or the probe is not provably in the
//	                                                                   host's network namespace; tc_ecn_mark: none of its
//	                                                                   qdiscs counts ECN marks (only fq_codel, codel, pie
//	                                                                   and fq_pie do)
//	net      system_tcp       /proc/net/snmp Tcp                       -
//	net      system_udp       /proc/net/snmp Udp                       -
//	disk     system_iostat    /proc/diskstats                          - (a device that appears is reported from its
//	                                                                   second period)
//	fs       system_df        mount table (/proc/1/mountinfo, else     a mount whose statfs blocks for 5 s is skipped until
//	                          /proc/self/mountinfo), statfs(2)         the call returns; IUsePer/UsePer where df prints "-"
//	proc     system_proc      /proc/<pid>/{stat,io,smaps_rollup,fd,    io counters, smaps sizes and fd_count without
//	                          limits}, /proc/uptime, /proc/meminfo     ptrace-read access to the process (another user's
//	                                                                   process in a container without CAP_SYS_PTRACE);
//	                                                                   smaps sizes of kernel threads; fd_free_per without
//	                                                                   a readable limits file
//	host     system_os        /etc/os-release (+ openEuler-latest),    ip_addr lists the probe's own network namespace
//	                          /proc/sys/kernel/{osrelease,hostname},   (use host networking in a container); host_type is
//	                          /sys/devices/system/cpu, /proc/stat,     "vm" on a hypervisor CPU flag, /sys/hypervisor or a
//	                          /proc/cpuinfo, DMI, net.Interfaces       hypervisor's DMI vendor, else "pm"
//	con      system_con_io    du -sb equivalent of elf_path inside     everything (no record) without an identity resolver
//	                          each observed container (through         (WithIdentity) or with elf_path empty
//	                          /proc/<pid>/root, openat2 RESOLVE_IN_ROOT)
//	host     host_instance    /sys/class/dmi/id, CPUID, /sys/hypervisor, DMI labels without DMI (this CI VM has none) or,
//	         (galago's own)   the kubelet's flag files (internal/        for serials and the UUID, without root; region,
//	                          instmeta); read once when host starts    zone and instance ids only a cloud's metadata
//	                                                                   service knows (never queried: no network calls)
//	delay    proc_delay       taskstats over generic netlink           everything but cpu_delay_* while the sysctl
//	         (galago's own)   (TASKSTATS_CMD_GET per tgid,             kernel.task_delayacct is 0 (never changed by
//	                          internal/taskstats), /proc/<pid>/stat    galago; logged once); a kind the kernel's struct
//	                                                                   taskstats lacks; a value that grew more than the
//	                                                                   period x 2 x threads (counted as an error, logged)
//	app      proc_app         /proc/<pid>/{exe,cmdline,comm}, and      no row for a process of no known type
//	         (galago's own)   /proc/<pid>/{fd,net/tcp,net/tcp6} for
//	                          the port rule (internal/appinfo)
//
// galago's own sub-items and tables (coroot-node-agent's features, named
// like gala-gopher's): delay publishes proc_delay, per observed process and
// period, the time its threads waited and how often, for a CPU (run-queue
// delay, the second field of /proc/<pid>/schedstat summed over threads),
// for block I/O, swap-in, free pages (direct reclaim), thrashing,
// compaction, write-protect copies and IRQs (gala_gopher_proc_cpu_delay_ns,
// gala_gopher_proc_blkio_delay_ns, ...; sum by container_id for a
// container). Its cost is one netlink round trip and one /proc/<pid>/stat
// read per process per period (36 µs per process, BENCHMARKS.md). On this
// CI kernel (6.18 VM) the blkio total the kernel keeps for 200 O_DIRECT
// reads of a loop device ranged from a third to seven times the wall time
// the reads took, and now and then jumped by hours at once (a wait whose
// start stamp was lost); /proc/<pid>/stat's delayacct_blkio_ticks agrees
// with it every time, so it is the kernel's own accounting: jumps are
// dropped, the rest reported as is. The CPU delay matches schedstat to the
// nanosecond.
// app publishes proc_app, an info row (app_info 1) whose app_type label
// names what the process is and app the java main class or script; a
// process is detected once per start. host also publishes host_instance,
// an info row with the machine's DMI strings, hypervisor, cloud provider,
// instance type and id, region and zone (coroot's node_info and
// node_cloud_info).
//
// Which processes: system_proc and system_con_io cover the processes the
// snoopers select (cfg.Targets): in whitelist mode the resolved set, in
// blacklist mode every process in /proc not excluded; without targets
// nothing. A process first seen in a period is reported from the next one,
// unless it started during the period (its start time is after the previous
// sample), in which case all of its counters belong to the period and it is
// reported at once; a reused pid is a new process.
//
// Semantics worth knowing (and where they differ from gala-gopher):
//   - util_per and total_used_per count idle and iowait as idle, over the
//     eight columns user..steal, as gala-gopher does; *_msec are tick
//     deltas times 1000/USER_HZ.
//   - mem util is (MemTotal-MemFree-Buffers-Cached)/MemTotal, gala-gopher's
//     formula (it ignores reclaimable slab); swap_util is 0 without swap.
//   - system_iostat follows `iostat -x`: r/s, rkB/s, r_await (ms per
//     completed read), rareq-sz (kB), the same for writes, aqu-sz and %util
//     over the elapsed time; per-request averages are 0 when no request
//     completed. Every /proc/diskstats line is reported, partitions and
//     idle loop devices included, as gala-gopher does.
//   - system_df follows GNU df's default listing (no pseudo filesystems, no
//     zero-block filesystems, one line per device and per mount point) and
//     its rounding (1K-blocks and Use% rounded up). MountStatus is "RW" or
//     "RO" from the mount options.
//   - nic covers the physical devices (not under /sys/devices/virtual/net),
//     or only dev_name when that parameter is set; rxspeed_KB/txspeed_KB are
//     KiB per second. tc_sent_drop and tc_sent_overlimits are period deltas
//     of the root qdisc, tc_backlog its queued bytes now, tc_ecn_mark the
//     running total of ECN marks summed over the device's qdiscs (gala-gopher
//     takes the first "ecn_mark" tc prints, and prints 0 when there is none).
//   - system_proc: counters (io, page faults, *_jiffies) are period deltas,
//     cpu_util is their share of one CPU over the period (so up to 100 x the
//     CPUs), cpu_user_util excludes guest time; smaps sizes are kB, vm_size
//     and pm_size bytes, pm_util is RSS over MemTotal.
//   - system_con_io write_rate is the growth of the directory's apparent
//     size per second: net growth, not bytes written (overwrites in place and
//     short-lived files are not seen; a shrinking directory reports 0, where
//     gala-gopher's unsigned subtraction wraps). gala-gopher also measures the
//     baseline in svg_dir but reports elf_path; galago uses elf_path for both.
//   - Events (report_event=1) carry gala-gopher's exact texts: cpu
//     total_used_per, mem util and swap_util, fs IUsePer and UsePer, disk util
//     above res_upper_thr (when > 0); nic tx_dropped, rx_dropped, tx_errs and
//     rx_errs period deltas above drops_thr (when > 0), "net device tx queue
//     drops(N)." and "net device tx queue errors(N)." and their rx twins.
package baseinfo
