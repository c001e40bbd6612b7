// Package tcp is the tcp feature: per-connection TCP statistics aggregated
// into gala-gopher's tcp_metric table (entity tcp_link), keyed by process
// (tgid, comm), role (client/server), client and server address, server
// port, client port (only with report_cport=1) and address family
// (protocol: 2 IPv4, 10 IPv6; IPv4 on a dual-stack socket reports 2).
//
// # How
//
// The kernel already keeps most counters per socket, so the probe reads
// them instead of hooking every packet or syscall:
//
//   - every sample_period an iter/task_file walk records which process holds
//     each socket (bpf/include/sockowner.h; this also finds connections
//     opened before the probe started and the real holder of accepted
//     sockets), then iter/tcp dumps every observed full TCP socket, in each
//     network namespace that holds a socket (iter/tcp walks its opener's
//     namespace, so the probe enters each in turn);
//   - at the transition to CLOSE (tp_btf/inet_sock_set_state) the final
//     counters go to a ring buffer, so connections shorter than a period
//     count exactly;
//   - rare discrete events (resets, drops with a reason, buffer limits) are
//     counted per socket in socket-local storage, by hooks attached only
//     while tcp_abnormal (the sub-item of their fields) is on: Start and
//     Reconfigure attach and detach them, so e.g. tcp_stats alone runs just
//     inet_sock_set_state and the two iterators. Counts of a hook attached
//     mid-period start at the attachment.
//
// Counters become per-period deltas per connection (connections that
// existed at Start count from Start), summed per row; gauges of the
// connection state become one histogram observation per connection per
// sample. The owner is the process that called connect() or listen();
// accepted sockets take their listener's owner until the next task_file
// walk names the process holding them. The snooper filter (whitelist or
// blacklist of processes and cgroups) is applied in the kernel
// (bpfrt.FilterSync) on every path, and again in Go.
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
//
// Histogram bounds are galago's (the reference gives none for tcp_link):
// µs 50..1e6 for RTTs, segments 1..1024, bytes 0..16 MiB, ms 1..120000.
//
// Not measured, never exported (left unset): zero_rcv_wnd_count,
// zero_snd_wnd_count, zero_win_rx_ratio, zero_win_tx_ratio (need a per-
// segment hook: tcp:tcp_probe fires for every received segment, the cost
// this probe avoids), tmout_count (no per-socket RTO-expiry counter or
// tracepoint without kprobes), tcp_oom (tcp_check_oom has no tracepoint),
// toa_client_ip (TOA option not parsed), and the whole proc_flow_perf table
// (tcp_delay: sys_delay/net_delay need per-skb timestamps across the stack,
// kprobes in gala-gopher). A hook missing on the running kernel is logged
// once (bpfrt.MissingHooks) naming the fields it disables, which stay unset.
//
// # Events (report_event=1)
//
// gala-gopher's tcp_link events: entity id
// "<tgid>_<client|server>_<client ip>_<server ip>_<server port>_<family>",
// IP "CIP(<client ip>), SIP(<server ip>:<port>)", for backlog_drops,
// filter_drops, sk_drops, lost_out and sacked_out above drops_thr, and
// syn_srtt_max above latency_thr<<3 (µs against ms, as gala-gopher).
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
