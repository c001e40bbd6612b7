// Package nginx is galago's nginx feature (gala-gopher's nginx_probe): the
// links nginx proxies, client -> nginx (virtual address) -> upstream
// server, for HTTP (L7, is_l7 1) and TCP stream (L4, is_l7 0) proxying.
//
// Sources: uprobes on the nginx executable and on its stream module
// (ngx_stream_module.so when the stream module is dynamic, as Debian
// ships it in libnginx-mod-stream), with symbol offsets resolved from each
// file's .symtab or .dynsym when it is attached, never built in:
//
//	ngx_http_upstream_init (entry, return)      an HTTP request goes upstream
//	ngx_stream_core_run_phases (entry, return)  a stream session's phases run
//	ngx_event_connect_peer (entry, return)      nginx connects to an upstream peer, or
//	                                            takes a kept-alive connection (keepalive)
//	ngx_close_connection (entry)                a client connection closes
//
// gala-gopher probes ngx_http_upstream_handler and
// ngx_stream_proxy_init_upstream, which are static functions: Debian's
// nginx (like most distributions' builds) is stripped of .symtab, and its
// .dynsym, kept for the dynamic modules, holds only the non-static ones
// above. An upstream connection made while a thread is inside the first
// two belongs to that request's (session's) client connection. The
// client and virtual addresses are the client socket's peer and local
// address, the server the upstream socket's peer, read from the kernel's
// sockets (CO-RE) through the thread's fd table, so no nginx address
// structure is parsed. nginx structures are read only at the offsets
// every nginx since 1.0 has (request/session -> connection at 8,
// connection -> fd at 24, peer connection -> connection at 0), and the
// request's and session's signatures ("HTTP", "STRM") are checked: a
// build laid out otherwise is logged once and its links are not counted.
//
// The executables and modules are found as nginx processes appear (every
// 2 s, by the name nginx) or, with params.elf_path, that binary and the
// modules its processes map; elf_path must be an nginx executable with
// the symbols above, else the start or reconfiguration is refused and
// nothing changes. No snoopers, as in gala-gopher: every process running
// a probed file is observed.
//
// Table nginx_link: keys client_ip, client_port, virtual_ip,
// virtual_port, server_ip, server_port, is_l7; link_count is the number
// of client connections linked to that server that were open at some
// time in the period (a connection kept alive over several periods counts
// in each; a keep-alive connection whose requests went to two servers
// counts once for each). As gala-gopher's statistics key (client address
// and port), a row is one client connection, so link_count is 1 per
// upstream it went to. Clients' ports are ephemeral: a period with more
// than 1024 rows is reported per client address instead, client_port not
// set and link_count the connections of the address (one log line the
// first time), so the series stay bounded.
//
// Not observed: UDP stream proxying (the client "connection" is nginx's
// listening socket) and upstreams over unix sockets (logged once);
// retries to the next upstream after a failure and proxy_pass targets
// resolved at run time (the connect happens from an upstream or resolver
// event, outside the two functions above); HTTP/3 (QUIC) clients. HTTP/2
// clients are observed: nginx's per-stream connections carry the client
// connection's fd.
//
// Cost: one uprobe and uretprobe pair per request that goes upstream and
// per connect, one uprobe per connection close (a hash lookup); one ring
// record per link and per linked close.
//
// Bounds and losses, counted in galago_probe_events_lost_total
// {probe="nginx"}: the ring buffer (256 KiB), the BPF maps (4096 threads
// in a request, 65536 linked client connections), and at most 65536 open
// client connections followed in user space. A linked connection whose
// process died without closing it stops counting at the next report.
package nginx
