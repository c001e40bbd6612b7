// Package realsrv starts the real servers galago is measured and tested
// against (Debian's nginx, redis-server, PostgreSQL as the postgres user,
// memcached; loopback ports, files under a caller's directory), reads
// their own counters (the ground truth), and parses the reports of their
// load generators (wrk, redis-benchmark, pgbench, memcslap); KafkaWire is
// a Kafka broker's own count of the records on its connections (kfake's
// listener). It is shared
// by make bench (internal/bench) and the privileged tests; Procs owns the
// processes, can start them in a cgroup2 directory of the caller's, and
// stops them all.
//
// Limits: servers need their Debian packages (make test-deps); counters
// are corrected for the harness's own reads, which never use the workload
// port.
package realsrv
