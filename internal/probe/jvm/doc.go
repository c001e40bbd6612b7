// Package jvm is galago's jvm feature (gala-gopher's jvmprobe): the
// jvm_* tables of every observed HotSpot JVM, without an agent jar.
//
// Sources, per report_period and JVM:
//
//   - hsperfdata, the JVM's own performance counters
//     (/proc/<pid>/root/tmp/hsperfdata_<user>/<nspid>: the file in the
//     JVM's mount namespace, named by its pid there, so a container's JVM
//     is read from the host), parsed in Go (ParsePerfData): main class,
//     vendor and version, JVM start time, classes, threads, collectors
//     (counts and time), the heap's spaces. jstat reads the same counters.
//   - the HotSpot attach protocol, in Go (attach.go: the
//     .attach_pid<nspid> trigger and SIGQUIT, then the Unix socket
//     /proc/<pid>/root/tmp/.java_pid<nspid>), for what hsperfdata lacks or
//     holds stale: GC.heap_info (heap used and committed now: hsperfdata's
//     G1 counters move only at retired regions and collections;
//     Metaspace and class space, which hsperfdata updates at collections
//     only), Compiler.codecache (the code heap pools), Thread.print (the
//     threads of Java-level deadlocks: threads_deadlocked),
//     VM.system_properties and VM.flags once per JVM (runtime label, heap
//     init and max).
//   - /proc/<pid>/stat: proc_cpu_secs_total.
//
// Observed: every process with a hsperfdata file (every JVM, unless run
// with -XX:-UsePerfData), or those the proc snoopers select. Keys and
// labels are gala-gopher's; name is the main class (or jar) of the
// command. Pool names are the JMX ones for G1 ("G1 Eden Space", "G1
// Survivor Space", "G1 Old Gen", "Metaspace", "Compressed Class Space",
// "CodeHeap '...'"); the spaces of other collectors are named
// "<generation> <space>" as hsperfdata names them. Collector names are
// the JMX ones where there is one ("G1 Young Generation", "G1 Old
// Generation", "PS Scavenge", ...), else hsperfdata's ("G1 concurrent
// cycle pauses"). jvm_mem nonheap is the sum of the non-heap pools, as
// JMX sums them.
//
// Cost: one /proc/<pid>/root/tmp glob per process per period (to find
// JVMs), then per JVM one 32 KiB file read and three attach commands
// (two more once per JVM);
// Thread.print stops the JVM at a safepoint to walk its threads, as the
// JMX agent's findDeadlockedThreads does. The first attach starts the
// JVM's Attach Listener thread (counted in its threads from then on).
// Attach is not tried on a JVM that does not catch SIGQUIT (-Xrs: the
// signal would kill it) or has attach disabled
// (-XX:+DisableAttachMechanism: hsperfdata's capabilities), and once it
// failed for a JVM it is not retried:
// that JVM's heap then comes from hsperfdata, and threads_deadlocked, the
// runtime label, heap init/max and the code heap pools are not reported
// (said once in the log). A reply is bounded to 32 MiB.
//
// Not measured: jvm_buf_pool (the direct and mapped buffer pools are
// only known to the JVM's BufferPoolMXBean, which neither hsperfdata nor
// any diagnostic command exposes) and jvm_mem_pool's after-last-collection
// fields (mem_pool_coll_*: the same); nonheap init and max (JMX gives -1
// for unbounded metaspace). Said in one log line at start.
// threads_deadlocked counts monitor deadlocks (Thread.print without -l:
// ownable synchronizers would need a heap walk). With GOPHER_HOST_PATH
// set, galago must share the host's pid namespace to signal a JVM; it
// needs CAP_KILL to signal another user's JVM and CAP_DAC_OVERRIDE to
// connect to its attach socket (mode 0600, the JVM's user's): the
// systemd unit and the DaemonSet hold both; without them such JVMs get
// the hsperfdata tables only (one log line each).
package jvm
