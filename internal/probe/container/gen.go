package container

//go:generate go tool bpf2go -tags linux -target amd64,arm64 -type oom_key -type oom_victim oom oom.bpf.c -- -I../../../bpf/include
