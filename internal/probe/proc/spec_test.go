package proc

import (
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/bpfrt/bpfspec"
)

// TestSpec checks both architectures' objects without loading them: the
// sched_switch and bio programs, the bounded maps and the row layout.
func TestSpec(t *testing.T) {
	bpfspec.Objects(t, _ProcBytes, []string{"proc_x86_bpfel.o", "proc_arm64_bpfel.o"}, func(t *testing.T, spec *ebpf.CollectionSpec) {
		fmaps, fprogs := bpfspec.Filter()
		fprogs["proc_sched_switch"] = bpfspec.Program{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "sched_switch"}
		fprogs["proc_bio_queue"] = bpfspec.Program{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "block_bio_queue"}
		fprogs["proc_bio_complete"] = bpfspec.Program{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "block_bio_complete"}
		fprogs["proc_rq_complete"] = bpfspec.Program{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "block_rq_complete"}
		fprogs["proc_page_add"] = bpfspec.Program{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "mm_filemap_add_to_page_cache"}
		fprogs["proc_page_dirty"] = bpfspec.Program{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "writeback_dirty_folio"}
		fprogs["proc_buffer_dirty"] = bpfspec.Program{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "block_dirty_buffer"}
		for _, name := range []string{"proc_gai_enter", "proc_ghbn_enter"} {
			fprogs[name] = bpfspec.Program{Type: ebpf.Kprobe}
		}
		fprogs["proc_dns_return"] = bpfspec.Program{Type: ebpf.Kprobe}
		bpfspec.Programs(t, spec, fprogs)
		fmaps["cpu_stats"] = bpfspec.Map{Type: ebpf.Hash, KeySize: 4, ValueSize: 16, MaxEntries: 16384}
		fmaps["cpu_lost"] = bpfspec.Map{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1}
		fmaps["off_starts"] = bpfspec.Map{Type: ebpf.TaskStorage, KeySize: 4, ValueSize: 16}
		fmaps["io_stats"] = bpfspec.Map{Type: ebpf.Hash, KeySize: 4, ValueSize: 80, MaxEntries: 16384}
		fmaps["bio_starts"] = bpfspec.Map{Type: ebpf.Hash, KeySize: 8, ValueSize: 16, MaxEntries: 65536}
		fmaps["dns_calls"] = bpfspec.Map{Type: ebpf.LRUHash, KeySize: 8, ValueSize: 24, MaxEntries: 16384}
		fmaps["dns_stats"] = bpfspec.Map{Type: ebpf.Hash, KeySize: 72, ValueSize: 32, MaxEntries: 16384}
		bpfspec.Maps(t, spec, fmaps)
		bpfspec.Variables(t, spec, map[string]bpfspec.Variable{"galago_filter_cfg": {Size: 4}, "io_on": {Size: 4}, "page_on": {Size: 4}})
		bpfspec.StructSize(t, spec, "proc_cpu_val", 16)
		bpfspec.StructSize(t, spec, "proc_io_val", 80)
		bpfspec.StructSize(t, spec, "galago_bio_start", int(unsafe.Sizeof(bpfrt.BioStart{})))
	})
}
