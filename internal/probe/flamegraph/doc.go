// Package flamegraph is galago's flamegraph feature, gala-gopher's
// stackprobe: on-CPU, off-CPU and memory stack profiles of the observed
// processes, written as folded stacks, pprof profiles and SVG flame graphs.
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
//   - mem: tp_btf/page_fault_user and page_fault_kernel (x86 only; on
//     other architectures the missing hook is reported once and mem
//     counts nothing): each page fault of an observed process counts one
//     page (bytes = the page size) on its user stack, plus the kernel
//     stack for a fault taken in the kernel on a user address (a read(2)
//     into a fresh buffer), in the kernel. gala-gopher's mem program does
//     the same. A fault is memory first touched (or copied on write, or a
//     file page mapped), not a malloc: what the process costs in RSS and
//     where. Unit: bytes; pprof alloc_objects (faults) and alloc_space.
//     gala-gopher's other variant (brk growth and mmap lengths) is not
//     built.
//   - mem_glibc: uprobes and uretprobes on malloc, calloc, realloc,
//     memalign, aligned_alloc, valloc, pvalloc (its rounding up to a page
//     not counted) and posix_memalign, and a uprobe on free, attached to every libc file (libc.so.6,
//     libc-2.x.so) the observed processes map, read through
//     /proc/<pid>/root, once per file (device and inode), plus the host's
//     libc at start so processes that start later are counted from their
//     first call; symbols are found in the file's ELF symbol table at
//     attach time. A libc probe fires for every process mapping the file:
//     the entry program keeps the observed ones (in-kernel filter). The
//     return probe takes the caller's stack (its pc is the allocating
//     function's) and counts the bytes and one allocation per (tgid,
//     stack) in the kernel, and records the block (address, size, stack)
//     in a map of live blocks that free (and realloc, when it moves or
//     frees a block) deletes. A nested call (realloc(NULL, n) calling
//     malloc inside libc) is told by its lower stack pointer and counted
//     once, as the outer call. The folded file, SVG and Pyroscope carry
//     the bytes allocated in the window; the live bytes per stack at the
//     window's end (allocated, whenever, and not yet freed: gala-gopher's
//     memory-leak view) are written beside them as tmp_<pid>.inuse and
//     <time>-<pid>.inuse.svg; the pprof profile carries Go's heap sample
//     types alloc_objects, alloc_space, inuse_objects and inuse_space
//     (the default). Limits: at most 65536 live blocks are tracked (a
//     block beyond is counted as allocated, not as live, and the overflow
//     is counted in the lost events, as is an allocation call that could
//     not be recorded); statically linked programs and other allocators
//     (jemalloc, tcmalloc, Go's heap) are not seen; live means allocated
//     since mem_glibc started (older blocks are unknown, their free finds
//     nothing); the blocks of a process are forgotten when it exits (a
//     process that execs keeps its old ones until then); a live block's
//     stack stays in the stack map (16384 slots) while the block lives,
//     so many distinct live stacks make other stacks collide more often
//     ("[lost user stack]", counted). Stacks: Debian's libc is built
//     without frame pointers, so a stack through libc (malloc called from
//     qsort's callback, stdio's buffers) loses the frames below the libc
//     function; the allocating function and its callers are named when
//     they keep frame pointers.
//   - io: NOT BUILT (gala-gopher has no program for it either). A request
//     for only io is refused with "not supported in the current version";
//     alongside a built sub-item it is named in one warning log line and
//     ignored.
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
// container and pod. mem_glibc adds <flame_dir>/mem_glibc/tmp_<pid>.inuse
// and <time>-<pid>.inuse.svg, the live bytes. A stack the
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
// (whose counts are µs); mem and mem_glibc are sent with units=bytes. system-uuid is the DMI product UUID (the machine
// id without DMI). A failing server is logged once until a push succeeds.
//
// # Live profiles over HTTP
//
// With WithHub, the REST server also answers
// GET /flamegraph/pprof?type=oncpu|offcpu|mem|mem_glibc&seconds=N (default
// 30, at most 60):
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
// .eh_frame unwinding, no Python or other non-Java JIT frames. Java: see
// below (native_stack). Short-lived processes are
// named as long as they live until the next drain; after that their
// frames are "<file>+0x<offset>" or "[unknown]". Off-CPU time is counted
// when the thread wakes, in the window of its wake-up; a thread that
// blocked before the probe started is not counted for that block. The
// sampling events are opened on the CPUs online at start (or at a change of
// perf_sample_period): a CPU brought online later is not sampled. Symbol
// tables stay cached per file (device and inode) while the probe runs.
//
// # Java (HotSpot JIT frames)
//
// native_stack, as gala-gopher: with 0 (the default) a JVM's stacks keep
// only its Java frames (the perf map's compiled methods, "Interpreter"
// and stubs, and unnamed code in anonymous memory, which is JIT code not
// yet in the map); the frames of ELF files (libjvm, libc, the java
// launcher) and the kernel's are left out, and a sample wholly in native
// code counts as the process's own time. With 1, the whole stack.
//
// Compiled Java methods run from the JVM's code cache, anonymous memory
// no ELF file names. A process is taken for a HotSpot JVM when it has an
// hsperfdata file (/proc/<pid>/root/tmp/hsperfdata_<user>/<nspid>, package
// hotspot, as the jvm probe finds JVMs). At the first frame of a JVM that
// no ELF mapping names, galago asks it for its perf map: the diagnostic
// command Compiler.perfmap (OpenJDK 17 and later), sent over the HotSpot
// attach protocol in Go (package hotspot: the .attach_pid trigger and
// SIGQUIT, then the Unix socket), makes the JVM write
// /tmp/perf-<nspid>.map in its own mount namespace, read through
// /proc/<pid>/root. No agent is loaded. The map ("START SIZE name" per
// code blob: compiled methods, "Interpreter", stubs) is parsed into a
// sorted table (symtab.ParsePerfMap, binary search), at most 262144
// entries per JVM (the rest are counted as lost events and logged; their
// frames stay "[unknown]"). Method names are shortened to
// "Class.method(params)" ("Burner.spinHot(long)"). When 16 frames of a
// JVM went unnamed since its last request (code compiled since), it is
// asked again, at most every 30 s; requests run one at a time in the
// background, and frames drained before a map arrives stay "[unknown]".
// Safety, as the jvm probe: a JVM that does not catch SIGQUIT (-Xrs: the
// signal would kill it) is never signalled, one with attach disabled
// (-XX:+DisableAttachMechanism, from hsperfdata) is not asked, and one
// run with -XX:-UsePerfData is not recognised; each is said in one log
// line per JVM and keeps "[unknown]" JIT frames. Limits: interpreted
// methods are all "Interpreter" (the interpreter is one code blob);
// methods inlined into a compiled caller are named after that caller;
// the JIT does not keep frame pointers unless the JVM runs with
// -XX:+PreserveFramePointer, without which a stack stops at the first
// compiled frame (its callers lost or skewed): with it the whole stack,
// from the launcher's JavaMain through the call stub, the interpreter
// and the compiled methods, is walked (tested). The map file is the
// JVM's and stays in its /tmp after it exits (as with perf's JVMTI
// agents). Cost: Compiler.perfmap walks the code cache at a safepoint,
// once at the JVM's first sample and then at most every 30 s while new
// code keeps appearing; the first attach starts the JVM's Attach
// Listener thread. Measured on the test's small JVM (290 code blobs, a
// 2-core machine at a load of 10): starting the attach listener and a
// first command 22 ms, Compiler.perfmap and the parse 27 ms. The first
// request waits for the JVM's first unnamed frame, at a drain (every 2 s):
// samples drained before the map arrives keep "[unknown]" JIT frames.
// Telling JVMs apart costs one /proc/<pid>/status read and one glob of
// its /tmp per process, once, at its first frame no ELF file names.
//
// # Costs
//
// oncpu: one program run per CPU per sample period (100 per second per
// CPU at 10 ms), two stack walks each, whether or not the sampled task is
// observed (the filter returns early). offcpu: one program run per context
// switch on the machine; observed blocked threads add two stack walks and a
// hash update. mem: one program run per page fault on the machine, two
// (user fault) or three map operations and one or two stack walks for an
// observed process. mem_glibc: every allocator call and free of
// every process mapping a probed libc traps into the kernel (a uprobe,
// and a uretprobe for the allocators), observed or not: on the 2-core CI
// VM the alloc command of testdata/burn.c (190k calls of 4000-byte
// blocks) took some 10 to 25 µs more per call with the probes attached,
// for the observed process and nearly as much for an unobserved one on
// the same libc (a rough, noisy figure from a shared machine). The cost
// follows the allocation rate of every process on the probed libc files,
// not only of the observed ones: keep mem_glibc for the time of an
// investigation on allocation-heavy hosts. User space reads the live blocks every drain (batched). Memory: the
// stack map (16384 × 1 KiB), five hash maps of 32768 entries, the live
// blocks (65536 × 32 B) and the calls in flight (16384).
package flamegraph
