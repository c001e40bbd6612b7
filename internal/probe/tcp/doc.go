// Package tcp is the tcp feature: per-connection TCP statistics aggregated
// into gala-gopher's tcp_metric table (entity tcp_link), keyed by process
// (tgid, comm), role (client/server), client and server address, server
// port, client port (with report_cport=1; 0, as gala-gopher prints, when
// off) and address family (protocol: 2 IPv4, 10 IPv6; IPv4 on a dual-stack
// socket reports 2).
//
// # How
//
// The kernel already keeps most counters per socket, so the probe reads
// them instead of hooking every packet or syscall:
//
//   - every sample_period one iter/task_file pass over all processes' open
//     files records which process holds each socket (bpf/include/sockowner.h;
//     this also finds connections opened before the probe started and the
//     real holder of accepted sockets) and dumps every observed TCP socket
//     it holds, in every network namespace at once. Subflows of MPTCP
//     connections are in no fd table: in the namespaces where the pass met
//     a connected MPTCP socket, iter/tcp dumps them (iter/tcp walks its
//     opener's namespace, so the probe enters each in turn). A socket the
//     application has closed but the kernel still holds (FIN_WAIT,
//     CLOSING, LAST_ACK) is not sampled: what it sends or receives then
//     is counted by its close record, in the period it closes, and its
//     gauges are not observed meanwhile. Such a connection is remembered
//     for 5 minutes unseen (longer than tcp_fin_timeout and the orphan
//     retransmissions by default) so that its close record adds only the
//     growth since its last sample;
//   - at the transition to CLOSE (tp_btf/inet_sock_set_state) the final
//     counters go to a ring buffer, so connections shorter than a period
//     count exactly;
//   - rare discrete events (resets, drops with a reason, buffer limits) are
//     counted per socket in socket-local storage, by hooks attached only
//     while tcp_abnormal (the sub-item of their fields) is on: Start and
//     Reconfigure attach and detach them, so e.g. tcp_stats alone runs just
//     inet_sock_set_state and the two iterators. Counts of a hook attached
//     mid-period start at the attachment;
//   - net_delay (proc_flow_perf, sub-item tcp_delay) comes from a cgroup
//     sock_ops program attached at the cgroup2 root only while tcp_delay is
//     on (below).
//
// Counters become per-period deltas per connection (connections that
// existed at Start count from Start), summed per row; gauges of the
// connection state become one histogram observation per connection per
// sample. The owner is the process that called connect() or listen();
// accepted sockets take their listener's owner until the next task_file
// walk names the process holding them. The snooper filter (whitelist or
// blacklist of processes and cgroups) is applied in the kernel
// (bpfrt.FilterSync) on every path, and again in Go when a period's rows
// are reported. Processes matching proc_name, container or pod snoopers
// are observed from their fork or exec on, before user space has
// classified them (the kernel's pending classification, see
// bpf/include/common.h), and stay observed after they exit for
// snoop.KernelExitGrace in the kernel and snoop.ExitGrace in Go, so the
// connections of a process that lives a millisecond, and the last
// connections of one that exits right after them, are counted. The rows
// of a process not observed wait for the next report while its fork and
// exec events may not have been handled yet (snoop.Holdback).
//
// # Fields
//
//	field               sub-item      source
//	rx_bytes            tcp_stats     tcp_sock.bytes_received minus a received FIN (data bytes)
//	tx_bytes            tcp_stats     tcp_sock.bytes_acked minus the SYN (active open) and an acked FIN
//	segs_in, segs_out   tcp_stats     tcp_sock.segs_in / segs_out (as tcp_info)
//	srtt [h]            tcp_rtt       tcp_sock.srtt_us>>3, µs
//	rcv_rtt [h]         tcp_rtt       tcp_sock.rcv_rtt_est.rtt_us>>3, µs (samples with no estimate yet skipped)
//	snd_cwnd [h]        tcp_windows   tcp_sock.snd_cwnd, segments
//	notsent_bytes [h]   tcp_windows   write_seq - snd_nxt
//	notack_bytes [h]    tcp_windows   snd_nxt - snd_una
//	reordering [h]      tcp_windows   tcp_sock.reordering
//	snd_wnd, rcv_wnd [h] tcp_windows  tcp_sock.snd_wnd / rcv_wnd, bytes
//	avl_snd_wnd [h]     tcp_windows   snd_una + snd_wnd - snd_nxt (0 when negative)
//	rto, ato [h]        tcp_rate      icsk_rto / icsk_ack.ato, jiffies -> ms (CONFIG_HZ from the kernel config)
//	syn_srtt [h], syn_srtt_max  tcp_srtt  srtt when the handshake completed (SYN_SENT/SYN_RECV -> ESTABLISHED), µs
//	sk_rcvbuf, sk_sndbuf [h]    tcp_sockbuf  sock.sk_rcvbuf / sk_sndbuf, bytes
//	retran_packets      tcp_abnormal  tcp_sock.total_retrans (as tcp_info)
//	sk_drops            tcp_abnormal  sock.sk_drops (+ NUMA drop counters on 6.17+)
//	lost_out, sacked_out tcp_abnormal per connection the period's maximum of tcp_sock.lost_out / sacked_out, summed
//	backlog_drops       tcp_abnormal  tp_btf/kfree_skb, reason SKB_DROP_REASON_SOCKET_BACKLOG, rx socket (6.12+)
//	filter_drops        tcp_abnormal  tp_btf/kfree_skb, reason SKB_DROP_REASON_SOCKET_FILTER, rx socket (6.12+)
//	snd_buf_limit_count tcp_abnormal  tp_btf/sock_exceed_buf_limit, kind SK_MEM_SEND
//	rmem_scheduls       tcp_abnormal  tp_btf/sock_exceed_buf_limit, kind SK_MEM_RECV
//	send_rsts           tcp_abnormal  tp_btf/tcp_send_reset (with a socket; also after tcp_disconnect)
//	receive_rsts        tcp_abnormal  tp_btf/tcp_receive_reset
//	retrans_ratio       tcp_abnormal  retran_packets / segs_out of the period (unset when nothing was sent)
//	tmout_count         tcp_abnormal  tcp_sock.total_rto (6.7+): RTO expirations, SYN ones and repeated ones
//	                                  included (as tcpi_total_rto), per-period delta modulo 2^16
//	tcp_oom             tcp_abnormal  tp_btf/tcp_send_reset with reason SK_RST_REASON_TCP_ABORT_ON_MEMORY
//	                                  (6.10+ reason argument; the enum value resolved by CO-RE)
//	net_delay [h]       tcp_delay     proc_flow_perf, ns: end of tcp_sendmsg to the ACK of its last byte
//	                                  (sock_ops BPF TX timestamping, 6.15+)
//
// tmout_count: gala-gopher counts RTO timer expirations per connection;
// the kernel has counted exactly that per socket since 6.7 (total_rto,
// bumped in tcp_retransmit_timer, also for SYN and SYN-ACK timeouts and
// for the repeated expirations of one loss). Read by the iterator and at
// close (guarded by bpf_core_field_exists). Verified against the kernel's
// own tcpi_total_rto (getsockopt TCP_INFO; golang.org/x/sys v0.49
// TCPInfo has the field) of a connection whose data an iptables DROP rule
// discarded for 1.5 s: 4 expirations on the client, tmout_count 4; 0 on
// the server, tmout_count 0.
//
// tcp_oom: tcp_check_oom() returning true (too many orphans, or the socket
// over tcp_mem's hard limit) is always followed, in tcp_close and in
// tcp_out_of_resources, by tcp_send_active_reset with reason
// SK_RST_REASON_TCP_ABORT_ON_MEMORY (the kernel's TCPAbortOnMemory
// counter); counting those resets is gala-gopher's count of
// tcp_check_oom() == true. Event "TCP out of memory(N)." when tcp_oom > 0.
// How it was verified, and what was not: a real trigger needs either
// net.ipv4.tcp_mem or net.ipv4.tcp_max_orphans lowered, and on 6.18 both
// are global (not per network namespace: neither file exists under
// /proc/sys/net/ipv4 inside a test namespace, checked): lowering
// them makes every closing connection of the machine abort, which a test
// sharing the machine cannot do safely. So the positive path in the
// kernel is NOT exercised by a test. Tested: the program loads and
// resolves the enum value on this kernel; resets with other reasons (an
// SO_LINGER 0 abort, connection refused, the 1.5 s drop test) give
// tcp_oom 0 while send_rsts counts them, matching TCPAbortOnMemory 0 in
// both test namespaces; the aggregation (storage and late records: in
// tcp_close the state is CLOSE before the reset), the row and the event
// are unit-tested on fixtures.
//
// Histogram bounds are galago's (the reference gives none for tcp_link):
// µs 50..1e6 for RTTs, segments 1..1024, bytes 0..16 MiB, ms 1..120000.
//
// Not measured, never exported (left unset): zero_rcv_wnd_count,
// zero_snd_wnd_count, zero_win_rx_ratio, zero_win_tx_ratio (need a per-
// segment hook: tcp:tcp_probe fires for every received segment, the cost
// this probe avoids), toa_client_ip (TOA option not parsed), and
// proc_flow_perf's sys_delay (below). On older kernels: tmout_count before
// 6.7, tcp_oom before 6.10, net_delay before 6.15 (and without a cgroup2
// mount). A hook or field missing on the running kernel is logged once
// (bpfrt.MissingHooks) naming the fields it disables, which stay unset.
//
// # proc_flow_perf (tcp_delay): net_delay measured, sys_delay not
//
// gala-gopher's tcp_delay.bpf.c samples, at most once per period per socket
// (nanoseconds, keyed tgid/role/remote ip/server port):
//
//   - sys_delay, the receive side: at a kprobe on tcp_recvmsg entry, now
//     minus skb->tstamp of the first skb in sk_receive_queue, a timestamp
//     its own tc ingress program (tc_tstamp.bpf.c) writes into every
//     packet. That is the time the oldest unread data spent between the
//     device and the application's read (stack, socket queue, scheduling).
//   - net_delay, the send side: from a kretprobe on tcp_sendmsg (write_seq
//     recorded) to the kprobe on tcp_clean_rtx_queue where snd_una passes
//     it: the time from the application's write until the peer
//     acknowledged it (send queue wait + network round trip).
//
// sys_delay has no honest equivalent here; net_delay has an exact one:
//
//   - sys_delay needs both ends, and this kernel offers neither without
//     kprobes. The arrival time: the kernel stamps received skbs only while
//     some socket asked for SO_TIMESTAMP (a global static key, realtime
//     clock), and stamping them from tc as gala-gopher does overwrites
//     skb->tstamp under every other user of it (SO_TIMESTAMP readers get
//     monotonic garbage). The read moment: tcp_recvmsg has no tracepoint;
//     sock:sock_recv_length and tcp:tcp_rcv_space_adjust fire after the
//     copy, when the skbs read are gone, and a sys_enter hook would run for
//     every syscall of the machine. sock:sk_data_ready (per segment) paired
//     with tcp_rcv_space_adjust would time only the first segment queued
//     on an empty queue, a different quantity, at per-packet cost.
//   - net_delay: BPF TX timestamping (sock_ops callbacks since 6.14, the
//     kfunc since 6.15; present on 6.18). The program on_sock_ops, attached
//     at the cgroup2 root (bpfrt.HaveCgroup2) while tcp_delay is on, sets
//     SK_BPF_CB_FLAGS=SK_BPF_CB_TX_TIMESTAMPING with bpf_setsockopt in
//     ACTIVE/PASSIVE_ESTABLISHED_CB on connections whose owner the snooper
//     filter observes. tcp_sendmsg then calls it with TSTAMP_SENDMSG_CB at
//     its end (the moment gala-gopher's kretprobe took): it calls the kfunc
//     bpf_sock_ops_enable_tx_tstamp, which marks the write's last byte
//     (write_seq - 1), and keeps that key and the time in socket storage.
//     TSTAMP_ACK_CB comes when snd_una passes the key: one DELAY record
//     (ring buffer) with ack - sendmsg, aggregated in Go per (tgid, role,
//     remote ip, server port) into a histogram in ns (bounds 10 µs..10 s).
//     One write per socket is timed at a time: writes issued while a timed
//     one is unacknowledged are not stamped (sampling, like gala-gopher's
//     once-per-period; each sample is exact for its write). A pending
//     write older than 60 s, or stamped under an earlier attachment
//     (delay_epoch), is abandoned.
//
// net_delay cost: while attached, the program runs for the few sock_ops
// callbacks of each connection setup on the machine, and on flagged
// connections once per tcp_sendmsg (an early return while a timed write is
// pending); a timed write adds the SCHED and SND_SW callbacks (early
// returns), the ACK callback and one 40-byte ring buffer record: at most
// one per connection per round trip. Detaching leaves the flag on sockets
// already flagged: their sendmsg then calls into an empty cgroup program
// list (a few instructions) until they close.
//
// net_delay limits: connections established before tcp_delay was enabled
// (or while their owner was filtered out) are not flagged and not timed;
// a snooper change affects flagging of new connections only (samples are
// still filtered by owner at the time of the ACK). Verified with a tbf
// qdisc (8 Mbit/s, burst 4096) on the client's egress in a test
// namespace: 5 writes of 65536 bytes, each after the previous was
// acknowledged: exactly 5 samples, each above the bound (65536-4096)/R =
// 61.4 ms, summing to 337.4 ms against 339.3 ms measured by the client
// itself (write return to tcpi_bytes_acked covering the write, 100 µs
// polling); the server, which wrote nothing, has no row.
//
// sys_delay stays unset; enabling tcp_delay logs that once.
//
// # Cost model
//
// Per connection end (one side of a connection), with tcp_stats alone:
//
//   - inet_sock_set_state fires five times. On a client, three do work:
//     connect() (CLOSE -> SYN_SENT: the owner, one socket storage),
//     ESTABLISHED (the SYN RTT, kept in the owner's tcp_aux word with the
//     generation: no second storage) and CLOSE (one 224-byte ring record
//     read from tcp_sock with direct BTF loads); FIN_WAIT1 and FIN_WAIT2
//     return on the state numbers, before reading the socket. On an
//     accepted socket two do work: SYN_RECV -> ESTABLISHED (the owner
//     copied from the listener index into one socket storage, and the SYN
//     RTT) and CLOSE; LISTEN -> SYN_RECV, CLOSE_WAIT and LAST_ACK return at
//     once.
//   - In Go: one close record (decode ~40 ns, aggregation ~0.5 µs), read
//     in batches: the ring wakes the reader every 1024 records (under a
//     quarter of the ring) or at its 100 ms deadline.
//   - Per sample period, not per connection: the task_file pass, which
//     visits every open file of every process once and writes the TCP
//     sockets among them; its cost follows the open files of the host, not
//     the connection rate. (iter/tcp, which it replaces, visited every
//     TIME_WAIT and request socket of each namespace and had the probe
//     switch namespaces: under churn connections/s × 60 s of TIME_WAIT /
//     sample_period visits, ~35-50 program runs per nginx connection in
//     the benchmark below; now under 1.)
//   - Nothing runs per packet or per syscall. The tcp_abnormal hooks fire
//     on resets, drops with a socket and buffer-limit hits only; they
//     create tcp_counters storage on the first such event of a socket.
//
// Measured (BenchmarkNginxWrk: nginx + wrk, a connection per request,
// both ends observed, tcp_delay on, 3 × 5 s per arm; 2026-11-27 on the
// shared 2-core development VM, figures noisy): inet_sock_set_state
// 5.0 runs per connection end, 640-690 ns per run on average (was
// 890-1040: every run did an owner lookup, ESTABLISHED created a second
// storage); probe CPU + BPF 8.2-8.8 µs per connection end (was
// 13.6-14.5). A perf profile of the program puts about half of its time in
// bpf_sk_storage_get creating the owner storage (allocation and memcg
// charge); that, the close record and its Go handling are what is left
// above the floor of an early-exit tracepoint program (~80-100 ns per run
// with kernel.bpf_stats_enabled on this VM).
//
// The floor measured (2026-11-29, PVM guest, galago-bench nginx-close,
// tcp+socket; BENCHMARKS.md "the floor of tcp+socket's hooks"): with
// every per-connection and per-packet program of tcp and socket returning
// at its first instruction, 1.7-1.9 µs of BPF and 0.88-1.05 µs of agent
// CPU per connection (both ends) and a throughput ratio of 0.94, against
// 6.2-6.3 + 2.9-3.2 µs and 0.89 with the programs' bodies.
//
// Sampling from the fd tables (galago-bench nginx-close, tcp+socket,
// four interleaved rounds under load average 17-30): the sample
// program's runs per connection went from 21-48 (iter/tcp over the
// TIME_WAIT sockets) to 0.4-2.3, 1.6-4.2 µs of BPF per connection to
// 0.07-0.37 µs, agent CPU per connection down 16-60 % (noisy). Measured and not
// kept (BENCHMARKS.md): owners in a hash keyed by socket cookie instead of
// socket storage (the state-change program 130-220 ns per run cheaper, but
// the hash's cold inserts and deletes and one more program per destroyed
// socket and probe cost as much); an iterator over the owner storage
// (iter/bpf_sk_storage_map), which this kernel refuses to load.
//
// # One owner per socket
//
// tcp and socket both need the owner of each socket (bpf/include/sockowner.h)
// and both keep it up to date from inet_sock_set_state and their fd-table
// walks. The daemon gives both probes one internal/sockowner.Shared: the
// object loaded while the other runs takes the same galago_sk_owners and
// galago_listen_owners maps (cilium/ebpf MapReplacements), so a socket has
// one owner storage element, created by whichever probe's hook runs first;
// the other finds it. Each probe keeps its per-socket state in a word of its
// own in the owner (tcp_aux: SYN RTT and generation; socket_aux: the
// connect() time), so neither disturbs the other. The maps live while
// either probe holds them (a probe restarting alone keeps the other's
// owners).
//
// Measured with BenchmarkOwnersShared (internal/probe/socket: both probes,
// loopback connections from the test process, own and shared owners
// alternating, 6 rounds of 3 000 connections per run, three runs on
// 2026-11-27 on the shared VM): socket's inet_sock_set_state program
// 0.55-1.1 µs cheaper per connection in every run (e.g. 3.4 → 2.8 µs,
// lower in each of the 6 rounds), tcp's unchanged within the noise (its
// hook still creates both owners of a connection: the client's at
// connect(), the accepted socket's at ESTABLISHED); the two programs
// together 8.4-9.0 µs → 7.0-8.4 µs per connection, median paired
// difference -1.0 µs in the last run. Not done: one inet_sock_set_state
// program for both probes (the tracepoint still dispatches two programs
// on each of a connection's ten transitions). Doing it through a tail call
// from tcp's program into socket's needs a hand-over between socket's own
// link and the tail call when either probe starts or stops alone, and no
// order of the two steps is exact: either the events between them count
// twice or not at all.
//
// # Events (report_event=1)
//
// gala-gopher's tcp_link events: entity id
// "<tgid>_<client|server>_<client ip>_<server ip>_<server port>_<family>",
// IP "CIP(<client ip>), SIP(<server ip>:<port>)", for tcp_oom above 0
// ("TCP out of memory(N)."), backlog_drops, filter_drops, sk_drops,
// lost_out and sacked_out above drops_thr, and syn_srtt_max above
// latency_thr<<3 (µs against ms, as gala-gopher).
//
// # cluster_ip_backend
//
// With 1, a client connection's row names the server its packets really
// reach: when the address it connected to was DNAT'd (a Kubernetes
// ClusterIP by kube-proxy's iptables or nftables rules), server_ip and
// server_port are the backend's (the reply tuple's source in conntrack)
// instead of the service's. The lookup is one ctnetlink GET by the
// connection's tuple in its network namespace (internal/conntrack), made
// once, when the probe first sees the connection; answers are cached per
// tuple. A connection without a conntrack entry (not NATed), or any
// lookup while conntrack is absent from the kernel, keeps its address; a
// failed lookup (its namespace gone) keeps it too and counts in the
// probe's errors. Server rows are not changed. 2 (gala-gopher's flowtracer
// map, a probe galago does not have) is served as 1, said once in the log.
// With 0 (the default) nothing is looked up.
//
// # Memory
//
// The probe's memory is bounded whatever the connection rate. Per
// connection the aggregator keeps only what the next record needs: a live
// connection, where its counters stood at the last sample and the
// period's lost_out/sacked_out maxima (a ~100-byte map entry, no
// allocation of its own); a closed one, for one to two sample periods,
// only which row it belongs to (~40 bytes): enough to ignore a snapshot
// the iterator read before the close record was handled, and to charge a
// LATE record (a reset sent after the close) to its row. Row keys are
// built once per row and period (no string formatting per record).
// Bounds (named constants in agg.go):
//
//   - maxTracked = 262144 connections remembered at once, live plus
//     recently closed. While it is full, a snapshot or close record of a
//     connection not yet remembered is dropped (a connection kept out by
//     a full table that is seen again later, when there is room, then
//     counts from its start: its earlier traffic lands in that period).
//     Closed connections stay one to two sample periods, so with the
//     default 5 s sample_period the bound is reached only above ~25k new
//     connections/s.
//   - maxRows = 16384 tcp_metric rows per report period (and as many
//     proc_flow_perf rows): a record whose row would be one more is
//     dropped (only reachable with report_cport=1 or very many peers).
//
// Every record a bound drops is counted as a lost event: the probe's
// lost-events self-metric (probe.Runtime.Lost), the same counter as ring
// buffer records lost to a full buffer. Nothing is dropped silently.
// Measured on the daemon (tcp probe, all sub-items but tcp_delay, nginx
// on loopback under wrk -c32 with "Connection: close", ~10.5k requests/s,
// i.e. ~21k observed connections/s, 3 × 10 s): RSS 35 MiB before and
// after the load, in-use heap 9 MiB; keeping each closed connection's
// full state for three samples, as before, grew RSS to 141 MiB (heap
// 59 MiB). Go CPU per request fell from ~6.8 µs to ~4.4 µs (CPU
// profile); BenchmarkAggregatorChurn: ~220 ns and no allocation per
// short connection.
//
// # Limits
//
// A close record handled in the last instants of a period (the ring
// buffer is drained at least every 100 ms) counts in the next period. The
// role of a connection that existed before the probe is inferred: server if
// its local port is listened on in its namespace, else client. Sockets
// without an owning process (closed before the probe saw who opened them)
// are not reported. A connection that becomes observed mid-life (snoopers
// changed) reports its counters since it started in its first period.
package tcp
