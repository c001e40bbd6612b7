package tcp

//go:generate go tool bpf2go -tags linux -target amd64,arm64 -type tcp_conn -type tcp_delay -type tcp_rec_type -type galago_sk_owner tcp tcp.bpf.c -- -I../../../bpf/include
