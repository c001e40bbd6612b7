package socket

//go:generate go tool bpf2go -tags linux -target amd64,arm64 -type socket_walk_req -type socket_tcp_key -type socket_tcp_val -type socket_udp_key -type socket_udp_val -type socket_tcp_counter socket socket.bpf.c -- -I../../../bpf/include
