package sli

//go:generate go tool bpf2go -tags linux -target amd64,arm64 -type sli_row -type sli_kind -type sli_task_rec sli sli.bpf.c -- -I../../../bpf/include
