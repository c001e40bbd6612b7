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
// socket of the machine in every network namespace: on an IPv4 active open
// it reserves and writes an 8-byte option (kind 0x55, length 8, port and
// address in network order) on the SYN only, and stops its header
// callbacks once the connection is established; on listen() it sets
// TCP_SAVE_SYN on the listener, and when a passive connection is
// established it reads option 0x55 from the saved SYN and records
// (server address, server port, peer address, peer port as the server sees
// them) -> (client address, client port) in an LRU hash of 65536
// connections, which the tcp and l7 probes look up (Origins) when they
// first see a server connection. The client side of cluster_ip_backend=2
// (the ClusterIP replaced by its backend) is served by conntrack over
// netlink, as with 1.
//
// Measured (privileged tests, CI): a pod namespace, a node namespace that
// DNATs 10.96.0.10:80 to a backend in a server namespace and masquerades,
// the server seeing the node's address: each of 5 connections maps to
// exactly its client's address and port; the tcp probe's server row names
// the node's address as client_ip with cluster_ip_backend=0 and the pod's
// with 2, with the exact 1000 bytes received.
//
// # Cost
//
// Each IPv4 connect on the machine runs the program a few times around its
// SYN (8 bytes more on the SYN) and each accepted connection once for the
// lookup and one map update; nothing per later segment. A SYN without room
// for the option (a full TCP header) goes without it, counted in
// galago_probe_events_lost_total{probe="flowtracer"}.
//
// # Limits
//
//   - Listeners made before the probe started do not keep their SYNs: their
//     connections are not resolved (gala-gopher has the same limit). Restart
//     the server, or start flowtracer first.
//   - IPv4 only; the client must run on a machine where galago's flowtracer
//     runs too (it writes the option). A middlebox that strips unknown TCP
//     options loses it.
//   - The table holds the 65536 most recent server connections (LRU): an
//     older one still open loses its origin when evicted, and evictions are
//     not counted (the kernel does not report them).
//   - The map is keyed by the 4-tuple without the network namespace: two
//     namespaces holding the same 4-tuple at once would share an entry.
//   - The option's layout is galago's; it is not read by gala-gopher's
//     flowtracer nor galago's by it.
//   - gala-gopher also records NAT translations by kprobing
//     __nf_conntrack_confirm/nf_conntrack_destroy; galago has no kprobes and
//     asks conntrack over netlink instead (internal/conntrack).
package flowtracer
