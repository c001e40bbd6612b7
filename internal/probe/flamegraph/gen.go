package flamegraph

//go:generate go tool bpf2go -tags linux -target amd64,arm64 -type flame_key -type flame_start -type flame_drop flame flamegraph.bpf.c -- -I../../../bpf/include
