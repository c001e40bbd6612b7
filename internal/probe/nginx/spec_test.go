package nginx

import (
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/bpfrt/bpfspec"
)

// TestSpec checks both architectures' objects without loading them: the
// uprobe programs, the maps and the record the Go side decodes.
func TestSpec(t *testing.T) {
	bpfspec.Objects(t, _NginxBytes, []string{"nginx_x86_bpfel.o", "nginx_arm64_bpfel.o"}, func(t *testing.T, spec *ebpf.CollectionSpec) {
		progs := map[string]bpfspec.Program{}
		for _, h := range hooks {
			progs[h.enter] = bpfspec.Program{Type: ebpf.Kprobe}
			if h.ret != "" {
				progs[h.ret] = bpfspec.Program{Type: ebpf.Kprobe}
			}
		}
		bpfspec.Programs(t, spec, progs)
		bpfspec.Maps(t, spec, map[string]bpfspec.Map{
			"nginx_ctx":   {Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 4096},
			"nginx_pc":    {Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 4096},
			"nginx_links": {Type: ebpf.Hash, KeySize: 8, ValueSize: 4, MaxEntries: 65536},
			"events":      {Type: ebpf.RingBuf, MaxEntries: 256 * 1024},
			"lost_events": {Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1},
			"skips":       {Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: uint32(nginxNginxSkipNGINX_SKIP_MAX)},
		})
		bpfspec.StructSize(t, spec, "nginx_ev", evSize)
		if int(unsafe.Sizeof(nginxNginxEv{})) != evSize {
			t.Errorf("nginx_ev is %d bytes in Go, decode reads %d", unsafe.Sizeof(nginxNginxEv{}), evSize)
		}
	})
}
