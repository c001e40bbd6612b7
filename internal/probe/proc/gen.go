package proc

//go:generate go tool bpf2go -tags linux -target amd64,arm64 -type proc_cpu_val -type proc_io_val proc proc.bpf.c -- -I../../../bpf/include
