package flamegraph

//go:generate go tool bpf2go -tags linux -target amd64,arm64 -type flame_key -type flame_start -type flame_drop -type flame_mem -type flame_alloc_key -type flame_alloc -type flame_pending flame flamegraph.bpf.c -- -I../../../bpf/include
