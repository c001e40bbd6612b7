package flamegraph

import (
	"maps"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/bpfrt/bpfspec"
)

// TestSpec checks both architectures' objects without loading them: the
// programs with their attach points, the maps, and the key layouts collect
// reads.
func TestSpec(t *testing.T) {
	bpfspec.Objects(t, _FlameBytes, []string{"flame_x86_bpfel.o", "flame_arm64_bpfel.o"}, func(t *testing.T, spec *ebpf.CollectionSpec) {
		fmaps, fprogs := bpfspec.Filter()
		progs := map[string]bpfspec.Program{
			"on_cpu":               {Type: ebpf.PerfEvent},
			"off_cpu":              {Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "sched_switch"},
			"page_fault_user":      {Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "page_fault_user"},
			"page_fault_kernel":    {Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "page_fault_kernel"},
			"malloc_enter":         {Type: ebpf.Kprobe},
			"calloc_enter":         {Type: ebpf.Kprobe},
			"realloc_enter":        {Type: ebpf.Kprobe},
			"alloc_return":         {Type: ebpf.Kprobe},
			"free_enter":           {Type: ebpf.Kprobe},
			"memalign_enter":       {Type: ebpf.Kprobe},
			"valloc_enter":         {Type: ebpf.Kprobe},
			"posix_memalign_enter": {Type: ebpf.Kprobe},
		}
		maps.Copy(progs, fprogs)
		bpfspec.Programs(t, spec, progs)
		want := map[string]bpfspec.Map{
			"stacks":        {Type: ebpf.StackTrace, KeySize: 4, ValueSize: maxStackDepth * 8, MaxEntries: 16384},
			"oncpu_counts":  {Type: ebpf.Hash, KeySize: 16, ValueSize: 8, MaxEntries: 32768},
			"offcpu_counts": {Type: ebpf.Hash, KeySize: 16, ValueSize: 8, MaxEntries: 32768},
			"offcpu_start":  {Type: ebpf.Hash, KeySize: 4, ValueSize: 24, MaxEntries: 32768},
			"mem_counts":    {Type: ebpf.Hash, KeySize: 16, ValueSize: 16, MaxEntries: 32768},
			"glibc_counts":  {Type: ebpf.Hash, KeySize: 16, ValueSize: 16, MaxEntries: 32768},
			"glibc_allocs":  {Type: ebpf.Hash, KeySize: 16, ValueSize: 16, MaxEntries: 65536},
			"glibc_pending": {Type: ebpf.Hash, KeySize: 8, ValueSize: 32, MaxEntries: 16384},
			"drops":         {Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 6},
		}
		maps.Copy(want, fmaps)
		bpfspec.Maps(t, spec, want)
		bpfspec.Variables(t, spec, map[string]bpfspec.Variable{
			"offcpu_on":         {Size: 4},
			"mem_on":            {Size: 4},
			"glibc_on":          {Size: 4},
			"page_size":         {Size: 8, Constant: true},
			"galago_filter_cfg": {Size: 4},
		})
		bpfspec.StructSize(t, spec, "flame_key", 16)
		bpfspec.StructSize(t, spec, "flame_start", 24)
		bpfspec.StructSize(t, spec, "flame_mem", 16)
		bpfspec.StructSize(t, spec, "flame_alloc_key", 16)
		bpfspec.StructSize(t, spec, "flame_alloc", 16)
		bpfspec.StructSize(t, spec, "flame_pending", 32)
	})
	var k flameFlameKey
	var s flameFlameStart
	if unsafe.Sizeof(k) != 16 || unsafe.Offsetof(k.KernStack) != 8 || unsafe.Sizeof(s) != 24 || unsafe.Offsetof(s.UserStack) != 12 {
		t.Errorf("flame_key %d bytes, kern_stack at %d; flame_start %d bytes, user_stack at %d",
			unsafe.Sizeof(k), unsafe.Offsetof(k.KernStack), unsafe.Sizeof(s), unsafe.Offsetof(s.UserStack))
	}
	if int(flameFlameDropFLAME_DROP_N) != len((&Probe{}).drops) {
		t.Errorf("%d drop reasons, the probe keeps %d", flameFlameDropFLAME_DROP_N, len((&Probe{}).drops))
	}
}
