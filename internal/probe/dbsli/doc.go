// Package dbsli is galago's ksli and postgre_sli features (gala-gopher's
// ksliprobe and pgsliprobe): the latency of each request a Redis or
// PostgreSQL server serves, seen from the server process, from the read
// of the request's first bytes to the write of the response's first
// bytes.
//
// Both are views on the one syscall capture (internal/syscap) the l7
// probe reads: a Shared capture fans its records out, so when l7 also
// runs no hook is added, only the kernel's protocol set grows by Redis or
// PgSQL if l7 did not trace it already. Each view parses its server
// connections with the l7 parsers (internal/l7/redis, internal/l7/pgsql).
// Like gala-gopher's they have no snoopers: every process's server
// connections of the protocol are observed (a client's are not). The
// capture's BPF run time is the l7 probe's when it runs; the views do not
// report it a second time.
//
// Tables (gala-gopher's keys and labels): redis_sli / redis_max_sli and
// pg_sli / pg_max_sli, keys tgid, ins_id (the server's socket fd of the
// client connection), app (REDIS, POSTGRE), method; labels server_ip,
// server_port, client_ip, client_port. method is the Redis command
// (GET, SET, CONFIG GET: the l7 template) and, for PostgreSQL, the
// statement kind: the leading keyword of the statement (SELECT, UPDATE,
// INSERT, BEGIN, END, ...), where gala-gopher gives the protocol message
// type byte ('Q', 'P'): the kind says what ran. UNKNOWN when the capture
// did not hold it. One row per connection and method per report_period:
// rtt_nsec is the mean latency of its requests in the period (gala-gopher
// reports one sampled request), max_rtt_nsec the largest. redis_max_sli
// is reported with continuous_sampling=1 only, pg_max_sli always, as in
// gala-gopher. A pipelined batch's requests each count from their own
// arrival in the batch's read to their response's first write; a request
// whose connection closed before the response has no latency and is not
// counted.
//
// Events (report_event=1, latency_thr ms): a row whose slowest request
// took longer raises gala-gopher's "Process(TID:%d, CIP(%s:%u),
// SIP(%s:%u)) SLI(%s:%llu) exceed the threshold." on entity sli, id
// <tgid>_<fd>, metric rtt_nsec.
//
// TLS (postgre_sli): the capture's OpenSSL uprobes are attached to the
// host's libssl and to the libssl of every process named postgres or
// gaussdb (openGauss), so TLS sessions are parsed from their plaintext;
// they stay attached while any consumer of the capture wants them.
// ksli has no TLS (gala-gopher's neither).
//
// Bounds: at most 16384 rows (connections × methods) per period; requests
// beyond, and what a parser could not account for (a gap the capture left
// that hid message boundaries), are counted in
// galago_probe_events_lost_total{probe="ksli"|"postgre_sli"}, with the
// capture's own losses.
//
// Not measured: gala-gopher's tc ingress timestamp (the time the request
// reached the NIC) needs a tc program per device (dev_name); galago times
// from the syscall that read the request, so queueing in the socket
// buffer before the server reads is not included (dev_name is accepted
// and not used; said in one log line at start).
package dbsli
