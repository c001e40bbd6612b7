package proc

//go:generate go tool bpf2go -tags linux -target amd64,arm64 -type proc_cpu_val -type proc_io_val -type proc_dns_key -type proc_dns_val proc proc.bpf.c -- -I../../../bpf/include
