package socket

//go:generate go tool bpf2go -tags linux -target amd64,arm64 -type socket_event -type socket_event_type socket socket.bpf.c -- -I../../../bpf/include
