// Package flowtracer is the flowtracer feature (PUT /flowtracer, no
// sub-items, no table of its own): it lets a server see the real client of
// a connection that reached it through NAT (a Kubernetes ClusterIP DNAT
// followed by the node's SNAT or masquerade), which the tcp and l7 probes
// then show as client_ip of their server rows with cluster_ip_backend=2.
//
// # How
//
// As gala-gopher's flowtracer: a client writes its own address into a TCP
// header option of its SYN, and the server reads it back. One sock_ops
// program (flowtracer.bpf.c) attached at the cgroup2 root, so for every
// socket of the machine in every network namespace: on an active open it
// reserves and writes the option on the SYN only (kind 0x55; length 8:
// port and IPv4 address, for an IPv4 connection, an IPv4-mapped AF_INET6
// socket's too; length 20: port and IPv6 address; network order) and
// stops its header callbacks once the connection is established; on
// listen() it sets TCP_SAVE_SYN on the listener, and when a passive
// connection is established it reads option 0x55 from the saved SYN and
// records (network namespace, server address and port, peer address and
// port as the server sees them) -> (client address, client port) in a
// hash of 65536 connections, which the tcp and l7 probes look up
// (Origins) when they first see a server connection. A recorded
// connection asks for the state callback: at its close the entry is
// stamped, and user space deletes it 5 minutes later (the tcp probe may
// first see a short connection in its close record). The client side of
// cluster_ip_backend=2 (the ClusterIP replaced by its backend) is served
// by conntrack over netlink, as with 1.
//
// Measured (privileged tests, CI): a pod namespace, a node namespace that
// DNATs 10.96.0.10:80 to a backend in a server namespace and masquerades,
// the server seeing the node's address: each of 9 connections (IPv4 to
// an IPv4 listener; IPv6, IPv4 and IPv4-mapped IPv6 clients to a
// dual-stack listener) maps to exactly its client's address and port, and
// the same tuple in another namespace to nothing; the tcp probe's server row names
// the node's address as client_ip with cluster_ip_backend=0 and the pod's
// with 2, with the exact 1000 bytes received.
//
// # Cost
//
// Each connect on the machine runs the program a few times around its
// SYN (8 bytes more on an IPv4 SYN, 20 on an IPv6 one) and each accepted
// connection once for the lookup and one map update, and a few state
// changes of the connections with an origin; nothing per later segment.
// Every 5 s user space walks the table for closed entries. A SYN without
// room for the option (Linux's SYN options take 20 of TCP's 40 bytes, so
// the IPv6 form fits exactly; TCP-MD5 or TCP-AO leave no room) goes
// without it, and a connection the full table cannot take has no origin:
// both counted in galago_probe_events_lost_total{probe="flowtracer"}.
//
// # Limits
//
//   - Listeners made before the probe started do not keep their SYNs: their
//     connections are not resolved (gala-gopher has the same limit). Restart
//     the server, or start flowtracer first.
//   - The client must run on a machine where galago's flowtracer runs too
//     (it writes the option). A middlebox that strips unknown TCP options
//     loses it.
//   - The table holds 65536 server connections, open or closed less than 5
//     minutes ago: a hash, not an LRU, because the kernel does not report an
//     LRU's evictions; what it cannot take is counted as lost.
//   - The option's layout is galago's; it is not read by gala-gopher's
//     flowtracer nor galago's by it.
//   - gala-gopher also records NAT translations by kprobing
//     __nf_conntrack_confirm/nf_conntrack_destroy; galago has no kprobes and
//     asks conntrack over netlink instead (internal/conntrack).
package flowtracer
