// Package l7 is galago's l7 feature (gala-gopher's l7probe): per
// connection, request/response metrics of the L7 protocols of every
// observed process, as client and as server, without touching the
// process: l7_link (bytes and segments sent and received, sub-item
// l7_bytes_metrics), l7_rpc (request and response counts and throughput,
// latency histogram, sum and average, errors and their ratio) and
// l7_rpc_api (the same per API template, with client and server errors
// split; sub-item l7_rpc_metrics). l7_rpc_trace is accepted and emits
// nothing, as in gala-gopher.
//
// Data comes from the shared syscall capture (internal/syscap): the kernel
// infers each connection's protocol from its first bytes, and only
// connections of the protocols in l7_protocol reach user space, one record
// per read or write with a prefix of its bytes. Each connection has a
// parser of its protocol (internal/l7/<protocol>) that frames both
// directions and pairs requests with responses; exchanges are aggregated
// per row, and rows are reported once per report_period.
//
// Keys: tgid; client_ip, server_ip, server_port (the server's port; for a
// client, the remote end); l4_role tcp_client, tcp_server or udp; l7_role
// client or server; protocol (http, http2, mysql, pgsql, dns, redis, kafka,
// mongo, memcached, crpc); api (l7_rpc_api); label ssl (ssl/no_ssl).
//
// Values: counts are per period; throughput_* are per second over the
// period; latency is from the request's first chunk (the client's write,
// the server's read) to the response's first chunk, in ns, into gala-
// gopher's buckets (10, 50, 100, 500, 1000, 3000, 10000 ms); err_ratio,
// client_err_ratio and server_err_ratio are percentages of the responses.
// Which responses are errors, and whose fault, is each protocol's own
// (its package documentation).
//
// cluster_ip_backend 1: a TCP client connection's rows name the server its
// packets really reach: when the address it connected to was DNAT'd (a
// Kubernetes ClusterIP), server_ip and server_port are the backend's (the
// reply tuple's source in conntrack) instead of the service's. Cost: one
// ctnetlink GET by tuple, in the connection's network namespace, per new
// client connection (internal/conntrack; answers cached per tuple). No
// entry (not NATed), conntrack absent from the kernel or a failed lookup
// (counted in the probe's errors): the address is kept. Server rows and
// UDP are not changed. 2 (gala-gopher's flowtracer map) is served as 1,
// said once in the log; 0, the default, looks nothing up.
//
// Capture size: syscap keeps up to 4 KiB of the first chunk of a turn and
// 256 bytes of the later ones; with HTTP/2 traced (l7_protocol http, the
// default) later chunks keep 4 KiB too, since a multiplexed connection
// starts frames anywhere in any write, and a frame header left out of the
// capture loses the connection's frame boundaries and HPACK table (a
// frame header past 4 KiB of one write still does; counted as lost).
//
// Ring buffer: the capture's records reach user space through one BPF ring
// buffer of 4 MiB; galago.l7_ringbuf_mb (config file) sets it, a power of 2
// from 1 to 256 MiB, fixed while the probe runs (a change takes effect at
// the daemon's next start). A burst the reader cannot keep up with fills it,
// and what does not fit is lost and counted (below): a larger ring absorbs
// longer bursts at the cost of its locked memory.
//
// Map memory (the kernel's memlock accounting; BENCHMARKS.md "Memory" lists
// every map): the capture's largest tables are preallocated, as a record's
// path must not fail to allocate: conns (65536 connections, 7.5 MiB), the
// ring, ssl_calls and go_tls_calls (16384 TLS calls in flight each, 1.8 and
// 1.6 MiB; a call that finds them full counts as lost, and the entries of
// processes that exited mid-call are swept) and ssl_fds (syscap.SSLFDs, 16384 SSL objects, 1.5 MiB; an LRU:
// the least recently used is forgotten, and a buffered TLS call that
// needed it counts as lost). The snooper filter's maps allocate on insert
// (0.8 MiB of buckets). With tcp and socket, the daemon holds ~23 MiB of
// maps (issue 8's budget: 32 MiB, checked by the end-to-end tests). The
// ring's pages are also mapped (twice, for records that wrap) into the
// daemon, so its RSS counts 8 MiB for the default 4 MiB ring.
//
// Cost model (per observed request on a keep-alive connection, both ends
// observed; BENCHMARKS.md "L7: per-request cost" has the figures): every
// send and receive on a socket runs syscap's sock hook once (tp_btf,
// ~40 ns of dispatch), and every close and *mmsg call (and recvfrom and
// recvmsg while DNS is enabled) its exit program (attached per syscall, ~160 ns of dispatch; reads and
// writes of files and pipes run nothing; on kernels without the sock
// tracepoints the exit program takes every data syscall). Each send or
// receive of a traced connection then pays the snooper filter, the
// (process, fd) lookup, a clock read and one ring buffer record with a
// prefix of the bytes (~500 ns charged to the application on the
// development VM, BenchmarkCaptureCharged). A request is
// ~4 such syscalls (the client's write and read, the server's read and
// write): ~3.0-3.3 us of BPF per request under redis-benchmark and
// nginx+wrk, tcp and socket included (BENCHMARKS.md, nineteenth stop).
// In user space each record is copied out of the ring, decoded (no
// allocation), dispatched to its connection and fed to the protocol's
// parser, whose exchanges are aggregated into cached rows (one exchange:
// ~190 ns for HTTP/1 keep-alive, ~270 ns when every request's target
// differs, ~75 ns for Redis; a connection remembers its last request's
// template); the whole agent measured ~0.9-1.2 us of CPU per request, its
// other probes and /metrics included. The target (1 us of agent
// CPU plus BPF per request) needs one record per request/response pair
// built in the kernel (not done: see BENCHMARKS.md). On the PVM guest CI
// runs on (2026-11-29, syscalls ~4x dearer): 740-810 ns per run of the
// exit program on a traced data syscall (48-57 ns when it returns at
// once), 3.4-3.8 us of BPF and 1.4-2.0 us of agent CPU per request, of
// which the hooks and the agent's fixed cost take 1.0-1.2 us with no work
// done (BENCHMARKS.md, "the floor of tcp+socket's hooks, and of l7's").
// Records come in six size classes (128 B to 4 KiB of data) so that an
// HTTP answer of 150 bytes reserves 328 bytes of ring, not 1 096.
//
// Spans: with OTLP traces on (WithSpans; internal/output/otlptrace) every
// exchange also becomes a span, and the HTTP/1 and HTTP/2 parsers then keep
// each request's raw path for url.path (l7.Path, 260 bytes per request in
// flight, no allocation once warm; 0 allocations per exchange measured by
// BenchmarkKeepAlivePaths and BenchmarkGRPCUnaryPaths). Without them the
// parsers keep no path.
//
// Bounds: at most DefaultMaxAPIs distinct api values per service (process,
// server address and port, protocol, role); requests beyond fold into
// api="__overflow__". A parser that loses the message boundaries (bytes the
// capture did not copy hid one) reports it, and the probe counts it in
// galago_probe_events_lost_total{probe="l7"}, with lost ring buffer records,
// connections the kernel table had no room for and TLS calls whose socket
// was not found or that found ssl_calls/go_tls_calls full (the last two
// read at each report period).
//
// TLS attach cost: each observed process's executable and libssl files
// are looked at once per file (device, inode). Only the few functions
// probed are looked up (internal/elfsym: symbol tables streamed through
// fixed buffers, a stripped Go binary's .gopclntab walked in place), so
// a large Go executable costs three 16 KiB buffers and its headers, not
// its symbol table (tens of MB of garbage before); an executable that
// imports SSL_read or SSL_write is not read further (its libssl is
// attached on its own), and one without .go.buildinfo is not probed for
// Go crypto/tls. Go's Write and Read are probed after their stack-check
// prologue (a call that grows its stack there runs its entry twice).
//
// # sermant
//
// The sermant feature (NewSermant; gala-gopher's sermant_probe.py, which
// reads the metrics the Sermant Java agent pushes) is this probe's second
// flavor: the same capture (a consumer of the shared one: no hook of its
// own), the same rows, for one protocol, Dubbo2 (internal/l7/dubbo: the
// kernel infers it from a request's magic 0xdabb and request flag), in
// sermant_l7_rpc and sermant_l7_rpc_api; no Java agent is needed and any
// Dubbo2 process is seen, instrumented by Sermant or not. Sub-items and
// snoopers (proc) as l7's; l7_bytes_metrics has no sermant table and
// gives nothing; l7_rpc_trace is not built (as for l7). l7_protocol is
// ignored: the protocol is Dubbo2. sermant_l7_rpc_api has an api key
// ("<service>[:<version>]/<method>") that gala-gopher's table lacks (its
// rows of one session's APIs would collide). The capture's BPF run time is
// reported once, by l7. Cost and bounds are l7's; losses are counted in
// galago_probe_events_lost_total{probe="sermant"}. Not measured: Dubbo3
// (Triple, HTTP/2: the l7 feature's http2), and bodies in a serialization
// other than hessian2 (counted, without api).
package l7
