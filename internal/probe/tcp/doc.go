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
// (below). A hook missing on the running kernel is logged once
// (bpfrt.MissingHooks) naming the fields it disables, which stay unset.
//
// # proc_flow_perf (tcp_delay): not measured
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
// Neither has an honest equivalent here that fits this probe:
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
//   - net_delay has an exact equivalent since Linux 6.14 (present on this
//     6.18 kernel): BPF TX timestamping. A cgroup sock_ops program sets
//     SK_BPF_CB_FLAGS=SK_BPF_CB_TX_TIMESTAMPING (bpf_setsockopt, in a
//     locked callback such as *_ESTABLISHED_CB), is then called with
//     BPF_SOCK_OPS_TSTAMP_SENDMSG_CB in tcp_sendmsg, requests a timestamp of
//     that write's last byte with the kfunc bpf_sock_ops_enable_tx_tstamp,
//     and gets BPF_SOCK_OPS_TSTAMP_ACK_CB when the peer acknowledges it.
//     It is not used yet because it changes the probe's cost model: a
//     sock_ops program attached at the cgroup2 root runs for every sendmsg
//     of every socket carrying the flag (gala-gopher's sampling only limits
//     how often the result is kept), and the pending sendmsg times need a
//     map keyed by (socket, tskey). It is the way to add net_delay.
//
// Until then the table is declared (its metadata is part of the surface)
// and never filled; enabling tcp_delay logs that once.
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
