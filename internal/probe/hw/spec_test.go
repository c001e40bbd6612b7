package hw

import (
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/bpfrt/bpfspec"
)

// TestSpec checks both architectures' objects without loading them: the
// two raw tracepoint programs, the maps and the keys the Go side reads.
func TestSpec(t *testing.T) {
	bpfspec.Objects(t, _HwBytes, []string{"hw_x86_bpfel.o", "hw_arm64_bpfel.o"}, func(t *testing.T, spec *ebpf.CollectionSpec) {
		bpfspec.Programs(t, spec, map[string]bpfspec.Program{
			"hw_xmit_timeout": {Type: ebpf.RawTracepoint, AttachTo: "net_dev_xmit_timeout"},
			"hw_mc_event":     {Type: ebpf.RawTracepoint, AttachTo: "mc_event"},
		})
		bpfspec.Maps(t, spec, map[string]bpfspec.Map{
			"xmit_timeouts": {Type: ebpf.Hash, KeySize: uint32(unsafe.Sizeof(hwNicKey{})), ValueSize: 8, MaxEntries: 1024},
			"mc_errors":     {Type: ebpf.Hash, KeySize: uint32(unsafe.Sizeof(hwMcKey{})), ValueSize: 8, MaxEntries: 1024},
			"drops":         {Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 2},
		})
		bpfspec.StructSize(t, spec, "nic_key", int(unsafe.Sizeof(hwNicKey{})))
		bpfspec.StructSize(t, spec, "mc_key", int(unsafe.Sizeof(hwMcKey{})))
	})
}
