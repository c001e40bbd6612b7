package ioprobe

//go:generate go tool bpf2go -go-package ioprobe -tags linux -target amd64,arm64 -type io_rec -type io_counts -type io_rec_kind -type io_req_flag -type io_flag -type io_drop io io.bpf.c -- -I../../../bpf/include
