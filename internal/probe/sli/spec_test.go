package sli

import (
	"encoding/binary"
	"maps"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/bpfrt/bpfspec"
)

// TestSpec checks both architectures' objects without loading them: the
// programs (one per hook of the hooks table, the walk and the filter's),
// the maps and the records the Go side reads.
func TestSpec(t *testing.T) {
	bpfspec.Objects(t, _SliBytes, []string{"sli_x86_bpfel.o", "sli_arm64_bpfel.o"}, func(t *testing.T, spec *ebpf.CollectionSpec) {
		filterMaps, progs := bpfspec.Filter()
		for _, h := range hooks {
			progs[h.prog] = bpfspec.Program{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: h.target}
		}
		progs["sli_take"] = bpfspec.Program{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceIter, AttachTo: "task"}
		bpfspec.Programs(t, spec, progs)
		rowSize := uint32(unsafe.Sizeof(sliSliRow{}))
		want := map[string]bpfspec.Map{
			"node_stats": {Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: rowSize, MaxEntries: 2},
			"con_stats":  {Type: ebpf.PerCPUHash, KeySize: 8, ValueSize: rowSize, MaxEntries: 4096},
			"sli_lost":   {Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1},
			"task_state": {Type: ebpf.TaskStorage, KeySize: 4, ValueSize: uint32(unsafe.Sizeof(sliTaskState{}))},
			"bio_starts": {Type: ebpf.Hash, KeySize: 8, ValueSize: 16, MaxEntries: 65536},
		}
		maps.Copy(want, filterMaps)
		bpfspec.Maps(t, spec, want)
		bpfspec.StructSize(t, spec, "sli_row", int(rowSize))
		bpfspec.StructSize(t, spec, "sli_task_rec", binary.Size(sliSliTaskRec{}))
		bpfspec.StructSize(t, spec, "galago_bio_start", int(unsafe.Sizeof(bpfrt.BioStart{})))
	})
	if n := len(sliSliRow{}.S[0].Buckets); n != len(bounds)+1 {
		t.Errorf("%d buckets in the kernel's rows, %d bounds in Go", n, len(bounds))
	}
	if int(sliSliKindSLI_KIND_MAX) != len(sliSliRow{}.S) {
		t.Errorf("SLI_KIND_MAX %d, rows hold %d kinds", sliSliKindSLI_KIND_MAX, len(sliSliRow{}.S))
	}
}
