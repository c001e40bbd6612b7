// Package tprofiling is gala-gopher's tprofiling feature (PUT /tprofiling):
// a timeline of what each thread of the observed processes does, as
// events (on CPU, off CPU, syscalls by class, pthread lock waits, Python
// collections, CPU samples, heap allocations) with their start, duration
// and details, for finding lock contention, deadlocks and blocking I/O.
//
// # Sources
//
// One capture path: the tprofiling section of the shared syscall capture
// (internal/syscap, tprof.bpf.h), a separate load of its object with its
// own snooper filter (the l7 capture and the proc statistics are not
// touched):
//
//	sys_enter, sys_exit          syscalls of the enabled classes (attached per
//	                             syscall: syscalls:sys_{enter,exit}_<name>), timed per
//	                             thread; one event per call that lasted
//	                             min_exec_dur or more
//	tp_btf/sched_switch          on-CPU and off-CPU slices of observed threads,
//	                             and the user stack of a traced call that blocks
//	tp_btf/sched_process_exit    forgets a thread's state
//	uprobe.multi, uretprobe.multi  pthread_sync and mem_glibc: the C library's
//	                             functions in each observed process (found in
//	                             /proc/<pid>/maps, opened through
//	                             /proc/<pid>/root, so in containers too; the
//	                             default symbol version), attached per
//	                             process (nothing else pays), two or three
//	                             links per process and sub-item
//	uprobe (USDT)                python_gc: CPython's python:gc__start and
//	                             gc__done notes (.note.stapsdt read in Go,
//	                             internal/uprobes; the semaphores counted up
//	                             by the kernel), per observed python process
//	perf_event                   oncpu_sample: a software cpu-clock event on
//	                             every CPU at 99 Hz (gala-gopher's), the code
//	                             flamegraph's oncpu opens (bpfrt.CPUClock)
//
// Sub-items and events (event.name / event.type), as the seed's table:
//
//	oncpu          oncpu / oncpu: a run on a CPU, switch-in to switch-out
//	offcpu         offcpu / offcpu: switch-out to switch-in (blocked or waiting to run)
//	syscall_file   read write readv writev preadv pwritev sync fsync fdatasync / file
//	               (on a socket these are net events, with sock.conn)
//	syscall_net    sendto recvfrom sendmsg recvmsg sendmmsg recvmmsg (and the file
//	               calls on sockets) / net
//	syscall_sched  sched_yield nanosleep clock_nanosleep wait4 select pselect6 poll
//	               ppoll epoll_wait epoll_pwait epoll_pwait2 / sched
//	syscall_lock   futex / lock, with futex.op (wait, wake, ...)
//	pthread_sync   pthread_mutex_lock, _timedlock, _clocklock, _trylock,
//	               pthread_rwlock_{rd,wr,timedrd,timedwr,clockrd,clockwr,tryrd,trywr}lock,
//	               pthread_spin_trylock, pthread_cond_wait, _timedwait,
//	               _clockwait, pthread_barrier_wait, pthread_join,
//	               pthread_timedjoin_np, pthread_tryjoin_np, sem_wait,
//	               sem_timedwait, sem_clockwait, sem_trywait / pthread_sync
//	               (trace category pthread_sync), entry to return above
//	               min_exec_dur, with lock.addr (the first argument: the lock,
//	               condition, barrier, thread or semaphore) and func.stack (the
//	               caller's)
//	python_gc      python_gc / python_gc (category python_gc): one collection,
//	               gc__start to gc__done, with gc.generation and gc.collected
//	               (what gc.collect() returns) and func.stack
//	oncpu_sample   oncpu_sample / oncpu_sample: one cpu-clock sample of a running
//	               thread, with cpu and func.stack; a "P" (sample) event of
//	               category sample in the trace files, as gala-gopher's; never
//	               merged
//	mem_usage      mem_usage / mem_usage: every 10 s, each observed process's
//	               resident bytes (mem.rss, /proc/<pid>/statm; the 1000 largest),
//	               a counter ("C") in the trace files; read in user space, no
//	               kernel hook (gala-gopher: ps's %mem every 60 s, feeding a
//	               growth detector that is not built here)
//	mem_glibc      malloc calloc realloc free / mem_glibc (category mem_glibc): an
//	               allocation with mem.size, its bytes, and func.stack, the
//	               allocating stack; a free with mem.size minus the bytes of the
//	               block (known when its allocation was seen; 0 otherwise) and
//	               no stack; realloc: the new bytes less the old block's. Merged
//	               per min_aggr_dur like the others (mem.size summed, the first
//	               one's stack)
//
// Extended attributes (besides those above): file.path (the fd's path from /proc/<tgid>/fd, when
// the fd still names the event's file), sock.conn ("tcp <local> -> <remote>"
// from the socket in the kernel), futex.op, and func.stack: the thread's
// user stack, for syscall events taken when the call blocks (so a call
// still blocked has it) or else at the exit of one long enough to be
// sent, for offcpu events where the thread went off the CPU (none for
// oncpu). The kernel walks frame pointers
// (bpf_get_stackid into tprof_stacks, 64 frames nearest the leaf kept);
// user space names the frames with the symbolizer flamegraph uses
// (internal/symtab: ELF symbols, .gopclntab, through /proc/<pid>/root)
// and joins them root to leaf, each followed by ";" as gala-gopher does
// ("main;worker;write;"). Code without frame pointers
// (Debian's glibc, most distribution libraries) ends the walk in it, and
// the caller of a leaf that sets up no frame (libc's syscall()) is
// missing; JIT frames (Java) are not named here. Each event names its thread
// (thread.pid, thread.tgid, thread.comm) and process (proc.name, with a
// Java process's main class; process.comm; container.id and
// container.name).
//
// Calls still in progress: a blocked thread's call has no event until it
// returns, and a deadlocked one never does. Every second the probe reads
// the in-flight calls from the kernel's per-thread table; those that have
// lasted min_aggr_dur or more are shown with in_progress=true and a
// duration up to that moment: live in the timeline, in each kafka-channel
// report period, and in the local trace when the probe stops. Such a
// call on a socket is a net event but has no sock.conn yet (the kernel
// reads the connection when the call returns).
//
// # Parameters
//
//	min_exec_dur      (µs, default 1) shorter events are not sent by the kernel
//	min_aggr_dur      (ms, default 100) events of one thread and name shorter than
//	                  this, starting within this of the first, are merged into one
//	                  (count, summed duration, the first one's attributes; the
//	                  seed's "aggregated events"); longer ones stay alone
//	profiling_channel local (default): Chrome trace-event JSON files
//	                  <output_dir>/timeline-trace-<YYYYMMDDHHMM>.json (default
//	                  /var/log/gala-gopher/tprofiling), valid JSON after every
//	                  write (once a second), a new file past 64 MiB; made at the
//	                  first event, so nothing observed leaves nothing behind.
//	                  kafka: one OpenTelemetry log record per thread and
//	                  report_period (gala-gopher's |log| shape: Resource, and
//	                  Attributes.values with event.name, event.type, start_time,
//	                  end_time (ms), duration (ms), count and the extended
//	                  attributes) to the event channels (Kafka's event topic, or
//	                  logs).
//
// In the trace files, oncpu events are "b"/"e" pairs (cat oncpu, cname
// good) and the others "X" events (cat syscall, or offcpu) whose args hold
// count, thread.name, event.type and the extended attributes, as
// gala-gopher writes them; they open in Perfetto (ui.perfetto.dev) and
// chrome://tracing.
//
// # Built-in view
//
// The daemon serves the running probe's last events beside the REST API:
// GET /tprofiling/timeline is a self-contained HTML page (one row per
// thread, colours by event type, hover for details, wheel to zoom, drag to
// pan); GET /tprofiling/trace?seconds=N (default 60, at most 3600) is the
// same window as Chrome trace JSON (&download=1 to save it for Perfetto).
// The view keeps the latest 100000 events.
//
// # Cost and bounds
//
// func.stack costs a stack walk (bpf_get_stackid, user frames only;
// ~1.5-2 µs for a Go benchmark's stack here, BENCHMARKS.md) per event
// sent and per blocking call, not per short call; for it sched_switch is
// attached whenever a sub-item is on (with syscall sub-items only: one
// hash lookup per context switch of the machine). tprof_stacks keeps
// 8192 distinct stacks (about 4.4 MiB): a stack whose bucket holds
// another one is not recorded and counted lost, as is a stack user space
// cannot read. Every 10 s the probe prunes it: a stack no event has named
// for 10 s, that no open aggregate merges and no thread's row holds (its
// call in progress, the stack it went off the CPU in) is deleted, and
// user space forgets what it had read of that id; so a long run keeps
// room for new stacks. An event still in the ring naming a stack idle for
// 10 s at the very moment of a pass loses its stack (counted).
//
// pthread_sync traps every traced pthread call of the observed processes,
// at entry and return, whatever its duration: measured here (2 loaded
// vCPUs) an uncontended pthread_mutex_lock/unlock pair went from 8-10 ns
// to 10-45 µs with min_exec_dur set so high that no event was sent (so
// the traps alone), while the same loop in a process not observed stayed
// at 8-10 ns (the uprobes are limited to the observed pids). It is the
// sub-item for finding contention, not for always-on use on lock-heavy
// code;
// mem_glibc every malloc, calloc, realloc and free of them, each one a
// record in the ring (plus a stack walk per allocation): heavy for
// allocation-heavy processes, where the ring's losses count what it could
// not carry; its table of live blocks is bounded at 1M (past that a
// block's size is unknown at its free; counted lost). Without snoopers
// these two attach to every process mapping a libc. The uprobes of a
// process are attached within a second of its start (the tick scans
// /proc for the new observed processes), detached when it is gone, as
// uprobe_multi links: closing 48 single uprobes took 5 s here (one grace
// period each), two multi links a fraction of a second. oncpu_sample
// costs a program run per CPU per sample period (99 Hz) and a record per
// sample of an observed thread.
//
// Every syscall of the machine runs the two syscall programs while a
// syscall sub-item is on (a switch on the number, then the filter, for the
// traced calls only a hash update); every context switch runs the
// sched_switch program while oncpu or offcpu is (two hash lookups; one
// with syscall sub-items only). One
// 112-byte record per event through a 4 MiB ring buffer with batched
// wake-ups. With the default min_exec_dur of 1 µs nearly every traced
// call of an observed process is an event: raise it for busy processes.
// Bounds, each overflow counted in galago_probe_events_lost_total
// {probe="tprofiling"}: the ring buffer (full ring), the kernel's thread
// table (32768 threads), 65536 open aggregates, 50000 events out of the
// aggregator per second, 200000 events per kafka report period.
//
// # Not built, and what this kernel cannot do
//
// gala-gopher's memory growth detector and its oom-trace snapshot files
// (memory::Allocs, memory::Heap: mem_glibc's top stacks once mem_usage
// sees a process grow) are not built: mem_usage's samples and mem_glibc's
// events go to the trace files and kafka records (the built-in timeline
// page draws no counters). pthread_spin_lock is not
// traced on x86 (its first instruction has a lock prefix, which a uprobe
// cannot replace). python_gc needs a CPython with USDT notes (Debian's,
// built --with-dtrace); a python without them has no python_gc events
// (one warning per such process, naming the file). Stacks through glibc (no frame pointers) are
// cut there, as above. waitpid has no syscall on x86_64 or arm64 (glibc makes
// it wait4); select, poll and epoll_wait do not exist on arm64. A thread
// already on a CPU when the hooks attach has that first slice unreported
// (its start was not seen). 32-bit (ia32) syscalls are not told apart.
// Kernel: 5.8+ (tp_btf, ring buffer), BTF.
package tprofiling
