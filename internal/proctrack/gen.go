package proctrack

//go:generate go tool bpf2go -tags linux -target amd64,arm64 -type proctrack_event -type proctrack_event_type proctrack proctrack.bpf.c -- -I../../bpf/include
