package nginx

//go:generate go tool bpf2go -tags linux -target amd64,arm64 -type nginx_ev -type nginx_ev_kind -type nginx_skip nginx nginx.bpf.c -- -I../../../bpf/include
