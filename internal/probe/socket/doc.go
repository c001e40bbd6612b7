// Package socket is galago's socket feature, gala-gopher's endpoint probe:
// per-process TCP endpoint statistics (endpoint_tcp: listeners and
// connecting clients) and UDP socket statistics (endpoint_udp), collected
// without kprobes or fentry, from tracepoints (tp_btf), a cgroup_skb
// ingress program, a sock_ops program at the cgroup2 root and cgroup
// post_bind programs.
//
// Sub-items: tcp_socket (endpoint_tcp) and udp_socket (endpoint_udp); each
// attaches only its own hooks, and Reconfigure attaches or detaches them.
// Snoopers are applied in the kernel (bpfrt.FilterSync) to the socket's
// owner: the process that called listen() or connect() (accepted sockets
// inherit their listener's owner; see bpf/include/sockowner.h), or for UDP
// the process that bound, sent or received; and again when a period's
// rows are reported, so that a new process counted in the kernel before
// user space classified it (pending classification, bpf/include/common.h)
// is dropped if it does not match, and an exited member's last
// connections are kept (snoop.ExitGrace). The growth of a process not
// observed waits for the next report while its fork and exec events may
// not have been handled yet (snoop.Holdback).
//
// # endpoint_tcp
//
// One row per (tgid, comm, role, client_ip, server_ip, server_port,
// protocol), as gala-gopher keys it: the client port is not a key, so all
// connections from one client IP to one server port of a process share a
// row. role is "server" for a listener's rows and "client" for connect()
// rows; protocol is the address family number (2 IPv4, 10 IPv6) as
// gala-gopher prints it. Counters are per report period (see "Cost model"
// for how they are kept).
//
//	field               source
//	listendrop          accept_overflow + SYN-time syn queue drops (syncookies off) + ACK-time
//	                    child creation failures (kfree_skb reason TCP_LISTEN_OVERFLOW on the listener)
//	accept_overflow     SYN arriving at a listener whose accept queue is full (cgroup_skb ingress,
//	                    tcp_conn_request's own check, retransmitted SYNs of a pending request
//	                    excluded with bpf_skc_lookup_tcp) + ACK-time overflow (kfree_skb reason
//	                    TCP_LISTEN_OVERFLOW with the accept queue full). Equals TcpExtListenOverflows.
//	syn_overflow        SYN arriving at a listener whose SYN queue is over sk_max_ack_backlog
//	                    (whether the kernel then drops it or answers with a cookie)
//	passive_open        accepted children SYN_RECV -> ESTABLISHED (inet_sock_set_state)
//	passive_open_failed accepted children SYN_RECV -> anything else
//	retran_synacks      tcp:tcp_retransmit_synack of the listener
//	retran_syn          tcp:tcp_retransmit_skb of a SYN_SENT socket, sent successfully
//	req_drops           NOT MEASURED. gala-gopher counts inet_csk_reqsk_queue_drop_and_put (kprobe)
//	                    calls for a request whose num_timeout reached the SYN/ACK retry limit: a
//	                    request that expired in reqsk_timer_handler. On 6.18 without kprobes that
//	                    expiry leaves no trace: the timer bumps TCPTimeouts (no tracepoint) and
//	                    frees the request without one; tcp_retransmit_synack fires only for sent
//	                    retransmissions, so the last one cannot tell whether an ACK will follow;
//	                    request sockets never pass inet_sock_set_state; no packet is freed
//	                    (kfree_skb); sock_ops has no callback on request sockets after SYN time.
//	                    timer:timer_expire_entry on reqsk_timer_handler would only predict the
//	                    drop by re-running syn_ack_recalc (racing the ACK and queue lengths), and
//	                    kmem_cache_free of request_sock_TCP runs a program on every slab free of
//	                    the kernel. The field is left unset and its event never fires.
//	active_open         SYN_SENT -> ESTABLISHED
//	active_open_failed  SYN_SENT -> CLOSE (refused, timed out, reset, closed while connecting)
//	syn_sent            CLOSE -> SYN_SENT, i.e. connect(); equals TcpActiveOpens
//	syn_drop            a SYN of a connecting socket freed by the local stack on transmit
//	                    (kfree_skb without rx_sk: no neighbour, qdisc or netfilter drop)
//	synack_sent         SYN/ACK segments a listener sends, retransmissions included, as
//	                    gala-gopher counts them: the sock_ops RWND_INIT callback that
//	                    tcp_conn_request makes on each request it answers, right before sending
//	                    the SYN/ACK, plus tcp:tcp_retransmit_synack (sent retransmissions). The
//	                    listener's owner is found by (netns, port), as for accepted children
//	estab_latency       client: connect() to ESTABLISHED; server: the SYN/ACK to ACK time, the
//	                    kernel's first RTT sample of the child (srtt_us, µs resolution), absent
//	                    when the SYN/ACK was retransmitted (Karn's rule: no sample); a client socket
//	                    already connecting when the probe started has no sample either. In ns,
//	                    buckets 3, 10, 50, 100, 500, 1000, 10000 ms as gala-gopher, bucketed in the
//	                    kernel; sum exact; max is the period's largest sample (see Limits).
//	toa_client_ip       NOT MEASURED (TOA is an out-of-tree kernel module); unset
//	multi               NOT MEASURED (gala-gopher's pgid folding of pre-forked servers); unset
//
// Events (report_event=1), at the end of a period with a nonzero value:
// listendrop, accept_overflow, syn_overflow and retran_synacks with
// gala-gopher's messages, entity id <tgid>_<client>_<server>_<port>_<role>
// (role 0 client, 1 server) and IP "Client %s, Server %s:%u".
//
// # endpoint_udp
//
// One row per (tgid, local_ip, local_port, remote_ip, remote_port,
// protocol); remote_ip and remote_port are unset for unconnected sockets
// (the destination of each sendto is not seen). Values are bytes per
// period, as the meta describes them:
//
//	udp_rcv_drops  payload bytes of datagrams the receive queue refused
//	               (udp:udp_fail_queue_rcv_skb; one per Udp InErrors from the queue)
//	bind_sends     bytes sendmsg() passed to the socket (sock:sock_send_length)
//	bind_rcvs      bytes recvmsg() returned, MSG_PEEK excluded (sock:sock_recv_length)
//
// # Cost model
//
// Everything is aggregated in the kernel. The hooks add to per-endpoint
// counters in two BPF hash maps, tcp_endpoints (key struct socket_tcp_key:
// tgid, comm, role, client and server IP, server port, family; value the
// twelve counters, the estab_latency buckets, its sum and a two-slot
// per-period maximum) and udp_endpoints (tgid, local and remote IP and
// port, family; the three byte counts), with atomic adds. Counters only
// grow: user space never writes them. At the end of each report period it
// advances the socket_period variable, reads both maps (BPF_MAP_LOOKUP_BATCH,
// 512 endpoints a call) and reports each endpoint's growth since its
// previous read, so no increment is lost to a read/reset race. Per
// connection the cost is a few hash lookups and atomic adds in the kernel,
// nothing in user space; per period, one batch read of the live endpoints.
//
// tp_btf/inet_sock_set_state fires several times per connection; it leaves
// before touching any map on the transitions it does not count
// (ESTABLISHED and later, and the child's LISTEN -> SYN_RECV). An accepted
// child gets no socket storage: at the end of its handshake the owner is
// looked up in the listener index (galago_listen_owners). A client costs
// one socket storage (the owner, needed by the softirq hooks; the connect()
// time is kept in its socket_aux word). When the tcp probe runs too, the
// two share one owner storage (internal/sockowner): the client's owner is
// created once, by whichever probe's hook runs first, and this program
// finds it (BenchmarkOwnersShared: this program 0.55-1.1 µs cheaper per
// connection, e.g. 3.4 → 2.8 µs, in each of three runs of 6 interleaved
// rounds; see "One owner per socket" in the tcp package documentation).
// The endpoint key's addresses are direct loads from the BTF socket
// pointer, not bpf_probe_read_kernel calls (13 % of this program's time in
// a perf profile before): with both, ~2.0 µs per connection, was ~3.4. Owners in a hash keyed by socket cookie
// instead were measured (BENCHMARKS.md, network section): this program
// cost the same, and deleting the owners at tp_btf/tcp_destroy_sock added
// ~0.5 µs per destroyed socket.
//
// Per connection (both ends on this host), the hooks that run and what
// they do:
//
//	inet_sock_set_state  10 runs; 3 count (connect, the client's and the
//	                     child's ESTABLISHED: owner, a hash lookup, atomic
//	                     adds), 7 return on the state numbers
//	sock_ops synack_sent ~9 runs (every always-on sock_ops callback of the
//	                     connection's set-up); 1 counts (RWND_INIT of the
//	                     request), the others return on the op number
//	cgroup_skb ingress   every packet; a SYN to a listener is inspected (the
//	                     tcp_conn_request checks), any other packet returns
//	                     on the socket state, the first load
//	sock_send_length,    every send and receive of every socket (UDP bytes
//	sock_recv_length     have no per-socket kernel counter and no UDP-only
//	                     hook); a TCP socket returns on sk_protocol
//
// On a keep-alive TCP connection only early returns run: the ingress
// program per packet received, and the two UDP programs per send and
// receive. With kernel.bpf_stats_enabled each such run measures ~80-120
// ns on the 2-core development VM (dispatch and the clock reads of the
// stats themselves; the programs' own work is a few loads), ~0.5 µs per
// nginx keep-alive or redis request in all (was ~0.85 µs with the
// cgroup_skb egress program that counted SYN/ACKs on every packet; see
// BENCHMARKS.md). Empty programs on the same three hooks measure the same
// within 5 ns a run (2026-11-29, PVM guest: 0.39-0.44 µs of BPF per
// request empty, 0.43-0.48 as built; BENCHMARKS.md "the floor of
// tcp+socket's hooks"), so that figure is the hooks' dispatch, not the
// programs' work. A SYN to a listener costs the ingress program a few
// loads unless a queue is full: the packet is parsed and its connection
// looked up only then. SYN-time queue overflows
// have no per-event hook in 6.18 (tcp_conn_request drops the SYN with
// consume_skb: no drop reason, no tracepoint; only the listener's sk_drops
// and the namespace's MIB counters move, which name no client), so the
// ingress program stays. Not tried: sk_lookup programs, which run per
// listener lookup (per SYN) but attach per network namespace.
//
// The ring buffer ("events", a fixed 64 KiB: ringbuf_map_size does not
// apply) carries only what needs user space: owner walk requests
// (struct socket_walk_req), once per unowned socket, since only user space
// can run the iterator.
//
// # Limits
//
// Owners of sockets opened before the probe started (every listener on a
// real node) come from an iter/task_file walk over all tasks' fd tables
// (galago_owner_from_file in bpf/include/sockowner.h; sk storage lives on
// the socket, so one walk covers every network namespace). It runs at Start
// once the hooks are attached, after Reconfigure enables a sub-item, and on
// demand: a hook that meets a listener or UDP socket without owner asks
// once per socket (ring record struct socket_walk_req; walks at least a second
// apart), and the event that revealed it is not attributed. A socket no
// process holds (a kernel tunnel's UDP socket) stays unowned and
// unreported. Without iter/task_file support only sockets opened (or, for
// UDP, used) while the probe runs are reported; the missing hook is logged
// once.
//
// Rows follow gala-gopher: an endpoint row (keyed by client IP) appears with
// its first event and is then reported every period, with measured zeros
// when idle, until ten minutes without events. A listener that never had a
// client has no row (there is no client_ip to key it by), as in
// gala-gopher.
//
// SYN-time queue checks are evaluated by the ingress program just before
// tcp_conn_request runs; a racing accept() between the two can shift one
// count. IPv6 SYNs with extension headers are not inspected.
//
// Each endpoint map holds at most 16384 endpoints (no preallocation: kernel
// memory follows the live endpoints). An increment for a new endpoint of a
// full map is dropped and counted in the per-CPU agg_lost map; its growth
// is reported through Runtime.Lost, as are walk requests lost to a full
// ring buffer (the socket then asks again at its next event).
//
// Endpoints without growth for ten minutes are deleted with
// BPF_MAP_LOOKUP_AND_DELETE_ELEM, which returns the final value
// atomically: growth that raced the decision is still reported, and
// counting restarts in the element the next increment inserts. Only a hook
// already holding the element when it is deleted (a window of its own run
// time, well under a microsecond) loses its increment; the element itself
// is freed after an RCU grace period, never reused under it. Disabling a
// sub-item deletes its endpoints, so enabling it again starts from zero.
//
// The estab_latency maximum is kept per period in slot socket_period&1
// without atomics: two CPUs completing handshakes of one endpoint within
// the same few nanoseconds may keep the smaller value, and a handshake that
// completes while user space reads the map is counted in the period that
// ends but may carry its maximum into the next one.
package socket
