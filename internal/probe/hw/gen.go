package hw

//go:generate go tool bpf2go -tags linux -target amd64,arm64 -type nic_key -type mc_key hw hw.bpf.c -- -I../../../bpf/include
