package container

import (
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/bpfrt/bpfspec"
)

// TestSpec checks both architectures' objects without loading them: the
// one program, its maps and the structs the Go side reads.
func TestSpec(t *testing.T) {
	bpfspec.Objects(t, _OomBytes, []string{"oom_x86_bpfel.o", "oom_arm64_bpfel.o"}, func(t *testing.T, spec *ebpf.CollectionSpec) {
		bpfspec.Programs(t, spec, map[string]bpfspec.Program{
			"mark_victim": {Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "mark_victim"},
		})
		bpfspec.Maps(t, spec, map[string]bpfspec.Map{
			"oom_kills":   {Type: ebpf.LRUHash, KeySize: 16, ValueSize: 8, MaxEntries: 4096},
			"victims":     {Type: ebpf.RingBuf, MaxEntries: 64 * 1024},
			"oom_seen":    {Type: ebpf.LRUHash, KeySize: 16, ValueSize: 1, MaxEntries: 4096},
			"lost_events": {Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1},
		})
		bpfspec.StructSize(t, spec, "oom_key", int(unsafe.Sizeof(oomOomKey{})))
		bpfspec.StructSize(t, spec, "oom_victim", int(unsafe.Sizeof(oomOomVictim{})))
	})
	var k oomOomKey
	if unsafe.Offsetof(k.CgroupId) != 8 {
		t.Errorf("cgroup_id at %d, want 8", unsafe.Offsetof(k.CgroupId))
	}
}
