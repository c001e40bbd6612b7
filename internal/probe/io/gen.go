package ioprobe

//go:generate go tool bpf2go -go-package ioprobe -tags linux -target amd64,arm64 -type io_err_rec -type io_lat -type io_stage -type io_counts -type io_stage_id -type io_req_flag -type io_flag -type io_drop io io.bpf.c -- -I../../../bpf/include
