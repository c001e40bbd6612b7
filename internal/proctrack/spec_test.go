package proctrack

import (
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/bpfrt/bpfspec"
)

// TestSpec checks the embedded object and the other architecture's without
// loading them: the programs and their hooks, the maps, and the record
// layout Go decodes.
func TestSpec(t *testing.T) {
	bpfspec.Objects(t, _ProctrackBytes, []string{"proctrack_x86_bpfel.o", "proctrack_arm64_bpfel.o"}, func(t *testing.T, spec *ebpf.CollectionSpec) {
		bpfspec.Programs(t, spec, map[string]bpfspec.Program{
			"tp_btf_fork":         {Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "sched_process_fork", License: "Dual BSD/GPL"},
			"tp_btf_exec":         {Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "sched_process_exec", License: "Dual BSD/GPL"},
			"tp_btf_exit":         {Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "sched_process_exit", License: "Dual BSD/GPL"},
			"raw_tp_fork":         {Type: ebpf.RawTracepoint, AttachType: ebpf.AttachNone, AttachTo: "sched_process_fork", License: "Dual BSD/GPL"},
			"raw_tp_exec":         {Type: ebpf.RawTracepoint, AttachType: ebpf.AttachNone, AttachTo: "sched_process_exec", License: "Dual BSD/GPL"},
			"raw_tp_exit":         {Type: ebpf.RawTracepoint, AttachType: ebpf.AttachNone, AttachTo: "sched_process_exit", License: "Dual BSD/GPL"},
			"tp_btf_cgroup_mkdir": {Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "cgroup_mkdir", License: "Dual BSD/GPL"},
			"tp_btf_cgroup_rmdir": {Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "cgroup_rmdir", License: "Dual BSD/GPL"},
			"raw_tp_cgroup_mkdir": {Type: ebpf.RawTracepoint, AttachType: ebpf.AttachNone, AttachTo: "cgroup_mkdir", License: "Dual BSD/GPL"},
			"raw_tp_cgroup_rmdir": {Type: ebpf.RawTracepoint, AttachType: ebpf.AttachNone, AttachTo: "cgroup_rmdir", License: "Dual BSD/GPL"},
		})
		bpfspec.Maps(t, spec, map[string]bpfspec.Map{
			"events":      {Type: ebpf.RingBuf, MaxEntries: 1024 * 1024},
			"scratch":     {Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: uint32(HeaderSize + CmdlineMax), MaxEntries: 1},
			"lost_events": {Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1},
		})
		bpfspec.Variables(t, spec, map[string]bpfspec.Variable{
			"galago_rb_wakeup_bytes": {Size: 8, Constant: true},
		})
		// The BTF in the object agrees with the generated Go type.
		bpfspec.StructSize(t, spec, "proctrack_event", HeaderSize+CmdlineMax)
	})

	// The record layout: a 72-byte header, offsets as in proctrack.bpf.c,
	// and up to 4096 bytes of cmdline.
	if HeaderSize != 72 || CmdlineMax != 4096 {
		t.Errorf("header %d bytes, cmdline max %d; want 72 and 4096", HeaderSize, CmdlineMax)
	}
	var r rawEvent
	offs := map[string][2]uintptr{
		"type": {unsafe.Offsetof(r.Type), 0}, "pid": {unsafe.Offsetof(r.Pid), 4},
		"tgid": {unsafe.Offsetof(r.Tgid), 8}, "ppid": {unsafe.Offsetof(r.Ppid), 12},
		"cgroup_id": {unsafe.Offsetof(r.CgroupId), 16}, "timestamp_ns": {unsafe.Offsetof(r.TimestampNs), 24},
		"start_boottime_ns": {unsafe.Offsetof(r.StartBoottimeNs), 32},
		"exit_code":         {unsafe.Offsetof(r.ExitCode), 40}, "cmdline_len": {unsafe.Offsetof(r.CmdlineLen), 44},
		"cmdline_size": {unsafe.Offsetof(r.CmdlineSize), 48}, "hierarchy_id": {unsafe.Offsetof(r.HierarchyId), 52}, "comm": {unsafe.Offsetof(r.Comm), 56},
		"cmdline": {unsafe.Offsetof(r.Cmdline), 72},
	}
	for f, o := range offs {
		if o[0] != o[1] {
			t.Errorf("offset of %s = %d, want %d", f, o[0], o[1])
		}
	}
}
