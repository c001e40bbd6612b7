// Package bpfrt is the run time every BPF probe shares: the ring buffer
// reader with loss accounting and batched wake-ups, BPF run-time statistics
// as Prometheus metrics, feature probing for hooks (with one clear log line
// when a hook is missing), the in-kernel snooper filter kept in sync with
// a probe's snoop.Targets, and the bookkeeping of attached links (Links,
// by program, for hooks that follow sub-items; CloseLinks).
//
// Its BPF half is bpf/include/common.h: the map and variable names there
// (lost_events, galago_rb_wakeup_bytes, filter_mode, filter_tgids,
// filter_cgroups) are the interface between the two. Loaders pass their
// spec through AllocOnInsert(spec, FilterMaps...) so the filter maps cost
// what they hold rather than their preallocated maximum (3.7 MiB per
// object); feature probing keeps its answers, not the parsed kernel BTF.
//
// Limits: little-endian hosts only (amd64, arm64), as the generated objects
// are; one ring buffer and one loss counter per BPF object.
package bpfrt
