// Package lvs is gala-gopher's "lvs" feature: ipvs_link, the connections
// IPVS (Linux Virtual Server) balances, per client, virtual service and
// real server.
//
// Source: the kernel's IPVS connection table, /proc/1/net/ip_vs_conn under
// the host root (the host's network namespace, also from a container),
// read every report period. IPVS's generic netlink interface (family
// "IPVS") lists virtual services and their destinations but has no command
// that lists connections, and ipvs_link is per connection, so netlink is
// not used: the connection table holds every service and destination a
// link needs. gala-gopher hooks ip_vs_conn_new and ip_vs_conn_expire with
// kprobes, which this kernel does not have.
//
// Rows: one per (protocol, client address, virtual address and port, real
// server address and port); link_count is the number of live connections
// at the end of the period (TIME_WAIT included, as gala-gopher keeps a
// connection until CLOSE). Persistence templates (protocol IP) and entries
// in state CLOSE are not links. Labels as gala-gopher prints them:
// process_name "ipvs", protocol the IP protocol number (6, 17, 132), ports
// in decimal. client_port is unset (counts aggregate over client ports,
// as gala-gopher's do); local_ip and local_port are unset: they are the
// balancer's own address in FULLNAT mode, which only out-of-tree IPVS
// patches have, and mainline's table has no such column. (gala-gopher's
// trace_lvs prints 9 values for this 11-field table, so its rows never
// reach the output; galago fills the fields it can.)
//
// What this kernel cannot measure: the development and CI kernel is built
// without IPVS (CONFIG_IP_VS off, no loadable modules): the probe then
// refuses to start with "this kernel has no IPVS (<path> absent ...)",
// which the REST PUT returns and the log shows; the parser and the
// aggregation are tested on a recorded table (IPv4, IPv6, mixed-family,
// SCTP, templates, persistence-engine data).
//
// Cost: one read and parse of the connection table per period (about
// 120 bytes per connection). Bound: 1,048,576 connections per read; lines
// beyond are counted as lost events (galago_probe_events_lost_total) and
// logged once.
package lvs
