// Package flamegraph is galago's flamegraph feature, gala-gopher's
// stackprobe: on-CPU and off-CPU stack profiles of the observed processes,
// written as folded stacks, pprof profiles and SVG flame graphs.
//
// # Sub-items
//
//   - oncpu: a software cpu-clock perf event per online CPU samples every
//     perf_sample_period ms (default 10); the perf_event program on_cpu
//     records the running task's user and kernel stacks
//     (bpf_get_stackid into a BPF_MAP_TYPE_STACK_TRACE map) and counts
//     samples per (tgid, user stack, kernel stack) in a hash map, in the
//     kernel. Count unit: samples (× perf_sample_period = CPU time).
//   - offcpu: tp_btf/sched_switch. A thread switched out in a blocked
//     state leaves its switch-out time and stacks; when it is switched in
//     again the blocked time is added to its (tgid, stacks) in the
//     kernel. Preempted threads (still runnable) are not counted: that is
//     run-queue delay, not off-CPU time. Count unit: µs.
//   - mem, mem_glibc, io: NOT BUILT. A request for only those is refused
//     with "not supported in the current version"; alongside a built
//     sub-item they are named in one warning log line and ignored.
//
// Snoopers (proc_id, proc_name, container, pod) are applied in the kernel
// (bpfrt.FilterSync, galago_observed) and again when the maps are read.
//
// # Outputs
//
// User space drains the counts maps every 2 s (each row read and deleted
// atomically), names the stacks (package symtab) while the processes still
// run, and deletes the stacks no longer referred to. Every svg_period (s,
// default 180), and when the probe stops, it writes per observed process and
// type, in gala-gopher's layout:
//
//	<flame_dir>/<type>/tmp_<pid>                                    folded stacks "f1;f2;… count"
//	<output_dir>/<type>/<YYYY-MM-DD>/<YYYY-MM-DD-HH-MM-SS>-<pid>.svg   flame graph
//	<output_dir>/<type>/<YYYY-MM-DD>/<YYYY-MM-DD-HH-MM-SS>-<pid>.pb.gz pprof profile (galago's addition)
//
// output_dir defaults to /var/log/gala-gopher/stacktrace and flame_dir to
// /var/log/gala-gopher/flamegraph; date directories older than a week are
// removed. Each stack's bottom frames are "[Pod]<pod>;[Con]<container>;
// [<pid>]<comm>" (the first two for processes in pods and containers, with
// WithIdentity), then the user frames root to leaf, then the kernel frames
// suffixed "_[k]"; in pprof the bottom frames are the labels pid, comm,
// container and pod. A stack the
// kernel could not record (stack map bucket collision, -EEXIST) is kept
// with a "[lost user stack]" or "[lost kernel stack]_[k]" frame, so totals
// stay exact; those, a full counts map and a stack deleted under a sample
// are counted as lost events. The SVG is drawn by galago itself (gala-gopher
// runs flamegraph.pl): widths proportional to counts, a <title> per frame
// for hover, click to zoom. The pprof profile's samples equal the folded
// counts (oncpu also carries cpu nanoseconds = samples × period).
//
// # Pyroscope
//
// When pyroscope_server is "host:port" (default localhost:4040; empty or
// malformed turns it off, as in gala-gopher), every 20 s and at stop the
// stacks drained since the last push are POSTed as folded text to
// http://<server>/ingest?name=gala-gopher-<type>-<system-uuid>[.<pid> with
// multi_instance=1]&from=<s>&until=<s>&units=samples&sampleRate=<r>, 3 s
// timeout; r is 1000/perf_sample_period for oncpu and 1000000 for offcpu
// (whose counts are µs). system-uuid is the DMI product UUID (the machine
// id without DMI). A failing server is logged once until a push succeeds.
//
// # Live profiles over HTTP
//
// With WithHub, the REST server also answers
// GET /flamegraph/pprof?type=oncpu|offcpu&seconds=N (default 30, at most 60):
// a gzipped pprof profile of every observed process, from the samples
// drained during those N seconds (2 s granularity at the edges); pid and
// comm are sample labels (go tool pprof -tagroot=pid ...). 503 when the probe
// does not run that type.
//
// # Limits
//
// Stacks are walked by the kernel with frame pointers. Code built without
// them (-fomit-frame-pointer, the default of gcc -O2 and of most
// distribution libraries) gives truncated or skewed user stacks: a frame
// through such a function loses its callers. Go keeps frame pointers, but
// a leaf function without a frame of its own hides its caller. No DWARF or
// .eh_frame unwinding, no Java/Python/JIT frames (no perf maps);
// native_stack is accepted and ignored. Short-lived processes are
// named as long as they live until the next drain; after that their
// frames are "<file>+0x<offset>" or "[unknown]". Off-CPU time is counted
// when the thread wakes, in the window of its wake-up; a thread that
// blocked before the probe started is not counted for that block. The
// sampling events are opened on the CPUs online at start (or at a change of
// perf_sample_period): a CPU brought online later is not sampled. Symbol
// tables stay cached per file (device and inode) while the probe runs.
//
// # Costs
//
// oncpu: one program run per CPU per sample period (100 per second per
// CPU at 10 ms), two stack walks each, whether or not the sampled task is
// observed (the filter returns early). offcpu: one program run per context
// switch on the machine; observed blocked threads add two stack walks and a
// hash update. Memory: the stack map (16384 × 1 KiB) and three hash maps of
// 32768 entries.
package flamegraph
