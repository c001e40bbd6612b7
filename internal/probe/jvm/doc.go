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
//   - the JVM's platform MBeans, for what only they know: jvm_buf_pool
//     (BufferPoolMXBean "direct" and "mapped": Count, MemoryUsed,
//     TotalCapacity) and jvm_mem_pool's coll_* fields
//     (MemoryPoolMXBean.getCollectionUsage). Read as jconsole reads a
//     local JVM, with no agent jar: the attach command
//     ManagementAgent.start_local (idempotent) starts the JVM's local
//     management agent, a JMX RMI connector that accepts loopback callers
//     only and publishes its address in hsperfdata
//     (sun.management.JMXConnectorServer.address); galago speaks JRMP and
//     Java serialization to it in Go (internal/jmx): RMIServer.newClient,
//     then RMIConnection.getAttribute per value. The connection is dialled
//     from inside the JVM's network namespace (setns on a locked thread:
//     a container's loopback), kept across periods, closed (close()) when
//     the JVM exits or the probe stops, re-dialled after an error. A JVM
//     whose agent is already running (-Dcom.sun.management.jmxremote) is
//     read through it even without attach.
//   - /proc/<pid>/stat: proc_cpu_secs_total.
//
// Observed: every process with a hsperfdata file (every JVM, unless run
// with -XX:-UsePerfData), or those the proc snoopers select. Keys and
// labels are gala-gopher's; name is the main class (or jar) of the
// command. Pool names are the MemoryPoolMXBeans' (gala-gopher's agent
// reports those): "Metaspace", "Compressed Class Space", "CodeHeap '...'"
// and the heap's spaces of G1 ("G1 Eden Space", "G1 Survivor Space", "G1
// Old Gen"), Serial ("Eden Space", "Survivor Space", "Tenured Gen") and
// Parallel ("PS Eden Space", "PS Survivor Space", "PS Old Gen"), found by
// hsperfdata's sun.gc.policy.name; a survivor pool is the current "from"
// space of hsperfdata's s0 and s1 (which swap roles at each young
// collection: the one in use, "to" being empty between collections), as
// JMX's is. used, committed and max are the MXBeans' (G1's eden and
// survivor have no max, its old gen the heap's; Parallel's eden and
// survivor max are the sizes of the JVM's start, read from their
// CollectionUsage: absent without JMX). The spaces of other collectors
// (those hsperfdata has: CMS, Epsilon, ...) are named "<generation>
// <space>" as hsperfdata names them. Collector names are the JMX ones
// where there is one ("G1 Young Generation", "G1 Old Generation", "Copy",
// "MarkSweepCompact", "PS Scavenge", "PS MarkSweep"), else hsperfdata's
// ("G1 concurrent cycle pauses"). jvm_mem nonheap is the sum of the
// non-heap pools, as JMX sums them.
//
// Cost: one /proc/<pid>/root/tmp glob per process per period (to find
// JVMs), then per JVM one 32 KiB file read and three attach commands (two
// more once per JVM) and 9 JMX calls on one loopback connection (6 for the
// buffer pools, one per pool with a collection usage: 3 for G1, Serial and
// Parallel; pools found without one are not asked again). The management
// agent costs the JVM a few threads (RMI and JMX: counted in its threads)
// and two 8 KiB temporary direct buffers of its socket I/O (counted in its
// direct pool, as with jconsole); its connector drops a connection idle
// for 2 minutes, re-dialled then. Every JMX read and write has the attach
// timeout (5 s): a hung JVM costs one timeout a period, the other tables
// are still reported. A reply is bounded to 1 MiB, the serialization
// reader's handles to 65536 and its nesting to 64.
//
// Thread.print stops the JVM at a safepoint to walk its threads, as the
// JMX agent's findDeadlockedThreads does. The first attach starts the
// JVM's Attach Listener thread (counted in its threads from then on).
// Attach is not tried on a JVM that does not catch SIGQUIT (-Xrs: the
// signal would kill it) or has attach disabled
// (-XX:+DisableAttachMechanism: hsperfdata's capabilities), and once it
// failed for a JVM it is not retried:
// that JVM's heap then comes from hsperfdata, and threads_deadlocked, the
// runtime label, heap init/max, the code heap pools, jvm_buf_pool and the
// coll_* fields are not reported (said once in the log). A JVM whose
// agent cannot start (ManagementAgent.start_local fails) gets no
// jvm_buf_pool and no coll_* fields (one log line). A reply is bounded
// to 32 MiB.
//
// Not measured: nonheap init and max (JMX gives -1 for unbounded
// metaspace). Metaspace's max is MaxMetaspaceSize when set (VM.flags),
// else absent, as JMX has it undefined (-1); without attach absent. The
// coll_* fields are set only for pools JMX has a collection usage for (the
// heap's three of G1, Serial and Parallel; not Metaspace, class space or
// the code heaps: absent, not zero); the spaces of other collectors are
// named here as hsperfdata names them, so they are asked by a JMX name
// that does not exist and get none. A connector with a client socket
// factory (an SSL-only agent started by the JVM's own flags) is not
// supported. The JVM's RMIConnection is not leased through RMI's
// distributed GC (the agent's connector exports it as a daemon object: it
// lives until closed or idle 2 minutes). threads_deadlocked counts monitor
// deadlocks (Thread.print without -l: ownable synchronizers would need a
// heap walk). With GOPHER_HOST_PATH set, galago must share the host's pid
// namespace to signal a JVM; it needs CAP_KILL to signal another user's
// JVM and CAP_DAC_OVERRIDE to connect to its attach socket (mode 0600, the
// JVM's user's): the systemd unit and the DaemonSet hold both; without
// them such JVMs get the hsperfdata tables only (one log line each).
// Dialling a JVM's connector from inside its network namespace needs
// CAP_SYS_ADMIN (held by both as well); without it the JMX values are
// missing (the failure counted, logged once per JVM).
package jvm
