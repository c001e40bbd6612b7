// Package container is gala-gopher's "container" feature: the container_*
// tables its cadvisor_probe.py scraped from a cAdvisor process, read here
// natively. No cAdvisor runs; the cadvisor_port parameter is accepted,
// echoed and ignored.
//
// Which containers: those holding a process the snoopers select (proc
// snoopers; in blacklist mode every process not excluded), mapped to its
// container by internal/identity (cgroup paths, runtime state files and
// the runtimes' APIs: CRI, containerd, Docker Engine).
// Each report_period every such container gets one row per table, keyed by
// container_id, the 12-digit abbreviation gala-gopher uses in its labels;
// the store's enrichment adds container_name, container_image, the pod
// labels and the pod_labels requested. The values are the kernel's cumulative counters and levels at
// the end of the period, as cAdvisor exports them (gala-gopher types them
// all as gauges).
//
// Sources. The container's cgroup directories come from /proc/<pid>/cgroup
// of one of its processes, each path cut after the segment naming the
// container (a process in a sub-cgroup gives the same directories), under
// the mount points of /proc/1/mountinfo. A v1 controller's hierarchy is
// used where that controller is mounted (legacy and hybrid hosts), the
// cgroup2 directory otherwise (unified hosts).
//
//	table              field                                  cgroup v1                                 cgroup v2
//	container_cpu      cpu_usage_seconds_total                cpuacct.usage / 1e9                       cpu.stat usage_usec / 1e6
//	                   cpu_user_seconds_total                 cpuacct.stat user / USER_HZ               cpu.stat user_usec / 1e6
//	                   cpu_system_seconds_total               cpuacct.stat system / USER_HZ             cpu.stat system_usec / 1e6
//	                   cpu_cfs_throttled_seconds_total        cpu.stat throttled_time / 1e9             cpu.stat throttled_usec / 1e6
//	                   cpu_load_average_10s                   threads in state R or D in the container's cgroup tree (v1 tasks,
//	                                                          v2 cgroup.threads; /proc/<tid>/stat), sampled every second,
//	                                                          exponentially decayed mean with a 10 s time constant
//	container_memory   memory_usage_bytes                     memory.usage_in_bytes                     memory.current
//	                   memory_cache                           memory.stat total_cache                   memory.stat file
//	                   memory_rss                             memory.stat total_rss                     memory.stat anon
//	                   memory_mapped_file                     memory.stat total_mapped_file             memory.stat file_mapped
//	                   memory_working_set_bytes               usage - total_inactive_file (>= 0)        usage - inactive_file (>= 0)
//	container_fs       fs_inodes_total, fs_inodes_free        statfs(2) of /proc/<pid>/root: the filesystem of the container's root
//	                   fs_reads_bytes_total,                  blkio.throttle.io_service_bytes           io.stat rbytes, wbytes
//	                   fs_writes_bytes_total                  (_recursive) Read, Write                  summed over devices
//	                   fs_read_seconds_total,                 blkio.io_service_time_recursive           never set
//	                   fs_write_seconds_total                 (CFQ / debug BFQ only)
//	container_network  network_{receive,transmit}_*           /proc/<pid>/net/dev of a process of the container, every
//	                                                          interface but lo summed (bytes, errors, drops)
//	container_file     file_descriptors                       entries of /proc/<pid>/fd summed over every process of the
//	                                                          container's cgroup tree (cgroup.procs)
//	container_start    start_time_seconds                     btime + start time of the container's oldest process
//	container_oom      oom_events_total                       tp_btf/mark_victim kills whose victim was in one of the
//	                                                          container's cgroups, since the probe started (oom.bpf.c),
//	                                                          each killed process once (the kernel may mark a second
//	                                                          thread of a dying victim at a later OOM; memory.events'
//	                                                          oom_kill does not count that, and neither does galago)
//
// proc_oom (galago's own; coroot-node-agent's OOM events per process): the
// same mark_victim program also writes one record per victim (pid, tgid,
// comm, oom_score_adj, cgroup ids) to a 64 KiB ring buffer. A victim that
// the snoopers select, or that ran in a container reported in the last
// period, gives a proc_oom row in the period of the kill (tgid key, comm
// and container_id labels, oom_kills = the kills of that process in the
// period: gala_gopher_proc_oom_kills) and, with report_event=1, at once an
// abnormal event: entity proc, id <tgid>, metric oom_kills, PID, COMM and
// ContainerID set, "Process(PID:<tgid>, COMM:<comm>) killed by the OOM
// killer(oom_score_adj <n>).". A full ring or more than 1024 victims in a
// period lose records, counted in galago_probe_events_lost_total; the
// container_oom counts are unaffected. In whitelist mode a victim must
// still be in the resolved set when its record is read (within about
// 100 ms), or be in an observed container.
//
// A container whose last process is OOM-killed (Kubernetes' OOMKilled) is
// gone at the next period; if kills were counted in its cgroups since its
// last row, one last container_oom row reports them, then it is forgotten.
// A process that is exiting (moved to the root cgroup) is not read, so a
// container never gets the root cgroup's numbers.
//
// Fields that are never filled with a guess (left unset, so absent from
// every output, and logged once per probe instance with the reason):
//   - fs_read_seconds_total, fs_write_seconds_total: the per-cgroup I/O
//     service time exists only in v1 blkio.io_service_time_recursive, which
//     needs CFQ (removed in Linux 5.0) or BFQ built with
//     CONFIG_BFQ_CGROUP_DEBUG; cgroup v2 has none.
//   - fs_reads_bytes_total, fs_writes_bytes_total on cgroup v1 since Linux
//     6.9: blk-throttle is set up on a disk by its first throttle rule and
//     counts nothing before, so a container whose disks have no
//     blkio.throttle.*_device rule has no count (its file lists no device);
//     on cgroup v2 without the io controller enabled for the container's
//     cgroup (no io.stat).
//   - cpu_cfs_throttled_seconds_total on cgroup v2 without the cpu
//     controller enabled for the cgroup (no throttled_usec); container_memory
//     there without the memory controller (no memory.current).
//   - container_network for a container in the host's network namespace:
//     its counters would be the host's, so it has no row (logged once).
//   - container_oom when tp_btf/mark_victim cannot be loaded (kernels before
//     6.8 pass a pid, not the task; no BTF): logged once by the daemon's
//     missing-hook reporter, the other tables unaffected.
//
// Costs and bounds: per report period and container, a handful of cgroup
// files, one statfs and one /proc/<pid>/fd listing per process; every
// second, one /proc/<tid>/stat read per thread of the observed containers
// (the load sample). At most 4096 sub-cgroups of a container are walked;
// the kernel map keeps the kill counts of at most 4096 distinct victim
// cgroups (least recently killed in dropped first).
//
// Differences from cAdvisor: one network row per container (the .meta has
// no interface key) summing all interfaces but lo; cpu_load_average_10s
// counts the same tasks as cAdvisor's cgroupstats reader (taskstats
// netlink, v1 cpu hierarchy only, off unless --enable_load_reader) but
// from /proc on either cgroup version, and its mean starts at the first
// sample (taken when the probe starts) instead of 0; oom_events_total counts
// from the probe's start (cAdvisor parses the kernel log, from its own
// start); start_time_seconds is the oldest process's start rather than the
// runtime's creation time (a container whose first process exited reports
// the next oldest).
package container
