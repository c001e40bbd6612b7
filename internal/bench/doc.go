// Package bench is make bench: it measures what galago costs the
// applications it observes, what it costs itself, and whether it counts
// everything, against no agent at all (and optionally a peer agent), in one
// interleaved run on real servers and load generators.
//
// A run starts each needed server once (nginx, redis-server, PostgreSQL as
// the postgres user, memcached; loopback ports, files under a temporary
// directory), then per workload runs rounds of arms: no agent, galago with
// each probe set, the peer; odd rounds in reverse order so that drift and
// position cancel out. Each galago arm is its own daemon with a private config and
// the probe set enabled over REST for the whole host. Workloads
// (Workloads) and probe sets (ProbeSets) are tables: a new one is an entry.
//
// Figures come from outside the agent where the kernel can tell: CPU and
// RSS of the agent's process tree from /proc, BPF run time and map memory
// from the fdinfo of the BPF fds the tree holds (iterator programs, which
// run inside the agent's own read() calls, are told apart by its iter
// links), throughput and p99 from the load generators' own output, and the
// ground truth of the accuracy checks from the servers' own counters.
// galago's Go heap (pprof) and lost-event counters are the only figures it
// reports itself.
//
// The kernel's BPF statistics (kernel.bpf_stats_enabled) cost every run
// of every program two clock reads, which the daemon does not pay by
// default (GALAGO_BPF_STATS). So each agent arm runs its load twice: the
// first run, with statistics off, gives throughput, p99 and the agent's
// CPU; the second (BPFDuration, half as long by default), with them on,
// gives the BPF run time per request and per connection. The accuracy
// checks cover both runs, which galago observed alike.
//
// Limits: figures are only as quiet as the machine (the report gives the
// load average and flags a busy machine); CPU has /proc's 10 ms resolution;
// BPF programs a peer loads and closes (keeping them attached through pins
// or links alone) are invisible to the fd walk; the agent's CPU includes
// being scraped twice per report period; p99 is the load generator's own
// (wrk's is coordinated-omission prone at saturation); timed assertions stay
// out of tests: this package's tests check parsing, sampling, pairing and
// rendering on fixtures.
package bench
